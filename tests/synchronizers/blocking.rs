//! The blocking forms of the synchronizers (feature `blocking`): a waiter
//! on another thread woken by a permit given back or the last count-down,
//! the object methods, and guards dropped after their runtime is gone.
#![cfg(feature = "blocking")]

use std::time::{Duration, Instant};

use crate::common;
use crate::common::wait_numsub_blocking;
use redisson_lock::{LatchOpened, PermitLease};

#[test]
fn blocking_semaphore() {
    let (server, _client, name, sem) =
        common::blocking_handle("sem-blocking", |c, n| c.semaphore(n));
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire(1).unwrap();
    assert!(sem.try_acquire(1).unwrap().is_none());
    let waiter = std::thread::spawn({
        let sem = sem.clone();
        move || {
            sem.try_acquire_permits_for(1, Duration::from_secs(20))
                .unwrap()
                .map(|p| p.release())
        }
    });
    // Release once the waiter waits (it subscribed), so the publish wakes it.
    wait_numsub_blocking(&server, sem.as_async().channel(), 1);
    drop(permit); // synchronous release, wakes the other thread
    assert!(matches!(waiter.join().unwrap(), Some(Ok(()))));
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert_eq!(sem.drain_permits().unwrap(), 1);
    sem.release(1).unwrap();
    let as_async: &redisson_lock::Semaphore = sem.as_async();
    assert_eq!(as_async.name(), name);
    // The object methods, blocking.
    assert!(sem.exists().unwrap());
    assert!(sem.expire(Duration::from_secs(60)).unwrap());
    assert!(matches!(
        sem.remain_time_to_live().unwrap(),
        redisson_lock::Ttl::Expires(_)
    ));
    assert!(sem.clear_expire().unwrap());
    assert!(sem.delete().unwrap());
    assert!(!sem.exists().unwrap());
}

#[test]
fn blocking_permit_expirable_semaphore_and_late_drops() {
    let (server, _client, name, sem) =
        common::blocking_handle("pes-blocking", |c, n| c.permit_expirable_semaphore(n));
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(permit.lease(), Some(Duration::from_secs(30)));
    let id = permit.id();
    assert!(matches!(
        sem.lease_time(&id).unwrap(),
        Some(PermitLease::Expires(_))
    ));
    let waiter = std::thread::spawn({
        let sem = sem.clone();
        move || {
            sem.try_acquire_for(Duration::from_secs(20), None)
                .unwrap()
                .map(|p| p.release())
        }
    });
    // Release once the waiter waits (it subscribed), so the publish wakes it.
    wait_numsub_blocking(&server, sem.as_async().channel(), 1);
    drop(permit); // synchronous release
    assert!(matches!(waiter.join().unwrap(), Some(Ok(true))));
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert_eq!(sem.acquired_permits().unwrap(), 0);

    // A renewed permit: taken with the watchdog's lease, renewed, released.
    let renewed = sem.acquire_renewed().unwrap();
    assert!(renewed.is_renewed() && !renewed.is_lost());
    assert_eq!(renewed.lost_reason(), None);
    assert!(sem
        .try_acquire_renewed_for(Duration::ZERO)
        .unwrap()
        .is_none());
    assert!(renewed.release().unwrap());
    assert_eq!(sem.available_permits().unwrap(), 1);

    // A guard dropped after its runtime is gone does not panic.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (async_client, guard) = runtime.block_on(async {
        let c = server.client().await;
        let g = c
            .permit_expirable_semaphore(&name)
            .unwrap()
            .acquire(Some(Duration::from_secs(1)))
            .await
            .unwrap();
        (c, g)
    });
    drop(runtime);
    drop(guard);
    drop(async_client);
    // Its permit comes back when its lease runs out.
    let deadline = Instant::now() + Duration::from_secs(5);
    while sem.available_permits().unwrap() != 1 {
        assert!(Instant::now() < deadline, "the late permit came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn blocking_latch() {
    let (_server, _client, _, latch) =
        common::blocking_handle("latch-blocking", |c, n| c.count_down_latch(n));
    assert!(latch.try_set_count(2).unwrap());
    let awaiter = std::thread::spawn({
        let latch = latch.clone();
        move || latch.await_zero()
    });
    latch.count_down().unwrap();
    assert_eq!(latch.count().unwrap(), 1);
    latch.count_down().unwrap();
    assert_eq!(awaiter.join().unwrap().unwrap(), LatchOpened::Zero);
    assert_eq!(
        latch.await_for(Duration::from_millis(10)).unwrap(),
        Some(LatchOpened::Zero)
    );
    assert!(!latch.delete().unwrap());
}
