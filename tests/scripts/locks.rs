//! The exclusive lock scripts: lock, unlock, force unlock, renew, the spin
//! lock's unlock, delete and the fenced lock.

use crate::bench::Bench;
use crate::{latch, s};

#[tokio::test]
async fn lock() {
    let (mut t, n) = Bench::holding("lock", "c:1", "1").await;
    let case = case!(body!("args.lua", "lock.lua"); n; Ms 30_000, Text "c:1"; n);
    // Valid: re-entered; a lease shorter than the TTL left does not shorten
    // it (max(PTTL, lease), docs/PROTOCOL.md §2.2).
    t.reentered(&case, "c:1", &n, 99_000..=100_000).await;
    // The largest lease is taken, and lengthens it.
    let reply = t
        .eval(
            body!("args.lua", "lock.lua"),
            &case.keys,
            vec![s(3_155_760_000_000i64), s("c:1")],
        )
        .await
        .unwrap();
    assert_eq!(reply.convert::<Vec<i64>>().unwrap(), [3]);
    assert!(t.pttl(&n).await > 3_155_000_000_000);
    // A fresh take replies a count of 1 and sets the lease.
    t.cmd(&["DEL", &n]).await;
    let reply = t
        .eval(body!("args.lua", "lock.lua"), &case.keys, case.good())
        .await
        .unwrap();
    assert_eq!(reply.convert::<Vec<i64>>().unwrap(), [1]);
    assert!((29_000..=30_000).contains(&t.pttl(&n).await));
    // Held by another owner: its PTTL.
    let reply = t
        .eval(
            body!("args.lua", "lock.lua"),
            &case.keys,
            vec![s(30_000), s("c:2")],
        )
        .await
        .unwrap();
    assert!((29_000..=30_000).contains(&reply.as_i64().unwrap()));
}

#[tokio::test]
async fn unlock() {
    let (mut t, n) = Bench::holding("unlock", "c:1", "1").await;
    let channel = format!("redisson_lock__channel:{{{n}}}");
    let latch = unlocks(&mut t, body!("args.lua", "unlock.lua"), channel, "c:1", "0").await;
    assert!((15_000..=16_000).contains(&t.pttl(&latch).await));
}

/// `body` (unlock or rw_write_unlock) releases `owner`'s only hold on the
/// lock: bad arguments refused, then the lock deleted, a latch set and
/// `message` published on `channel`. Returns the latch.
pub async fn unlocks(
    t: &mut Bench,
    body: &'static str,
    channel: String,
    owner: &str,
    message: &str,
) -> String {
    let n = t.name.clone();
    let latch = latch(&n);
    let case = case!(body; n, channel, latch;
        Text message, Text owner, Publish "PUBLISH", Ms 16_000;
        n, latch);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n], Some(&latch), (channel, message))
        .await;
    latch
}

#[tokio::test]
async fn force_unlock() {
    let (mut t, n) = Bench::holding("force", "c:1", "1").await;
    let channel = format!("redisson_lock__channel:{{{n}}}");
    force_unlocks(&mut t, body!("args.lua", "force_unlock.lua"), channel, "0").await;
}

/// `body` (force_unlock, rw_read_force_unlock or rw_write_force_unlock)
/// refuses bad arguments, then deletes the held lock and publishes `message`
/// on `channel`.
pub async fn force_unlocks(t: &mut Bench, body: &'static str, channel: String, message: &str) {
    let n = t.name.clone();
    let case = case!(body; n, channel; Text message, Publish "PUBLISH"; n);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n], None, (channel, message)).await;
}

#[tokio::test]
async fn renew() {
    let mut t = Bench::new("renew").await;
    let (n1, n2) = (format!("{}:1", t.name), format!("{}:2", t.name));
    t.held(&n1, "c:1", "1").await;
    t.cmd(&["PEXPIRE", &n1, "5000"]).await;
    t.held(&n2, "c:2", "1").await;
    let case =
        case!(body!("args.lua", "renew.lua"); n1, n2; Ms 30_000, Text "c:1", Text "c:2"; n1, n2);
    let extra = [(
        case.keys.clone(),
        vec![s(30_000), s("c:1"), s("c:2"), s("c:3")],
        "ARGV[4]",
    )];
    let reply = t.accepts(&case, &extra).await;
    let renewed: Vec<i64> = reply.convert().unwrap();
    assert_eq!(renewed, [1, 1]);
    // max(PTTL, lease): the 5 s lock lengthened to the lease, the 100 s one
    // not shortened (docs/PROTOCOL.md §2.6).
    assert!((29_000..=30_000).contains(&t.pttl(&n1).await));
    assert!((99_000..=100_000).contains(&t.pttl(&n2).await));
}

#[tokio::test]
async fn spin_unlock() {
    let (mut t, n) = Bench::named("spin").await;
    let latch = latch(&n);
    t.held(&n, "c:1", "2").await;
    let case = case!(body!("args.lua", "spin_unlock.lua"); n, latch;
        Text "c:1", Ms 16_000;
        n, latch);
    let reply = t.accepts(&case, &[]).await;
    assert_eq!(reply.as_i64(), Some(0));
    assert_eq!(t.hget(&n, "c:1").await, Some(1));
    // Still held: the TTL is kept (docs/PROTOCOL.md §2.3).
    assert!((99_000..=100_000).contains(&t.pttl(&n).await));
    assert_eq!(t.get(&latch).await.as_i64(), Some(0));
}

#[tokio::test]
async fn delete() {
    // No ARGV to check; the fragment in front of it changes nothing.
    let (t, n) = Bench::holding("delete", "c:1", "1").await;
    let keys = vec![n.clone()];
    let delete = || async {
        let reply = t.eval(body!("args.lua", "delete.lua"), &keys, vec![]);
        reply.await.unwrap().as_i64()
    };
    assert_eq!(delete().await, Some(1));
    assert_eq!(delete().await, Some(0));
}

/// The server's clock in microseconds since the epoch (`TIME`).
async fn server_micros(t: &Bench) -> i64 {
    let time: Vec<i64> = t.cmd(&["TIME"]).await.convert().unwrap();
    time[0] * 1_000_000 + time[1]
}

#[tokio::test]
async fn fenced_lock() {
    let (mut t, n) = Bench::named("fenced").await;
    let token = format!("redisson_lock_token:{{{n}}}");
    let case =
        case!(body!("args.lua", "fenced_lock.lua"); n, token; Ms 30_000, Text "c:1"; n, token);
    // A missing counter: the token is the server's clock in microseconds,
    // written to the counter (docs/PROTOCOL.md §6.2).
    let before = server_micros(&t).await;
    let reply = t.accepts(&case, &[]).await;
    let after = server_micros(&t).await;
    let [count, first]: [i64; 2] = reply.convert::<Vec<i64>>().unwrap().try_into().unwrap();
    assert_eq!(count, 1, "a fresh take");
    assert!(
        (before..=after).contains(&first),
        "token {first} is the clock, in [{before}, {after}]"
    );
    assert_eq!(t.get(&token).await.as_i64(), Some(first));
    assert_eq!(t.pttl(&token).await, -1, "the counter has no TTL");
    assert_eq!(t.hget(&n, "c:1").await, Some(1));
    assert!((29_000..=30_000).contains(&t.pttl(&n).await));
    // Re-entry: a new, greater token, count 2; held by another owner: its PTTL.
    let again = t.eval(case.body, &case.keys, case.good()).await.unwrap();
    let [count, second]: [i64; 2] = again.convert::<Vec<i64>>().unwrap().try_into().unwrap();
    assert_eq!(count, 2);
    assert!(second > first, "{second} > {first}");
    let busy = t
        .eval(case.body, &case.keys, vec![s(30_000), s("c:2")])
        .await
        .unwrap();
    assert!((29_000..=30_000).contains(&busy.as_i64().unwrap()));
    assert_eq!(
        t.get(&token).await.as_i64(),
        Some(second),
        "busy: no token taken"
    );

    // Java's Redisson takes a token with a plain INCR: it continues the
    // clock-seeded counter, and the next token of ours is above it.
    let java = t.cmd(&["INCR", &token]).await.as_i64().unwrap();
    assert_eq!(java, second + 1);
    let third = t.eval(case.body, &case.keys, case.good()).await.unwrap();
    let third = third.convert::<Vec<i64>>().unwrap()[1];
    assert!(third > java, "{third} > {java}");

    // A counter ahead of the clock (set by hand, or counted up by more than
    // one token a microsecond) is incremented, as Java does. (2^52: the
    // clock reaches it in 2112; Lua numbers are exact up to 2^53.)
    let ahead = 1i64 << 52;
    t.cmd(&["SET", &token, &ahead.to_string()]).await;
    let reply = t.eval(case.body, &case.keys, case.good()).await.unwrap();
    assert_eq!(reply.convert::<Vec<i64>>().unwrap(), [4, ahead + 1]);
    // A counter behind the clock (a server that lost its last writes, an
    // older snapshot) jumps to the clock: above every token handed out
    // before the loss, as long as those stayed below the clock.
    t.cmd(&["SET", &token, "5"]).await;
    let before = server_micros(&t).await;
    let reply = t.eval(case.body, &case.keys, case.good()).await.unwrap();
    let after = server_micros(&t).await;
    let behind = reply.convert::<Vec<i64>>().unwrap()[1];
    assert!(
        (before..=after).contains(&behind),
        "{behind} in [{before}, {after}]"
    );
    assert_eq!(t.get(&token).await.as_i64(), Some(behind));
    // At the 64-bit limit, INCR's overflow refuses the take with nothing
    // written.
    t.cmd(&["SET", &token, &i64::MAX.to_string()]).await;
    let err = t
        .eval(case.body, &case.keys, case.good())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    assert_eq!(t.hget(&n, "c:1").await, Some(5), "not re-entered");
}
