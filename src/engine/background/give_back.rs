//! Giving permits back in the background until it lands (docs/PROTOCOL.md
//! §7.1, §7.2, §9.2): the release of a dropped permit guard and the undo of
//! an acquisition whose reply was lost keep trying until Redis answers, the
//! give-back becomes unnecessary (a permit's lease ran out), or the client
//! shuts down; not for one retry budget only. A semaphore's permits have no
//! TTL: a give-back that stopped early would leave them taken for good.
//!
//! Memory stays bounded: a give-back is one task and one record
//! ([`Pending`]), and sends one call at a time, which waits for its own
//! reply or failure ([`Late::Await`]) rather than time out and stay queued
//! in fred behind the next try (only a [`Try::Bounded`] call times out, once,
//! and fred then drops it unwritten). Between failed tries it backs off from
//! `retry_delay` to a few seconds, with jitter, and tries again at once when
//! the connection is re-established.
//!
//! [`Pending`]: crate::engine::background::pending::Pending
//! [`Late::Await`]: crate::connection::redis::Late::Await

use std::future::Future;

use tokio::time::Instant;

use crate::base::error::{Error, Result};
use crate::connection::redis::Redis;
use crate::engine::background::pending::PendingReleases;

/// One try of a give-back.
pub(crate) enum Try<F> {
    /// May be dropped at any point (its call may still be written later,
    /// which is harmless).
    Cancellable(F),
    /// Runs to its end, which its own time limit bounds
    /// ([`Late::SkipAfter`](crate::connection::redis::Late::SkipAfter)):
    /// dropped early, its call could still be written after the moment it
    /// must not run past.
    Bounded(F),
}

/// How a give-back ended.
pub(crate) enum Ended<T> {
    /// Redis answered this.
    Landed(T),
    /// Its `stop_at` came first: nothing is left to give back.
    Unnecessary,
    /// The client shut down first.
    Abandoned,
    /// Redis answered with an error that retrying cannot change.
    Failed(Error),
}

/// Try `attempt` on `redis` until Redis answers it, `stop_at` passes, or
/// the client shuts down (a shutdown abandons the give-backs still pending
/// in `releases` once it has waited for them:
/// [`PendingReleases::abandon_all`]).
/// `attempt` is told when the first try that may have reached Redis
/// without an answer was handed over (`None` while every failed try is known
/// not to have run; `doubt` if an earlier call, e.g. an awaited release that
/// failed, may have), so that it can send what stays exact after that.
/// Each retry is a debug event naming `name`, the semaphore.
///
/// Cancel safety: dropped at any point, it leaves no task or subscription
/// behind; a [`Try::Cancellable`] call may still be written once fred can.
pub(crate) async fn until_landed<T, F, Fut>(
    redis: &Redis,
    releases: &PendingReleases,
    name: &str,
    stop_at: Option<Instant>,
    mut doubt: Option<Instant>,
    mut attempt: F,
) -> Ended<T>
where
    F: FnMut(Option<Instant>) -> Try<Fut>,
    Fut: Future<Output = Result<T>>,
{
    let mut backoff = redis.persistent_backoff();
    let mut tries = 0u32;
    let unnecessary = async {
        match stop_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    // Polled again only until it completes: then this returns.
    tokio::pin!(unnecessary);
    loop {
        if releases.is_abandoned() {
            return Ended::Abandoned;
        }
        let handed = Instant::now();
        let outcome = match attempt(doubt) {
            Try::Bounded(call) => call.await,
            // The call before `unnecessary`: its first poll hands it to
            // fred, so even a give-back that starts after `stop_at` is sent
            // once (and lands whenever fred can write it).
            Try::Cancellable(call) => tokio::select! {
                biased;
                () = releases.abandoning() => return Ended::Abandoned,
                outcome = call => outcome,
                () = &mut unnecessary => return Ended::Unnecessary,
            },
        };
        let error = match outcome {
            Ok(answer) => return Ended::Landed(answer),
            Err(Error::Closed) => return Ended::Abandoned,
            Err(e) if e.is_transient() => e,
            Err(e) => return Ended::Failed(e),
        };
        // A loading or failing-over server ran nothing; after a timeout or
        // a lost connection the call may have run.
        if !matches!(error, Error::Unavailable(_)) {
            doubt.get_or_insert(handed);
        }
        tries = tries.saturating_add(1);
        tracing::debug!(lock = name, error = %error, attempt = tries, "retrying Redis command");
        tokio::select! {
            biased;
            () = releases.abandoning() => return Ended::Abandoned,
            () = &mut unnecessary => return Ended::Unnecessary,
            () = redis.pause(&mut backoff) => {}
        }
    }
}
