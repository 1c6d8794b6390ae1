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
    t.cmd(&["PEXPIRE", &t1, "5000"]).await;
    let reply = t.accepts(&case, &extra).await;
    let renewed: Vec<i64> = reply.convert().unwrap();
    assert_eq!(renewed, [1]);
    // max(PTTL, lease): the owner's 5 s timeout key lengthened to the lease,
    // the 100 s hash not shortened (docs/PROTOCOL.md §5.6).
    assert!((29_000..=30_000).contains(&t.pttl(&t1).await));
    assert!((99_000..=100_000).contains(&t.pttl(&n).await));
}

/// A read unlock that leaves the owner holding: the timeout key that goes
/// (the last) hands its time on to the new last one, and the hash lives as
/// long as the longest timeout key (docs/PROTOCOL.md §5.3); held for writing
/// by the same owner, the hash keeps its TTL.
#[tokio::test]
async fn rw_read_unlock_keeps_the_owners_time() {
    let t = Bench::new("read-unlock-keeps").await;
    let [n, channel, prefix, timeouts] = rw_keys(&t.name);
    let (t1, t2) = (format!("{timeouts}:1"), format!("{timeouts}:2"));
    let unlock = |latch: String| {
        let keys = [
            n.clone(),
            channel.clone(),
            timeouts.clone(),
            prefix.clone(),
            latch,
        ];
        let args = vec![s("0"), s("c:1"), s("PUBLISH"), s(16_000)];
        let t = &t;
        async move {
            t.eval(body!("args.lua", "rw_read_unlock.lua"), &keys, args)
                .await
                .unwrap()
        }
    };
    // Read mode: the first hold (5 s) and the second (60 s), hash 60 s.
    t.cmd(&["HSET", &n, "mode", "read", "c:1", "2"]).await;
    t.cmd(&["PEXPIRE", &n, "60000"]).await;
    t.cmd(&["SET", &t1, "1", "PX", "5000"]).await;
    t.cmd(&["SET", &t2, "1", "PX", "60000"]).await;
    assert_eq!(unlock(latch(&n)).await.as_i64(), Some(0));
    assert_eq!(t.cmd(&["EXISTS", &t2]).await.as_i64(), Some(0));
    assert!((59_000..=60_000).contains(&t.pttl(&t1).await), "handed on");
    assert!((59_000..=60_000).contains(&t.pttl(&n).await), "the hash");
    // Write mode by the same owner, who also reads twice (a 5 s and a 6 s
    // read hold): a read unlock does not cut the writer's 100 s.
    t.cmd(&["DEL", &n, &t1]).await;
    t.cmd(&["HSET", &n, "mode", "write", "c:1:write", "1", "c:1", "2"])
        .await;
    t.cmd(&["PEXPIRE", &n, "100000"]).await;
    t.cmd(&["SET", &t1, "1", "PX", "5000"]).await;
    t.cmd(&["SET", &t2, "1", "PX", "6000"]).await;
    assert_eq!(unlock(latch(&n)).await.as_i64(), Some(0));
    assert!(
        (99_000..=100_000).contains(&t.pttl(&n).await),
        "the writer's"
    );
}

/// With the owner's need (ARGV[5], issue 34 item 7): no timeout key of the
/// owner outlives it, and one lives that long, whichever hold went; the
/// hash then lives as long as the longest reader key (docs/PROTOCOL.md
/// §5.3). A need that is not an integer of milliseconds is refused before
/// anything is written.
#[tokio::test]
async fn rw_read_unlock_sets_the_owners_need() {
    let t = Bench::new("read-unlock-need").await;
    let [n, channel, prefix, timeouts] = rw_keys(&t.name);
    let (t1, t2, t3) = (
        format!("{timeouts}:1"),
        format!("{timeouts}:2"),
        format!("{timeouts}:3"),
    );
    let unlock = |need: &'static str| {
        let keys = [
            n.clone(),
            channel.clone(),
            timeouts.clone(),
            prefix.clone(),
            latch(&n),
        ];
        let args = vec![s("0"), s("c:1"), s("PUBLISH"), s(16_000), s(need)];
        let t = &t;
        async move {
            t.eval(body!("args.lua", "rw_read_unlock.lua"), &keys, args)
                .await
        }
    };
    let set_up = |counts: &'static str, ttls: [&'static str; 3]| {
        let t = &t;
        let (n, t1, t2, t3) = (n.clone(), t1.clone(), t2.clone(), t3.clone());
        async move {
            t.cmd(&["DEL", &n, &t1, &t2, &t3]).await;
            t.cmd(&["HSET", &n, "mode", "read", "c:1", counts]).await;
            t.cmd(&["PEXPIRE", &n, "60000"]).await;
            for (key, ttl) in [(&t1, ttls[0]), (&t2, ttls[1]), (&t3, ttls[2])] {
                t.cmd(&["SET", key, "1", "PX", ttl]).await;
            }
        }
    };
    // Three holds (60 s, 5 s, 30 s); the one with the 60 s key went, the
    // others need 30 s: the 60 s key is cut to it, the hash follows.
    set_up("3", ["60000", "5000", "30000"]).await;
    assert_eq!(unlock("30000").await.unwrap().as_i64(), Some(0));
    assert_eq!(t.cmd(&["EXISTS", &t3]).await.as_i64(), Some(0));
    assert!((29_000..=30_000).contains(&t.pttl(&t1).await), "cut");
    assert!((4_000..=5_000).contains(&t.pttl(&t2).await), "kept");
    assert!((29_000..=30_000).contains(&t.pttl(&n).await), "the hash");
    // The remaining keys are shorter than the need: the last gets it.
    set_up("3", ["5000", "6000", "60000"]).await;
    assert_eq!(unlock("40000").await.unwrap().as_i64(), Some(0));
    assert!((4_000..=5_000).contains(&t.pttl(&t1).await));
    assert!((39_000..=40_000).contains(&t.pttl(&t2).await), "set");
    assert!((39_000..=40_000).contains(&t.pttl(&n).await), "the hash");
    // A bad need: nothing written.
    set_up("3", ["5000", "6000", "60000"]).await;
    let refused = unlock("0").await.unwrap_err();
    assert!(refused.to_string().contains("ARGV[5]"), "{refused}");
    assert_eq!(
        t.cmd(&["HGET", &n, "c:1"]).await.as_string().as_deref(),
        Some("3")
    );
    assert!(t.pttl(&t3).await > 59_000);
}
