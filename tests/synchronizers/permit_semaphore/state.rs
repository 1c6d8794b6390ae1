//! The exact state after every operation, expired permits coming back,
//! and the limit under random steps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{channel, get, hex, now_ms, timeouts, zset, NEVER};
use crate::common::{eventually, sum_of, wait_numsub, Fixture, InUse};
use fred::prelude::*;
use rand::Rng;
use redisson_lock::{PermitId, PermitLease};

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

    match sem.get_lease_time(&leased.id()).await.unwrap() {
        Some(PermitLease::Expires(left)) => assert!(left <= Duration::from_secs(10)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sem.get_lease_time(&forever.id()).await.unwrap(),
        Some(PermitLease::Never)
    );
    let unknown = PermitId::random();
    assert_eq!(sem.get_lease_time(&unknown).await.unwrap(), None);

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
    let sem = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
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

/// 8 tasks on two clients, 10 000 steps: acquire (with a long lease or
/// none; waiting, trying once, or cancelled at a random point), use, give
/// back by `release()`, by id, or by dropping. Never above the limit; the
/// counts exact afterwards, the zset empty, no subscription left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_above_the_limit_and_exact_after_10000_random_steps() {
    const LIMIT: i64 = 3;
    const TASKS: usize = 8;
    const STEPS: usize = 10_000;
    let fx = Fixture::new("pes-random").await;
    let clients = [fx.client.clone(), fx.client().await];
    let sem = clients[0].permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(LIMIT as u32).await.unwrap());
    let in_use = Arc::new(InUse::new(LIMIT));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let sem = clients[t % 2].permit_expirable_semaphore(&fx.name).unwrap();
        let in_use = in_use.clone();
        tasks.push(tokio::spawn(async move {
            let mut acquired = 0u64;
            for _ in 0..STEPS / TASKS {
                let (lease, how, cancel_after, release) = {
                    let mut rng = rand::rng();
                    (
                        rng.random_bool(0.5).then_some(Duration::from_secs(60)),
                        rng.random_range(0..4u32),
                        Duration::from_micros(rng.random_range(0..1_500)),
                        rng.random_range(0..3u32),
                    )
                };
                let permit = match how {
                    0 => sem.try_acquire(lease).await.unwrap(),
                    1 => match tokio::time::timeout(cancel_after, sem.acquire(lease)).await {
                        Ok(permit) => Some(permit.unwrap()),
                        Err(_) => None,
                    },
                    _ => Some(sem.acquire(lease).await.unwrap()),
                };
                let Some(permit) = permit else { continue };
                acquired += 1;
                in_use.enter(1);
                tokio::task::yield_now().await;
                in_use.leave(1);
                match release {
                    0 => assert!(permit.release().await.unwrap()),
                    1 => {
                        let id = permit.id();
                        permit.forget();
                        assert!(sem.try_release(&id).await.unwrap());
                    }
                    _ => drop(permit),
                }
            }
            acquired
        }));
    }
    let acquired = sum_of(tasks).await;
    assert!(acquired > STEPS as u64 / 2, "{acquired} acquisitions");
    eventually("every permit back", || async {
        sem.available_permits().await.unwrap() == LIMIT
    })
    .await;
    assert_eq!(sem.acquired_permits().await.unwrap(), 0);
    assert!(!fx.exists(&timeouts(&fx.name)).await);
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sem.available_permits().await.unwrap(), LIMIT);
    eprintln!("{acquired} acquisitions in {:?}", started.elapsed());
}
