//! Giving a [`Semaphore`]'s permits back: one release by the permit's
//! latch, awaited or in the background until it lands, and the undo of an
//! acquisition whose reply was lost (docs/PROTOCOL.md §7.1).

use fred::types::Value;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::{Error, Result};
use crate::base::telemetry::GaveUp;
use crate::connection::redis::Late;
use crate::connection::script::{millis, script, ScriptCall};
use crate::engine::background::give_back::{until_landed, Ended, Try};
use crate::engine::background::pending::Pending;
use crate::synchronizers::semaphore::{permit_latch_ttl, Mode, Semaphore, KIND};

// The script this module runs (`lua/`, embedded at build time).
script!(
    SEMAPHORE_RELEASE,
    "args.lua",
    "count.lua",
    "semaphore_release.lua"
);

impl Semaphore {
    /// The span of one release of `permits` (`undo`: of an acquisition;
    /// `background`: nobody awaits it).
    fn release_span(&self, permits: u32, undo: bool, background: bool) -> tracing::Span {
        tracing::debug_span!(
            "redisson_lock.release",
            lock = self.name(),
            kind = KIND,
            permits,
            undo,
            background,
            outcome = tracing::field::Empty,
            error = tracing::field::Empty,
        )
    }

    /// One run of the release script for `latch` in `mode`, sent as `late`
    /// says; once Redis has answered, the latch is queued for deletion.
    /// `Some(count)`: given back; `None`: nothing was done.
    async fn release_once(
        &self,
        permits: u32,
        latch: &str,
        mode: Mode,
        late: Late,
    ) -> Result<Option<i64>> {
        let inner = self.inner();
        let ttl = millis(permit_latch_ttl(inner));
        let call = || {
            ScriptCall::new(
                &SEMAPHORE_RELEASE,
                &[&self.shared.handle.name, &self.shared.handle.channel, latch],
                vec![
                    Value::Integer(permits.into()),
                    inner.env.publish(),
                    Value::Integer(ttl),
                    Value::from(match mode {
                        Mode::Release => "0",
                        Mode::Undo => "1",
                    }),
                ],
            )
        };
        let reply = inner.redis.eval_as(call, late).await?;
        inner.delete_latch_later(latch.to_owned());
        match reply {
            Value::Null => Ok(None),
            Value::Integer(count) => Ok(Some(count)),
            other => Err(Error::Protocol(format!(
                "semaphore release replied {other:?}"
            ))),
        }
    }

    /// Give `permits` back with `latch`, someone awaiting the answer:
    /// retried `retry_attempts` times with the same latch, so a retry never
    /// gives back twice. The first try is written whenever fred can
    /// ([`Late::Deliver`]): no earlier try can have given back. A retry is
    /// never written after the client's `timeout` ([`Late::Skip`]), so that
    /// it runs, if at all, while the latch of an earlier try that ran (and
    /// whose reply was lost) still says "given back": every retry is handed
    /// over within one retry budget of the first, and the latch lives two.
    pub(super) async fn release_awaited(&self, permits: u32, latch: &str) -> Result<Option<i64>> {
        let span = self.release_span(permits, false, false);
        let mut first = true;
        let released = self
            .inner()
            .redis
            .retrying(self.name(), || {
                let late = if std::mem::take(&mut first) {
                    Late::Deliver
                } else {
                    Late::Skip
                };
                self.release_once(permits, latch, Mode::Release, late)
            })
            .instrument(span.clone())
            .await;
        match &released {
            Ok(Some(_)) => span.record("outcome", "released"),
            Ok(None) => span.record("outcome", "already_released"),
            Err(e) => span
                .record("outcome", "error")
                .record("error", tracing::field::display(e)),
        };
        released
    }

    /// The background give-back of `permits` with `latch`, in `mode`
    /// ([`give_back`](Self::give_back)), pending from now on.
    pub(super) fn give_back_later(
        &self,
        permits: u32,
        latch: String,
        mode: Mode,
        exact_until: Option<Instant>,
        doubt: Option<Instant>,
    ) -> BoxFuture<'static, ()> {
        let pending = self
            .inner()
            .background
            .releases
            .enter(KIND, self.name(), permits);
        let semaphore = self.clone();
        async move {
            semaphore
                .give_back(pending, permits, &latch, mode, exact_until, doubt)
                .await;
        }
        .boxed()
    }

    /// Give `permits` back in the background with `latch`, in `mode`,
    /// trying until Redis answers or the client shuts down
    /// ([`until_landed`]), and report how it ended. An undo's "nothing to
    /// give back" is exact if Redis answered it before `exact_until`, while
    /// the acquisition's latch would still have said "taken". `doubt`: when
    /// an earlier call that may have run unanswered was handed over (an
    /// awaited release that failed).
    ///
    /// A release retried after a try that may have run unanswered stays in
    /// release mode only while that try's latch ("given back") must still
    /// live: until its TTL from when that try was handed over, less
    /// `timeout` of slack for the way from fred to the server; each such
    /// retry is never written after then ([`Late::SkipAfter`]). Past then
    /// it is sent in undo mode, which gives back only what the acquisition's
    /// latch still says is taken: never twice, but if that latch has expired
    /// too, nothing, and the permits may stay taken (reported).
    async fn give_back(
        &self,
        pending: Pending,
        permits: u32,
        latch: &str,
        mode: Mode,
        exact_until: Option<Instant>,
        doubt: Option<Instant>,
    ) {
        let span = self.release_span(permits, matches!(mode, Mode::Undo), true);
        let inner = self.inner();
        let release_for = permit_latch_ttl(inner).saturating_sub(inner.config.timeout);
        let (redis, releases) = (&inner.redis, &inner.background.releases);
        let ended = until_landed(redis, releases, self.name(), None, doubt, |doubt| {
            let now = Instant::now();
            let (sent, late) = match (mode, doubt.map(|d| d.checked_add(release_for))) {
                (Mode::Release, Some(Some(until))) if now < until => {
                    (Mode::Release, Late::SkipAfter(until - now))
                }
                (Mode::Release, Some(_)) => (Mode::Undo, Late::Await),
                (mode, _) => (mode, Late::Await),
            };
            let call = async move {
                let reply = self.release_once(permits, latch, sent, late).await?;
                Ok((reply, sent, Instant::now()))
            };
            match late {
                Late::SkipAfter(_) => Try::Bounded(call),
                _ => Try::Cancellable(call),
            }
        })
        .instrument(span.clone())
        .await;
        match ended {
            Ended::Landed((Some(_), _, _)) => {
                span.record("outcome", "released");
                pending.landed();
            }
            // The latch said these permits were given back already.
            Ended::Landed((None, Mode::Release, _)) => {
                span.record("outcome", "already_released");
                pending.landed();
            }
            // The acquisition took nothing.
            Ended::Landed((None, Mode::Undo, answered))
                if matches!(mode, Mode::Undo) && exact_until.is_some_and(|t| answered < t) =>
            {
                span.record("outcome", "already_released");
                pending.landed();
            }
            Ended::Landed((None, Mode::Undo, _)) => {
                span.record("outcome", "latch_expired");
                match mode {
                    Mode::Undo => tracing::warn!(
                        lock = self.name(),
                        permits,
                        "permits may stay taken: the undo of an acquisition whose reply was lost \
                         reached Redis only after the acquisition's permit latch could have \
                         expired, so it gave back nothing (right only if the acquisition took none)"
                    ),
                    Mode::Release => tracing::warn!(
                        lock = self.name(),
                        permits,
                        "permits may stay taken: a dropped permit's release reached Redis only \
                         after the permit latch of an earlier, unanswered try could have expired, \
                         so it gave back nothing (right only if that try did)"
                    ),
                }
                pending.gave_up(GaveUp::LatchExpired);
            }
            Ended::Unnecessary => pending.landed(),
            Ended::Abandoned => {
                span.record("outcome", "abandoned");
                pending.gave_up(GaveUp::Shutdown);
            }
            Ended::Failed(e) => {
                span.record("outcome", "error")
                    .record("error", tracing::field::display(&e));
                tracing::warn!(lock = self.name(), error = %e, permits, "giving permits back failed");
                pending.gave_up(GaveUp::Error);
            }
        }
    }
}
