//! Deployments beyond one server (the kit's [`redisson_lock_testkit::topology`]),
//! and [`Standoff`]: a lock held and awaited across a fault, the common shape
//! of the failover tests.

use std::time::{Duration, Instant};

use redisson_lock::Client;

pub use redisson_lock_testkit::topology::*;

/// Runs the scenario `name`, logging its start and how long it took.
pub async fn timed<T>(name: &str, scenario: impl std::future::Future<Output = T>) -> T {
    let at = Instant::now();
    eprintln!("-- {name}");
    let out = scenario.await;
    eprintln!("   {name} ok in {:?}", at.elapsed());
    out
}

/// A lock held by one client and awaited by another, across a fault: the
/// common shape of the failover tests.
pub struct Standoff {
    pub holder: Client,
    pub waiting: Client,
    pub name: String,
    pub channel: String,
    pub guard: redisson_lock::LockGuard<redisson_lock::Reentrant>,
    waiter: tokio::task::JoinHandle<
        redisson_lock::Result<Option<redisson_lock::LockGuard<redisson_lock::Reentrant>>>,
    >,
}

impl Standoff {
    /// `holder` takes `name`; a task of `waiting` waits for it (60 s at
    /// most) and has subscribed once `subscribed(channel)` says so.
    pub async fn start<F, Fut>(
        holder: Client,
        waiting: Client,
        name: String,
        subscribed: F,
    ) -> Standoff
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let guard = holder.lock(&name).unwrap().lock().await.unwrap();
        let lock = waiting.lock(&name).unwrap();
        let channel = lock.channel().to_string();
        let waiter = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await });
        until("the waiter subscribed", Duration::from_secs(5), || {
            let check = subscribed(channel.clone());
            async move { check.await.then_some(()) }
        })
        .await;
        Standoff {
            holder,
            waiting,
            name,
            channel,
            guard,
            waiter,
        }
    }

    /// After the fault (and a lease, so the holder knows where it stands):
    /// either the holder was told it lost the lock and the waiter gets it,
    /// or the holder still holds it (checked in Redis), the waiter does not
    /// hold it too, and the unlock wakes it (by publish: within 5 s, long
    /// before the 30 s lease). Then both clients shut down.
    pub async fn settle(self, what: &str) {
        let held = self.guard.is_held().await;
        eprintln!(
            "   {what}: holder lost={} held={held:?}",
            self.guard.is_lost()
        );
        if self.guard.is_lost() {
            let got = self
                .waiter
                .await
                .unwrap()
                .unwrap()
                .expect("the waiter gets it");
            got.unlock().await.unwrap();
        } else {
            assert!(matches!(held, Ok(true)), "not lost means held: {held:?}");
            assert!(!self.waiter.is_finished(), "the waiter must not hold too");
            let unlocked = Instant::now();
            self.guard.unlock().await.unwrap();
            let got = self
                .waiter
                .await
                .unwrap()
                .unwrap()
                .expect("woken after the fault");
            let woke = unlocked.elapsed();
            eprintln!("   {what}: waiter woken {woke:?} after the unlock");
            assert!(woke < Duration::from_secs(5), "woken by publish: {woke:?}");
            got.unlock().await.unwrap();
        }
        self.holder.shutdown().await;
        self.waiting.shutdown().await;
    }
}
