//! The checks both semaphores pass alike, written once over [`Permits`]
//! and run for each (`alike::semaphore::*`, `alike::permit_semaphore::*`):
//! `Semaphore` asking for one permit (1 or 2 in the random steps) and
//! `PermitExpirableSemaphore` for one that never expires (or a leased one
//! in the random steps). Each ends by checking that nothing of its kind is
//! left in Redis (permit latches; the timeout zset).
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::fault::{client_behind_proxy, reset_stalled, two_second_budget, OUTAGE};
use crate::common::{assert_transient, eventually, numsub, sum_of, wait_numsub, Fixture, InUse};
use crate::semaphore_channel;
use fred::prelude::*;
use rand::Rng;
use redisson_lock::{
    Client, PermitExpirableSemaphore, PermitGuard, Result, Semaphore, SemaphorePermit,
};

/// A semaphore as these checks use it: permits asked for, tried, given
/// back, counted.
pub trait Permits: Clone + Send + Sync + 'static {
    /// What a taken permit is.
    type Permit: Send + 'static;
    /// What an acquisition asks for (a number of permits, a lease).
    type Ask: Copy + Send + 'static;
    /// The ask for one permit that never expires.
    const ONE: Self::Ask;
    /// The semaphore `name` of `client`.
    fn open(client: &Client, name: &str) -> Self;
    /// A random ask, and how many permits it takes.
    fn random_ask(rng: &mut impl Rng) -> (Self::Ask, i64);
    /// Sets the number of permits if none is set yet.
    fn try_set_permits(&self, permits: u32) -> impl Future<Output = Result<bool>> + Send;
    /// The permits free now.
    fn available_permits(&self) -> impl Future<Output = Result<i64>> + Send;
    /// Waits for the permits `ask` asks for.
    fn acquire(&self, ask: Self::Ask) -> impl Future<Output = Result<Self::Permit>> + Send;
    /// Takes the permits `ask` asks for if they are free now.
    fn try_acquire(
        &self,
        ask: Self::Ask,
    ) -> impl Future<Output = Result<Option<Self::Permit>>> + Send;
    /// Gives a permit back through its guard (which must have held).
    fn release(permit: Self::Permit) -> impl Future<Output = Result<()>> + Send;
    /// Gives a permit back without its guard, as a Java caller does (by
    /// count, by id).
    fn release_unguarded(&self, permit: Self::Permit) -> impl Future<Output = ()> + Send;
    /// Waits until nothing of the semaphore's own is left in Redis beside
    /// its count, and no permit is held.
    fn until_nothing_left(&self, fx: &Fixture) -> impl Future<Output = ()>;
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
        fn acquire(&self, ask: Self::Ask) -> impl Future<Output = Result<Self::Permit>> + Send {
            <$type>::acquire(self, ask)
        }
        fn try_acquire(
            &self,
            ask: Self::Ask,
        ) -> impl Future<Output = Result<Option<Self::Permit>>> + Send {
            <$type>::try_acquire(self, ask)
        }
    };
}

/// Asks for 1 or 2 permits; permit latches (`redisson_sc_latch:{N}:<id>`).
impl Permits for Semaphore {
    type Permit = SemaphorePermit;
    type Ask = u32;
    const ONE: u32 = 1;
    fn open(client: &Client, name: &str) -> Semaphore {
        client.semaphore(name).unwrap()
    }
    fn random_ask(rng: &mut impl Rng) -> (u32, i64) {
        let n = rng.random_range(1..=2u32);
        (n, i64::from(n))
    }
    counted!(Semaphore);
    fn release(permit: SemaphorePermit) -> impl Future<Output = Result<()>> + Send {
        permit.release()
    }
    async fn release_unguarded(&self, permit: SemaphorePermit) {
        let n = permit.permits();
        permit.forget();
        Semaphore::release(self, n).await.unwrap();
    }
    async fn until_nothing_left(&self, fx: &Fixture) {
        let latches = super::semaphore::latch_pattern(&fx.name);
        fx.until_no_keys("no permit latch left", &latches).await;
    }
}

/// Asks for one permit, with a lease or none; permits in the timeout zset
/// (`{N}:timeout`).
impl Permits for PermitExpirableSemaphore {
    type Permit = PermitGuard;
    type Ask = Option<Duration>;
    const ONE: Option<Duration> = None;
    fn open(client: &Client, name: &str) -> PermitExpirableSemaphore {
        client.permit_expirable_semaphore(name).unwrap()
    }
    fn random_ask(rng: &mut impl Rng) -> (Option<Duration>, i64) {
        (rng.random_bool(0.5).then_some(Duration::from_secs(60)), 1)
    }
    counted!(PermitExpirableSemaphore);
    async fn release(permit: PermitGuard) -> Result<()> {
        assert!(permit.release().await?, "the permit was held");
        Ok(())
    }
    async fn release_unguarded(&self, permit: PermitGuard) {
        let id = permit.id();
        permit.forget();
        assert!(self.try_release(&id).await.unwrap(), "released by its id");
    }
    async fn until_nothing_left(&self, fx: &Fixture) {
        assert_eq!(self.acquired_permits().await.unwrap(), 0);
        assert!(
            !fx.exists(self.timeouts_key()).await,
            "no permit left taken"
        );
    }
}

/// Each check below as a test of each semaphore, with the test attribute
/// given: `alike::semaphore::<check>` and `alike::permit_semaphore::<check>`.
macro_rules! for_both {
    ($(#[$test:meta] $check:ident)*) => {
        mod semaphore {
            $(
                #[$test]
                async fn $check() {
                    super::$check::<redisson_lock::Semaphore>("sem").await;
                }
            )*
        }
        mod permit_semaphore {
            $(
                #[$test]
                async fn $check() {
                    super::$check::<redisson_lock::PermitExpirableSemaphore>("pes").await;
                }
            )*
        }
    };
}

for_both!(
    #[tokio::test] dropped_waiters_and_cancelled_acquisitions_leak_nothing
    #[tokio::test] permits_come_back_after_an_outage_longer_than_the_retry_budget
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    never_above_the_limit_and_exact_after_10000_random_steps
);

/// The fixture's semaphore on `client`, its permits set to `permits`.
pub async fn set_up<S: Permits>(fx: &Fixture, client: &Client, permits: u32) -> S {
    let sem = S::open(client, &fx.name);
    assert!(sem.try_set_permits(permits).await.unwrap());
    sem
}

/// The semaphore's count, as Redis has it under its name.
async fn count(fx: &Fixture) -> Option<String> {
    fx.raw.get(&fx.name).await.unwrap()
}

/// A waiter aborted while it waits unsubscribes, and acquisitions cancelled
/// at every early point give their permits back: the one permit is free
/// again and nobody is left on `channel`.
async fn dropped_waiters_and_cancelled_acquisitions_leak_nothing<S: Permits>(prefix: &str) {
    let fx = &Fixture::new(prefix).await;
    let sem = &S::open(&fx.client, &fx.name);
    let channel = &semaphore_channel(&fx.name);
    assert!(sem.try_set_permits(1).await.unwrap());
    let held = sem.acquire(S::ONE).await.unwrap();
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire(S::ONE).await.map(drop) }
    });
    wait_numsub(&fx.raw, channel, 1).await;
    waiter.abort();
    let _ = waiter.await;
    wait_numsub(&fx.raw, channel, 0).await;
    S::release(held).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);

    // Cancelled at every early point of an uncontended acquisition.
    for micros in (0..400).step_by(20) {
        let _ = tokio::time::timeout(Duration::from_micros(micros), sem.acquire(S::ONE)).await;
    }
    eventually("every cancelled acquisition given back", || async {
        sem.available_permits().await.unwrap() == 1
    })
    .await;
    assert_eq!(numsub(&fx.raw, channel).await, 0);
    sem.until_nothing_left(fx).await;
}

/// A permit dropped, a permit whose awaited release runs out of retries,
/// and an acquisition whose reply was lost (it ran: it took a permit),
/// while the client is cut off for longer than its retry budget: every
/// give-back keeps trying and lands once the client reconnects, and the
/// count of 4 ends exact. `open` opens the semaphore on the cut-off client.
async fn permits_come_back_after_an_outage_longer_than_the_retry_budget<S: Permits>(prefix: &str) {
    let fx = &Fixture::new(prefix).await;
    let (proxy, client) = client_behind_proxy(fx, two_second_budget).await;
    let sem = S::open(&client, &fx.name);
    assert!(sem.try_set_permits(4).await.unwrap());
    let held = sem.acquire(S::ONE).await.unwrap(); // the scripts are loaded too
    let awaited = sem.acquire(S::ONE).await.unwrap();
    proxy.stall_to_client();
    let lost = tokio::spawn({
        let sem = sem.clone();
        async move { sem.try_acquire(S::ONE).await.map(drop) }
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
    assert_transient(&outcome);
    assert_eq!(client.pending_releases(), 2, "the release and the undo");
    tokio::time::sleep(OUTAGE.saturating_sub(cut_off.elapsed())).await;
    assert_eq!(count(fx).await.as_deref(), Some("1"), "cut off");
    assert!(client.pending_releases() >= 2, "still trying");
    reset_stalled(&proxy).await;
    let back = Instant::now();
    // Its retries ran out: it goes on in the background.
    let outcome = awaited.await.unwrap();
    assert_transient(&outcome);
    eventually("every give-back landed", || async {
        client.pending_releases() == 0
    })
    .await;
    eprintln!("landed {:?} after the reconnect", back.elapsed());
    assert_eq!(count(fx).await.as_deref(), Some("4"), "exact");
    sem.until_nothing_left(fx).await;
}

/// 8 tasks on two clients, 10 000 steps in all: acquire what a random ask
/// asks for (waiting, trying once, or cancelled at a random point), use
/// it, give it back by `release()`, without the guard (Java's way), or by
/// dropping it. Permits in use never exceed the limit; afterwards the count
/// is exactly the limit again, with nothing left and no subscription.
async fn never_above_the_limit_and_exact_after_10000_random_steps<S: Permits>(prefix: &str) {
    const LIMIT: i64 = 3;
    const TASKS: usize = 8;
    const STEPS: usize = 10_000;
    let fx = &Fixture::new(prefix).await;
    let clients = [fx.client.clone(), fx.client().await];
    let sem = S::open(&clients[0], &fx.name);
    assert!(sem.try_set_permits(LIMIT as u32).await.unwrap());
    let in_use = Arc::new(InUse::new(LIMIT));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let sem = S::open(&clients[t % 2], &fx.name);
        let in_use = in_use.clone();
        tasks.push(tokio::spawn(async move {
            let mut acquired = 0u64;
            for _ in 0..STEPS / TASKS {
                let ((ask, n), how, cancel_after, give_back) = {
                    let mut rng = rand::rng();
                    (
                        S::random_ask(&mut rng),
                        rng.random_range(0..4u32),
                        Duration::from_micros(rng.random_range(0..1_500)),
                        rng.random_range(0..3u32),
                    )
                };
                let permit = match how {
                    0 => sem.try_acquire(ask).await.unwrap(),
                    1 => match tokio::time::timeout(cancel_after, sem.acquire(ask)).await {
                        Ok(permit) => Some(permit.unwrap()),
                        Err(_) => None, // cancelled at a random await point
                    },
                    _ => Some(sem.acquire(ask).await.unwrap()),
                };
                let Some(permit) = permit else { continue };
                acquired += 1;
                in_use.enter(n);
                tokio::task::yield_now().await;
                in_use.leave(n);
                match give_back {
                    0 => S::release(permit).await.unwrap(),
                    1 => sem.release_unguarded(permit).await,
                    _ => drop(permit),
                }
            }
            acquired
        }));
    }
    let acquired = sum_of(tasks).await;
    assert!(acquired > STEPS as u64 / 2, "{acquired} acquisitions");
    assert!(in_use.max() >= 2);
    eventually("every permit back", || async {
        sem.available_permits().await.unwrap() == LIMIT
    })
    .await;
    sem.until_nothing_left(fx).await;
    wait_numsub(&fx.raw, &semaphore_channel(&fx.name), 0).await;
    // Stays exact: nothing still on its way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sem.available_permits().await.unwrap(), LIMIT);
    eprintln!("{acquired} acquisitions in {:?}", started.elapsed());
}
