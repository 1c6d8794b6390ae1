//! What a [`PermitExpirableSemaphore`] does besides acquiring through a
//! guard: releasing permits by id, reading and changing a permit's lease,
//! and the permit counts.

use std::time::Duration;

use fred::types::Value;
use futures::FutureExt;

use crate::base::error::{Error, Result};
use crate::base::layout::PERMIT_NEVER_EXPIRES as NEVER_EXPIRES;
use crate::base::time::epoch_ms;
use crate::connection::script::{millis, parse_flags, script, ScriptCall};
use crate::engine::background::FinishOnDrop;
use crate::engine::permits::PES_RENEW;
use crate::synchronizers::count::{add_call, check_permits, integer, try_set_call};
use crate::synchronizers::permit_id::{PermitId, PermitLease};
use crate::synchronizers::permit_semaphore::{PermitExpirableSemaphore, Released};

// The scripts this module runs (`lua/`, embedded at build time).
script!(
    PES_RELEASE_MANY,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_release_many.lua"
);
script!(
    PES_COUNTS,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_counts.lua"
);
script!(
    PES_SET_PERMITS,
    "args.lua",
    "count.lua",
    "pes_set_permits.lua"
);
script!(
    PES_LEASE_TIME,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_lease_time.lua"
);

impl PermitExpirableSemaphore {
    /// Release the permit `id` (Redisson's `tryRelease(permitId)`), whoever
    /// took it: `true` if it was taken and its lease still ran; `false` if no
    /// such permit is taken (unknown id, already released, or its lease ran
    /// out: an expired permit found here is given back all the same). The
    /// new count is published.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key holds something else; a transient error
    /// if Redis stayed unreachable through `retry_attempts` retries (a retry
    /// after a lost reply is safe, but may answer `false` for a permit the
    /// lost try released).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes the release in the
    /// background.
    pub async fn try_release(&self, id: &PermitId) -> Result<bool> {
        let (semaphore, id) = (self.clone(), *id);
        let call = async move { semaphore.release_retrying(id).await };
        let released =
            FinishOnDrop::new(self.inner().background.clone(), call, |_| async {}.boxed()).await?;
        Ok(released == Released::Yes)
    }

    /// Release several permits at once (Redisson ≥ 3.23.4's
    /// `tryRelease(permitIds)`): all of them, if every one is taken and
    /// unexpired, returning how many; else none, returning 0. The number
    /// released is published (as Redisson does: the change, not the new
    /// count). No ids: 0, without a command.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than `i32::MAX` ids; else as
    /// [`try_release`](Self::try_release) (a retry after a lost reply may
    /// answer 0 for permits the lost try released).
    ///
    /// # Cancel safety
    ///
    /// As [`try_release`](Self::try_release).
    pub async fn try_release_all(&self, ids: &[PermitId]) -> Result<u32> {
        if ids.is_empty() {
            return Ok(0);
        }
        let count = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        check_permits(count)?;
        let (semaphore, ids) = (self.clone(), ids.to_vec());
        let call = async move {
            let reply = semaphore
                .eval_retrying(|| {
                    let mut args = vec![
                        Value::Integer(count.into()),
                        Value::Integer(epoch_ms()),
                        semaphore.inner().env.publish(),
                    ];
                    args.extend(ids.iter().map(PermitId::value));
                    ScriptCall::new(
                        &PES_RELEASE_MANY,
                        &semaphore.shared.keys_channel_first(),
                        args,
                    )
                })
                .await?;
            let released = integer(reply, "permit release")?;
            Ok(u32::try_from(released).unwrap_or(0))
        };
        FinishOnDrop::new(self.inner().background.clone(), call, |_| async {}.boxed()).await
    }

    /// Give the taken permit `id` a new lease from now (Redisson's
    /// `updateLeaseTime`); `false` if no such permit is taken (expired
    /// permits are given back first).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION); [`Error::WrongType`](crate::Error::WrongType) if a key
    /// holds something else; a transient error after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have run; running it again is harmless.
    pub async fn update_lease_time(&self, id: &PermitId, lease: Duration) -> Result<bool> {
        crate::base::time::checked("lease", lease)?;
        // The watchdog permits' renewal script (docs/PROTOCOL.md §7.6) for
        // one id: Redisson's updateLeaseTime.
        let reply = self
            .eval_retrying(|| {
                let now = epoch_ms();
                ScriptCall::new(
                    &PES_RENEW,
                    &self.shared.keys_timeouts_first(),
                    vec![
                        Value::Integer(now.saturating_add(millis(lease))),
                        Value::Integer(now),
                        self.inner().env.publish(),
                        id.value(),
                    ],
                )
            })
            .await?;
        Ok(parse_flags(reply, 1, "permit updateLeaseTime")?.first() == Some(&true))
    }

    /// The remaining lease of the taken permit `id` (Redisson's
    /// `getLeaseTime`), or `None` if no such permit is taken (where Java
    /// throws). Expired permits are given back first.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key holds something else; a transient error
    /// after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads (and gives expired permits back, which any later call
    /// would do too): dropping it at any point leaves nothing behind.
    #[doc(alias = "getLeaseTime")]
    pub async fn lease_time(&self, id: &PermitId) -> Result<Option<PermitLease>> {
        let reply = self
            .eval_retrying(|| {
                ScriptCall::new(
                    &PES_LEASE_TIME,
                    &self.shared.keys_timeouts_first(),
                    vec![
                        id.value(),
                        Value::Integer(NEVER_EXPIRES),
                        Value::Integer(epoch_ms()),
                        self.inner().env.publish(),
                    ],
                )
            })
            .await?;
        Ok(match integer(reply, "permit getLeaseTime")? {
            -1 => Some(PermitLease::Never),
            ms if ms >= 0 => Some(PermitLease::Expires(Duration::from_millis(
                u64::try_from(ms).unwrap_or(0),
            ))),
            _ => None,
        })
    }

    /// `(available, acquired)` after expired permits were given back.
    async fn counts(&self) -> Result<(i64, i64)> {
        let reply = self
            .eval_retrying(|| {
                ScriptCall::new(
                    &PES_COUNTS,
                    &self.shared.keys_timeouts_first(),
                    vec![Value::Integer(epoch_ms()), self.inner().env.publish()],
                )
            })
            .await?;
        match reply {
            Value::Array(values) => match values.as_slice() {
                [Value::Integer(available), Value::Integer(acquired)] => {
                    Ok((*available, *acquired))
                }
                other => Err(Error::Protocol(format!("permit counts replied {other:?}"))),
            },
            other => Err(Error::Protocol(format!("permit counts replied {other:?}"))),
        }
    }

    /// The number of permits available now, after expired ones were given
    /// back (Redisson's `availablePermits`).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key holds something else; a transient error
    /// after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads (and gives expired permits back, which any later call
    /// would do too): dropping it at any point leaves nothing behind.
    pub async fn available_permits(&self) -> Result<i64> {
        Ok(self.counts().await?.0)
    }

    /// The number of permits taken now, after expired ones were given back
    /// (Redisson's `acquiredPermits`).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    ///
    /// # Cancel safety
    ///
    /// It only reads (and gives expired permits back, which any later call
    /// would do too): dropping it at any point leaves nothing behind.
    pub async fn acquired_permits(&self) -> Result<i64> {
        Ok(self.counts().await?.1)
    }

    /// Available plus taken permits (Redisson's `getPermits`).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    ///
    /// # Cancel safety
    ///
    /// It only reads (and gives expired permits back, which any later call
    /// would do too): dropping it at any point leaves nothing behind.
    pub async fn permits(&self) -> Result<i64> {
        let (available, acquired) = self.counts().await?;
        Ok(available.saturating_add(acquired))
    }

    /// Make the total number of permits (available plus taken) `permits`
    /// (Redisson's `setPermits`), publishing it if it changed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than `i32::MAX` permits;
    /// [`Error::WrongType`](crate::Error::WrongType) if a key holds something else; a transient error
    /// after `retry_attempts` retries (a retry is harmless: it sets the same
    /// total).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have run; running it again is harmless.
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        self.eval_retrying(|| {
            ScriptCall::new(
                &PES_SET_PERMITS,
                &self.shared.keys_channel_first(),
                vec![Value::Integer(permits.into()), self.inner().env.publish()],
            )
        })
        .await
        .map(drop)
    }

    /// Set the number of available permits if the semaphore does not exist
    /// yet (Redisson's `trySetPermits`); returns whether it was set.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than `i32::MAX` permits;
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a count; a
    /// transient error at once (not retried: a retry of a call that ran would
    /// answer `false`).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        try_set_call(&self.shared.handle, permits, None).await
    }

    /// Add available permits, or take them away if negative (Redisson's
    /// `addPermits`); a positive change is published.
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
        add_call(&self.shared.handle, permits, true).await.map(drop)
    }

    /// Run the script call `build` makes (built anew for each try) on this
    /// semaphore, tried again after transient errors up to `retry_attempts`
    /// times.
    async fn eval_retrying(&self, build: impl Fn() -> ScriptCall) -> Result<Value> {
        let inner = self.inner();
        inner
            .redis
            .retrying(&self.shared.handle.name, || inner.redis.eval(&build))
            .await
    }
}
