//! The client's registry of its holds (docs/PROTOCOL.md §2.6).
//!
//! Every successful acquisition is recorded as a hold of `(name, owner)` with
//! a count; every unlock attempt takes one away. A hold's status is published
//! on a `watch` channel so guards can learn the lock was lost: renewal found it
//! gone, renewal could not reach Redis before the lease ran out, a forced
//! unlock, or (for explicit leases) the lease deadline passed. Holds without
//! an explicit lease are renewed by the watchdog task (`renewal`), which asks
//! this registry what to renew and tells it what each renewal found.

use std::collections::HashMap;
use std::time::Duration;

use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::error::Error;
use crate::base::telemetry::{self, LostReason};
use crate::connection::script::Script;
use crate::connection::script::ScriptCall;

/// How a hold's TTL is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// `lock_watchdog_timeout`, renewed by the watchdog.
    Watchdog,
    /// A fixed lease chosen by the caller; the lock expires after it.
    Fixed(Duration),
}

impl Lease {
    /// The TTL this lease sets: its own, or the watchdog timeout.
    pub(crate) fn duration(self, watchdog: Duration) -> Duration {
        match self {
            Lease::Fixed(d) => d,
            Lease::Watchdog => watchdog,
        }
    }
}

/// How the watchdog renews one kind of hold, handed to it by the lock
/// kind: a batch script whose KEYS and ARGV (after the lease in `ARGV[1]`)
/// are every hold's parts, one after the other. The watchdog knows no key
/// layout; it groups holds by script and appends their parts.
#[derive(Clone, Copy)]
pub(crate) struct Renewal {
    pub script: &'static Script,
    /// Append one hold's keys and arguments, for the lock `name` held by
    /// the owner `field`, to a batch call.
    pub append: fn(name: &str, field: &str, keys: &mut Vec<Key>, args: &mut Vec<Value>),
}

impl Renewal {
    /// Which group of a run this renewal's holds go to.
    fn group(&self) -> usize {
        std::ptr::from_ref(self.script) as usize
    }

    /// The script call renewing `batch` (all of this renewal) to `lease_ms`.
    pub(crate) fn call(&self, batch: &[HoldKey], lease_ms: Value) -> ScriptCall {
        let mut keys = Vec::with_capacity(batch.len() * 2);
        let mut args = Vec::with_capacity(batch.len() * 2 + 1);
        args.push(lease_ms);
        for (name, field) in batch {
            (self.append)(name, field, &mut keys, &mut args);
        }
        ScriptCall {
            script: self.script,
            keys,
            args,
        }
    }
}

/// What a guard can observe about its hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Status {
    /// Why the hold was found lost, once it was.
    pub lost: Option<LostReason>,
    /// For fixed leases: when the lock expires unless re-entered, measured
    /// from when the command that set its TTL was sent.
    pub expires: Option<Instant>,
    /// Until when the hold is certain: the send time of the last confirmed
    /// acquisition or renewal, plus its lease, less a drift margin
    /// ([`safe_until`]). Redis cannot have expired the lock before then;
    /// after it, the hold counts as lost whatever the network does.
    pub valid_until: Instant,
}

impl Status {
    fn new(sent_at: Instant, lease: Lease, watchdog: Duration) -> Status {
        Status {
            lost: None,
            expires: match lease {
                Lease::Fixed(d) => Some(later(sent_at, d)),
                Lease::Watchdog => None,
            },
            valid_until: safe_until(sent_at, lease.duration(watchdog)),
        }
    }

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

    /// Lost, or past the time the hold was certain.
    fn is_lost_at(&self, now: Instant) -> bool {
        self.lost_at(now).is_some()
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
fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .unwrap_or_else(|| at + Duration::from_secs(86_400 * 365 * 100))
}

struct Hold {
    count: u32,
    /// The lock's kind, for metrics.
    kind: &'static str,
    lease: Lease,
    renewal: Renewal,
    status: watch::Sender<Status>,
    /// The renewal run that has this hold in flight, if any.
    in_run: Option<u64>,
}

/// `(name, field)`: the lock and the owner field that holds it.
type HoldKey = (String, String);

/// Holds by lock name, then by owner field (usually one per name). Lookups
/// borrow the caller's strings: no allocation on the lock/unlock path.
type HoldMap = HashMap<String, Vec<(String, Hold)>, FxBuild>;

/// A fast hash for the registry's names (FxHash's multiply-rotate, as in
/// `rustc-hash`): every lock and unlock hashes its name twice, and SipHash
/// took more than the rest of the bookkeeping. Not resistant to chosen
/// collisions, which needs many names held at once by this one process; a
/// collision costs a longer probe, not correctness.
#[derive(Clone, Copy, Default)]
struct FxBuild;

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;

    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

struct FxHasher(u64);

impl FxHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    fn add(&mut self, word: u64) {
        self.0 = self.0.wrapping_add(word).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(word);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the high bits best mixed; hashbrown takes
        // the bucket from the low ones.
        self.0.rotate_left(26)
    }
}

/// The registry of one client.
pub(crate) struct Holds {
    map: Mutex<HoldMap>,
    finished_run: watch::Sender<u64>,
    /// `lock_watchdog_timeout`: the lease of watchdog holds.
    pub(super) watchdog: Duration,
}

/// What an unlock needs to know from the registry.
pub(crate) struct Released {
    /// The TTL to keep if the count stays above zero (Redisson's
    /// `internalLockLeaseTime`): the hold's lease, else the watchdog timeout.
    pub lease: Option<Duration>,
    /// A renewal run that must finish before the unlock is sent.
    pub wait_for_run: Option<u64>,
}

impl Released {
    /// For a hold the registry does not know.
    const NOTHING: Released = Released {
        lease: None,
        wait_for_run: None,
    };
}

fn hold_mut<'a>(map: &'a mut HoldMap, name: &str, field: &str) -> Option<&'a mut Hold> {
    map.get_mut(name)?
        .iter_mut()
        .find(|(f, _)| f == field)
        .map(|(_, hold)| hold)
}

impl Holds {
    /// An empty registry for holds renewed to `watchdog`.
    pub(crate) fn new(watchdog: Duration) -> Holds {
        Holds {
            map: Mutex::default(),
            finished_run: watch::Sender::new(0),
            watchdog,
        }
    }

    /// Record an acquisition made at `sent_at` (when its command was sent).
    pub(crate) fn acquired(
        &self,
        name: &str,
        field: &str,
        kind: &'static str,
        lease: Lease,
        renewal: Renewal,
        sent_at: Instant,
    ) -> watch::Receiver<Status> {
        let status = Status::new(sent_at, lease, self.watchdog);
        let new_hold = || Hold {
            count: 1,
            kind,
            lease,
            renewal,
            status: watch::Sender::new(status),
            in_run: None,
        };
        let mut map = self.map.lock();
        let Some(holds) = map.get_mut(name) else {
            telemetry::held(kind);
            let hold = new_hold();
            let receiver = hold.status.subscribe();
            map.insert(name.to_owned(), vec![(field.to_owned(), hold)]);
            return receiver;
        };
        match holds.iter_mut().find(|(f, _)| f == field) {
            Some((_, hold)) => {
                hold.count += 1;
                telemetry::held(hold.kind);
                hold.lease = lease;
                hold.status.send_replace(status);
                hold.status.subscribe()
            }
            None => {
                // A new channel starts with `status`: nothing to send.
                telemetry::held(kind);
                let hold = new_hold();
                let receiver = hold.status.subscribe();
                holds.push((field.to_owned(), hold));
                receiver
            }
        }
    }

    /// Take one hold of `(name, field)` away, stopping its renewal at zero.
    pub(crate) fn released(&self, name: &str, field: &str) -> Released {
        let mut map = self.map.lock();
        let Some(holds) = map.get_mut(name) else {
            return Released::NOTHING;
        };
        let Some(index) = holds.iter().position(|(f, _)| f == field) else {
            return Released::NOTHING;
        };
        let hold = &mut holds[index].1;
        if hold.count > 0 {
            telemetry::unheld(hold.kind);
        }
        hold.count = hold.count.saturating_sub(1);
        let released = Released {
            lease: match hold.lease {
                Lease::Fixed(d) => Some(d),
                Lease::Watchdog => None,
            },
            wait_for_run: hold.in_run,
        };
        if hold.count > 0 {
            if let Lease::Fixed(d) = hold.lease {
                // The unlock script resets the TTL to the lease; it is sent
                // after now, so now + lease is a safe estimate.
                let now = Instant::now();
                hold.status.send_modify(|s| {
                    s.expires = Some(later(now, d));
                    if s.lost.is_none() {
                        s.valid_until = safe_until(now, d);
                    }
                });
            }
        } else {
            holds.remove(index);
            if holds.is_empty() {
                map.remove(name);
            }
        }
        released
    }

    /// How many holds of `(name, field)` this client has recorded.
    pub(crate) fn count(&self, name: &str, field: &str) -> u32 {
        hold_mut(&mut self.map.lock(), name, field).map_or(0, |h| h.count)
    }

    /// Mark every hold of `name` lost (after a forced unlock).
    pub(crate) fn lose_all(&self, name: &str) {
        if let Some(holds) = self.map.lock().get_mut(name) {
            for (field, hold) in holds.iter_mut() {
                if mark_lost(hold, LostReason::ForceUnlocked) {
                    tracing::warn!(
                        lock = name,
                        owner = field.as_str(),
                        "lock lost: force-unlocked through this client"
                    );
                }
            }
        }
    }

    /// The renewal run that has `(name, field)` in flight, if any: a call
    /// that sets its TTL must not be overtaken by it.
    pub(crate) fn in_run(&self, name: &str, field: &str) -> Option<u64> {
        hold_mut(&mut self.map.lock(), name, field).and_then(|h| h.in_run)
    }

    /// The hold of `(name, field)` that `status` observes now has the
    /// explicit lease `lease`, set by a command sent at `sent_at`: no
    /// longer renewed by the watchdog, it expires then. Whether it was
    /// still recorded and not lost.
    pub(crate) fn extended(
        &self,
        name: &str,
        field: &str,
        status: &watch::Receiver<Status>,
        lease: Duration,
        sent_at: Instant,
    ) -> bool {
        let mut map = self.map.lock();
        let Some(hold) = hold_mut(&mut map, name, field) else {
            return false;
        };
        if !hold.status.subscribe().same_channel(status) || hold.status.borrow().lost.is_some() {
            return false;
        }
        hold.lease = Lease::Fixed(lease);
        hold.status.send_modify(|s| {
            s.expires = Some(later(sent_at, lease));
            s.valid_until = safe_until(sent_at, lease);
        });
        true
    }

    /// Mark the hold of `(name, field)` that `status` observes lost: a
    /// watcher found its field gone from Redis. A hold released meanwhile,
    /// or taken afresh since (another status channel), is left alone.
    pub(crate) fn lose(&self, name: &str, field: &str, status: &watch::Receiver<Status>) {
        let mut map = self.map.lock();
        let Some(hold) = hold_mut(&mut map, name, field) else {
            return;
        };
        if hold.status.subscribe().same_channel(status) && mark_lost(hold, LostReason::Gone) {
            tracing::warn!(
                lock = name,
                owner = field,
                "lock lost: found gone after a message on its channel"
            );
        }
    }

    /// Wait until renewal run `run` has finished.
    pub(crate) async fn wait_for_run(&self, run: u64) {
        let mut finished = self.finished_run.subscribe();
        let _ = finished.wait_for(|done| *done >= run).await;
    }

    /// Pick the holds to renew in run `run` and mark them in flight.
    /// Grouped by renewal kind, so each group is renewed by its own script,
    /// and on a cluster also by hash slot, since one script may only touch
    /// keys of one slot (docs/PROTOCOL.md §2.6).
    pub(super) fn begin_run(
        &self,
        run: u64,
        by_slot: bool,
    ) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        let now = Instant::now();
        let mut map = self.map.lock();
        let mut groups: HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> = HashMap::new();
        for (name, holds) in map.iter_mut() {
            let slot = if by_slot {
                fred::util::redis_keyslot(name.as_bytes())
            } else {
                0
            };
            for (field, hold) in holds.iter_mut() {
                if hold.lease != Lease::Watchdog || hold.status.borrow().lost.is_some() {
                    continue;
                }
                if hold.status.borrow().is_lost_at(now) {
                    tracing::warn!(
                        lock = name.as_str(),
                        owner = field.as_str(),
                        "lock lost: not renewed before its lease could have run out"
                    );
                    mark_lost(hold, LostReason::NotRenewed);
                } else {
                    hold.in_run = Some(run);
                    groups
                        .entry((hold.renewal.group(), slot))
                        .or_insert_with(|| (hold.renewal, Vec::new()))
                        .1
                        .push((name.clone(), field.clone()));
                }
            }
        }
        groups
    }

    /// The earliest time any hold of `batch` stops being certain: a
    /// renewal of the batch must not run past it.
    pub(super) fn batch_valid_until(&self, batch: &[HoldKey]) -> Option<Instant> {
        let mut map = self.map.lock();
        let mut earliest: Option<Instant> = None;
        for (name, field) in batch {
            if let Some(hold) = hold_mut(&mut map, name, field) {
                let until = hold.status.borrow().valid_until;
                earliest = Some(earliest.map_or(until, |e| e.min(until)));
            }
        }
        earliest
    }

    /// Apply the outcome of renewing `batch`, sent at `sent_at`; what
    /// became of its holds.
    pub(super) fn apply(
        &self,
        run: u64,
        batch: &[HoldKey],
        outcome: &Result<Vec<bool>, Error>,
        sent_at: Instant,
    ) -> Tally {
        let now = Instant::now();
        let mut tally = Tally::default();
        let mut map = self.map.lock();
        for (i, key) in batch.iter().enumerate() {
            let Some(hold) = hold_mut(&mut map, &key.0, &key.1) else {
                continue;
            };
            if hold.in_run != Some(run) {
                continue;
            }
            let late = hold.status.borrow().is_lost_at(now);
            match outcome {
                // A confirmation that comes after the hold stopped being
                // certain does not revive it: its guard may already have
                // reported it lost.
                Ok(renewed) if renewed.get(i) == Some(&true) && !late => {
                    let valid_until = safe_until(sent_at, self.watchdog);
                    hold.status.send_modify(|s| s.valid_until = valid_until);
                    tally.renewed += 1;
                }
                Ok(renewed) if renewed.get(i) == Some(&true) => {
                    tracing::warn!(
                        lock = key.0.as_str(),
                        owner = key.1.as_str(),
                        "lock lost: renewal confirmed after its lease could have run out"
                    );
                    tally.lost += u64::from(mark_lost(hold, LostReason::NotRenewed));
                }
                Ok(_) => {
                    tracing::warn!(
                        lock = key.0.as_str(),
                        owner = key.1.as_str(),
                        "lock lost: renewal found it gone"
                    );
                    tally.lost += u64::from(mark_lost(hold, LostReason::Gone));
                }
                Err(e) if late => {
                    tracing::warn!(lock = key.0.as_str(), owner = key.1.as_str(), error = %e, "lock lost: could not renew before its lease could have run out");
                    tally.lost += u64::from(mark_lost(hold, LostReason::NotRenewed));
                }
                Err(e) => {
                    tracing::debug!(lock = key.0.as_str(), error = %e, "renewal failed, retrying soon");
                    tally.failed += 1;
                }
            }
        }
        drop(map);
        telemetry::renewals(tally.renewed, tally.failed);
        tally
    }

    pub(super) fn finish_run(&self, run: u64) {
        let mut map = self.map.lock();
        for (_, hold) in map.values_mut().flatten() {
            if hold.in_run.is_some_and(|r| r <= run) {
                hold.in_run = None;
            }
        }
        drop(map);
        self.finished_run
            .send_modify(|done| *done = (*done).max(run));
    }

    /// The watchdog was stopped (shutdown): no run is in flight any more,
    /// so no release may wait for one.
    pub(crate) fn stopped(&self) {
        self.finish_run(u64::MAX);
    }
}

/// What one renewal batch did to its holds.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) renewed: u64,
    pub(super) failed: u64,
    pub(super) lost: u64,
}

/// Mark `hold` lost for `reason`; whether it was not already.
fn mark_lost(hold: &mut Hold, reason: LostReason) -> bool {
    let newly = hold.status.borrow().lost.is_none();
    if newly {
        hold.status.send_modify(|s| s.lost = Some(reason));
    }
    if newly {
        telemetry::lost(hold.kind, reason);
    }
    newly
}

/// Resolve when the hold observed by `status` is lost: found gone, forced
/// open, or no longer certain (its `valid_until` passed without a confirmed
/// renewal). Never, if it is released normally.
pub(crate) async fn lost(mut status: watch::Receiver<Status>) -> LostReason {
    loop {
        if status.has_changed().is_err() {
            // Released: the registry dropped the hold.
            return std::future::pending().await;
        }
        let now = *status.borrow_and_update();
        if let Some(reason) = now.lost_at(Instant::now()) {
            return reason;
        }
        tokio::select! {
            // A release (the registry drops the hold) wins over the timer.
            biased;
            changed = status.changed() => if changed.is_err() {
                return std::future::pending().await;
            },
            _ = tokio::time::sleep_until(now.valid_until) => {}
        }
    }
}

/// Why `status` says lost right now, if it does.
pub(crate) fn lost_reason(status: &watch::Receiver<Status>) -> Option<LostReason> {
    status.borrow().lost_at(Instant::now())
}
