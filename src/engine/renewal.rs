//! The watchdog: the background task that renews every hold without an
//! explicit lease, in batches (docs/PROTOCOL.md §2.6), and every watchdog
//! permit of a permit-expirable semaphore ([`Permits`], §7.6), and, with
//! [`Config::hold_check_interval`](crate::Config::hold_check_interval),
//! checks that every held lock is still held (§2.9). What it renews or
//! checks, and what a reply does to each hold, is the registry's
//! ([`Holds`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::types::{Key, Value};
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::Error;
use crate::connection::redis::Redis;
use crate::connection::script::{parse_flags, script, ScriptCall};
use crate::engine::permits::Permits;
use crate::engine::registry::{HoldKey, Holds, Renewal};

// The scripts this module runs (`lua/`, embedded at build time).
script!(HELD, "held.lua");

/// What the watchdog task runs with.
pub(crate) struct Watchdog {
    pub holds: Arc<Holds>,
    pub permits: Arc<Permits>,
    pub redis: Redis,
    pub batch_size: usize,
    pub retry_delay: Duration,
    pub by_slot: bool,
    /// How often every hold is checked (`None`: never).
    pub check_every: Option<Duration>,
}

/// The watchdog task: renew every watchdog hold every `lease / 3`, in
/// batches of `batch_size` (of one hash slot each when `by_slot`), and check
/// every hold every `check_every`. A batch whose renewal fails is tried
/// again after `retry_delay` (at most a period), and no renewal call is
/// allowed to run past the time its holds stop being certain: a hold is
/// lost then, not one reply timeout later.
pub(crate) async fn run(dog: Watchdog) {
    let period = dog.holds.watchdog / 3;
    let retry = dog.retry_delay.clamp(
        Duration::from_millis(1),
        period.max(Duration::from_millis(1)),
    );
    let lease_ms =
        Value::Integer(i64::try_from(dog.holds.watchdog.as_millis()).unwrap_or(i64::MAX));
    let start = Instant::now();
    let mut renew_at = start + period;
    let mut check_at = dog.check_every.map(|every| start + every);
    loop {
        let next = check_at.map_or(renew_at, |c| c.min(renew_at));
        tokio::time::sleep_until(next).await;
        let now = Instant::now();
        if check_at.is_some_and(|c| c <= now) {
            check(&dog).await;
            check_at = dog.check_every.map(|every| Instant::now() + every);
        }
        if renew_at <= now {
            dog.holds.sweep();
            let failed = renew(&dog, &lease_ms).await;
            let failed = dog.permits.renew(&dog.redis, dog.batch_size).await || failed;
            renew_at = Instant::now() + if failed { retry } else { period };
        }
    }
}

/// One renewal run over every due hold; whether any batch failed.
async fn renew(dog: &Watchdog, lease_ms: &Value) -> bool {
    let mut failed = false;
    for (renewal, due) in dog.holds.due(dog.by_slot).into_values() {
        for batch in due.chunks(dog.batch_size) {
            let Some(valid_until) = dog.holds.batch_valid_until(batch) else {
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
            let call = dog.redis.eval(|| renewal.call(batch, lease_ms.clone()));
            let outcome = match tokio::time::timeout_at(valid_until, call)
                .instrument(span.clone())
                .await
            {
                Ok(reply) => reply.and_then(|reply| parse_flags(reply, batch.len(), "renewal")),
                Err(_) => Err(Error::Timeout(valid_until.duration_since(sent_at))),
            };
            failed |= outcome.is_err();
            let tally = span.in_scope(|| dog.holds.apply(batch, &outcome, sent_at));
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
    failed
}

/// One hold check over every held lock: `lua/held.lua` per batch (of one
/// hash slot each on a cluster); a hold found absent is lost. A failed
/// check changes nothing (the certainty deadline still bounds the hold).
async fn check(dog: &Watchdog) {
    let mut by_slot: HashMap<u16, Vec<HoldKey>> = HashMap::new();
    for ((_, slot), (_, holds)) in dog.holds.held(dog.by_slot) {
        by_slot.entry(slot).or_default().extend(holds);
    }
    for holds in by_slot.into_values() {
        for batch in holds.chunks(dog.batch_size) {
            let reply = dog.redis.eval(|| held_call(batch)).await;
            match reply.and_then(|reply| parse_flags(reply, batch.len(), "hold check")) {
                Ok(held) => {
                    for (hold, held) in batch.iter().zip(held) {
                        if !held {
                            dog.holds.found_gone(
                                &hold.name,
                                &hold.field,
                                hold.tenure,
                                "hold check",
                            );
                        }
                    }
                }
                Err(e) => tracing::debug!(holds = batch.len(), error = %e, "hold check failed"),
            }
        }
    }
}

/// The call of `lua/held.lua` for `batch`: KEYS `N…`, ARGV the fields.
pub(crate) fn held_call(batch: &[HoldKey]) -> ScriptCall {
    ScriptCall::with_keys(
        &HELD,
        batch.iter().map(|h| Key::from(h.name.as_str())).collect(),
        batch.iter().map(|h| Value::from(&*h.field)).collect(),
    )
}

/// The renewal script of `renewal` for one hold, to at least `lease`.
pub(crate) fn one(renewal: Renewal, hold: &HoldKey, lease: Duration) -> ScriptCall {
    renewal.call(
        std::slice::from_ref(hold),
        Value::Integer(crate::connection::script::millis(lease)),
    )
}
