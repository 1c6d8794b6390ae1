//! The exclusive lock kinds (RLock, non-reentrant, fair, non-reentrant fair,
//! spin, fenced): a model of who holds the hash `N`, how often, until when
//! (the Redis commands of docs/PROTOCOL.md §2.2–§2.5, §4.3–§4.7, §6), the
//! fencing token and the fair queue, and of what every guard believes
//! ([`guards`](super::guards), §2.9), run against the real crate; with the
//! Java peer, the real Redisson is an owner too (RLock: re-entry resets the
//! TTL to the lease, an unlock that leaves holds sets its watchdog timeout).

use std::fmt;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redisson_lock::{AnyKind, Error, Fenced, LostReason, OwnedLock};

use super::guards::{GState, Guards, Half, Real, Reals, Reply};
use super::java::{self, Java};
use super::keys::{Slack, Ttl};
use super::lock_waits::{cancel_waiter, check_state, handover, read_state, State, Waiter};
use super::{
    ms, try_lock, Env, Exp, Step, StepResult, JAVA_WATCHDOG, LEASE, LONG_LEASE, OWNERS, WAIT,
    WATCHDOG,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    RLock,
    NonReentrant,
    Fair,
    NonReentrantFair,
    Spin,
    Fenced,
}

impl Kind {
    pub(super) fn reentrant(self) -> bool {
        !matches!(self, Kind::NonReentrant | Kind::NonReentrantFair)
    }
    pub(super) fn fair(self) -> bool {
        matches!(self, Kind::Fair | Kind::NonReentrantFair)
    }
    /// Whether its releases publish on one channel a guard's `lost()`
    /// watcher listens on (§2.6).
    pub(super) fn channel(self) -> bool {
        !matches!(self, Kind::Fair | Kind::NonReentrantFair | Kind::Spin)
    }
}

/// The lease an acquisition or `extend` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    Watchdog,
    Short,
    Long,
}

impl Lease {
    pub fn get(self) -> Option<Duration> {
        match self {
            Lease::Watchdog => None,
            Lease::Short => Some(LEASE),
            Lease::Long => Some(LONG_LEASE),
        }
    }

    pub fn strategy() -> impl Strategy<Value = Lease> + Clone {
        prop_oneof![
            3 => Just(Lease::Watchdog),
            3 => Just(Lease::Short),
            1 => Just(Lease::Long),
        ]
    }

    pub fn explicit() -> impl Strategy<Value = Lease> + Clone {
        prop_oneof![Just(Lease::Short), Just(Lease::Long)]
    }
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            None => f.write_str("watchdog"),
            Some(d) => f.write_str(&ms(d)),
        }
    }
}

/// The sleeps a case may take: short, past a short lease, past the
/// watchdog (renewals must keep watchdog holds alive).
pub fn sleep() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        3 => Just(20u64),
        3 => Just(130u64),
        1 => Just(WATCHDOG.as_millis() as u64 + 150),
    ]
}

#[derive(Clone)]
pub enum Op {
    /// `with_owner(o).try_lock_for(wait, lease)`; a zero wait is `try_lock`.
    /// A Java owner: `tryLock(0, lease)`.
    Acquire {
        o: usize,
        wait: bool,
        lease: Lease,
    },
    /// `reenter()` of a guard: the `g`-th newest of those that exist.
    Reenter {
        g: usize,
    },
    /// `unlock()` of a guard.
    Unlock {
        g: usize,
    },
    /// `join!` of a guard's `unlock()` and a `try_lock(lease)` by the same
    /// owner (issue 34: a stale release racing a fresh take), the take
    /// polled first if `take_first`. Redis may run them in either order;
    /// the model accepts either, and holds the client to the one Redis's
    /// state shows. Not while a waiter waits (it could take the lock
    /// between the two).
    UnlockRetake {
        g: usize,
        lease: Lease,
        take_first: bool,
    },
    /// `with_owner(o).unlock()`, the unlock without a guard (Java's style;
    /// a Java owner: `unlock()`).
    OwnerUnlock {
        o: usize,
    },
    /// `forget()` of a guard.
    Forget {
        g: usize,
    },
    /// `extend(lease)` of a guard.
    Extend {
        g: usize,
        lease: Lease,
    },
    /// `force_unlock()` through owner `by`'s client (or Java's).
    ForceUnlock {
        by: usize,
    },
    /// A waiter of a busy lock, dropped once it has subscribed (or, for the
    /// spin lock, after some polls).
    CancelWaiter {
        o: usize,
        polls: u8,
    },
    /// A waiter left waiting in a task (`try_lock_for(10 s)`, watchdog) on
    /// a busy lock: fair kinds queue it; when the lock is freed (released,
    /// force-unlocked, or its lease ends) the head of the queue (fair) or
    /// one of the waiters takes it.
    SpawnWaiter {
        o: usize,
    },
    Sleep(u64),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = |o: &usize| java::who(*o);
        match self {
            Op::Acquire {
                o,
                wait: false,
                lease,
            } => write!(f, "{}.try_lock(lease={lease})", who(o)),
            Op::Acquire { o, lease, .. } if java::slot(*o).is_some() => {
                write!(f, "{}.lock(lease={lease}) if free, else try_lock", who(o))
            }
            Op::Acquire { o, lease, .. } => write!(
                f,
                "{}.try_lock_for(wait={}, lease={lease})",
                who(o),
                ms(WAIT)
            ),
            Op::Reenter { g } => write!(f, "guard[-{}].reenter()", g + 1),
            Op::Unlock { g } => write!(f, "guard[-{}].unlock()", g + 1),
            Op::UnlockRetake {
                g,
                lease,
                take_first,
            } => {
                let (a, b) = (
                    format!("guard[-{}].unlock()", g + 1),
                    format!("its_owner.try_lock(lease={lease})"),
                );
                match take_first {
                    false => write!(f, "join!({a}, {b})"),
                    true => write!(f, "join!({b}, {a})"),
                }
            }
            Op::OwnerUnlock { o } => write!(f, "{}.unlock()", who(o)),
            Op::Forget { g } => write!(f, "guard[-{}].forget()", g + 1),
            Op::Extend { g, lease } => write!(f, "guard[-{}].extend({lease})", g + 1),
            Op::ForceUnlock { by } => write!(f, "client_of({}).force_unlock()", who(by)),
            Op::CancelWaiter { o, polls } => write!(
                f,
                "{}.try_lock_for(2s) dropped (subscribed, +{polls} polls)",
                who(o)
            ),
            Op::SpawnWaiter { o } => write!(f, "spawn {}.try_lock_for(10s)", who(o)),
            Op::Sleep(d) => write!(f, "sleep({d}ms)"),
        }
    }
}

/// The owners of a case: Rust owners 0 and 1 (one per client) more often
/// than owner 2, so that owners re-take locks they held; the Java owners
/// (if any) likewise.
pub fn owner(owners: usize) -> impl Strategy<Value = usize> + Clone {
    let mut weighted = vec![(2, 0), (2, 1), (1, 2)];
    if owners > OWNERS {
        weighted.extend([(2, OWNERS), (1, OWNERS + 1)]);
    }
    proptest::strategy::Union::new_weighted(
        weighted.into_iter().map(|(w, o)| (w, Just(o))).collect(),
    )
}

/// Sequences over `kinds`, with `owners` owners (Rust ones first).
pub fn strategy_for(kinds: Vec<Kind>, owners: usize) -> impl Strategy<Value = (Kind, Vec<Op>)> {
    let kind = proptest::sample::select(kinds);
    let o = owner(owners);
    let rust = owner(OWNERS);
    let g = 0..4usize;
    let op = prop_oneof![
        6 => (o.clone(), any::<bool>(), Lease::strategy())
            .prop_map(|(o, wait, lease)| Op::Acquire { o, wait, lease }),
        2 => g.clone().prop_map(|g| Op::Reenter { g }),
        4 => g.clone().prop_map(|g| Op::Unlock { g }),
        2 => (g.clone(), Lease::strategy(), any::<bool>())
            .prop_map(|(g, lease, take_first)| Op::UnlockRetake { g, lease, take_first }),
        2 => o.clone().prop_map(|o| Op::OwnerUnlock { o }),
        1 => g.clone().prop_map(|g| Op::Forget { g }),
        2 => (g, Lease::explicit()).prop_map(|(g, lease)| Op::Extend { g, lease }),
        1 => o.prop_map(|by| Op::ForceUnlock { by }),
        1 => (rust.clone(), 0u8..20).prop_map(|(o, polls)| Op::CancelWaiter { o, polls }),
        1 => rust.prop_map(|o| Op::SpawnWaiter { o }),
        1 => sleep().prop_map(Op::Sleep),
    ];
    (kind, proptest::collection::vec(op, 1..25))
}

/// Every exclusive kind, Rust owners only.
pub fn strategy() -> impl Strategy<Value = (Kind, Vec<Op>)> {
    strategy_for(
        vec![
            Kind::RLock,
            Kind::NonReentrant,
            Kind::Fair,
            Kind::NonReentrantFair,
            Kind::Spin,
            Kind::Fenced,
        ],
        OWNERS,
    )
}

/// The model: Redis's view (holder, count, expiry of `N`, token, queue)
/// and the guards' view.
#[derive(Clone)]
pub(super) struct Model {
    pub(super) kind: Kind,
    pub(super) holder: Option<(usize, u32)>,
    pub(super) n: Ttl,
    pub(super) token: i64,
    /// Waiters left waiting, in the order they queued.
    pub(super) waiting: Vec<usize>,
    /// Since when the lock may have been free (a waiter may have taken it
    /// since then).
    pub(super) freed: Instant,
    pub(super) g: Guards,
}

#[derive(Debug, PartialEq)]
pub(super) enum Out {
    /// The two replies of a concurrent step, in the order of its `Op`.
    Pair(Box<Out>, Box<Out>),
    Acquired(Option<i64>),
    Busy,
    Released,
    NotHeld,
    NotReentrant,
    Bool(bool),
    Done,
    Other(String),
}

/// What decides renewals, taken before a step.
pub(super) struct Before {
    tenures: Vec<bool>,
    n: Option<usize>,
}

impl Model {
    /// Whether a renewal keeps `N` alive: its holder's tenure is renewed.
    pub(super) fn renewing(&self) -> bool {
        matches!(self.holder, Some((o, _)) if o < OWNERS && self.g.field_renewing((o, Half::Lock)))
    }

    pub(super) fn in_redis(&self, (o, _): (usize, Half)) -> bool {
        matches!(self.holder, Some((h, _)) if h == o)
    }

    fn expire(&mut self, now: Instant) {
        self.g.flip(now);
        if self.holder.is_some() && self.n.over(self.renewing(), now) {
            self.holder = None;
            self.freed = self.n.lo;
        }
        let g = &mut self.g;
        let holder = self.holder;
        g.hear_removals(|(o, _)| matches!(holder, Some((h, _)) if h == o));
    }

    pub(super) fn windows(&self) -> Vec<Exp> {
        let mut w = self.g.windows();
        if self.holder.is_some() {
            w.extend(self.n.window(self.renewing()));
        }
        w
    }

    pub(super) fn before(&self) -> Before {
        Before {
            tenures: self.g.renewing_now(),
            n: self
                .renewing()
                .then(|| self.holder.map(|(h, _)| h))
                .flatten(),
        }
    }

    /// After a step answered at `at`: renewals that stopped, and removals
    /// the guards hear of.
    pub(super) fn after(&mut self, before: &Before, at: Instant) {
        let holder = self.holder;
        self.g
            .hear_removals(|(o, _)| matches!(holder, Some((h, _)) if h == o));
        self.g.renewals_stopped(&before.tenures, at);
        if let (Some(was), Some((h, _))) = (before.n, self.holder) {
            if was == h && !self.renewing() {
                self.n = self.n.renewal_stopped(at);
            }
        }
    }

    /// An acquisition by owner `o` (`java`: by Redisson) with `lease`
    /// (`None`: its watchdog timeout), sent at `t0`, answered at `t1`: the
    /// hold count after it, or why not.
    pub(super) fn acquire(
        &mut self,
        o: usize,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Result<u32, Out> {
        let java = java::slot(o).is_some();
        let l = lease.unwrap_or(if java { JAVA_WATCHDOG } else { WATCHDOG });
        let set = Ttl::set(l, t0, t1);
        let count = match self.holder {
            Some((h, _)) if h != o => return Err(Out::Busy),
            Some(_) if !self.kind.reentrant() => return Err(Out::NotReentrant),
            Some((_, c)) => {
                // §2.2 step 2: `max(PTTL, lease)`; Redisson: `PEXPIRE lease`.
                self.n = if java { set } else { self.n.max(set) };
                c + 1
            }
            None => {
                self.n = set;
                1
            }
        };
        self.holder = Some((o, count));
        if self.kind == Kind::Fenced {
            self.token += 1;
        }
        Ok(count)
    }

    /// What an acquisition replies, from [`acquire`](Self::acquire).
    fn acquired(&self, r: &Result<u32, Out>) -> Out {
        match r {
            Ok(_) => Out::Acquired((self.kind == Kind::Fenced).then_some(self.token)),
            Err(Out::Busy) => Out::Busy,
            Err(Out::NotReentrant) => Out::NotReentrant,
            Err(_) => Out::Other("?".into()),
        }
    }

    /// An unlock by owner `o`'s field (§2.3, §4.6, §6.1; Redisson's sets
    /// `internalLockLeaseTime`, its watchdog timeout, when holds are left).
    pub(super) fn unlock(&mut self, o: usize, t0: Instant, t1: Instant) -> Reply {
        match self.holder {
            Some((h, c)) if h == o => {
                if c > 1 {
                    self.holder = Some((o, c - 1));
                    if java::slot(o).is_some() {
                        self.n = Ttl::set(JAVA_WATCHDOG, t0, t1);
                    }
                    Reply::StillHeld
                } else {
                    self.holder = None;
                    Reply::Released
                }
            }
            _ => Reply::NotHeld,
        }
    }
}

pub(super) fn out_of<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => ok(v),
        Err(Error::NotHeld { .. }) => Out::NotHeld,
        Err(Error::NotReentrant { .. }) => Out::NotReentrant,
        Err(e) => Out::Other(e.to_string()),
    }
}

/// The model's side of guard `g`'s `unlock()` by owner `o` (sent at
/// `t0`, answered at `t1`): what it replies.
fn model_unlock(m: &mut Model, g: usize, o: usize, t0: Instant, t1: Instant) -> Out {
    match m.g.releasing(g) {
        None => Out::NotHeld,
        t => {
            let reply = m.unlock(o, t0, t1);
            m.g.replied(t, reply);
            unlocked(reply)
        }
    }
}

fn unlocked(r: Reply) -> Out {
    match r {
        Reply::NotHeld => Out::NotHeld,
        _ => Out::Released,
    }
}

/// The lock as each Rust owner sees it (through its client).
pub(super) struct Handles {
    pub(super) any: Vec<OwnedLock<AnyKind>>,
    pub(super) fenced: Vec<OwnedLock<Fenced>>,
}

impl Handles {
    fn new(env: &Env, kind: Kind, name: &str) -> Handles {
        let mut h = Handles {
            any: Vec::new(),
            fenced: Vec::new(),
        };
        for o in 0..OWNERS {
            let c = env.client(o);
            let owner = Env::owner(o);
            let lock = match kind {
                Kind::RLock => c.lock(name).map(|l| l.into_erased()),
                Kind::NonReentrant => c.non_reentrant_lock(name).map(|l| l.into_erased()),
                Kind::Fair => c.fair_lock(name).map(|l| l.into_erased()),
                Kind::NonReentrantFair => c.non_reentrant_fair_lock(name).map(|l| l.into_erased()),
                Kind::Spin => c.spin_lock(name).map(|l| l.into_erased()),
                Kind::Fenced => c.fenced_lock(name).map(|l| l.into_erased()),
            };
            h.any.push(lock.expect("lock handle").with_owner(owner));
            h.fenced.push(
                c.fenced_lock(name)
                    .expect("fenced handle")
                    .with_owner(owner),
            );
        }
        h
    }
}

pub fn case(env: &Env, input: &(Kind, Vec<Op>)) -> Result<(), String> {
    let (kind, ops) = input;
    let what = match &env.java {
        Some(j) => format!("{kind:?} with Java {}", j.version),
        None => format!("{kind:?}"),
    };
    super::one_case(env, "model-lock", &what, async |step, name| {
        run(env, step, *kind, name, ops).await
    })
}

/// Everything a case runs with.
struct Case<'a> {
    env: &'a Env,
    kind: Kind,
    name: &'a str,
    h: Handles,
    m: Model,
    reals: Reals,
    /// Real guards the model did not expect (kept until the case ends:
    /// dropping one would unlock it in the background).
    strays: Vec<Real>,
    tasks: Vec<(usize, Waiter)>,
    /// Which guard the running step picked, for the transcript.
    resolved: String,
}

/// The fencing counter a fenced case starts from: above the server clock
/// in microseconds, so that every token is the counter's `INCR` (a counter
/// below the clock jumps to it, docs/PROTOCOL.md §6.2; tests/scripts and
/// tests/locks/data_loss.rs check that part).
const TOKEN_START: i64 = 1 << 52;

async fn run(env: &Env, step: &mut Step<'_>, kind: Kind, name: &str, ops: &[Op]) -> StepResult<()> {
    let token = if kind == Kind::Fenced {
        let key = format!("redisson_lock_token:{{{name}}}");
        let _: () =
            fred::interfaces::KeysInterface::set(&env.raw, key, TOKEN_START, None, None, false)
                .await
                .unwrap();
        TOKEN_START
    } else {
        0
    };
    let mut c = Case {
        env,
        kind,
        name,
        h: Handles::new(env, kind, name),
        m: Model {
            kind,
            holder: None,
            n: Ttl::set(Duration::ZERO, Instant::now(), Instant::now()),
            token,
            waiting: Vec::new(),
            freed: Instant::now(),
            g: Guards::new(),
        },
        reals: Reals::default(),
        strays: Vec::new(),
        tasks: Vec::new(),
        resolved: String::new(),
    };
    let result = c.steps(step, ops).await;
    for (_, task) in &c.tasks {
        task.abort();
    }
    result
}

impl Case<'_> {
    /// Lets the present pass the model's expiry windows and expires what is
    /// due; then, when the lock is free and owners wait, one takes over (in
    /// the model and for real): whether one did.
    async fn hand_over_if_free(&mut self, step: &mut Step<'_>) -> StepResult<bool> {
        let now = step.settle(&self.m.windows()).await;
        self.m.expire(now);
        if self.m.holder.is_some() || self.m.waiting.is_empty() {
            return Ok(false);
        }
        step.record(&"(the lock is free)", "a waiter takes over");
        let before = self.m.before();
        let freed = self.m.freed;
        handover(step, &mut self.m, &mut self.tasks, &mut self.reals, freed).await?;
        self.m.after(&before, Instant::now());
        Ok(true)
    }

    /// The owner of guard `g`, which the step's record names.
    fn resolve(&mut self, g: usize) -> usize {
        let o = self.m.g.guards[g].field.0;
        self.resolved = format!(" (#{g} of owner{o})");
        o
    }

    async fn steps(&mut self, step: &mut Step<'_>, ops: &[Op]) -> StepResult<()> {
        for op in ops {
            if self.hand_over_if_free(step).await? {
                self.finish(step, None).await?;
            }
            if op_owner(op).is_some_and(|o| self.m.waiting.contains(&o)) {
                step.record(op, "n/a (this owner is waiting)");
                continue;
            }
            if let Op::Sleep(d) = *op {
                tokio::time::sleep(Duration::from_millis(d)).await;
                step.record(op, "");
                self.hand_over_if_free(step).await?;
                self.finish(step, None).await?;
                continue;
            }
            let before = self.m.before();
            let t0 = Instant::now();
            self.resolved.clear();
            let Some((real, model)) = self.apply(step, op).await? else {
                continue;
            };
            self.m.after(&before, Instant::now());
            step.record(
                &format_args!("{op:?}{}", self.resolved),
                &format!("{real:?}"),
            );
            if self.m.holder.is_none() && !self.m.waiting.is_empty() {
                step.expect("reply", &real, &model)?;
                let before = self.m.before();
                let freed = t0;
                handover(step, &mut self.m, &mut self.tasks, &mut self.reals, freed).await?;
                self.m.after(&before, Instant::now());
            }
            self.finish(step, Some((real, model))).await?;
        }
        Ok(())
    }

    /// After a step: the losses the guards hear of, the Redis state and
    /// every guard, compared with the model.
    async fn finish(&mut self, step: &mut Step<'_>, reply: Option<(Out, Out)>) -> StepResult<()> {
        self.reals.await_heard(step, &mut self.m.g).await?;
        let state = read_state(self.env, self.kind, self.name).await;
        let seen = self.reals.snapshot(&self.m.g);
        if let Ok(s) = &state {
            let renewing = self.m.renewing();
            if self.m.holder.is_some() && self.m.n.fits(renewing, s.pttl, s.r.0, s.r.1) {
                self.m.n.observed(s.pttl, s.r.0);
            }
        }
        self.reals.learn(&mut self.m.g, &seen);
        step.check_time(&self.m.windows())?;
        if let Some((real, model)) = reply {
            step.expect("reply", real, model)?;
        }
        let state = check_state(self.env, step, &self.m, self.name, state)?;
        let bound = |(o, _): (usize, Half)| state.bound(&self.env.field(o));
        self.reals
            .compare(step, &mut self.m.g, &seen, bound)
            .await?;
        for (o, task) in &self.tasks {
            if task.is_finished() {
                return step.mismatch(format!(
                    "owner{o}'s waiter ended while the model has it wait"
                ));
            }
        }
        step.compared();
        Ok(())
    }

    /// Run `op` on both sides: the real reply and the model's, or `None`
    /// when it does not apply (recorded as such).
    async fn apply(&mut self, step: &mut Step<'_>, op: &Op) -> StepResult<Option<(Out, Out)>> {
        let t0 = Instant::now();
        let obj = format!("lock:{}", self.name);
        let out = match *op {
            Op::Acquire { o, wait, lease } if java::slot(o).is_some() => {
                let j = self.env.java.as_ref().expect("the Java peer");
                // `lock()` where it cannot block (the model has the lock
                // free or held by this thread), else `tryLock(0, lease)`.
                let free = self.m.holder.is_none_or(|(h, _)| h == o);
                let real = if wait && free {
                    j.lock(o, &obj, lease.get()).await
                } else {
                    j.try_lock(o, &obj, lease.get()).await
                };
                let r = self.m.acquire(o, lease.get(), t0, Instant::now());
                (real, self.m.acquired(&r))
            }
            Op::Acquire { o, wait, lease } => {
                let l = lease.get();
                let wait = if wait { WAIT } else { Duration::ZERO };
                let (real, guard) = if self.kind == Kind::Fenced {
                    match try_lock(&self.h.fenced[o], wait, l).await {
                        Ok(Some(g)) => (
                            Out::Acquired(Some(g.fencing_token())),
                            Some(Real::Fenced(g)),
                        ),
                        r => (out_of(r, |_| Out::Busy), None),
                    }
                } else {
                    match try_lock(&self.h.any[o], wait, l).await {
                        Ok(Some(g)) => (Out::Acquired(None), Some(Real::Any(g))),
                        r => (out_of(r, |_| Out::Busy), None),
                    }
                };
                let t1 = Instant::now();
                let r = self.m.acquire(o, l, t0, t1);
                let model = self.m.acquired(&r);
                self.record_acquired(o, r.ok(), l, t0, t1, guard);
                (real, model)
            }
            Op::Reenter { g } => {
                let g = match self.m.g.pick(g, |guard| guard.state == GState::Live) {
                    Some(g) if self.kind.reentrant() => g,
                    _ => {
                        step.record(op, "n/a (no guard, or not reentrant)");
                        return Ok(None);
                    }
                };
                let o = self.resolve(g);
                let real = match self.reals.get(g) {
                    Some(guard) => guard.reenter().await,
                    None => Err(Error::Closed),
                };
                let t1 = Instant::now();
                let lease = self.m.g.guards[g].lease;
                let typed = matches!(self.reals.get(g), Some(Real::Fenced(_)));
                let model = if self.m.g.refused(g) {
                    Out::NotHeld
                } else {
                    match self.m.acquire(o, lease, t0, t1) {
                        Ok(1) => {
                            // Taken afresh: not this guard's hold; released
                            // again (§2.9: a new tenure, the old one gone).
                            let conf = confirmed(lease, t0, t1);
                            let fresh = self.m.g.acquired((o, Half::Lock), 1, lease, conf);
                            self.reals.reserve(fresh);
                            let t = self.m.g.releasing(fresh);
                            let reply = self.m.unlock(o, t0, t1);
                            self.m.g.replied(t, reply);
                            Out::NotHeld
                        }
                        Ok(c) => {
                            let conf = confirmed(lease, t0, t1);
                            let g2 = self.m.g.acquired((o, Half::Lock), c, lease, conf);
                            self.reals.reserve(g2);
                            let token =
                                (self.kind == Kind::Fenced && typed).then_some(self.m.token);
                            Out::Acquired(token)
                        }
                        Err(_) => Out::NotHeld,
                    }
                };
                let real = match real {
                    Ok(guard) => {
                        let token = match &guard {
                            Real::Fenced(f) => Some(f.fencing_token()),
                            _ => None,
                        };
                        let (acquired, newest) =
                            (matches!(model, Out::Acquired(_)), self.m.g.guards.len() - 1);
                        self.reals.keep(guard, acquired, newest, &mut self.strays);
                        Out::Acquired(token)
                    }
                    Err(e) => out_of(Err::<(), _>(e), |()| Out::Busy),
                };
                (real, model)
            }
            Op::Unlock { g } => match self.m.g.pick(g, |_| true) {
                None => {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                }
                Some(g) => {
                    let o = self.resolve(g);
                    let real = match self.reals.take(g) {
                        Some(guard) => guard.unlock().await,
                        None => Err(Error::Closed),
                    };
                    let t1 = Instant::now();
                    let model = match self.m.g.releasing(g) {
                        None => Out::NotHeld,
                        t => {
                            let reply = self.m.unlock(o, t0, t1);
                            self.m.g.replied(t, reply);
                            unlocked(reply)
                        }
                    };
                    (out_of(real, |()| Out::Released), model)
                }
            },
            Op::UnlockRetake {
                g,
                lease,
                take_first,
            } => {
                let Some(g) = self.m.g.pick(g, |guard| guard.state == GState::Live) else {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                };
                if !self.m.waiting.is_empty() {
                    // A waiter woken by the unlock could take the lock
                    // between the two: a third order, not modelled.
                    step.record(op, "n/a (waiters)");
                    return Ok(None);
                }
                let o = self.resolve(g);
                return Ok(Some(
                    self.unlock_retake(g, o, lease.get(), take_first, t0).await,
                ));
            }
            Op::OwnerUnlock { o } => self.owner_unlock(o, t0).await,
            Op::Forget { g } => {
                let Some(g) = self.m.g.pick(g, |guard| guard.state == GState::Live) else {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                };
                self.resolved = format!(" (#{g} of owner{})", self.m.g.guards[g].field.0);
                if let Some(guard) = self.reals.take(g) {
                    guard.forget();
                }
                self.m.g.forget(g);
                (Out::Done, Out::Done)
            }
            Op::Extend { g, lease } => {
                let Some(g) = self.m.g.pick(g, |guard| guard.state == GState::Live) else {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                };
                let o = self.resolve(g);
                let l = lease.get().expect("an explicit lease");
                let real = match self.reals.get_mut(g) {
                    Some(guard) => guard.extend(l).await,
                    None => Err(Error::Closed),
                };
                let t1 = Instant::now();
                let guard = &self.m.g.guards[g];
                let sent = guard.state == GState::Live
                    && !self.m.g.refused(g)
                    && self.m.g.current(guard.field) == Some(guard.tenure);
                let model = if sent {
                    // `lua/renew.lua` for this hold: `max(PTTL, lease)`.
                    let found = self.m.in_redis((o, Half::Lock));
                    if found {
                        self.m.n = self.m.n.max(Ttl::set(l, t0, t1));
                    }
                    self.m.g.extended(g, l, t0, t1, found);
                    if found {
                        Out::Done
                    } else {
                        Out::NotHeld
                    }
                } else {
                    Out::NotHeld
                };
                (out_of(real, |()| Out::Done), model)
            }
            Op::ForceUnlock { by } => {
                let real = match java::slot(by) {
                    Some(_) => {
                        let j = self.env.java.as_ref().expect("the Java peer");
                        j.force_unlock(by, &obj).await
                    }
                    None => out_of(self.h.any[by].force_unlock().await, Out::Bool),
                };
                let held = self.m.holder.take().is_some();
                if held && java::slot(by).is_none() {
                    let client = Env::client_of(by);
                    self.m
                        .g
                        .force_unlocked_here(|o| o < OWNERS && Env::client_of(o) == client);
                }
                (real, Out::Bool(held))
            }
            Op::CancelWaiter { o, polls } => {
                let busy = matches!(self.m.holder, Some((h, _)) if h != o);
                if !busy || !self.m.waiting.is_empty() {
                    step.record(op, "n/a (lock not busy for this owner)");
                    return Ok(None);
                }
                let watchers = self.watchers();
                let real =
                    cancel_waiter(self.env, &self.h, self.kind, self.name, o, polls, watchers)
                        .await;
                // A watching guard whose renewal ran too late (a stalled
                // machine) is lost, and its watch ends: one subscriber
                // fewer than the model counts.
                if matches!(&real, Out::Other(m) if m.starts_with("after the drop"))
                    && self.watcher_not_renewed()
                {
                    step.stalled("a watching guard's renewal came too late (NotRenewed)")?;
                }
                (real, Out::Busy)
            }
            Op::SpawnWaiter { o } => {
                let busy = matches!(self.m.holder, Some((h, _)) if h != o);
                if !busy {
                    step.record(op, "n/a (lock not busy for this owner)");
                    return Ok(None);
                }
                let lock = self.h.any[o].clone();
                let task =
                    tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(10)).await });
                self.tasks.push((o, task));
                self.m.waiting.push(o);
                if let Err(why) =
                    super::lock_waits::waiting(self.env, self.kind, self.name, o).await
                {
                    step.mismatch(why)?;
                }
                (Out::Busy, Out::Busy)
            }
            Op::Sleep(_) => unreachable!("handled by the caller"),
        };
        Ok(Some(out))
    }

    /// A Rust acquisition that the model counted `count` (none: refused),
    /// and the real guard it got (if any).
    fn record_acquired(
        &mut self,
        o: usize,
        count: Option<u32>,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
        guard: Option<Real>,
    ) {
        match count {
            Some(c) => {
                let g = self
                    .m
                    .g
                    .acquired((o, Half::Lock), c, lease, confirmed(lease, t0, t1));
                match guard {
                    Some(guard) => self.reals.set(g, guard),
                    None => self.reals.reserve(g),
                }
            }
            None => self.strays.extend(guard),
        }
    }

    /// [`Op::UnlockRetake`] of guard `g` of owner `o`, sent at `t0`.
    async fn unlock_retake(
        &mut self,
        g: usize,
        o: usize,
        lease: Option<Duration>,
        take_first: bool,
        t0: Instant,
    ) -> (Out, Out) {
        // The renewals running before the step: a run may land while the
        // pair is in flight, so each order is judged with them stopped.
        let before = self.m.before();
        let old = self.reals.take(g);
        let unlock = async move {
            match old {
                Some(guard) => out_of(guard.unlock().await, |()| Out::Released),
                None => Out::Other("no real guard".into()),
            }
        };
        let (fenced, any) = (self.h.fenced[o].clone(), self.h.any[o].clone());
        let kind = self.kind;
        let take = async move {
            if kind == Kind::Fenced {
                match try_lock(&fenced, Duration::ZERO, lease).await {
                    Ok(Some(g)) => (
                        Out::Acquired(Some(g.fencing_token())),
                        Some(Real::Fenced(g)),
                    ),
                    r => (out_of(r, |_| Out::Busy), None),
                }
            } else {
                match try_lock(&any, Duration::ZERO, lease).await {
                    Ok(Some(g)) => (Out::Acquired(None), Some(Real::Any(g))),
                    r => (out_of(r, |_| Out::Busy), None),
                }
            }
        };
        let (unlocked_real, (taken_real, guard)) = if take_first {
            let (t, u) = tokio::join!(take, unlock);
            (u, t)
        } else {
            tokio::join!(unlock, take)
        };
        let t1 = Instant::now();
        // Either order is a linearization (both were in flight together):
        // the model runs each on a copy.
        let orders = [false, true].map(|retake_first| {
            let mut m = self.m.clone();
            let (unlocked, taken, count) = if retake_first {
                let r = m.acquire(o, lease, t0, t1);
                let taken = m.acquired(&r);
                let count = r.ok();
                if let Some(c) = count {
                    m.g.acquired((o, Half::Lock), c, lease, confirmed(lease, t0, t1));
                }
                (model_unlock(&mut m, g, o, t0, t1), taken, count)
            } else {
                let unlocked = model_unlock(&mut m, g, o, t0, t1);
                let r = m.acquire(o, lease, t0, t1);
                let taken = m.acquired(&r);
                let count = r.ok();
                if let Some(c) = count {
                    m.g.acquired((o, Half::Lock), c, lease, confirmed(lease, t0, t1));
                }
                (unlocked, taken, count)
            };
            m.after(&before, t1);
            (m, unlocked, taken, count)
        });
        // The order whose replies are the real ones and whose hold count
        // and expiry of `N` Redis shows ([`choose`]).
        let state = read_state(self.env, self.kind, self.name).await.ok();
        let matching =
            |(_, u, t, _): &(Model, Out, Out, Option<u32>)| *u == unlocked_real && *t == taken_real;
        let field = self.env.field(o);
        let shown = |slack: Slack| {
            let (state, field) = (&state, &field);
            move |(m, ..): &(Model, Out, Out, Option<u32>)| {
                let Some(s) = state else { return false };
                let count = s.hash.get(field).and_then(|c| c.parse::<u32>().ok());
                let held = m.holder.filter(|(h, _)| *h == o).map(|(_, n)| n);
                held == count
                    && (held.is_none() || m.n.fits_by(m.renewing(), s.pttl, s.r.0, s.r.1, slack))
            }
        };
        // What the guards show ([`choose`]; `finish` checks it again).
        let reals = &self.reals;
        let seen = |(m, _, _, count): &(Model, Out, Out, Option<u32>)| match (&guard, count) {
            (Some(real), Some(_)) => {
                let newest = m.g.guards.len() - 1;
                m.g.shows(newest, real) && m.g.losses_agree(reals, Some((newest, real)))
            }
            _ => m.g.losses_agree(reals, None),
        };
        let chosen = choose(&orders, matching, shown, seen).unwrap_or(usize::from(take_first));
        let [a, b] = orders;
        let (m, unlocked, taken, count) = if chosen == 0 { a } else { b };
        self.m = m;
        match count {
            Some(_) => {
                let newest = self.m.g.guards.len() - 1;
                match guard {
                    Some(guard) => self.reals.set(newest, guard),
                    None => self.reals.reserve(newest),
                }
            }
            None => self.strays.extend(guard),
        }
        (
            Out::Pair(Box::new(unlocked_real), Box::new(taken_real)),
            Out::Pair(Box::new(unlocked), Box::new(taken)),
        )
    }

    /// `with_owner(o).unlock()` (Rust) or Java's `unlock()`.
    async fn owner_unlock(&mut self, o: usize, t0: Instant) -> (Out, Out) {
        let real = match java::slot(o) {
            Some(_) => {
                let j = self.env.java.as_ref().expect("the Java peer");
                j.unlock(o, &format!("lock:{}", self.name)).await
            }
            None => out_of(self.h.any[o].unlock().await, |()| Out::Released),
        };
        let t1 = Instant::now();
        let t = if java::slot(o).is_none() {
            self.m.g.releasing_any((o, Half::Lock))
        } else {
            None
        };
        let reply = self.m.unlock(o, t0, t1);
        self.m.g.replied(t, reply);
        (real, unlocked(reply))
    }

    /// Whether a guard the model counts among the watchers was found
    /// not renewed in time (the crate's report of a stall).
    fn watcher_not_renewed(&self) -> bool {
        self.m.g.guards.iter().enumerate().any(|(g, guard)| {
            guard.state == GState::Live
                && guard.lost.is_none()
                && self
                    .reals
                    .get(g)
                    .is_some_and(|r| r.lost_reason() == Some(LostReason::NotRenewed))
        })
    }

    /// How many clients have a guard's `lost()` watcher on the lock's
    /// release channel (kinds with one): clients of live guards not lost.
    fn watchers(&self) -> i64 {
        if !self.kind.channel() {
            return 0;
        }
        let g = &self.m.g;
        let mut clients = [false; 2];
        for guard in &g.guards {
            if guard.state == GState::Live && guard.lost.is_none() {
                clients[Env::client_of(guard.field.0)] = true;
            }
        }
        clients.iter().filter(|&&c| c).count() as i64
    }
}

/// Which of a concurrent step's two orders (each run on a copy of the model)
/// to go on with: of those whose replies are the real ones (`matching`), the
/// first whose state Redis shows (`shown`) strictly, else within rounding,
/// preferring among those the one whose guards show what the model allows
/// them (`seen`: the new guard's expiry, which a renewal run in flight can
/// leave open, and the losses that happen at once, which the state cannot
/// tell apart when a key is cut to a need already past), else the first
/// matching one. The rest of the step checks the
/// chosen order as any other.
pub(super) fn choose<C, F: Fn(&C) -> bool>(
    orders: &[C; 2],
    matching: impl Fn(&C) -> bool,
    shown: impl Fn(Slack) -> F,
    seen: impl Fn(&C) -> bool,
) -> Option<usize> {
    for slack in [Slack::Strict, Slack::Rounding] {
        let shown = shown(slack);
        let fits = |c: &C| matching(c) && shown(c);
        let pick = orders.iter().position(|c| fits(c) && seen(c));
        if let Some(i) = pick.or_else(|| orders.iter().position(fits)) {
            return Some(i);
        }
    }
    orders.iter().position(matching)
}

/// What an acquisition with `lease` (`None`: the watchdog) sent at `t0`
/// and answered at `t1` proves: the key lives until `send time + TTL`.
pub(super) fn confirmed(lease: Option<Duration>, t0: Instant, t1: Instant) -> Ttl {
    Ttl::set(lease.unwrap_or(WATCHDOG), t0, t1)
}

fn op_owner(op: &Op) -> Option<usize> {
    match *op {
        Op::Acquire { o, .. }
        | Op::OwnerUnlock { o }
        | Op::CancelWaiter { o, .. }
        | Op::SpawnWaiter { o } => Some(o),
        Op::Reenter { .. }
        | Op::Unlock { .. }
        | Op::UnlockRetake { .. }
        | Op::Forget { .. }
        | Op::Extend { .. }
        | Op::ForceUnlock { .. }
        | Op::Sleep(_) => None,
    }
}

impl State {
    /// The latest instant the key can expire per the `PTTL` read, if `N`
    /// held `field`.
    pub(super) fn bound(&self, field: &str) -> Option<Instant> {
        if self.hash.contains_key(field) {
            Ttl::real_bound(self.pttl, self.r.1)
        } else {
            None
        }
    }
}

/// Java's side of the exclusive locks.
impl Java {
    /// `tryLock(0, lease)` of `obj` on owner `o`'s thread.
    pub(super) async fn try_lock(&self, o: usize, obj: &str, lease: Option<Duration>) -> Out {
        match self
            .call(o, &format!("trylock {obj} 0 {}", java::lease_arg(lease)))
            .await
        {
            Ok(v) if v == "true" => Out::Acquired(None),
            Ok(v) if v == "false" => Out::Busy,
            Ok(v) => Out::Other(v),
            Err(e) => Out::Other(e),
        }
    }

    /// `lock()` (`lock(lease)`) of `obj` on owner `o`'s thread: only where
    /// it cannot block.
    pub(super) async fn lock(&self, o: usize, obj: &str, lease: Option<Duration>) -> Out {
        let op = match lease {
            Some(l) => format!("lock {obj} {}", l.as_millis()),
            None => format!("lock {obj}"),
        };
        match self.call(o, &op).await {
            Ok(_) => Out::Acquired(None),
            Err(e) => Out::Other(e),
        }
    }

    /// `unlock()` of `obj` on owner `o`'s thread.
    pub(super) async fn unlock(&self, o: usize, obj: &str) -> Out {
        match self.call(o, &format!("unlock {obj}")).await {
            Ok(_) => Out::Released,
            Err(e) if e.contains("IllegalMonitorStateException") => Out::NotHeld,
            Err(e) => Out::Other(e),
        }
    }

    /// `forceUnlock()` of `obj`.
    pub(super) async fn force_unlock(&self, o: usize, obj: &str) -> Out {
        match self.call(o, &format!("forceunlock {obj}")).await {
            Ok(v) => Out::Bool(v == "true"),
            Err(e) => Out::Other(e),
        }
    }
}
