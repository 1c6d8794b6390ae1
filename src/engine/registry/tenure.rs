//! A tenure: one owner field's life in Redis as the registry knows it, and
//! what its guards observe of it ([`HoldStatus`]) (docs/PROTOCOL.md §2.9).

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::observed::{Observed, Observer};

use crate::base::lost::{LossStatus, LostReason};
use crate::base::telemetry;
use crate::engine::registry::lease::{Lease, Renewal};

/// What a guard can observe about its hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HoldStatus {
    /// Why the hold was found lost, once it was.
    pub lost: Option<LostReason>,
    /// While the watchdog does not renew the hold: when its key expires at
    /// the earliest (the send time of the last confirmed command that set
    /// its TTL, plus that TTL).
    pub expires: Option<Instant>,
    /// Until when the hold is certain: [`safe_until`] of that command.
    /// Redis cannot have expired the key before then; after it, the hold
    /// counts as lost whatever the network does.
    pub valid_until: Instant,
}

impl LossStatus for HoldStatus {
    /// Why the hold is lost at `now`, if it is: found lost, or past the
    /// time it was certain.
    fn lost_at(&self, now: Instant) -> Option<LostReason> {
        self.lost.or_else(|| {
            (now >= self.valid_until).then_some(if self.expires.is_some() {
                LostReason::LeaseEnded
            } else {
                LostReason::NotRenewed
            })
        })
    }

    fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Never: a hold's status ends with its tenure (its owner's side).
    fn ended(&self) -> bool {
        false
    }
}

/// The end of the time a TTL of `lease`, set by a command sent at
/// `sent_at`, certainly covers: Redis set it no earlier than the send time,
/// so it expires no earlier than `sent_at + lease`; less a margin for clock
/// drift between this host and the server (Redlock's: 1 % of the lease + 2 ms).
pub(crate) fn safe_until(sent_at: Instant, lease: Duration) -> Instant {
    let drift = lease / 100 + Duration::from_millis(2);
    later(sent_at, lease.saturating_sub(drift))
}

/// `at + d`, saturating far in the future.
pub(super) fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .unwrap_or_else(|| at + Duration::from_secs(86_400 * 365 * 100))
}

/// A live hold: one guard's.
pub(super) struct Live {
    pub(super) id: u64,
    pub(super) lease: Lease,
    /// Renewed by the watchdog: taken without a lease, and its status was
    /// not lost since.
    pub(super) renews: bool,
    /// What its own command (the acquisition, or its last `extend`) gave
    /// it: the earliest its TTL can end, and [`safe_until`] of that.
    pub(super) ends: Instant,
    pub(super) certain: Instant,
}

/// One field's life in Redis, as far as this client knows it.
pub(super) struct Tenure {
    pub(super) id: u64,
    /// The lock's kind, for metrics.
    pub(super) kind: &'static str,
    pub(super) renewal: Renewal,
    /// Holds of the tenure that no guard has any more: kept in Redis by
    /// `forget()`, for an unlock without a guard to take first.
    pub(super) forgotten: u32,
    /// Found absent while a forced unlock of its name through this client
    /// was under way: lost when the last of those ends, as forced open if
    /// that unlock removed it, else as gone.
    pub(super) gone: bool,
    pub(super) live: Vec<Live>,
    /// The earliest the key can expire: the largest `sent_at + ttl` of a
    /// confirmed command that set its TTL.
    pub(super) expiry: Instant,
    /// [`safe_until`] of that command: the status's `valid_until`.
    pub(super) certain: Instant,
    /// What the guards of the current status observe; replaced (a new
    /// status) when a hold is taken after the status was lost.
    pub(super) status: Observed<HoldStatus>,
    /// Once its watch started: dropped with the tenure, which ends the
    /// watch ([`crate::engine::watch`]).
    pub(super) watched: Option<watch::Sender<()>>,
}

impl Tenure {
    pub(super) fn renewed(&self) -> bool {
        self.live.iter().any(|l| l.renews)
    }

    pub(super) fn current(&self) -> HoldStatus {
        HoldStatus {
            lost: self.status.get().lost,
            expires: (!self.renewed()).then_some(self.expiry),
            valid_until: self.certain,
        }
    }

    /// Publish the status after a change of leases or certainty. A lost
    /// status keeps its validity, whether it was found lost or its
    /// certainty passed: it is never revived (a guard may have been told).
    /// Not when no guard is left to observe it.
    pub(super) fn publish(&self) {
        if self.live.is_empty() {
            return;
        }
        let (now, at) = (self.current(), Instant::now());
        self.status.modify_if(|s| {
            if s.lost_at(at).is_some() {
                return false;
            }
            let changed = s.expires != now.expires || s.valid_until != now.valid_until;
            *s = now;
            changed
        });
    }

    /// A command sent at `sent_at` that Redis confirmed set the key's TTL
    /// to at least `ttl`.
    pub(super) fn confirmed(&mut self, sent_at: Instant, ttl: Duration) {
        self.expiry = self.expiry.max(later(sent_at, ttl));
        self.certain = self.certain.max(safe_until(sent_at, ttl));
    }

    /// Whether the current status is lost at `now` (found lost, or past
    /// its certainty).
    pub(super) fn lost_at(&self, now: Instant) -> Option<LostReason> {
        self.status.get().lost_at(now)
    }

    /// Mark the current status lost for `reason` (its guards are told); no
    /// live hold is renewed any more. Whether it was not lost before.
    pub(super) fn lose(&mut self, reason: LostReason) -> bool {
        for live in &mut self.live {
            live.renews = false;
        }
        // A status already past its certainty was lost for that reason (its
        // guards may have been told so).
        let reason = self.lost_at(Instant::now()).unwrap_or(reason);
        let newly = self.status.get().lost.is_none();
        if newly {
            self.status.modify(|s| s.lost = Some(reason));
            telemetry::lost(self.kind, reason);
        }
        newly
    }
}

/// Why `status` says lost right now, if it does.
pub(crate) fn lost_reason(status: &Observer<HoldStatus>) -> Option<LostReason> {
    status.get().lost_at(Instant::now())
}
