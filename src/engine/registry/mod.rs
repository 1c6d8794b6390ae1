//! The client's registry of its holds (docs/PROTOCOL.md §2.6, §2.9).
//!
//! For each lock name and owner field this client holds, the registry keeps
//! a *tenure*: the life of that field in Redis, from the acquisition that
//! created it (the acquire script replied a hold count of 1) until it is
//! released to zero or found gone. Every guard's hold belongs to the tenure
//! it was taken in. The rules that keep a guard and Redis in agreement:
//!
//! * Every command of one owner field that changes its count (acquire
//!   attempts, their undos, a fair waiter's departure, releases) runs in
//!   the field's turn on this client (its [`Order`]), so no release of one
//!   tenure is written after an acquisition of a later one was sent (Redis
//!   cannot tell which tenure a decrement is for), and the registry applies
//!   replies in the order Redis ran them: a count of 1 then really means
//!   the field was absent before that attempt. A release decides its
//!   tenure once it has the turn.
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
//!   only have lengthened it. The one exception, a read unlock that sets
//!   the owner's time to what its remaining holds need, lowers their
//!   certainty to that first ([`Holds::remaining_need`]), in the field's
//!   turn (as `extend` runs).
//! * A guard that was told its hold is lost stays lost: a later
//!   confirmation (a renewal that arrives late, a re-entry that finds the
//!   field still there) starts a new status for new guards and never
//!   revives the old one.
//! * The watchdog renews a tenure while one of its live holds was taken
//!   without a lease and its status is not lost.

mod forcing;
mod fxhash;
mod lease;
mod runs;
mod tenure;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::error::Error;
use crate::base::lost::LostReason;
use crate::base::observed::{Observed, Observer};
use crate::base::telemetry;
use fxhash::FxBuild;
pub(crate) use lease::{HoldKey, Lease, Renewal};
use tenure::{later, Live, Tenure};
pub(crate) use tenure::{lost_reason, safe_until, HoldStatus};

/// The turn of one owner field's count-changing commands on this client
/// (acquire attempts, undos, releases, leaving a fair queue): each runs
/// holding it, so none is written while another is in flight and their
/// replies are applied in the order Redis ran them.
/// The slot holds the error of an undo that could not be done: whether the
/// field holds is then unknown, and the acquisition that meets it stops.
/// (Boxed: every waiter has an order, and the error is rare.)
pub(crate) type Order = Arc<tokio::sync::Mutex<Option<Box<Error>>>>;

/// A fresh [`Order`].
pub(crate) fn new_order() -> Order {
    Arc::new(tokio::sync::Mutex::new(None))
}

/// A recorded acquisition: its hold's ticket, and whether it started a
/// tenure (which is then to be watched, [`crate::engine::watch`]).
pub(crate) struct Recorded {
    pub ticket: HoldTicket,
    pub new_tenure: bool,
}

/// How a hold names itself to the registry (its tenure and its id there),
/// with what the registry tells it back (its status).
#[derive(Clone, Debug)]
pub(crate) struct HoldTicket {
    /// The tenure it was taken in.
    pub tenure: u64,
    /// The hold's id among the tenure's live holds.
    pub id: u64,
    /// The lock's kind, for metrics.
    pub kind: &'static str,
    /// Its status, as the registry publishes it.
    pub status: Observer<HoldStatus>,
}

/// One owner field of one lock name. It lives while it has a tenure or
/// anyone holds a clone of its `order` (an acquisition of an explicit
/// owner, an attempt or undo finishing in the background, a release): so
/// every command of the field on this client takes the same turn, and a
/// fresh entry (with a turn of its own) is made only once none is in
/// flight.
struct FieldEntry {
    field: Arc<str>,
    order: Order,
    tenure: Option<Tenure>,
}

impl FieldEntry {
    /// Whether nothing keeps the entry, but `held` clones of its order the
    /// caller knows of (the entry's own included).
    fn unused(&self, held: usize) -> bool {
        self.tenure.is_none() && Arc::strong_count(&self.order) <= held
    }
}

/// Remove the entry at `i` of `name` if nothing keeps it (see
/// [`FieldEntry::unused`]), and the name once it has no entry.
fn drop_unused(map: &mut HoldMap, name: &str, i: usize, held: usize) {
    let Some(entries) = map.get_mut(name) else {
        return;
    };
    if entries.get(i).is_some_and(|e| e.unused(held)) {
        entries.swap_remove(i);
        if entries.is_empty() {
            map.remove(name);
        }
    }
}

/// Entries by lock name (usually one per name). Lookups borrow the
/// caller's strings: no allocation on the lock/unlock path.
type HoldMap = HashMap<String, Vec<FieldEntry>, FxBuild>;

/// The registry of one client.
pub(crate) struct Holds {
    map: Mutex<HoldMap>,
    /// Ids of tenures and holds, never reused.
    ids: AtomicU64,
    /// `lock_watchdog_timeout`: the lease of watchdog holds.
    pub(crate) watchdog: Duration,
    /// The names of the forced unlocks through this client under way (one
    /// entry each; locked after `map` when both are).
    forcing: Mutex<Vec<String>>,
}

/// What a release of one guard's hold is to do.
pub(crate) enum Unlocking {
    /// Send the unlock (the tenure is the field's current one).
    Send,
    /// Send nothing: the hold's tenure ended (found gone, or released to
    /// zero), or its hold was taken away by an unlock without a guard.
    Stale,
}

/// A tenure, as its watcher sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watched {
    /// Over: stop watching.
    Ended,
    /// Current, with no guard left to tell (its last hold is being
    /// released, or was forgotten): no check is needed.
    Releasing,
    /// Current, with guards: a wake-up is checked.
    Held,
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

/// A use of an entry's [`Order`] by an explicit owner's acquisition, or a
/// release; dropping it lets the entry go once nothing else keeps it.
pub(crate) struct OrderUse<'a> {
    holds: Arc<Holds>,
    /// Borrowed where the use lives within a call (an unlock's turn): no
    /// allocation on the unlock path.
    name: Cow<'a, str>,
    field: Cow<'a, str>,
    pub(crate) order: Order,
}

impl Drop for OrderUse<'_> {
    fn drop(&mut self) {
        let mut map = self.holds.map.lock();
        let at = map
            .get(&*self.name)
            .and_then(|entries| entries.iter().position(|e| *e.field == *self.field));
        if let Some(i) = at {
            // This use's own clone is still alive here: two in all.
            drop_unused(&mut map, &self.name, i, 2);
        }
    }
}

/// Run `f` on the entries of `name`, made if there are none (the name is
/// copied only then).
fn with_entries<T>(map: &mut HoldMap, name: &str, f: impl FnOnce(&mut Vec<FieldEntry>) -> T) -> T {
    match map.get_mut(name) {
        Some(entries) => f(entries),
        None => f(map.entry(name.to_owned()).or_default()),
    }
}

fn entry_mut<'a>(map: &'a mut HoldMap, name: &str, field: &str) -> Option<&'a mut FieldEntry> {
    map.get_mut(name)?.iter_mut().find(|e| *e.field == *field)
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
    let Some(i) = entries.iter().position(|e| *e.field == *field) else {
        return;
    };
    entries[i].tenure = None;
    drop_unused(map, name, i, 1);
}

impl Holds {
    /// An empty registry for holds renewed to `watchdog`.
    pub(crate) fn new(watchdog: Duration) -> Holds {
        Holds {
            map: Mutex::default(),
            ids: AtomicU64::new(1),
            watchdog,
            forcing: Mutex::default(),
        }
    }

    /// Remove every entry nothing keeps any more: one whose last clone of
    /// its order was dropped outside the registry (an attempt or undo that
    /// finished in the background) stays until then. The watchdog calls it
    /// once a period.
    pub(crate) fn sweep(&self) {
        let mut map = self.map.lock();
        map.retain(|_, entries| {
            entries.retain(|e| !e.unused(1));
            !entries.is_empty()
        });
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The order of `(name, field)`'s commands, for an acquisition by an
    /// owner that other calls may share (an explicit owner).
    pub(crate) fn order<'a>(
        self: &Arc<Self>,
        name: impl Into<Cow<'a, str>>,
        field: impl Into<Cow<'a, str>>,
    ) -> OrderUse<'a> {
        let (name, field) = (name.into(), field.into());
        let order = with_entries(&mut self.map.lock(), &name, |entries| {
            match entries.iter_mut().find(|e| *e.field == *field) {
                Some(entry) => entry.order.clone(),
                None => {
                    let order = new_order();
                    entries.push(FieldEntry {
                        field: Arc::from(&*field),
                        order: order.clone(),
                        tenure: None,
                    });
                    order
                }
            }
        });
        OrderUse {
            holds: self.clone(),
            name,
            field,
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
        field: &Arc<str>,
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
            ends: later(sent_at, ttl),
            certain: safe_until(sent_at, ttl),
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
        entries: &mut Vec<FieldEntry>,
        name: &str,
        field: &Arc<str>,
        kind: &'static str,
        renewal: Renewal,
        live: Live,
        count: u32,
        sent_at: Instant,
        ttl: Duration,
        now: Instant,
        order: &Order,
    ) -> Recorded {
        let id = live.id;
        let index = match entries.iter().position(|e| e.field == *field) {
            Some(i) => i,
            None => {
                entries.push(FieldEntry {
                    field: field.clone(),
                    order: order.clone(),
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
                tenure.status = Observed::new(HoldStatus {
                    lost: None,
                    ..status
                });
            } else {
                tenure.live.push(live);
                tenure.publish();
            }
            return Recorded {
                ticket: HoldTicket {
                    tenure: tenure.id,
                    id,
                    kind,
                    status: tenure.status.observe(),
                },
                new_tenure: false,
            };
        }
        if let Some(mut old) = entry.tenure.take() {
            // The field was absent (count 1): whatever this client held of
            // it is gone from Redis.
            if !old.live.is_empty() && old.lose(LostReason::Gone) {
                tracing::warn!(
                    lock = name,
                    owner = &**field,
                    "lock lost: a new acquisition by the same owner found it gone"
                );
            }
        }
        let (expiry, certain) = (later(sent_at, ttl), safe_until(sent_at, ttl));
        let status = HoldStatus {
            lost: None,
            expires: (!live.renews).then_some(expiry),
            valid_until: certain,
        };
        let tenure = Tenure {
            id: self.next_id(),
            kind,
            renewal,
            forgotten: 0,
            gone: false,
            live: vec![live],
            expiry,
            certain,
            status: Observed::new(status),
            watched: None,
        };
        let ticket = HoldTicket {
            tenure: tenure.id,
            id,
            kind,
            status: tenure.status.observe(),
        };
        entry.tenure = Some(tenure);
        Recorded {
            ticket,
            new_tenure: true,
        }
    }

    /// A guard's hold is about to be released: whether to send the unlock.
    /// The hold leaves the tenure's live holds either way (a watchdog hold
    /// stops being renewed when it was the last).
    pub(crate) fn unlocking(&self, name: &str, field: &str, ticket: &HoldTicket) -> Unlocking {
        telemetry::unheld(ticket.kind);
        let mut map = self.map.lock();
        let Some(tenure) = tenure_mut(&mut map, name, field, ticket.tenure) else {
            return Unlocking::Stale;
        };
        let Some(i) = tenure.live.iter().position(|l| l.id == ticket.id) else {
            return Unlocking::Stale;
        };
        // `remove`, not `swap_remove`: the live holds stay in the order they
        // were taken, newest last (see `unlocking_any`).
        tenure.live.remove(i);
        tenure.publish();
        Unlocking::Send
    }

    /// An unlock without a guard (Java style, `Lock::unlock`) is about to
    /// take one hold of `(name, field)` away: a hold no guard has (a
    /// forgotten one) if there is one, else the newest guard's, whose own
    /// release then sends nothing. The tenure it applies to, if any.
    pub(crate) fn unlocking_any(&self, name: &str, field: &str) -> Option<u64> {
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
    pub(crate) fn unlocked(&self, name: &str, field: &str, id: u64, reply: UnlockReply) {
        let mut map = self.map.lock();
        let Some(entries) = map.get_mut(name) else {
            return;
        };
        let Some(i) = entries.iter().position(|e| *e.field == *field) else {
            return;
        };
        let entry = &mut entries[i];
        let Some(tenure) = entry.tenure.as_mut().filter(|t| t.id == id) else {
            return;
        };
        // Still held, with holds of this client left: the tenure goes on.
        // With none left (no guard, none forgotten), it is over whatever the
        // key says: a read unlock replies "still held" while other readers
        // remain, and holds of the field this client did not take are not
        // its to watch or renew.
        if reply == UnlockReply::StillHeld && (!tenure.live.is_empty() || tenure.forgotten > 0) {
            return;
        }
        // Released to zero, or not held: the tenure is over. Its other
        // guards, if any, lost their holds with it.
        if !tenure.live.is_empty() && tenure.lose(LostReason::Gone) {
            tracing::warn!(
                lock = name,
                owner = field,
                "lock lost: an unlock of the same owner found its holds gone"
            );
        }
        entry.tenure = None;
        drop_unused(&mut map, name, i, 1);
    }

    /// The hold of a guard is kept in Redis without a guard (`forget`): it
    /// stays counted, but is no longer renewed.
    pub(crate) fn forgot(&self, name: &str, field: &str, ticket: &HoldTicket) {
        telemetry::unheld(ticket.kind);
        let mut map = self.map.lock();
        if let Some(tenure) = tenure_mut(&mut map, name, field, ticket.tenure) {
            if let Some(i) = tenure.live.iter().position(|l| l.id == ticket.id) {
                tenure.live.remove(i);
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

    /// What a watcher of tenure `id` of `(name, field)` is to do.
    pub(crate) fn watched(&self, name: &str, field: &str, id: u64) -> Watched {
        match tenure_mut(&mut self.map.lock(), name, field, id) {
            None => Watched::Ended,
            Some(t) if t.live.is_empty() => Watched::Releasing,
            Some(_) => Watched::Held,
        }
    }

    /// The watch of tenure `id` of `(name, field)` starts: a receiver that
    /// closes when the tenure ends, unless it ended already, has no guard
    /// left to tell, or is watched already.
    pub(crate) fn start_watch(
        &self,
        name: &str,
        field: &str,
        id: u64,
    ) -> Option<watch::Receiver<()>> {
        let mut map = self.map.lock();
        let tenure = tenure_mut(&mut map, name, field, id)?;
        if tenure.live.is_empty() || tenure.watched.is_some() {
            return None;
        }
        let alive = watch::Sender::new(());
        let receiver = alive.subscribe();
        tenure.watched = Some(alive);
        Some(receiver)
    }

    /// Whether tenure `id` is the current one of `(name, field)`.
    pub(crate) fn is_current(&self, name: &str, field: &str, id: u64) -> bool {
        tenure_mut(&mut self.map.lock(), name, field, id).is_some()
    }

    /// Whether `hold` is still one of its tenure's live holds, and that
    /// tenure the field's current one.
    pub(crate) fn is_live(&self, name: &str, field: &str, ticket: &HoldTicket) -> bool {
        tenure_mut(&mut self.map.lock(), name, field, ticket.tenure)
            .is_some_and(|t| t.live.iter().any(|l| l.id == ticket.id))
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
        if self.is_forcing(name) {
            // Perhaps by that forced unlock: its reply says (`Forcing`).
            tenure.gone = true;
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
        ticket: &HoldTicket,
        lease: Duration,
        sent_at: Instant,
    ) -> bool {
        let mut map = self.map.lock();
        let Some(tenure) = tenure_mut(&mut map, name, field, ticket.tenure) else {
            return false;
        };
        if !tenure.status.is_observed_by(&ticket.status) || tenure.lost_at(Instant::now()).is_some()
        {
            return false;
        }
        let Some(live) = tenure.live.iter_mut().find(|l| l.id == ticket.id) else {
            return false;
        };
        live.lease = Lease::Fixed(lease);
        live.renews = false;
        live.ends = later(sent_at, lease);
        live.certain = safe_until(sent_at, lease);
        tenure.confirmed(sent_at, lease);
        tenure.publish();
        true
    }

    /// An unlock of tenure `id` of `(name, field)` that sets the owner's
    /// remaining time to what its remaining holds need (a read unlock,
    /// docs/PROTOCOL.md §5.3) is about to be sent: that need, from now (the
    /// watchdog timeout if one of them is renewed, else the latest end its
    /// own command gave one of them), after lowering what the tenure's
    /// guards believe to it. `None` where it is not known (a forgotten hold
    /// is left, or no hold is): the unlock then keeps what Redis has.
    pub(crate) fn remaining_need(&self, name: &str, field: &str, id: u64) -> Option<Duration> {
        let mut map = self.map.lock();
        let tenure = tenure_mut(&mut map, name, field, id)?;
        if tenure.forgotten > 0 || tenure.live.is_empty() {
            return None;
        }
        // A renewed hold needs the watchdog timeout from the unlock on (the
        // renewals keep it so); another, what its own command gave it.
        let now = Instant::now();
        let (mut ends, mut certain) = (now, now);
        for live in &tenure.live {
            let (e, c) = if live.renews {
                (later(now, self.watchdog), safe_until(now, self.watchdog))
            } else {
                (live.ends, live.certain)
            };
            ends = ends.max(e);
            certain = certain.max(c);
        }
        tenure.expiry = tenure.expiry.min(ends);
        tenure.certain = tenure.certain.min(certain);
        tenure.publish();
        Some(ends.saturating_duration_since(now))
    }
}
