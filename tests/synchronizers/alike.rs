//! The checks both semaphores pass alike, written once: `Semaphore` taking
//! one permit at a time and `PermitExpirableSemaphore` with permits that
//! never expire. Each test calls one of these and then checks what only
//! its own kind leaves in Redis (permit latches, the timeout zset).
use std::future::Future;
use std::time::{Duration, Instant};

use crate::common::fault::{proxied, reset_stalled, two_second_budget, OUTAGE};
use crate::common::{eventually, numsub, wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::{
    Client, PermitExpirableSemaphore, PermitGuard, Result, Semaphore, SemaphorePermit,
};

/// One permit of a semaphore: taken, tried, given back, counted.
pub trait OnePermit: Clone + Send + Sync + 'static {
    /// What a taken permit is.
    type Permit: Send + 'static;
    /// Sets the number of permits if none is set yet.
    fn try_set_permits(&self, permits: u32) -> impl Future<Output = Result<bool>> + Send;
    /// The permits free now.
    fn available_permits(&self) -> impl Future<Output = Result<i64>> + Send;
    /// Waits for one permit.
    fn acquire(&self) -> impl Future<Output = Result<Self::Permit>> + Send;
    /// Takes one permit if one is free now.
    fn try_acquire(&self) -> impl Future<Output = Result<Option<Self::Permit>>> + Send;
    /// Gives a permit back (the permit semaphore's must have been held).
    fn release(permit: Self::Permit) -> impl Future<Output = Result<()>> + Send;
}

/// The methods both types have under the same names.
macro_rules! counted {
    ($type:ty) => {
        fn try_set_permits(&self, permits: u32) -> impl Future<Output = Result<bool>> + Send {
            <$type>::try_set_permits(self, permits)
        }
        fn available_permits(&self) -> impl Future<Output = Result<i64>> + Send {
            <$type>::available_permits(self)
        }
    };
}

impl OnePermit for Semaphore {
    type Permit = SemaphorePermit;
    counted!(Semaphore);
    fn acquire(&self) -> impl Future<Output = Result<SemaphorePermit>> + Send {
        Semaphore::acquire(self, 1)
    }
    fn try_acquire(&self) -> impl Future<Output = Result<Option<SemaphorePermit>>> + Send {
        Semaphore::try_acquire(self, 1)
    }
    fn release(permit: SemaphorePermit) -> impl Future<Output = Result<()>> + Send {
        permit.release()
    }
}

impl OnePermit for PermitExpirableSemaphore {
    type Permit = PermitGuard;
    counted!(PermitExpirableSemaphore);
    fn acquire(&self) -> impl Future<Output = Result<PermitGuard>> + Send {
        PermitExpirableSemaphore::acquire(self, None)
    }
    fn try_acquire(&self) -> impl Future<Output = Result<Option<PermitGuard>>> + Send {
        PermitExpirableSemaphore::try_acquire(self, None)
    }
    async fn release(permit: PermitGuard) -> Result<()> {
        assert!(permit.release().await?, "the permit was held");
        Ok(())
    }
}

/// The semaphore's count, as Redis has it under its name.
async fn count(fx: &Fixture) -> Option<String> {
    fx.raw.get(&fx.name).await.unwrap()
}

/// A waiter aborted while it waits unsubscribes, and acquisitions cancelled
/// at every early point give their permits back: the one permit is free
/// again and nobody is left on `channel`.
pub async fn dropped_waiters_and_cancelled_acquisitions_leak_nothing<S: OnePermit>(
    fx: &Fixture,
    sem: &S,
    channel: &str,
) {
    assert!(sem.try_set_permits(1).await.unwrap());
    let held = sem.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire().await.map(drop) }
    });
    wait_numsub(&fx.raw, channel, 1).await;
    waiter.abort();
    let _ = waiter.await;
    wait_numsub(&fx.raw, channel, 0).await;
    S::release(held).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);

    // Cancelled at every early point of an uncontended acquisition.
    for micros in (0..400).step_by(20) {
        let _ = tokio::time::timeout(Duration::from_micros(micros), sem.acquire()).await;
    }
    eventually("every cancelled acquisition given back", || async {
        sem.available_permits().await.unwrap() == 1
    })
    .await;
    assert_eq!(numsub(&fx.raw, channel).await, 0);
}

/// A permit dropped, a permit whose awaited release runs out of retries,
/// and an acquisition whose reply was lost (it ran: it took a permit),
/// while the client is cut off for longer than its retry budget: every
/// give-back keeps trying and lands once the client reconnects, and the
/// count of 4 ends exact. `open` opens the semaphore on the cut-off client.
pub async fn permits_come_back_after_an_outage_longer_than_the_retry_budget<S: OnePermit>(
    fx: &Fixture,
    open: impl FnOnce(&Client) -> S,
) {
    let (proxy, client) = proxied(fx, two_second_budget).await;
    let sem = open(&client);
    assert!(sem.try_set_permits(4).await.unwrap());
    let held = sem.acquire().await.unwrap(); // the scripts are loaded too
    let awaited = sem.acquire().await.unwrap();
    proxy.stall_to_client();
    let lost = tokio::spawn({
        let sem = sem.clone();
        async move { sem.try_acquire().await.map(drop) }
    });
    eventually("the attempt ran", || async {
        count(fx).await.as_deref() == Some("1")
    })
    .await;
    // From now on nothing the client sends reaches Redis.
    proxy.stall_to_server();
    let cut_off = Instant::now();
    drop(held);
    let awaited = tokio::spawn(S::release(awaited));
    let outcome = lost.await.unwrap();
    assert!(
        matches!(&outcome, Err(e) if e.is_transient()),
        "{outcome:?}"
    );
    assert_eq!(client.pending_releases(), 2, "the release and the undo");
    tokio::time::sleep(OUTAGE.saturating_sub(cut_off.elapsed())).await;
    assert_eq!(count(fx).await.as_deref(), Some("1"), "cut off");
    assert!(client.pending_releases() >= 2, "still trying");
    reset_stalled(&proxy).await;
    let back = Instant::now();
    // Its retries ran out: it goes on in the background.
    let outcome = awaited.await.unwrap();
    assert!(
        matches!(&outcome, Err(e) if e.is_transient()),
        "{outcome:?}"
    );
    eventually("every give-back landed", || async {
        client.pending_releases() == 0
    })
    .await;
    eprintln!("landed {:?} after the reconnect", back.elapsed());
    assert_eq!(count(fx).await.as_deref(), Some("4"), "exact");
}
