//! The read-write lock: mode, readers with hold counts per owner, the writer,
//! each reader's timeout keys with their TTLs, the hash's TTL rules (read:
//! `max(PTTL, lease)`, write re-entry: `PTTL + lease`, read unlock: the
//! longest-lived remaining timeout key), and downgrade.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use fred::prelude::*;
use proptest::prelude::*;
use redisson_lock::{Error, LockGuard, Read, ReadLock, Write, WriteLock};

use super::{lease_str, ms, Env, Exp, Step, StepResult, LEASE, OWNERS, WAIT};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Read,
    Write,
}

#[derive(Clone)]
pub enum Op {
    Acquire {
        o: usize,
        half: Half,
        wait: bool,
        lease: bool,
    },
    Reenter {
        o: usize,
        half: Half,
    },
    /// The newest guard of that half; without one, `with_owner(o).unlock()`.
    Unlock {
        o: usize,
        half: Half,
    },
    /// The owner's newest write guard's `downgrade()`.
    Downgrade {
        o: usize,
    },
    ForceUnlock {
        by: usize,
        half: Half,
    },
    Sleep(u64),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = |h: &Half| if *h == Half::Read { "read" } else { "write" };
        match self {
            Op::Acquire {
                o,
                half,
                wait,
                lease,
            } => {
                let lease = lease_str(lease.then_some(LEASE));
                if *wait {
                    write!(
                        f,
                        "owner{o}.{}.try_lock_for(wait={}, lease={lease})",
                        h(half),
                        ms(WAIT)
                    )
                } else {
                    write!(f, "owner{o}.{}.try_lock(lease={lease})", h(half))
                }
            }
            Op::Reenter { o, half } => write!(f, "owner{o}.newest_{}_guard.reenter()", h(half)),
            Op::Unlock { o, half } => write!(f, "owner{o}.{}.unlock()", h(half)),
            Op::Downgrade { o } => write!(f, "owner{o}.newest_write_guard.downgrade()"),
            Op::ForceUnlock { by, half } => {
                write!(f, "client_of_owner{by}.{}.force_unlock()", h(half))
            }
            Op::Sleep(d) => write!(f, "sleep({d}ms)"),
        }
    }
}

pub fn strategy() -> impl Strategy<Value = Vec<Op>> {
    let o = 0..OWNERS;
    let half = prop_oneof![Just(Half::Read), Just(Half::Write)];
    let op = prop_oneof![
        6 => (o.clone(), half.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(o, half, wait, lease)| Op::Acquire { o, half, wait, lease }),
        2 => (o.clone(), half.clone()).prop_map(|(o, half)| Op::Reenter { o, half }),
        5 => (o.clone(), half.clone()).prop_map(|(o, half)| Op::Unlock { o, half }),
        2 => o.clone().prop_map(|o| Op::Downgrade { o }),
        1 => (o, half).prop_map(|(by, half)| Op::ForceUnlock { by, half }),
        1 => prop_oneof![Just(20u64), Just(130u64)].prop_map(Op::Sleep),
    ];
    proptest::collection::vec(op, 1..30)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

type Registry = [Option<(u32, Option<Duration>)>; OWNERS];

#[derive(Clone, Debug)]
struct Model {
    mode: Option<Mode>,
    writer: Option<(usize, u32)>,
    readers: [u32; OWNERS],
    /// Owner `o`'s timeout key `k` is `tkeys[o][k - 1]` (`None`: gone).
    tkeys: [Vec<Option<Exp>>; OWNERS],
    exp: Exp,
    reg_r: Registry,
    reg_w: Registry,
    /// The client's status of each owner's read and write hold: the expiry
    /// of its latest acquisition (`Long` for the watchdog). A guard whose
    /// latest lease has ended counts as lost locally (`reenter` and
    /// `downgrade` refuse), even while older holds keep the owner in Redis.
    status: [[Option<Exp>; 2]; OWNERS],
}

#[derive(Debug, PartialEq)]
enum Out {
    Acquired,
    Busy,
    Unlocked,
    NotHeld,
    Bool(bool),
    Other(String),
}

fn out_of<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => ok(v),
        Err(Error::NotHeld { .. }) => Out::NotHeld,
        Err(e) => Out::Other(e.to_string()),
    }
}

fn reg_acquire(reg: &mut Registry, o: usize, lease: Option<Duration>) {
    let r = reg[o].get_or_insert((0, None));
    r.0 += 1;
    r.1 = lease;
}

/// The registry's `released`; a hold still counted with an explicit lease
/// gets its status renewed to `now + lease` (sent at `t0`, model time `t1`).
fn reg_release(
    reg: &mut Registry,
    status: &mut Option<Exp>,
    o: usize,
    t0: Instant,
    t1: Instant,
) -> Option<Duration> {
    match reg[o] {
        None => None,
        Some((c, lease)) => {
            reg[o] = (c > 1).then_some((c - 1, lease));
            if c > 1 && lease.is_some() {
                *status = Some(Exp::lease(lease, t0, t1));
            }
            lease
        }
    }
}

impl Model {
    fn clear(&mut self) {
        self.mode = None;
        self.writer = None;
        self.readers = [0; OWNERS];
    }

    fn expire(&mut self, now: Instant) {
        for keys in &mut self.tkeys {
            for k in keys.iter_mut() {
                if k.is_some_and(|e| e.over(now)) {
                    *k = None;
                }
            }
        }
        if self.mode.is_some() && self.exp.over(now) {
            self.clear();
        }
    }

    fn windows(&self) -> Vec<Exp> {
        let mut w: Vec<Exp> = self.tkeys.iter().flatten().flatten().copied().collect();
        if self.mode.is_some() {
            w.push(self.exp);
        }
        w.extend(self.status.iter().flatten().flatten().copied());
        w
    }

    /// Whether the client counts owner `o`'s hold of `half` as lost.
    fn lost(&self, o: usize, half: Half, now: Instant) -> bool {
        matches!(self.status[o][half as usize], Some(Exp::At { lo, .. }) if lo <= now + Duration::from_millis(3))
    }

    fn read_acquire(&mut self, o: usize, lease: Option<Duration>, t0: Instant, t1: Instant) -> Out {
        let e = Exp::lease(lease, t0, t1);
        match self.mode {
            None => {
                self.mode = Some(Mode::Read);
                self.exp = e;
            }
            Some(Mode::Read) => self.exp = self.exp.max(e),
            Some(Mode::Write) if self.writer.is_some_and(|(w, _)| w == o) => {
                self.exp = self.exp.max(e)
            }
            Some(Mode::Write) => return Out::Busy,
        }
        self.readers[o] += 1;
        let k = self.readers[o] as usize;
        if self.tkeys[o].len() < k {
            self.tkeys[o].resize(k, None);
        }
        self.tkeys[o][k - 1] = Some(e);
        reg_acquire(&mut self.reg_r, o, lease);
        self.status[o][Half::Read as usize] = Some(e);
        Out::Acquired
    }

    fn write_acquire(
        &mut self,
        o: usize,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Out {
        match (self.mode, self.writer) {
            (None, _) => {
                self.mode = Some(Mode::Write);
                self.writer = Some((o, 1));
                self.exp = Exp::lease(lease, t0, t1);
            }
            (Some(Mode::Write), Some((w, c))) if w == o => {
                self.writer = Some((o, c + 1));
                self.exp = self.exp.plus(lease);
            }
            _ => return Out::Busy,
        }
        reg_acquire(&mut self.reg_w, o, lease);
        self.status[o][Half::Write as usize] = Some(Exp::lease(lease, t0, t1));
        Out::Acquired
    }

    fn read_unlock(&mut self, o: usize, t0: Instant, t1: Instant) -> Out {
        reg_release(&mut self.reg_r, &mut self.status[o][0], o, t0, t1);
        if self.mode.is_none() || self.readers[o] == 0 {
            return Out::NotHeld;
        }
        self.tkeys[o][self.readers[o] as usize - 1] = None;
        self.readers[o] -= 1;
        let others = self.writer.is_some() || self.readers.iter().any(|&c| c > 0);
        if others {
            let longest = self
                .tkeys
                .iter()
                .zip(self.readers)
                .flat_map(|(keys, c)| keys.iter().take(c as usize).flatten().copied())
                .reduce(Exp::max);
            if let Some(e) = longest {
                self.exp = e;
                return Out::Unlocked;
            }
            if self.mode == Some(Mode::Write) {
                return Out::Unlocked;
            }
        }
        self.clear();
        Out::Unlocked
    }

    fn write_unlock(&mut self, o: usize, t0: Instant, t1: Instant) -> Out {
        let keep = reg_release(&mut self.reg_w, &mut self.status[o][1], o, t0, t1);
        match (self.mode, self.writer) {
            (Some(Mode::Write), Some((w, c))) if w == o => {
                if c > 1 {
                    self.writer = Some((o, c - 1));
                    self.exp = Exp::lease(keep, t0, t1);
                } else if self.readers.iter().any(|&c| c > 0) {
                    self.writer = None;
                    self.mode = Some(Mode::Read);
                } else {
                    self.clear();
                }
                Out::Unlocked
            }
            _ => Out::NotHeld,
        }
    }
}

/// Tries `lock` for `wait` with `lease`; a guard it gets goes on `held`.
async fn try_hold<K: redisson_lock::Kind>(
    lock: &redisson_lock::Lock<K>,
    held: &mut Vec<(LockGuard<K>, Option<Duration>)>,
    wait: Duration,
    lease: Option<Duration>,
) -> Out {
    let r = lock.try_lock_for(wait, lease).await;
    out_of(r, |g| match g {
        Some(g) => {
            held.push((g, lease));
            Out::Acquired
        }
        None => Out::Busy,
    })
}

/// Re-enters the last guard on `held` (`None` without one), its lease with
/// it; a new guard goes on `held` too.
async fn reenter_last<K: redisson_lock::ReentrantKind>(
    held: &mut Vec<(LockGuard<K>, Option<Duration>)>,
) -> (Option<Out>, Option<Duration>) {
    let Some((g, l)) = held.last() else {
        return (None, None);
    };
    let (r, l) = (g.reenter().await, *l);
    let real = out_of(r, |g| {
        held.push((g, l));
        Out::Acquired
    });
    (Some(real), l)
}

struct Handles {
    read: Vec<ReadLock>,
    write: Vec<WriteLock>,
}

pub fn case(env: &Env, ops: &[Op]) -> Result<(), String> {
    super::one_case(env, "model-rw", "ReadWriteLock", async |step, name| {
        run(env, step, name, ops).await
    })
}

async fn run(env: &Env, step: &mut Step<'_>, name: &str, ops: &[Op]) -> StepResult<()> {
    let mut h = Handles {
        read: Vec::new(),
        write: Vec::new(),
    };
    for o in 0..OWNERS {
        let rw = env.client(o).read_write_lock(name).expect("rw handle");
        h.read.push(rw.read().with_owner(Env::owner(o)));
        h.write.push(rw.write().with_owner(Env::owner(o)));
    }
    let mut reads: Vec<Vec<(LockGuard<Read>, Option<Duration>)>> =
        (0..OWNERS).map(|_| Vec::new()).collect();
    let mut writes: Vec<Vec<(LockGuard<Write>, Option<Duration>)>> =
        (0..OWNERS).map(|_| Vec::new()).collect();
    let mut m = Model {
        mode: None,
        writer: None,
        readers: [0; OWNERS],
        tkeys: Default::default(),
        exp: Exp::Long,
        reg_r: [None; OWNERS],
        reg_w: [None; OWNERS],
        status: [[None; 2]; OWNERS],
    };
    for op in ops {
        let now = step.settle(&m.windows()).await;
        m.expire(now);
        let t0 = Instant::now();
        let (real, model) = match *op {
            Op::Acquire {
                o,
                half,
                wait,
                lease,
            } => {
                let lease = lease.then_some(LEASE);
                let wait = if wait { WAIT } else { Duration::ZERO };
                if half == Half::Read {
                    let real = try_hold(&h.read[o], &mut reads[o], wait, lease).await;
                    (real, m.read_acquire(o, lease, t0, Instant::now()))
                } else {
                    let real = try_hold(&h.write[o], &mut writes[o], wait, lease).await;
                    (real, m.write_acquire(o, lease, t0, Instant::now()))
                }
            }
            Op::Reenter { o, half } => {
                let (real, lease) = match half {
                    Half::Read => reenter_last(&mut reads[o]).await,
                    Half::Write => reenter_last(&mut writes[o]).await,
                };
                let Some(real) = real else {
                    step.record(op, "n/a (no guard)");
                    continue;
                };
                let t1 = Instant::now();
                let model = match half {
                    _ if m.lost(o, half, t0) => Out::NotHeld,
                    Half::Read if m.readers[o] > 0 && m.mode.is_some() => {
                        m.read_acquire(o, lease, t0, t1)
                    }
                    Half::Write if m.writer.is_some_and(|(w, _)| w == o) => {
                        m.write_acquire(o, lease, t0, t1)
                    }
                    _ => Out::NotHeld,
                };
                (real, model)
            }
            Op::Unlock { o, half } => {
                let real = match half {
                    Half::Read => match reads[o].pop() {
                        Some((g, _)) => g.unlock().await,
                        None => h.read[o].unlock().await,
                    },
                    Half::Write => match writes[o].pop() {
                        Some((g, _)) => g.unlock().await,
                        None => h.write[o].unlock().await,
                    },
                };
                let real = out_of(real, |()| Out::Unlocked);
                let model = match half {
                    Half::Read => m.read_unlock(o, t0, Instant::now()),
                    Half::Write => m.write_unlock(o, t0, Instant::now()),
                };
                (real, model)
            }
            Op::Downgrade { o } => {
                if m.writer.is_none_or(|(w, _)| w != o)
                    || writes[o].is_empty()
                    || m.lost(o, Half::Write, t0)
                {
                    // A refused downgrade releases the write hold in the
                    // background: not a step whose state can be compared.
                    step.record(op, "n/a (not the writer, or its hold counts as lost)");
                    continue;
                }
                let Some((g, lease)) = writes[o].pop() else {
                    continue;
                };
                let r = g.downgrade().await;
                let real = out_of(r, |g| {
                    reads[o].push((g, lease));
                    Out::Acquired
                });
                let model = m.read_acquire(o, lease, t0, Instant::now());
                let t1 = Instant::now();
                let unlocked = m.write_unlock(o, t0, t1);
                (
                    real,
                    if unlocked == Out::Unlocked {
                        model
                    } else {
                        unlocked
                    },
                )
            }
            Op::ForceUnlock { by, half } => {
                let (r, mode) = match half {
                    Half::Read => (h.read[by].force_unlock().await, Mode::Read),
                    Half::Write => (h.write[by].force_unlock().await, Mode::Write),
                };
                let held = m.mode == Some(mode);
                if held {
                    m.clear();
                }
                (out_of(r, Out::Bool), Out::Bool(held))
            }
            Op::Sleep(d) => {
                step.slept(op, d).await;
                continue;
            }
        };
        let read = read_state(env, name);
        let state = step.observed(op, &real, read, &m.windows()).await?;
        step.expect("reply", real, model)?;
        check_state(env, step, &m, name, state)?;
        step.compared();
    }
    Ok(())
}

struct State {
    hash: BTreeMap<String, String>,
    pttl: i64,
    tkeys: BTreeMap<String, i64>,
    r: (Instant, Instant),
}

async fn read_state(env: &Env, name: &str) -> Result<State, fred::error::Error> {
    let raw = &env.raw;
    let r0 = Instant::now();
    let hash = raw.hgetall(name).await?;
    let pttl = raw.pttl(name).await?;
    let keys: Vec<String> = raw
        .custom(
            fred::cmd!("KEYS"),
            vec![format!("{{{name}}}:*:rwlock_timeout:*")],
        )
        .await?;
    let mut tkeys = BTreeMap::new();
    for k in keys {
        let t: i64 = raw.pttl(&k).await?;
        tkeys.insert(k, t);
    }
    Ok(State {
        hash,
        pttl,
        tkeys,
        r: (r0, Instant::now()),
    })
}

fn check_state(
    env: &Env,
    step: &mut Step<'_>,
    m: &Model,
    name: &str,
    state: Result<State, fred::error::Error>,
) -> StepResult<()> {
    let s = match state {
        Ok(s) => s,
        Err(e) => return step.mismatch(format!("reading state: {e}")),
    };
    let mut hash = BTreeMap::new();
    if let Some(mode) = m.mode {
        let mode = if mode == Mode::Read { "read" } else { "write" };
        hash.insert("mode".to_owned(), mode.to_owned());
        for (o, &c) in m.readers.iter().enumerate() {
            if c > 0 {
                hash.insert(env.field(o), c.to_string());
            }
        }
        if let Some((w, c)) = m.writer {
            hash.insert(format!("{}:write", env.field(w)), c.to_string());
        }
    }
    step.expect("HGETALL N", s.hash, hash)?;
    if m.mode.is_none() {
        step.expect("PTTL N", s.pttl, -2)?;
    } else if !m.exp.fits(s.pttl, s.r.0, s.r.1) {
        step.mismatch(format!("PTTL N: real {}, model {:?}", s.pttl, m.exp))?;
    }
    let mut expected = BTreeMap::new();
    for (o, keys) in m.tkeys.iter().enumerate() {
        for (i, k) in keys.iter().enumerate() {
            if let Some(e) = k {
                let key = format!("{{{name}}}:{}:rwlock_timeout:{}", env.field(o), i + 1);
                expected.insert(key, *e);
            }
        }
    }
    let real: Vec<&String> = s.tkeys.keys().collect();
    let want: Vec<&String> = expected.keys().collect();
    step.expect("reader timeout keys", real, want)?;
    for (k, e) in &expected {
        let pttl = s.tkeys[k];
        if !e.fits(pttl, s.r.0, s.r.1) {
            step.mismatch(format!("PTTL {k}: real {pttl}, model {e:?}"))?;
        }
    }
    Ok(())
}
