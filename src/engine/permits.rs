//! Watchdog permits: permit-expirable semaphore permits taken without a
//! lease of their own, whose expiry the watchdog task moves to now +
//! `lock_watchdog_timeout` every third of it while their guards live, in
//! one call per semaphore (`lua/pes_renew.lua`, Redisson's
//! `updateLeaseTime` on the wire: docs/PROTOCOL.md §7.6). A permit the
//! renewal finds gone, or that is not renewed before its lease could have
//! run out, is lost, as a lock's hold is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use parking_lot::Mutex;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::Error;
use crate::base::lost::{until_lost, LossStatus, Lost, LostReason};
use crate::base::observed::Observed;
use crate::base::time::epoch_ms;
use crate::connection::redis::Redis;
use crate::connection::script::{millis, parse_flags, script, ScriptCall};
use crate::engine::registry::safe_until;

script!(
    PES_RENEW,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_renew.lua"
);

/// Where one watchdog permit stands.
#[derive(Clone, Copy, Debug)]
struct PermitStatus {
    /// Until when the permit is certain to be taken: the last confirmed
    /// renewal's (or the acquisition's) lease, less the drift margin.
    valid_until: Instant,
    /// Found gone by a renewal.
    gone: bool,
    /// No longer renewed: its guard gave it back or kept it. Never lost
    /// from then on.
    ended: bool,
}

impl LossStatus for PermitStatus {
    fn lost_at(&self, now: Instant) -> Option<LostReason> {
        if self.ended {
            None
        } else if self.gone {
            Some(LostReason::Gone)
        } else {
            (now >= self.valid_until).then_some(LostReason::NotRenewed)
        }
    }

    fn valid_until(&self) -> Instant {
        self.valid_until
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// One watchdog permit, shared by its guard and the registry.
#[derive(Debug)]
pub(crate) struct Renewed {
    /// The permit id, as its 16 bytes.
    id: Value,
    status: Observed<PermitStatus>,
}

impl Renewed {
    /// Why the permit is lost, if it is now.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.status.get().lost_at(Instant::now())
    }

    /// Until when the permit is certain to be taken.
    pub(crate) fn valid_until(&self) -> Instant {
        self.status.get().valid_until
    }

    /// Resolves once the permit is lost.
    pub(crate) fn lost(&self) -> Lost {
        Lost::new(until_lost(self.status.observe()))
    }
}

/// The watchdog permits of one semaphore.
struct Semaphore {
    /// KEYS of `lua/pes_renew.lua`: `N`, `{N}:timeout`, `redisson_sc:{N}`.
    keys: [String; 3],
    /// The publish command (ARGV 3).
    publish: Value,
    permits: Vec<Arc<Renewed>>,
}

/// Every watchdog permit of one client, by semaphore name.
pub(crate) struct Permits {
    /// The lease each renewal gives (`lock_watchdog_timeout`).
    lease: Duration,
    by_name: Mutex<HashMap<String, Semaphore>>,
}

impl Permits {
    pub(crate) fn new(lease: Duration) -> Permits {
        Permits {
            lease,
            by_name: Mutex::new(HashMap::new()),
        }
    }

    /// The lease a watchdog permit is taken with and renewed to.
    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// Renew the permit `id` of the semaphore with `keys` from now on; it
    /// was taken with [`lease`](Self::lease) by a command sent at `sent_at`.
    pub(crate) fn add(
        &self,
        keys: [&str; 3],
        publish: Value,
        id: Value,
        sent_at: Instant,
    ) -> Arc<Renewed> {
        let renewed = Arc::new(Renewed {
            id,
            status: Observed::new(PermitStatus {
                valid_until: safe_until(sent_at, self.lease),
                gone: false,
                ended: false,
            }),
        });
        let mut by_name = self.by_name.lock();
        by_name
            .entry(keys[0].to_owned())
            .or_insert_with(|| Semaphore {
                keys: keys.map(str::to_owned),
                publish,
                permits: Vec::new(),
            })
            .permits
            .push(renewed.clone());
        renewed
    }

    /// Stop renewing `renewed` (its guard gives it back or keeps it).
    pub(crate) fn remove(&self, name: &str, renewed: &Arc<Renewed>) {
        renewed.status.modify(|s| s.ended = true);
        let mut by_name = self.by_name.lock();
        if let Some(semaphore) = by_name.get_mut(name) {
            semaphore.permits.retain(|p| !Arc::ptr_eq(p, renewed));
            if semaphore.permits.is_empty() {
                by_name.remove(name);
            }
        }
    }

    /// One renewal run: every watchdog permit, in batches of `batch_size`
    /// per semaphore. No call runs past the time its permits stop being
    /// certain. Whether any batch failed.
    pub(crate) async fn renew(&self, redis: &Redis, batch_size: usize) -> bool {
        let due: Vec<([String; 3], Value, Vec<Arc<Renewed>>)> = self
            .by_name
            .lock()
            .values()
            .map(|s| {
                let live = s
                    .permits
                    .iter()
                    .filter(|p| {
                        let s = p.status.get();
                        !s.gone && !s.ended
                    })
                    .cloned()
                    .collect();
                (s.keys.clone(), s.publish.clone(), live)
            })
            .collect();
        let mut failed = false;
        for (keys, publish, permits) in due {
            for batch in permits.chunks(batch_size.max(1)) {
                failed |= !self.renew_batch(redis, &keys, &publish, batch).await;
            }
        }
        failed
    }

    async fn renew_batch(
        &self,
        redis: &Redis,
        keys: &[String; 3],
        publish: &Value,
        batch: &[Arc<Renewed>],
    ) -> bool {
        let Some(valid_until) = batch.iter().map(|p| p.valid_until()).min() else {
            return true;
        };
        let span = tracing::debug_span!(
            "redisson_lock.renew_permits",
            semaphore = keys[0].as_str(),
            permits = batch.len(),
            outcome = tracing::field::Empty,
        );
        let sent_at = Instant::now();
        let call = || {
            let now = epoch_ms();
            let mut args = Vec::with_capacity(3 + batch.len());
            args.push(Value::Integer(now.saturating_add(millis(self.lease))));
            args.push(Value::Integer(now));
            args.push(publish.clone());
            args.extend(batch.iter().map(|p| p.id.clone()));
            let keys = [keys[0].as_str(), keys[1].as_str(), keys[2].as_str()];
            ScriptCall::new(&PES_RENEW, &keys, args)
        };
        let reply = match tokio::time::timeout_at(valid_until, redis.eval(call))
            .instrument(span.clone())
            .await
        {
            Ok(reply) => reply.and_then(|r| parse_flags(r, batch.len(), "permit renewal")),
            Err(_) => Err(Error::Timeout(valid_until.duration_since(sent_at))),
        };
        match reply {
            Ok(flags) => {
                let renewed_until = safe_until(sent_at, self.lease);
                for (permit, taken) in batch.iter().zip(flags) {
                    permit.status.modify(|s| {
                        if taken {
                            s.valid_until = s.valid_until.max(renewed_until);
                        } else {
                            s.gone = true;
                        }
                    });
                }
                span.record("outcome", "renewed");
                true
            }
            Err(e) => {
                span.record("outcome", "failed");
                tracing::debug!(semaphore = keys[0].as_str(), error = %e, "permit renewal failed");
                false
            }
        }
    }
}
