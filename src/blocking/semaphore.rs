//! [`BlockingSemaphore`] and its permits.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

use super::client::BlockingClient;
use super::driver::{Bridged, Driver, Release};
use crate::base::error::Result;

impl BlockingClient {
    /// A handle to the semaphore `name` (Redisson's `getSemaphore`).
    ///
    /// ```no_run
    /// use redisson_lock::blocking::BlockingClient;
    ///
    /// let client = BlockingClient::connect("redis://127.0.0.1:6379")?;
    /// let calls = client.semaphore("partner-api")?;
    /// calls.try_set_permits(4)?;
    /// let permit = calls.acquire(1)?;   // waits for a permit
    /// drop(permit);                     // gives it back, synchronously
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn semaphore(&self, name: &str) -> Result<BlockingSemaphore> {
        Ok(BlockingSemaphore {
            semaphore: self.client.semaphore(name)?,
            runtime: self.runtime.clone(),
        })
    }
}

/// The blocking twin of a [`Semaphore`](crate::Semaphore). Permits are not
/// owned by threads: a permit may be released on any thread.
#[derive(Clone, Debug)]
pub struct BlockingSemaphore {
    semaphore: crate::synchronizers::semaphore::Semaphore,
    runtime: Arc<Driver>,
}

impl BlockingSemaphore {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::synchronizers::semaphore::Semaphore {
        &self.semaphore
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    fn permit(
        &self,
        permit: crate::synchronizers::semaphore::SemaphorePermit,
    ) -> BlockingSemaphorePermit {
        BlockingSemaphorePermit {
            permit: Bridged::new(permit, self.runtime.clone()),
        }
    }

    /// Take `permits` permits, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_acquire`](crate::Semaphore::try_acquire).
    pub fn try_acquire(&self, permits: u32) -> Result<Option<BlockingSemaphorePermit>> {
        let permit = self.runtime.run(self.semaphore.try_acquire(permits))??;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Take `permits` permits, waiting up to `wait` (Java's
    /// `tryAcquire(permits, wait, unit)`, in its argument order).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_acquire_permits_for`](crate::Semaphore::try_acquire_permits_for).
    pub fn try_acquire_permits_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<BlockingSemaphorePermit>> {
        let permit = self
            .runtime
            .run(self.semaphore.try_acquire_permits_for(permits, wait))??;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Give `permits` permits back without a permit guard.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::release`](crate::Semaphore::release).
    pub fn release(&self, permits: u32) -> Result<()> {
        self.runtime.run(self.semaphore.release(permits))?
    }

    /// Give permits back only if the semaphore exists.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.run(self.semaphore.try_set_permits(permits))?
    }

    /// Set the permits, with a TTL, if the semaphore does not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    pub fn add_permits(&self, permits: i32) -> Result<()> {
        self.runtime.run(self.semaphore.add_permits(permits))?
    }

    /// The number of permits available now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`Semaphore::available_permits`](crate::Semaphore::available_permits).
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.run(self.semaphore.available_permits())?
    }

    /// Take every available permit; returns how many there were.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
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
    permit: Bridged<crate::synchronizers::semaphore::SemaphorePermit>,
}

impl BlockingSemaphorePermit {
    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.permit.get().permits()
    }

    /// Give the permits back, reporting errors.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime (the
    /// permits are then given back in the background); else as
    /// [`SemaphorePermit::release`](crate::SemaphorePermit::release).
    pub fn release(self) -> Result<()> {
        self.permit.release().map(drop)
    }

    /// Keep the permits taken (see [`SemaphorePermit::forget`](crate::SemaphorePermit::forget)).
    pub fn forget(self) {
        self.permit.keep();
    }

    /// The async permit underneath.
    pub fn as_async(&self) -> &crate::synchronizers::semaphore::SemaphorePermit {
        self.permit.get()
    }
}

impl Release for crate::synchronizers::semaphore::SemaphorePermit {
    type Output = ();
    const WHAT: &'static str = "permit";

    fn release_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        crate::synchronizers::semaphore::SemaphorePermit::release_now(self)
    }

    fn keep(&mut self) {
        crate::synchronizers::semaphore::SemaphorePermit::keep(self);
    }
}

super::object::expirable!(BlockingSemaphore, semaphore, "Semaphore");
