//! Issue 34, item 1: the writes of one owner field are ordered on this
//! client (docs/PROTOCOL.md §2.9, *One turn per owner field*). A release of
//! an old tenure racing a fresh take by the same owner (joined, dropped and
//! re-taken, or a re-take cancelled part-way) never removes the fresh hold:
//! after every such race, each guard that says it holds is backed by Redis
//! (the owner's field is there, another client is refused), for every kind,
//! whether the old hold ended by expiry, a `DEL` or a forced unlock by
//! another client.

use std::time::Duration;

use futures::FutureExt;
use redisson_lock::{AnyKind, Error, Lock, LockGuard, Owner};

use crate::common::{eventually, Fixture};
use crate::every_kind;

/// Rounds per kind and way of ending the old hold: the races are decided
/// by scheduling, so each is run several times.
const ROUNDS: usize = 6;

/// How the old hold ends in Redis before the race.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Its lease runs out (and the key is gone).
    Expiry,
    /// A plain `DEL` by another connection.
    Del,
    /// A forced unlock by another client.
    ForcedByOther,
}

/// How the stale release races the fresh take.
#[derive(Clone, Copy, Debug)]
enum Race {
    /// `join!(take, old.unlock())`.
    Joined,
    /// `drop(old)` (released in the background), then take.
    DropThenTake,
    /// A take polled a random number of times and dropped, joined with the
    /// old guard's unlock; then a take that completes.
    CancelledTake,
}

/// Every guard still claiming the lock is backed by Redis: the owner's
/// field holds at least once per such guard, and another client cannot
/// take the lock.
async fn assert_backed(
    fx: &Fixture,
    other: &Lock<AnyKind>,
    lock: &Lock<AnyKind>,
    owner: Owner,
    guards: &[&LockGuard<AnyKind>],
    what: &str,
) {
    let claiming = guards.iter().filter(|g| !g.is_lost()).count() as u32;
    if claiming == 0 {
        return;
    }
    let count = lock.hold_count(owner).await.unwrap();
    assert!(
        count >= claiming,
        "{what}: {claiming} guard(s) claim the lock, Redis holds the owner {count} time(s) ({:?})",
        fx.hgetall(lock.name()).await
    );
    let theirs = other.try_lock().await.unwrap();
    assert!(
        theirs.is_none(),
        "{what}: another client took a lock a guard still claims"
    );
}

/// End `g1`'s hold in Redis as `end` says, without telling this client.
async fn end_hold(fx: &Fixture, other: &Lock<AnyKind>, lock: &Lock<AnyKind>, end: End) {
    let key = lock.name().to_owned();
    match end {
        End::Expiry => {
            eventually("the old hold expired", || async { !fx.exists(&key).await }).await;
        }
        End::Del => {
            let _: i64 = fred::interfaces::KeysInterface::del(&fx.raw, &key)
                .await
                .unwrap();
        }
        End::ForcedByOther => {
            assert!(other.force_unlock().await.unwrap());
        }
    }
}

async fn race(fx: &Fixture, end: End, race: Race, round: usize) {
    let name = format!("{}-{end:?}-{race:?}-{round}", fx.name);
    let other_client = fx.client().await;
    for (kind, other) in every_kind(&other_client, &name) {
        let what = format!("{kind}, {end:?}, {race:?}, round {round}");
        // Readers share: what another reader is refused by is a writer.
        let excluder = if kind == "read" {
            crate::common::make::write(&other_client, &format!("{name}-read")).into_erased()
        } else {
            other.clone()
        };
        // A client of its own: its shutdown waits for its background
        // releases, after which Redis must still back the fresh guard.
        let client = fx.client().await;
        let (_, lock) = every_kind(&client, &name)
            .into_iter()
            .find(|(k, _)| *k == kind)
            .unwrap();
        let owner = Owner::new(7);
        let lock = lock.with_owner(owner);
        let lease = match end {
            End::Expiry => Duration::from_millis(60),
            _ => Duration::from_secs(30),
        };
        let g1 = lock.lock_with_lease(lease).await.unwrap();
        end_hold(fx, &other, &lock, end).await;
        let fresh = Duration::from_secs(30);
        let g2 = match race {
            Race::Joined => {
                let (g2, unlocked) = tokio::join!(lock.lock_with_lease(fresh), g1.unlock());
                match unlocked {
                    Ok(()) | Err(Error::NotHeld { .. }) => {}
                    Err(e) => panic!("{what}: unlock failed: {e}"),
                }
                g2.unwrap()
            }
            Race::DropThenTake => {
                drop(g1);
                lock.lock_with_lease(fresh).await.unwrap()
            }
            Race::CancelledTake => {
                let polls = rand::random::<u64>() % 4;
                let take = lock.lock_with_lease(fresh);
                // Polled a few times, then dropped: cancelled part-way.
                let cancelled = async move {
                    let mut take = Box::pin(take);
                    for _ in 0..polls {
                        if let Some(g) = (&mut take).now_or_never() {
                            return Some(g);
                        }
                        tokio::task::yield_now().await;
                    }
                    None
                };
                let (early, _) = tokio::join!(cancelled, g1.unlock());
                if let Some(Ok(g)) = early {
                    // It completed before it could be dropped: a guard.
                    assert_backed(fx, &excluder, &lock, owner, &[&g], &what).await;
                    g.unlock().await.unwrap();
                }
                lock.lock_with_lease(fresh).await.unwrap()
            }
        };
        assert!(
            !g2.is_lost(),
            "{what}: the fresh guard is lost at once: {:?} expires {:?}",
            g2.lost_reason(),
            g2.expires_at()
                .map(|t| t.saturating_duration_since(std::time::Instant::now()))
        );
        assert_backed(fx, &excluder, &lock, owner, &[&g2], &what).await;
        // Once every background release of the client has landed (its
        // shutdown waits for them), Redis still gives the owner the hold
        // that g2 was given.
        client.shutdown().await;
        assert!(
            fx.exists(lock.name()).await,
            "{what}: a stale release removed the fresh hold"
        );
        assert!(
            excluder.try_lock().await.unwrap().is_none(),
            "{what}: another client took the lock the fresh guard was given"
        );
        drop(g2);
        assert!(other.force_unlock().await.unwrap(), "{what}");
    }
}

macro_rules! ordering_tests {
    ($($test:ident: $end:expr, $race:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let fx = Fixture::new(stringify!($test)).await;
            for round in 0..ROUNDS {
                race(&fx, $end, $race, round).await;
            }
        }
    )*};
}

ordering_tests! {
    joined_after_expiry: End::Expiry, Race::Joined;
    joined_after_del: End::Del, Race::Joined;
    joined_after_forced_unlock: End::ForcedByOther, Race::Joined;
    drop_then_take_after_expiry: End::Expiry, Race::DropThenTake;
    drop_then_take_after_del: End::Del, Race::DropThenTake;
    drop_then_take_after_forced_unlock: End::ForcedByOther, Race::DropThenTake;
    cancelled_take_after_expiry: End::Expiry, Race::CancelledTake;
    cancelled_take_after_del: End::Del, Race::CancelledTake;
    cancelled_take_after_forced_unlock: End::ForcedByOther, Race::CancelledTake;
}
