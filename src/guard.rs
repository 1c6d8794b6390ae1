//! [`LockGuard`]: proof of one hold, released on unlock or drop.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use crate::detach::FinishOnDrop;
use crate::error::Result;
use crate::lock::{release, RLock};
use crate::owner::Owner;
use crate::watchdog::{self, Lease, Status};

/// One hold of a lock. Release it with [`unlock`](Self::unlock) to learn
/// whether that worked; a guard dropped without unlocking releases its hold
/// in the background (errors are logged through `tracing`).
///
/// [`lost`](Self::lost) resolves if the lock is lost while held: the watchdog
/// found the key gone or could not renew it before it expired, it was
/// force-unlocked, or an explicit lease ran out.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let guard = client.lock("reports")?.lock().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lock lost, abandoning work"),
///     _ = async { /* long work */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    lock: RLock,
    owner: Owner,
    lease: Lease,
    status: watch::Receiver<Status>,
    armed: bool,
}

impl LockGuard {
    pub(crate) fn new(
        lock: RLock,
        owner: Owner,
        lease: Lease,
        status: watch::Receiver<Status>,
    ) -> LockGuard {
        LockGuard {
            lock,
            owner,
            lease,
            status,
            armed: true,
        }
    }

    /// The owner this hold belongs to.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The lock this guard holds (with its owner fixed to [`owner`](Self::owner)).
    pub fn lock(&self) -> &RLock {
        &self.lock
    }

    /// The explicit lease, if the lock was taken with one (else watchdog-renewed).
    pub fn lease(&self) -> Option<Duration> {
        match self.lease {
            Lease::Fixed(d) => Some(d),
            Lease::Watchdog => None,
        }
    }

    /// Release this hold. Fails with [`Error::NotHeld`](crate::Error::NotHeld)
    /// if the lock was lost meanwhile. Dropping this future part-way still
    /// completes the unlock in the background.
    pub async fn unlock(mut self) -> Result<()> {
        self.armed = false;
        let lock = self.lock.clone();
        let owner = self.owner;
        let call = async move { release(lock.inner(), &lock.keys, owner).await.map(drop) };
        FinishOnDrop::new(self.lock.inner().runtime.clone(), call, |_| {
            async {}.boxed()
        })
        .await
    }

    /// Take the lock again with the same owner (hold count + 1), returning a
    /// second guard. Never waits: fails with
    /// [`Error::NotHeld`](crate::Error::NotHeld) if this hold was lost.
    pub async fn reenter(&self) -> Result<LockGuard> {
        self.lock.reenter(self.owner, self.lease).await
    }

    /// How many holds this guard's owner has on the lock, per Redis.
    pub async fn hold_count(&self) -> Result<u32> {
        self.lock.hold_count(self.owner).await
    }

    /// Whether this guard's owner still holds the lock, per Redis.
    pub async fn is_held(&self) -> Result<bool> {
        self.lock.is_held_by(self.owner).await
    }

    /// Resolves once the lock is lost while this guard exists; never, if it
    /// is released normally. Usable in `tokio::select!`; owns what it needs.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        watchdog::lost(self.status.clone())
    }

    /// Whether the lock is known to be lost right now.
    pub fn is_lost(&self) -> bool {
        watchdog::is_lost(&self.status)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let lock = self.lock.clone();
        let owner = self.owner;
        self.lock.inner().runtime.spawn(async move {
            if let Err(e) = release(lock.inner(), &lock.keys, owner).await {
                tracing::warn!(lock = %lock.name(), error = %e, "background unlock of a dropped guard failed");
            }
        });
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.lock.name())
            .field("owner", &self.owner)
            .field("lease", &self.lease())
            .finish()
    }
}
