//! What the crate reports about its locks: the closing fields of the
//! acquisition spans, and metrics through the `metrics` facade when the
//! `metrics` feature is on. Without the feature every metric function here is
//! empty and inlined away; the names, types, units and labels are listed in
//! the README ("Observability").
//!
//! Spans are created where they happen, with `tracing::debug_span!` and
//! plain fields (a lock name, a `&'static str` kind, numbers), so that with
//! no subscriber interested a span costs a relaxed load of its callsite's
//! interest and nothing is formatted or allocated.

use std::time::Duration;

use tokio::time::Instant;

use crate::base::error::Error;

/// Metric names, each documented in the README.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) mod names {
    /// Counter: acquisitions that ended, by `kind` and `outcome`.
    pub(crate) const ACQUISITIONS: &str = "redisson_lock_acquisitions_total";
    /// Histogram (seconds): how long acquisitions took, by `kind` and `outcome`.
    pub(crate) const WAIT: &str = "redisson_lock_wait_seconds";
    /// Gauge: holds (and permits) held by guards of this process, by `kind`.
    pub(crate) const HELD: &str = "redisson_lock_held";
    /// Counter: watchdog holds whose renewal Redis confirmed.
    pub(crate) const RENEWALS: &str = "redisson_lock_renewals_total";
    /// Counter: watchdog holds whose renewal call failed (tried again soon).
    pub(crate) const RENEWAL_FAILURES: &str = "redisson_lock_renewal_failures_total";
    /// Counter: holds found lost, by `kind` and `reason`.
    pub(crate) const LOST: &str = "redisson_lock_lost_total";
    /// Gauge: channels subscribed by the pub/sub hubs of this process.
    pub(crate) const SUBSCRIPTIONS: &str = "redisson_lock_subscriptions";
    /// Gauge: give-backs of permits still trying to reach Redis, by `kind`.
    pub(crate) const PENDING_RELEASES: &str = "redisson_lock_pending_releases";
    /// Counter: give-backs of permits that ended without their permits known
    /// to be back, by `kind` and `reason`.
    pub(crate) const ABANDONED_RELEASES: &str = "redisson_lock_abandoned_releases_total";
}

/// How an acquisition (or a latch await) ended: the `outcome` field of its
/// span and label of its metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Acquired (a latch: opened).
    Acquired,
    /// Tried once, without waiting, and found it taken.
    Busy,
    /// Waited, and the time ran out.
    Timeout,
    /// Ended with an error.
    Error,
    /// The future was dropped before it ended.
    Cancelled,
}

impl Ending {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ending::Acquired => "acquired",
            Ending::Busy => "busy",
            Ending::Timeout => "timeout",
            Ending::Error => "error",
            Ending::Cancelled => "cancelled",
        }
    }
}

pub(crate) use crate::base::lost::LostReason;

/// One acquisition, from its call to its end: records the outcome and the
/// time taken on its span (`waited_ms`, `outcome`, `error`) and in the
/// metrics. Dropped without [`finish`](Self::finish), it was cancelled.
pub(crate) struct Acquisition {
    kind: &'static str,
    start: Instant,
    /// Boxed, and only when some subscriber wants it: every waiter carries
    /// this for as long as it waits.
    span: Option<Box<tracing::Span>>,
    done: bool,
}

impl Acquisition {
    /// Time an acquisition of `kind` on `lock`, waiting up to `wait`, called
    /// at `start`, on a new `redisson_lock.acquire` span (its `owner` or
    /// `permits` recorded by the caller that has one).
    pub(crate) fn start(
        lock: &str,
        kind: &'static str,
        wait: Option<std::time::Duration>,
        start: Instant,
    ) -> Acquisition {
        let span = tracing::debug_span!(
            "redisson_lock.acquire",
            lock,
            kind,
            owner = tracing::field::Empty,
            permits = tracing::field::Empty,
            wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            waited_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        Acquisition {
            kind,
            start,
            span: (!span.is_disabled()).then(|| Box::new(span)),
            done: false,
        }
    }

    /// The acquisition's span, to run it in.
    pub(crate) fn span(&self) -> &tracing::Span {
        self.span.as_deref().unwrap_or(&NO_SPAN)
    }

    /// Record how it ended: `Ok(Some(_))` acquired, `Ok(None)` busy (when
    /// it only tried once) or timed out, `Err` an error.
    pub(crate) fn finish<T>(mut self, result: &Result<Option<T>, Error>, once: bool) {
        let outcome = match result {
            Ok(Some(_)) => Ending::Acquired,
            Ok(None) if once => Ending::Busy,
            Ok(None) => Ending::Timeout,
            Err(e) => {
                self.span().record("error", tracing::field::display(e));
                Ending::Error
            }
        };
        self.end(outcome);
    }

    fn end(&mut self, outcome: Ending) {
        self.done = true;
        let waited = self.start.elapsed();
        let span = self.span();
        span.record(
            "waited_ms",
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        );
        span.record("outcome", outcome.as_str());
        acquisition(self.kind, outcome, waited);
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        if !self.done {
            self.end(Ending::Cancelled);
        }
    }
}

/// Register the metrics' descriptions and units with the installed
/// recorder (at every connect: a recorder may be installed late).
#[inline]
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::Unit;
        metrics::describe_counter!(
            names::ACQUISITIONS,
            Unit::Count,
            "Acquisitions (and latch awaits) that ended, by kind and outcome"
        );
        metrics::describe_histogram!(
            names::WAIT,
            Unit::Seconds,
            "Time from the call to the outcome of an acquisition, by kind and outcome"
        );
        metrics::describe_gauge!(
            names::HELD,
            Unit::Count,
            "Holds and permits held by guards of this process, by kind"
        );
        metrics::describe_counter!(
            names::RENEWALS,
            Unit::Count,
            "Watchdog holds whose renewal Redis confirmed"
        );
        metrics::describe_counter!(
            names::RENEWAL_FAILURES,
            Unit::Count,
            "Watchdog holds whose renewal call failed (tried again after retry_delay)"
        );
        metrics::describe_counter!(
            names::LOST,
            Unit::Count,
            "Holds found lost while held, by kind and reason"
        );
        metrics::describe_gauge!(
            names::SUBSCRIPTIONS,
            Unit::Count,
            "Channels subscribed for waiters and held locks' watches by this process"
        );
        metrics::describe_gauge!(
            names::PENDING_RELEASES,
            Unit::Count,
            "Give-backs of semaphore permits still trying to reach Redis, by kind"
        );
        metrics::describe_counter!(
            names::ABANDONED_RELEASES,
            Unit::Count,
            "Give-backs of semaphore permits that ended without the permits known to be back, \
             by kind and reason (shutdown, latch_expired, error)"
        );
        // Register the series a dashboard alerts on at zero, so that they
        // exist before their first event (adding 0 leaves a running total
        // as it is when a second client connects).
        metrics::counter!(names::RENEWALS).increment(0);
        metrics::counter!(names::RENEWAL_FAILURES).increment(0);
        metrics::gauge!(names::SUBSCRIPTIONS).increment(0.0);
        for kind in PERMIT_KINDS {
            metrics::gauge!(names::PENDING_RELEASES, "kind" => kind).increment(0.0);
        }
        for (kind, reason) in GIVE_UPS {
            metrics::counter!(names::ABANDONED_RELEASES, "kind" => kind, "reason" => reason.label())
                .increment(0);
        }
        for kind in LOCK_KINDS {
            for reason in [
                LostReason::Gone,
                LostReason::NotRenewed,
                LostReason::ForceUnlocked,
                LostReason::LeaseEnded,
            ] {
                metrics::counter!(names::LOST, "kind" => kind, "reason" => reason.label())
                    .increment(0);
            }
        }
    }
}

/// The `kind` label of every lock kind (the client method that makes it).
#[cfg(feature = "metrics")]
const LOCK_KINDS: [&str; 8] = [
    "lock",
    "non_reentrant_lock",
    "fair_lock",
    "non_reentrant_fair_lock",
    "read_lock",
    "write_lock",
    "spin_lock",
    "fenced_lock",
];

/// The `kind` label of the semaphores, whose permits are given back in the
/// background until they land.
#[cfg(feature = "metrics")]
const PERMIT_KINDS: [&str; 2] = ["semaphore", "permit_expirable_semaphore"];

/// Every series of `redisson_lock_abandoned_releases_total` (the
/// permit-expirable semaphore has no permit latch to expire).
#[cfg(feature = "metrics")]
const GIVE_UPS: [(&str, GaveUp); 5] = [
    ("semaphore", GaveUp::Shutdown),
    ("semaphore", GaveUp::LatchExpired),
    ("semaphore", GaveUp::Error),
    ("permit_expirable_semaphore", GaveUp::Shutdown),
    ("permit_expirable_semaphore", GaveUp::Error),
];

/// Why a give-back of permits ended without its permits known to be back:
/// the `reason` label of `redisson_lock_abandoned_releases_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GaveUp {
    /// The client shut down (or its runtime did) before it reached Redis.
    Shutdown,
    /// It reached Redis only after the permit latch that makes it exact
    /// could have expired (the semaphore only).
    LatchExpired,
    /// Redis answered with an error that retrying cannot change (the key
    /// replaced by another type, the credentials refused).
    Error,
}

impl GaveUp {
    pub(crate) fn label(self) -> &'static str {
        match self {
            GaveUp::Shutdown => "shutdown",
            GaveUp::LatchExpired => "latch_expired",
            GaveUp::Error => "error",
        }
    }
}

/// A give-back of permits of `kind` started trying in the background
/// (`started`), or ended.
#[inline]
pub(crate) fn pending_release(kind: &'static str, started: bool) {
    #[cfg(feature = "metrics")]
    {
        let gauge = metrics::gauge!(names::PENDING_RELEASES, "kind" => kind);
        if started {
            gauge.increment(1.0);
        } else {
            gauge.decrement(1.0);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, started);
}

/// `count` give-backs of permits of `kind` ended without their permits
/// known to be back, for `reason`.
#[inline]
pub(crate) fn abandoned_releases(kind: &'static str, reason: GaveUp, count: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::ABANDONED_RELEASES, "kind" => kind, "reason" => reason.label())
        .increment(count);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, reason.label(), count);
}

/// An acquisition of `kind` ended with `outcome` after `waited`.
#[inline]
pub(crate) fn acquisition(kind: &'static str, outcome: Ending, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        let outcome = outcome.as_str();
        metrics::counter!(names::ACQUISITIONS, "kind" => kind, "outcome" => outcome).increment(1);
        metrics::histogram!(names::WAIT, "kind" => kind, "outcome" => outcome)
            .record(waited.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, waited);
}

/// A guard of `kind` now holds (one more hold or permit guard).
#[inline]
pub(crate) fn held(kind: &'static str) {
    held_change(kind, 1.0);
}

/// A hold or permit guard of `kind` ended (released, dropped or forgotten).
#[inline]
pub(crate) fn unheld(kind: &'static str) {
    held_change(kind, -1.0);
}

/// The guards of `kind` that hold changed by `change`.
#[inline]
fn held_change(kind: &'static str, change: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(names::HELD, "kind" => kind).increment(change);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, change);
}

/// A renewal batch confirmed `renewed` holds, and failed for `failed`.
#[inline]
pub(crate) fn renewals(renewed: u64, failed: u64) {
    #[cfg(feature = "metrics")]
    {
        if renewed > 0 {
            metrics::counter!(names::RENEWALS).increment(renewed);
        }
        if failed > 0 {
            metrics::counter!(names::RENEWAL_FAILURES).increment(failed);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (renewed, failed);
}

/// A hold of `kind` was found lost.
#[inline]
pub(crate) fn lost(kind: &'static str, reason: LostReason) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::LOST, "kind" => kind, "reason" => reason.label()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, reason.label());
}

/// The hub subscribed to one more channel (`opened`) or left one.
#[inline]
pub(crate) fn subscription(opened: bool) {
    #[cfg(feature = "metrics")]
    {
        let gauge = metrics::gauge!(names::SUBSCRIPTIONS);
        if opened {
            gauge.increment(1.0);
        } else {
            gauge.decrement(1.0);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = opened;
}

/// The span of one wait (`redisson_lock.wait`, none until the first busy
/// attempt) and how many attempts it made, recorded on it once, when the
/// wait ends, however it ends.
#[derive(Default)]
pub(crate) struct WaitSpan {
    /// Boxed, and only when some subscriber wants it: every waiter carries
    /// this for as long as it waits.
    span: Option<Box<tracing::Span>>,
    pub attempts: u32,
}

/// The span of a wait nobody traces.
static NO_SPAN: tracing::Span = tracing::Span::none();

impl WaitSpan {
    /// The wait's span (a disabled one until [`start`](Self::start)).
    pub(crate) fn span(&self) -> &tracing::Span {
        self.span.as_deref().unwrap_or(&NO_SPAN)
    }

    /// Open the span of the wait on `lock`, if it has none yet.
    pub(crate) fn start(&mut self, lock: &str) {
        if self.span.is_none() {
            let span = tracing::debug_span!(
                "redisson_lock.wait",
                lock = lock,
                attempts = tracing::field::Empty
            );
            if !span.is_disabled() {
                self.span = Some(Box::new(span));
            }
        }
    }
}

impl Drop for WaitSpan {
    fn drop(&mut self) {
        if let Some(span) = &self.span {
            span.record("attempts", self.attempts);
        }
    }
}

/// A future polled inside a span it borrows: what
/// [`Instrument`](tracing::Instrument) does, without a clone of the span of
/// its own (40 bytes that a waiter would carry for as long as it waits).
pub(crate) struct InSpan<'a, F> {
    span: &'a tracing::Span,
    future: std::pin::Pin<&'a mut F>,
}

impl<'a, F: std::future::Future> InSpan<'a, F> {
    /// `future`, entered in `span` each time it is polled.
    pub(crate) fn new(span: &'a tracing::Span, future: std::pin::Pin<&'a mut F>) -> Self {
        InSpan { span, future }
    }
}

impl<F: std::future::Future> std::future::Future for InSpan<'_, F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.span.enter();
        this.future.as_mut().poll(cx)
    }
}
