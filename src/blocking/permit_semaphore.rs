//! [`BlockingPermitExpirableSemaphore`] and its permits.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

use super::client::BlockingClient;
use super::driver::{Bridged, Driver, Release};
use crate::base::error::Result;

impl BlockingClient {
    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `getPermitExpirableSemaphore`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn permit_expirable_semaphore(
        &self,
        name: &str,
    ) -> Result<BlockingPermitExpirableSemaphore> {
        Ok(BlockingPermitExpirableSemaphore {
            semaphore: self.client.permit_expirable_semaphore(name)?,
            runtime: self.runtime.clone(),
        })
    }
}

/// The blocking twin of a
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
#[derive(Clone, Debug)]
pub struct BlockingPermitExpirableSemaphore {
    semaphore: crate::synchronizers::permit_semaphore::PermitExpirableSemaphore,
    runtime: Arc<Driver>,
}

impl BlockingPermitExpirableSemaphore {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::synchronizers::permit_semaphore::PermitExpirableSemaphore {
        &self.semaphore
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    fn guard(
        &self,
        guard: crate::synchronizers::permit_semaphore::PermitGuard,
    ) -> BlockingPermitGuard {
        BlockingPermitGuard {
            id: guard.id(),
            lease: guard.lease(),
            guard: Bridged::new(guard, self.runtime.clone()),
        }
    }

    /// Take a permit (`None`: it never expires), waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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

    /// Take a permit renewed by the watchdog while its guard lives, waiting
    /// as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::acquire_renewed`](crate::PermitExpirableSemaphore::acquire_renewed).
    pub fn acquire_renewed(&self) -> Result<BlockingPermitGuard> {
        let guard = self.runtime.run(self.semaphore.acquire_renewed())??;
        Ok(self.guard(guard))
    }

    /// Take a permit renewed by the watchdog while its guard lives, waiting
    /// up to `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_acquire_renewed_for`](crate::PermitExpirableSemaphore::try_acquire_renewed_for).
    pub fn try_acquire_renewed_for(&self, wait: Duration) -> Result<Option<BlockingPermitGuard>> {
        let guard = self
            .runtime
            .run(self.semaphore.try_acquire_renewed_for(wait))??;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Release the permit `id`, whoever took it.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_release`](crate::PermitExpirableSemaphore::try_release).
    pub fn try_release(&self, id: &crate::synchronizers::permit_id::PermitId) -> Result<bool> {
        self.runtime.run(self.semaphore.try_release(id))?
    }

    /// Release several permits at once: all or none.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_release_all`](crate::PermitExpirableSemaphore::try_release_all).
    pub fn try_release_all(
        &self,
        ids: &[crate::synchronizers::permit_id::PermitId],
    ) -> Result<u32> {
        self.runtime.run(self.semaphore.try_release_all(ids))?
    }

    /// Give the permit `id` a new lease from now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as [`PermitExpirableSemaphore::update_lease_time
    /// `](crate::PermitExpirableSemaphore::update_lease_time).
    pub fn update_lease_time(
        &self,
        id: &crate::synchronizers::permit_id::PermitId,
        lease: Duration,
    ) -> Result<bool> {
        self.runtime
            .run(self.semaphore.update_lease_time(id, lease))?
    }

    /// The remaining lease of the permit `id`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::lease_time`](crate::PermitExpirableSemaphore::lease_time).
    pub fn lease_time(
        &self,
        id: &crate::synchronizers::permit_id::PermitId,
    ) -> Result<Option<crate::synchronizers::permit_id::PermitLease>> {
        self.runtime.run(self.semaphore.lease_time(id))?
    }

    /// The number of permits available now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::available_permits`](crate::PermitExpirableSemaphore::available_permits).
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.available_permits())?
    }

    /// The number of permits taken now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::acquired_permits`](crate::PermitExpirableSemaphore::acquired_permits).
    pub fn acquired_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.acquired_permits())?
    }

    /// Available plus taken permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`PermitExpirableSemaphore::permits`](crate::PermitExpirableSemaphore::permits).
    pub fn permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.permits())?
    }

    /// Make the total number of permits `permits`.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::set_permits`](crate::PermitExpirableSemaphore::set_permits).
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        self.runtime.run(self.semaphore.set_permits(permits))?
    }

    /// Set the permits if the semaphore does not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`PermitExpirableSemaphore::try_set_permits`](crate::PermitExpirableSemaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.run(self.semaphore.try_set_permits(permits))?
    }

    /// Add (or, if negative, take away) available permits.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    id: crate::synchronizers::permit_id::PermitId,
    lease: Option<Duration>,
    guard: Bridged<crate::synchronizers::permit_semaphore::PermitGuard>,
}

impl BlockingPermitGuard {
    /// The permit's id (shown as Java shows it: 32 lowercase hex digits).
    pub fn id(&self) -> crate::synchronizers::permit_id::PermitId {
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime (the
    /// permit is then given back in the background); else as
    /// [`PermitGuard::release`](crate::PermitGuard::release).
    pub fn release(self) -> Result<bool> {
        Ok(self.guard.release()?.unwrap_or(false))
    }

    /// Whether the watchdog renews this permit (see
    /// [`PermitGuard::is_renewed`](crate::PermitGuard::is_renewed)).
    pub fn is_renewed(&self) -> bool {
        self.guard.get().is_renewed()
    }

    /// Whether the permit is known to be lost right now (see
    /// [`PermitGuard::lost_reason`](crate::PermitGuard::lost_reason)).
    pub fn is_lost(&self) -> bool {
        self.guard.get().is_lost()
    }

    /// Why the permit is lost, if it is (see
    /// [`PermitGuard::lost_reason`](crate::PermitGuard::lost_reason)).
    pub fn lost_reason(&self) -> Option<crate::LostReason> {
        self.guard.get().lost_reason()
    }

    /// Keep the permit taken until its lease runs out (a renewed permit is
    /// no longer renewed).
    pub fn forget(self) {
        self.guard.keep();
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> &crate::synchronizers::permit_semaphore::PermitGuard {
        self.guard.get()
    }
}

impl Release for crate::synchronizers::permit_semaphore::PermitGuard {
    type Output = bool;
    const WHAT: &'static str = "permit";

    fn release_now(&mut self) -> Option<BoxFuture<'static, Result<bool>>> {
        crate::synchronizers::permit_semaphore::PermitGuard::release_now(self)
    }

    fn keep(&mut self) {
        crate::synchronizers::permit_semaphore::PermitGuard::keep(self);
    }
}

super::object::expirable!(
    BlockingPermitExpirableSemaphore,
    semaphore,
    "PermitExpirableSemaphore"
);
