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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::base::backoff::equal_jitter;
use crate::base::error::{Error, Result};
use crate::connection::pubsub::{Subscription, Wake};
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

    /// Asked once, after the first busy attempt: the channel to subscribe to
    /// and how its messages wake waiters; `None` for a waiter woken by no
    /// message (it sleeps the pauses its attempts report).
    fn channel(&mut self) -> Option<(String, Wake)>;
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
pub(crate) async fn run<A: Attempts>(
    inner: &Arc<Inner>,
    name: &str,
    deadline: Deadline,
    attempts: &mut A,
) -> Result<Option<Done<A::Value>>> {
    let config = &inner.config;
    let cap = config.lock_watchdog_timeout;
    let retry_delay = config.retry_delay.max(Duration::from_millis(1));
    let budget = config.retry_span();
    let mut failures = Failures::default();
    // After the first busy attempt: the channel to subscribe to, if any. An
    // uncontended call is one round trip.
    let mut channel: Option<Option<(String, Wake)>> = None;
    let mut subscription: Option<Subscription> = None;
    // The wait span: from the first busy attempt to the end, entered while
    // subscribing and sleeping.
    let mut wait = crate::base::telemetry::WaitSpan::default();
    loop {
        if inner.is_closing() {
            return Err(Error::Closed);
        }
        if let (Some(Some((to, wake))), None) = (&channel, &subscription) {
            // Boxed: about 1 KB that every waiter would otherwise carry for
            // as long as it waits, and which it needs only once.
            let subscribing =
                Box::pin(inner.hub.subscribe(to, *wake)).instrument(wait.span.clone());
            match deadline.run(subscribing).await {
                None => return failures.out_of_time(),
                Some(Ok(s)) => subscription = Some(s),
                // The hub's errors name no server: this client's.
                Some(Err(e)) if e.is_transient() => {
                    let e = e.at(inner.redis.server());
                    failures.record(e, name, deadline, budget)?;
                    if deadline.expired() {
                        return failures.out_of_time();
                    }
                    deadline
                        .sleep(equal_jitter(retry_delay))
                        .instrument(wait.span.clone())
                        .await;
                    continue;
                }
                Some(Err(e)) => return Err(e.at(inner.redis.server())),
            }
        }
        let notified = subscription.as_ref().map(Subscription::notified);
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        wait.attempts += 1;
        // Boxed: an attempt (its script call, its undo) is live only while
        // it runs, and unboxed it would size the whole waiter for as long as
        // it sleeps.
        let pause = match Box::pin(attempts.attempt()).await? {
            Outcome::Ready(value) => {
                let last_message = subscription.as_ref().and_then(Subscription::last_message);
                return Ok(Some(Done {
                    value,
                    last_message,
                }));
            }
            Outcome::Announced(value) => {
                let last_message = subscription.as_ref().and_then(Subscription::last_message);
                let last_message = match (last_message, notified.as_mut().as_pin_mut()) {
                    (None, Some(message)) => {
                        let limit = match (Instant::now().checked_add(config.timeout), deadline.at)
                        {
                            (Some(limit), Some(at)) => Some(limit.min(at)),
                            (limit, at) => limit.or(at),
                        };
                        match limit {
                            Some(limit) => drop(tokio::time::timeout_at(limit, message).await),
                            None => message.await,
                        }
                        subscription.as_ref().and_then(Subscription::last_message)
                    }
                    (seen, _) => seen,
                };
                return Ok(Some(Done {
                    value,
                    last_message,
                }));
            }
            Outcome::Busy(bound) => {
                if wait.span.is_none() && !deadline.once {
                    wait.span = tracing::debug_span!(
                        "redisson_lock.wait",
                        lock = name,
                        attempts = tracing::field::Empty
                    );
                }
                failures = Failures::default();
                channel.get_or_insert_with(|| attempts.channel());
                bound.unwrap_or(cap)
            }
            Outcome::Failed(e) => {
                failures.record(e, name, deadline, budget)?;
                equal_jitter(retry_delay)
            }
            Outcome::OutOfTime => return failures.out_of_time(),
        };
        if deadline.once || deadline.expired() {
            return failures.out_of_time();
        }
        if subscription.is_none() && matches!(channel, Some(Some(_))) {
            continue; // subscribe first, then try again at once
        }
        // Until a message, the pause or the deadline. Each way of waiting is
        // its own await, with no future around it: this is the state a
        // waiter spends its life in, and its size is the waiter's.
        let span = wait.span.clone();
        match (notified.as_pin_mut(), deadline.until(pause.min(cap))) {
            (Some(n), Some(t)) => drop(tokio::time::timeout_at(t, n).instrument(span).await),
            (Some(n), None) => n.instrument(span).await,
            (None, Some(t)) => tokio::time::sleep_until(t).instrument(span).await,
            (None, None) => std::future::pending().instrument(span).await,
        }
    }
}

/// A wait's transient failures: since when every step has failed, and the
/// last error, which ends the wait if its time runs out while failing.
#[derive(Default)]
struct Failures {
    since: Option<Instant>,
    /// Boxed: a waiter carries this for as long as it waits, and it is
    /// rarely set.
    last: Option<Box<Error>>,
}

impl Failures {
    /// Note the transient failure `e`; `Err(e)` when the wait must end with
    /// it: it has no time limit and everything has failed for longer than
    /// the retry `budget`.
    fn record(&mut self, e: Error, name: &str, deadline: Deadline, budget: Duration) -> Result<()> {
        if deadline.at.is_none() && self.since.get_or_insert_with(Instant::now).elapsed() > budget {
            return Err(e);
        }
        tracing::debug!(lock = name, error = %e, "attempt failed, retrying");
        self.last = Some(Box::new(e));
        Ok(())
    }

    /// How a wait whose time ran out ends: `Ok(None)`, or the last
    /// transient error if it was failing.
    fn out_of_time<T>(self) -> Result<Option<T>> {
        self.last.map_or(Ok(None), |e| Err(*e))
    }
}

/// [`run`] for a synchronizer: `attempt` is a closure whose transient
/// errors are tried again, woken by `channel` per `wake`.
pub(crate) async fn run_with<T, F, Fut>(
    inner: &Arc<Inner>,
    name: &str,
    channel: &str,
    wake: Wake,
    wait: Option<Duration>,
    attempt: F,
) -> Result<Option<Done<T>>>
where
    T: Send,
    F: FnMut() -> Fut + Send,
    Fut: Future<Output = Result<Outcome<T>>> + Send,
{
    struct Closure<'a, F> {
        attempt: F,
        channel: &'a str,
        wake: Wake,
    }
    impl<T: Send, F, Fut> Attempts for Closure<'_, F>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<Outcome<T>>> + Send,
    {
        type Value = T;
        fn attempt(&mut self) -> impl Future<Output = Result<Outcome<T>>> + Send {
            let attempt = (self.attempt)();
            async move {
                match attempt.await {
                    Err(e) if e.is_transient() => Ok(Outcome::Failed(e)),
                    outcome => outcome,
                }
            }
        }
        fn channel(&mut self) -> Option<(String, Wake)> {
            Some((self.channel.to_owned(), self.wake))
        }
    }
    let deadline = Deadline::after(Instant::now(), wait);
    let mut attempts = Closure {
        attempt,
        channel,
        wake,
    };
    self::run(inner, name, deadline, &mut attempts).await
}
