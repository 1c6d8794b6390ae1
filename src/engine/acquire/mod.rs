//! The one acquisition core, for every lock kind, the multi-lock's members
//! and the synchronizers alike (docs/PROTOCOL.md §2.8, §7.4, §9.3), with one
//! way in, [`acquire`]: it owns the span, the wait loop that drives a
//! waiter's attempts ([`waiter`]) and the give-up step an acquisition that
//! ends without what it waited for runs ([`give_up`]); each attempt's
//! outcome is never lost, and is undone when nobody will use it or it is
//! unknown ([`attempt`]). A kind supplies only its [`Attempts`]: the call of
//! one attempt and how its reply reads, what to give back, its give-up
//! step, its channel and how that wakes its waiters, its deadline and its
//! label (a lock kind through its `Protocol`, a synchronizer through
//! [`waiter::acquire_with`]).
//!
//! Cancellation lives here, in two shapes: an attempt finished in the
//! background if its caller goes away ([`attempt::unlosable`]), and a
//! give-up step run in the background if it was not done
//! ([`give_up::GiveUp`]); both unit-tested without a server. (A guard's
//! give-back of what it holds is [`Armed`](crate::engine::armed::Armed).)

pub(crate) mod attempt;
pub(crate) mod give_up;
pub(crate) mod waiter;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::base::error::Result;
use crate::base::telemetry::{Acquisition, InSpan};
use crate::engine::shared::Inner;
pub(crate) use waiter::Attempts;
use waiter::Done;

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
    let report = Acquisition::start(attempts.name(), attempts.label(), wait, Instant::now());
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
