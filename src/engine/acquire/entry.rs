//! The one way into the core ([`acquire`]), and the synchronizers' way to
//! it ([`acquire_with`]).

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::base::error::Result;
use crate::base::telemetry::{Acquisition, InSpan};
use crate::connection::pubsub::Wake;
use crate::engine::acquire::waiter::{self, Attempts, Deadline, Done, Outcome};
use crate::engine::shared::Inner;

/// The one way into the core, for every lock kind and synchronizer (the
/// multi-lock is made of its members' acquisitions): in a
/// `redisson_lock.acquire` span that records how it ended, run `attempts`
/// in the wait loop ([`waiter::run`]) for at most `wait` (`None`, or a wait
/// above [`MAX_DURATION`](crate::base::time::MAX_DURATION): no time limit;
/// the attempts keep their deadline), and run their give-up step if it ends
/// without what it waited for (in the background if it is dropped).
/// `Ok(None)` when the time ran out.
#[allow(clippy::manual_async_fn)] // on purpose: see the first comment
pub(crate) fn acquire<'a, A: Attempts>(
    inner: &'a Arc<Inner>,
    attempts: &'a mut A,
    wait: Option<Duration>,
) -> impl Future<Output = Result<Option<Done<A::Value>>>> + Send + 'a {
    // Started at the call, and only the report kept: the wait and the
    // arguments are not carried while waiting (an `async fn` would keep a
    // copy of each).
    let wait = wait.filter(|w| *w <= crate::base::time::MAX_DURATION);
    let report = Acquisition::start(attempts.name(), attempts.kind_label(), wait, Instant::now());
    attempts.describe(report.span());
    async move {
        let once = attempts.deadline().once;
        let acquiring = std::pin::pin!(until_done(inner, attempts));
        let outcome = InSpan::new(report.span(), acquiring).await;
        report.finish(&outcome, once);
        outcome
    }
}

/// [`acquire`], within its span: the wait, then the give-up step if it
/// ended without what it waited for.
async fn until_done<A: Attempts>(
    inner: &Arc<Inner>,
    attempts: &mut A,
) -> Result<Option<Done<A::Value>>> {
    // Armed before the first attempt: a fair-lock waiter may join the queue
    // with its very first attempt.
    let mut leaving = attempts.give_up();
    // In a block: the outcome is not kept while giving up.
    {
        match waiter::run(inner, attempts).await {
            Ok(Some(done)) => {
                leaving.disarm();
                return Ok(Some(done));
            }
            // `leaving` goes on in the background: the server may be
            // unreachable for a while.
            Err(e) => return Err(e),
            Ok(None) => {}
        }
    }
    // Boxed: its Redis call would otherwise make every acquire future as
    // large as fred's command future (~5 KB).
    Box::pin(leaving.run()).await;
    Ok(None)
}

/// What a synchronizer waits for, and how its waiters are woken.
pub(crate) struct Wanted<'a> {
    /// The kind, as the `kind` of spans and metrics.
    pub kind: &'static str,
    pub name: &'a str,
    pub channel: &'a str,
    pub wake: Wake,
    /// How long it may wait (`None`: no time limit).
    pub wait: Option<Duration>,
    /// How many permits it takes, recorded on its span (a semaphore's).
    pub permits: Option<u32>,
}

/// A synchronizer's acquisition, on the one entry
/// ([`acquire`]): `attempt` is a closure
/// whose transient errors are tried again, woken by the channel `wanted`
/// names.
pub(crate) fn acquire_with<'a, T, F, Fut>(
    inner: &'a Arc<Inner>,
    wanted: Wanted<'a>,
    attempt: F,
) -> impl Future<Output = Result<Option<Done<T>>>> + Send + 'a
where
    T: Send,
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = Result<Outcome<T>>> + Send,
{
    struct Closure<'a, F> {
        attempt: F,
        wanted: Wanted<'a>,
        deadline: Deadline,
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
        fn channel(&self) -> Option<(Cow<'_, str>, Wake)> {
            Some((self.wanted.channel.into(), self.wanted.wake))
        }
        fn deadline(&self) -> Deadline {
            self.deadline
        }
        fn name(&self) -> &str {
            self.wanted.name
        }
        fn kind_label(&self) -> &'static str {
            self.wanted.kind
        }
        fn describe(&self, span: &tracing::Span) {
            if let Some(permits) = self.wanted.permits {
                span.record("permits", permits);
            }
        }
    }
    // Made here and moved into the future whole: it keeps one copy.
    let mut attempts = Closure {
        attempt,
        deadline: Deadline::after(Instant::now(), wanted.wait),
        wanted,
    };
    async move {
        let wait = attempts.wanted.wait;
        acquire(inner, &mut attempts, wait).await
    }
}
