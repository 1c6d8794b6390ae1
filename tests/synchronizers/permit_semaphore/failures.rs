//! Lost replies and bad input.

use std::time::Duration;

use super::{channel, get, timeouts};
use crate::alike;
use crate::common;
use crate::common::fault::{client_behind_proxy, quick_timeouts};
use crate::common::{assert_transient, invalid, Fixture};
use fred::prelude::*;
use redisson_lock::{Error, PermitExpirableSemaphore, PermitId, MAX_DURATION};

/// An acquisition whose reply is lost is released by its id right behind it.
#[tokio::test]
async fn a_lost_acquire_reply_is_undone_by_its_id() {
    let fx = Fixture::new("pes-lost").await;
    let (proxy, client) = client_behind_proxy(&fx, quick_timeouts).await;
    let sem: PermitExpirableSemaphore = alike::set_up(&fx, &client, 1).await;
    assert!(sem.acquire(None).await.unwrap().release().await.unwrap()); // scripts loaded
    let mut listener = fx.listen(&channel(&fx.name)).await;
    proxy.stall_to_client();
    let outcome = sem.try_acquire(None).await;
    assert_transient(&outcome);
    // It ran (took the permit), then its undo gave it back: "1" published.
    let heard = listener.next().await;
    assert_eq!(heard.value.as_string().as_deref(), Some("1"));
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"));
    assert!(!fx.exists(&timeouts(&fx.name)).await);
    proxy.resume();
    let permit = sem.acquire(None).await.unwrap();
    assert!(permit.release().await.unwrap());
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
        let err = text.parse::<PermitId>().unwrap_err();
        assert!(matches!(Error::from(err), Error::InvalidArgument(_)));
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
    assert!(wrong(sem.lease_time(&PermitId::random()).await.map(drop)));
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"), "untouched");
}
