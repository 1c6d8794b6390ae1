//! The exact Redis state after each operation, per docs/PROTOCOL.md §2.
use std::collections::HashMap;
use std::time::Duration;

use crate::common::fault::script_flush;
use crate::common::{eventually, lost_within, wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::{Owner, Ttl};

#[tokio::test]
async fn lock_reenter_unlock_leave_the_spec_state() {
    let fx = Fixture::new("state").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let lock = client.lock(name).unwrap();

    let outer = lock.lock().await.unwrap();
    let field = format!("{}:{}", client.id().hyphenated(), outer.owner());
    assert_eq!(lock.owner_field(outer.owner()), field);
    assert_eq!(
        fx.hgetall(name).await,
        HashMap::from([(field.clone(), "1".to_string())])
    );
    let ttl = fx.pttl(name).await;
    assert!(
        (29_000..=30_000).contains(&ttl),
        "watchdog lease is 30 000 ms, PTTL {ttl}"
    );

    // Shorten the TTL so the reentry's reset is visible.
    let _: bool = raw.pexpire(name, 5_000, None).await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.owner(), outer.owner());
    assert_eq!(
        fx.hgetall(name).await,
        HashMap::from([(field.clone(), "2".to_string())])
    );
    assert!(
        fx.pttl(name).await > 29_000,
        "re-entry resets the TTL to the lease"
    );
    assert_eq!(outer.hold_count().await.unwrap(), 2);

    inner.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        HashMap::from([(field.clone(), "1".to_string())])
    );
    assert!(fx.pttl(name).await > 29_000);

    // Listen on the channel as a Java waiter would.
    let mut listener = fx
        .listen(&format!("redisson_lock__channel:{{{name}}}"))
        .await;

    outer.unlock().await.unwrap();
    assert!(!fx.exists(name).await, "full unlock deletes the hash");
    let message = listener.next().await;
    assert_eq!(
        message.channel,
        format!("redisson_lock__channel:{{{name}}}")
    );
    assert_eq!(message.value.as_string().as_deref(), Some("0"));

    // The unlock latch is written by the script and deleted afterwards.
    let pattern = format!("redisson_unlock_latch:{{{name}}}:*");
    fx.until_no_keys("unlock latches deleted", &pattern).await;
}

#[tokio::test]
async fn explicit_lease_sets_pttl_and_busy_reply_is_holder_ttl() {
    let fx = Fixture::new("lease").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    assert_ne!(a.id(), b.id());

    let guard = a
        .lock(name)
        .unwrap()
        .lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap();
    let ttl = fx.pttl(name).await;
    assert!((4_000..=5_000).contains(&ttl), "PTTL {ttl}");
    assert_eq!(guard.lease(), Some(Duration::from_secs(5)));
    match a.lock(name).unwrap().remain_time_to_live().await.unwrap() {
        Ttl::Expires(d) => assert!(d <= Duration::from_secs(5) && d > Duration::from_secs(4)),
        other => panic!("expected an expiry, got {other:?}"),
    }

    // The acquire script's busy reply is the holder's PTTL (asked the way Java does).
    let script = concat!(
        include_str!("../../lua/args.lua"),
        include_str!("../../lua/lock.lua")
    );
    let other_field = format!("{}:1", b.id());
    let reply: Value = raw
        .eval(
            script,
            vec![name.clone()],
            vec!["30000".to_string(), other_field],
        )
        .await
        .unwrap();
    let busy = reply.as_i64().expect("an integer TTL");
    assert!((4_000..=5_000).contains(&busy), "busy reply {busy}");

    assert!(b.lock(name).unwrap().try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    assert_eq!(
        a.lock(name).unwrap().remain_time_to_live().await.unwrap(),
        Ttl::NotLocked
    );
}

#[tokio::test]
async fn names_with_braces_keep_their_hash_tag() {
    let fx = Fixture::new("shop").await;
    let name = format!("{{{}}}:orders", fx.name);
    let lock = fx.client.lock(&name).unwrap();
    assert_eq!(
        lock.channel(),
        format!("redisson_lock__channel:{{{}}}:orders", fx.name)
    );
    let plain = fx.client.lock("orders").unwrap();
    assert_eq!(plain.channel(), "redisson_lock__channel:{orders}");

    let mut listener = fx.listen(lock.channel()).await;
    lock.lock().await.unwrap().unlock().await.unwrap();
    let message = listener.next().await;
    assert_eq!(&*message.channel, lock.channel());
}

#[tokio::test]
async fn queries_report_holders() {
    let fx = Fixture::new("query").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count(Owner::new(3)).await.unwrap(), 0);

    let worker = lock.with_owner(Owner::new(3));
    let a = worker.lock().await.unwrap();
    let b = worker.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.is_held_by(Owner::new(3)).await.unwrap());
    assert!(!lock.is_held_by(Owner::new(4)).await.unwrap());
    assert_eq!(lock.hold_count(Owner::new(3)).await.unwrap(), 2);
    assert!(b.is_held().await.unwrap());
    for guard in [b, a] {
        guard.unlock().await.unwrap();
    }
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn force_unlock_deletes_publishes_and_fires_lost() {
    let fx = Fixture::new("force").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    assert!(!lock.force_unlock().await.unwrap(), "nothing to force");

    let guard = lock.lock().await.unwrap();
    let mut listener = fx.listen(lock.channel()).await;

    assert!(lock.force_unlock().await.unwrap());
    assert!(!fx.exists(&fx.name).await);
    let message = listener.next().await;
    assert_eq!(message.value.as_string().as_deref(), Some("0"));
    assert!(guard.is_lost());
    lost_within(&guard, 1, "lost fires").await;
    let err = guard.unlock().await.unwrap_err();
    assert!(
        matches!(err, redisson_lock::Error::NotHeld { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn reenter_refuses_a_hold_that_vanished() {
    let fx = Fixture::new("reenter-gone").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock.lock().await.unwrap();
    // Gone behind our back, before the watchdog could notice.
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    assert!(matches!(
        guard.reenter().await,
        Err(redisson_lock::Error::NotHeld { .. })
    ));
    assert!(
        !lock.is_locked().await.unwrap(),
        "the free lock was not taken afresh"
    );
}

/// After a restart or failover the server has forgotten our scripts: EVALSHA
/// answers NOSCRIPT, and the call falls back to EVAL transparently.
#[tokio::test]
async fn scripts_reload_after_script_flush() {
    let fx = Fixture::new("noscript").await;
    let (raw, lock) = (&fx.raw, fx.client.lock(&fx.name).unwrap());
    let guard = lock.lock().await.unwrap();
    script_flush(raw).await;
    let inner = guard.reenter().await.unwrap();
    assert_eq!(guard.hold_count().await.unwrap(), 2);
    script_flush(raw).await;
    inner.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// The unlock latch is deleted by a `DEL` in the same write as the client's
/// next script, so it is gone when that script's reply arrives; without a
/// next command it goes soon after (a short background window), long before
/// its TTL (16 s); a shutdown deletes what is still queued.
#[tokio::test]
async fn unlock_latches_go_with_the_next_script_or_soon_after() {
    let fx = Fixture::new("latch-del").await;
    let (client, name) = (&fx.client, &fx.name);
    let lock = client.lock(name).unwrap();
    let other = client.lock(&format!("{name}-other")).unwrap();
    let pattern = format!("redisson_unlock_latch:{{{name}}}:*");

    for _ in 0..20 {
        lock.lock().await.unwrap().unlock().await.unwrap();
        // The next script on this client, on another lock, carries the DEL.
        let guard = other.lock().await.unwrap();
        assert!(
            fx.keys(&pattern).await.is_empty(),
            "latch gone with the next script"
        );
        guard.unlock().await.unwrap();
    }

    // Nothing follows: gone within a second all the same.
    lock.lock().await.unwrap().unlock().await.unwrap();
    let unlocked = std::time::Instant::now();
    let others = format!("redisson_unlock_latch:{{{name}-other}}:*");
    latches_gone_within_a_second(&fx, &[&pattern, &others], unlocked).await;

    // With a waiter on the client, the latch goes at once in the
    // background: gone within a second, not left for the TTL either.
    let held = lock.lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = client.lock(name).unwrap();
        async move { lock.lock().await.unwrap().unlock().await.unwrap() }
    });
    wait_numsub(&fx.raw, &format!("redisson_lock__channel:{{{name}}}"), 1).await;
    held.unlock().await.unwrap();
    let unlocked = std::time::Instant::now();
    waiter.await.unwrap();
    latches_gone_within_a_second(&fx, &[&pattern], unlocked).await;

    // A shutdown right after an unlock deletes the queued latch first.
    let c = fx.client().await;
    let lock = c.lock(name).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    c.shutdown().await;
    assert!(
        fx.keys(&pattern).await.is_empty(),
        "latch deleted by shutdown"
    );
}

/// No latch key matching `patterns` is left, and the last went within a
/// second of `since`: deleted, not left for its TTL.
async fn latches_gone_within_a_second(fx: &Fixture, patterns: &[&str], since: std::time::Instant) {
    eventually("latches deleted", || async {
        for pattern in patterns {
            if !fx.keys(pattern).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
    assert!(
        since.elapsed() < Duration::from_secs(1),
        "deleted after {:?}, not left for the TTL",
        since.elapsed()
    );
}
