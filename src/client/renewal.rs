//! The watchdog: the background task that renews every hold without an
//! explicit lease, in batches (docs/PROTOCOL.md §2.6). What it renews, and
//! what a renewal's reply does to each hold, is the registry's
//! ([`Holds`]).

use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::Error;
use crate::client::holds::Holds;
use crate::connection::redis::Redis;

/// The watchdog task: renew every watchdog hold every `lease / 3`, in
/// batches of `batch_size` (of one hash slot each when `by_slot`). A batch
/// whose renewal fails is tried again after `retry_delay` (at most a
/// period), and no renewal call is allowed to run past the time its holds
/// stop being certain: a hold is lost then, not one reply timeout later.
pub(crate) async fn run(
    holds: Arc<Holds>,
    redis: Redis,
    batch_size: usize,
    retry_delay: Duration,
    by_slot: bool,
) {
    let lease = holds.watchdog;
    let period = lease / 3;
    let retry = retry_delay.clamp(
        Duration::from_millis(1),
        period.max(Duration::from_millis(1)),
    );
    let lease_ms = Value::Integer(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
    let mut run = 0u64;
    let mut pause = period;
    loop {
        tokio::time::sleep(pause).await;
        run += 1;
        pause = period;
        for (renewal, in_run) in holds.begin_run(run, by_slot).into_values() {
            for batch in in_run.chunks(batch_size) {
                let Some(valid_until) = holds.batch_valid_until(batch) else {
                    continue;
                };
                let span = tracing::debug_span!(
                    "redisson_lock.renew",
                    holds = batch.len(),
                    outcome = tracing::field::Empty,
                    renewed = tracing::field::Empty,
                    lost = tracing::field::Empty,
                    error = tracing::field::Empty,
                );
                let sent_at = Instant::now();
                let call = redis.eval(|| renewal.call(batch, lease_ms.clone()));
                let outcome = match tokio::time::timeout_at(valid_until, call)
                    .instrument(span.clone())
                    .await
                {
                    Ok(reply) => reply.and_then(|reply| parse_renewed(reply, batch.len())),
                    Err(_) => Err(Error::Timeout(valid_until.duration_since(sent_at))),
                };
                if outcome.is_err() {
                    pause = retry;
                }
                let tally = span.in_scope(|| holds.apply(run, batch, &outcome, sent_at));
                span.record("renewed", tally.renewed);
                span.record("lost", tally.lost);
                match &outcome {
                    Err(e) => span
                        .record("outcome", "failed")
                        .record("error", tracing::field::display(e)),
                    Ok(_) if tally.lost > 0 => span.record("outcome", "lost"),
                    Ok(_) => span.record("outcome", "renewed"),
                };
            }
        }
        holds.finish_run(run);
    }
}

pub(crate) fn parse_renewed(reply: Value, expected: usize) -> Result<Vec<bool>, Error> {
    match reply {
        Value::Array(items) if items.len() == expected => Ok(items
            .into_iter()
            .map(|v| matches!(v, Value::Integer(1)))
            .collect()),
        other => Err(Error::Protocol(format!("renewal replied {other:?}"))),
    }
}
