//! A missing permission is refused before anything is written (issue 34,
//! item 5; docs/PROTOCOL.md §9.5): an ACL user without one command the
//! scripts run is refused at connect, naming it; one whose key or channel
//! rules leave out a key or channel a call needs gets `Error::Auth` from
//! that call with the lock's state untouched. Each permission is removed
//! alone, on whichever server the suite runs against (Redis 6.2, 7, Valkey).
use std::collections::HashMap;

use crate::common::{unique, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config, Error};

/// Add user `name` (password `pw`) with every command, key and channel,
/// then `rules` on top.
async fn user(raw: &fred::clients::Client, name: &str, rules: &[&str]) -> String {
    let mut args = vec!["SETUSER", name, "reset", "on", ">pw"];
    args.extend_from_slice(rules);
    let _: Value = raw.custom(fred::cmd!("ACL"), args).await.unwrap();
    format!("redis://{name}:pw@127.0.0.1")
}

async fn connect(server: &Server, url: &str) -> redisson_lock::Result<Client> {
    Client::connect_with(Config::from_url(&format!("{url}:{}", server.port)).unwrap()).await
}

/// Whether the server's scripts can check the ACL themselves (Redis 7+,
/// Valkey: `redis.acl_check_cmd`); Redis 6.2 cannot check a channel rule.
async fn checks_channels(raw: &fred::clients::Client) -> bool {
    let v: i64 = raw
        .eval(
            "return redis.acl_check_cmd and 1 or 0",
            Vec::<String>::new(),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    v == 1
}

/// Every command the scripts run that writes, and PUBLISH: without any one
/// of them, connecting is refused with `Error::Auth` naming it, and the
/// probe leaves no key behind.
#[tokio::test]
async fn a_user_without_a_command_the_scripts_run_is_refused_at_connect() {
    let server = Server::private();
    let raw = server.raw().await;
    for command in [
        "publish", "set", "del", "pexpire", "hincrby", "hset", "hdel", "incrby", "decrby", "incr",
        "decr", "zadd", "zincrby", "zrem", "rpush", "lpop", "lrem", "pttl", "hexists",
    ] {
        let minus = format!("-{command}");
        let url = user(&raw, "short", &["~*", "&*", "+@all", &minus]).await;
        let err = match connect(&server, &url).await {
            Err(e) => e,
            Ok(_) => panic!("connected without {command}"),
        };
        assert!(matches!(err, Error::Auth(_)), "without {command}: {err:?}");
        assert!(
            err.to_string().contains(&command.to_uppercase()),
            "without {command}: {err}"
        );
        assert!(!err.is_transient());
    }
    let left = keys(&raw, "redisson_lock_acl_probe*").await;
    assert!(left.is_empty(), "{left:?}");
    // With every command: connected.
    let url = user(&raw, "full", &["~*", "&*", "+@all"]).await;
    connect(&server, &url).await.unwrap();
}

/// The keys matching `pattern`, sorted.
async fn keys(raw: &fred::clients::Client, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec![pattern]).await.unwrap();
    keys.sort();
    keys
}

/// The lock's hash and the keys of its name, to compare before and
/// after a refused call.
async fn state(raw: &fred::clients::Client, name: &str) -> (HashMap<String, String>, Vec<String>) {
    let hash: HashMap<String, String> = raw.hgetall(name).await.unwrap();
    (hash, keys(raw, &format!("*{name}*")).await)
}

/// A user whose channel rules leave out the lock's channel: the unlock,
/// which publishes, is refused before its `DEL` where the server can tell
/// (Redis 7, Valkey): the hold stays, nothing is published, and the lock
/// expires by its lease. Redis 6.2 cannot check a channel rule inside a
/// script: the error is typed there too, after the `DEL`
/// (docs/PROTOCOL.md §9.5).
#[tokio::test]
async fn an_unlock_that_may_not_publish_writes_nothing() {
    let server = Server::private();
    let raw = server.raw().await;
    let url = user(
        &raw,
        "nochannel",
        &["~*", "resetchannels", "&elsewhere:*", "+@all"],
    )
    .await;
    let client = connect(&server, &url).await.unwrap();
    let name = unique("acl-publish");
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    let before = state(&raw, &name).await;
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    if checks_channels(&raw).await {
        assert!(err.to_string().contains("PUBLISH"), "{err}");
        assert_eq!(state(&raw, &name).await, before, "nothing written");
        assert!(raw.pttl::<i64, _>(&name).await.unwrap() > 0);
    }
}

/// A user whose key rules allow the lock's hash but not the other keys a
/// call writes: the read lock's timeout key (named at run time), the
/// unlock's latch key, the fair lock's queue. Each call is refused with
/// `Error::Auth`, and nothing of the lock is written.
#[tokio::test]
async fn a_call_that_may_not_touch_a_key_writes_nothing() {
    let server = Server::private();
    let raw = server.raw().await;
    // Lock names under `lk:`; channels all allowed.
    let url = user(
        &raw,
        "hashonly",
        &["~lk:*", "~redisson_lock__channel*", "&*", "+@all"],
    )
    .await;
    let client = connect(&server, &url).await.unwrap();
    let name = format!("lk:{}", unique("acl-keys"));

    let err = client
        .read_write_lock(&name)
        .unwrap()
        .read()
        .try_lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "read lock: {err:?}");
    assert_eq!(state(&raw, &name).await, (HashMap::new(), Vec::new()));

    let err = client
        .fair_lock(&name)
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "fair lock: {err:?}");
    assert_eq!(state(&raw, &name).await, (HashMap::new(), Vec::new()));

    // The hash is allowed: the lock is taken; its unlock needs the latch
    // key, which is not.
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    let before = state(&raw, &name).await;
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "unlock: {err:?}");
    assert_eq!(state(&raw, &name).await, before, "nothing written");
}

/// A user whose ACL refuses `CLIENT` connects and locks as before: client
/// tracking (docs/PROTOCOL.md §2.10) is off, and the lock's channel and the
/// renewal still tell a loss.
#[tokio::test]
async fn a_user_without_client_tracking_still_locks() {
    let server = Server::private();
    let raw = server.raw().await;
    let url = user(&raw, "notrack", &["~*", "&*", "+@all", "-client"]).await;
    let client = connect(&server, &url).await.unwrap();
    let lock = client.lock(&unique("acl-notrack")).unwrap();
    let guard = lock.lock().await.unwrap();
    let list: String = raw
        .custom(fred::cmd!("CLIENT"), vec!["LIST"])
        .await
        .unwrap();
    assert!(
        !list.lines().any(|l| l.contains("flags=t")),
        "nobody tracks: {list}"
    );
    guard.unlock().await.unwrap();
    assert!(!raw.exists::<bool, _>(lock.name()).await.unwrap());
}
