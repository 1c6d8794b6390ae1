//! The read-write lock's scripts.

use crate::bench::Bench;
use crate::locks::{force_unlocks, unlocks};
use crate::{latch, s};

/// The read-write lock's keys for owner c:1: N, channel, key prefix, the
/// owner's timeout prefix.
pub fn rw_keys(name: &str) -> [String; 4] {
    [
        name.to_string(),
        format!("redisson_rwlock:{{{name}}}"),
        format!("{{{name}}}"),
        format!("{{{name}}}:c:1:rwlock_timeout"),
    ]
}

#[tokio::test]
async fn rw_read_lock() {
    let mut t = Bench::new("read-lock").await;
    let [n, _, _, timeouts] = rw_keys(&t.name);
    let (t1, t2) = (format!("{timeouts}:1"), format!("{timeouts}:2"));
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_read_lock.lua"); n, timeouts;
        Ms 30_000, Text "c:1", Text "c:1:write";
        n, t1, t2);
    t.reentered(&case, "c:1", &t2, 29_000..=30_000).await;
}

#[tokio::test]
async fn rw_read_unlock() {
    let mut t = Bench::new("read-unlock").await;
    let [n, channel, prefix, timeouts] = rw_keys(&t.name);
    let t1 = format!("{timeouts}:1");
    let latch = latch(&n);
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_read_unlock.lua"); n, channel, timeouts, prefix, latch;
        Text "0", Text "c:1", Publish "PUBLISH", Ms 16_000;
        n, t1, latch);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n, &t1], Some(&latch), (channel, "0"))
        .await;
}

#[tokio::test]
async fn rw_write_lock() {
    let (mut t, n) = Bench::rw_holding("write-lock", "write", "c:1:write").await;
    let case = case!(body!("args.lua", "rw_write_lock.lua"); n; Ms 30_000, Text "c:1:write"; n);
    // Re-entry adds the lease to the remaining TTL.
    t.reentered(&case, "c:1:write", &n, 120_000..=130_000).await;
}

#[tokio::test]
async fn rw_write_unlock() {
    let mut t = Bench::new("write-unlock").await;
    let [n, channel, _, _] = rw_keys(&t.name);
    t.rw_held(&n, "write", "c:1:write").await;
    unlocks(
        &mut t,
        body!("args.lua", "rw_write_unlock.lua"),
        channel,
        "c:1:write",
        "1",
    )
    .await;
}

#[tokio::test]
async fn rw_read_force_unlock() {
    rw_force_unlock(body!("args.lua", "rw_read_force_unlock.lua"), "read", "0").await;
}

#[tokio::test]
async fn rw_write_force_unlock() {
    rw_force_unlock(body!("args.lua", "rw_write_force_unlock.lua"), "write", "1").await;
}

pub async fn rw_force_unlock(body: &'static str, mode: &str, message: &str) {
    let mut t = Bench::new(mode).await;
    let [n, channel, _, _] = rw_keys(&t.name);
    t.rw_held(&n, mode, "c:1").await;
    force_unlocks(&mut t, body, channel, message).await;
}

#[tokio::test]
async fn rw_renew_read() {
    let mut t = Bench::new("renew-read").await;
    let [n, _, prefix, timeouts] = rw_keys(&t.name);
    let t1 = format!("{timeouts}:1");
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_renew_read.lua"); n, prefix;
        Ms 30_000, Count 1, Text "c:1";
        n, t1);
    let extra = [
        // An argument too many.
        (
            case.keys.clone(),
            vec![s(30_000), s(1), s("c:1"), s("c:2")],
            "ARGV[4]",
        ),
        // A lock without its key prefix.
        (
            vec![n.clone(), prefix.clone(), n.clone()],
            vec![s(30_000), s(1), s("c:1"), s(1), s("c:1")],
            "KEYS[3]",
        ),
    ];
    let reply = t.accepts(&case, &extra).await;
    let renewed: Vec<i64> = reply.convert().unwrap();
    assert_eq!(renewed, [1]);
    for key in [&n, &t1] {
        assert!((29_000..=30_000).contains(&t.pttl(key).await));
    }
}
