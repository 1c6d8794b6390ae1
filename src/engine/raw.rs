//! The raw lock layer: one acquisition (its attempts on the shared wait
//! loop, the undo of an attempt with an unknown outcome, the give-up step)
//! and one release path for every lock type, driven by a
//! [`Protocol`](crate::engine::protocol::Protocol) that says which scripts
//! to run and how to wait (the shape of `lock_api`'s raw traits).

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::HashesInterface;
use fred::types::Value;
use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::detach::FinishOnDrop;
use crate::base::error::{Error, Result};
use crate::base::owner::Owner;
use crate::base::telemetry::Acquisition;
use crate::connection::pubsub::Wake;
use crate::connection::redis::Late;
pub(crate) use crate::connection::redis::Patience;
use crate::connection::script::ScriptCall;
use crate::engine::protocol::{Attempt, AttemptMode, Protocol, Waiting};
use crate::engine::registry::{new_order, HoldRef, Lease, Order, Releasing, UnlockReply};
use crate::engine::shared::Inner;
use crate::engine::wait::{self, Deadline, Outcome};

/// First re-check after [`Attempt::NextInLine`]; doubled on each repeat.
const NEXT_IN_LINE_FIRST: Duration = Duration::from_millis(5);

/// One acquisition's turn to talk to Redis (its owner field's [`Order`]).
type Step = tokio::sync::OwnedMutexGuard<Option<Error>>;

/// A successful acquisition, recorded in the client's registry: what a
/// hold needs to know of itself.
pub(crate) struct Acquired {
    pub owner: Owner,
    pub field: String,
    pub lease: Lease,
    /// The hold in the registry.
    pub hold: HoldRef,
    /// The fencing token, for a fenced lock.
    pub token: Option<i64>,
}

/// What one attempt found, once recorded.
enum Tried {
    Acquired(Acquired),
    Busy(i64),
    NextInLine(i64),
}

/// Why an attempt failed.
enum Failure {
    /// Transient, and undone if it may have acquired: the wait may go on.
    Retryable(Error),
    /// Anything else, or transient with an outcome that cannot be undone
    /// (the owner already held the lock): the wait ends with it.
    Final(Error),
}

impl std::fmt::Debug for RawLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLock")
            .field("name", &self.name())
            .field("owner", &self.owner)
            .finish()
    }
}

/// A lock of some protocol, as seen from one client. Cheap to clone.
#[derive(Clone)]
pub(crate) struct RawLock {
    inner: Arc<Inner>,
    pub proto: Arc<dyn Protocol>,
    /// Fixed owner for every acquisition, or a fresh one each time.
    pub owner: Option<Owner>,
}

impl RawLock {
    pub(crate) fn new(inner: Arc<Inner>, proto: Arc<dyn Protocol>) -> RawLock {
        RawLock {
            inner,
            proto,
            owner: None,
        }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    pub(crate) fn name(&self) -> &str {
        self.proto.name()
    }

    pub(crate) fn with_owner(&self, owner: Owner) -> RawLock {
        RawLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The acquire loop (docs/PROTOCOL.md §2.8): try; subscribe; then try again
    /// and wait for a message, the holder's TTL or the deadline, whichever
    /// comes first. `wait == None` (or a wait above
    /// [`MAX_DURATION`](crate::base::time::MAX_DURATION)) waits without a time limit.
    ///
    /// Transient failures do not end a bounded wait while time remains: an
    /// attempt whose outcome is unknown is undone (released once, which is
    /// harmless if it never ran) before the next attempt, and the wait ends
    /// with the last transient error if its deadline passes while failing.
    /// A wait without a time limit ends with it once everything has failed
    /// for longer than the retry budget (`(timeout + retry_delay) ×
    /// retry_attempts`, 16 s by default).
    pub(crate) async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<Acquired>> {
        let start = Instant::now();
        let deadline = Deadline::after(start, wait);
        let wait = wait.filter(|w| *w <= crate::base::time::MAX_DURATION);
        let owner = self.owner.unwrap_or_else(Owner::generate);
        let field = self.proto.field(&self.inner().env, owner);
        // Redisson's fair-lock thread-wait time: the caller's wait, else the default.
        let mode = match wait {
            Some(w) if w.is_zero() => AttemptMode::Once,
            Some(w) => AttemptMode::Waiting { wait: Some(w) },
            None => AttemptMode::Waiting { wait: None },
        };
        let report = Acquisition::start(self.name(), self.proto.kind(), wait, start);
        report.span().record("owner", field.as_str());
        // Pinned in place: the acquisition's future is large, and
        // `instrument` would otherwise copy it.
        let acquiring = std::pin::pin!(self.acquire_as(owner, &field, lease, mode, deadline));
        let outcome = acquiring.instrument(report.span().clone()).await;
        report.finish(&outcome, matches!(mode, AttemptMode::Once));
        outcome
    }

    /// [`acquire`](Self::acquire) for `owner`'s `field`, within the acquire span.
    async fn acquire_as(
        &self,
        owner: Owner,
        field: &str,
        lease: Lease,
        mode: AttemptMode,
        deadline: Deadline,
    ) -> Result<Option<Acquired>> {
        // Every Redis step of this acquisition (attempts, undoing an attempt
        // with an unknown outcome, leaving the queue) runs in this order,
        // also when the rest finishes in the background; with an owner that
        // other calls may share, in the order of all of its field's commands
        // on this client (the registry's).
        let shared = self
            .owner
            .map(|_| self.inner().holds.order(self.name(), field));
        let order = shared
            .as_ref()
            .map_or_else(new_order, |shared| shared.order.clone());
        // A waiter that goes away without the lock (error, deadline, or its
        // future dropped) runs the protocol's give-up step: a fair-lock
        // waiter may have joined the queue with its very first attempt.
        let mut leaving = GiveUp::new(self, field, mode, &order);
        let mut attempts = LockAttempts {
            lock: self,
            owner,
            field,
            lease,
            mode,
            deadline,
            order: &order,
            waiting: None,
            next_in_line: NEXT_IN_LINE_FIRST,
        };
        let outcome = wait::wait(self.inner(), self.name(), deadline, &mut attempts)
            .await
            .map(|done| done.map(|done| done.value));
        drop(shared);
        match &outcome {
            Ok(Some(_)) => leaving.disarm(),
            // Boxed: its Redis call would otherwise make every acquire
            // future as large as fred's command future (~5 KB).
            Ok(None) => Box::pin(leaving.run()).await,
            // In the background: the server may be unreachable for a while.
            Err(_) => drop(leaving),
        }
        outcome
    }

    /// One run of the acquire script, holding `step` (this acquisition's
    /// turn to talk to Redis) until it, its record in the registry and
    /// whatever it leaves to undo are done. If the caller goes away before
    /// the reply, the call is finished in the background and a hold it took
    /// is released. If its outcome is unknown (a timeout or lost connection)
    /// and the owner held nothing before, the possible hold is released in
    /// the background before the next step: once, which undoes exactly that
    /// attempt and is harmless if it never ran.
    async fn attempt(
        &self,
        owner: Owner,
        field: &str,
        lease: Lease,
        mode: AttemptMode,
        step: Step,
        order: &Order,
    ) -> Result<Tried, Failure> {
        let inner = self.inner().clone();
        let lease_ms =
            crate::connection::script::millis(lease.duration(inner.config.lock_watchdog_timeout));
        let sent_at = Instant::now();
        let fut = {
            let (inner, proto, field) = (inner.clone(), self.proto.clone(), field.to_owned());
            async move {
                let build = || proto.acquire(&inner.env, &field, lease_ms, mode);
                let reply = inner.redis.eval_attempt(build).await;
                (
                    reply.and_then(|reply| proto.parse_acquire(reply)),
                    step,
                    field,
                )
            }
        };
        let orphan = {
            let (inner, proto, order) = (inner.clone(), self.proto.clone(), order.clone());
            move |(outcome, step, field): (Result<Attempt>, Step, String)| {
                async move {
                    let hold = match outcome {
                        // Ran, so it took a hold: record it, then release it.
                        Ok(Attempt::Acquired { count, .. }) => {
                            Some(record(&inner, proto.as_ref(), &field, lease, count, sent_at, &order))
                        }
                        Err(Error::NotReplicated { .. }) => {
                            let count = if inner.holds.holds(proto.name(), &field) { 2 } else { 1 };
                            Some(record(&inner, proto.as_ref(), &field, lease, count, sent_at, &order))
                        }
                        Err(e) if undoable(&e, &inner, proto.name(), &field) => None,
                        _ => return,
                    };
                    let patience = until_expiry(&inner, lease);
                    if let Err(e) = release_in_turn(&inner, proto.as_ref(), &field, lease, hold.as_ref(), patience).await {
                        tracing::warn!(lock = proto.name(), error = %e, "releasing a lock acquired by a cancelled call failed");
                    }
                    drop(step);
                }
                .boxed()
            }
        };
        // The call hands its copy of `field` back for an undo.
        let (outcome, step, owned_field) =
            FinishOnDrop::new(inner.cleanups.clone(), fut, orphan).await;
        match outcome {
            Ok(Attempt::Acquired { count, token }) => {
                let hold = record(
                    &inner,
                    self.proto.as_ref(),
                    field,
                    lease,
                    count,
                    sent_at,
                    order,
                );
                drop(step);
                Ok(Tried::Acquired(Acquired {
                    owner,
                    field: owned_field,
                    lease,
                    hold,
                    token,
                }))
            }
            Ok(Attempt::Busy(ttl)) => Ok(Tried::Busy(ttl)),
            Ok(Attempt::NextInLine(ms)) => Ok(Tried::NextInLine(ms)),
            Err(e) if undoable(&e, &inner, self.name(), field) => {
                // It ran (not replicated): record the hold it took, so that
                // releasing it leaves the owner's other holds as they were.
                let hold = matches!(e, Error::NotReplicated { .. }).then(|| {
                    let count = if inner.holds.holds(self.name(), field) {
                        2
                    } else {
                        1
                    };
                    record(
                        &inner,
                        self.proto.as_ref(),
                        field,
                        lease,
                        count,
                        sent_at,
                        order,
                    )
                });
                let proto = self.proto.clone();
                let field = owned_field;
                let mut step = step;
                inner.cleanups.clone().spawn(async move {
                    // Bounded: the next attempt waits for it. If it cannot
                    // be undone, the acquisition ends with that error.
                    let undo = release_in_turn(
                        &inner,
                        proto.as_ref(),
                        &field,
                        lease,
                        hold.as_ref(),
                        Patience::Attempts,
                    );
                    match undo.await {
                        Err(e) if e.is_transient() => *step = Some(e),
                        _ => {}
                    }
                });
                Err(Failure::Retryable(e))
            }
            Err(e) => Err(Failure::Final(e)),
        }
    }

    /// How many holds `field` has (`HGET`; 0 if none).
    pub(crate) async fn hold_count(&self, field: &str) -> Result<u32> {
        let name = self.name().to_owned();
        let field = field.to_owned();
        let count: Option<i64> = self
            .inner()
            .redis
            .key_command(self.name(), |c| {
                let (name, field) = (name.clone(), field.clone());
                async move { c.hget(name, field).await }
            })
            .await?;
        Ok(count.map_or(0, |c| u32::try_from(c).unwrap_or(0)))
    }

    /// Whether `field` holds the lock (`HEXISTS`).
    pub(crate) async fn is_held(&self, field: &str) -> Result<bool> {
        crate::engine::watch::holds_field(self.inner(), self.name(), field).await
    }

    /// Unlock whoever holds it; if something was unlocked, local holders
    /// see their lost signal fire. (A read-lock force unlock of a lock held
    /// for writing unlocks nothing, and the writer keeps its hold.)
    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        let inner = self.inner();
        let reply = inner
            .redis
            .retrying(self.name(), || {
                inner.redis.eval(|| self.proto.force_unlock(&inner.env))
            })
            .await?;
        let unlocked = matches!(reply, Value::Integer(1));
        if unlocked {
            inner.holds.lose_all(self.name());
        }
        Ok(unlocked)
    }
}

/// One acquisition's attempts, as the wait loop drives them: each waits
/// for the acquisition's previous step (an undo) to land, runs the acquire
/// script, and turns its answer into how long to wait.
struct LockAttempts<'a> {
    lock: &'a RawLock,
    owner: Owner,
    field: &'a str,
    lease: Lease,
    mode: AttemptMode,
    deadline: Deadline,
    order: &'a Order,
    /// How this waiter learns it may try again, once busy.
    waiting: Option<Waiting>,
    /// The next re-check after [`Attempt::NextInLine`].
    next_in_line: Duration,
}

impl wait::Attempts for LockAttempts<'_> {
    type Value = Acquired;

    async fn attempt(&mut self) -> Result<Outcome<Acquired>> {
        // The previous attempt's undo, if any, must land first; if it could
        // not, whether this owner holds is unknown: stop here.
        let Some(mut step) = self.deadline.run(self.order.clone().lock_owned()).await else {
            return Ok(Outcome::OutOfTime);
        };
        if let Some(e) = step.take() {
            return Err(e);
        }
        let (lock, field) = (self.lock, self.field);
        let tried = lock.attempt(self.owner, field, self.lease, self.mode, step, self.order);
        Ok(match tried.await {
            Ok(Tried::Acquired(acquired)) => Outcome::Ready(acquired),
            Ok(Tried::Busy(ttl)) => {
                self.next_in_line = NEXT_IN_LINE_FIRST;
                match self
                    .waiting
                    .get_or_insert_with(|| lock.proto.waiting(field))
                {
                    Waiting::BackOff(b) => Outcome::Busy(Some(b.next_delay())),
                    Waiting::Channel(_) => {
                        Outcome::Busy(u64::try_from(ttl).ok().map(Duration::from_millis))
                    }
                }
            }
            Ok(Tried::NextInLine(ms)) => {
                let pause = u64::try_from(ms).map_or(self.next_in_line, |ms| {
                    Duration::from_millis(ms).min(self.next_in_line)
                });
                self.next_in_line = self.next_in_line.saturating_mul(2);
                Outcome::Busy(Some(pause))
            }
            Err(Failure::Retryable(e)) => Outcome::Failed(e),
            Err(Failure::Final(e)) => return Err(e),
        })
    }

    fn channel(&mut self) -> Option<(String, Wake)> {
        let (lock, field) = (self.lock, self.field);
        match self
            .waiting
            .get_or_insert_with(|| lock.proto.waiting(field))
        {
            Waiting::Channel(channel) => Some((channel.clone(), Wake::Lock)),
            Waiting::BackOff(_) => None,
        }
    }
}

/// Runs the protocol's give-up step if a waiter leaves without the lock,
/// including when its future is dropped: after every earlier step of the
/// acquisition (an attempt still in flight, or its undo), and tried again
/// after transient errors until it is known to have run or the queue entry
/// cannot matter any more.
struct GiveUp {
    pending: Option<Pending>,
}

struct Pending {
    inner: Arc<Inner>,
    proto: Arc<dyn Protocol>,
    call: ScriptCall,
    order: Order,
    /// How long to keep trying, as the protocol says.
    patience: Duration,
}

impl GiveUp {
    fn new(lock: &RawLock, field: &str, mode: AttemptMode, order: &Order) -> GiveUp {
        let pending = match mode {
            AttemptMode::Waiting { wait } => lock
                .proto
                .gave_up(&lock.inner().env, field, wait)
                .map(|(call, patience)| Pending {
                    inner: lock.inner().clone(),
                    proto: lock.proto.clone(),
                    call,
                    order: order.clone(),
                    patience,
                }),
            AttemptMode::Once => None,
        };
        GiveUp { pending }
    }

    fn disarm(&mut self) {
        self.pending = None;
    }

    /// Run the step, after every earlier step of the acquisition, with
    /// `retry_attempts` tries. If it is dropped part-way or still fails with
    /// a transient error, it stays pending, and `Drop` goes on with it in
    /// the background (the step is idempotent).
    async fn run(&mut self) {
        if let Some(p) = &self.pending {
            let _step = p.order.clone().lock_owned().await;
            let outcome = p
                .inner
                .redis
                .retrying(p.proto.name(), || p.inner.redis.eval(|| p.call.clone()))
                .await;
            match outcome {
                Err(e) if e.is_transient() => return,
                Err(e) => {
                    tracing::warn!(lock = p.proto.name(), error = %e, "leaving the wait queue failed");
                }
                Ok(_) => {}
            }
        }
        self.pending = None;
    }
}

impl Pending {
    /// Run the step in the background, after every earlier step of the
    /// acquisition, trying again after transient errors until it is known to
    /// have run or the queue entry cannot matter any more.
    async fn run_patiently(self) {
        let _step = self.order.clone().lock_owned().await;
        let until = Instant::now() + self.patience;
        let leave = || self.inner.redis.eval(|| self.call.clone());
        let name = self.proto.name();
        if let Err(e) = self.inner.redis.persisting(name, until, leave).await {
            tracing::warn!(lock = name, error = %e, "leaving the wait queue failed");
        }
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        // A plain future, not a `GiveUp`: dropping it (a runtime shutting
        // down) must not spawn it again.
        if let Some(pending) = self.pending.take() {
            let cleanups = pending.inner.cleanups.clone();
            cleanups.spawn(pending.run_patiently());
        }
    }
}

/// Outcome of an unlock.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The count went down but the owner still holds the lock.
    StillHeld,
    /// The lock was released and waiters notified.
    Released,
}

/// Which hold an unlock takes away.
pub(crate) enum Whose<'a> {
    /// A guard's: nothing is sent if its tenure has ended (the hold is no
    /// longer this client's to release).
    Guard(&'a HoldRef),
    /// One of the owner field's, without a guard (`Lock::unlock`): one no
    /// guard has if there is one, else the newest guard's.
    Owner,
}

/// Take one hold of `field` away (docs/PROTOCOL.md §2.9): the unlock
/// script with a fresh latch id, retried with that same
/// id after transient errors, then the latch deleted, and the reply applied
/// to the registry. `lease` (the hold's) sizes the latch's TTL.
pub(crate) async fn release(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    whose: Whose<'_>,
    patience: Patience,
) -> Result<Unlocked> {
    let name = proto.name();
    // Not in the field's turn: a release's reply, in whatever order it is
    // applied, can only end a tenure it was sent for (docs/PROTOCOL.md §2.9).
    let target = match whose {
        Whose::Guard(hold) => match inner.holds.releasing(name, field, hold) {
            Releasing::Send => Target::Tenure(hold.tenure),
            Releasing::Stale => Target::Stale,
        },
        Whose::Owner => inner
            .holds
            .releasing_any(name, field)
            .map_or(Target::Unknown, Target::Tenure),
    };
    release_unlocked(inner, proto, field, lease, target, patience).await
}

/// Which tenure an unlock applies to.
#[derive(Clone, Copy)]
enum Target {
    /// This one, the field's current tenure.
    Tenure(u64),
    /// One the registry does not know (an undo of an unknown outcome, an
    /// unlock without a guard of a field the registry has no tenure for).
    Unknown,
    /// None: the guard's tenure ended, the hold is not this client's to
    /// release. Nothing is sent; the outcome is `NotHeld`.
    Stale,
}

/// Release in the field's turn, already held by the caller: the undo of an
/// attempt, or the release of the hold a cancelled attempt took (`hold`,
/// recorded in the registry; `None`: an attempt whose outcome is unknown).
async fn release_in_turn(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    hold: Option<&HoldRef>,
    patience: Patience,
) -> Result<Unlocked> {
    let target = match hold {
        Some(hold) => match inner.holds.releasing(proto.name(), field, hold) {
            Releasing::Send => Target::Tenure(hold.tenure),
            // Found gone meanwhile: the unlock finds nothing, harmlessly.
            Releasing::Stale => Target::Unknown,
        },
        None => Target::Unknown,
    };
    release_unlocked(inner, proto, field, lease, target, patience).await
}

/// Send the unlock of one hold of `field` of `target`, in a
/// `redisson_lock.release` span, and apply its reply to the registry.
async fn release_unlocked(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    target: Target,
    patience: Patience,
) -> Result<Unlocked> {
    let span = tracing::debug_span!(
        "redisson_lock.release",
        lock = proto.name(),
        kind = proto.kind(),
        owner = field,
        background = patience != Patience::Attempts,
        outcome = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    let outcome = if let Target::Stale = target {
        Err(Error::NotHeld {
            name: proto.name().to_owned(),
            owner: field.to_owned(),
        })
    } else {
        // Pinned in place, as in `acquire`.
        let releasing = std::pin::pin!(unlock(inner, proto, field, lease, patience));
        releasing.instrument(span.clone()).await
    };
    let reply = match &outcome {
        Ok(Unlocked::Released) => Some(UnlockReply::Released),
        Ok(Unlocked::StillHeld) => Some(UnlockReply::StillHeld),
        Err(Error::NotHeld { .. }) => Some(UnlockReply::NotHeld),
        Err(_) => None,
    };
    if let (Target::Tenure(tenure), Some(reply)) = (target, reply) {
        inner.holds.released(proto.name(), field, tenure, reply);
    }
    match &outcome {
        Ok(Unlocked::Released) => span.record("outcome", "released"),
        Ok(Unlocked::StillHeld) => span.record("outcome", "still_held"),
        Err(Error::NotHeld { .. }) => span.record("outcome", "not_held"),
        Err(e) => span
            .record("outcome", "error")
            .record("error", tracing::field::display(e)),
    };
    outcome
}

/// The unlock script for one hold of `field`, with its latch.
async fn unlock(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    patience: Patience,
) -> Result<Unlocked> {
    let latch = crate::base::keys::latch_key(proto.latch_prefix());
    let lease = lease.duration(inner.config.lock_watchdog_timeout);
    let lease_ms = crate::connection::script::millis(lease);
    // Every resend carries the first try's latch, which makes it a replay
    // only while that latch lives: a resend is never written after then
    // (less a timeout for its trip), or an earlier try that ran, its reply
    // lost, could be followed by a second decrement (docs/PROTOCOL.md §2.4).
    let timeout = inner.config.timeout;
    let latest = Instant::now() + inner.env.latch_ttl(lease).saturating_sub(timeout);
    let tried = std::sync::atomic::AtomicBool::new(false);
    let unlock = || {
        let first = !tried.swap(true, std::sync::atomic::Ordering::Relaxed);
        let left = latest.saturating_duration_since(Instant::now());
        let build = || proto.release(&inner.env, field, lease_ms, &latch);
        async move {
            if first {
                inner.redis.eval_as(build, Late::Deliver).await
            } else if left.is_zero() {
                Err(Error::Timeout(timeout))
            } else {
                inner
                    .redis
                    .eval_as(build, Late::SkipAfter(left.min(timeout)))
                    .await
            }
        }
    };
    let name = proto.name();
    let reply = inner.redis.patiently(name, patience, unlock).await?;
    inner.delete_latch_later(latch);
    match reply {
        Value::Null => Err(Error::NotHeld {
            name: proto.name().to_owned(),
            owner: field.to_owned(),
        }),
        Value::Integer(0) => Ok(Unlocked::StillHeld),
        Value::Integer(1) => Ok(Unlocked::Released),
        other => Err(Error::Protocol(format!("unlock replied {other:?}"))),
    }
}

/// Record in the registry a hold that an attempt sent at `sent_at` took,
/// the field's hold count then being `count`; a hold that starts a tenure is
/// watched on its keyspace channel if the client listens to keyspace
/// notifications.
fn record(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    count: u32,
    sent_at: Instant,
    order: &Order,
) -> HoldRef {
    let recorded = inner.holds.acquired(
        proto.name(),
        field,
        proto.kind(),
        proto.renewal(),
        lease,
        count,
        sent_at,
        order,
    );
    if let Some(alive) = recorded.new_tenure {
        crate::engine::watch::keyspace(inner, proto.name(), field, recorded.hold.tenure, alive);
    }
    recorded.hold
}

/// Whether a failed attempt can be undone by releasing once and tried
/// again: an acquisition that ran but was not replicated (known to have
/// taken one hold), or a lost reply when the owner held nothing before.
fn undoable(e: &Error, inner: &Inner, name: &str, field: &str) -> bool {
    match e {
        Error::NotReplicated { .. } => true,
        e => e.is_transient() && !inner.holds.holds(name, field),
    }
}

/// How long a release nobody awaits keeps trying: until a hold with
/// `lease`, taken or renewed now at the latest, has run out, when Redis
/// releases it anyway.
pub(crate) fn until_expiry(inner: &Inner, lease: Lease) -> Patience {
    Patience::Until(Instant::now() + lease.duration(inner.config.lock_watchdog_timeout))
}
