//! The fair lock's scripts: lock, leave, unlock and force unlock.

use crate::bench::Bench;
use crate::{fair_keys, latch, now_ms, s};

#[tokio::test]
async fn fair_lock() {
    let mut t = Bench::new("fair-lock").await;
    let [n, q, z, base] = fair_keys(&t.name);
    let now = now_ms();
    // Held by someone else, with a stale waiter at the head: a valid call
    // purges it and joins the queue.
    t.held(&n, "c:9", "1").await;
    t.cmd(&["RPUSH", &q, "stale"]).await;
    t.cmd(&["ZADD", &z, &s(now - 1_000), "stale"]).await;
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_lock.lua"); n, q, z, base;
        Ms 30_000, Text "c:1", Ms0 60_000, Epoch now, Flag "1", Publish "PUBLISH";
        n, q, z);
    let reply = t.accepts(&case, &[]).await;
    let ttl = reply.as_i64().unwrap();
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    assert_eq!(t.list(&q).await, ["c:1"]);
    let deadline = t.cmd(&["ZSCORE", &z, "c:1"]).await.as_f64().unwrap() as i64;
    assert_eq!(deadline, now + ttl + 60_000);
    // A wait of 0 ms is valid (a sub-millisecond wait, or a zero
    // fair_lock_wait_timeout): only trying, busy.
    let reply = t
        .eval(
            body!("args.lua", "fair_purge.lua", "fair_lock.lua"),
            &case.keys,
            vec![s(30_000), s("c:2"), s(0), s(now_ms()), s("0"), s("PUBLISH")],
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(1));
    // The holder is gone (a crashed holder's TTL ran out) and c:1 is at the
    // head: another waiter's attempt is told it is c:1's turn, {0, ms}, and
    // c:1 is woken on its channel (a Java 3.12-3.23 head may be parked with
    // no timeout, docs/PROTOCOL.md §4.4).
    t.cmd(&["DEL", &n]).await;
    let reply = t
        .eval(
            body!("args.lua", "fair_purge.lua", "fair_lock.lua"),
            &case.keys,
            vec![
                s(30_000),
                s("c:2"),
                s(60_000),
                s(now_ms()),
                s("1"),
                s("PUBLISH"),
            ],
        )
        .await
        .unwrap();
    let reply: Vec<i64> = reply.convert().unwrap();
    assert_eq!(reply[0], 0, "{reply:?}");
    assert!(reply[1] > 0, "{reply:?}");
    assert_eq!(t.next_message().await, (format!("{base}:c:1"), s("0")));
    // c:1 takes it: {1}.
    let reply = t.eval(case.body, &case.keys, case.good()).await.unwrap();
    assert_eq!(reply.convert::<Vec<i64>>().unwrap(), [1]);
}

#[tokio::test]
async fn fair_leave() {
    let mut t = Bench::new("fair-leave").await;
    let [n, q, z, base] = fair_keys(&t.name);
    let now = now_ms();
    // The head leaves a free lock: the next waiter's deadline moves up by the
    // wait, and it is woken.
    t.cmd(&["RPUSH", &q, "c:1", "c:2"]).await;
    t.cmd(&[
        "ZADD",
        &z,
        &s(now + 60_000),
        "c:1",
        &s(now + 120_000),
        "c:2",
    ])
    .await;
    let case = case!(body!("args.lua", "fair_leave.lua"); q, z, n, base;
        Text "c:1", Ms0 60_000, Publish "PUBLISH";
        q, z, n);
    let reply = t.accepts(&case, &[]).await;
    assert!(reply.is_null());
    assert_eq!(t.list(&q).await, ["c:2"]);
    let deadline = t.cmd(&["ZSCORE", &z, "c:2"]).await.as_f64().unwrap() as i64;
    assert_eq!(deadline, now + 60_000);
    assert_eq!(t.next_message().await, (format!("{base}:c:2"), s("0")));
    // A wait of 0 ms is valid.
    let reply = t
        .eval(
            body!("args.lua", "fair_leave.lua"),
            &case.keys,
            vec![s("c:2"), s(0), s("PUBLISH")],
        )
        .await
        .unwrap();
    assert!(reply.is_null());
    assert_eq!(t.cmd(&["EXISTS", &q, &z]).await.as_i64(), Some(0));
}

/// Fair-lock state where a valid unlock or force-unlock writes everything it
/// can: N held by c:1, a stale head to purge, then c:2 to wake.
pub async fn fair_held(t: &Bench, now: i64) -> [String; 4] {
    let keys = fair_keys(&t.name);
    let [n, q, z, _] = &keys;
    t.held(n, "c:1", "1").await;
    t.cmd(&["RPUSH", q, "stale", "c:2"]).await;
    t.cmd(&["ZADD", z, &s(now - 1_000), "stale", &s(now + 60_000), "c:2"])
        .await;
    keys
}

#[tokio::test]
async fn fair_unlock() {
    let mut t = Bench::new("fair-unlock").await;
    let now = now_ms();
    let [n, q, z, base] = fair_held(&t, now).await;
    let latch = latch(&n);
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_unlock.lua"); n, q, z, base, latch;
        Text "0", Text "c:1", Epoch now, Publish "PUBLISH", Ms 16_000;
        n, q, z, latch);
    let reply = t.accepts(&case, &[]).await;
    let woken = (format!("{base}:c:2"), "0");
    t.released(reply, &[&n], Some(&latch), woken).await;
    assert_eq!(t.list(&q).await, ["c:2"]);
}

#[tokio::test]
async fn fair_force_unlock() {
    let mut t = Bench::new("fair-force").await;
    let now = now_ms();
    let [n, q, z, base] = fair_held(&t, now).await;
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_force_unlock.lua"); n, q, z, base;
        Text "0", Epoch now, Publish "PUBLISH";
        n, q, z);
    let reply = t.accepts(&case, &[]).await;
    let woken = (format!("{base}:c:2"), "0");
    t.released(reply, &[&n], None, woken).await;
    assert_eq!(t.list(&q).await, ["c:2"]);
}
