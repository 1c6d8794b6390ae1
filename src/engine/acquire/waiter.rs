//! The one wait loop, for every lock kind and synchronizer: try; after a
//! busy answer subscribe to the channel; then try again and sleep until a
//! message, the bound the attempt reported (the holder's TTL, the nearest
//! permit expiry), the safety cap or the deadline, whichever comes first
//! (docs/PROTOCOL.md §2.8, §7.4). It knows no owner, queue or permit: what
//! differs between kinds is in their [`Attempts`].
//!
//! An attempt is responsible for its own cancellation safety and for undoing
//! an outcome it cannot know (see `raw`, `semaphore` and
//! `permit_semaphore`): this loop only decides when to try again.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::base::backoff::equal_jitter;
use crate::base::error::{Error, Result};
use crate::base::telemetry::InSpan;
use crate::connection::pubsub::{Subscription, Wake};
use crate::engine::acquire::give_up::GiveUp;
use crate::engine::shared::Inner;

/// What one attempt found.
pub(crate) enum Outcome<T> {
    /// Done: acquired, or the latch is open.
    Ready(T),
    /// Done, by a change that was published with its message (a latch
    /// found gone: counted down to zero or deleted, each with its code):
    /// a subscribed waiter that has not yet seen a message waits for it (at
    /// most `timeout`, and not past its deadline), so that
    /// [`Done::last_message`] tells which it was.
    /// The reply that found the change can overtake the message, which
    /// comes on another connection.
    Announced(T),
    /// Not yet. Try again after a message, or after at most this long
    /// (`None`: only the safety cap bounds the wait).
    Busy(Option<Duration>),
    /// A transient failure, undone if it needed undoing: try again after
    /// `retry_delay` (with jitter) while time remains.
    Failed(Error),
    /// The time ran out before the attempt could be made.
    OutOfTime,
}

/// A successful wait: the attempt's value, and the code of the last message
/// the channel delivered since this waiter subscribed (read after the
/// successful attempt; `None` if it never subscribed or nothing arrived).
pub(crate) struct Done<T> {
    pub value: T,
    pub last_message: Option<i64>,
}

/// One waiter's attempts: what the wait loop drives.
pub(crate) trait Attempts: Send {
    /// What a successful attempt gives.
    type Value: Send;

    /// Try once. `Err` ends the wait with that error.
    fn attempt(&mut self) -> impl Future<Output = Result<Outcome<Self::Value>>> + Send;

    /// Asked after the first busy attempt and again when subscribing: the
    /// channel to subscribe to and how its messages wake waiters; `None` for
    /// a waiter woken by no message (it sleeps the pauses its attempts
    /// report).
    fn channel(&self) -> Option<(Cow<'_, str>, Wake)>;

    /// How long the waiter may wait.
    fn deadline(&self) -> Deadline;

    /// The lock or synchronizer waited for (for errors and spans).
    fn name(&self) -> &str;

    /// Its kind, as the `kind` of spans and metrics (`lock`, `semaphore`, …).
    fn kind_label(&self) -> &'static str;

    /// Record on the acquisition's span what only this kind knows (an
    /// owner field, a number of permits).
    fn describe(&self, _span: &tracing::Span) {}

    /// The step to run if the acquisition ends without what it waited for,
    /// or is dropped (a fair-lock waiter leaves the queue); armed from
    /// before the first attempt.
    fn give_up(&self) -> GiveUp {
        GiveUp::none()
    }
}

/// How long a waiter may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    /// `None`: no time limit.
    pub at: Option<Instant>,
    /// Try once, never wait.
    pub once: bool,
}

impl Deadline {
    /// A wait of `wait` from `start`: `Some(0)` tries once; `None` (or a
    /// wait above [`MAX_DURATION`](crate::base::time::MAX_DURATION))
    /// has no time limit.
    pub(crate) fn after(start: Instant, wait: Option<Duration>) -> Deadline {
        let wait = wait.filter(|w| *w <= crate::base::time::MAX_DURATION);
        Deadline {
            at: wait.and_then(|w| start.checked_add(w)),
            once: wait.is_some_and(|w| w.is_zero()),
        }
    }

    /// This deadline, or `at_least` from now if that is later (a deadline
    /// without a limit stays so).
    pub(crate) fn at_least(self, at_least: Duration) -> Deadline {
        let floor = Instant::now().checked_add(at_least);
        Deadline {
            at: self.at.map(|at| floor.map_or(at, |f| at.max(f))),
            once: self.once,
        }
    }

    fn expired(self) -> bool {
        self.at.is_some_and(|d| Instant::now() >= d)
    }

    /// When a sleep of `pause` from now ends, or the deadline if that
    /// comes first; `None`: never.
    fn until(self, pause: Duration) -> Option<Instant> {
        match (Instant::now().checked_add(pause), self.at) {
            (Some(w), Some(d)) => Some(w.min(d)),
            (w, d) => w.or(d),
        }
    }

    /// Sleep `pause`, or until the deadline if that comes first.
    async fn sleep(self, pause: Duration) {
        match self.until(pause) {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
        }
    }

    /// `fut`, or `None` once the deadline passes.
    pub(crate) async fn run<F: Future>(self, fut: F) -> Option<F::Output> {
        match self.at {
            None => Some(fut.await),
            Some(d) => tokio::time::timeout_at(d, fut).await.ok(),
        }
    }
}

/// Run `attempts` until one is ready, for every lock kind and synchronizer
/// (docs/PROTOCOL.md §2.8, §7.4): try; after the first busy attempt
/// subscribe to its channel, then try again at once, so that no message
/// published in between is missed; then sleep until a message, the pause
/// the attempt reported, the safety cap or the deadline, whichever comes
/// first. `Ok(None)` when the time ran out.
///
/// Transient failures (of an attempt or of subscribing) do not end a bounded
/// wait while time remains: it tries again after `retry_delay` (with
/// jitter), and ends with the last transient error if its deadline passes
/// while failing. A wait without a time limit ends with it once everything
/// has failed for longer than the retry budget (`(timeout + retry_delay) ×
/// retry_attempts`, 16 s by default). Every sleep is capped at
/// `lock_watchdog_timeout`, so a lost message (reconnect gap,
/// PUBLISH/SPUBLISH mismatch) costs at most that much. At shutdown the
/// waiter is woken and ends with [`Error::Closed`].
#[allow(clippy::manual_async_fn)] // on purpose: see the first comment
pub(crate) fn run<'a, A: Attempts>(
    inner: &'a Arc<Inner>,
    attempts: &'a mut A,
) -> impl Future<Output = Result<Option<Done<A::Value>>>> + Send + 'a {
    // An `async` block rather than an `async fn`: it uses the arguments it
    // captured in place, where an `async fn` keeps a second copy of each;
    // and the deadline and name are asked of `attempts`, which keeps them.
    // Every await below but the wait itself is boxed: this future is what
    // a waiter carries for as long as it waits, so its size is the size
    // of the waiting state (and each boxed step is live only while it runs).
    async move {
        let mut failures = Failures::default();
        // After the first busy attempt: whether the attempts have a channel
        // to subscribe to. An uncontended call is one round trip.
        let mut listens: Option<bool> = None;
        let mut subscription: Option<Subscription> = None;
        // The wait span: from the first busy attempt to the end, entered
        // while subscribing and sleeping.
        let mut wait = crate::base::telemetry::WaitSpan::default();
        loop {
            if inner.is_closing() {
                return Err(Error::Closed);
            }
            if listens == Some(true) && subscription.is_none() {
                // In a block: no temporary of it outlives it.
                let failed = {
                    let subscribing = subscribe(inner, &mut *attempts, wait.span());
                    match Box::pin(subscribing).await {
                        None => return failures.out_of_time(),
                        Some(Ok(s)) => {
                            subscription = Some(s);
                            None
                        }
                        // The hub's errors name no server: this client's.
                        Some(Err(e)) if e.is_transient() => Some(e.at(inner.redis.server())),
                        Some(Err(e)) => return Err(e.at(inner.redis.server())),
                    }
                };
                if let Some(e) = failed {
                    let deadline = attempts.deadline();
                    failures.record(e, attempts.name(), deadline, inner.config.retry_span())?;
                    if deadline.expired() {
                        return failures.out_of_time();
                    }
                    let pause = deadline.sleep(retry_pause(inner));
                    Box::pin(pause.instrument(wait.span().clone())).await;
                    continue;
                }
            }
            let notified = subscription.as_ref().map(Subscription::notified);
            tokio::pin!(notified);
            if let Some(n) = notified.as_mut().as_pin_mut() {
                n.enable();
            }
            wait.attempts += 1;
            // In a block: neither the outcome nor a temporary of it outlives it.
            let pause = {
                let outcome = Box::pin(attempts.attempt()).await?;
                match outcome {
                    Outcome::Ready(value) => {
                        let last_message =
                            subscription.as_ref().and_then(Subscription::last_message);
                        return Ok(Some(Done {
                            value,
                            last_message,
                        }));
                    }
                    Outcome::Announced(value) => {
                        let subscription = subscription.as_ref();
                        let message = notified.as_mut().as_pin_mut();
                        let deadline = attempts.deadline();
                        let announced = announced(inner, deadline, subscription, message, value);
                        return Ok(Some(Box::pin(announced).await));
                    }
                    Outcome::Busy(bound) => {
                        if !attempts.deadline().once {
                            wait.start(attempts.name());
                        }
                        failures = Failures::default();
                        if listens.is_none() {
                            listens = Some(attempts.channel().is_some());
                        }
                        bound.unwrap_or(inner.config.lock_watchdog_timeout)
                    }
                    Outcome::Failed(e) => {
                        let (name, deadline) = (attempts.name(), attempts.deadline());
                        failures.record(e, name, deadline, inner.config.retry_span())?;
                        retry_pause(inner)
                    }
                    Outcome::OutOfTime => return failures.out_of_time(),
                }
            };
            let deadline = attempts.deadline();
            if deadline.once || deadline.expired() {
                return failures.out_of_time();
            }
            if subscription.is_none() && listens == Some(true) {
                continue; // subscribe first, then try again at once
            }
            // Until a message, the pause or the deadline. Each way of waiting
            // is its own await, with no future around it: this is the state
            // a waiter spends its life in, and its size is the waiter's.
            let span = wait.span();
            let cap = inner.config.lock_watchdog_timeout;
            match (notified.as_pin_mut(), deadline.until(pause.min(cap))) {
                (Some(n), Some(t)) => {
                    let woken = std::pin::pin!(tokio::time::timeout_at(t, n));
                    drop(InSpan::new(span, woken).await);
                }
                (Some(n), None) => InSpan::new(span, n).await,
                (None, Some(t)) => {
                    let slept = std::pin::pin!(tokio::time::sleep_until(t));
                    InSpan::new(span, slept).await;
                }
                (None, None) => std::future::pending().await,
            }
        }
    }
}

/// A transient failure's pause: `retry_delay` (at least 1 ms), with jitter.
fn retry_pause(inner: &Inner) -> Duration {
    equal_jitter(inner.config.retry_delay.max(Duration::from_millis(1)))
}

/// Subscribe to the channel of `attempts` (which has one), within the wait
/// span; `None` once the deadline passes first.
async fn subscribe<A: Attempts>(
    inner: &Arc<Inner>,
    attempts: &mut A,
    span: &tracing::Span,
) -> Option<Result<Subscription>> {
    let (to, wake) = attempts.channel()?;
    let subscribing = inner.hub.subscribe(&to, wake).instrument(span.clone());
    attempts.deadline().run(subscribing).await
}

/// A wait ended by an announced change (`Outcome::Announced`): a waiter
/// that has seen no message since it subscribed waits for the one that
/// carries the change's code (at most the command timeout, and not past
/// its deadline), since the reply can overtake it.
async fn announced<T>(
    inner: &Inner,
    deadline: Deadline,
    subscription: Option<&Subscription>,
    message: Option<std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>>,
    value: T,
) -> Done<T> {
    let seen = subscription.and_then(Subscription::last_message);
    let last_message = match (seen, message) {
        (None, Some(message)) => {
            let limit = match (
                Instant::now().checked_add(inner.config.timeout),
                deadline.at,
            ) {
                (Some(limit), Some(at)) => Some(limit.min(at)),
                (limit, at) => limit.or(at),
            };
            match limit {
                Some(limit) => drop(tokio::time::timeout_at(limit, message).await),
                None => message.await,
            }
            subscription.and_then(Subscription::last_message)
        }
        (seen, _) => seen,
    };
    Done {
        value,
        last_message,
    }
}

/// A wait's transient failures: since when every step has failed, and the
/// last error, which ends the wait if its time runs out while failing.
/// Boxed, and only while failing: a waiter carries this for as long as it
/// waits.
#[derive(Default)]
struct Failures(Option<Box<Failing>>);

struct Failing {
    since: Instant,
    last: Error,
}

impl Failures {
    /// Note the transient failure `e`; `Err(e)` when the wait must end with
    /// it: it has no time limit and everything has failed for longer than
    /// the retry `budget`.
    fn record(&mut self, e: Error, name: &str, deadline: Deadline, budget: Duration) -> Result<()> {
        let since = self.0.as_ref().map_or_else(Instant::now, |f| f.since);
        if deadline.at.is_none() && since.elapsed() > budget {
            return Err(e);
        }
        tracing::debug!(lock = name, error = %e, "attempt failed, retrying");
        match &mut self.0 {
            Some(failing) => failing.last = e,
            None => self.0 = Some(Box::new(Failing { since, last: e })),
        }
        Ok(())
    }

    /// How a wait whose time ran out ends: `Ok(None)`, or the last
    /// transient error if it was failing.
    fn out_of_time<T>(self) -> Result<Option<T>> {
        self.0.map_or(Ok(None), |f| Err(f.last))
    }
}
