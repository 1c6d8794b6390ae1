//! The exact state after every operation, and expired permits coming
//! back.

use std::time::{Duration, Instant};

use super::{channel, get, hex, now_ms, timeouts, zset, NEVER};
use crate::alike;
use crate::common::{eventually, wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::{PermitExpirableSemaphore, PermitId, PermitLease};

#[tokio::test]
async fn every_operation_leaves_the_spec_state() {
    let fx = Fixture::new("pes-state").await;
    let name = &fx.name;
    let z = timeouts(name);
    let sem = fx.client.permit_expirable_semaphore(name).unwrap();
    assert_eq!(sem.timeouts_key(), z);
    assert_eq!(sem.channel(), channel(name));
    let mut listener = fx.listen(&channel(name)).await;

    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(!sem.try_set_permits(4).await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));

    // A leased permit: its 16 bytes in the zset, scored now + lease.
    let before = now_ms();
    let leased = sem.acquire(Some(Duration::from_secs(10))).await.unwrap();
    let after = now_ms();
    assert_eq!(get(&fx, name).await.as_deref(), Some("2"));
    let members = zset(&fx, &z).await;
    assert_eq!(members.len(), 1);
    assert_eq!(
        members[0].0,
        leased.id().as_bytes().to_vec(),
        "16 raw bytes"
    );
    assert_eq!(
        leased.id().to_string(),
        hex(&members[0].0),
        "shown as Java shows it"
    );
    let score: i64 = members[0].1.parse().unwrap();
    assert!(
        (before + 10_000..=after + 10_000).contains(&score),
        "{score}"
    );
    assert_eq!(leased.lease(), Some(Duration::from_secs(10)));
    assert!(leased.expires_at().is_some());
    assert_eq!(fx.pttl(&z).await, -1, "no TTL: N has none");

    // A permit without a lease: the never-expires sentinel.
    let forever = sem.acquire(None).await.unwrap();
    assert_eq!(forever.lease(), None);
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"));
    let members = zset(&fx, &z).await;
    assert_eq!(members.len(), 2);
    assert_eq!(members[1].0, forever.id().as_bytes().to_vec());
    assert_eq!(members[1].1, NEVER);

    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert_eq!(sem.acquired_permits().await.unwrap(), 2);
    assert_eq!(sem.permits().await.unwrap(), 3);

    match sem.lease_time(&leased.id()).await.unwrap() {
        Some(PermitLease::Expires(left)) => assert!(left <= Duration::from_secs(10)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sem.lease_time(&forever.id()).await.unwrap(),
        Some(PermitLease::Never)
    );
    let unknown = PermitId::random();
    assert_eq!(sem.lease_time(&unknown).await.unwrap(), None);

    let before = now_ms();
    assert!(sem
        .update_lease_time(&leased.id(), Duration::from_secs(20))
        .await
        .unwrap());
    let score: i64 = zset(&fx, &z).await[0].1.parse().unwrap();
    assert!((before + 20_000..=now_ms() + 20_000).contains(&score));
    assert!(!sem
        .update_lease_time(&unknown, Duration::from_secs(1))
        .await
        .unwrap());

    // Unknown ids: false, nothing written, nothing published.
    assert!(!sem.try_release(&unknown).await.unwrap());
    assert_eq!(
        sem.try_release_all(&[leased.id(), unknown]).await.unwrap(),
        0
    );
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"));
    assert_eq!(zset(&fx, &z).await.len(), 2);

    // Release: ZREM, INCRBY, the new count published.
    assert!(leased.release().await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("2"));
    assert_eq!(zset(&fx, &z).await.len(), 1);
    let id = forever.id();
    forever.forget();
    assert_eq!(zset(&fx, &z).await.len(), 1, "forget sends nothing");
    assert!(sem.try_release(&id).await.unwrap(), "released by id");
    assert!(!sem.try_release(&id).await.unwrap(), "once");
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));
    assert!(!fx.exists(&z).await);

    // Several at once: the number released is published (not the total).
    let (a, b) = (
        sem.acquire(None).await.unwrap(),
        sem.acquire(None).await.unwrap(),
    );
    let ids = [a.id(), b.id()];
    a.forget();
    b.forget();
    assert_eq!(sem.try_release_all(&ids).await.unwrap(), 2);
    assert_eq!(sem.try_release_all(&[]).await.unwrap(), 0);
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));

    // setPermits sets the total (available + taken) and publishes it;
    // addPermits publishes the change, only if positive.
    let held = sem.acquire(None).await.unwrap();
    sem.set_permits(5).await.unwrap();
    assert_eq!(
        get(&fx, name).await.as_deref(),
        Some("4"),
        "5 in all, 1 taken"
    );
    sem.set_permits(5).await.unwrap(); // unchanged: nothing published
    sem.add_permits(2).await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("6"));
    sem.add_permits(-1).await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("5"));
    drop(held);
    eventually("the dropped permit given back", || async {
        get(&fx, name).await.as_deref() == Some("6")
    })
    .await;

    // The zset takes the TTL of N when a permit is acquired.
    let _: bool = fx.raw.pexpire(name, 60_000, None).await.unwrap();
    let last = sem.acquire(None).await.unwrap();
    let pttl = fx.pttl(&z).await;
    assert!((59_000..=60_000).contains(&pttl), "{pttl}");
    assert!(last.release().await.unwrap());

    assert_eq!(
        listener.drain().await,
        ["3", "2", "3", "2", "5", "2", "6", "6"],
        "trySetPermits 3, release -> 2, release by id -> 3, release of 2 ids -> 2, \
         setPermits 5, addPermits 2 -> 2, the dropped permit -> 6, release -> 6"
    );
    // setPermits with no semaphore at all.
    let fresh = fx
        .client
        .permit_expirable_semaphore(&format!("{name}-fresh"))
        .unwrap();
    fresh.set_permits(2).await.unwrap();
    assert_eq!(fresh.available_permits().await.unwrap(), 2);
}

/// A permit whose lease ran out comes back by itself and wakes a waiter on
/// another client, which sleeps only until that expiry (no message is sent
/// for an expiry): long before its own timeout.
#[tokio::test]
async fn an_expired_permit_comes_back_and_wakes_a_waiter() {
    let fx = Fixture::new("pes-expiry").await;
    let other = fx.client().await;
    let sem: PermitExpirableSemaphore = alike::set_up(&fx, &fx.client, 1).await;
    let crashed = sem.acquire(Some(Duration::from_millis(500))).await.unwrap();
    let taken_at = Instant::now();
    let crashed_id = crashed.id();
    crashed.forget(); // a worker that died holding it
    let waiter = tokio::spawn({
        let sem = other.permit_expirable_semaphore(&fx.name).unwrap();
        async move {
            let permit = sem
                .try_acquire_for(Duration::from_secs(20), None)
                .await
                .unwrap()
                .expect("the expired permit came back");
            (Instant::now(), permit)
        }
    });
    let (at, permit) = waiter.await.unwrap();
    let waited = at - taken_at;
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_secs(3),
        "woke {waited:?} after the 500 ms permit was taken"
    );
    let members = zset(&fx, &timeouts(&fx.name)).await;
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].0, permit.id().as_bytes().to_vec());
    assert!(!sem.try_release(&crashed_id).await.unwrap(), "reclaimed");
    assert!(permit.release().await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
}
