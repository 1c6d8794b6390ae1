//! What a [`Semaphore`] does besides acquiring through a permit guard:
//! giving permits back without one, setting, adding, counting and draining
//! them.

use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Value;
use futures::FutureExt;

use crate::base::error::Result;
use crate::base::keys::latch_key;
use crate::connection::script::{script, ScriptCall};
use crate::engine::background::FinishOnDrop;
use crate::synchronizers::count::{add_call, check_permits, get_count, integer, try_set_call};
use crate::synchronizers::semaphore::Semaphore;

// The scripts this module runs (`lua/`, embedded at build time).
script!(
    SEMAPHORE_RELEASE_IF_EXISTS,
    "args.lua",
    "count.lua",
    "semaphore_release_if_exists.lua"
);
script!(
    SEMAPHORE_DRAIN,
    "args.lua",
    "count.lua",
    "semaphore_drain.lua"
);

impl Semaphore {
    /// Take `permits` permits, waiting up to `wait`: Redisson's
    /// `tryAcquire(permits, wait, unit)` / `tryAcquire(permits, Duration)`,
    /// in Java's argument order (zero: try once; above
    /// [`MAX_DURATION`](crate::MAX_DURATION): no time limit). `None` if the
    /// time ran out. Zero permits: a permit of nothing, at once.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// // Java: semaphore.tryAcquire(2, 5, TimeUnit.SECONDS)
    /// let sem = client.semaphore("partner-api")?;
    /// if let Some(permit) = sem.try_acquire_permits_for(2, Duration::from_secs(5)).await? {
    ///     permit.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more
    /// than `i32::MAX` permits, before anything is sent;
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds
    /// something other than a count; transient failures are retried until
    /// the deadline, which then returns the last transient error;
    /// [`Error::Closed`](crate::Error::Closed) at shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back whatever it took, in the background.
    #[doc(alias = "tryAcquire")]
    pub async fn try_acquire_permits_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<crate::synchronizers::semaphore::SemaphorePermit>> {
        self.acquire_within(Some(wait), permits).await
    }

    /// Give `permits` permits back without a permit guard (Redisson's
    /// `release(permits)`): the count goes up by `permits` (there is no upper
    /// bound) and the new count is published. Pair it with permits you
    /// [`forget`](crate::SemaphorePermit::forget), or with Java's acquisitions.
    /// Zero permits: nothing is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than `i32::MAX` permits;
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error if Redis stayed unreachable through `retry_attempts`
    /// retries (each retry is safe: a permit latch keeps it from counting
    /// twice).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes the release in the
    /// background.
    pub async fn release(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        if permits == 0 {
            return Ok(());
        }
        let semaphore = self.clone();
        let call = async move {
            let latch = latch_key(&semaphore.shared.latch_prefix);
            semaphore.release_awaited(permits, &latch).await.map(drop)
        };
        FinishOnDrop::new(self.inner().background.clone(), call, |_| async {}.boxed()).await
    }

    /// Give `permits` permits back only if the semaphore exists (Redisson's
    /// `releaseIfExists`); returns whether it did.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release), except that a transient error is
    /// returned at once: this call is not retried, so after a lost reply
    /// whether it ran is unknown.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have released (the command may
    /// already be on its way).
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        if permits == 0 {
            return self.key_exists().await;
        }
        let inner = self.inner();
        let reply = inner
            .redis
            .eval(|| {
                ScriptCall::new(
                    &SEMAPHORE_RELEASE_IF_EXISTS,
                    &[&self.shared.handle.name, &self.shared.handle.channel],
                    vec![Value::Integer(permits.into()), inner.env.publish()],
                )
            })
            .await?;
        Ok(integer(reply, "semaphore releaseIfExists")? == 1)
    }

    async fn key_exists(&self) -> Result<bool> {
        let name = self.shared.handle.name.clone();
        let n: i64 = self
            .inner()
            .redis
            .key_command(&self.shared.handle.name, |c| {
                let name = name.clone();
                async move { c.exists(name).await }
            })
            .await?;
        Ok(n == 1)
    }

    /// Set the number of permits if the semaphore does not exist yet
    /// (Redisson's `trySetPermits`); returns whether it was set. The count is
    /// published, waking waiters.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than `i32::MAX` permits;
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error at once (not retried: a retry of a call that ran
    /// would answer `false`).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.try_set(permits, None).await
    }

    /// [`try_set_permits`](Self::try_set_permits) with a TTL on the key
    /// (Redisson's `trySetPermits(permits, ttl)`): the semaphore vanishes
    /// `ttl` later unless something removes the TTL.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a TTL below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION); else as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        crate::base::time::checked("ttl", ttl)?;
        self.try_set(permits, Some(ttl)).await
    }

    async fn try_set(&self, permits: u32, ttl: Option<Duration>) -> Result<bool> {
        check_permits(permits)?;
        try_set_call(&self.shared.handle, permits, ttl).await
    }

    /// Add `permits` permits, or take them away if negative (Redisson's
    /// `addPermits`): the count becomes `current + permits` (from 0 if the
    /// semaphore does not exist, and without a TTL) and is published.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error at once (not retried: a retry of a call that ran would
    /// add twice).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have added the permits.
    pub async fn add_permits(&self, permits: i32) -> Result<()> {
        add_call(&self.shared.handle, permits, false)
            .await
            .map(drop)
    }

    /// The number of permits available now (`GET`; 0 if the semaphore does
    /// not exist; negative after taking away more than were there).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn available_permits(&self) -> Result<i64> {
        get_count(self.inner(), &self.shared.handle.name).await
    }

    /// Take every available permit (Redisson's `drainPermits`): the count
    /// becomes 0 (a TTL is removed) and the number it held is returned. The
    /// permits taken are not tracked: give them back with
    /// [`release`](Self::release).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error at once (not retried: a retry would answer 0).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have drained the permits.
    pub async fn drain_permits(&self) -> Result<i64> {
        let reply = self
            .inner()
            .redis
            .eval(|| ScriptCall::new(&SEMAPHORE_DRAIN, &[&self.shared.handle.name], Vec::new()))
            .await?;
        integer(reply, "semaphore drainPermits")
    }
}
