//! The blocking API, for code without an async runtime, with Java-like
//! semantics: a lock is reentrant per OS thread.
//!
//! ```no_run
//! use redisson_lock::blocking::BlockingClient;
//!
//! let client = BlockingClient::from_url("redis://127.0.0.1:6379")?;
//! let lock = client.lock("orders")?;
//! let guard = lock.lock()?;         // waits; watchdog-renewed
//! let again = lock.lock()?;         // same thread: re-enters, hold count 2
//! assert_eq!(lock.hold_count()?, 2);
//! drop(again);                      // unlocks one hold, synchronously
//! guard.unlock()?;
//! # Ok::<(), redisson_lock::Error>(())
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::base::error::{Error, Result};
use crate::base::owner::Owner;
use crate::client::Client;
use crate::connection::config::Config;
use crate::engine::guard::LockGuard;
use crate::engine::kind::Kind;
use crate::engine::lock::{Lock, Ttl};
use crate::kinds::rlock::Reentrant;

impl Client {
    /// The blocking twin of this client, for threads outside any async
    /// runtime. Its calls run on this client's runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if that runtime is not multi-threaded.
    pub fn blocking(&self) -> Result<BlockingClient> {
        BlockingClient::from_async(self.clone())
    }
}

/// A [`Client`] driven from blocking code. Cheap to clone.
#[derive(Clone, Debug)]
pub struct BlockingClient {
    client: Client,
    runtime: Arc<Driver>,
}

/// The runtime the blocking calls run on: owned, or the async client's.
#[derive(Debug)]
struct Driver {
    handle: Handle,
    owned: Option<Runtime>,
    /// How long a dropped guard blocks its thread for its release: one
    /// command timeout; the release then finishes in the background.
    drop_wait: Duration,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(runtime) = self.owned.take() {
            runtime.shutdown_background();
        }
    }
}

impl Driver {
    fn run<F: Future>(&self, fut: F) -> Result<F::Output> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        Ok(self.handle.block_on(fut))
    }

    /// Release a dropped guard by `unlock`: wait at most `drop_wait`, then
    /// leave it to finish in the background (the release is finish-on-drop,
    /// as an async guard's).
    fn release_on_drop<T, F: Future<Output = Result<T>>>(&self, what: &str, unlock: F) {
        // The timer is made inside the runtime (outside, tokio panics).
        let wait = self.drop_wait;
        match self.run(async move { tokio::time::timeout(wait, unlock).await }) {
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "release of a dropped blocking {what} failed")
            }
            Ok(Err(_)) => tracing::debug!(
                wait_ms = u64::try_from(self.drop_wait.as_millis()).unwrap_or(u64::MAX),
                "release of a dropped blocking {what} goes on in the background"
            ),
            Ok(Ok(Ok(_))) | Err(_) => {}
        }
    }
}

impl BlockingClient {
    /// Connect with its own small runtime (one worker thread).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is started); [`Error::Config`] if a runtime cannot be started;
    /// else as [`Client::connect`].
    pub fn connect(config: Config) -> Result<BlockingClient> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("cannot start a runtime: {e}")))?;
        let client = runtime.block_on(Client::connect(config))?;
        Ok(BlockingClient {
            runtime: Arc::new(Driver {
                handle: runtime.handle().clone(),
                drop_wait: client.inner.config.timeout,
                owned: Some(runtime),
            }),
            client,
        })
    }

    /// Connect to a URL with default settings.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a URL that cannot be parsed; else as
    /// [`connect`](Self::connect).
    pub fn from_url(url: &str) -> Result<BlockingClient> {
        BlockingClient::connect(Config::from_url(url)?)
    }

    pub(crate) fn from_async(client: Client) -> Result<BlockingClient> {
        let handle = client.inner.runtime.clone();
        if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
            return Err(Error::Config(
                "the blocking API needs a multi-threaded runtime to drive the client".into(),
            ));
        }
        Ok(BlockingClient {
            runtime: Arc::new(Driver {
                handle,
                owned: None,
                drop_wait: client.inner.config.timeout,
            }),
            client,
        })
    }

    /// The async client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The blocking form of any async lock handle of this client.
    pub fn wrap<K: Kind>(&self, lock: Lock<K>) -> BlockingLock<K> {
        BlockingLock {
            lock,
            runtime: self.runtime.clone(),
        }
    }

    /// A handle to the reentrant lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn lock(&self, name: &str) -> Result<BlockingLock<Reentrant>> {
        Ok(self.wrap(self.client.lock(name)?))
    }

    /// A handle to the spin lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn spin_lock(&self, name: &str) -> Result<BlockingLock<crate::kinds::spin::Spin>> {
        Ok(self.wrap(self.client.spin_lock(name)?))
    }

    /// A handle to the fair lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn fair_lock(&self, name: &str) -> Result<BlockingLock<crate::kinds::fair::Fair>> {
        Ok(self.wrap(self.client.fair_lock(name)?))
    }

    /// A handle to the non-reentrant fair lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn non_reentrant_fair_lock(
        &self,
        name: &str,
    ) -> Result<BlockingLock<crate::kinds::fair::NonReentrantFair>> {
        Ok(self.wrap(self.client.non_reentrant_fair_lock(name)?))
    }

    /// A handle to the non-reentrant lock `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn non_reentrant_lock(
        &self,
        name: &str,
    ) -> Result<BlockingLock<crate::kinds::rlock::NonReentrant>> {
        Ok(self.wrap(self.client.non_reentrant_lock(name)?))
    }

    /// A handle to the fenced lock `name`; guards carry the fencing token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn fenced_lock(&self, name: &str) -> Result<BlockingLock<crate::kinds::fenced::Fenced>> {
        Ok(self.wrap(self.client.fenced_lock(name)?))
    }

    /// The blocking form of a multi-lock or RedLock (its members may belong
    /// to other clients). Unlike single locks, its holds are not per thread:
    /// every acquisition takes fresh owners, so it never re-enters.
    pub fn wrap_multi(&self, lock: crate::kinds::multi::MultiLock) -> BlockingMultiLock {
        BlockingMultiLock {
            lock,
            runtime: self.runtime.clone(),
        }
    }

    /// The read and write halves of the read-write lock `name` (Redisson's
    /// `getReadWriteLock(name)`). Both act as the calling thread's owner, so
    /// a thread holding the write lock may also take the read lock, and
    /// releasing the write lock then downgrades it to a read lock, as in Java.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn read_write_lock(
        &self,
        name: &str,
    ) -> Result<(
        BlockingLock<crate::kinds::rwlock::Read>,
        BlockingLock<crate::kinds::rwlock::Write>,
    )> {
        let rw = self.client.read_write_lock(name)?;
        Ok((self.wrap(rw.read()), self.wrap(rw.write())))
    }
}

/// The blocking twin of a [`Lock`] of any kind. Every call acts as the
/// calling OS thread's owner, so a thread that holds the lock re-enters it.
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

    fn mine(&self) -> Lock<K> {
        self.lock.with_owner(Owner::current_thread())
    }

    fn guard(&self, guard: LockGuard<K>) -> BlockingGuard<K> {
        BlockingGuard {
            guard: Some(guard),
            runtime: self.runtime.clone(),
            _thread_bound: PhantomData,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Wait as long as it takes; watchdog-renewed while held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::lock`].
    pub fn lock(&self) -> Result<BlockingGuard<K>> {
        let guard = self.runtime.run(self.mine().lock())??;
        Ok(self.guard(guard))
    }

    /// Wait as long as it takes; expires `lease` after acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<BlockingGuard<K>> {
        let guard = self.runtime.run(self.mine().lock_with_lease(lease))??;
        Ok(self.guard(guard))
    }

    /// Try once without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<BlockingGuard<K>>> {
        let guard = self.runtime.run(self.mine().try_lock())??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Wait up to `wait`; with `lease`, expire that long after acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::try_lock_for`].
    pub fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<BlockingGuard<K>>> {
        let guard = self.runtime.run(self.mine().try_lock_for(wait, lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Release one hold of the calling thread without its guard, as Java's
    /// `lock.unlock()` does. Pair it with guards you
    /// [`forget`](BlockingGuard::forget): a dropped guard releases a hold
    /// of the thread too.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::unlock`]: [`Error::NotHeld`] if the
    /// thread does not hold the lock.
    pub fn unlock(&self) -> Result<()> {
        self.runtime.run(self.mine().unlock())?
    }

    /// Delete the lock whoever holds it; returns whether it was held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.runtime.run(self.lock.force_unlock())?
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.runtime.run(self.lock.is_locked())?
    }

    /// How long until the lock expires.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`Lock::remain_time_to_live`].
    pub fn remain_time_to_live(&self) -> Result<Ttl> {
        self.runtime.run(self.lock.remain_time_to_live())?
    }

    /// How many times the calling thread holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`Lock::hold_count`].
    pub fn hold_count(&self) -> Result<u32> {
        self.runtime
            .run(self.lock.hold_count(Owner::current_thread()))?
    }

    /// Whether the calling thread holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`Lock::is_held_by`].
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.runtime
            .run(self.lock.is_held_by(Owner::current_thread()))?
    }
}

/// One hold taken by a thread. Dropping it unlocks synchronously; it cannot
/// leave its thread, as the hold belongs to that thread.
#[must_use = "dropping the guard releases the lock at once"]
pub struct BlockingGuard<K: Kind> {
    guard: Option<LockGuard<K>>,
    runtime: Arc<Driver>,
    _thread_bound: PhantomData<*const ()>,
}

impl<K: Kind> BlockingGuard<K> {
    /// Release this hold, reporting errors (such as the lock having been lost).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime (the
    /// hold is then released in the background, as by a dropped guard); else as
    /// [`LockGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => self.runtime.run(guard.unlock())?,
            None => Ok(()),
        }
    }

    /// Whether the lock is known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.guard.as_ref().is_some_and(LockGuard::is_lost)
    }

    /// Set this hold's remaining lease to `lease` from now (see
    /// [`LockGuard::extend`]).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`LockGuard::extend`].
    pub fn extend(&mut self, lease: Duration) -> Result<()> {
        match self.guard.as_mut() {
            Some(guard) => self.runtime.run(guard.extend(lease))?,
            None => Ok(()),
        }
    }

    /// Keep the hold without unlocking it and stop renewing it: it ends
    /// when its lease runs out, or with [`BlockingLock::unlock`] on its thread.
    pub fn forget(mut self) {
        if let Some(guard) = self.guard.take() {
            guard.forget();
        }
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> Option<&LockGuard<K>> {
        self.guard.as_ref()
    }
}

impl BlockingGuard<crate::kinds::fenced::Fenced> {
    /// The fencing token of this acquisition (see
    /// [`LockGuard::fencing_token`]).
    pub fn fencing_token(&self) -> i64 {
        self.guard
            .as_ref()
            .map_or(0, LockGuard::<crate::kinds::fenced::Fenced>::fencing_token)
    }
}

impl<K: Kind> std::fmt::Debug for BlockingGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingGuard")
            .field("guard", &self.guard)
            .finish()
    }
}

impl<K: Kind> Drop for BlockingGuard<K> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            // Inside a runtime this falls back to the guard's background release.
            self.runtime.release_on_drop("guard", guard.unlock());
        }
    }
}

/// The blocking twin of a [`MultiLock`](crate::kinds::multi::MultiLock).
#[derive(Clone, Debug)]
pub struct BlockingMultiLock {
    lock: crate::kinds::multi::MultiLock,
    runtime: Arc<Driver>,
}

impl BlockingMultiLock {
    fn guard(&self, guard: crate::kinds::multi::MultiGuard) -> BlockingMultiGuard {
        BlockingMultiGuard {
            guard: Some(guard),
            runtime: self.runtime.clone(),
        }
    }

    /// Wait as long as it takes; members are watchdog-renewed while held.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`MultiLock::lock`](crate::MultiLock::lock).
    pub fn lock(&self) -> Result<BlockingMultiGuard> {
        let guard = self.runtime.run(self.lock.lock())??;
        Ok(self.guard(guard))
    }

    /// Wait as long as it takes; every member lives at least `lease` after
    /// the acquisition completes (see
    /// [`MultiLock::lock_with_lease`](crate::kinds::multi::MultiLock::lock_with_lease)).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`MultiLock::is_locked`](crate::MultiLock::is_locked).
    pub fn is_locked(&self) -> Result<bool> {
        self.runtime.run(self.lock.is_locked())?
    }

    /// Try each member once.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::try_lock`](crate::MultiLock::try_lock).
    pub fn try_lock(&self) -> Result<Option<BlockingMultiGuard>> {
        let guard = self.runtime.run(self.lock.try_lock())??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Acquire within `wait`; see [`MultiLock::try_lock_for`](crate::kinds::multi::MultiLock::try_lock_for).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`MultiLock::try_lock_for`](crate::MultiLock::try_lock_for).
    pub fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<BlockingMultiGuard>> {
        let guard = self.runtime.run(self.lock.try_lock_for(wait, lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }
}

/// The members held by one blocking multi-lock acquisition; dropping it
/// unlocks them synchronously.
#[must_use = "dropping the guard releases the locks at once"]
#[derive(Debug)]
pub struct BlockingMultiGuard {
    guard: Option<crate::kinds::multi::MultiGuard>,
    runtime: Arc<Driver>,
}

impl BlockingMultiGuard {
    /// Release every member.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime (the
    /// members are then released in the background); else as
    /// [`MultiGuard::unlock`](crate::MultiGuard::unlock).
    pub fn unlock(mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => self.runtime.run(guard.unlock())?,
            None => Ok(()),
        }
    }

    /// Whether too many members are known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(crate::kinds::multi::MultiGuard::is_lost)
    }

    /// Whether enough members are still held, per Redis.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`MultiGuard::is_held`](crate::MultiGuard::is_held).
    pub fn is_held(&self) -> Result<bool> {
        match &self.guard {
            Some(guard) => self.runtime.run(guard.is_held())?,
            None => Ok(false),
        }
    }
}

impl Drop for BlockingMultiGuard {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            self.runtime
                .release_on_drop("multi-lock guard", guard.unlock());
        }
    }
}

impl BlockingClient {
    /// A handle to the semaphore `name` (Redisson's `getSemaphore`).
    ///
    /// ```no_run
    /// use redisson_lock::blocking::BlockingClient;
    ///
    /// let client = BlockingClient::from_url("redis://127.0.0.1:6379")?;
    /// let calls = client.semaphore("partner-api")?;
    /// calls.try_set_permits(4)?;
    /// let permit = calls.acquire(1)?;   // waits for a permit
    /// drop(permit);                     // gives it back, synchronously
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn semaphore(&self, name: &str) -> Result<BlockingSemaphore> {
        Ok(BlockingSemaphore {
            semaphore: self.client.semaphore(name)?,
            runtime: self.runtime.clone(),
        })
    }

    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `getPermitExpirableSemaphore`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn permit_expirable_semaphore(
        &self,
        name: &str,
    ) -> Result<BlockingPermitExpirableSemaphore> {
        Ok(BlockingPermitExpirableSemaphore {
            semaphore: self.client.permit_expirable_semaphore(name)?,
            runtime: self.runtime.clone(),
        })
    }

    /// A handle to the count-down latch `name` (Redisson's
    /// `getCountDownLatch`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn count_down_latch(&self, name: &str) -> Result<BlockingCountDownLatch> {
        Ok(BlockingCountDownLatch {
            latch: self.client.count_down_latch(name)?,
            runtime: self.runtime.clone(),
        })
    }
}

/// The blocking twin of a [`Semaphore`](crate::Semaphore). Permits are not
/// owned by threads: a permit may be released on any thread.
#[derive(Clone, Debug)]
pub struct BlockingSemaphore {
    semaphore: crate::sync::semaphore::Semaphore,
    runtime: Arc<Driver>,
}

impl BlockingSemaphore {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::sync::semaphore::Semaphore {
        &self.semaphore
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    fn permit(&self, permit: crate::sync::semaphore::SemaphorePermit) -> BlockingSemaphorePermit {
        BlockingSemaphorePermit {
            permit: Some(permit),
            runtime: self.runtime.clone(),
        }
    }

    /// Take `permits` permits, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::acquire`](crate::Semaphore::acquire).
    pub fn acquire(&self, permits: u32) -> Result<BlockingSemaphorePermit> {
        let permit = self.runtime.run(self.semaphore.acquire(permits))??;
        Ok(self.permit(permit))
    }

    /// Try once to take `permits` permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_acquire`](crate::Semaphore::try_acquire).
    pub fn try_acquire(&self, permits: u32) -> Result<Option<BlockingSemaphorePermit>> {
        let permit = self.runtime.run(self.semaphore.try_acquire(permits))??;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Take `permits` permits, waiting up to `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_acquire_for`](crate::Semaphore::try_acquire_for).
    pub fn try_acquire_for(
        &self,
        wait: Duration,
        permits: u32,
    ) -> Result<Option<BlockingSemaphorePermit>> {
        let permit = self
            .runtime
            .run(self.semaphore.try_acquire_for(wait, permits))??;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Give `permits` permits back without a permit guard.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::release`](crate::Semaphore::release).
    pub fn release(&self, permits: u32) -> Result<()> {
        self.runtime.run(self.semaphore.release(permits))?
    }

    /// Give permits back only if the semaphore exists.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::release_if_exists`](crate::Semaphore::release_if_exists).
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.runtime
            .run(self.semaphore.release_if_exists(permits))?
    }

    /// Set the permits if the semaphore does not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.run(self.semaphore.try_set_permits(permits))?
    }

    /// Set the permits, with a TTL, if the semaphore does not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_set_permits_with_ttl`](crate::Semaphore::try_set_permits_with_ttl).
    pub fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        self.runtime
            .run(self.semaphore.try_set_permits_with_ttl(permits, ttl))?
    }

    /// Add (or, if negative, take away) permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    pub fn add_permits(&self, permits: i32) -> Result<()> {
        self.runtime.run(self.semaphore.add_permits(permits))?
    }

    /// The number of permits available now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`Semaphore::available_permits`](crate::Semaphore::available_permits).
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.available_permits())?
    }

    /// Take every available permit; returns how many there were.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::drain_permits`](crate::Semaphore::drain_permits).
    pub fn drain_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.drain_permits())?
    }
}

/// Permits taken through a [`BlockingSemaphore`]. Dropping it gives them
/// back synchronously (in the background if dropped inside a runtime).
#[must_use = "dropping the permit releases it at once"]
#[derive(Debug)]
pub struct BlockingSemaphorePermit {
    permit: Option<crate::sync::semaphore::SemaphorePermit>,
    runtime: Arc<Driver>,
}

impl BlockingSemaphorePermit {
    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.permit
            .as_ref()
            .map_or(0, crate::sync::semaphore::SemaphorePermit::permits)
    }

    /// Give the permits back, reporting errors.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime (the
    /// permits are then given back in the background); else as
    /// [`SemaphorePermit::release`](crate::SemaphorePermit::release).
    pub fn release(mut self) -> Result<()> {
        match self.permit.take() {
            Some(permit) => self.runtime.run(permit.release())?,
            None => Ok(()),
        }
    }

    /// Keep the permits taken (see [`SemaphorePermit::forget`](crate::SemaphorePermit::forget)).
    pub fn forget(mut self) {
        if let Some(permit) = self.permit.take() {
            permit.forget();
        }
    }

    /// The async permit underneath.
    pub fn as_async(&self) -> Option<&crate::sync::semaphore::SemaphorePermit> {
        self.permit.as_ref()
    }
}

impl Drop for BlockingSemaphorePermit {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            // Inside a runtime this falls back to the permit's background release.
            self.runtime.release_on_drop("permit", permit.release());
        }
    }
}

/// The blocking twin of a
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
#[derive(Clone, Debug)]
pub struct BlockingPermitExpirableSemaphore {
    semaphore: crate::sync::permit_semaphore::PermitExpirableSemaphore,
    runtime: Arc<Driver>,
}

impl BlockingPermitExpirableSemaphore {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::sync::permit_semaphore::PermitExpirableSemaphore {
        &self.semaphore
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    fn guard(&self, guard: crate::sync::permit_semaphore::PermitGuard) -> BlockingPermitGuard {
        BlockingPermitGuard {
            id: guard.id(),
            lease: guard.lease(),
            guard: Some(guard),
            runtime: self.runtime.clone(),
        }
    }

    /// Take a permit (`None`: it never expires), waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::acquire`](crate::PermitExpirableSemaphore::acquire).
    pub fn acquire(&self, lease: Option<Duration>) -> Result<BlockingPermitGuard> {
        let guard = self.runtime.run(self.semaphore.acquire(lease))??;
        Ok(self.guard(guard))
    }

    /// Try once to take a permit.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_acquire`](crate::PermitExpirableSemaphore::try_acquire).
    pub fn try_acquire(&self, lease: Option<Duration>) -> Result<Option<BlockingPermitGuard>> {
        let guard = self.runtime.run(self.semaphore.try_acquire(lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Take a permit, waiting up to `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_acquire_for`](crate::PermitExpirableSemaphore::try_acquire_for).
    pub fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<BlockingPermitGuard>> {
        let guard = self
            .runtime
            .run(self.semaphore.try_acquire_for(wait, lease))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Release the permit `id`, whoever took it.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_release`](crate::PermitExpirableSemaphore::try_release).
    pub fn try_release(&self, id: &crate::sync::permit_semaphore::PermitId) -> Result<bool> {
        self.runtime.run(self.semaphore.try_release(id))?
    }

    /// Release several permits at once: all or none.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_release_all`](crate::PermitExpirableSemaphore::try_release_all).
    pub fn try_release_all(&self, ids: &[crate::sync::permit_semaphore::PermitId]) -> Result<u32> {
        self.runtime.run(self.semaphore.try_release_all(ids))?
    }

    /// Give the permit `id` a new lease from now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as [`PermitExpirableSemaphore::update_lease_time
    /// `](crate::PermitExpirableSemaphore::update_lease_time).
    pub fn update_lease_time(
        &self,
        id: &crate::sync::permit_semaphore::PermitId,
        lease: Duration,
    ) -> Result<bool> {
        self.runtime
            .run(self.semaphore.update_lease_time(id, lease))?
    }

    /// The remaining lease of the permit `id`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::get_lease_time`](crate::PermitExpirableSemaphore::get_lease_time).
    pub fn get_lease_time(
        &self,
        id: &crate::sync::permit_semaphore::PermitId,
    ) -> Result<Option<crate::sync::permit_semaphore::PermitLease>> {
        self.runtime.run(self.semaphore.get_lease_time(id))?
    }

    /// The number of permits available now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::available_permits`](crate::PermitExpirableSemaphore::available_permits).
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.available_permits())?
    }

    /// The number of permits taken now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::acquired_permits`](crate::PermitExpirableSemaphore::acquired_permits).
    pub fn acquired_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.acquired_permits())?
    }

    /// Available plus taken permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::permits`](crate::PermitExpirableSemaphore::permits).
    pub fn permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.permits())?
    }

    /// Make the total number of permits `permits`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::set_permits`](crate::PermitExpirableSemaphore::set_permits).
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        self.runtime.run(self.semaphore.set_permits(permits))?
    }

    /// Set the permits if the semaphore does not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_set_permits`](crate::PermitExpirableSemaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.run(self.semaphore.try_set_permits(permits))?
    }

    /// Add (or, if negative, take away) available permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::add_permits`](crate::PermitExpirableSemaphore::add_permits).
    pub fn add_permits(&self, permits: i32) -> Result<()> {
        self.runtime.run(self.semaphore.add_permits(permits))?
    }
}

/// A permit taken through a [`BlockingPermitExpirableSemaphore`]. Dropping
/// it gives it back synchronously (in the background if dropped inside a
/// runtime).
#[must_use = "dropping the permit releases it at once"]
#[derive(Debug)]
pub struct BlockingPermitGuard {
    id: crate::sync::permit_semaphore::PermitId,
    lease: Option<Duration>,
    guard: Option<crate::sync::permit_semaphore::PermitGuard>,
    runtime: Arc<Driver>,
}

impl BlockingPermitGuard {
    /// The permit's id (shown as Java shows it: 32 lowercase hex digits).
    pub fn id(&self) -> crate::sync::permit_semaphore::PermitId {
        self.id
    }

    /// The lease it was taken with (`None`: it never expires).
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Give the permit back: `true` if it was still taken.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime (the
    /// permit is then given back in the background); else as
    /// [`PermitGuard::release`](crate::PermitGuard::release).
    pub fn release(mut self) -> Result<bool> {
        match self.guard.take() {
            Some(guard) => self.runtime.run(guard.release())?,
            None => Ok(false),
        }
    }

    /// Keep the permit taken until its lease runs out.
    pub fn forget(mut self) {
        if let Some(guard) = self.guard.take() {
            guard.forget();
        }
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> Option<&crate::sync::permit_semaphore::PermitGuard> {
        self.guard.as_ref()
    }
}

impl Drop for BlockingPermitGuard {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            self.runtime.release_on_drop("permit", guard.release());
        }
    }
}

/// The blocking twin of a [`CountDownLatch`](crate::CountDownLatch).
#[derive(Clone, Debug)]
pub struct BlockingCountDownLatch {
    latch: crate::sync::count_down_latch::CountDownLatch,
    runtime: Arc<Driver>,
}

impl BlockingCountDownLatch {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::sync::count_down_latch::CountDownLatch {
        &self.latch
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        self.latch.name()
    }

    /// Set the count if the latch does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::try_set_count`](crate::CountDownLatch::try_set_count).
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.runtime.run(self.latch.try_set_count(count))?
    }

    /// Count down by one.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::count_down`](crate::CountDownLatch::count_down).
    pub fn count_down(&self) -> Result<()> {
        self.runtime.run(self.latch.count_down())?
    }

    /// The count now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`CountDownLatch::get_count`](crate::CountDownLatch::get_count).
    pub fn get_count(&self) -> Result<i64> {
        self.runtime.run(self.latch.get_count())?
    }

    /// Delete the latch; returns whether it existed.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::delete`](crate::CountDownLatch::delete).
    pub fn delete(&self) -> Result<bool> {
        self.runtime.run(self.latch.delete())?
    }

    /// Wait until the count is zero, or the latch is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as
    /// [`CountDownLatch::await_zero`](crate::CountDownLatch::await_zero).
    pub fn await_zero(&self) -> Result<crate::sync::count_down_latch::LatchOpened> {
        self.runtime.run(self.latch.await_zero())?
    }

    /// Wait at most `wait`; `None` if the time ran out.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime;
    /// else as [`CountDownLatch::await_for`](crate::CountDownLatch::await_for).
    pub fn await_for(
        &self,
        wait: Duration,
    ) -> Result<Option<crate::sync::count_down_latch::LatchOpened>> {
        self.runtime.run(self.latch.await_for(wait))?
    }
}
