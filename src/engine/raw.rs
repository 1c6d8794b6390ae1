//! The raw lock layer (the shape of `lock_api`'s raw traits): a lock of any
//! kind as one client sees it ([`RawLock`]), driven by its kind's
//! [`Protocol`], on the one acquisition core ([`acquire`](crate::engine::acquire)):
//! what a lock's attempt is (its script, run in the owner field's turn and
//! recorded in the hold registry), what it gives back when nobody will use
//! it or its outcome is unknown, and how its waiters wait.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::HashesInterface;
use fred::types::Value;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::time::Instant;

use crate::base::error::{Error, Result};
use crate::base::owner::Owner;
use crate::connection::pubsub::Wake;
use crate::connection::redis::Patience;
use crate::engine::acquire::attempt::{unlosable, Leftover};
use crate::engine::acquire::give_up::GiveUp;
use crate::engine::acquire::waiter::{self, Deadline, Outcome};
use crate::engine::protocol::{Attempt, AttemptMode, Protocol, Take, Waiting};
use crate::engine::registry::{new_order, HoldTicket, Lease, Order};
use crate::engine::shared::Inner;
use crate::engine::unlock::{release_in_turn, until_expiry};

/// First re-check after [`Attempt::NextInLine`]; doubled on each repeat.
const NEXT_IN_LINE_FIRST_MS: u32 = 5;

/// One acquisition's turn to talk to Redis (its owner field's [`Order`]).
type Turn = tokio::sync::OwnedMutexGuard<Option<Box<Error>>>;

/// A successful acquisition, recorded in the client's registry: what a
/// hold needs to know of itself.
pub(crate) struct Acquired {
    pub owner: Owner,
    pub field: Arc<str>,
    pub lease: Lease,
    /// The hold in the registry.
    pub ticket: HoldTicket,
    /// The fencing token, for a fenced lock.
    pub token: Option<i64>,
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

    /// The acquire loop (docs/PROTOCOL.md §2.8): try; subscribe; then try
    /// again and wait for a message, the holder's TTL or the deadline,
    /// whichever comes first. `wait == None` (or a wait above
    /// [`MAX_DURATION`](crate::base::time::MAX_DURATION)) waits without a
    /// time limit.
    ///
    /// Transient failures do not end a bounded wait while time remains: an
    /// attempt whose outcome is unknown is undone (released once, which is
    /// harmless if it never ran) before the next attempt, and the wait ends
    /// with the last transient error if its deadline passes while failing.
    /// A wait without a time limit ends with it once everything has failed
    /// for longer than the retry budget (`(timeout + retry_delay) ×
    /// retry_attempts`, 16 s by default).
    #[allow(clippy::manual_async_fn)] // on purpose: see the first comment
    pub(crate) fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> impl std::future::Future<Output = Result<Option<Acquired>>> + Send + '_ {
        // Not an `async fn`, which would keep a copy of each argument: the
        // attempts are made at the call and moved into the future whole (a
        // waiter carries it), keeping what the acquisition needs once.
        let mut attempts = {
            let owner = self.owner.unwrap_or_else(Owner::generate);
            // Shared by every copy this acquisition and its hold keep.
            let field: Arc<str> = self.proto.field(&self.inner.env, owner).into();
            // Every Redis step of this acquisition (attempts, undoing an
            // attempt with an unknown outcome, leaving the queue) runs in
            // this order, also when the rest finishes in the background;
            // with an owner that other calls may share, in the order of all
            // of its field's attempts on this client (the registry's).
            // Boxed: only explicit owners have one, and every waiter would
            // carry its room.
            let shared = self.owner.map(|_| {
                Box::new(
                    self.inner
                        .holds
                        .order(self.name().to_owned(), field.to_string()),
                )
            });
            let order = shared
                .as_ref()
                .map_or_else(new_order, |shared| shared.order.clone());
            let wait = wait.filter(|w| *w <= crate::base::time::MAX_DURATION);
            // Redisson's fair-lock thread-wait time: the caller's wait,
            // else the default.
            let mode = match wait {
                Some(w) if w.is_zero() => AttemptMode::Once,
                Some(w) => AttemptMode::Waiting { wait: Some(w) },
                None => AttemptMode::Waiting { wait: None },
            };
            LockAttempts {
                lock: self,
                owner,
                field,
                lease,
                mode,
                deadline: Deadline::after(Instant::now(), wait),
                order,
                _shared: shared,
                waits: Waits::Unknown,
                next_in_line_ms: NEXT_IN_LINE_FIRST_MS,
                tried: false,
            }
        };
        async move {
            let wait = attempts.wait();
            let acquired = crate::engine::acquire::acquire(&self.inner, &mut attempts, wait).await;
            acquired.map(|done| done.map(|d| d.value))
        }
    }

    /// The protocol's give-up step for a waiter of `field` in `mode`, if
    /// it has one (a fair waiter leaves the queue).
    fn give_up(&self, field: &str, mode: AttemptMode, order: &Order) -> GiveUp {
        let AttemptMode::Waiting { wait } = mode else {
            return GiveUp::none();
        };
        let Some((call, patience)) = self.proto.give_up_call(&self.inner.env, field, wait) else {
            return GiveUp::none();
        };
        let (inner, proto) = (self.inner.clone(), self.proto.clone());
        GiveUp::new(order, &self.inner.background, patience, move |try_for| {
            let (inner, proto, call) = (inner.clone(), proto.clone(), call.clone());
            async move {
                let leave = || inner.redis.eval(|| call.clone());
                inner
                    .redis
                    .patiently(proto.name(), try_for, leave)
                    .await
                    .map(drop)
            }
            .boxed()
        })
    }

    /// One run of the acquire script in the acquisition's `turn`, on the
    /// core ([`unlosable`]): a hold it took is recorded in the registry
    /// while the turn is held. If the caller goes away before the reply,
    /// the call is finished in the background and a hold it took is
    /// released, in turn. If its outcome is unknown (a timeout or lost
    /// connection) and the owner held nothing before, the possible hold is
    /// released in the background before the next step: once, which undoes
    /// exactly that attempt and is harmless if it never ran; if that undo
    /// cannot be done, the turn keeps its error and the acquisition ends
    /// with it.
    async fn attempt(
        &self,
        owner: Owner,
        field: &Arc<str>,
        lease: Lease,
        mode: AttemptMode,
        turn: Turn,
        order: &Order,
    ) -> Result<Tried> {
        let inner = self.inner.clone();
        let lease_ms =
            crate::connection::script::millis(lease.duration(inner.config.lock_watchdog_timeout));
        let sent_at = Instant::now();
        let call = {
            let (inner, proto, field) = (inner.clone(), self.proto.clone(), field.clone());
            async move {
                let build = || {
                    let take = Take {
                        field: &field,
                        lease_ms,
                        mode,
                    };
                    proto.acquire_call(&inner.env, take)
                };
                let reply = inner.redis.eval_attempt(build).await;
                (reply.and_then(|reply| proto.read_acquire(reply)), turn)
            }
        };
        let undo = {
            let (inner, proto, order) = (inner.clone(), self.proto.clone(), order.clone());
            let field = field.clone();
            move |left: Leftover<'_, Attempt>, turn: Turn| {
                undo_attempt(inner, proto, field, lease, sent_at, order, left, turn)
            }
        };
        match unlosable(&inner.background, Box::pin(call), undo).await {
            Ok((Attempt::Acquired { count, token }, turn)) => {
                let ticket = record(&inner, &self.proto, field, lease, count, sent_at, order);
                drop(turn);
                Ok(Tried::Acquired(Acquired {
                    owner,
                    field: field.clone(),
                    lease,
                    ticket,
                    token,
                }))
            }
            Ok((Attempt::Busy(ttl), _)) => Ok(Tried::Busy(ttl)),
            Ok((Attempt::NextInLine(ms), _)) => Ok(Tried::NextInLine(ms)),
            Err(e) if undoable(&e, &inner, self.name(), field) => Ok(Tried::Failed(e)),
            Err(e) => Err(e),
        }
    }

    /// How many holds `field` has (`HGET`; 0 if none).
    pub(crate) async fn hold_count(&self, field: &str) -> Result<u32> {
        let name = self.name().to_owned();
        let field = field.to_owned();
        let count: Option<i64> = self
            .inner
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
        crate::engine::watch::holds_field(&self.inner, self.name(), field).await
    }

    /// Unlock whoever holds it; if something was unlocked, local holders
    /// see their lost signal fire. (A read-lock force unlock of a lock held
    /// for writing unlocks nothing, and the writer keeps its hold.)
    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        let inner = &self.inner;
        let forcing = inner.holds.forcing(self.name());
        let reply = inner
            .redis
            .retrying(self.name(), || {
                inner
                    .redis
                    .eval(|| self.proto.force_unlock_call(&inner.env))
            })
            .await?;
        let unlocked = matches!(reply, Value::Integer(1));
        let unsure = forcing.done(unlocked);
        if !unsure.is_empty() {
            // Holds of this client taken while the unlock was under way:
            // before it ran (then it removed them) or after. One `HEXISTS`
            // each says, in the background so a cancelled call still checks
            // (as all background work, which a shutdown waits for).
            let (inner, name) = (inner.clone(), self.name().to_owned());
            inner.background.clone().spawn(async move {
                for (field, tenure) in unsure {
                    if let Ok(false) =
                        crate::engine::watch::holds_field(&inner, &name, &field).await
                    {
                        inner
                            .holds
                            .found_gone(&name, &field, tenure, "forced unlock");
                    }
                }
            });
        }
        Ok(unlocked)
    }
}

/// What one attempt found, once recorded.
enum Tried {
    Acquired(Acquired),
    Busy(i64),
    NextInLine(i64),
    /// Transient, and undone (in turn) if it may have acquired: the wait
    /// may go on.
    Failed(Error),
}

/// What an attempt left that nobody will use, or whose outcome is unknown,
/// given back in its `turn`: a hold it took is recorded and released; a
/// hold it may have taken, when the owner held nothing before, is released
/// once (harmless if it never ran). An undo of an unknown outcome that
/// cannot be done leaves its error in the turn, for the acquisition to end
/// with.
#[allow(clippy::too_many_arguments)]
fn undo_attempt(
    inner: Arc<Inner>,
    proto: Arc<dyn Protocol>,
    field: Arc<str>,
    lease: Lease,
    sent_at: Instant,
    order: Order,
    left: Leftover<'_, Attempt>,
    mut turn: Turn,
) -> Option<BoxFuture<'static, ()>> {
    // What the registry is to know first, how patient the release is, and
    // whether an attempt that follows waits for it.
    let (ticket, patience, awaited) = match left {
        // Ran, so it took a hold: record it, then release it.
        Leftover::Done(Attempt::Acquired { count, .. }) => {
            let ticket = record(&inner, &proto, &field, lease, *count, sent_at, &order);
            (Some(ticket), until_expiry(&inner, lease), false)
        }
        Leftover::Done(_) => return None,
        Leftover::Unknown { error, abandoned } if undoable(error, &inner, proto.name(), &field) => {
            // Awaited: bounded, as the next attempt waits for it; nobody
            // waits for an abandoned one, which tries until the hold it
            // may have taken could have expired anyway.
            let patience = if abandoned {
                until_expiry(&inner, lease)
            } else {
                Patience::Attempts
            };
            // It ran, but was not replicated: as a hold it took.
            let ticket = matches!(error, Error::NotReplicated { .. }).then(|| {
                let held = inner.holds.holds(proto.name(), &field);
                let count = if held { 2 } else { 1 };
                record(&inner, &proto, &field, lease, count, sent_at, &order)
            });
            (ticket, patience, !abandoned)
        }
        Leftover::Unknown { .. } => return None,
    };
    Some(
        async move {
            let released =
                release_in_turn(&inner, proto.as_ref(), &field, lease, ticket.as_ref(), patience);
            match released.await {
                // The next attempt waits for this: it ends with the error.
                Err(e) if awaited && e.is_transient() => *turn = Some(Box::new(e)),
                Err(e) if !awaited => {
                    tracing::warn!(lock = proto.name(), error = %e, "releasing a lock acquired by a cancelled call failed");
                }
                _ => {}
            }
            drop(turn);
        }
        .boxed(),
    )
}

/// One acquisition's attempts, as the wait loop drives them: each waits
/// for the acquisition's previous step (an undo) to land, runs the acquire
/// script, and turns its answer into how long to wait.
struct LockAttempts<'a> {
    lock: &'a RawLock,
    owner: Owner,
    field: Arc<str>,
    lease: Lease,
    mode: AttemptMode,
    deadline: Deadline,
    order: Order,
    /// An explicit owner's order, kept in the registry meanwhile.
    _shared: Option<Box<crate::engine::registry::OrderUse<'static>>>,
    /// How this waiter learns it may try again, known once busy.
    waits: Waits,
    /// The next re-check after [`Attempt::NextInLine`].
    /// (Milliseconds: every waiter carries it.)
    next_in_line_ms: u32,
    /// Whether an attempt was made.
    tried: bool,
}

impl LockAttempts<'_> {
    /// How long the caller may wait (`None`: no time limit), as its mode
    /// keeps it.
    fn wait(&self) -> Option<Duration> {
        match self.mode {
            AttemptMode::Once => Some(Duration::ZERO),
            AttemptMode::Waiting { wait } => wait,
        }
    }
}

impl waiter::Attempts for LockAttempts<'_> {
    type Value = Acquired;

    async fn attempt(&mut self) -> Result<Outcome<Acquired>> {
        // The previous attempt's undo, if any, must land first; if it could
        // not, whether this owner holds is unknown: stop here. Every
        // acquisition makes one attempt, `try_lock` too: the first waits for
        // the turn (another command of this owner field in flight) for up
        // to a command's timeout, even past its deadline.
        let deadline = if self.tried {
            self.deadline
        } else {
            self.deadline.at_least(self.lock.inner().config.timeout)
        };
        self.tried = true;
        let Some(mut turn) = deadline.run(self.order.clone().lock_owned()).await else {
            return Ok(Outcome::OutOfTime);
        };
        if let Some(e) = turn.take() {
            return Err(*e);
        }
        let (lock, field) = (self.lock, &self.field);
        let tried = lock.attempt(self.owner, field, self.lease, self.mode, turn, &self.order);
        Ok(match tried.await? {
            Tried::Acquired(acquired) => Outcome::Ready(acquired),
            Tried::Busy(ttl) => {
                self.next_in_line_ms = NEXT_IN_LINE_FIRST_MS;
                if let Waits::Unknown = self.waits {
                    self.waits = match lock.proto.waiting(field) {
                        Waiting::BackOff(b) => Waits::BackOff(b),
                        Waiting::Channel(_) => Waits::Channel,
                    };
                }
                match &mut self.waits {
                    Waits::BackOff(b) => Outcome::Busy(Some(b.next_delay())),
                    _ => Outcome::Busy(u64::try_from(ttl).ok().map(Duration::from_millis)),
                }
            }
            Tried::NextInLine(ms) => {
                let next = Duration::from_millis(self.next_in_line_ms.into());
                let pause =
                    u64::try_from(ms).map_or(next, |ms| Duration::from_millis(ms).min(next));
                self.next_in_line_ms = self.next_in_line_ms.saturating_mul(2);
                Outcome::Busy(Some(pause))
            }
            Tried::Failed(e) => Outcome::Failed(e),
        })
    }

    fn channel(&self) -> Option<(Cow<'_, str>, Wake)> {
        match self.lock.proto.waiting(&self.field) {
            Waiting::Channel(channel) => Some((channel, Wake::OneOrAll)),
            Waiting::BackOff(_) => None,
        }
    }

    fn deadline(&self) -> Deadline {
        self.deadline
    }

    fn name(&self) -> &str {
        self.lock.name()
    }

    fn kind_label(&self) -> &'static str {
        self.lock.proto.kind_label()
    }

    fn describe(&self, span: &tracing::Span) {
        span.record("owner", &*self.field);
    }

    fn give_up(&self) -> GiveUp {
        self.lock.give_up(&self.field, self.mode, &self.order)
    }
}

/// How a waiter learns it may try again (its protocol's [`Waiting`], kept
/// small: the channel is asked for again when subscribing).
enum Waits {
    /// Not busy yet.
    Unknown,
    /// Woken by messages on its channel.
    Channel,
    /// Sleeping per this back-off between attempts.
    BackOff(Box<crate::base::backoff::BackOffState>),
}

/// Record in the registry a hold that an attempt sent at `sent_at` took,
/// the field's hold count then being `count`; a hold that starts a tenure is
/// watched from then on (see [`crate::engine::watch`]).
fn record(
    inner: &Arc<Inner>,
    proto: &Arc<dyn Protocol>,
    field: &Arc<str>,
    lease: Lease,
    count: u32,
    sent_at: Instant,
    order: &Order,
) -> HoldTicket {
    let recorded = inner.holds.acquired(
        proto.name(),
        field,
        proto.kind_label(),
        proto.renewal(),
        lease,
        count,
        sent_at,
        order,
    );
    if recorded.new_tenure {
        let tenure = recorded.ticket.tenure;
        crate::engine::watch::schedule(inner, proto, field, tenure, sent_at);
    }
    recorded.ticket
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
