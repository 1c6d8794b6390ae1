//! Watchdog permits (`acquire_renewed`, docs/PROTOCOL.md §7.6): kept past
//! their lease while their guard lives, by renewals Redis shows; lost when
//! released by their id elsewhere or not renewed in time; no longer renewed
//! once given back or kept.

use std::time::{Duration, Instant};

use super::{get, now_ms, timeouts, zset};
use crate::common::fault::{client_behind_proxy, quick_timeouts};
use crate::common::Fixture;
use redisson_lock::{LostReason, PermitExpirableSemaphore};

const WATCHDOG: Duration = Duration::from_millis(600);

async fn semaphore(fx: &Fixture, permits: u32) -> PermitExpirableSemaphore {
    let sem = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(permits).await.unwrap());
    sem
}

/// The permit's expiry score in the timeout zset, if it is there.
async fn score(fx: &Fixture) -> Option<i64> {
    let members = zset(fx, &timeouts(&fx.name)).await;
    assert!(members.len() <= 1, "{members:?}");
    members.first().map(|(_, s)| s.parse().unwrap())
}

/// Wait (at most `within`) until the permit's score has moved past `than`.
async fn renewed_past(fx: &Fixture, than: i64, within: Duration) -> i64 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = score(fx).await.filter(|s| *s > than) {
            return s;
        }
        assert!(Instant::now() < deadline, "not renewed past {than}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_renewed_permit_outlives_its_lease_while_its_guard_lives() {
    let fx = Fixture::with_watchdog("pes-renewed", WATCHDOG).await;
    let sem = semaphore(&fx, 1).await;
    let taken_ms = now_ms();
    let permit = sem.acquire_renewed().await.unwrap();
    assert!(permit.is_renewed());
    assert_eq!(permit.lease(), Some(WATCHDOG));
    let first = score(&fx).await.unwrap();
    // Taken with the watchdog's lease, on this client's clock.
    assert!(
        (first - taken_ms - 600).abs() < 200,
        "{first} vs {taken_ms}"
    );
    // Renewed every third of it, long past the first lease's end.
    let mut last = first;
    while now_ms() < first + 600 {
        last = renewed_past(&fx, last, Duration::from_secs(2)).await;
    }
    assert!(last > first + 300, "moved from {first} to {last}");
    assert!(!permit.is_lost());
    assert!(permit.expires_at().unwrap() > Instant::now());
    // Still the one permit taken: nobody else gets it.
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("0"));
    let other = fx
        .client()
        .await
        .permit_expirable_semaphore(&fx.name)
        .unwrap();
    assert!(other.try_acquire(None).await.unwrap().is_none());
    // Given back: nothing left, nothing renewed.
    assert!(permit.release().await.unwrap());
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"));
    assert!(!fx.exists(&timeouts(&fx.name)).await);
}

#[tokio::test]
async fn a_renewed_permit_released_by_its_id_elsewhere_is_lost() {
    let fx = Fixture::with_watchdog("pes-renewed-gone", WATCHDOG).await;
    let sem = semaphore(&fx, 1).await;
    let permit = sem.acquire_renewed().await.unwrap();
    let lost = permit.lost();
    let other = fx
        .client()
        .await
        .permit_expirable_semaphore(&fx.name)
        .unwrap();
    assert!(other.try_release(&permit.id()).await.unwrap());
    // Heard at the next renewal, a third of the lease later.
    let reason = tokio::time::timeout(Duration::from_secs(2), lost)
        .await
        .expect("the renewal found it gone");
    assert_eq!(reason, LostReason::Gone);
    assert_eq!(permit.lost_reason(), Some(LostReason::Gone));
    // Its release finds nothing, and counts nothing twice.
    assert!(!permit.release().await.unwrap());
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_renewed_permit_not_renewed_in_time_is_lost() {
    let fx = Fixture::new("pes-renewed-stall").await;
    let (proxy, client) =
        client_behind_proxy(&fx, |c| quick_timeouts(c).lock_watchdog_timeout(WATCHDOG)).await;
    let sem = client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire_renewed().await.unwrap();
    let lost = permit.lost();
    proxy.stall_to_client();
    let stalled = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(3), lost)
        .await
        .expect("lost when its lease could have run out");
    assert_eq!(reason, LostReason::NotRenewed);
    // No later than the lease allows.
    assert!(stalled.elapsed() <= WATCHDOG + Duration::from_millis(300));
    proxy.resume();
    drop(permit);
}

#[tokio::test]
async fn a_kept_renewed_permit_is_no_longer_renewed_and_comes_back() {
    let fx = Fixture::with_watchdog("pes-renewed-kept", WATCHDOG).await;
    let sem = semaphore(&fx, 1).await;
    let permit = sem.acquire_renewed().await.unwrap();
    let first = score(&fx).await.unwrap();
    let second = renewed_past(&fx, first, Duration::from_secs(2)).await;
    permit.forget();
    // It comes back when the last renewal's lease runs out, to a waiter.
    let other = fx
        .client()
        .await
        .permit_expirable_semaphore(&fx.name)
        .unwrap();
    let got = other
        .try_acquire_for(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("the kept permit came back");
    assert!(now_ms() >= second, "not before its last lease ran out");
    assert!(got.release().await.unwrap());

    // A dropped guard gives it back at once.
    let permit = sem.acquire_renewed().await.unwrap();
    drop(permit);
    let back = other
        .try_acquire_for(Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("the dropped permit came back");
    assert!(back.release().await.unwrap());
}
