//! The client's registry of its holds (docs/PROTOCOL.md §2.6, §2.9).
//!
//! For each lock name and owner field this client holds, the registry keeps
//! a *tenure*: the life of that field in Redis, from the acquisition that
//! created it (the acquire script replied a hold count of 1) until it is
//! released to zero or found gone. Every guard's hold belongs to the tenure
//! it was taken in. The rules that keep a guard and Redis in agreement:
//!
//! * The acquire attempts of one owner field (and their undos) run in turn
//!   on this client (its [`Order`]), so the registry applies their replies
//!   in the order Redis ran them: a count of 1 then really means the field
//!   was absent before that attempt. Releases need no turn: a release's
//!   reply only ends the tenure it was sent for, whatever came between.
//! * An acquisition that finds the field absent (count 1) while the
//!   registry has a tenure for it proves that tenure gone: its guards are
//!   told (`lost`) and the new hold starts a new tenure. A guard of an
//!   ended tenure never sends an unlock: it would take a hold it does not
//!   own.
//! * A hold is certain until the send time of the last confirmed command
//!   that set its key's TTL, plus that TTL, less a drift margin
//!   ([`safe_until`]). No script of this crate shortens the TTL of a key
//!   this client holds (re-entry, renewal and `extend` set
//!   `max(PTTL, lease)`; an unlock that leaves holds keeps the TTL), so the
//!   latest certainty is the largest, and a command whose reply is lost can
//!   only have lengthened it.
//! * A guard that was told its hold is lost stays lost: a later
//!   confirmation (a renewal that arrives late, a re-entry that finds the
//!   field still there) starts a new status for new guards and never
//!   revives the old one.
//! * The watchdog renews a tenure while one of its live holds was taken
//!   without a lease and its status is not lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::error::Error;
use crate::base::lost::LostReason;
use crate::base::telemetry;
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

/// How the watchdog renews (and `extend` lengthens, and the hold check
/// looks at) one kind of hold, handed to it by the lock kind: a batch
/// script whose KEYS and ARGV (after the lease in `ARGV[1]`) are every
/// hold's parts, one after the other. The registry knows no key layout;
/// it groups holds by script and appends their parts.
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
        for hold in batch {
            (self.append)(&hold.name, &hold.field, &mut keys, &mut args);
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
    /// While the watchdog does not renew the hold: when its key expires at
    /// the earliest (the send time of the last confirmed command that set
    /// its TTL, plus that TTL).
    pub expires: Option<Instant>,
    /// Until when the hold is certain: [`safe_until`] of that command.
    /// Redis cannot have expired the key before then; after it, the hold
    /// counts as lost whatever the network does.
    pub valid_until: Instant,
}

impl Status {
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

/// The turn of one owner field's count-changing commands on this client
/// (acquire attempts, undos, releases, leaving a fair queue): each runs
/// holding it, so their replies are applied in the order Redis ran them.
/// The slot holds the error of an undo that could not be done: whether the
/// field holds is then unknown, and the acquisition that meets it stops.
pub(crate) type Order = Arc<tokio::sync::Mutex<Option<Error>>>;

/// A fresh [`Order`].
pub(crate) fn new_order() -> Order {
    Arc::new(tokio::sync::Mutex::new(None))
}

/// One hold as the registry and a renewal batch name it.
#[derive(Clone, Debug)]
pub(crate) struct HoldKey {
    pub name: String,
    pub field: String,
    /// The tenure the hold belongs to (see the module docs).
    pub tenure: u64,
}

/// A recorded acquisition: the guard's handle, and for a hold that started
/// a tenure of a registry that watches its tenures, a receiver that closes
/// when the tenure ends.
pub(crate) struct Recorded {
    pub hold: HoldRef,
    pub new_tenure: Option<watch::Receiver<()>>,
}

/// A guard's handle on its hold in the registry.
#[derive(Clone, Debug)]
pub(crate) struct HoldRef {
    /// The tenure it was taken in.
    pub tenure: u64,
    /// The hold itself, among the tenure's live holds.
    pub hold: u64,
    /// The lock's kind, for metrics.
    pub kind: &'static str,
    /// Its status, as the registry publishes it.
    pub status: watch::Receiver<Status>,
}

/// A live hold: one guard's.
struct Live {
    id: u64,
    lease: Lease,
    /// Renewed by the watchdog: taken without a lease, and its status was
    /// not lost since.
    renews: bool,
}

/// One field's life in Redis, as far as this client knows it.
struct Tenure {
    id: u64,
    /// The lock's kind, for metrics.
    kind: &'static str,
    renewal: Renewal,
    /// Holds of the tenure that no guard has any more: kept in Redis by
    /// `forget()`, for an unlock without a guard to take first.
    forgotten: u32,
    live: Vec<Live>,
    /// The earliest the key can expire: the largest `sent_at + ttl` of a
    /// confirmed command that set its TTL.
    expiry: Instant,
    /// [`safe_until`] of that command: the status's `valid_until`.
    certain: Instant,
    /// What the guards of the current status observe; replaced (a new
    /// status) when a hold is taken after the status was lost.
    status: watch::Sender<Status>,
    /// Dropped with the tenure: ends what watches it (keyspace events), if
    /// anything does.
    _alive: Option<watch::Sender<()>>,
}

impl Tenure {
    fn renewed(&self) -> bool {
        self.live.iter().any(|l| l.renews)
    }

    fn current(&self) -> Status {
        Status {
            lost: self.status.borrow().lost,
            expires: (!self.renewed()).then_some(self.expiry),
            valid_until: self.certain,
        }
    }

    /// Publish the status after a change of leases or certainty (a lost
    /// status keeps its validity: it is never revived). Not when no guard
    /// is left to observe it.
    fn publish(&self) {
        if self.live.is_empty() {
            return;
        }
        let now = self.current();
        self.status.send_if_modified(|s| {
            if s.lost.is_some() {
                return false;
            }
            let changed = s.expires != now.expires || s.valid_until != now.valid_until;
            *s = now;
            changed
        });
    }

    /// A command sent at `sent_at` that Redis confirmed set the key's TTL
    /// to at least `ttl`.
    fn confirmed(&mut self, sent_at: Instant, ttl: Duration) {
        self.expiry = self.expiry.max(later(sent_at, ttl));
        self.certain = self.certain.max(safe_until(sent_at, ttl));
    }

    /// Whether the current status is lost at `now` (found lost, or past
    /// its certainty).
    fn lost_at(&self, now: Instant) -> Option<LostReason> {
        self.status.borrow().lost_at(now)
    }

    /// Mark the current status lost for `reason` (its guards are told); no
    /// live hold is renewed any more. Whether it was not lost before.
    fn lose(&mut self, reason: LostReason) -> bool {
        for live in &mut self.live {
            live.renews = false;
        }
        // A status already past its certainty was lost for that reason (its
        // guards may have been told so).
        let reason = self.lost_at(Instant::now()).unwrap_or(reason);
        let newly = self.status.borrow().lost.is_none();
        if newly {
            self.status.send_modify(|s| s.lost = Some(reason));
            telemetry::lost(self.kind, reason);
        }
        newly
    }
}

/// One owner field of one lock name.
struct Entry {
    field: String,
    order: Order,
    /// Acquisitions that use `order` (explicit owners) and keep the entry
    /// while it has no tenure.
    users: u32,
    tenure: Option<Tenure>,
}

/// Entries by lock name (usually one per name). Lookups borrow the
/// caller's strings: no allocation on the lock/unlock path.
type HoldMap = HashMap<String, Vec<Entry>, FxBuild>;

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
    /// Ids of tenures and holds, never reused.
    ids: AtomicU64,
    /// `lock_watchdog_timeout`: the lease of watchdog holds.
    pub(crate) watchdog: Duration,
    /// Whether each tenure is watched (keyspace notifications): new tenures
    /// then hand out a receiver that closes when they end.
    watch_tenures: bool,
}

/// What a release of one guard's hold is to do.
pub(crate) enum Releasing {
    /// Send the unlock (the tenure is the field's current one).
    Send,
    /// Send nothing: the hold's tenure ended (found gone, or released to
    /// zero), or its hold was taken away by an unlock without a guard.
    Stale,
}

/// What an unlock replied, for the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnlockReply {
    /// The field still holds (count above zero).
    StillHeld,
    /// The field's last hold was released.
    Released,
    /// The field did not hold.
    NotHeld,
}

/// A counted use of an entry's [`Order`] by an explicit owner's
/// acquisition; dropping it lets the entry go once it has no tenure.
pub(crate) struct OrderUse {
    holds: Arc<Holds>,
    name: String,
    field: String,
    pub(crate) order: Order,
}

impl Drop for OrderUse {
    fn drop(&mut self) {
        let mut map = self.holds.map.lock();
        if let Some(entries) = map.get_mut(&self.name) {
            if let Some(i) = entries.iter().position(|e| e.field == self.field) {
                let entry = &mut entries[i];
                entry.users = entry.users.saturating_sub(1);
                if entry.users == 0 && entry.tenure.is_none() {
                    entries.swap_remove(i);
                    if entries.is_empty() {
                        map.remove(&self.name);
                    }
                }
            }
        }
    }
}

/// Run `f` on the entries of `name`, made if there are none (the name is
/// copied only then).
fn with_entries<T>(map: &mut HoldMap, name: &str, f: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
    match map.get_mut(name) {
        Some(entries) => f(entries),
        None => f(map.entry(name.to_owned()).or_default()),
    }
}

fn entry_mut<'a>(map: &'a mut HoldMap, name: &str, field: &str) -> Option<&'a mut Entry> {
    map.get_mut(name)?.iter_mut().find(|e| e.field == field)
}

/// The tenure `id` of `(name, field)`, if it is the field's current one.
fn tenure_mut<'a>(
    map: &'a mut HoldMap,
    name: &str,
    field: &str,
    id: u64,
) -> Option<&'a mut Tenure> {
    entry_mut(map, name, field)?
        .tenure
        .as_mut()
        .filter(|t| t.id == id)
}

/// End the tenure of `(name, field)`, removing its entry if nothing else
/// keeps it. (Its guards still count as held, in the metrics, until they go.)
fn end_tenure(map: &mut HoldMap, name: &str, field: &str) {
    let Some(entries) = map.get_mut(name) else {
        return;
    };
    let Some(i) = entries.iter().position(|e| e.field == field) else {
        return;
    };
    entries[i].tenure = None;
    if entries[i].users == 0 {
        entries.swap_remove(i);
        if entries.is_empty() {
            map.remove(name);
        }
    }
}

impl Holds {
    /// An empty registry for holds renewed to `watchdog`, whose tenures are
    /// watched if `watch_tenures`.
    pub(crate) fn new(watchdog: Duration, watch_tenures: bool) -> Holds {
        Holds {
            map: Mutex::default(),
            ids: AtomicU64::new(1),
            watchdog,
            watch_tenures,
        }
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The order of `(name, field)`'s commands, for an acquisition by an
    /// owner that other calls may share (an explicit owner).
    pub(crate) fn order(self: &Arc<Self>, name: &str, field: &str) -> OrderUse {
        let order = with_entries(&mut self.map.lock(), name, |entries| {
            match entries.iter_mut().find(|e| e.field == field) {
                Some(entry) => {
                    entry.users += 1;
                    entry.order.clone()
                }
                None => {
                    let order = new_order();
                    entries.push(Entry {
                        field: field.to_owned(),
                        order: order.clone(),
                        users: 1,
                        tenure: None,
                    });
                    order
                }
            }
        });
        OrderUse {
            holds: self.clone(),
            name: name.to_owned(),
            field: field.to_owned(),
            order,
        }
    }

    /// Record an acquisition that Redis confirmed with the field's new hold
    /// `count`, made by a command sent at `sent_at` that set the key's TTL
    /// to at least `lease`, in the turn of `order`. The returned handle
    /// belongs to the guard.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquired(
        &self,
        name: &str,
        field: &str,
        kind: &'static str,
        renewal: Renewal,
        lease: Lease,
        count: u32,
        sent_at: Instant,
        order: &Order,
    ) -> Recorded {
        let ttl = lease.duration(self.watchdog);
        let hold = self.next_id();
        let now = Instant::now();
        telemetry::held(kind);
        let live = Live {
            id: hold,
            lease,
            renews: lease == Lease::Watchdog,
        };
        let mut map = self.map.lock();
        with_entries(&mut map, name, |entries| {
            self.record(
                entries, name, field, kind, renewal, live, count, sent_at, ttl, now, order,
            )
        })
    }

    /// [`acquired`](Self::acquired), in the entries of the lock's name.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        entries: &mut Vec<Entry>,
        name: &str,
        field: &str,
        kind: &'static str,
        renewal: Renewal,
        live: Live,
        count: u32,
        sent_at: Instant,
        ttl: Duration,
        now: Instant,
        order: &Order,
    ) -> Recorded {
        let hold = live.id;
        let index = match entries.iter().position(|e| e.field == field) {
            Some(i) => i,
            None => {
                entries.push(Entry {
                    field: field.to_owned(),
                    order: order.clone(),
                    users: 0,
                    tenure: None,
                });
                entries.len() - 1
            }
        };
        let entry = &mut entries[index];
        if let Some(tenure) = entry.tenure.as_mut().filter(|_| count > 1) {
            // A re-entry of the current tenure: the field was there.
            tenure.confirmed(sent_at, ttl);
            if let Some(reason) = tenure.lost_at(now) {
                // Its guards were (or are about to be) told it is lost: a
                // new status for this and later holds; the old stays lost.
                if !tenure.live.is_empty() {
                    tenure.lose(reason);
                }
                tenure.live.push(live);
                let status = tenure.current();
                tenure.status = watch::Sender::new(Status {
                    lost: None,
                    ..status
                });
            } else {
                tenure.live.push(live);
                tenure.publish();
            }
            return Recorded {
                hold: HoldRef {
                    tenure: tenure.id,
                    hold,
                    kind,
                    status: tenure.status.subscribe(),
                },
                new_tenure: None,
            };
        }
        if let Some(mut old) = entry.tenure.take() {
            // The field was absent (count 1): whatever this client held of
            // it is gone from Redis.
            if !old.live.is_empty() && old.lose(LostReason::Gone) {
                tracing::warn!(
                    lock = name,
                    owner = field,
                    "lock lost: a new acquisition by the same owner found it gone"
                );
            }
        }
        let (alive, new_tenure) = if self.watch_tenures {
            let alive = watch::Sender::new(());
            let receiver = alive.subscribe();
            (Some(alive), Some(receiver))
        } else {
            (None, None)
        };
        let (expiry, certain) = (later(sent_at, ttl), safe_until(sent_at, ttl));
        let status = Status {
            lost: None,
            expires: (!live.renews).then_some(expiry),
            valid_until: certain,
        };
        let tenure = Tenure {
            id: self.next_id(),
            kind,
            renewal,
            forgotten: 0,
            live: vec![live],
            expiry,
            certain,
            status: watch::Sender::new(status),
            _alive: alive,
        };
        let handle = HoldRef {
            tenure: tenure.id,
            hold,
            kind,
            status: tenure.status.subscribe(),
        };
        entry.tenure = Some(tenure);
        Recorded {
            hold: handle,
            new_tenure,
        }
    }

    /// A guard's hold is about to be released: whether to send the unlock.
    /// The hold leaves the tenure's live holds either way (a watchdog hold
    /// stops being renewed when it was the last).
    pub(crate) fn releasing(&self, name: &str, field: &str, hold: &HoldRef) -> Releasing {
        telemetry::unheld(hold.kind);
        let mut map = self.map.lock();
        let Some(tenure) = tenure_mut(&mut map, name, field, hold.tenure) else {
            return Releasing::Stale;
        };
        let Some(i) = tenure.live.iter().position(|l| l.id == hold.hold) else {
            return Releasing::Stale;
        };
        tenure.live.swap_remove(i);
        tenure.publish();
        Releasing::Send
    }

    /// An unlock without a guard (Java style, `Lock::unlock`) is about to
    /// take one hold of `(name, field)` away: a hold no guard has (a
    /// forgotten one) if there is one, else the newest guard's, whose own
    /// release then sends nothing. The tenure it applies to, if any.
    pub(crate) fn releasing_any(&self, name: &str, field: &str) -> Option<u64> {
        let mut map = self.map.lock();
        let tenure = entry_mut(&mut map, name, field)?.tenure.as_mut()?;
        if tenure.forgotten > 0 {
            tenure.forgotten -= 1;
        } else {
            // That guard still counts as held (metrics) until it goes.
            tenure.live.pop();
            tenure.publish();
        }
        Some(tenure.id)
    }

    /// Apply the reply of an unlock of tenure `id` of `(name, field)`.
    pub(crate) fn released(&self, name: &str, field: &str, id: u64, reply: UnlockReply) {
        if reply == UnlockReply::StillHeld {
            return;
        }
        // Released to zero, or not held: the tenure is over. Its other
        // guards, if any, lost their holds with it.
        let mut map = self.map.lock();
        let Some(entries) = map.get_mut(name) else {
            return;
        };
        let Some(i) = entries.iter().position(|e| e.field == field) else {
            return;
        };
        let entry = &mut entries[i];
        let Some(tenure) = entry.tenure.as_mut().filter(|t| t.id == id) else {
            return;
        };
        if !tenure.live.is_empty() && tenure.lose(LostReason::Gone) {
            tracing::warn!(
                lock = name,
                owner = field,
                "lock lost: an unlock of the same owner found its holds gone"
            );
        }
        entry.tenure = None;
        if entry.users == 0 {
            entries.swap_remove(i);
            if entries.is_empty() {
                map.remove(name);
            }
        }
    }

    /// The hold of a guard is kept in Redis without a guard (`forget`): it
    /// stays counted, but is no longer renewed.
    pub(crate) fn forgot(&self, name: &str, field: &str, hold: &HoldRef) {
        telemetry::unheld(hold.kind);
        let mut map = self.map.lock();
        if let Some(tenure) = tenure_mut(&mut map, name, field, hold.tenure) {
            if let Some(i) = tenure.live.iter().position(|l| l.id == hold.hold) {
                tenure.live.swap_remove(i);
                tenure.forgotten = tenure.forgotten.saturating_add(1);
                tenure.publish();
            }
        }
    }

    /// Whether the registry knows `(name, field)` to hold `name` (it has a
    /// tenure of it).
    pub(crate) fn holds(&self, name: &str, field: &str) -> bool {
        entry_mut(&mut self.map.lock(), name, field).is_some_and(|e| e.tenure.is_some())
    }

    /// Whether `hold` is still one of its tenure's live holds, and that
    /// tenure the field's current one.
    pub(crate) fn is_live(&self, name: &str, field: &str, hold: &HoldRef) -> bool {
        tenure_mut(&mut self.map.lock(), name, field, hold.tenure)
            .is_some_and(|t| t.live.iter().any(|l| l.id == hold.hold))
    }

    /// Mark every tenure of `name` lost and ended: a forced unlock through
    /// this client removed the key.
    pub(crate) fn lose_all(&self, name: &str) {
        let mut map = self.map.lock();
        let fields: Vec<String> = match map.get_mut(name) {
            Some(entries) => entries
                .iter_mut()
                .filter_map(|e| {
                    let tenure = e.tenure.as_mut()?;
                    if !tenure.live.is_empty() && tenure.lose(LostReason::ForceUnlocked) {
                        tracing::warn!(
                            lock = name,
                            owner = e.field.as_str(),
                            "lock lost: force-unlocked through this client"
                        );
                    }
                    Some(e.field.clone())
                })
                .collect(),
            None => return,
        };
        for field in fields {
            end_tenure(&mut map, name, &field);
        }
    }

    /// A check sent while tenure `id` was current found `(name, field)`
    /// absent from Redis (`reason`: how it was learnt). If the tenure is
    /// still current and has live holds, their guards are told, and it ends.
    /// (One without live holds is being released: the check may have run
    /// after that release.)
    pub(crate) fn found_gone(&self, name: &str, field: &str, id: u64, why: &'static str) {
        let mut map = self.map.lock();
        let Some(tenure) = tenure_mut(&mut map, name, field, id) else {
            return;
        };
        if tenure.live.is_empty() {
            return;
        }
        if tenure.lose(LostReason::Gone) {
            tracing::warn!(lock = name, owner = field, why, "lock lost: found gone");
        }
        end_tenure(&mut map, name, field);
    }

    /// A one-hold renewal (`extend`) of `hold` to at least `lease`, sent at
    /// `sent_at`, was confirmed: the hold has that explicit lease from now
    /// on and is not renewed. Whether the hold is still live and not lost.
    pub(crate) fn extended(
        &self,
        name: &str,
        field: &str,
        hold: &HoldRef,
        lease: Duration,
        sent_at: Instant,
    ) -> bool {
        let mut map = self.map.lock();
        let Some(tenure) = tenure_mut(&mut map, name, field, hold.tenure) else {
            return false;
        };
        if !hold.status.same_channel(&tenure.status.subscribe())
            || tenure.lost_at(Instant::now()).is_some()
        {
            return false;
        }
        let Some(live) = tenure.live.iter_mut().find(|l| l.id == hold.hold) else {
            return false;
        };
        live.lease = Lease::Fixed(lease);
        live.renews = false;
        tenure.confirmed(sent_at, lease);
        tenure.publish();
        true
    }

    /// Pick the tenures to renew now, grouped by renewal script and, on a
    /// cluster, by hash slot (one script may only touch keys of one slot,
    /// docs/PROTOCOL.md §2.6). A renewed tenure whose status is past its
    /// certainty is marked lost instead. Tenures without live holds whose
    /// certainty has passed are forgotten (their keys expire by
    /// themselves).
    pub(super) fn due(&self, by_slot: bool) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        self.group(by_slot, |name, field, tenure, now| {
            if !tenure.renewed() {
                return false;
            }
            if tenure.lost_at(now).is_some() {
                tracing::warn!(
                    lock = name,
                    owner = field,
                    "lock lost: not renewed before its lease could have run out"
                );
                tenure.lose(LostReason::NotRenewed);
                return false;
            }
            true
        })
    }

    /// Every tenure with live holds, grouped as [`due`](Self::due) groups
    /// them, for a check that their fields still exist.
    pub(super) fn held(&self, by_slot: bool) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        self.group(by_slot, |_, _, tenure, _| !tenure.live.is_empty())
    }

    fn group(
        &self,
        by_slot: bool,
        mut pick: impl FnMut(&str, &str, &mut Tenure, Instant) -> bool,
    ) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        let now = Instant::now();
        let mut groups: HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> = HashMap::new();
        let mut map = self.map.lock();
        let mut forgotten = Vec::new();
        for (name, entries) in map.iter_mut() {
            let slot = if by_slot {
                fred::util::redis_keyslot(name.as_bytes())
            } else {
                0
            };
            for entry in entries.iter_mut() {
                let Some(tenure) = entry.tenure.as_mut() else {
                    continue;
                };
                // No guard left and past its certainty: its key expires by
                // itself. (Not while a command of the field is under way.)
                if tenure.live.is_empty() && now >= tenure.certain {
                    if entry.order.try_lock().is_ok() {
                        forgotten.push((name.clone(), entry.field.clone()));
                    }
                    continue;
                }
                if pick(name, &entry.field, tenure, now) {
                    groups
                        .entry((tenure.renewal.group(), slot))
                        .or_insert_with(|| (tenure.renewal, Vec::new()))
                        .1
                        .push(HoldKey {
                            name: name.clone(),
                            field: entry.field.clone(),
                            tenure: tenure.id,
                        });
                }
            }
        }
        for (name, field) in forgotten {
            end_tenure(&mut map, &name, &field);
        }
        groups
    }

    /// The earliest time any hold of `batch` stops being certain: a
    /// renewal of the batch must not run past it.
    pub(super) fn batch_valid_until(&self, batch: &[HoldKey]) -> Option<Instant> {
        let mut map = self.map.lock();
        batch
            .iter()
            .filter_map(|h| tenure_mut(&mut map, &h.name, &h.field, h.tenure).map(|t| t.certain))
            .min()
    }

    /// Apply the outcome of renewing `batch`, sent at `sent_at`; what
    /// became of its holds.
    pub(super) fn apply(
        &self,
        batch: &[HoldKey],
        outcome: &Result<Vec<bool>, Error>,
        sent_at: Instant,
    ) -> Tally {
        let now = Instant::now();
        let mut tally = Tally::default();
        let mut map = self.map.lock();
        let mut gone = Vec::new();
        for (i, key) in batch.iter().enumerate() {
            let Some(tenure) = tenure_mut(&mut map, &key.name, &key.field, key.tenure) else {
                continue;
            };
            // A tenure whose last live hold is being released: the renewal
            // may have run after that release.
            if !tenure.renewed() {
                continue;
            }
            let late = tenure.lost_at(now).is_some();
            let (lock, owner) = (key.name.as_str(), key.field.as_str());
            match outcome {
                // A confirmation that comes after the hold stopped being
                // certain does not revive it: its guards may already have
                // reported it lost.
                Ok(renewed) if renewed.get(i) == Some(&true) && !late => {
                    tenure.confirmed(sent_at, self.watchdog);
                    tenure.publish();
                    tally.renewed += 1;
                }
                Ok(renewed) if renewed.get(i) == Some(&true) => {
                    tracing::warn!(
                        lock,
                        owner,
                        "lock lost: renewal confirmed after its lease could have run out"
                    );
                    tally.lost += u64::from(tenure.lose(LostReason::NotRenewed));
                }
                Ok(_) => {
                    tracing::warn!(lock, owner, "lock lost: renewal found it gone");
                    tally.lost += u64::from(tenure.lose(LostReason::Gone));
                    gone.push((key.name.clone(), key.field.clone()));
                }
                Err(e) if late => {
                    tracing::warn!(lock, owner, error = %e, "lock lost: could not renew before its lease could have run out");
                    tally.lost += u64::from(tenure.lose(LostReason::NotRenewed));
                }
                Err(e) => {
                    tracing::debug!(lock, error = %e, "renewal failed, retrying soon");
                    tally.failed += 1;
                }
            }
        }
        for (name, field) in gone {
            end_tenure(&mut map, &name, &field);
        }
        drop(map);
        telemetry::renewals(tally.renewed, tally.failed);
        tally
    }
}

/// What one renewal batch did to its holds.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) renewed: u64,
    pub(super) failed: u64,
    pub(super) lost: u64,
}

/// Resolve when the hold observed by `status` is lost: found gone, forced
/// open, or no longer certain (its `valid_until` passed without a confirmed
/// renewal). Never, if it is released normally.
pub(crate) async fn lost(mut status: watch::Receiver<Status>) -> LostReason {
    loop {
        let now = *status.borrow_and_update();
        if let Some(reason) = now.lost_at(Instant::now()) {
            return reason;
        }
        tokio::select! {
            // A release (the registry drops the tenure) wins over the timer.
            biased;
            changed = status.changed() => if changed.is_err() {
                // Released: the registry dropped the tenure without losing it.
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
