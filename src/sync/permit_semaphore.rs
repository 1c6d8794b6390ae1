//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`
//! (docs/PROTOCOL.md §7.2), whose permits have ids and may expire, with RAII
//! permits ([`PermitGuard`]).
//!
//! Redis holds the available count in the string key `N` and every taken
//! permit in the sorted set `{N}:timeout`: the member is the permit id (16
//! raw bytes, as Redisson ≥ 3.17 writes it), the score its expiry in epoch
//! milliseconds of the acquiring client's clock, or `922337203685477` for a
//! permit that never expires. Every script first gives expired permits back
//! (and publishes the new count on `redisson_sc:{N}`), exactly where
//! Redisson's do, so a crashed holder's permit comes back by itself.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::detach::{Cleanups, FinishOnDrop};
use crate::base::error::{Error, Result};
use crate::base::names::{prefix_name, suffix_name};
use crate::base::telemetry::Acquisition;
use crate::base::time::epoch_ms;
use crate::client::{Client, Inner};
use crate::connection::pubsub::Wake;
use crate::connection::script::{self, millis, ScriptCall};
use crate::engine::armed::{unlosable, Armed, GiveBack, Leftover};
use crate::engine::wait::{wait_until, Outcome};
use crate::sync::semaphore::{add_call, check_permits, integer, try_set_call};

/// The `kind` of spans and metrics.
const KIND: &str = "permit_expirable_semaphore";

/// The span of one release of the permit `id` (`background`: nobody awaits it).
fn release_span(name: &str, id: PermitId, background: bool) -> tracing::Span {
    tracing::debug_span!(
        "redisson_lock.release",
        lock = name,
        kind = KIND,
        permit = %id,
        background,
        outcome = tracing::field::Empty,
        error = tracing::field::Empty,
    )
}

/// Record a release's outcome on its span.
fn record_release(span: &tracing::Span, released: &Result<Released>) {
    match released {
        Ok(Released::Yes) => span.record("outcome", "released"),
        Ok(Released::Expired) => span.record("outcome", "expired"),
        Ok(Released::Unknown) => span.record("outcome", "unknown"),
        Err(e) => span
            .record("outcome", "error")
            .record("error", tracing::field::display(e)),
    };
}

/// Redisson's score for a permit that never expires (`nonExpirableTimeout`).
pub(crate) const NEVER_EXPIRES: i64 = 922_337_203_685_477;

/// The id of one permit of a [`PermitExpirableSemaphore`]: 16 random bytes,
/// stored as such in Redis (Redisson ≥ 3.17) and shown, as Java shows it,
/// as 32 lowercase hex digits. Parse that text back with [`str::parse`].
///
/// ```
/// use redisson_lock::PermitId;
///
/// let id: PermitId = "00112233445566778899aabbccddeeff".parse()?;
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert_eq!(id.as_bytes()[15], 0xff);
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// A new random id.
    pub fn random() -> PermitId {
        PermitId(rand::random())
    }

    /// The id of these 16 bytes (as stored in Redis).
    pub const fn from_bytes(bytes: [u8; 16]) -> PermitId {
        PermitId(bytes)
    }

    /// The 16 bytes stored in Redis.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    fn value(&self) -> Value {
        Value::Bytes(self.0.to_vec().into())
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    /// 32 hex digits (either case), as Java shows permit ids.
    fn from_str(text: &str) -> Result<PermitId> {
        let bad = || {
            Error::InvalidArgument(format!(
                "a permit id is 32 hex digits, got {:?}",
                text.chars().take(40).collect::<String>()
            ))
        };
        let digits = text.as_bytes();
        // Hex digits only (`from_str_radix` would also take a `+`).
        if digits.len() != 32 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(PermitId(bytes))
    }
}

/// The remaining lease of a permit ([`PermitExpirableSemaphore::get_lease_time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PermitLease {
    /// The permit expires after this long (per the acquiring client's clock).
    Expires(Duration),
    /// The permit never expires (taken without a lease).
    Never,
}

/// A handle to Redisson's permit-expirable semaphore `N`
/// (`getPermitExpirableSemaphore(name)`). Cheap to clone.
///
/// Every permit has an id and, optionally, a lease: a permit whose lease ran
/// out is given back by the next script any client runs on the semaphore,
/// so a crashed worker's permit comes back by itself. Acquiring returns a
/// [`PermitGuard`] carrying the id and lease, which gives the permit back when
/// released or dropped.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
///
/// let workers = client.permit_expirable_semaphore("render-workers")?;
/// workers.try_set_permits(8).await?;
/// let permit = workers.acquire(Some(Duration::from_secs(60))).await?;
/// println!("working under permit {}", permit.id()); // 32 hex digits, as Java shows it
/// // ... if this process dies, the permit comes back after 60 s ...
/// permit.release().await?;
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Every future may be dropped at any await point. An acquire script already
/// sent is finished in the background and the permit it took is given back
/// (by its id, so exactly); a waiter leaves its channel when dropped.
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    /// `N`, the available count.
    name: String,
    /// `{N}:timeout`, the taken permits.
    timeouts: String,
    /// `redisson_sc:{N}`.
    channel: String,
}

impl Client {
    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `getPermitExpirableSemaphore(name)`). No command is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn permit_expirable_semaphore(&self, name: &str) -> Result<PermitExpirableSemaphore> {
        let name = self.map_name(name)?;
        Ok(PermitExpirableSemaphore {
            shared: Arc::new(Shared {
                client: self.clone(),
                timeouts: suffix_name(&name, "timeout"),
                channel: prefix_name("redisson_sc", &name),
                name,
            }),
        })
    }
}

/// Whether a release found the permit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Released {
    /// Released while its lease ran.
    Yes,
    /// Found, but its lease had run out (given back all the same).
    Expired,
    /// Not found.
    Unknown,
}

impl PermitExpirableSemaphore {
    fn inner(&self) -> &Arc<Inner> {
        &self.shared.client.inner
    }

    /// The semaphore's name (its Redis key, after name mapping).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The channel releases publish on (`redisson_sc:{N}`).
    #[doc(hidden)]
    pub fn channel(&self) -> &str {
        &self.shared.channel
    }

    /// The sorted set of taken permits (`{N}:timeout`).
    #[doc(hidden)]
    pub fn timeouts_key(&self) -> &str {
        &self.shared.timeouts
    }

    /// Take a permit, waiting as long as it takes (Redisson's
    /// `acquire(leaseTime)`; `None`: `acquire()`, a permit that never
    /// expires). The lease runs from when the command is sent, on this
    /// client's clock.
    ///
    /// The wait sleeps until a release is published, or at most until the
    /// earliest lease among the taken permits runs out (the acquire script
    /// reports it), when that permit comes back; and re-checks at least every
    /// `lock_watchdog_timeout` in case a message was lost.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION), before anything is sent;
    /// [`Error::WrongType`] if a key holds something else; a transient error
    /// once Redis has failed for longer than the retry budget;
    /// [`Error::Closed`] at shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back a permit it took, in the background.
    pub async fn acquire(&self, lease: Option<Duration>) -> Result<PermitGuard> {
        match self.acquire_within(None, lease).await? {
            Some(permit) => Ok(permit),
            None => Err(Error::Protocol(
                "a wait without a time limit ended without a permit".into(),
            )),
        }
    }

    /// Try once to take a permit, without waiting (Redisson's
    /// `tryAcquire()` / `tryAcquire(-1, lease)`): `None` if none is
    /// available, after expired ones were given back.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); a transient error is returned at once
    /// (a permit the attempt may have taken is given back in the background).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, lease: Option<Duration>) -> Result<Option<PermitGuard>> {
        self.acquire_within(Some(Duration::ZERO), lease).await
    }

    /// Take a permit, waiting up to `wait` (Redisson's `tryAcquire(wait,
    /// lease)`; zero: try once; above [`MAX_DURATION`](crate::MAX_DURATION):
    /// no time limit). `None` if the time ran out.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); transient failures are retried until
    /// the deadline, which then returns the last transient error.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        self.acquire_within(Some(wait), lease).await
    }

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        if let Some(lease) = lease {
            crate::base::time::checked("lease", lease)?;
        }
        let span = tracing::debug_span!(
            "redisson_lock.acquire",
            lock = self.name(),
            kind = KIND,
            wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            waited_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let report = Acquisition::start(KIND, &span, Instant::now());
        let inner = self.inner().clone();
        let (name, channel) = (&self.shared.name, &self.shared.channel);
        let done = wait_until(&inner, name, channel, Wake::Count, wait, || {
            self.attempt(lease)
        })
        .instrument(span)
        .await
        .map(|done| done.map(|d| d.value));
        report.finish(&done, wait.is_some_and(|w| w.is_zero()));
        done
    }

    /// One run of the acquire script with a fresh id. If the caller goes
    /// away before the reply, the script is finished in the background and a
    /// permit it took is released by its id; an attempt whose outcome is
    /// unknown is released by its id too (harmless if it took nothing).
    async fn attempt(&self, lease: Option<Duration>) -> Result<Outcome<PermitGuard>> {
        let inner = self.inner().clone();
        let id = PermitId::random();
        let now = epoch_ms();
        let expiry = lease.map_or(NEVER_EXPIRES, |l| now.saturating_add(millis(l)));
        let sent_at = Instant::now();
        // A permit that is not released by then comes back by itself.
        let patience = sent_at
            + lease
                .unwrap_or(Duration::MAX)
                .min(inner.config.retry_span());
        let fut = {
            let (inner, shared) = (inner.clone(), self.shared.clone());
            async move {
                let call = || {
                    ScriptCall::new(
                        &script::PES_ACQUIRE,
                        &[&shared.name, &shared.timeouts, &shared.channel],
                        vec![
                            Value::Integer(1),
                            Value::Integer(expiry),
                            Value::Integer(now),
                            Value::Integer(NEVER_EXPIRES),
                            inner.env.publish(),
                            id.value(),
                        ],
                    )
                };
                let reply = inner.redis.eval(call).await?;
                parse_acquire(reply)
            }
        };
        let undo = {
            let semaphore = self.clone();
            move |left: Leftover<'_, Option<i64>>| match left {
                // Busy: it took nothing.
                Leftover::Done(Some(_)) => None,
                // Released by its id, which is harmless if it took nothing.
                Leftover::Done(None) | Leftover::Unknown => {
                    Some(async move { semaphore.give_back(id, patience).await }.boxed())
                }
            }
        };
        Ok(match unlosable(&inner.cleanups, fut, undo).await? {
            None => Outcome::Ready(PermitGuard::new(
                self.clone(),
                id,
                lease,
                lease.and_then(|l| sent_at.checked_add(l)),
            )),
            Some(earliest) => {
                // Sleep until the earliest permit expires (its score is on
                // the acquiring client's clock; ours is the best guess).
                let bound = (earliest >= 0).then(|| {
                    let ms = earliest.saturating_sub(now).saturating_add(1).max(1);
                    Duration::from_millis(u64::try_from(ms).unwrap_or(1))
                });
                Outcome::Busy(bound)
            }
        })
    }

    /// Release `id` in the background, trying until `until`.
    async fn give_back(&self, id: PermitId, until: Instant) {
        let span = release_span(self.name(), id, true);
        let inner = self.inner();
        let release = || self.release_once(id);
        let released = inner
            .redis
            .persisting(self.name(), until, release)
            .instrument(span.clone())
            .await;
        record_release(&span, &released);
        if let Err(e) = released {
            tracing::warn!(lock = self.name(), permit = %id, error = %e, "giving a permit back failed");
        }
    }

    /// One run of the single-id release script.
    async fn release_once(&self, id: PermitId) -> Result<Released> {
        let inner = self.inner();
        let reply = inner
            .redis
            .eval(|| {
                ScriptCall::new(
                    &script::PES_RELEASE,
                    &[
                        &self.shared.name,
                        &self.shared.channel,
                        &self.shared.timeouts,
                    ],
                    vec![
                        id.value(),
                        Value::Integer(1),
                        Value::Integer(epoch_ms()),
                        inner.env.publish(),
                    ],
                )
            })
            .await?;
        match integer(reply, "permit release")? {
            1 => Ok(Released::Yes),
            0 => Ok(Released::Expired),
            _ => Ok(Released::Unknown),
        }
    }

    /// Release with retries: after a transient error, a retry that finds the
    /// id gone cannot tell an earlier try's release from an expiry, and says
    /// so as `Unknown`.
    async fn release_retrying(&self, id: PermitId) -> Result<Released> {
        let span = release_span(self.name(), id, false);
        let released = self
            .inner()
            .redis
            .retrying(self.name(), || self.release_once(id))
            .instrument(span.clone())
            .await;
        record_release(&span, &released);
        released
    }

    /// Release the permit `id` (Redisson's `tryRelease(permitId)`), whoever
    /// took it: `true` if it was taken and its lease still ran; `false` if no
    /// such permit is taken (unknown id, already released, or its lease ran
    /// out: an expired permit found here is given back all the same). The
    /// new count is published.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if a key holds something else; a transient error
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
            FinishOnDrop::new(self.inner().cleanups.clone(), call, |_| async {}.boxed()).await?;
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
    /// [`Error::InvalidArgument`] for more than `i32::MAX` ids; else as
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
            let inner = semaphore.inner();
            let shared = &semaphore.shared;
            let release = || {
                inner.redis.eval(|| {
                    let mut args = vec![
                        Value::Integer(count.into()),
                        Value::Integer(epoch_ms()),
                        inner.env.publish(),
                    ];
                    args.extend(ids.iter().map(PermitId::value));
                    ScriptCall::new(
                        &script::PES_RELEASE_MANY,
                        &[&shared.name, &shared.channel, &shared.timeouts],
                        args,
                    )
                })
            };
            let reply = inner.redis.retrying(&shared.name, release).await?;
            let released = integer(reply, "permit release")?;
            Ok(u32::try_from(released).unwrap_or(0))
        };
        FinishOnDrop::new(self.inner().cleanups.clone(), call, |_| async {}.boxed()).await
    }

    /// Give the taken permit `id` a new lease from now (Redisson's
    /// `updateLeaseTime`); `false` if no such permit is taken (expired
    /// permits are given back first).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION); [`Error::WrongType`] if a key
    /// holds something else; a transient error after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have run; running it again is harmless.
    pub async fn update_lease_time(&self, id: &PermitId, lease: Duration) -> Result<bool> {
        crate::base::time::checked("lease", lease)?;
        let inner = self.inner();
        let shared = &self.shared;
        let reply = inner
            .redis
            .retrying(&shared.name, || {
                inner.redis.eval(|| {
                    let now = epoch_ms();
                    ScriptCall::new(
                        &script::PES_UPDATE_LEASE,
                        &[&shared.name, &shared.timeouts, &shared.channel],
                        vec![
                            id.value(),
                            Value::Integer(now.saturating_add(millis(lease))),
                            Value::Integer(now),
                            inner.env.publish(),
                        ],
                    )
                })
            })
            .await?;
        Ok(integer(reply, "permit updateLeaseTime")? == 1)
    }

    /// The remaining lease of the taken permit `id` (Redisson's
    /// `getLeaseTime`), or `None` if no such permit is taken (where Java
    /// throws). Expired permits are given back first.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if a key holds something else; a transient error
    /// after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads (and gives expired permits back, which any later call
    /// would do too): dropping it at any point leaves nothing behind.
    pub async fn get_lease_time(&self, id: &PermitId) -> Result<Option<PermitLease>> {
        let inner = self.inner();
        let shared = &self.shared;
        let reply = inner
            .redis
            .retrying(&shared.name, || {
                inner.redis.eval(|| {
                    ScriptCall::new(
                        &script::PES_LEASE_TIME,
                        &[&shared.name, &shared.timeouts, &shared.channel],
                        vec![
                            id.value(),
                            Value::Integer(NEVER_EXPIRES),
                            Value::Integer(epoch_ms()),
                            inner.env.publish(),
                        ],
                    )
                })
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
        let inner = self.inner();
        let shared = &self.shared;
        let reply = inner
            .redis
            .retrying(&shared.name, || {
                inner.redis.eval(|| {
                    ScriptCall::new(
                        &script::PES_COUNTS,
                        &[&shared.name, &shared.timeouts, &shared.channel],
                        vec![Value::Integer(epoch_ms()), inner.env.publish()],
                    )
                })
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
    /// [`Error::WrongType`] if a key holds something else; a transient error
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
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits;
    /// [`Error::WrongType`] if a key holds something else; a transient error
    /// after `retry_attempts` retries (a retry is harmless: it sets the same
    /// total).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have run; running it again is harmless.
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        let inner = self.inner();
        let shared = &self.shared;
        inner
            .redis
            .retrying(&shared.name, || {
                inner.redis.eval(|| {
                    ScriptCall::new(
                        &script::PES_SET_PERMITS,
                        &[&shared.name, &shared.channel, &shared.timeouts],
                        vec![Value::Integer(permits.into()), inner.env.publish()],
                    )
                })
            })
            .await
            .map(drop)
    }

    /// Set the number of available permits if the semaphore does not exist
    /// yet (Redisson's `trySetPermits`); returns whether it was set.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits;
    /// [`Error::WrongType`] if the key holds something other than a count; a
    /// transient error at once (not retried: a retry of a call that ran would
    /// answer `false`).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        try_set_call(
            self.inner(),
            &self.shared.name,
            &self.shared.channel,
            permits,
            None,
        )
        .await
    }

    /// Add available permits, or take them away if negative (Redisson's
    /// `addPermits`); a positive change is published.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something other than a count; a
    /// transient error at once (not retried: a retry of a call that ran would
    /// add twice).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have added the permits.
    pub async fn add_permits(&self, permits: i32) -> Result<()> {
        add_call(
            self.inner(),
            &self.shared.name,
            &self.shared.channel,
            permits,
            true,
        )
        .await
        .map(drop)
    }
}

/// The acquire script's reply: `Ok(None)` when acquired, else the earliest
/// expiry in the set (`Some(-1)`: none that ever expires).
fn parse_acquire(reply: Value) -> Result<Option<i64>> {
    match reply {
        Value::Array(values) => match values.as_slice() {
            [Value::Integer(1), _] => Ok(None),
            [Value::Integer(0), Value::Integer(earliest)] => Ok(Some(*earliest)),
            other => Err(Error::Protocol(format!("permit acquire replied {other:?}"))),
        },
        other => Err(Error::Protocol(format!("permit acquire replied {other:?}"))),
    }
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.shared.name)
            .finish()
    }
}

/// One permit taken from a [`PermitExpirableSemaphore`], with its id and
/// lease. Give it back with [`release`](Self::release); a guard dropped
/// without releasing gives it back in the background (errors are logged
/// through `tracing`; [`Client::shutdown`](crate::Client::shutdown) waits for
/// it); [`forget`](Self::forget) keeps it taken until its lease runs out (or
/// until someone releases its id).
#[must_use = "dropping the permit releases it at once"]
pub struct PermitGuard(Armed<Permit>);

/// What a [`PermitGuard`] holds.
struct Permit {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    lease: Option<Duration>,
    expires_at: Option<Instant>,
}

impl GiveBack for Permit {
    type Output = bool;

    fn cleanups(&self) -> &Cleanups {
        &self.semaphore.inner().cleanups
    }

    fn give_back(&self) -> BoxFuture<'static, Result<bool>> {
        crate::base::telemetry::unheld(KIND);
        let (semaphore, id) = (self.semaphore.clone(), self.id);
        async move { Ok(semaphore.release_retrying(id).await? == Released::Yes) }.boxed()
    }

    fn give_back_later(&self) -> BoxFuture<'static, ()> {
        crate::base::telemetry::unheld(KIND);
        let (semaphore, id) = (self.semaphore.clone(), self.id);
        // After its lease the permit comes back by itself.
        let mut until = Instant::now() + semaphore.inner().config.retry_span();
        if let Some(expiry) = self.expires_at {
            until = until.min(expiry);
        }
        async move { semaphore.give_back(id, until).await }.boxed()
    }

    fn kept(&self) {
        crate::base::telemetry::unheld(KIND);
    }
}

impl PermitGuard {
    /// The permit's id (shown as Java shows it: 32 lowercase hex digits).
    pub fn id(&self) -> PermitId {
        self.0.get().id
    }

    /// The lease it was taken with (`None`: it never expires).
    pub fn lease(&self) -> Option<Duration> {
        self.0.get().lease
    }

    /// When the lease runs out, measured from when the acquire command was
    /// sent (so never later than the expiry Redis knows, on one clock);
    /// `None` for a permit that never expires. A
    /// [`update_lease_time`](PermitExpirableSemaphore::update_lease_time)
    /// is not reflected here.
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        self.0.get().expires_at.map(Instant::into_std)
    }

    /// The semaphore the permit belongs to.
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.0.get().semaphore
    }

    /// Give the permit back: `true` if it was still taken (its lease ran);
    /// `false` if it was no longer taken: its lease had run out and it came
    /// back by itself, or someone released its id (or, after a lost reply, a
    /// retry cannot tell that apart from its own earlier try).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if a key was replaced by something else; a
    /// transient error if Redis stayed unreachable through `retry_attempts`
    /// retries; [`Error::Closed`] after shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes the release in the
    /// background.
    pub async fn release(self) -> Result<bool> {
        self.0.release().await
    }

    /// Keep the permit taken without releasing it: it comes back when its
    /// lease runs out, or when someone releases its id (keep
    /// [`id`](Self::id)). No command is sent.
    pub fn forget(self) {
        self.0.forget();
    }

    fn new(
        semaphore: PermitExpirableSemaphore,
        id: PermitId,
        lease: Option<Duration>,
        expires_at: Option<Instant>,
    ) -> PermitGuard {
        crate::base::telemetry::held(KIND);
        PermitGuard(Armed::new(Permit {
            semaphore,
            id,
            lease,
            expires_at,
        }))
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.0.get().semaphore.shared.name)
            .field("id", &self.0.get().id)
            .field("lease", &self.0.get().lease)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_show_as_java_shows_them_and_parse_back() {
        let id = PermitId::from_bytes([
            0x00, 0x01, 0xab, 0xcd, 0xef, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90,
            0xa0, 0xff,
        ]);
        let text = id.to_string();
        assert_eq!(text, "0001abcdef102030405060708090a0ff");
        assert_eq!(text.parse::<PermitId>().unwrap(), id);
        assert_eq!(text.to_uppercase().parse::<PermitId>().unwrap(), id);
        for bad in [
            "",
            "0001",
            "zz01abcdef102030405060708090a0ff",
            "é01abcdef102030405060708090a0f",
        ] {
            assert!(matches!(
                bad.parse::<PermitId>(),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }
}
