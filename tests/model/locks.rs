//! The exclusive lock kinds (RLock, non-reentrant, fair, non-reentrant fair,
//! spin, fenced): a model of who holds, how often, until when, the fencing
//! token and the (always drained) fair queue, run against the real crate.

use std::fmt;
use std::time::{Duration, Instant};

use fred::prelude::*;
use proptest::prelude::*;
use redisson_lock::{AnyKind, Error, Fenced, Lock, LockGuard};

use super::lock_waits::{cancel_waiter, check_state, handover, read_state, Waiter};
use super::{lease_str, ms, Env, Exp, Step, StepResult, LEASE, OWNERS, WAIT};

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
}

#[derive(Clone)]
pub enum Op {
    /// `with_owner(o).try_lock_for(wait, lease)`; a zero wait is `try_lock`.
    Acquire {
        o: usize,
        wait: bool,
        lease: bool,
    },
    /// `guard.reenter()` on the owner's newest guard.
    Reenter {
        o: usize,
    },
    /// The newest guard's `unlock()`; without a guard, `with_owner(o).unlock()`
    /// (an unlock by an owner that holds nothing: a foreign unlock).
    Unlock {
        o: usize,
    },
    /// Java's style: `forget()` the newest guard, then `with_owner(o).unlock()`.
    ForgetThenUnlock {
        o: usize,
    },
    /// `force_unlock()` through owner `by`'s client.
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
    /// a busy lock: fair kinds queue it; a release hands the lock over to
    /// the head of the queue (fair) or to one of the waiters.
    SpawnWaiter {
        o: usize,
    },
    Sleep(u64),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lease = |l: bool| lease_str(l.then_some(LEASE));
        match self {
            Op::Acquire {
                o,
                wait: false,
                lease: l,
            } => {
                write!(f, "owner{o}.try_lock(lease={})", lease(*l))
            }
            Op::Acquire {
                o,
                wait: true,
                lease: l,
            } => write!(
                f,
                "owner{o}.try_lock_for(wait={}, lease={})",
                ms(WAIT),
                lease(*l)
            ),
            Op::Reenter { o } => write!(f, "owner{o}.newest_guard.reenter()"),
            Op::Unlock { o } => write!(f, "owner{o}.unlock()"),
            Op::ForgetThenUnlock { o } => {
                write!(f, "owner{o}.newest_guard.forget(); owner{o}.unlock()")
            }
            Op::ForceUnlock { by } => write!(f, "client_of_owner{by}.force_unlock()"),
            Op::CancelWaiter { o, polls } => {
                write!(
                    f,
                    "owner{o}.try_lock_for(2s) dropped (subscribed, +{polls} polls)"
                )
            }
            Op::SpawnWaiter { o } => write!(f, "spawn owner{o}.try_lock_for(10s)"),
            Op::Sleep(d) => write!(f, "sleep({d}ms)"),
        }
    }
}

pub fn strategy() -> impl Strategy<Value = (Kind, Vec<Op>)> {
    let kind = prop_oneof![
        Just(Kind::RLock),
        Just(Kind::NonReentrant),
        Just(Kind::Fair),
        Just(Kind::NonReentrantFair),
        Just(Kind::Spin),
        Just(Kind::Fenced),
    ];
    let o = 0..OWNERS;
    let op = prop_oneof![
        6 => (o.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(o, wait, lease)| Op::Acquire { o, wait, lease }),
        2 => o.clone().prop_map(|o| Op::Reenter { o }),
        5 => o.clone().prop_map(|o| Op::Unlock { o }),
        1 => o.clone().prop_map(|o| Op::ForgetThenUnlock { o }),
        1 => o.clone().prop_map(|by| Op::ForceUnlock { by }),
        1 => (o.clone(), 0u8..20).prop_map(|(o, polls)| Op::CancelWaiter { o, polls }),
        2 => o.prop_map(|o| Op::SpawnWaiter { o }),
        1 => prop_oneof![Just(20u64), Just(130u64)].prop_map(Op::Sleep),
    ];
    (kind, proptest::collection::vec(op, 1..30))
}

/// The model: Redis's view (holder, count, expiry, token) and each client's
/// registry of holds (count and latest lease per owner), which decides the
/// TTL an unlock leaves.
#[derive(Clone, Debug)]
pub(super) struct Model {
    pub(super) kind: Kind,
    pub(super) holder: Option<(usize, u32)>,
    pub(super) exp: Exp,
    pub(super) token: i64,
    pub(super) registry: [Option<(u32, Option<Duration>)>; OWNERS],
    /// Waiters left waiting, in the order they queued.
    pub(super) waiting: Vec<usize>,
}

#[derive(Debug, PartialEq)]
pub(super) enum Out {
    Acquired(Option<i64>),
    Busy,
    Released,
    NotHeld,
    NotReentrant,
    Bool(bool),
    Other(String),
}

impl Model {
    fn expire(&mut self, now: Instant) {
        if self.exp.over(now) {
            self.holder = None;
        }
    }

    fn windows(&self) -> Vec<Exp> {
        if self.holder.is_some() {
            vec![self.exp]
        } else {
            Vec::new()
        }
    }

    pub(super) fn acquire(
        &mut self,
        o: usize,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Out {
        match self.holder {
            Some((h, _)) if h != o => return Out::Busy,
            Some(_) if !self.kind.reentrant() => return Out::NotReentrant,
            Some((_, ref mut c)) => *c += 1,
            None => self.holder = Some((o, 1)),
        }
        self.exp = Exp::lease(lease, t0, t1);
        let r = self.registry[o].get_or_insert((0, None));
        r.0 += 1;
        r.1 = lease;
        if self.kind == Kind::Fenced {
            self.token += 1;
            Out::Acquired(Some(self.token))
        } else {
            Out::Acquired(None)
        }
    }

    /// The registry's `released`: the lease an unlock keeps.
    fn registry_release(&mut self, o: usize) -> Option<Duration> {
        match self.registry[o] {
            None => None,
            Some((c, lease)) => {
                self.registry[o] = (c > 1).then_some((c - 1, lease));
                lease
            }
        }
    }

    fn unlock(&mut self, o: usize, keep: Option<Duration>, t0: Instant, t1: Instant) -> Out {
        match self.holder {
            Some((h, c)) if h == o => {
                if c > 1 {
                    self.holder = Some((o, c - 1));
                    self.exp = Exp::lease(keep, t0, t1);
                } else {
                    self.holder = None;
                }
                Out::Released
            }
            _ => Out::NotHeld,
        }
    }
}

fn out_of<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => ok(v),
        Err(Error::NotHeld { .. }) => Out::NotHeld,
        Err(Error::NotReentrant { .. }) => Out::NotReentrant,
        Err(e) => Out::Other(e.to_string()),
    }
}

pub(super) enum Guard {
    Any(LockGuard<AnyKind>, Option<Duration>),
    Fenced(LockGuard<Fenced>, Option<Duration>),
}

/// The lock as each owner sees it (through its client).
pub(super) struct Handles {
    pub(super) any: Vec<Lock<AnyKind>>,
    pub(super) fenced: Vec<Lock<Fenced>>,
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
                Kind::RLock => c.lock(name).map(|l| l.erase()),
                Kind::NonReentrant => c.non_reentrant_lock(name).map(|l| l.erase()),
                Kind::Fair => c.fair_lock(name).map(|l| l.erase()),
                Kind::NonReentrantFair => c.non_reentrant_fair_lock(name).map(|l| l.erase()),
                Kind::Spin => c.spin_lock(name).map(|l| l.erase()),
                Kind::Fenced => c.fenced_lock(name).map(|l| l.erase()),
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
    super::one_case(
        env,
        "model-lock",
        &format!("{kind:?}"),
        async |step, name| run(env, step, *kind, name, ops).await,
    )
}

async fn run(env: &Env, step: &mut Step<'_>, kind: Kind, name: &str, ops: &[Op]) -> StepResult<()> {
    let h = Handles::new(env, kind, name);
    let mut guards: Vec<Vec<Guard>> = (0..OWNERS).map(|_| Vec::new()).collect();
    let mut m = Model {
        kind,
        holder: None,
        exp: Exp::Long,
        token: 0,
        registry: [None; OWNERS],
        waiting: Vec::new(),
    };
    let mut tasks: Vec<(usize, Waiter)> = Vec::new();
    for op in ops {
        let now = step.settle(&m.windows()).await;
        m.expire(now);
        if m.holder.is_none() && !m.waiting.is_empty() {
            step.record(&"(the lease ended)", "a waiter takes over");
            handover(env, step, &mut m, &mut tasks, &mut guards).await?;
            check_state(env, step, &m, name, read_state(env, kind, name).await)?;
        }
        if op_owner(op).is_some_and(|o| m.waiting.contains(&o)) {
            step.record(op, "n/a (this owner is waiting)");
            continue;
        }
        // A lease that ends unannounced wakes nobody: waiters re-check only
        // at the TTL they were told (§13.2 Q9), up to the 30 s watchdog. So
        // while waiters wait, the holder takes no explicit lease.
        let fixed = match *op {
            Op::Acquire { lease, .. } => lease,
            Op::Reenter { o } => matches!(
                guards[o].last(),
                Some(Guard::Any(_, Some(_)) | Guard::Fenced(_, Some(_)))
            ),
            _ => false,
        };
        if fixed && !m.waiting.is_empty() {
            step.record(op, "n/a (an explicit lease while waiters wait)");
            continue;
        }
        let t0 = Instant::now();
        let (real, model) = match *op {
            Op::Acquire { o, wait, lease } => {
                let lease = lease.then_some(LEASE);
                let wait = if wait { WAIT } else { Duration::ZERO };
                let real = if kind == Kind::Fenced {
                    let r = h.fenced[o].try_lock_for(wait, lease).await;
                    out_of(r, |g| match g {
                        Some(g) => {
                            let t = g.fencing_token();
                            guards[o].push(Guard::Fenced(g, lease));
                            Out::Acquired(Some(t))
                        }
                        None => Out::Busy,
                    })
                } else {
                    let r = h.any[o].try_lock_for(wait, lease).await;
                    out_of(r, |g| match g {
                        Some(g) => {
                            guards[o].push(Guard::Any(g, lease));
                            Out::Acquired(None)
                        }
                        None => Out::Busy,
                    })
                };
                (real, m.acquire(o, lease, t0, Instant::now()))
            }
            Op::Reenter { o } => {
                if !kind.reentrant() || guards[o].is_empty() {
                    step.record(op, "n/a (no guard, or not reentrant)");
                    continue;
                }
                let (real, lease) = match guards[o].last() {
                    Some(Guard::Any(g, l)) => (
                        g.reenter().await.map(|g| Guard::Any(g, *l)).map_err(Some),
                        *l,
                    ),
                    Some(Guard::Fenced(g, l)) => (
                        g.reenter()
                            .await
                            .map(|g| Guard::Fenced(g, *l))
                            .map_err(Some),
                        *l,
                    ),
                    None => (Err(None), None),
                };
                let real = match real {
                    Ok(g) => {
                        let t = match &g {
                            Guard::Fenced(g, _) => Some(g.fencing_token()),
                            Guard::Any(..) => None,
                        };
                        guards[o].push(g);
                        Out::Acquired(t)
                    }
                    Err(e) => out_of(Err(e.unwrap_or(Error::Closed)), |()| Out::Busy),
                };
                let typed = matches!(guards[o].last(), Some(Guard::Fenced(..)));
                let model = if matches!(m.holder, Some((h, _)) if h == o) {
                    match m.acquire(o, lease, t0, Instant::now()) {
                        // A waiter's guard is untyped: its token is checked
                        // in Redis (GET token) only.
                        Out::Acquired(Some(_)) if !typed => Out::Acquired(None),
                        out => out,
                    }
                } else {
                    Out::NotHeld
                };
                (real, model)
            }
            Op::Unlock { o } => {
                let real = match guards[o].pop() {
                    Some(Guard::Any(g, _)) => g.unlock().await,
                    Some(Guard::Fenced(g, _)) => g.unlock().await,
                    None => h.any[o].unlock().await,
                };
                let keep = m.registry_release(o);
                (
                    out_of(real, |()| Out::Released),
                    m.unlock(o, keep, t0, Instant::now()),
                )
            }
            Op::ForgetThenUnlock { o } => {
                match guards[o].pop() {
                    Some(Guard::Any(g, _)) => g.forget(),
                    Some(Guard::Fenced(g, _)) => g.forget(),
                    None => {
                        step.record(op, "n/a (no guard)");
                        continue;
                    }
                }
                m.registry_release(o);
                let real = h.any[o].unlock().await;
                let keep = m.registry_release(o);
                (
                    out_of(real, |()| Out::Released),
                    m.unlock(o, keep, t0, Instant::now()),
                )
            }
            Op::ForceUnlock { by } => {
                let real = out_of(h.any[by].force_unlock().await, Out::Bool);
                let held = m.holder.take().is_some();
                (real, Out::Bool(held))
            }
            Op::CancelWaiter { o, polls } => {
                let busy = matches!(m.holder, Some((h, _)) if h != o);
                if !busy || m.registry[o].is_some() || !m.waiting.is_empty() {
                    step.record(op, "n/a (lock not busy for this owner)");
                    continue;
                }
                let real = cancel_waiter(env, &h, kind, name, o, polls).await;
                (real, Out::Busy)
            }
            Op::SpawnWaiter { o } => {
                let busy = matches!(m.holder, Some((h, _)) if h != o);
                if !busy || m.registry[o].is_some() || !matches!(m.exp, Exp::Long) {
                    step.record(op, "n/a (lock not held by another with the watchdog)");
                    continue;
                }
                let lock = h.any[o].clone();
                let task =
                    tokio::spawn(
                        async move { lock.try_lock_for(Duration::from_secs(10), None).await },
                    );
                tasks.push((o, task));
                m.waiting.push(o);
                // Waiting means queued (fair) or subscribed; the spin lock
                // shows nothing, its waiter is simply there.
                let queue = format!("redisson_lock_queue:{{{name}}}");
                let field = env.field(o);
                let deadline = Instant::now() + Duration::from_secs(3);
                loop {
                    let waiting = if kind.fair() {
                        let q: Vec<String> =
                            env.raw.lrange(&queue, 0, -1).await.unwrap_or_default();
                        q.contains(&field)
                    } else if kind == Kind::Spin {
                        true
                    } else {
                        crate::common::numsub(
                            &env.raw,
                            &format!("redisson_lock__channel:{{{name}}}"),
                        )
                        .await
                            >= 1
                    };
                    if waiting {
                        break;
                    }
                    if Instant::now() > deadline {
                        return step.mismatch(format!("owner{o}'s waiter never started waiting"));
                    }
                    tokio::task::yield_now().await;
                }
                (Out::Busy, Out::Busy)
            }
            Op::Sleep(d) => {
                step.slept(op, d).await;
                continue;
            }
        };
        step.record(op, &format!("{real:?}"));
        if m.holder.is_none() && !m.waiting.is_empty() {
            step.expect("reply", &real, &model)?;
            handover(env, step, &mut m, &mut tasks, &mut guards).await?;
        }
        let state = read_state(env, kind, name).await;
        step.check_time(&m.windows())?;
        step.expect("reply", real, model)?;
        check_state(env, step, &m, name, state)?;
        for (o, task) in &tasks {
            if task.is_finished() {
                return step.mismatch(format!(
                    "owner{o}'s waiter ended while the model has it wait"
                ));
            }
        }
        step.compared();
    }
    for (_, task) in &tasks {
        task.abort();
    }
    Ok(())
}

fn op_owner(op: &Op) -> Option<usize> {
    match *op {
        Op::Acquire { o, .. }
        | Op::Reenter { o }
        | Op::Unlock { o }
        | Op::ForgetThenUnlock { o }
        | Op::CancelWaiter { o, .. }
        | Op::SpawnWaiter { o } => Some(o),
        Op::ForceUnlock { .. } | Op::Sleep(_) => None,
    }
}
