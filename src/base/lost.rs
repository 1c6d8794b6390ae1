//! [`LostReason`]: why a guard stopped holding its lock.

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
