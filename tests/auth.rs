//! Passwords and ACL users against a real `redis-server`: a user whose ACL
//! rules allow only the lock key and channel patterns can use every lock
//! kind; a wrong or missing password, or a key outside the rules, is
//! `Error::Auth` at once, not a retry loop or a hang.
mod common;

use std::time::{Duration, Instant};

use common::{unique, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config, Error};

/// A private server with an ACL user `locker` that may touch only keys and
/// channels of locks named `lk:*` (and Redisson's derived names), and a
/// password on the default user.
async fn server_with_acl() -> (Server, fred::clients::Client) {
    let server = Server::private();
    let raw = server.raw().await;
    let rules = [
        "SETUSER",
        "locker",
        "on",
        ">locker-pw",
        "resetkeys",
        "~lk:*",
        "~redisson_*",
        "~{lk:*",
        "resetchannels",
        "&redisson_*",
        "+@all",
    ];
    let _: Value = raw.custom(fred::cmd!("ACL"), rules.to_vec()).await.unwrap();
    // New connections of the default user now need a password; this one
    // stays authenticated.
    let _: Value = raw
        .custom(fred::cmd!("CONFIG"), vec!["SET", "requirepass", "admin-pw"])
        .await
        .unwrap();
    (server, raw)
}

fn url(server: &Server, auth: &str) -> String {
    format!("redis://{auth}@127.0.0.1:{}", server.port)
}

#[tokio::test]
async fn an_acl_user_limited_to_lock_keys_uses_every_kind() {
    let (server, raw) = server_with_acl().await;
    let client = Client::connect(Config::from_url(&url(&server, "locker:locker-pw")).unwrap())
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
        tokio::spawn(async move { fair.try_lock_for(Duration::from_secs(5), None).await })
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
    client
        .spin_lock(&name)
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

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
        let err = Client::connect(config).await.unwrap_err();
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
    let err = Client::connect(config).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
}
