//! The wait loop of the synchronizers (semaphores, count-down latch): try;
//! after a busy answer subscribe to the channel; then try again and sleep
//! until a message, the bound the attempt reported (the nearest permit
//! expiry), the safety cap or the deadline, whichever comes first
//! (docs/PROTOCOL.md §7, §3). The lock's loop in `raw` does the same with owners
//! and queues; this one knows neither.
//!
//! An attempt is responsible for its own cancellation safety and for undoing
//! an outcome it cannot know (see `semaphore` and `permit_semaphore`): this
//! loop only decides when to try again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::base::backoff::equal_jitter;
use crate::base::error::{Error, Result};
use crate::client::Inner;
use crate::connection::pubsub::{Subscription, Wake};

/// What one attempt found.
pub(crate) enum Outcome<T> {
    /// Done: acquired, or the latch is open.
    Ready(T),
    /// Not yet. Try again after a message, or after at most this long
    /// (`None`: only the safety cap bounds the wait).
    Busy(Option<Duration>),
}

/// A successful wait: the attempt's value, and the code of the last message
/// the channel delivered since this waiter subscribed (read after the
/// successful attempt; `None` if it never subscribed or nothing arrived).
pub(crate) struct Done<T> {
    pub value: T,
    pub last_message: Option<i64>,
}

/// Sleep `pause`, or until `deadline` if that comes first.
async fn sleep_until_deadline(pause: Duration, deadline: Option<Instant>) {
    let wake = Instant::now().checked_add(pause);
    match (wake, deadline) {
        (Some(w), Some(d)) => tokio::time::sleep_until(w.min(d)).await,
        (Some(w), None) => tokio::time::sleep_until(w).await,
        (None, Some(d)) => tokio::time::sleep_until(d).await,
        (None, None) => std::future::pending().await,
    }
}

/// Run `attempt` until it is ready, waking on `channel` (messages handled
/// per `wake`). `wait`: `Some(0)` tries once; `None` (or a wait above
/// [`MAX_DURATION`](crate::connection::config::MAX_DURATION)) waits without a time limit;
/// else up to that long. `Ok(None)` when the time ran out.
///
/// Transient errors (of an attempt or of subscribing) do not end a bounded
/// wait while time remains: it tries again after `retry_delay` (with
/// jitter), and ends with the last transient error if its deadline passes
/// while failing. A wait without a time limit ends with it once everything
/// has failed for longer than the retry budget. Every sleep is capped at
/// `lock_watchdog_timeout`, so a lost message (reconnect gap,
/// PUBLISH/SPUBLISH mismatch) costs at most that much. At shutdown the
/// waiter is woken and ends with [`Error::Closed`].
pub(crate) async fn wait_until<T, F, Fut>(
    inner: &Arc<Inner>,
    name: &str,
    channel: &str,
    wake: Wake,
    wait: Option<Duration>,
    mut attempt: F,
) -> Result<Option<Done<T>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Outcome<T>>>,
{
    let start = Instant::now();
    let wait = wait.filter(|w| *w <= crate::connection::config::MAX_DURATION);
    let once = wait.is_some_and(|w| w.is_zero());
    let deadline = wait.and_then(|w| start.checked_add(w));
    let expired = || deadline.is_some_and(|d| Instant::now() >= d);
    let config = &inner.config;
    let cap = config.lock_watchdog_timeout;
    let retry_delay = config.retry_delay.max(Duration::from_millis(1));
    let budget = config.retry_span();
    let mut last_error: Option<Error> = None;
    let out_of_time = |last_error: Option<Error>| match last_error {
        Some(e) => Err(e),
        None => Ok(None),
    };
    let mut failing_since: Option<Instant> = None;
    let gives_up = |failing_since: &mut Option<Instant>| {
        deadline.is_none() && failing_since.get_or_insert_with(Instant::now).elapsed() > budget
    };
    // Subscribed once an attempt found it busy: an uncontended call is one
    // round trip.
    let mut busy = false;
    let mut subscription: Option<Subscription> = None;
    // The wait span: from the first busy attempt to the end, entered while
    // subscribing and sleeping.
    let mut wait = crate::base::telemetry::WaitSpan::default();
    loop {
        if inner.is_closing() {
            return Err(Error::Closed);
        }
        // Subscribe before trying again, so that no message published
        // between that attempt and the wait is missed.
        if busy && subscription.is_none() {
            let subscribing = inner
                .hub
                .subscribe_with(channel, wake)
                .instrument(wait.span.clone());
            let subscribed = match deadline {
                None => subscribing.await,
                Some(d) => match tokio::time::timeout_at(d, subscribing).await {
                    Ok(subscribed) => subscribed,
                    Err(_) => return out_of_time(last_error),
                },
            };
            match subscribed {
                Ok(s) => subscription = Some(s),
                Err(e) if e.is_transient() => {
                    if gives_up(&mut failing_since) {
                        return Err(e);
                    }
                    tracing::debug!(lock = name, error = %e, "subscribing failed, retrying");
                    last_error = Some(e);
                    if expired() {
                        return out_of_time(last_error);
                    }
                    sleep_until_deadline(equal_jitter(retry_delay), deadline)
                        .instrument(wait.span.clone())
                        .await;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let notified = subscription.as_ref().map(Subscription::notified);
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        wait.attempts += 1;
        let outcome = attempt().await;
        if matches!(outcome, Ok(Outcome::Busy(_))) && wait.span.is_none() && !once {
            wait.span = tracing::debug_span!(
                "redisson_lock.wait",
                lock = name,
                attempts = tracing::field::Empty
            );
        }
        let pause = match outcome {
            Ok(Outcome::Ready(value)) => {
                let last_message = subscription.as_ref().and_then(Subscription::last_message);
                return Ok(Some(Done {
                    value,
                    last_message,
                }));
            }
            Ok(Outcome::Busy(bound)) => {
                busy = true;
                failing_since = None;
                last_error = None;
                bound.unwrap_or(cap)
            }
            Err(e) if e.is_transient() => {
                if gives_up(&mut failing_since) {
                    return Err(e);
                }
                tracing::debug!(lock = name, error = %e, "attempt failed, retrying");
                last_error = Some(e);
                equal_jitter(retry_delay)
            }
            Err(e) => return Err(e),
        };
        if once || expired() {
            return out_of_time(last_error);
        }
        if busy && subscription.is_none() {
            continue; // subscribe first, then try again at once
        }
        let pause = pause.min(cap);
        let sleep = async {
            match notified.as_pin_mut() {
                Some(n) => {
                    tokio::select! {
                        _ = n => {}
                        _ = sleep_until_deadline(pause, deadline) => {}
                    }
                }
                None => sleep_until_deadline(pause, deadline).await,
            }
        };
        sleep.instrument(wait.span.clone()).await;
    }
}

/// Milliseconds since the Unix epoch on this client's clock: the `now` the
/// permit-expirable semaphore's scripts take (at least 1).
pub(crate) fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .max(1)
}
