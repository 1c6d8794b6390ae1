//! [`LockGuard`]: proof of one hold, released on unlock or drop.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use crate::detach::FinishOnDrop;
use crate::error::Result;
use crate::owner::Owner;
use crate::raw::{release, Patience, RawLock};
use crate::watchdog::{self, Lease, Status};

/// One hold of a lock, of any kind. Release it with [`unlock`](Self::unlock)
/// to learn whether that worked; a guard dropped without unlocking releases
/// its hold in the background (errors are logged through `tracing`).
///
/// [`lost`](Self::lost) resolves if the lock is lost while held: the watchdog
/// found the key gone, it was force-unlocked, or the hold is no longer
/// certain. A hold is certain until the send time of the last acquisition or
/// renewal Redis confirmed, plus the lease, less a drift margin (1 % of the
/// lease + 2 ms): Redis cannot have expired the key before then. Past it,
/// with no newer confirmation (a stalled network, a paused server, an
/// explicit lease ending), the hold counts as lost, whatever the network
/// does; so `lost()` resolves before another client can take the lock.
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
    raw: RawLock,
    owner: Owner,
    field: String,
    lease: Lease,
    status: watch::Receiver<Status>,
    token: Option<i64>,
    armed: bool,
}

impl LockGuard {
    pub(crate) fn new(
        raw: RawLock,
        owner: Owner,
        field: String,
        lease: Lease,
        status: watch::Receiver<Status>,
        token: Option<i64>,
    ) -> LockGuard {
        LockGuard {
            raw,
            owner,
            field,
            lease,
            status,
            token,
            armed: true,
        }
    }

    /// The owner this hold belongs to.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The hash field that records this hold (`<clientId>:<ownerId>`, plus
    /// `:write` for a write lock).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The name of the lock held.
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The explicit lease, if the lock was taken with one (else watchdog-renewed).
    pub fn lease(&self) -> Option<Duration> {
        match self.lease {
            Lease::Fixed(d) => Some(d),
            Lease::Watchdog => None,
        }
    }

    /// When the lock expires unless unlocked or re-entered first, for a lock
    /// taken with an explicit lease (measured from when its command was
    /// sent, so never later than the server's expiry); `None` while the
    /// watchdog renews it.
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        self.status
            .borrow()
            .expires
            .map(tokio::time::Instant::into_std)
    }

    /// The fencing token of this acquisition, for a fenced lock.
    pub fn fencing_token(&self) -> Option<i64> {
        self.token
    }

    /// Release this hold. Fails with [`Error::NotHeld`](crate::Error::NotHeld)
    /// if the lock was lost meanwhile. Dropping this future part-way still
    /// completes the unlock in the background.
    pub async fn unlock(mut self) -> Result<()> {
        self.armed = false;
        let (raw, field) = (self.raw.clone(), self.field.clone());
        let call = async move {
            release(raw.inner(), raw.proto.as_ref(), &field, Patience::Attempts)
                .await
                .map(drop)
        };
        FinishOnDrop::new(self.raw.inner().runtime.clone(), call, |_| async {}.boxed()).await
    }

    /// Take the lock again with the same owner (hold count + 1), returning a
    /// second guard. Never waits: fails with
    /// [`Error::NotHeld`](crate::Error::NotHeld) if this hold was lost. One
    /// more round trip than an acquisition: it first checks the hold exists.
    pub async fn reenter(&self) -> Result<LockGuard> {
        self.raw
            .reenter(self.owner, self.lease, self.is_lost())
            .await
    }

    /// How many holds this guard's owner has on the lock, per Redis.
    pub async fn hold_count(&self) -> Result<u32> {
        self.raw.hold_count(&self.field).await
    }

    /// Whether this guard's owner still holds the lock, per Redis.
    pub async fn is_held(&self) -> Result<bool> {
        self.raw.is_held(&self.field).await
    }

    /// Resolves once the lock is lost while this guard exists: found gone,
    /// force-unlocked, or no longer certain (see the type's docs): at the
    /// latest when its lease can have run out on the server, less a drift
    /// margin. Never, if it is released normally. Usable in
    /// `tokio::select!`; owns what it needs.
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
        let (raw, field) = (self.raw.clone(), self.field.clone());
        self.raw.inner().runtime.spawn(async move {
            let patience = Patience::UntilExpiry;
            if let Err(e) = release(raw.inner(), raw.proto.as_ref(), &field, patience).await {
                tracing::warn!(lock = %raw.name(), error = %e, "background unlock of a dropped guard failed");
            }
        });
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name())
            .field("field", &self.field)
            .field("lease", &self.lease())
            .field("fencing_token", &self.token)
            .finish()
    }
}
