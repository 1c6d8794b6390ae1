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
use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::{Error, Result};
use crate::base::layout;
use crate::base::layout::PERMIT_NEVER_EXPIRES as NEVER_EXPIRES;
use crate::base::lost::{Lost, LostReason};
use crate::base::telemetry::GaveUp;
use crate::base::time::epoch_ms;
use crate::client::Client;
use crate::connection::pubsub::Wake;
use crate::connection::redis::Late;
use crate::connection::script::{millis, script, ScriptCall};
use crate::engine::acquire::acquire_with;
use crate::engine::acquire::attempt::{unlosable_call, Leftover};
use crate::engine::acquire::waiter::Outcome;
use crate::engine::armed::{Armed, GiveBack};
use crate::engine::background::give_back::{until_landed, Ended, Try};
use crate::engine::background::pending::Pending;
use crate::engine::background::Background;
use crate::engine::permits::Renewed;
use crate::engine::registry::safe_until;
use crate::synchronizers::count::integer;
use crate::synchronizers::handle::{handle_accessors, Handle};
use crate::synchronizers::permit_id::PermitId;

// The scripts this module runs (`lua/`, embedded at build time).
script!(
    PES_ACQUIRE,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_acquire.lua"
);
script!(
    PES_RELEASE,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_release.lua"
);

/// The `kind` of spans and metrics.
const KIND: &str = "permit_expirable_semaphore";

/// How long a permit is taken for.
#[derive(Clone, Copy, Debug)]
enum Term {
    /// A lease of its own (`None`: it never expires).
    Lease(Option<Duration>),
    /// The watchdog's lease, renewed while its guard lives.
    Renewed,
}

impl From<Option<Duration>> for Term {
    fn from(lease: Option<Duration>) -> Term {
        Term::Lease(lease)
    }
}

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
///
/// # Give-backs in the background
///
/// A guard dropped without [`release`](PermitGuard::release), and an
/// acquisition whose reply was lost, release the permit by its id in the
/// background, trying until Redis answers, the permit's lease has run out
/// (it then comes back by itself), or the client shuts down: a permit that
/// never expires is given back however long Redis stays out of reach, as
/// long as the client runs (see
/// [`Client::pending_releases`](crate::Client::pending_releases)).
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) shared: Arc<PermitSemaphoreShared>,
}

pub(super) struct PermitSemaphoreShared {
    /// Its channel is `redisson_sc:{N}`.
    pub(super) handle: Handle,
    /// `{N}:timeout`, the taken permits.
    pub(super) timeouts: String,
}

handle_accessors!(PermitExpirableSemaphore, "semaphore", Wake::Counted);

impl PermitSemaphoreShared {
    /// `N`, `{N}:timeout`, `redisson_sc:{N}`: the KEYS of the acquire,
    /// lease and count scripts.
    pub(super) fn keys_timeouts_first(&self) -> [&str; 3] {
        [&self.handle.name, &self.timeouts, &self.handle.channel]
    }

    /// `N`, `redisson_sc:{N}`, `{N}:timeout`: the KEYS of the release and
    /// set scripts.
    pub(super) fn keys_channel_first(&self) -> [&str; 3] {
        [&self.handle.name, &self.handle.channel, &self.timeouts]
    }
}

impl Client {
    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `getPermitExpirableSemaphore(name)`). No command is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn permit_expirable_semaphore(&self, name: &str) -> Result<PermitExpirableSemaphore> {
        let handle = Handle::new(self, name, layout::semaphore_channel)?;
        Ok(PermitExpirableSemaphore {
            shared: Arc::new(PermitSemaphoreShared {
                timeouts: layout::permit_timeouts(&handle.name),
                handle,
            }),
        })
    }
}

/// Whether a release found the permit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Released {
    /// Released while its lease ran.
    Yes,
    /// Found, but its lease had run out (given back all the same).
    Expired,
    /// Not found.
    Unknown,
}

impl PermitExpirableSemaphore {
    /// The sorted set of taken permits (`{N}:timeout`, after
    /// [`Config::name_mapper`](crate::Config::name_mapper)), for inspection
    /// (`ZRANGE … WITHSCORES` shows each permit id and its expiry).
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
            None => Err(Error::Internal(
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

    /// Take a permit kept while its guard lives, waiting as long as it
    /// takes: what Redisson users have asked for (redisson/redisson#3046).
    /// The permit is taken with a lease of
    /// [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout), and
    /// the watchdog moves its expiry to now + that lease every third of it,
    /// with Redisson's `updateLeaseTime` on the wire (docs/PROTOCOL.md
    /// §7.6): Java sees an ordinary permit whose expiry moves, and Java's
    /// `release(id)` still releases it. If the renewal finds it gone
    /// (released by its id, or reclaimed after it expired) or cannot renew
    /// it before its lease could have run out, the guard says so, as a
    /// lock's guard does ([`PermitGuard::lost`]). If this process dies, the
    /// permit comes back when its lease runs out.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("render-slots")?;
    /// let permit = slots.acquire_renewed().await?;
    /// tokio::select! {
    ///     reason = permit.lost() => eprintln!("the permit was lost: {reason}"),
    ///     _ = async { /* long work */ } => { permit.release().await?; }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_renewed(&self) -> Result<PermitGuard> {
        match self.acquire_within(None, Term::Renewed).await? {
            Some(permit) => Ok(permit),
            None => Err(Error::Internal(
                "a wait without a time limit ended without a permit".into(),
            )),
        }
    }

    /// [`acquire_renewed`](Self::acquire_renewed), waiting up to `wait`
    /// (zero: try once; above [`MAX_DURATION`](crate::MAX_DURATION): no
    /// time limit). `None` if the time ran out.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_renewed_for(&self, wait: Duration) -> Result<Option<PermitGuard>> {
        self.acquire_within(Some(wait), Term::Renewed).await
    }

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        term: impl Into<Term>,
    ) -> Result<Option<PermitGuard>> {
        let term = term.into();
        if let Term::Lease(Some(lease)) = term {
            crate::base::time::checked("lease", lease)?;
        }
        let wanted = self.shared.handle.wanted(KIND, Wake::Counted, wait);
        let done = acquire_with(self.inner(), wanted, || self.attempt(term)).await;
        done.map(|done| done.map(|d| d.value))
    }

    /// One run of the acquire script with a fresh id. If the caller goes
    /// away before the reply, the script is finished in the background and a
    /// permit it took is released by its id; an attempt whose outcome is
    /// unknown is released by its id too (harmless if it took nothing).
    async fn attempt(&self, term: Term) -> Result<Outcome<PermitGuard>> {
        let inner = self.inner().clone();
        let lease = match term {
            Term::Lease(lease) => lease,
            Term::Renewed => Some(inner.permits.lease()),
        };
        let id = PermitId::random();
        let now = epoch_ms();
        let expiry = lease.map_or(NEVER_EXPIRES, |l| now.saturating_add(millis(l)));
        let sent_at = Instant::now();
        // A permit that is not released by then comes back by itself.
        let expires_at = lease.and_then(|l| sent_at.checked_add(l));
        let fut = {
            let (inner, shared) = (inner.clone(), self.shared.clone());
            async move {
                let call = || {
                    ScriptCall::new(
                        &PES_ACQUIRE,
                        &shared.keys_timeouts_first(),
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
                let reply = inner.redis.eval_attempt(call).await?;
                parse_acquire(reply)
            }
        };
        let undo = {
            let semaphore = self.clone();
            move |left: Leftover<'_, Option<i64>>| match left {
                // Busy: it took nothing.
                Leftover::Done(Some(_)) => None,
                // Released by its id, which is harmless if it took nothing.
                Leftover::Done(None) | Leftover::Unknown { .. } => {
                    Some(semaphore.give_back_later(id, expires_at))
                }
            }
        };
        Ok(
            match unlosable_call(&inner.background, Box::pin(fut), undo).await? {
                None => {
                    let renewed = matches!(term, Term::Renewed).then(|| {
                        inner.permits.add(
                            self.shared.keys_timeouts_first(),
                            inner.env.publish(),
                            id.value(),
                            sent_at,
                        )
                    });
                    Outcome::Ready(PermitGuard::new(
                        self.clone(),
                        id,
                        lease,
                        expires_at,
                        renewed,
                    ))
                }
                Some(earliest) => {
                    // Sleep until the earliest permit expires (its score is on
                    // the acquiring client's clock; ours is the best guess).
                    let bound = (earliest >= 0).then(|| {
                        let ms = earliest.saturating_sub(now).saturating_add(1).max(1);
                        Duration::from_millis(u64::try_from(ms).unwrap_or(1))
                    });
                    Outcome::Busy(bound)
                }
            },
        )
    }

    /// The background release of `id` ([`give_back`](Self::give_back)),
    /// pending from now on.
    fn give_back_later(&self, id: PermitId, expires_at: Option<Instant>) -> BoxFuture<'static, ()> {
        let pending = self.inner().background.releases.enter(KIND, self.name(), 1);
        let semaphore = self.clone();
        async move { semaphore.give_back(pending, id, expires_at).await }.boxed()
    }

    /// Release `id` in the background, trying until Redis answers, the
    /// permit's lease has run out at `expires_at` (it then comes back by
    /// itself), or the client shuts down ([`until_landed`]); and report how
    /// it ended. Unlocking by id is exact whenever it runs.
    async fn give_back(&self, pending: Pending, id: PermitId, expires_at: Option<Instant>) {
        let span = release_span(self.name(), id, true);
        let (redis, releases) = (&self.inner().redis, &self.inner().background.releases);
        let ended = until_landed(redis, releases, self.name(), expires_at, None, |_| {
            Try::Cancellable(self.release_once(id, Late::Await))
        })
        .instrument(span.clone())
        .await;
        match ended {
            Ended::Landed(released) => {
                record_release(&span, &Ok(released));
                pending.landed();
            }
            Ended::Unnecessary => {
                span.record("outcome", "expired");
                pending.landed();
            }
            Ended::Abandoned => {
                span.record("outcome", "abandoned");
                pending.gave_up(GaveUp::Shutdown);
            }
            Ended::Failed(e) => {
                record_release(&span, &Err(e.clone()));
                tracing::warn!(lock = self.name(), permit = %id, error = %e, "giving a permit back failed");
                pending.gave_up(GaveUp::Error);
            }
        }
    }

    /// One run of the single-id release script, sent as `late` says.
    pub(super) async fn release_once(&self, id: PermitId, late: Late) -> Result<Released> {
        let inner = self.inner();
        let call = || {
            ScriptCall::new(
                &PES_RELEASE,
                &self.shared.keys_channel_first(),
                vec![
                    id.value(),
                    Value::Integer(1),
                    Value::Integer(epoch_ms()),
                    inner.env.publish(),
                ],
            )
        };
        let reply = inner.redis.eval_as(call, late).await?;
        match integer(reply, "permit release")? {
            1 => Ok(Released::Yes),
            0 => Ok(Released::Expired),
            _ => Ok(Released::Unknown),
        }
    }

    /// Release with retries: after a transient error, a retry that finds the
    /// id gone cannot tell an earlier try's release from an expiry, and says
    /// so as `Unknown`.
    pub(super) async fn release_retrying(&self, id: PermitId) -> Result<Released> {
        let span = release_span(self.name(), id, false);
        let released = self
            .inner()
            .redis
            .retrying(self.name(), || self.release_once(id, Late::Deliver))
            .instrument(span.clone())
            .await;
        record_release(&span, &released);
        released
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
            .field("name", &self.shared.handle.name)
            .finish()
    }
}

/// One permit taken from a [`PermitExpirableSemaphore`], with its id and
/// lease. Give it back with [`release`](Self::release); a guard dropped
/// without releasing gives it back in the background, trying until Redis
/// answers, its lease runs out or the client shuts down (errors are logged
/// through `tracing`; [`Client::shutdown`](crate::Client::shutdown) waits for
/// it, for at most the retry budget); [`forget`](Self::forget) keeps it
/// taken until its lease runs out (or until someone releases its id).
#[must_use = "dropping the permit releases it at once"]
pub struct PermitGuard(Armed<Permit>);

/// What a [`PermitGuard`] holds.
struct Permit {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    lease: Option<Duration>,
    expires_at: Option<Instant>,
    /// A watchdog permit's renewal ([`acquire_renewed`](PermitExpirableSemaphore::acquire_renewed)).
    renewed: Option<Arc<Renewed>>,
}

impl Permit {
    /// Until when a permit with a lease of its own is certain to be taken:
    /// its lease from the send time, less the drift margin a lock's hold
    /// gets ([`safe_until`]), since other clients' clocks reclaim it.
    fn certain_until(&self) -> Option<Instant> {
        let (lease, expires_at) = (self.lease?, self.expires_at?);
        Some(safe_until(expires_at.checked_sub(lease)?, lease))
    }

    /// Stop renewing a watchdog permit; when its lease runs out if nobody
    /// gives it back: the end of the time it is certain to be taken.
    fn stop_renewing(&self) -> Option<Instant> {
        match &self.renewed {
            Some(renewed) => {
                let inner = self.semaphore.inner();
                inner.permits.remove(self.semaphore.name(), renewed);
                Some(renewed.valid_until())
            }
            None => self.expires_at,
        }
    }
}

impl GiveBack for Permit {
    type Output = bool;

    fn background(&self) -> &Background {
        &self.semaphore.inner().background
    }

    fn give_back(&self) -> BoxFuture<'static, Result<bool>> {
        crate::base::telemetry::unheld(KIND);
        let expires_at = self.stop_renewing();
        let (semaphore, id) = (self.semaphore.clone(), self.id);
        async move {
            let released = semaphore.release_retrying(id).await;
            if matches!(&released, Err(e) if e.is_transient()) {
                // Not confirmed: released in the background from now on, as
                // a dropped guard's permit is.
                let later = semaphore.give_back_later(id, expires_at);
                semaphore.inner().background.spawn(later);
            }
            Ok(released? == Released::Yes)
        }
        .boxed()
    }

    fn give_back_later(&self) -> BoxFuture<'static, ()> {
        crate::base::telemetry::unheld(KIND);
        let expires_at = self.stop_renewing();
        self.semaphore.give_back_later(self.id, expires_at)
    }

    fn kept(&self) {
        crate::base::telemetry::unheld(KIND);
        self.stop_renewing();
    }
}

impl PermitGuard {
    /// The permit's id (shown as Java shows it: 32 lowercase hex digits).
    pub fn id(&self) -> PermitId {
        self.0.get().id
    }

    /// The lease it was taken with (`None`: it never expires); for a
    /// [renewed](Self::is_renewed) permit, the lease each renewal gives
    /// ([`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout)).
    pub fn lease(&self) -> Option<Duration> {
        self.0.get().lease
    }

    /// Whether the watchdog renews this permit while the guard lives
    /// ([`acquire_renewed`](PermitExpirableSemaphore::acquire_renewed)).
    pub fn is_renewed(&self) -> bool {
        self.0.get().renewed.is_some()
    }

    /// When the lease runs out, measured from when the acquire command was
    /// sent (so never later than the expiry Redis knows, on one clock);
    /// `None` for a permit that never expires. For a renewed permit, the
    /// end of its last confirmed renewal's lease, less a drift margin. A
    /// [`update_lease_time`](PermitExpirableSemaphore::update_lease_time)
    /// is not reflected here.
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        let permit = self.0.get();
        match &permit.renewed {
            Some(renewed) => Some(renewed.valid_until().into_std()),
            None => permit.expires_at.map(Instant::into_std),
        }
    }

    /// Why the permit is no longer certain to be taken, if it is not: a
    /// renewed permit the renewal found gone ([`LostReason::Gone`]: released
    /// by its id, or reclaimed after it expired) or could not renew in time
    /// ([`LostReason::NotRenewed`]); a permit with a lease of its own whose
    /// lease could have run out ([`LostReason::LeaseEnded`]: its lease from
    /// the acquire's send time, less a lock's drift margin, 1 % + 2 ms). `None` for a permit
    /// that never expires.
    pub fn lost_reason(&self) -> Option<LostReason> {
        let permit = self.0.get();
        match &permit.renewed {
            Some(renewed) => renewed.lost_reason(),
            None => permit
                .certain_until()
                .filter(|at| Instant::now() >= *at)
                .map(|_| LostReason::LeaseEnded),
        }
    }

    /// Whether the permit is known to be lost right now (see
    /// [`lost_reason`](Self::lost_reason)).
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Resolves when the permit is lost, to why (see
    /// [`lost_reason`](Self::lost_reason)): for a renewed permit, never once
    /// its guard gives it back or keeps it; for a permit with a lease of its
    /// own, when that lease runs out; never for a permit that never expires.
    /// It owns what it needs: keep it beside the work, as with
    /// [`LockGuard::lost`](crate::LockGuard::lost).
    pub fn lost(&self) -> Lost {
        let permit = self.0.get();
        match (&permit.renewed, permit.certain_until()) {
            (Some(renewed), _) => renewed.lost(),
            (None, Some(at)) => Lost::new(async move {
                tokio::time::sleep_until(at).await;
                LostReason::LeaseEnded
            }),
            (None, None) => Lost::new(std::future::pending()),
        }
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
    /// retries: the permit is then released in the background, as when the
    /// guard is dropped (see
    /// [`Client::pending_releases`](crate::Client::pending_releases));
    /// [`Error::Closed`] after shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes the release in the
    /// background.
    pub async fn release(mut self) -> Result<bool> {
        match self.release_now() {
            Some(call) => call.await,
            None => Ok(false),
        }
    }

    /// Keep the permit taken without releasing it: it comes back when its
    /// lease runs out, or when someone releases its id (keep
    /// [`id`](Self::id)). No command is sent.
    pub fn forget(mut self) {
        self.keep();
    }

    /// [`release`](Self::release) through `&mut`, for a wrapper that
    /// releases in its own `Drop`; `None` if released or kept already.
    pub(crate) fn release_now(&mut self) -> Option<BoxFuture<'static, Result<bool>>> {
        self.0.give_back_now()
    }

    /// [`forget`](Self::forget) through `&mut`.
    pub(crate) fn keep(&mut self) {
        self.0.keep();
    }

    fn new(
        semaphore: PermitExpirableSemaphore,
        id: PermitId,
        lease: Option<Duration>,
        expires_at: Option<Instant>,
        renewed: Option<Arc<Renewed>>,
    ) -> PermitGuard {
        crate::base::telemetry::held(KIND);
        PermitGuard(Armed::new(Permit {
            semaphore,
            id,
            lease,
            expires_at,
            renewed,
        }))
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.0.get().semaphore.shared.handle.name)
            .field("id", &self.0.get().id)
            .field("lease", &self.0.get().lease)
            .finish()
    }
}
