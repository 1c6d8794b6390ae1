//! [`OwnedLock`]: a lock handle acting as one explicit owner.

use std::ops::Deref;

use futures::FutureExt;

use crate::base::error::Result;
use crate::base::owner::Owner;
use crate::connection::redis::Patience;
use crate::engine::background::FinishOnDrop;
use crate::engine::registry::Lease;
use crate::engine::unlock::{release, Whose};
use crate::locks::kind::{AnyKind, Kind};
use crate::locks::lock::Lock;

/// A [`Lock`] whose acquisitions all act as one explicit [`Owner`], like a
/// Java thread in Redisson's `lockAsync(threadId)` family: acquiring again
/// re-enters (for reentrant kinds) instead of waiting. Made by
/// [`Lock::with_owner`].
///
/// It has every method of [`Lock`] (through `Deref`), and one more that only
/// an owner can have: [`unlock`](Self::unlock), the release without a guard
/// (Redisson's `unlock()` / `unlockAsync(threadId)`).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::Owner;
///
/// let worker = client.lock("orders")?.with_owner(Owner::new(7));
/// worker.lock().await?.forget(); // held, its guard given up
/// worker.lock().await?.forget(); // re-entered
/// assert_eq!(worker.hold_count(worker.owner()).await?, 2);
/// worker.unlock().await?;
/// worker.unlock().await?;
/// # Ok(()) }
/// ```
///
/// A handle without an owner has no guardless `unlock`: each of its
/// acquisitions had an owner of its own, so only its guard can release it.
///
/// ```compile_fail
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// client.lock("orders")?.unlock().await?; // no such method on `Lock`
/// # Ok(()) }
/// ```
pub struct OwnedLock<K: Kind> {
    lock: Lock<K>,
    owner: Owner,
}

impl<K: Kind> Clone for OwnedLock<K> {
    fn clone(&self) -> Self {
        OwnedLock {
            lock: self.lock.clone(),
            owner: self.owner,
        }
    }
}

impl<K: Kind> std::fmt::Debug for OwnedLock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.lock.fmt(f)
    }
}

impl<K: Kind> Deref for OwnedLock<K> {
    type Target = Lock<K>;

    fn deref(&self) -> &Lock<K> {
        &self.lock
    }
}

impl<K: Kind> From<OwnedLock<K>> for Lock<K> {
    /// The handle as a [`Lock`]: its acquisitions still act as the owner
    /// (a [`MultiLock`](crate::MultiLock) member or a
    /// handle given to `BlockingClient::wrap` keeps it).
    fn from(owned: OwnedLock<K>) -> Lock<K> {
        owned.lock
    }
}

impl<K: Kind> Lock<K> {
    /// A handle whose acquisitions all use `owner`, like Redisson's
    /// `lockAsync(threadId)` family: acquiring again with the same owner
    /// re-enters (for reentrant kinds) instead of waiting. Each guard still
    /// releases one hold; [`OwnedLock::unlock`] releases one without a guard.
    pub fn with_owner(&self, owner: Owner) -> OwnedLock<K> {
        OwnedLock {
            lock: self.rebased(self.raw.with_owner(owner)),
            owner,
        }
    }
}

impl<K: Kind> OwnedLock<K> {
    /// The owner every call of this handle acts as.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// This handle with its kind erased, as a [`MultiLock`](crate::MultiLock)
    /// member; it keeps its owner.
    pub fn into_erased(self) -> OwnedLock<AnyKind> {
        OwnedLock {
            lock: self.lock.into_erased(),
            owner: self.owner,
        }
    }

    /// Release one hold of this handle's owner without its guard, like
    /// Redisson's `unlock()` / `unlockAsync(threadId)`. Pair it with guards
    /// you [`forget`](crate::LockGuard::forget); a guard of the hold
    /// released here would otherwise release another hold of its owner when
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) if the owner does not hold
    /// the lock; a transient error if Redis stayed unreachable through
    /// `retry_attempts` retries (each retry carries the same unlock latch,
    /// so it never releases twice); [`Error::Closed`](crate::Error::Closed)
    /// after [`Client::shutdown`](crate::Client::shutdown).
    ///
    /// # Cancel safety
    ///
    /// Dropping this future part-way still completes the unlock in the
    /// background.
    pub async fn unlock(&self) -> Result<()> {
        let inner = self.lock.inner();
        let proto = self.lock.raw.proto.clone();
        let field = proto.field(&inner.env, self.owner);
        let background = inner.background.clone();
        let inner = inner.clone();
        let call = async move {
            release(
                &inner,
                proto.as_ref(),
                &field,
                Lease::Watchdog,
                Whose::Owner,
                Patience::Attempts,
            )
            .await
            .map(drop)
        };
        FinishOnDrop::new(background, call, |_| async {}.boxed()).await
    }
}
