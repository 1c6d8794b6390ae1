//! [`LockGuard`]: proof of one hold of a lock of kind `K`, released on
//! unlock or drop.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::base::error::Result;
use crate::base::lost::LostReason;
use crate::base::owner::Owner;
use crate::engine::hold::RawHold;
use crate::locks::kind::{AnyKind, Kind, ReentrantKind};

/// One hold of a lock of kind `K`. Release it with [`unlock`](Self::unlock)
/// to learn whether that worked; a guard dropped without unlocking releases
/// its hold in the background (errors are logged through `tracing`);
/// [`forget`](Self::forget) keeps the hold until its lease ends.
///
/// While a guard says it holds (`is_lost()` is false), Redis gives its owner
/// the hold; when that stops being true, or may have, [`lost`](Self::lost)
/// resolves (to a [`LostReason`]) and stays resolved (docs/PROTOCOL.md §2.9):
///
/// * **force-unlocked through this client**: at once;
/// * **force-unlocked by another client** (Java or Rust) of a kind whose
///   unlocks publish on one channel (RLock, non-reentrant, fenced, read and
///   write locks): within a round trip of the unlock's message, whether or
///   not `lost()` is awaited (from 10 ms after it is taken, the client
///   watches every hold on its lock's channel, sharing its subscription,
///   and re-checks the hold after every message; `is_lost()` turns true by
///   itself);
/// * **removed without a message a holder hears** (a `DEL`, `UNLINK`,
///   eviction, a fair or spin lock's forced unlock, a `FLUSHALL`, a failover
///   that lost it): within a round trip with
///   [`Config::keyspace_notifications`](crate::Config::keyspace_notifications)
///   (all but flushes and failovers), within
///   [`Config::hold_check_interval`](crate::Config::hold_check_interval) plus
///   a round trip with the hold check, else at the next renewal (a third of
///   `lock_watchdog_timeout`) or, for a hold with an explicit lease, when its
///   lease ends; and at once if the same owner takes the lock again;
/// * **no longer certain**: a hold is certain until the send time of the
///   last command Redis confirmed that set its key's TTL (an acquisition, a
///   renewal, `extend`), plus that TTL, less a drift margin (1 % + 2 ms): no
///   command of this client ever shortens that TTL, so Redis cannot have
///   expired the key before then. Past it, with no newer confirmation (a
///   stalled network, a paused server, an explicit lease ending), the hold
///   counts as lost, whatever the network does; so `lost()` resolves before
///   another client can take the lock.
///
/// The release of a dropped guard runs on the client's runtime: a guard
/// dropped after that runtime stopped (its `#[tokio::main]` returned, say)
/// sends nothing, and its hold stays until its TTL (the watchdog timeout,
/// or its lease). Unlock guards, or [`shutdown`](crate::Client::shutdown)
/// the client, before the runtime ends.
///
/// A guard told its hold is gone sends nothing when unlocked or dropped
/// (its `unlock()` reports [`NotHeld`](crate::Error::NotHeld)): the lock may
/// since belong to someone else, or to a new hold of the same owner.
///
/// What a guard can do depends on its kind: [`reenter`](Self::reenter) on
/// reentrant kinds, `fencing_token` on [`Fenced`](crate::Fenced) guards,
/// `downgrade` on [`Write`](crate::Write) guards.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let guard = client.lock("reports")?.lock().await?;
/// tokio::select! {
///     reason = guard.lost() => eprintln!("lock lost ({reason}), abandoning work"),
///     _ = async { /* long work */ } => guard.unlock().await?,
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard<K: Kind> {
    hold: RawHold,
    kind: Arc<K>,
}

impl<K: Kind> LockGuard<K> {
    pub(crate) fn new(hold: RawHold, kind: Arc<K>) -> LockGuard<K> {
        LockGuard { hold, kind }
    }

    pub(crate) fn kind(&self) -> &Arc<K> {
        &self.kind
    }

    pub(crate) fn hold(&self) -> &RawHold {
        &self.hold
    }

    /// The owner this hold belongs to.
    pub fn owner(&self) -> Owner {
        self.hold.owner()
    }

    /// The hash field that records this hold (`<clientId>:<ownerId>`, plus
    /// `:write` for a write lock): what `HGETALL` on the lock's key and a
    /// Java peer see.
    pub fn field(&self) -> &str {
        self.hold.field()
    }

    /// The name of the lock held.
    pub fn name(&self) -> &str {
        self.hold.raw().name()
    }

    /// The explicit lease, if the lock was taken with one (else watchdog-renewed).
    pub fn lease(&self) -> Option<Duration> {
        self.hold.lease()
    }

    /// The earliest the lock's key can expire unless renewed first: the send
    /// time of the last confirmed command that set its TTL, plus that TTL,
    /// so never later than the server's expiry; `None` while the watchdog
    /// renews it (this guard, or another hold of the same owner on the lock,
    /// was taken without a lease).
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        self.hold.expires_at()
    }

    /// Make this hold last at least `lease` from now: one script call (the
    /// renewal script of its kind, for this hold alone), which sets the key's
    /// TTL (and a reader's timeout keys) to `max(PTTL, lease)`: it never
    /// shortens what the lock has left, for this hold or any other (another
    /// reader's, another hold of the same owner). This hold then has that
    /// explicit lease and is no longer renewed (the lock still is, while
    /// another hold of its owner was taken without a lease);
    /// [`expires_at`](Self::expires_at), [`lost`](Self::lost) and
    /// [`is_lost`](Self::is_lost) follow. Redisson has no such call; on the
    /// wire it is a renewal.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// let mut guard = client.lock("nightly")?.lock_with_lease(Duration::from_secs(30)).await?;
    /// // ... the job runs long: ask for another minute, from now.
    /// guard.extend(Duration::from_secs(60)).await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease
    /// below 1 ms or above [`MAX_DURATION`](crate::MAX_DURATION) (nothing
    /// sent); [`Error::NotHeld`](crate::Error::NotHeld) if the hold is lost
    /// or no longer in Redis (it is then reported lost); transient errors
    /// after the client's retries.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have lengthened the TTL; the guard
    /// then keeps believing what it believed before, which the TTL still
    /// covers, so `lost()` may fire early, never late.
    pub async fn extend(&mut self, lease: Duration) -> Result<()> {
        self.hold
            .extend(crate::base::time::checked("lease", lease)?)
            .await
    }

    /// Release this hold.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) if the lock was lost
    /// meanwhile; a transient error if Redis stayed unreachable through
    /// `retry_attempts` retries (each retry carries the same unlock latch,
    /// so it never releases twice); [`Error::Closed`](crate::Error::Closed)
    /// after [`Client::shutdown`](crate::Client::shutdown).
    ///
    /// # Cancel safety
    ///
    /// Dropping this future part-way still completes the unlock in the
    /// background.
    pub async fn unlock(self) -> Result<()> {
        self.hold.unlock().await
    }

    /// Keep the hold without unlocking it, and stop renewing it: the lock
    /// stays held until its lease runs out (for a watchdog-renewed hold,
    /// `lock_watchdog_timeout` after its last renewal), like `forget` on
    /// tokio's permits and `lock_api`'s guards. No command is sent.
    pub fn forget(mut self) {
        self.keep();
    }

    /// [`unlock`](Self::unlock) through `&mut`, for a wrapper that releases
    /// in its own `Drop`: this guard is left disarmed; `None` if it was
    /// released or kept already.
    pub(crate) fn unlock_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        self.hold.unlock_now()
    }

    /// [`forget`](Self::forget) through `&mut`.
    pub(crate) fn keep(&mut self) {
        self.hold.keep();
    }

    /// How many holds this guard's owner has on the lock, per Redis.
    ///
    /// # Errors
    ///
    /// As [`Lock::hold_count`](crate::Lock::hold_count).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn hold_count(&self) -> Result<u32> {
        self.hold.hold_count().await
    }

    /// Whether this guard's owner still holds the lock, per Redis.
    ///
    /// # Errors
    ///
    /// As [`Lock::is_held_by`](crate::Lock::is_held_by).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn is_held(&self) -> Result<bool> {
        self.hold.is_held().await
    }

    /// Resolves once the lock is lost while this guard exists: found gone,
    /// force-unlocked, or no longer certain (see the type's docs): within a
    /// round trip of any change of its key by someone else (client
    /// tracking, docs/PROTOCOL.md §2.10) or of a forced unlock's message,
    /// at the next renewal where neither tells, and at the latest when its
    /// lease can have run out on the server, less a drift margin. Never, if
    /// it is released normally. Usable in `tokio::select!`, and a named type
    /// ([`Lost`](crate::base::lost::Lost)) that can be kept in a struct; owns what it needs, and
    /// holds no subscription of its own: the client watches the hold
    /// whether or not this is awaited (see the type's docs). It resolves to
    /// why the hold was lost.
    pub fn lost(&self) -> crate::base::lost::Lost {
        crate::base::lost::Lost::new(self.hold.lost())
    }

    /// Whether the lock is known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// Why the lock is lost, if it is known to be lost right now (what
    /// [`lost`](Self::lost) resolves to).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.hold.lost_reason()
    }

    /// This guard with its kind erased, as a multi-lock member.
    pub fn into_erased(self) -> LockGuard<AnyKind> {
        LockGuard {
            hold: self.hold,
            kind: Arc::new(AnyKind::new()),
        }
    }
}

impl<K: ReentrantKind> LockGuard<K> {
    /// Take the lock again with the same owner (hold count + 1), returning a
    /// second guard with this one's lease (the key's TTL becomes
    /// `max(PTTL, lease)`). Never waits; one round trip. If the hold turns
    /// out to be gone from Redis (the re-entry found the lock free and took
    /// it afresh), that new hold is released again and this guard is told.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) if this hold was lost
    /// (known lost, or found gone); a transient error if Redis could
    /// not be reached: if the re-entry attempt itself failed that way,
    /// whether it ran is unknown, and since the owner already holds the lock
    /// it cannot be undone by a release: the hold count may stay one too high
    /// until the lease ends; [`Error::Closed`](crate::Error::Closed) after
    /// [`Client::shutdown`](crate::Client::shutdown).
    ///
    /// # Cancel safety
    ///
    /// A re-entry command already sent when the future is dropped is
    /// finished in the background, and the hold it took is released: the
    /// count goes back to what it was.
    pub async fn reenter(&self) -> Result<LockGuard<K>> {
        Ok(LockGuard {
            hold: self.hold.reenter().await?,
            kind: self.kind.clone(),
        })
    }
}

impl LockGuard<AnyKind> {
    /// Take the lock again with the same owner, for a guard whose kind was
    /// erased: checked when it runs, not when it compiles.
    ///
    /// # Errors
    ///
    /// [`Error::NotReentrant`](crate::Error::NotReentrant) if the lock's kind
    /// is not reentrant; else as `reenter` on guards of a reentrant kind.
    ///
    /// # Cancel safety
    ///
    /// As `reenter` on guards of a reentrant kind.
    pub async fn reenter(&self) -> Result<LockGuard<AnyKind>> {
        Ok(LockGuard {
            hold: self.hold.reenter().await?,
            kind: self.kind.clone(),
        })
    }
}

impl<K: Kind> std::fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name())
            .field("kind", &self.kind)
            .field("field", &self.field())
            .field("lease", &self.lease())
            .finish()
    }
}
