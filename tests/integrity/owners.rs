//! Defect 1: a fresh acquisition by the same owner is never merged into a
//! stale hold of it; a stale guard never releases a hold it does not own.

use std::time::Duration;

use redisson_lock::{Error, LostReason, Owner};

use crate::common::{command_calls, eventually, Fixture};
use crate::every_kind;

const SHORT: Duration = Duration::from_millis(300);

/// The sequence, with the blocking API (one thread, its owner):
/// `g1` expires; `g2` takes the lock afresh. `g1` stays lost, its drop
/// releases nothing, and `g2` holds, so another client is refused.
#[test]
fn an_expired_guard_stays_lost_and_never_releases_the_next_hold() {
    let server = crate::common::Server::start();
    let url = server.url.clone();
    let name = crate::common::unique("fresh-after-expiry");
    let client = redisson_lock::blocking::BlockingClient::connect(&url).unwrap();
    let lock = client.lock(&name).unwrap();
    let g1 = lock.lock_with_lease(SHORT).unwrap();
    let other = redisson_lock::blocking::BlockingClient::connect(&url).unwrap();
    let theirs = other.lock(&name).unwrap();
    // Another client takes it once the key has expired: g1 was lost by then.
    let taken = theirs
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("free once g1's lease ran out");
    assert!(g1.is_lost(), "g1 must know its lease ended");
    taken.unlock().unwrap();
    let g2 = lock.lock_with_lease(Duration::from_secs(30)).unwrap();
    assert!(g1.is_lost(), "a fresh take must not revive g1");
    assert!(!g2.is_lost());
    drop(g1);
    assert!(lock.is_locked().unwrap(), "g1's drop released g2's hold");
    assert!(
        theirs.try_lock().unwrap().is_none(),
        "another client took the lock g2 holds"
    );
    assert!(!g2.is_lost());
    g2.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// For every kind: the key vanishes without a message (a plain `DEL`), the
/// owner takes it again (a fresh take, count 1): the old guard is told
/// (`Gone`), its unlock sends nothing and reports `NotHeld`, and the new
/// hold stays whole.
#[tokio::test]
async fn a_fresh_take_after_a_silent_delete_tells_the_old_guard() {
    let fx = Fixture::new("fresh-after-del").await;
    for (kind, lock) in every_kind(&fx.client, &fx.name) {
        let owner = Owner::new(41);
        let lock = lock.with_owner(owner);
        let key = lock.name().to_owned();
        let g1 = lock.lock().await.unwrap();
        let _: i64 = fred::interfaces::KeysInterface::del(&fx.raw, &key)
            .await
            .unwrap();
        assert!(!g1.is_lost(), "{kind}: nothing has told it yet");
        let g2 = lock.lock().await.unwrap();
        assert_eq!(g1.lost_reason(), Some(LostReason::Gone), "{kind}");
        assert!(!g2.is_lost(), "{kind}");
        let evals = command_calls(&fx.raw, "evalsha").await;
        let unlocked = g1.unlock().await;
        assert!(
            matches!(unlocked, Err(Error::NotHeld { .. })),
            "{kind}: {unlocked:?}"
        );
        assert_eq!(
            command_calls(&fx.raw, "evalsha").await,
            evals,
            "{kind}: a stale guard sent an unlock"
        );
        assert_eq!(lock.hold_count(owner).await.unwrap(), 1, "{kind}");
        g2.unlock().await.unwrap();
        assert!(!fx.exists(&key).await, "{kind}");
    }
}

/// `reenter()` on a guard whose key was deleted: refused, the guard told,
/// and nothing taken (the fresh take it made is released again).
#[tokio::test]
async fn reenter_after_a_silent_delete_is_refused_and_takes_nothing() {
    let fx = Fixture::new("reenter-after-del").await;
    for (kind, lock) in every_kind(&fx.client, &fx.name) {
        let key = lock.name().to_owned();
        let g1 = lock.lock().await.unwrap();
        let _: i64 = fred::interfaces::KeysInterface::del(&fx.raw, &key)
            .await
            .unwrap();
        let again = g1.reenter().await;
        assert!(
            matches!(again, Err(Error::NotHeld { .. })),
            "{kind}: {again:?}"
        );
        assert_eq!(g1.lost_reason(), Some(LostReason::Gone), "{kind}");
        assert!(!fx.exists(&key).await, "{kind}: the re-entry kept a hold");
    }
}

/// The orphan path: a re-acquisition by the same owner, cancelled once its
/// attempt was sent, after the old hold expired: its hold is released in
/// the background and the old guard stays lost (and refused).
#[tokio::test]
async fn a_cancelled_reacquire_never_revives_an_expired_guard() {
    let fx = Fixture::new("orphan-after-expiry").await;
    let owner = Owner::new(43);
    let lock = fx.client.lock(&fx.name).unwrap().with_owner(owner);
    let g1 = lock.lock_with_lease(SHORT).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), g1.lost()).await,
        Ok(LostReason::LeaseEnded)
    );
    eventually("the key expired", || async { !fx.exists(&fx.name).await }).await;
    let evals = command_calls(&fx.raw, "evalsha").await;
    let again = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await })
    };
    eventually("the re-acquisition sent its attempt", || async {
        command_calls(&fx.raw, "evalsha").await > evals
    })
    .await;
    again.abort();
    let _ = again.await;
    eventually("the cancelled acquisition's hold released", || async {
        !fx.exists(&fx.name).await
    })
    .await;
    assert_eq!(g1.lost_reason(), Some(LostReason::LeaseEnded));
    assert!(matches!(g1.unlock().await, Err(Error::NotHeld { .. })));
}
