//! What each guard may believe, derived from docs/PROTOCOL.md §2.9 ("The
//! hold registry: what a guard may believe, and how it learns a loss"),
//! §2.5 and §2.6, not from the registry's code: the model of the guards'
//! side, next to the Redis-side models of `locks.rs` and `rw.rs`.
//!
//! * A *tenure* is the life of one owner field in Redis as its client
//!   knows it, from the acquisition that created the field (the acquire
//!   replied a hold count of 1) to the release that ends it or the moment
//!   it is found gone. Every guard belongs to the tenure it was taken in.
//! * A *status* is what a tenure's guards observe; a hold taken after the
//!   status was lost starts a new one, and a lost status is never untold.
//! * A status is lost when the hold is found gone (`Gone`: a fresh take by
//!   the same owner, an unlock that finds the field absent, a renewal, a
//!   release-channel message while `lost()` is awaited, a keyspace
//!   notification, an `extend`), force-unlocked through its own client
//!   (`ForceUnlocked`), or when its certainty passes (`LeaseEnded` while
//!   the watchdog does not renew it, `NotRenewed` while it does).
//! * The certainty is `expires_at()` less the drift margin; `expires_at()`
//!   is the largest `send time + TTL` over the confirmed commands of the
//!   tenure that set its key's TTL to at least that TTL, and `None` while
//!   the watchdog renews the tenure (a live guard taken without a lease, in
//!   a status not lost).
//!
//! The model does not see renewal runs: while a tenure is renewed its
//! `expires_at()` is `None`; when the renewal stops, the first observed
//! `expires_at()` is checked against the bounds the model knows (the
//! commands it sent, the stop time plus the watchdog, and the key's real
//! `PTTL`: never later than Redis's expiry) and then taken as the fact
//! that later observations must keep.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redisson_lock::{AnyKind, Error, Fenced, LockGuard, LostReason, Read, Write};
use tokio::task::JoinHandle;

use super::keys::Ttl;
use super::{Exp, Step, StepResult, Stop, DRIFT, HEAR, MARGIN, WATCHDOG};

/// Which field of an owner: the one of an exclusive lock, or a half of a
/// read-write lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Half {
    Lock,
    Read,
    Write,
}

/// An owner field: `(owner, half)`.
pub type Field = (usize, Half);

/// What became of a guard object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GState {
    /// Held: its hold counts among its tenure's live holds.
    Live,
    /// Its hold was taken away by an unlock without a guard: its own
    /// unlock sends nothing.
    Taken,
    /// `forget()`: the hold stays counted, the guard is gone.
    Forgotten,
    /// Unlocked (or consumed by `downgrade`).
    Released,
}

/// One guard, as the model sees it.
#[derive(Clone, Debug)]
pub struct GuardM {
    pub field: Field,
    pub tenure: usize,
    /// Its explicit lease (`None`: the watchdog).
    pub lease: Option<Duration>,
    pub state: GState,
    /// Lost, and why.
    pub lost: Option<LostReason>,
    /// Lost in this step by an event or a renewal: its `lost()` must fire
    /// within this long.
    pub hear: Option<Duration>,
    /// The expiry its own command (its acquisition, or its last `extend`)
    /// set: what it needs (§5.3, a read unlock).
    pub own: Ttl,
}

/// One tenure.
#[derive(Clone, Debug)]
pub struct Tenure {
    pub field: Field,
    pub ended: bool,
    /// The field's hold count in Redis as the client was last told.
    pub count: u32,
    /// Where `expires_at()` lies, from the confirmed TTL-setting commands.
    pub exp: Ttl,
    /// The guards of the current status.
    pub status: Vec<usize>,
    pub status_lost: Option<LostReason>,
}

/// The guards' side of one case.
#[derive(Clone)]
pub struct Guards {
    pub tenures: Vec<Tenure>,
    pub guards: Vec<GuardM>,
    current: BTreeMap<Field, usize>,
}

/// How an unlock that was sent was answered (§2.3, §4.6, §5.3, §5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `0`: the lock stays held (by the field; for a read unlock, by
    /// someone: the field may have left, and the client, told only "still
    /// held", keeps the tenure as if a hold were left).
    StillHeld,
    /// `1`: released (the field is gone).
    Released,
    /// nil: the field did not hold.
    NotHeld,
}

impl Guards {
    pub fn new() -> Guards {
        Guards {
            tenures: Vec::new(),
            guards: Vec::new(),
            current: BTreeMap::new(),
        }
    }

    /// The current tenure of `field`, if any.
    pub fn current(&self, field: Field) -> Option<usize> {
        self.current.get(&field).copied()
    }

    /// Whether the watchdog renews tenure `t`: a live guard taken without a
    /// lease, in a status not lost (§2.6 "Which holds").
    pub fn renewing(&self, t: usize) -> bool {
        let tenure = &self.tenures[t];
        !tenure.ended
            && tenure.status_lost.is_none()
            && self.guards.iter().any(|g| {
                g.tenure == t && g.state == GState::Live && g.lease.is_none() && g.lost.is_none()
            })
    }

    /// Whether `field`'s current tenure is renewed.
    pub fn field_renewing(&self, field: Field) -> bool {
        self.current(field).is_some_and(|t| self.renewing(t))
    }

    /// Whether live guard `g`'s real twin shows the `expires_at()` the model
    /// allows it (`None` while renewed, else within its tenure's window).
    pub fn shows(&self, g: usize, real: &Real) -> bool {
        let t = self.guards[g].tenure;
        let ms = Duration::from_millis(1);
        match real.expires_at() {
            None => self.renewing(t),
            Some(e) => {
                let w = self.tenures[t].exp;
                !self.renewing(t) && e + ms >= w.lo && e <= w.hi + ms
            }
        }
    }

    /// Whether the live guards' real twins (`reals`, and `newest` for the
    /// step's new guard) show the losses the model says happened at once:
    /// lost where it says so, not lost where it says not. A loss the model
    /// gives time to be heard (an event, a renewal) is not compared.
    pub fn losses_agree(&self, reals: &Reals, newest: Option<(usize, &Real)>) -> bool {
        (0..self.guards.len()).all(|g| {
            let model = &self.guards[g];
            let real = match newest {
                Some((n, real)) if n == g => Some(real),
                _ => reals.get(g),
            };
            match (real, model.state, model.lost, model.hear) {
                (Some(real), GState::Live, Some(_), None) => real.is_lost(),
                (Some(real), GState::Live, None, _) => !real.is_lost(),
                _ => true,
            }
        })
    }

    /// The renewed tenures, to compare before and after a step.
    pub fn renewing_now(&self) -> Vec<bool> {
        (0..self.tenures.len()).map(|t| self.renewing(t)).collect()
    }

    /// Pick the guard `i` counted from the newest (modulo their number),
    /// among the guards that still exist (live or taken) and pass `which`.
    /// A taken guard's hold was taken away by an unlock without a guard:
    /// §2.9 says its unlock sends nothing, and nothing of its other calls,
    /// so only `unlock` picks one.
    pub fn pick(&self, i: usize, which: impl Fn(&GuardM) -> bool) -> Option<usize> {
        let held: Vec<usize> = (0..self.guards.len())
            .filter(|&g| {
                let guard = &self.guards[g];
                matches!(guard.state, GState::Live | GState::Taken) && which(guard)
            })
            .collect();
        (!held.is_empty()).then(|| held[held.len() - 1 - i % held.len()])
    }

    /// A Rust acquisition by `field` was confirmed with the field's new hold
    /// count `count`, its command setting the key's TTL to at least what
    /// `confirmed` says (`send time + TTL`). Returns the new guard.
    pub fn acquired(
        &mut self,
        field: Field,
        count: u32,
        lease: Option<Duration>,
        confirmed: Ttl,
    ) -> usize {
        let g = self.guards.len();
        let t = match self.current(field) {
            Some(t) if count > 1 => {
                let tenure = &mut self.tenures[t];
                tenure.count = count;
                tenure.exp = tenure.exp.max(confirmed);
                if tenure.status_lost.is_some() {
                    // A new status: the old one stays lost.
                    tenure.status.clear();
                    tenure.status_lost = None;
                }
                t
            }
            old => {
                // Count 1: the field was absent; whatever tenure the client
                // had of it is gone from Redis (§2.9 "Tenures").
                if let Some(old) = old {
                    self.end(old, LostReason::Gone, None);
                }
                self.tenures.push(Tenure {
                    field,
                    ended: false,
                    count,
                    exp: confirmed,
                    status: Vec::new(),
                    status_lost: None,
                });
                let t = self.tenures.len() - 1;
                self.current.insert(field, t);
                t
            }
        };
        self.tenures[t].status.push(g);
        self.guards.push(GuardM {
            field,
            tenure: t,
            lease,
            state: GState::Live,
            lost: None,
            hear: None,
            own: confirmed,
        });
        g
    }

    /// Mark tenure `t`'s current status lost for `reason` (a status already
    /// lost keeps its reason); its guards must hear it within `hear`
    /// (`None`: at once, the call that learnt it has returned).
    pub fn lose(&mut self, t: usize, reason: LostReason, hear: Option<Duration>) {
        let tenure = &mut self.tenures[t];
        if tenure.status_lost.is_some() {
            return;
        }
        tenure.status_lost = Some(reason);
        for &g in &tenure.status {
            let guard = &mut self.guards[g];
            if guard.lost.is_none() {
                guard.lost = Some(reason);
                guard.hear = hear;
            }
        }
    }

    /// End tenure `t`, its status lost for `reason` unless it already was.
    pub fn end(&mut self, t: usize, reason: LostReason, hear: Option<Duration>) {
        self.lose(t, reason, hear);
        let tenure = &mut self.tenures[t];
        tenure.ended = true;
        if self.current.get(&tenure.field) == Some(&t) {
            self.current.remove(&tenure.field);
        }
    }

    /// Guard `g` is unlocked: the tenure whose reply the unlock applies to,
    /// or `None` if nothing is sent (a guard of an ended tenure, or one
    /// whose hold was taken away: `NotHeld`).
    pub fn releasing(&mut self, g: usize) -> Option<usize> {
        let guard = &mut self.guards[g];
        let live = guard.state == GState::Live;
        guard.state = GState::Released;
        let (t, field) = (guard.tenure, guard.field);
        (live && self.current(field) == Some(t)).then_some(t)
    }

    /// An unlock without a guard by `field` (§2.9): it takes a hold no
    /// guard has (a forgotten one) if there is one, else the newest live
    /// guard's. The tenure whose reply it applies to.
    pub fn releasing_any(&mut self, field: Field) -> Option<usize> {
        let t = self.current(field)?;
        let live: Vec<usize> = (0..self.guards.len())
            .filter(|&g| self.guards[g].tenure == t && self.guards[g].state == GState::Live)
            .collect();
        if self.tenures[t].count as usize <= live.len() {
            if let Some(&newest) = live.last() {
                self.guards[newest].state = GState::Taken;
            }
        } else if let Some(forgotten) = (0..self.guards.len())
            .find(|&g| self.guards[g].tenure == t && self.guards[g].state == GState::Forgotten)
        {
            // The hold it takes is a forgotten one: no longer counted.
            self.guards[forgotten].state = GState::Released;
        }
        Some(t)
    }

    /// A read unlock for tenure `t` (`None`: none known), sent at `t0` and
    /// answered at `t1`, sets the owner's remaining time to what its
    /// remaining guards need (§5.3): that need, where the client knows it
    /// (a live guard is left, and no forgotten hold), after lowering the
    /// guards' expiry to it. A renewed guard needs the watchdog timeout from
    /// the unlock; another what its own command set, the unlock landing up
    /// to its round trip later (and rounded up to the millisecond).
    pub fn remaining_need(&mut self, t: Option<usize>, t0: Instant, t1: Instant) -> Option<Ttl> {
        let t = t?;
        let of_tenure = |g: &&GuardM| g.tenure == t;
        if self
            .guards
            .iter()
            .filter(of_tenure)
            .any(|g| g.state == GState::Forgotten)
        {
            return None;
        }
        let renewing = self.renewing(t);
        let slack = (t1 - t0) + Duration::from_millis(1);
        let live: Vec<&GuardM> = self
            .guards
            .iter()
            .filter(of_tenure)
            .filter(|g| g.state == GState::Live)
            .collect();
        let (mut need, mut own): (Option<Ttl>, Option<Ttl>) = (None, None);
        for g in live {
            let (n, o) = if renewing && g.lease.is_none() && g.lost.is_none() {
                let w = Ttl::set(WATCHDOG, t0, t1 + Duration::from_millis(1));
                (w, w)
            } else {
                // Sent from when the client computes it, at least 1 ms:
                // an end already past becomes "now".
                (
                    Ttl {
                        lo: g.own.lo.max(t0),
                        hi: g.own.hi.max(t1) + slack,
                    },
                    g.own,
                )
            };
            need = Some(need.map_or(n, |m| m.max(n)));
            own = Some(own.map_or(o, |m| m.max(o)));
        }
        let tenure = &mut self.tenures[t];
        tenure.exp = tenure.exp.min(own?);
        // Lowered to a time already past: its guards are lost now.
        self.flip(t1);
        need
    }

    /// Apply the reply of an unlock sent for tenure `t`.
    pub fn replied(&mut self, t: Option<usize>, reply: Reply) {
        let Some(t) = t else { return };
        if self.tenures[t].ended {
            return;
        }
        match reply {
            Reply::StillHeld => {
                let c = &mut self.tenures[t].count;
                *c = c.saturating_sub(1).max(1);
            }
            // The field is gone: so are the holds of the guards left.
            Reply::Released | Reply::NotHeld => self.end(t, LostReason::Gone, None),
        }
    }

    /// `forget()` of guard `g`: its hold stays counted, unrenewed.
    pub fn forget(&mut self, g: usize) {
        self.guards[g].state = GState::Forgotten;
    }

    /// Whether `extend`/`reenter`/`downgrade` of guard `g` are refused
    /// before anything is sent: its status is lost (its `is_lost()`).
    pub fn refused(&self, g: usize) -> bool {
        self.guards[g].lost.is_some()
    }

    /// `extend(lease)` of live guard `g` was sent at `t0`, answered at
    /// `t1`: the field was there (`found`) or not.
    pub fn extended(&mut self, g: usize, lease: Duration, t0: Instant, t1: Instant, found: bool) {
        let t = self.guards[g].tenure;
        if found {
            self.tenures[t].exp = self.tenures[t].exp.max(Ttl::set(lease, t0, t1));
            self.guards[g].lease = Some(lease);
            self.guards[g].own = Ttl::set(lease, t0, t1);
        } else if self.current(self.guards[g].field) == Some(t) {
            self.end(t, LostReason::Gone, None);
        }
    }

    /// A forced unlock through the client of Rust owners `on_client`
    /// removed the key: every tenure of the lock on that client is lost
    /// (§2.5).
    pub fn force_unlocked_here(&mut self, on_client: impl Fn(usize) -> bool) {
        let ts: Vec<usize> = self
            .current
            .iter()
            .filter(|((o, _), _)| on_client(*o))
            .map(|(_, &t)| t)
            .collect();
        for t in ts {
            self.end(t, LostReason::ForceUnlocked, None);
        }
    }

    /// After a step: tenures whose field Redis no longer has
    /// (`in_redis(field)` false), not known lost and with live guards, hear
    /// of it within [`HEAR`]: client tracking (§2.10, on by default on
    /// every client) tells every change of a held key, whoever made it,
    /// within a round trip (a hold's first 10 ms: when its watch starts);
    /// keyspace notifications (client 0) and the release-channel watcher
    /// (kinds with a channel) tell most of them too.
    pub fn hear_removals(&mut self, in_redis: impl Fn(Field) -> bool) {
        let ts: Vec<usize> = self.current.values().copied().collect();
        for t in ts {
            let field = self.tenures[t].field;
            let live = self
                .guards
                .iter()
                .any(|g| g.tenure == t && g.state == GState::Live);
            if in_redis(field) || self.tenures[t].status_lost.is_some() || !live {
                continue;
            }
            self.end(t, LostReason::Gone, Some(HEAR));
        }
    }

    /// Renewals that stopped during a step (`before`: [`renewing_now`]
    /// before it) at `at`: the tenure's `expires_at()` is at most the last
    /// renewal's send time plus the watchdog.
    ///
    /// [`renewing_now`]: Self::renewing_now
    pub fn renewals_stopped(&mut self, before: &[bool], at: Instant) {
        for (t, &was) in before.iter().enumerate() {
            if was && !self.renewing(t) && self.tenures[t].status_lost.is_none() {
                self.tenures[t].exp = self.tenures[t].exp.renewal_stopped(at);
            }
        }
    }

    /// Statuses whose certainty has certainly passed at `now` are lost
    /// (`LeaseEnded`: not renewed).
    pub fn flip(&mut self, now: Instant) {
        for t in 0..self.tenures.len() {
            let tenure = &self.tenures[t];
            if tenure.status_lost.is_none()
                && !tenure.status.is_empty()
                && !self.renewing(t)
                && tenure.exp.hi + MARGIN <= now
            {
                self.lose(t, LostReason::LeaseEnded, None);
            }
        }
    }

    /// The windows in which a status may be lost by its certainty: from
    /// the earliest `expires_at()` less the drift margin to the latest.
    pub fn windows(&self) -> Vec<Exp> {
        (0..self.tenures.len())
            .filter(|&t| self.observable(t) && !self.renewing(t))
            .map(|t| {
                let e = self.tenures[t].exp;
                Exp::At {
                    lo: e.lo.checked_sub(DRIFT).unwrap_or(e.lo),
                    hi: e.hi,
                }
            })
            .collect()
    }

    /// Whether tenure `t`'s current status, not lost, has a live guard to
    /// observe it.
    fn observable(&self, t: usize) -> bool {
        let tenure = &self.tenures[t];
        tenure.status_lost.is_none()
            && tenure
                .status
                .iter()
                .any(|&g| self.guards[g].state == GState::Live)
    }
}

/// A guard's `lost()`, whatever its kind.
type Lost = std::pin::Pin<Box<dyn std::future::Future<Output = LostReason> + Send>>;

/// A real guard of any kind the models use.
pub enum Real {
    Any(LockGuard<AnyKind>),
    Fenced(LockGuard<Fenced>),
    Read(LockGuard<Read>),
    Write(LockGuard<Write>),
}

macro_rules! each {
    ($real:expr, $g:ident => $e:expr) => {
        match $real {
            Real::Any($g) => $e,
            Real::Fenced($g) => $e,
            Real::Read($g) => $e,
            Real::Write($g) => $e,
        }
    };
}

impl Real {
    pub fn is_lost(&self) -> bool {
        each!(self, g => g.is_lost())
    }
    pub fn lost_reason(&self) -> Option<LostReason> {
        each!(self, g => g.lost_reason())
    }
    pub fn expires_at(&self) -> Option<Instant> {
        each!(self, g => g.expires_at())
    }
    pub fn lease(&self) -> Option<Duration> {
        each!(self, g => g.lease())
    }
    fn lost(&self) -> Lost {
        each!(self, g => Box::pin(g.lost()) as Lost)
    }
    pub fn forget(self) {
        each!(self, g => g.forget())
    }
    pub async fn unlock(self) -> Result<(), Error> {
        each!(self, g => g.unlock().await)
    }
    pub async fn extend(&mut self, lease: Duration) -> Result<(), Error> {
        each!(self, g => g.extend(lease).await)
    }
    pub async fn reenter(&self) -> Result<Real, Error> {
        Ok(match self {
            Real::Any(g) => Real::Any(g.reenter().await?),
            Real::Fenced(g) => Real::Fenced(g.reenter().await?),
            Real::Read(g) => Real::Read(g.reenter().await?),
            Real::Write(g) => Real::Write(g.reenter().await?),
        })
    }
}

/// A real guard beside the model's, with a task awaiting its `lost()`
/// from the moment it was taken (so the release-channel watcher runs for
/// it, §2.6).
pub struct Held {
    pub real: Option<Real>,
    task: Option<JoinHandle<LostReason>>,
    /// What `lost()` resolved to, once it did.
    fired: Option<LostReason>,
}

impl Held {
    /// No real guard (the model's guard had none: a step about to fail,
    /// or a hold taken and released within one call).
    pub fn empty() -> Held {
        Held {
            real: None,
            task: None,
            fired: None,
        }
    }

    pub fn new(real: Real) -> Held {
        let task = tokio::spawn(real.lost());
        Held {
            real: Some(real),
            task: Some(task),
            fired: None,
        }
    }

    /// The guard object, taken out (to unlock, forget or downgrade it);
    /// its `lost()` is no longer awaited.
    pub fn take(&mut self) -> Option<Real> {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.real.take()
    }

    /// Whether `lost()` has resolved (and to what), without waiting.
    fn poll(&mut self) -> Option<LostReason> {
        if self.fired.is_none() && self.task.as_ref().is_some_and(|t| t.is_finished()) {
            let task = self.task.take().expect("finished task");
            self.fired = futures::FutureExt::now_or_never(task).and_then(Result::ok);
        }
        self.fired
    }

    /// Wait at most `bound` for `lost()` to resolve.
    async fn fire(&mut self, bound: Duration) -> Option<LostReason> {
        if self.fired.is_none() {
            if let Some(task) = self.task.as_mut() {
                if let Ok(Ok(reason)) = tokio::time::timeout(bound, task).await {
                    self.fired = Some(reason);
                    self.task = None;
                }
            }
        }
        self.fired
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What one guard showed at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    is_lost: bool,
    lost: Option<LostReason>,
    expires: Option<Instant>,
    lease: Option<Duration>,
    fired: Option<LostReason>,
}

/// The real guards beside the model's (index = the model's guard id).
#[derive(Default)]
pub struct Reals(pub Vec<Held>);

impl Reals {
    /// Guard `g`'s real guard is `real`.
    pub fn set(&mut self, g: usize, real: Real) {
        self.reserve(g);
        self.0[g] = Held::new(real);
    }

    /// A real acquisition's `guard`: the model's newest guard's when the
    /// model acquired too, else one of `strays` (a hold the model did not
    /// expect, which the case reports; kept so that dropping it changes
    /// nothing meanwhile).
    pub fn keep(
        &mut self,
        guard: Real,
        model_acquired: bool,
        newest: usize,
        strays: &mut Vec<Real>,
    ) {
        if model_acquired {
            self.set(newest, guard);
        } else {
            strays.push(guard);
        }
    }

    /// Make room up to guard `g` (without a real guard).
    pub fn reserve(&mut self, g: usize) {
        while self.0.len() <= g {
            self.0.push(Held::empty());
        }
    }

    pub fn get(&self, g: usize) -> Option<&Real> {
        self.0.get(g)?.real.as_ref()
    }

    pub fn get_mut(&mut self, g: usize) -> Option<&mut Real> {
        self.0.get_mut(g)?.real.as_mut()
    }

    pub fn take(&mut self, g: usize) -> Option<Real> {
        self.0.get_mut(g)?.take()
    }

    /// Wait for the guards that must hear of a loss by an event or a
    /// renewal within a bound; a guard whose `lost()` does not fire in
    /// time fails the case.
    pub async fn await_heard(&mut self, step: &mut Step<'_>, m: &mut Guards) -> StepResult<()> {
        for g in 0..m.guards.len() {
            let Some(bound) = m.guards[g].hear.take() else {
                continue;
            };
            if m.guards[g].state != GState::Live {
                continue;
            }
            self.reserve(g);
            let fired = self.0[g].fire(bound).await;
            if fired.is_none() {
                let (o, half) = m.guards[g].field;
                return step.mismatch(format!(
                    "guard #{g} (owner{o} {half:?}): lost() did not fire within {bound:?}; model: {:?}",
                    m.guards[g].lost
                ));
            }
        }
        Ok(())
    }

    /// What every live guard shows now.
    pub fn snapshot(&mut self, m: &Guards) -> Vec<Option<Seen>> {
        if let Some(last) = m.guards.len().checked_sub(1) {
            self.reserve(last);
        }
        (0..m.guards.len())
            .map(|g| {
                if m.guards[g].state != GState::Live {
                    return None;
                }
                let held = &mut self.0[g];
                let fired = held.poll();
                let real = held.real.as_ref()?;
                Some(Seen {
                    is_lost: real.is_lost(),
                    lost: real.lost_reason(),
                    expires: real.expires_at(),
                    lease: real.lease(),
                    fired,
                })
            })
            .collect()
    }

    /// Compare what the live guards showed (`seen`, at `at`) with the
    /// model: lost or not and why, whether `lost()` fired, the lease, and
    /// `expires_at()` (within the model's bounds and never later than
    /// `bound(field)`, the real expiry Redis's `PTTL`s prove). Learns the
    /// `expires_at()` of tenures whose renewal stopped.
    pub async fn compare(
        &mut self,
        step: &mut Step<'_>,
        m: &mut Guards,
        seen: &[Option<Seen>],
        bound: impl Fn(Field) -> Option<Instant>,
    ) -> StepResult<()> {
        use std::sync::atomic::Ordering::Relaxed;
        for (g, s) in seen.iter().enumerate() {
            let Some(s) = *s else { continue };
            let model = m.guards[g].clone();
            let (o, half) = model.field;
            let who = format!("guard #{g} (owner{o} {half:?})");
            step.env.stats.guards.fetch_add(1, Relaxed);
            step.expect(&format!("{who}.lease()"), s.lease, model.lease)?;
            // `is_lost()` and `lost_reason()` are read one after the other:
            // a certainty passing between them is a window the settle
            // logic keeps steps out of.
            let is_lost = (s.is_lost, model.lost.is_some());
            match model.lost {
                Some(reason) => {
                    step.env.stats.lost.fetch_add(1, Relaxed);
                    step.expect(&format!("{who}.lost_reason()"), s.lost, Some(reason))?;
                    step.expect(&format!("{who}.is_lost()"), is_lost.0, is_lost.1)?;
                    let fired = match s.fired {
                        Some(r) => Some(r),
                        None => self.0[g].fire(HEAR).await,
                    };
                    step.expect(&format!("{who}.lost() resolved to"), fired, Some(reason))?;
                }
                None => {
                    let renewing = m.renewing(model.tenure);
                    if renewing && s.lost == Some(LostReason::NotRenewed) {
                        return step
                            .stalled(&format!("{who}: a renewal came too late (NotRenewed)"));
                    }
                    step.expect(&format!("{who}.lost_reason()"), s.lost, None)?;
                    step.expect(&format!("{who}.is_lost()"), is_lost.0, is_lost.1)?;
                    step.expect(&format!("{who}.lost() fired"), s.fired, None)?;
                    if renewing {
                        if let Some(e) = s.expires {
                            return step.mismatch(format!(
                                "{who}.expires_at(): real {} (not renewed), model None (renewed)",
                                signed(e)
                            ));
                        }
                        continue;
                    }
                    let Some(e) = s.expires else {
                        let w = m.tenures[model.tenure].exp;
                        return step.mismatch(format!(
                            "{who}.expires_at(): real None (renewed), model between {} and {}",
                            signed(w.lo),
                            signed(w.hi)
                        ));
                    };
                    let w = m.tenures[model.tenure].exp;
                    let ms = Duration::from_millis(1);
                    if e + ms < w.lo || e > w.hi + ms {
                        return step.mismatch(format!(
                            "{who}.expires_at(): real {}, model between {} and {}",
                            signed(e),
                            signed(w.lo),
                            signed(w.hi)
                        ));
                    }
                    if let Some(b) = bound(model.field) {
                        if e > b {
                            return step.mismatch(format!(
                                "{who}.expires_at() is {:?} after the key can expire per PTTL",
                                e - b
                            ));
                        }
                    }
                    m.tenures[model.tenure].exp = Ttl { lo: e, hi: e };
                }
            }
        }
        Ok(())
    }

    /// Take the `expires_at()` the live guards showed as the model's fact
    /// where it lies within the model's bounds (before the step's windows
    /// are checked; [`compare`](Self::compare) checks it again).
    pub fn learn(&self, m: &mut Guards, seen: &[Option<Seen>]) {
        for (g, s) in seen.iter().enumerate() {
            let (Some(s), model) = (*s, &m.guards[g]) else {
                continue;
            };
            let t = model.tenure;
            if model.lost.is_some() || s.lost.is_some() || m.renewing(t) {
                continue;
            }
            if let Some(e) = s.expires {
                let w = m.tenures[t].exp;
                let ms = Duration::from_millis(1);
                if e + ms >= w.lo && e <= w.hi + ms {
                    m.tenures[t].exp = Ttl { lo: e, hi: e };
                }
            }
        }
    }
}

/// An instant as a signed offset from now, for transcripts.
fn signed(at: Instant) -> String {
    let now = Instant::now();
    if at >= now {
        format!("+{}ms", (at - now).as_millis())
    } else {
        format!("-{}ms", (now - at).as_millis())
    }
}

/// `Stop` helpers for guard checks.
impl Step<'_> {
    /// A step made uncertain by a stall the crate reported (a renewal run
    /// late): skipped, not a failure.
    pub fn stalled(&mut self, why: &str) -> StepResult<()> {
        use std::sync::atomic::Ordering::Relaxed;
        self.env.stats.skipped.fetch_add(1, Relaxed);
        self.env.stats.count(&self.kind, 2);
        self.log
            .push_str(&format!("  [SKIPPED: {why}; case stopped]"));
        Err(Stop::Stalled)
    }
}
