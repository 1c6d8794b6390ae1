//! Watchdog renewal, lease expiry and the lost signal.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::{unique, within, Fixture, Server};
use fred::prelude::*;
use redisson_lock::{Error, Ttl};

#[tokio::test]
async fn watchdog_keeps_the_lock_past_three_timeouts() {
    let fx = Fixture::with_watchdog("renew", Duration::from_secs(1)).await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock.lock().await.unwrap();
    let ttl = fx.pttl(&fx.name).await;
    assert!(
        (0..=1_000).contains(&ttl),
        "lease is the 1 s watchdog timeout, PTTL {ttl}"
    );

    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(
        lock.is_locked().await.unwrap(),
        "renewed past 3x the timeout"
    );
    assert!(guard.is_held().await.unwrap());
    assert!(!guard.is_lost());
    let ttl = fx.pttl(&fx.name).await;
    assert!((1..=1_000).contains(&ttl), "PTTL {ttl}");

    // Unlocking stops renewal: a new holder is not kept alive by it.
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn lost_fires_when_the_key_is_deleted_behind_the_holders_back() {
    let fx = Fixture::with_watchdog("lost", Duration::from_secs(1)).await;
    let guard = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    assert!(!guard.is_lost());
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    let started = Instant::now();
    common::lost_within(&guard, 3, "lost within a renewal period or two").await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn lease_expires_and_the_next_waiter_gets_the_lock() {
    let fx = Fixture::new("expiry").await;
    let b = fx.client().await;
    let guard = fx
        .client
        .lock(&fx.name)
        .unwrap()
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let started = Instant::now();
    // Expiry publishes nothing: the waiter is bounded by the holder's TTL.
    let next = b
        .lock(&fx.name)
        .unwrap()
        .try_lock_for(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(next.is_some());
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(2),
        "woken by the TTL bound, after {waited:?}"
    );
    common::lost_within(&guard, 1, "lease ran out").await;
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    next.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn leased_lock_is_not_renewed() {
    let fx = Fixture::with_watchdog("no-renew", Duration::from_millis(300)).await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock
        .lock_with_lease(Duration::from_millis(600))
        .await
        .unwrap();
    common::lost_within(&guard, 2, "lease ran out").await;
    // `lost` fires at the lease counted from when the command was sent, so
    // never after the server's expiry, and possibly a moment before it. The
    // key then goes: a watchdog renewal (every 100 ms here) would keep it.
    match lock.remain_time_to_live().await.unwrap() {
        Ttl::NotLocked => {}
        Ttl::Expires(left) => assert!(left <= Duration::from_millis(50), "{left:?}"),
        Ttl::NoExpiry => panic!("lease removed"),
    }
    common::eventually("the leased key expired", || {
        let lock = lock.clone();
        async move { lock.remain_time_to_live().await.unwrap() == Ttl::NotLocked }
    })
    .await;
}

#[tokio::test]
async fn renewal_is_batched() {
    let server = Server::private();
    let raw = server.raw().await;
    let client = server
        .client_with(|c| {
            c.lock_watchdog_timeout(Duration::from_millis(600))
                .lock_watchdog_batch_size(10)
        })
        .await;
    let base = unique("batch");
    let mut guards = Vec::new();
    for i in 0..35 {
        let lock = client.lock(&format!("{base}-{i}")).unwrap();
        guards.push(lock.lock().await.unwrap());
    }
    let _: () = raw
        .custom(fred::cmd!("CONFIG"), vec!["RESETSTAT"])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await; // about five renewal periods
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let calls = |cmd: &str| -> u64 {
        info.lines()
            .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
            .and_then(|l| l.split("calls=").nth(1))
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let scripts = calls("evalsha") + calls("eval");
    let pexpires = calls("pexpire");
    assert!(
        pexpires >= 35 * 3,
        "every lock renewed each period: {pexpires} PEXPIREs"
    );
    // 35 locks in batches of 10: 4 script calls per period, not 35.
    assert!(
        scripts * 35 <= pexpires * 4 + 35 * 4,
        "{scripts} script calls for {pexpires} renewals"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

/// Renewal keeps going through transient errors while the lease lasts: the
/// server stops answering for longer than a renewal period (so at least one
/// renewal times out), yet the hold is neither lost nor reported lost.
#[tokio::test]
async fn renewal_survives_a_server_stall_shorter_than_the_lease() {
    let server = Server::private();
    // lease 1.2 s, renewed every 400 ms; commands time out after 200 ms
    let client = server
        .client_with(|c| {
            c.lock_watchdog_timeout(Duration::from_millis(1_200))
                .timeout(Duration::from_millis(200))
                .retry_attempts(0)
        })
        .await;
    let raw = server.raw().await;
    let lock = client.lock(&unique("stall")).unwrap();
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await; // one renewal done
                                                          // 600 ms without answers: a renewal starts within the first 400 ms and
                                                          // times out; the key (TTL 1.2 s from the last renewal) outlives the pause.
    let _: () = raw
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", "600", "ALL"])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    assert!(
        !guard.is_lost(),
        "a stall shorter than the lease is not a loss"
    );
    assert!(guard.is_held().await.unwrap());
    guard.unlock().await.unwrap();
}

/// Spawn `lost` and return once the hold's watch has subscribed to
/// `channel` (what follows is heard by its message, or by the check the
/// watch makes once subscribed: within a round trip either way).
async fn watching<K: redisson_lock::Kind>(
    raw: &fred::clients::Client,
    guard: &redisson_lock::LockGuard<K>,
    channel: &str,
) -> tokio::task::JoinHandle<redisson_lock::LostReason> {
    let lost = tokio::spawn(guard.lost());
    common::wait_numsub(raw, channel, 1).await;
    lost
}

/// A forced unlock by another client publishes on the lock's channel: a
/// holder waiting in `lost()` re-checks at once, for a watchdog hold (renewal
/// every 10 s) and an explicit 20 s lease alike, and for every kind with a
/// release channel (RLock, fenced, read and write locks).
#[tokio::test]
async fn lost_hears_a_forced_unlock_by_another_client_at_once() {
    let fx = Fixture::new("lost-fast").await;
    let other = fx.client().await;
    let bound = Duration::from_secs(2);
    for lease in [None, Some(Duration::from_secs(20))] {
        let name = unique("lost-fast");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let lock = fx.client.lock(&name).unwrap();
        let guard = match lease {
            None => lock.lock().await.unwrap(),
            Some(lease) => lock.lock_with_lease(lease).await.unwrap(),
        };
        let lost = watching(&fx.raw, &guard, &channel).await;
        assert!(!guard.is_lost());
        let start = Instant::now();
        assert!(other.lock(&name).unwrap().force_unlock().await.unwrap());
        tokio::time::timeout(bound, lost)
            .await
            .unwrap_or_else(|_| {
                panic!("lease {lease:?}: lost() not within {bound:?} of a forced unlock")
            })
            .unwrap();
        assert!(guard.is_lost());
        assert!(start.elapsed() < bound);
        // The other client takes the lock; our guard's drop must not free it.
        let taken = other.lock(&name).unwrap().try_lock().await.unwrap();
        let taken = taken.expect("the forced-free lock is free");
        drop(guard);
        common::wait_numsub(&fx.raw, &channel, 0).await;
        assert!(taken.is_held().await.unwrap());
        taken.unlock().await.unwrap();
    }

    let name = unique("lost-fast-fenced");
    let guard = fx.client.fenced_lock(&name).unwrap().lock().await.unwrap();
    let lost = watching(
        &fx.raw,
        &guard,
        &format!("redisson_lock__channel:{{{name}}}"),
    )
    .await;
    let fenced = other.fenced_lock(&name).unwrap();
    assert!(fenced.force_unlock().await.unwrap());
    within(bound, "fenced: lost() at once", lost).await;

    let name = unique("lost-fast-rw");
    let rw = fx.client.read_write_lock(&name).unwrap();
    let read = rw.read().lock().await.unwrap();
    let before = common::command_calls(&fx.raw, "hexists").await;
    let mut lost = watching(&fx.raw, &read, &format!("redisson_rwlock:{{{name}}}")).await;
    // Another reader leaving publishes too, but our hold is still there.
    let other_rw = other.read_write_lock(&name).unwrap();
    let second = other_rw.read().lock().await.unwrap();
    let checks = common::command_calls(&fx.raw, "hexists").await;
    second.unlock().await.unwrap();
    common::eventually(
        "the watcher re-checks after another reader's unlock",
        || async { common::command_calls(&fx.raw, "hexists").await > checks },
    )
    .await;
    assert!(checks > before);
    assert!(
        futures::poll!(&mut lost).is_pending(),
        "another reader's unlock is no loss"
    );
    assert!(!read.is_lost());
    assert!(other_rw.read().force_unlock().await.unwrap());
    within(bound, "read lock: lost() at once", lost).await;
    assert!(read.is_lost());

    let name = unique("lost-fast-w");
    let write = fx
        .client
        .read_write_lock(&name)
        .unwrap()
        .write()
        .lock()
        .await
        .unwrap();
    let lost = watching(&fx.raw, &write, &format!("redisson_rwlock:{{{name}}}")).await;
    let other_rw = other.read_write_lock(&name).unwrap();
    assert!(other_rw.write().force_unlock().await.unwrap());
    within(bound, "write lock: lost() at once", lost).await;
}

/// A holder that watches `lost()` and then unlocks normally leaves nothing
/// subscribed and is not reported lost; the subscription is the hold's
/// watch, not the `lost()` future's: dropping that future leaves it, and a
/// dropped guard ends it.
#[tokio::test]
async fn watching_lost_leaves_no_subscription_behind() {
    let fx = Fixture::new("lost-watch").await;
    let channel = format!("redisson_lock__channel:{{{}}}", fx.name);
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock.lock().await.unwrap();
    let mut lost = watching(&fx.raw, &guard, &channel).await;
    guard.unlock().await.unwrap();
    common::wait_numsub(&fx.raw, &channel, 0).await;
    assert!(
        futures::poll!(&mut lost).is_pending(),
        "a release is no loss"
    );
    lost.abort();

    let guard = lock.lock().await.unwrap();
    let lost = watching(&fx.raw, &guard, &channel).await;
    lost.abort();
    let _ = lost.await;
    assert_eq!(
        common::numsub(&fx.raw, &channel).await,
        1,
        "the hold's watch"
    );
    assert!(guard.is_held().await.unwrap());
    drop(guard);
    common::wait_numsub(&fx.raw, &channel, 0).await;
}

/// `extend` sets the remaining lease from now: an explicit lease grows, a
/// watchdog hold becomes an explicit one (no longer renewed), `lost()`
/// follows the new lease, a bad lease is refused before anything is sent,
/// and a hold that is gone is `NotHeld` and reported lost.
#[tokio::test]
async fn extend_sets_the_lease_from_now() {
    let fx = Fixture::with_watchdog("extend", Duration::from_secs(1)).await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let mut guard = lock
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    guard.extend(Duration::from_secs(20)).await.unwrap();
    let ttl = fx.pttl(&fx.name).await;
    assert!(
        (19_000..=20_000).contains(&ttl),
        "PTTL {ttl} after extend(20 s)"
    );
    assert_eq!(guard.lease(), Some(Duration::from_secs(20)));
    let left = guard.expires_at().unwrap() - std::time::Instant::now();
    assert!(
        left > Duration::from_secs(19),
        "expires_at follows: {left:?}"
    );
    // Past the first lease, the hold is neither expired nor reported lost.
    let lost = guard.lost();
    assert!(
        tokio::time::timeout(Duration::from_millis(600), lost)
            .await
            .is_err(),
        "lost() fired at the old lease"
    );
    assert!(guard.is_held().await.unwrap());

    for bad in [
        Duration::ZERO,
        redisson_lock::MAX_DURATION + Duration::from_millis(1),
    ] {
        match guard.extend(bad).await {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("extend({bad:?}): {other:?}"),
        }
    }
    guard.unlock().await.unwrap();

    // A watchdog hold gets the explicit lease and is no longer renewed.
    let mut guard = lock.lock().await.unwrap();
    assert_eq!(guard.lease(), None);
    guard.extend(Duration::from_millis(1_500)).await.unwrap();
    assert_eq!(guard.lease(), Some(Duration::from_millis(1_500)));
    let what = "lost at the end of the new lease, not renewed";
    common::lost_within(&guard, 3, what).await;
    // lost() fires just before the server's expiry (a drift margin); then
    // the key expires, which a still-renewed hold never would.
    common::eventually("the extended hold expired, not renewed", || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
    match guard.extend(Duration::from_secs(5)).await {
        Err(Error::NotHeld { .. }) => {}
        other => panic!("extend of a lost hold: {other:?}"),
    }

    // Gone behind its back: NotHeld, and reported lost.
    let mut guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    match guard.extend(Duration::from_secs(5)).await {
        Err(Error::NotHeld { .. }) => {}
        other => panic!("extend of a deleted hold: {other:?}"),
    }
    assert!(guard.is_lost());
}

/// `Lock::run` runs work under the lock and unlocks after it; when the lock
/// is force-unlocked by another client meanwhile, the work is stopped at
/// once and the call ends with `Error::Lost`.
#[tokio::test]
async fn run_stops_the_work_when_the_lock_is_lost() {
    let fx = Fixture::new("run").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    assert_eq!(lock.run(async |_| 7).await.unwrap(), 7);
    assert!(!lock.is_locked().await.unwrap(), "unlocked after the work");

    let (started, running) = tokio::sync::oneshot::channel();
    let (dropped, work_dropped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.run(async move |_| {
                let _dropped = dropped; // closed when the work is dropped
                let _ = started.send(());
                std::future::pending::<()>().await
            })
            .await
        }
    });
    running.await.unwrap();
    common::wait_numsub(
        &fx.raw,
        &format!("redisson_lock__channel:{{{}}}", fx.name),
        1,
    )
    .await;
    let other = fx.client().await;
    assert!(other.lock(&fx.name).unwrap().force_unlock().await.unwrap());
    let what = "run ends within a round trip of the forced unlock";
    let outcome = within(Duration::from_secs(2), what, run).await;
    assert!(matches!(outcome, Err(Error::Lost { .. })), "{outcome:?}");
    assert!(work_dropped.await.is_err(), "the work was dropped");
}

/// `MultiLock::run` takes every member, runs the work and releases them;
/// when a member is deleted by someone else meanwhile (heard by client
/// tracking), the work is stopped and the call ends with `Error::Lost`
/// naming that member.
#[tokio::test]
async fn multi_lock_run_stops_the_work_when_a_member_is_lost() {
    let fx = Fixture::new("multi-run").await;
    let (a, b) = (format!("{}-a", fx.name), format!("{}-b", fx.name));
    let both =
        redisson_lock::MultiLock::new([fx.client.lock(&a).unwrap(), fx.client.lock(&b).unwrap()])
            .unwrap();
    assert_eq!(
        both.run(async |guard| guard.guards().len()).await.unwrap(),
        2
    );
    assert!(
        !fx.exists(&a).await && !fx.exists(&b).await,
        "released after the work"
    );

    let (started, running) = tokio::sync::oneshot::channel();
    let run = tokio::spawn(async move {
        both.run(async move |_| {
            let _ = started.send(());
            std::future::pending::<()>().await
        })
        .await
    });
    running.await.unwrap();
    let _: i64 = fx.raw.del(&b).await.unwrap();
    let what = "run ends well before the renewal once a member is deleted";
    match within(Duration::from_secs(5), what, run).await {
        Err(Error::Lost { name, .. }) => assert_eq!(name, b),
        other => panic!("expected Error::Lost, got {other:?}"),
    }
    common::eventually("the other member released", || async {
        !fx.exists(&a).await
    })
    .await;
}
