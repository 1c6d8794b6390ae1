//! Passwords and ACL users against a real `redis-server`: a user whose ACL
//! rules allow only the lock key and channel patterns can use every lock
//! kind; a wrong or missing password, or a key outside the rules, is
//! `Error::Auth` at once, not a retry loop or a hang.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::{unique, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config, Error};

/// A private server with an ACL user `locker` that may touch only keys and
/// channels of locks named `lk:*` (and Redisson's derived names), and a
/// password on the default user.
async fn server_with_acl() -> (Server, fred::clients::Client) {
    let server = Server::private();
    let raw = server.raw().await;
    common::acl_locker(&raw, "locker", "locker-pw").await;
    // New connections of the default user now need a password; this one
    // stays authenticated.
    common::config_set(&raw, "requirepass", "admin-pw").await;
    (server, raw)
}

fn url(server: &Server, auth: &str) -> String {
    format!("redis://{auth}@127.0.0.1:{}", server.port)
}

#[tokio::test]
async fn an_acl_user_limited_to_lock_keys_uses_every_kind() {
    let (server, raw) = server_with_acl().await;
    let client = Client::connect_with(Config::from_url(&url(&server, "locker:locker-pw")).unwrap())
        .await
        .unwrap();
    let name = format!("lk:{}", unique("acl"));
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    assert_eq!(
        raw.hget::<i64, _, _>(&name, guard.field()).await.unwrap(),
        1
    );
    guard.unlock().await.unwrap();
    let fair = client.fair_lock(&name).unwrap();
    let held = fair.lock().await.unwrap();
    let waiter = {
        let fair = fair.clone();
        tokio::spawn(async move { fair.try_lock_for(Duration::from_secs(5)).await })
    };
    let queue = format!("redisson_lock_queue:{{{name}}}");
    common::eventually("the waiter queued", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 1
    })
    .await;
    held.unlock().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .expect("woken by publish on an allowed channel");
    next.unlock().await.unwrap();
    let rw = client.read_write_lock(&name).unwrap();
    rw.read().lock().await.unwrap().unlock().await.unwrap();
    rw.write().lock().await.unwrap().unlock().await.unwrap();
    let fenced = client.fenced_lock(&name).unwrap().lock().await.unwrap();
    assert!(fenced.fencing_token() >= 1);
    fenced.unlock().await.unwrap();
    let spin = client.spin_lock(&name).unwrap();
    spin.lock().await.unwrap().unlock().await.unwrap();

    // A lock outside the user's key patterns: refused, typed, nothing written.
    let other = unique("elsewhere");
    let err = client.lock(&other).unwrap().try_lock().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(!err.is_transient());
    assert_eq!(raw.exists::<i64, _>(&other).await.unwrap(), 0);
}

#[tokio::test]
async fn wrong_or_missing_passwords_are_refused_at_once() {
    let (server, _raw) = server_with_acl().await;
    for auth in ["locker:wrong-pw", ":wrong-pw", "nobody:pw"] {
        let started = Instant::now();
        let config = Config::from_url(&url(&server, auth))
            .unwrap()
            .timeout(Duration::from_secs(2));
        let err = Client::connect_with(config).await.unwrap_err();
        assert!(matches!(err, Error::Auth(_)), "{auth}: {err:?}");
        assert!(!err.is_transient());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{auth}: refused after {:?}, not at once",
            started.elapsed()
        );
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("wrong-pw"), "{shown}");
    }
    // No password at all where one is required.
    let config = Config::from_url(&format!("redis://127.0.0.1:{}", server.port))
        .unwrap()
        .timeout(Duration::from_secs(2));
    let err = Client::connect_with(config).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
}

/// Add the ACL user `name` with `password` and these extra `rules`.
async fn add_user(raw: &fred::clients::Client, name: &str, password: &str, rules: &[&str]) {
    let mut args = vec!["SETUSER", name, "on"];
    let password = format!(">{password}");
    args.push(&password);
    args.extend_from_slice(rules);
    let _: Value = raw.custom(fred::cmd!("ACL"), args).await.unwrap();
}

/// A password with characters that must be percent-encoded in the URL.
#[tokio::test]
async fn a_percent_encoded_password_authenticates() {
    let (server, raw) = server_with_acl().await;
    add_user(&raw, "encoded", "p@ss:w/rd %+", &["~*", "&*", "+@all"]).await;
    let client = Client::connect(&url(&server, "encoded:p%40ss%3Aw%2Frd%20%25%2B"))
        .await
        .unwrap();
    let guard = client.lock(&unique("enc")).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
    // The default user, by password only.
    let client = Client::connect(&url(&server, ":admin-pw")).await.unwrap();
    let guard = client.lock(&unique("admin")).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
}

/// A user that may touch the lock keys but not run scripts, or not listen
/// on the lock channels: each refusal is `Error::Auth` when it happens, never
/// a retry loop or a wait that hangs.
#[tokio::test]
async fn acl_refusals_of_scripts_and_channels_are_typed_at_once() {
    let (server, raw) = server_with_acl().await;
    add_user(
        &raw,
        "noscripts",
        "pw1",
        &["~lk:*", "&*", "+@all", "-@scripting"],
    )
    .await;
    add_user(
        &raw,
        "nochannels",
        "pw2",
        &["~lk:*", "~redisson_*", "~{lk:*", "resetchannels", "+@all"],
    )
    .await;
    let holder = Client::connect(&url(&server, "locker:locker-pw"))
        .await
        .unwrap();
    let name = format!("lk:{}", unique("acl-refusal"));

    let client = Client::connect(&url(&server, "noscripts:pw1"))
        .await
        .unwrap();
    let started = Instant::now();
    let err = client.lock(&name).unwrap().try_lock().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(1));

    // Free: acquired (the lock script publishes nothing); the unlock
    // script's PUBLISH is refused. Held: the wait's SUBSCRIBE is refused.
    let client = Client::connect(&url(&server, "nochannels:pw2"))
        .await
        .unwrap();
    let guard = client
        .lock(&name)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .unwrap();
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    let name = format!("lk:{}", unique("acl-wait"));
    let lock = client.lock(&name).unwrap();
    let held = holder.lock(&name).unwrap().lock().await.unwrap();
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        lock.try_lock_for(Duration::from_secs(5)),
    )
    .await
    .expect("the wait returns");
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused after {:?}",
        started.elapsed()
    );
    held.unlock().await.unwrap();
}

/// The blocking client reports a wrong password the same way.
#[cfg(feature = "blocking")]
#[test]
fn the_blocking_client_refuses_a_wrong_password() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (server, _raw) = runtime.block_on(server_with_acl());
    let started = Instant::now();
    let err = redisson_lock::blocking::BlockingClient::connect(&url(&server, "locker:bad-pw"))
        .unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!format!("{err} {err:?}").contains("bad-pw"));
    drop(server);
    drop(runtime);
}
