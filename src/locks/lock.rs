//! [`Lock`]: the handle every lock kind shares.

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Value;

use crate::base::error::{Error, Result};
use crate::base::owner::Owner;
use crate::client::Client;
use crate::engine::hold::RawHold;
use crate::engine::raw::{Acquired, RawLock};
use crate::engine::registry::Lease;
use crate::engine::shared::Inner;
use crate::locks::guard::LockGuard;
use crate::locks::kind::{AnyKind, Kind};

/// A handle to one lock by name. Cheap to clone. The kind `K` decides the
/// Redis layout and scripts, and what its guards can do; every kind shares
/// these methods.
///
/// Every acquisition returns a [`LockGuard`]. By default each acquisition
/// gets a fresh [`Owner`], so two futures can never share a hold by accident,
/// even inside one task; re-enter through
/// [`LockGuard::reenter`](crate::LockGuard::reenter). Use
/// [`with_owner`](Self::with_owner) for Redisson's explicit `threadId` model.
///
/// # Cancel safety
///
/// Every future may be dropped at any await point. A command already sent
/// is finished in the background and a hold it took is released; a fair
/// waiter leaves the queue after its last attempt landed.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
///
/// let lock = client.lock("inventory")?;
/// // Wait up to 2 s; hold for at most 10 s (no watchdog).
/// if let Some(guard) = lock.try_lock_for_with_lease(Duration::from_secs(2), Duration::from_secs(10)).await? {
///     // ... critical section ...
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
pub struct Lock<K: Kind> {
    pub(crate) raw: RawLock,
    client: Client,
    pub(crate) kind: Arc<K>,
}

impl<K: Kind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            raw: self.raw.clone(),
            client: self.client.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl<K: Kind> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name())
            .field("kind", &self.kind)
            .field("owner", &self.raw.owner)
            .finish()
    }
}

/// The remaining time to live of a lock's key (`PTTL`), or of a
/// synchronizer's (`remain_time_to_live` of [`Semaphore`](crate::Semaphore)
/// and [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist: nobody holds the lock (a synchronizer: it
    /// does not exist; Java's `remainTimeToLive()` is -2).
    NotLocked,
    /// The key exists without expiry (someone removed its TTL; a
    /// synchronizer's count usually has none; Java's -1).
    NoExpiry,
    /// The key expires after this long.
    Expires(Duration),
}

impl Ttl {
    /// What `PTTL` replied: -2 no key, -1 no expiry, else milliseconds.
    pub(crate) fn from_pttl(ms: i64) -> Ttl {
        match ms {
            -2 => Ttl::NotLocked,
            -1 => Ttl::NoExpiry,
            ms => Ttl::Expires(Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        }
    }
}

impl<K: Kind> Lock<K> {
    /// A lock of kind `kind` on `client`: `kind` is also its protocol.
    pub(crate) fn new(
        client: Client,
        kind: Arc<K>,
        proto: Arc<dyn crate::engine::protocol::Protocol>,
    ) -> Lock<K> {
        Lock {
            raw: RawLock::new(client.inner.clone(), proto),
            client,
            kind,
        }
    }

    /// The lock's name (the Redis key of its hash, before name mapping).
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// This handle on another raw lock of the same kind and client (an
    /// explicit owner's: [`with_owner`](Self::with_owner)).
    pub(crate) fn rebased(&self, raw: RawLock) -> Lock<K> {
        Lock {
            raw,
            client: self.client.clone(),
            kind: self.kind.clone(),
        }
    }

    /// This handle with its kind erased, as a [`MultiLock`](crate::MultiLock)
    /// member.
    #[doc(alias = "erase")]
    pub fn into_erased(self) -> Lock<AnyKind> {
        Lock {
            raw: self.raw,
            client: self.client,
            kind: Arc::new(AnyKind::new()),
        }
    }

    /// The hash field this client writes for `owner` on this lock
    /// (`<client id>:<owner>`, plus `:write` for a write lock): what
    /// `HGETALL` on the lock's key shows, and what a Java peer sees.
    pub fn owner_field(&self, owner: Owner) -> String {
        self.raw.proto.field(&self.inner().env, owner)
    }

    /// Wait as long as it takes; the watchdog keeps the lock while held.
    ///
    /// # Errors
    ///
    /// A transient error ([`Error::is_transient`]: timeout, connection,
    /// unavailable, not replicated) once every attempt has failed for longer
    /// than the retry budget, `(timeout + retry_delay) × retry_attempts`
    /// (at once for an explicit owner that already held the lock: whether
    /// the failed attempt re-entered is then unknown); [`Error::WrongType`] if the key holds something else;
    /// [`Error::NotReentrant`] on re-entry of a non-reentrant kind with an
    /// explicit owner; [`Error::Auth`] if the ACL refuses a key or command;
    /// [`Error::Closed`] after [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// The future may be dropped at any await point without leaking a hold:
    /// an acquire script already sent is finished in the background and a
    /// hold it took is released; a fair-lock waiter leaves the queue once its
    /// last attempt has landed; the waiter's share of the channel
    /// subscription is left at once.
    pub async fn lock(&self) -> Result<LockGuard<K>> {
        let acquired = self.raw.acquire(None, Lease::Watchdog).await?;
        Ok(self.guard(expect_acquired(acquired)?))
    }

    /// Run `work` under the lock: wait for it as long as it takes
    /// (watchdog-renewed while held), run `work` with the guard (for its
    /// fencing token, say), unlock, and return what `work` returned. If the
    /// lock is lost while `work` runs ([`lost`] fires: force-unlocked, gone,
    /// or no longer certain), `work` is dropped at its next await point and
    /// the call ends with [`Error::Lost`], so two holders' work never goes on
    /// together.
    ///
    /// [`lost`]: LockGuard::lost
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock = client.lock("nightly-report")?;
    /// let rows = lock.run(async |_guard| {
    ///     // ... work that must not run twice at once ...
    ///     42
    /// }).await?;
    ///
    /// // A fenced lock's work gets its token from the guard.
    /// let ledger = client.fenced_lock("ledger")?;
    /// let token = ledger.run(async |guard| guard.fencing_token()).await?;
    /// # let _ = (rows, token); Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Lost`] if the lock was lost while
    /// `work` ran (its result is gone with it); as
    /// [`LockGuard::unlock`] if the final unlock fails (then `work` finished,
    /// but its exclusion cannot be vouched for).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock) while waiting; dropped while `work` runs,
    /// `work` is dropped and the lock released in the background.
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&LockGuard<K>) -> T) -> Result<T> {
        let guard = self.lock().await?;
        let outcome = tokio::select! {
            biased;
            reason = guard.lost() => Err(reason),
            output = work(&guard) => Ok(output),
        };
        match outcome {
            Ok(output) => {
                guard.unlock().await?;
                Ok(output)
            }
            Err(reason) => Err(Error::Lost {
                name: self.name().to_owned(),
                reason,
            }),
        }
    }

    /// Wait as long as it takes; the lock expires `lease` after acquisition
    /// unless unlocked first (no watchdog).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::base::time::MAX_DURATION), before anything is sent; else
    /// as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock): the future may be dropped at any await point without leaking a hold:
    /// an acquire script already sent is finished in the background and a
    /// hold it took is released; a fair-lock waiter leaves the queue once its
    /// last attempt has landed; the waiter's share of the channel
    /// subscription is left at once.
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        let lease = fixed_lease(lease)?;
        let acquired = self.raw.acquire(None, lease).await?;
        Ok(self.guard(expect_acquired(acquired)?))
    }

    /// Try once, without waiting; watchdog-renewed if acquired.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); a transient error is returned at once (an
    /// attempt that may have taken the lock is undone in the background,
    /// unless the owner already held it: then its hold count may stay one
    /// too high until the lease ends).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        let acquired = self
            .raw
            .acquire(Some(Duration::ZERO), Lease::Watchdog)
            .await?;
        Ok(acquired.map(|a| self.guard(a)))
    }

    /// Wait up to `wait` (zero: try once; above
    /// [`MAX_DURATION`](crate::base::time::MAX_DURATION): without a time
    /// limit); the watchdog keeps the lock while held (Redisson's
    /// `tryLock(wait, unit)`). [`try_lock_for_with_lease`] takes a lease
    /// instead.
    ///
    /// Transient failures (a lost connection, a timed-out attempt) do not end
    /// the wait while time remains: the attempt is undone if it may have
    /// acquired, and retried. The wait ends with the transient error when
    /// its time is up, or, without a time limit, after
    /// `(timeout + retry_delay) × retry_attempts` of failures in a row.
    ///
    /// [`try_lock_for_with_lease`]: Self::try_lock_for_with_lease
    ///
    /// # Errors
    ///
    /// The last transient error if the time ran out while Redis was
    /// unreachable; without a time limit, as [`lock`](Self::lock);
    /// [`Error::WrongType`], [`Error::NotReentrant`], [`Error::Auth`] and
    /// other definite errors at once; [`Error::Closed`] after
    /// [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    #[doc(alias = "tryLock")]
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        let acquired = self.raw.acquire(Some(wait), Lease::Watchdog).await?;
        Ok(acquired.map(|a| self.guard(a)))
    }

    /// [`try_lock_for`](Self::try_lock_for), the lock expiring `lease` (1 ms
    /// to [`MAX_DURATION`](crate::base::time::MAX_DURATION)) after
    /// acquisition unless unlocked first, with no watchdog (Redisson's
    /// `tryLock(wait, lease, unit)`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad lease, before anything is sent;
    /// else as [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    #[doc(alias = "tryLock")]
    pub async fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        let lease = fixed_lease(lease)?;
        let acquired = self.raw.acquire(Some(wait), lease).await?;
        Ok(acquired.map(|a| self.guard(a)))
    }

    /// Listen to this lock (Redisson's `addListener`): a stream of every
    /// message on its channel (unlocks, forced unlocks) and, where the
    /// server publishes keyspace notifications, its key's removal and
    /// expiry ([`ObjectEvent`](crate::ObjectEvent)). Subscribed when it
    /// returns; dropping the stream removes the listener.
    ///
    /// # Errors
    ///
    /// A transient error if the subscription could not be made;
    /// [`Error::Auth`] if the ACL refuses the channel; [`Error::Closed`]
    /// after [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Dropped part-way, it leaves what it joined.
    #[doc(alias = "addListener")]
    pub async fn events(&self) -> Result<crate::engine::events::ObjectEvents> {
        let keys = self.raw.proto.keys();
        crate::engine::events::listen(
            self.inner(),
            &keys.name,
            &keys.channel,
            crate::connection::pubsub::Wake::OneOrAll,
        )
        .await
    }

    /// Unlock whoever holds it, and wake a waiter. Returns whether it was
    /// held. Local holders see their guards' lost signal fire.
    ///
    /// # Errors
    ///
    /// A transient error if Redis stayed unreachable through
    /// `retry_attempts` retries (the script is idempotent, so retrying is
    /// safe); [`Error::WrongType`] if the key holds something other than
    /// this kind's layout; [`Error::Auth`]; [`Error::Closed`] after
    /// [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have unlocked (the script may be on
    /// its way). If it did, this client's guards of the lock learn it at
    /// their next renewal rather than at once.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.raw.force_unlock().await
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// A transient error if Redis stayed unreachable through
    /// `retry_attempts` retries; [`Error::WrongType`] if the key holds
    /// something else (read and write locks, which read the hash);
    /// [`Error::Auth`]; [`Error::Closed`] after [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn is_locked(&self) -> Result<bool> {
        let inner = self.inner();
        let reply = inner
            .redis
            .retrying(self.name(), || {
                inner.redis.eval(|| self.raw.proto.is_locked_call())
            })
            .await?;
        Ok(matches!(reply, Value::Integer(1)))
    }

    /// How long until the lock's key expires (`PTTL`).
    ///
    /// # Errors
    ///
    /// A transient error if Redis stayed unreachable through
    /// `retry_attempts` retries; [`Error::Auth`]; [`Error::Closed`] after
    /// [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    #[doc(alias = "ttl")]
    pub async fn remain_time_to_live(&self) -> Result<Ttl> {
        let name = self.name().to_owned();
        let ttl: i64 = self
            .inner()
            .redis
            .key_command(self.name(), |c| {
                let name = name.clone();
                async move { c.pttl(name).await }
            })
            .await?;
        Ok(Ttl::from_pttl(ttl))
    }

    /// How many times `owner` holds the lock (`HGET`; 0 if not held).
    ///
    /// # Errors
    ///
    /// A transient error if Redis stayed unreachable through
    /// `retry_attempts` retries; [`Error::WrongType`] if the key is not a
    /// hash; [`Error::Protocol`] if the field is not a count;
    /// [`Error::Auth`]; [`Error::Closed`] after [`Client::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn hold_count(&self, owner: Owner) -> Result<u32> {
        self.raw.hold_count(&self.owner_field(owner)).await
    }

    /// Whether `owner` holds the lock (`HEXISTS`).
    ///
    /// # Errors
    ///
    /// As [`hold_count`](Self::hold_count), without the count's
    /// [`Error::Protocol`].
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.raw.is_held(&self.owner_field(owner)).await
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        self.raw.inner()
    }

    fn guard(&self, acquired: Acquired) -> LockGuard<K> {
        LockGuard::new(RawHold::new(&self.raw, acquired), self.kind.clone())
    }
}

fn expect_acquired(acquired: Option<Acquired>) -> Result<Acquired> {
    acquired.ok_or_else(|| Error::Internal("an unbounded wait ended without the lock".into()))
}

/// A caller's lease: from one millisecond (PEXPIRE's unit) to
/// [`MAX_DURATION`](crate::base::time::MAX_DURATION).
pub(crate) fn fixed_lease(lease: Duration) -> Result<Lease> {
    crate::base::time::checked("lease", lease).map(Lease::Fixed)
}
