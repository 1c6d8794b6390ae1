//! Watchdog renewal, lease expiry and the lost signal.
mod common;

use std::time::{Duration, Instant};

use common::{unique, Fixture, Server};
use fred::prelude::*;
use redisson_lock::{Error, Ttl};

#[tokio::test]
async fn watchdog_keeps_the_lock_past_three_timeouts() {
    let fx = Fixture::with("renew", |c| c.lock_watchdog_timeout(Duration::from_secs(1))).await;
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
    let fx = Fixture::with("lost", |c| c.lock_watchdog_timeout(Duration::from_secs(1))).await;
    let guard = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    assert!(!guard.is_lost());
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost within a renewal period or two");
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
        .try_lock_for(Duration::from_secs(10), None)
        .await
        .unwrap();
    assert!(next.is_some());
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(2),
        "woken by the TTL bound, after {waited:?}"
    );
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("lease ran out");
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    next.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn leased_lock_is_not_renewed() {
    let fx = Fixture::with("no-renew", |c| {
        c.lock_watchdog_timeout(Duration::from_millis(300))
    })
    .await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock
        .lock_with_lease(Duration::from_millis(600))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lease ran out");
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
    let client = server
        .client_with(|c| {
            c.lock_watchdog_timeout(Duration::from_millis(600))
                .lock_watchdog_batch_size(10)
        })
        .await;
    let raw = server.raw().await;
    let base = unique("batch");
    let mut guards = Vec::new();
    for i in 0..35 {
        guards.push(
            client
                .lock(&format!("{base}-{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
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
