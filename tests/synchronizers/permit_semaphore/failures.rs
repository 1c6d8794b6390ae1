//! Dropped waiters, lost replies, bad input, and the blocking form's late
//! drops.

use std::time::{Duration, Instant};

use super::{channel, get, timeouts};
use crate::alike;
use crate::common;
use crate::common::fault::{proxied, quick_timeouts};
use crate::common::{invalid, wait_numsub_blocking, Fixture};
use fred::prelude::*;
use redisson_lock::{Error, PermitId, PermitLease, MAX_DURATION};

#[tokio::test]
async fn dropped_waiters_and_cancelled_acquisitions_leak_nothing() {
    let fx = Fixture::new("pes-drop").await;
    let sem = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    alike::dropped_waiters_and_cancelled_acquisitions_leak_nothing(&fx, &sem, &channel(&fx.name))
        .await;
    assert_eq!(sem.acquired_permits().await.unwrap(), 0);
}

/// An acquisition whose reply is lost is released by its id right behind it.
#[tokio::test]
async fn a_lost_acquire_reply_is_undone_by_its_id() {
    let fx = Fixture::new("pes-lost").await;
    let (proxy, client) = proxied(&fx, quick_timeouts).await;
    let sem = client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    assert!(sem.acquire(None).await.unwrap().release().await.unwrap()); // scripts loaded
    let mut listener = fx.listen(&channel(&fx.name)).await;
    proxy.stall_to_client();
    let outcome = sem.try_acquire(None).await;
    assert!(
        matches!(&outcome, Err(e) if e.is_transient()),
        "{outcome:?}"
    );
    // It ran (took the permit), then its undo gave it back: "1" published.
    let heard = listener.next().await;
    assert_eq!(heard.value.as_string().as_deref(), Some("1"));
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"));
    assert!(!fx.exists(&timeouts(&fx.name)).await);
    proxy.resume();
    let permit = sem.acquire(None).await.unwrap();
    assert!(permit.release().await.unwrap());
}

/// Never-expiring permits come back by their ids after an outage longer
/// than the retry budget, and none is left taken.
#[tokio::test]
async fn permits_come_back_after_an_outage_longer_than_the_retry_budget() {
    let fx = Fixture::new("pes-outage").await;
    alike::permits_come_back_after_an_outage_longer_than_the_retry_budget(&fx, |client| {
        client.permit_expirable_semaphore(&fx.name).unwrap()
    })
    .await;
    assert!(
        !fx.exists(&timeouts(&fx.name)).await,
        "no permit left taken"
    );
}

#[tokio::test]
async fn bad_input_gets_typed_errors_and_writes_nothing() {
    let fx = Fixture::new("pes-bad").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let sem = common::named(|n| client.permit_expirable_semaphore(n), name);
    for lease in [
        Duration::ZERO,
        Duration::from_micros(999),
        MAX_DURATION + Duration::from_millis(1),
        Duration::MAX,
    ] {
        assert!(invalid(&sem.acquire(Some(lease)).await));
        assert!(invalid(
            &sem.try_acquire_for(Duration::from_secs(1), Some(lease))
                .await
        ));
        assert!(invalid(
            &sem.update_lease_time(&PermitId::random(), lease).await
        ));
    }
    assert!(invalid(&sem.set_permits(i32::MAX as u32 + 1).await));
    for text in [
        String::new(),
        "xyz".into(),
        "0".repeat(31),
        "g".repeat(32),
        "0".repeat(33),
    ] {
        assert!(invalid(&text.parse::<PermitId>()));
    }
    assert!(!fx.exists(name).await);

    // Keys of the wrong type: N a hash, or the zset a string.
    let _: () = raw.hset(name, ("f", "1")).await.unwrap();
    let wrong = |r: redisson_lock::Result<()>| matches!(r, Err(Error::WrongType { .. }));
    assert!(wrong(sem.acquire(None).await.map(drop)));
    assert!(wrong(sem.available_permits().await.map(drop)));
    assert!(wrong(sem.try_release(&PermitId::random()).await.map(drop)));
    assert!(wrong(sem.set_permits(1).await));
    assert!(wrong(sem.add_permits(1).await));
    let _: i64 = raw.del(name).await.unwrap();
    let _: () = raw
        .set(timeouts(name), "x", None, None, false)
        .await
        .unwrap();
    let _: () = raw.set(name, "1", None, None, false).await.unwrap();
    assert!(wrong(sem.acquire(None).await.map(drop)));
    assert!(wrong(sem.acquired_permits().await.map(drop)));
    assert!(wrong(
        sem.get_lease_time(&PermitId::random()).await.map(drop)
    ));
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"), "untouched");
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_permit_expirable_semaphore_and_late_drops() {
    let (server, _client, name, sem) =
        common::blocking_handle("pes-blocking", |c, n| c.permit_expirable_semaphore(n));
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(permit.lease(), Some(Duration::from_secs(30)));
    let id = permit.id();
    assert!(matches!(
        sem.get_lease_time(&id).unwrap(),
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
    wait_numsub_blocking(&server, &channel(&name), 1);
    drop(permit); // synchronous release
    assert!(matches!(waiter.join().unwrap(), Some(Ok(true))));
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert_eq!(sem.acquired_permits().unwrap(), 0);

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
