//! [`LostReason`]: why a guard stopped holding its lock, and the one wait
//! for a loss ([`until_lost`]) that a hold's and a permit's status share.

use tokio::time::Instant;

use crate::base::observed::Observer;

/// Why a hold was lost: what [`LockGuard::lost`](crate::LockGuard::lost)
/// resolves to and [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)
/// reports.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::LostReason;
/// let guard = client.lock("reports")?.lock().await?;
/// tokio::select! {
///     reason = guard.lost() => match reason {
///         LostReason::ForceUnlocked => eprintln!("an operator broke the lock"),
///         other => eprintln!("lock lost: {other}"),
///     },
///     _ = async { /* work */ } => guard.unlock().await?,
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// Force-unlocked through this client (`Lock::force_unlock`).
    ForceUnlocked,
    /// Found gone from Redis: its key or this owner's field was removed
    /// (a `DEL` or `UNLINK`, a forced unlock by another client, Java's
    /// included, a flush, an eviction, an expiry noticed, or a failover that
    /// lost it), or another acquisition of the same owner found the lock
    /// free and took it afresh.
    Gone,
    /// Held with the watchdog, but no renewal was confirmed before the
    /// lease could have run out (Redis unreachable, stalled or paused):
    /// the key may have expired, so the hold counts as lost.
    NotRenewed,
    /// Held with an explicit lease, which has run out (less a drift margin).
    LeaseEnded,
}

impl LostReason {
    /// The `reason` label of the `redisson_lock_lost_total` metric.
    pub(crate) fn label(self) -> &'static str {
        match self {
            LostReason::ForceUnlocked => "force_unlocked",
            LostReason::Gone => "gone",
            LostReason::NotRenewed => "expired",
            LostReason::LeaseEnded => "lease_ended",
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::ForceUnlocked => "force-unlocked through this client",
            LostReason::Gone => "found gone from Redis (deleted, force-unlocked or expired)",
            LostReason::NotRenewed => "not renewed before its lease could have run out",
            LostReason::LeaseEnded => "its lease ran out",
        })
    }
}

/// The future of [`LockGuard::lost`](crate::LockGuard::lost) and
/// [`MultiGuard::lost`](crate::MultiGuard::lost): resolves to why the hold
/// was lost, never if it is released normally. A named type, so that it
/// can be kept in a struct field; it owns what it needs (`'static`,
/// `Send`), and dropping it changes nothing.
#[must_use = "a future does nothing unless awaited"]
pub struct Lost {
    inner: std::pin::Pin<Box<dyn std::future::Future<Output = LostReason> + Send + 'static>>,
}

impl Lost {
    pub(crate) fn new(
        inner: impl std::future::Future<Output = LostReason> + Send + 'static,
    ) -> Lost {
        Lost {
            inner: Box::pin(inner),
        }
    }
}

impl std::future::Future for Lost {
    type Output = LostReason;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<LostReason> {
        self.inner.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lost").finish_non_exhaustive()
    }
}

/// A status that says whether what it describes (a hold, a watchdog permit)
/// is lost, and until when it is certain not to be.
pub(crate) trait LossStatus: Copy {
    /// Why it is lost at `now`, if it is.
    fn lost_at(&self, now: Instant) -> Option<LostReason>;

    /// When it stops being certain, unless a confirmed renewal moves this.
    fn valid_until(&self) -> Instant;

    /// Whether it ended without a loss (given back or kept): never lost
    /// from then on.
    fn ended(&self) -> bool;
}

/// Resolve when `status` says lost, to why: at once if it does, else at
/// the change or the `valid_until` that makes it so. Never, once it ends
/// without a loss (its owner's side dropped, or [`LossStatus::ended`]).
pub(crate) async fn until_lost<S: LossStatus>(status: Observer<S>) -> LostReason {
    loop {
        let changed = status.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        // The end first: once the owner's side is gone, the status read
        // after it is its last one.
        let released = status.ended();
        let now = status.get();
        if let Some(reason) = now.lost_at(Instant::now()) {
            return reason;
        }
        if released || now.ended() {
            return std::future::pending().await;
        }
        tokio::select! {
            // An end (a release) wins over the timer.
            biased;
            () = changed => {}
            () = tokio::time::sleep_until(now.valid_until()) => {}
        }
    }
}
