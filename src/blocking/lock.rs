//! The blocking lock handles and guards: [`BlockingLock`] for every kind,
//! [`BlockingMultiLock`].

use futures::future::BoxFuture;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use super::client::BlockingClient;
use super::driver::{Bridged, Driver, Release};
use crate::base::error::Result;
use crate::base::owner::Owner;
use crate::locks::guard::LockGuard;
use crate::locks::kind::Kind;
use crate::locks::lock::{Lock, Ttl};
use crate::locks::owned::OwnedLock;
use crate::locks::rlock::Reentrant;

impl BlockingClient {
    /// The blocking form of any async lock handle of this client. Its calls
    /// act as the calling thread's owner, unless the handle has an explicit
    /// owner (an [`OwnedLock`](crate::OwnedLock), from [`Lock::with_owner`]):
    /// then they all act as that owner, from any thread.
    pub fn wrap<K: Kind>(&self, lock: impl Into<Lock<K>>) -> BlockingLock<K> {
        BlockingLock {
            lock: lock.into(),
            runtime: self.runtime.clone(),
        }
    }

    /// A handle to the reentrant lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn lock(&self, name: &str) -> Result<BlockingLock<Reentrant>> {
        Ok(self.wrap(self.client.lock(name)?))
    }

    /// A handle to the spin lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn spin_lock(&self, name: &str) -> Result<BlockingLock<crate::locks::spin::Spin>> {
        Ok(self.wrap(self.client.spin_lock(name)?))
    }

    /// A handle to the spin lock `name` with a chosen back-off
    /// (`getSpinLock(name, backOff)`; see [`Client::spin_lock_with`](crate::Client::spin_lock_with)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn spin_lock_with(
        &self,
        name: &str,
        backoff: crate::BackOff,
    ) -> Result<BlockingLock<crate::locks::spin::Spin>> {
        Ok(self.wrap(self.client.spin_lock_with(name, backoff)?))
    }

    /// A handle to the fair lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn fair_lock(&self, name: &str) -> Result<BlockingLock<crate::locks::fair::Fair>> {
        Ok(self.wrap(self.client.fair_lock(name)?))
    }

    /// A handle to the non-reentrant fair lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn non_reentrant_fair_lock(
        &self,
        name: &str,
    ) -> Result<BlockingLock<crate::locks::fair::NonReentrantFair>> {
        Ok(self.wrap(self.client.non_reentrant_fair_lock(name)?))
    }

    /// A handle to the non-reentrant lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn non_reentrant_lock(
        &self,
        name: &str,
    ) -> Result<BlockingLock<crate::locks::rlock::NonReentrant>> {
        Ok(self.wrap(self.client.non_reentrant_lock(name)?))
    }

    /// A handle to the fenced lock `name`; guards carry the fencing token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn fenced_lock(&self, name: &str) -> Result<BlockingLock<crate::locks::fenced::Fenced>> {
        Ok(self.wrap(self.client.fenced_lock(name)?))
    }

    /// The blocking form of a multi-lock or RedLock (its members may belong
    /// to other clients). Unlike single locks, its holds are not per thread:
    /// every acquisition takes fresh owners, so it never re-enters.
    pub fn wrap_multi(&self, lock: crate::locks::multi::MultiLock) -> BlockingMultiLock {
        BlockingMultiLock {
            lock,
            runtime: self.runtime.clone(),
        }
    }

    /// A handle to the read-write lock `name` (Redisson's
    /// `getReadWriteLock(name)`), as the async
    /// [`Client::read_write_lock`](crate::Client::read_write_lock): its
    /// halves come from [`read`](BlockingReadWriteLock::read) and
    /// [`write`](BlockingReadWriteLock::write). Both act as the calling
    /// thread's owner, so a thread holding the write lock may also take the
    /// read lock, and releasing the write lock then downgrades it to a read
    /// lock, as in Java.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::BlockingClient::connect("redis://127.0.0.1:6379")?;
    /// let rw = client.read_write_lock("catalog")?;
    /// let writing = rw.write().lock()?;
    /// let reading = rw.read().lock()?; // the writer's thread may read too
    /// drop(writing); // now only read-locked
    /// reading.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn read_write_lock(&self, name: &str) -> Result<BlockingReadWriteLock> {
        Ok(BlockingReadWriteLock {
            read: self.wrap(self.client.read_write_lock(name)?.read()),
            write: self.wrap(self.client.read_write_lock(name)?.write()),
        })
    }
}

/// The blocking twin of a [`ReadWriteLock`](crate::ReadWriteLock): its two
/// halves, each acting as the calling thread's owner.
#[derive(Clone, Debug)]
pub struct BlockingReadWriteLock {
    read: BlockingLock<crate::locks::rwlock::Read>,
    write: BlockingLock<crate::locks::rwlock::Write>,
}

impl BlockingReadWriteLock {
    /// The lock's name (the Redis key of its hash).
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read half.
    pub fn read(&self) -> BlockingLock<crate::locks::rwlock::Read> {
        self.read.clone()
    }

    /// The write half.
    pub fn write(&self) -> BlockingLock<crate::locks::rwlock::Write> {
        self.write.clone()
    }
}

/// The blocking twin of a [`Lock`] of any kind. Every call acts as the
/// calling OS thread's owner, so a thread that holds the lock re-enters it
/// (or, for a handle wrapped with an explicit owner, as that owner).
#[derive(Debug)]
pub struct BlockingLock<K: Kind> {
    lock: Lock<K>,
    runtime: Arc<Driver>,
}

impl<K: Kind> Clone for BlockingLock<K> {
    fn clone(&self) -> Self {
        BlockingLock {
            lock: self.lock.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<K: Kind> BlockingLock<K> {
    /// The async handle underneath.
    pub fn as_async(&self) -> &Lock<K> {
        &self.lock
    }

    /// The handle the calling thread acts through: the explicit owner's, if
    /// the wrapped handle has one, else the thread's own.
    fn mine(&self) -> OwnedLock<K> {
        self.lock.with_owner(self.owner())
    }

    /// The owner the calling thread acts as: the explicit one, if the
    /// wrapped handle has one, else the thread's own.
    fn owner(&self) -> Owner {
        self.lock.raw.owner.unwrap_or_else(Owner::current_thread)
    }

    fn guard(&self, guard: LockGuard<K>) -> BlockingGuard<K> {
        BlockingGuard {
            name: guard.name().to_owned(),
            owner: guard.owner(),
            guard: Bridged::new(guard, self.runtime.clone()),
            _thread_bound: PhantomData,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Take the lock ([`lock`](Self::lock)), run `work` on this thread with
    /// the guard, and release it, as [`Lock::run`]. A blocking `work` cannot
    /// be stopped part-way: if the lock was lost while it ran, its result is
    /// discarded and the call ends with [`Error::Lost`](crate::Error::Lost)
    /// (long work should check [`BlockingGuard::is_lost`] as it goes).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::BlockingClient::connect("redis://127.0.0.1:6379")?;
    /// let report = client.lock("nightly-report")?;
    /// let rows = report.run(|_guard| {
    ///     // ... work that must not run twice at once ...
    ///     42
    /// })?;
    /// # let _ = rows;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Lost`](crate::Error::Lost) if the
    /// lock was lost while `work` ran; as [`BlockingGuard::unlock`] if the
    /// final unlock fails.
    pub fn run<T>(&self, work: impl FnOnce(&BlockingGuard<K>) -> T) -> Result<T> {
        let guard = self.lock()?;
        let output = work(&guard);
        if let Some(reason) = guard.lost_reason() {
            drop(guard);
            return Err(crate::Error::Lost {
                name: self.name().to_owned(),
                reason,
            });
        }
        guard.unlock()?;
        Ok(output)
    }

    /// Wait as long as it takes; watchdog-renewed while held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::lock`].
    pub fn lock(&self) -> Result<BlockingGuard<K>> {
        let guard = self.runtime.run(self.mine().lock())??;
        Ok(self.guard(guard))
    }

    /// Wait as long as it takes; expires `lease` after acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<BlockingGuard<K>> {
        let guard = self.runtime.run(self.mine().lock_with_lease(lease))??;
        Ok(self.guard(guard))
    }

    /// Try once without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<BlockingGuard<K>>> {
        let guard = self.runtime.run(self.mine().try_lock())??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Wait up to `wait`; the watchdog keeps the lock while held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<BlockingGuard<K>>> {
        let guard = self.runtime.run(self.mine().try_lock_for(wait))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Wait up to `wait`; the lock expires `lease` after acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::try_lock_for_with_lease`].
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<BlockingGuard<K>>> {
        let guard = self
            .runtime
            .run(self.mine().try_lock_for_with_lease(wait, lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Release one hold of the calling thread without its guard, as Java's
    /// `lock.unlock()` does. Pair it with guards you
    /// [`forget`](BlockingGuard::forget): a dropped guard releases a hold
    /// of the thread too.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`OwnedLock::unlock`](crate::OwnedLock::unlock): [`Error::NotHeld`](crate::Error::NotHeld) if the
    /// thread does not hold the lock.
    pub fn unlock(&self) -> Result<()> {
        self.runtime.run(self.mine().unlock())?
    }

    /// Delete the lock whoever holds it; returns whether it was held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.runtime.run(self.lock.force_unlock())?
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.runtime.run(self.lock.is_locked())?
    }

    /// How long until the lock expires.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`Lock::remain_time_to_live`].
    pub fn remain_time_to_live(&self) -> Result<Ttl> {
        self.runtime.run(self.lock.remain_time_to_live())?
    }

    /// How many times the calling thread (or the handle's explicit owner)
    /// holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`Lock::hold_count`].
    pub fn hold_count(&self) -> Result<u32> {
        self.runtime.run(self.lock.hold_count(self.owner()))?
    }

    /// Whether the calling thread (or the handle's explicit owner) holds the
    /// lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`Lock::is_held_by`].
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.runtime.run(self.lock.is_held_by(self.owner()))?
    }
}

/// One hold taken by a thread. Dropping it unlocks on that thread: the drop
/// waits for the unlock, at most the client's
/// [`Config::timeout`](crate::Config::timeout), and then lets it finish in
/// the background (a failure is logged). [`unlock`](Self::unlock) reports
/// the outcome instead. It cannot leave its thread, as the hold belongs to
/// that thread (`!Send`); like std's `MutexGuard`, other threads may look at
/// it through a shared reference (`Sync`).
#[must_use = "dropping the guard releases the lock at once"]
pub struct BlockingGuard<K: Kind> {
    name: String,
    owner: crate::Owner,
    guard: Bridged<LockGuard<K>>,
    /// `!Send` and `Sync`, as `MutexGuard<()>`.
    _thread_bound: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<K: Kind> BlockingGuard<K> {
    /// Release this hold, reporting errors (such as the lock having been lost).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime (the
    /// hold is then released in the background, as by a dropped guard); else as
    /// [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.guard.release().map(drop)
    }

    /// The lock's name (as [`LockGuard::name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner this hold belongs to: the calling thread's (as
    /// [`LockGuard::owner`]).
    pub fn owner(&self) -> crate::Owner {
        self.owner
    }

    /// The hold's explicit lease; `None` for a watchdog hold (as
    /// [`LockGuard::lease`]).
    pub fn lease(&self) -> Option<Duration> {
        self.guard.get().lease()
    }

    /// The earliest the lock's key can expire unless renewed first; `None`
    /// while the watchdog renews it (as [`LockGuard::expires_at`]).
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        self.guard.get().expires_at()
    }

    /// Whether the lock is known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.guard.get().is_lost()
    }

    /// Why the lock is lost, if it is known to be lost right now (as
    /// [`LockGuard::lost_reason`]).
    pub fn lost_reason(&self) -> Option<crate::LostReason> {
        self.guard.get().lost_reason()
    }

    /// Make this hold last at least `lease` from now (see
    /// [`LockGuard::extend`]).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`LockGuard::extend`].
    pub fn extend(&mut self, lease: Duration) -> Result<()> {
        let runtime = self.guard.runtime.clone();
        runtime.run(self.guard.get_mut().extend(lease))?
    }

    /// Keep the hold without unlocking it and stop renewing it: it ends
    /// when its lease runs out, or with [`BlockingLock::unlock`] on its thread.
    pub fn forget(self) {
        self.guard.keep();
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> &LockGuard<K> {
        self.guard.get()
    }
}

impl BlockingGuard<crate::locks::fenced::Fenced> {
    /// The fencing token of this acquisition (see
    /// [`LockGuard::fencing_token`]).
    pub fn fencing_token(&self) -> i64 {
        self.guard.get().fencing_token()
    }
}

impl BlockingGuard<crate::locks::rwlock::Write> {
    /// Turn this write hold into a read hold of the same owner, atomically
    /// for other writers (see [`LockGuard::downgrade`]).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called
    /// from inside an async runtime (the write hold is then released in the
    /// background, as by a dropped guard); else as
    /// [`LockGuard::downgrade`].
    pub fn downgrade(self) -> Result<BlockingGuard<crate::locks::rwlock::Read>> {
        let runtime = self.guard.runtime.clone();
        let read = runtime.run(self.guard.get().read_hold())??;
        let read = BlockingGuard {
            name: self.name,
            owner: self.owner,
            guard: Bridged::new(read, runtime),
            _thread_bound: PhantomData,
        };
        // On an error the read hold is released too (`read` is dropped),
        // as by the async downgrade.
        self.guard.release()?;
        Ok(read)
    }
}

impl<K: Kind> std::fmt::Debug for BlockingGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingGuard")
            .field("guard", &self.guard.get())
            .finish()
    }
}

/// The blocking twin of a [`MultiLock`](crate::locks::multi::MultiLock).
#[derive(Clone, Debug)]
pub struct BlockingMultiLock {
    lock: crate::locks::multi::MultiLock,
    runtime: Arc<Driver>,
}

impl BlockingMultiLock {
    fn guard(&self, guard: crate::locks::multi::MultiGuard) -> BlockingMultiGuard {
        BlockingMultiGuard {
            guard: Bridged::new(guard, self.runtime.clone()),
        }
    }

    /// Wait as long as it takes; members are watchdog-renewed while held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`MultiLock::lock`](crate::MultiLock::lock).
    pub fn lock(&self) -> Result<BlockingMultiGuard> {
        let guard = self.runtime.run(self.lock.lock())??;
        Ok(self.guard(guard))
    }

    /// Take every member ([`lock`](Self::lock)), run `work` on this thread
    /// with the guard, and release them all, as
    /// [`MultiLock::run`](crate::MultiLock::run). A blocking `work` cannot be
    /// stopped part-way: if the whole was lost while it ran, its result is
    /// discarded and the call ends with [`Error::Lost`](crate::Error::Lost).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Lost`](crate::Error::Lost) if the
    /// whole was lost while `work` ran; as [`BlockingMultiGuard::unlock`] if
    /// the final unlock fails.
    pub fn run<T>(&self, work: impl FnOnce(&BlockingMultiGuard) -> T) -> Result<T> {
        let guard = self.lock()?;
        let output = work(&guard);
        if let Some(reason) = guard.lost_reason() {
            drop(guard);
            let name = self.lock.names().collect::<Vec<_>>().join(",");
            return Err(crate::Error::Lost { name, reason });
        }
        guard.unlock()?;
        Ok(output)
    }

    /// Wait as long as it takes; every member lives at least `lease` after
    /// the acquisition completes (see
    /// [`MultiLock::lock_with_lease`](crate::locks::multi::MultiLock::lock_with_lease)).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::lock_with_lease`](crate::MultiLock::lock_with_lease).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<BlockingMultiGuard> {
        let guard = self.runtime.run(self.lock.lock_with_lease(lease))??;
        Ok(self.guard(guard))
    }

    /// Whether enough members are locked for the whole to be held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`MultiLock::is_locked`](crate::MultiLock::is_locked).
    pub fn is_locked(&self) -> Result<bool> {
        self.runtime.run(self.lock.is_locked())?
    }

    /// Whether `owner` holds the whole (Java's `isHeldByThread`): every
    /// member, or a majority for RedLock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`MultiLock::is_held_by`](crate::MultiLock::is_held_by).
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.runtime.run(self.lock.is_held_by(owner))?
    }

    /// Try each member once.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::try_lock`](crate::MultiLock::try_lock).
    pub fn try_lock(&self) -> Result<Option<BlockingMultiGuard>> {
        let guard = self.runtime.run(self.lock.try_lock())??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Acquire within `wait`; see [`MultiLock::try_lock_for`](crate::locks::multi::MultiLock::try_lock_for).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::try_lock_for`](crate::MultiLock::try_lock_for).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<BlockingMultiGuard>> {
        let guard = self.runtime.run(self.lock.try_lock_for(wait))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Acquire within `wait`, every member living at least `lease`; see
    /// [`MultiLock::try_lock_for_with_lease`](crate::MultiLock::try_lock_for_with_lease).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::try_lock_for_with_lease`](crate::MultiLock::try_lock_for_with_lease).
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<BlockingMultiGuard>> {
        let guard = self
            .runtime
            .run(self.lock.try_lock_for_with_lease(wait, lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }
}

/// The members held by one blocking multi-lock acquisition; dropping it
/// unlocks them synchronously.
#[must_use = "dropping the guard releases the locks at once"]
#[derive(Debug)]
pub struct BlockingMultiGuard {
    guard: Bridged<crate::locks::multi::MultiGuard>,
}

impl BlockingMultiGuard {
    /// Release every member.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime (the
    /// members are then released in the background); else as
    /// [`MultiGuard::unlock`](crate::MultiGuard::unlock).
    pub fn unlock(self) -> Result<()> {
        self.guard.release().map(drop)
    }

    /// Whether too many members are known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.guard.get().is_lost()
    }

    /// Why the whole is lost, if too many members are known to be lost
    /// right now (as [`MultiGuard::lost_reason`](crate::MultiGuard::lost_reason)).
    pub fn lost_reason(&self) -> Option<crate::LostReason> {
        self.guard.get().lost_reason()
    }

    /// Whether enough members are still held, per Redis.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`MultiGuard::is_held`](crate::MultiGuard::is_held).
    pub fn is_held(&self) -> Result<bool> {
        self.guard.runtime.run(self.guard.get().is_held())?
    }
}

impl<K: Kind> Release for LockGuard<K> {
    type Output = ();
    const WHAT: &'static str = "guard";

    fn release_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        self.unlock_now()
    }

    fn keep(&mut self) {
        LockGuard::keep(self);
    }
}

impl Release for crate::locks::multi::MultiGuard {
    type Output = ();
    const WHAT: &'static str = "multi-lock guard";

    fn release_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        self.unlock_now()
    }

    /// A multi-lock guard is never kept: its blocking twin has no `forget`.
    fn keep(&mut self) {}
}
