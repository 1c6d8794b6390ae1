//! The read-write lock: mode, readers with hold counts per owner, the
//! writer, each reader's timeout keys, and the TTLs of all of them derived
//! from the commands of docs/PROTOCOL.md §5.2–§5.7: read acquire
//! `max(PTTL, lease)`, write re-entry `PTTL + lease`, read unlock (the
//! leaving timeout key's time handed to the owner's new last key, then, in
//! read mode, `N` set to the longest remaining timeout key of any reader;
//! in write mode `N` kept), renewal and `extend` `max(PTTL, lease)` on `N`
//! and the owner's keys; and what every guard believes (§2.9). With the
//! Java peer, Redisson is an owner too: its read unlock hands nothing over
//! and recomputes `N` in both modes, its write unlock that leaves holds
//! sets its watchdog timeout, an unlock of a hash without `mode` succeeds
//! before 3.44 (§11.3).

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use fred::prelude::*;
use proptest::prelude::*;
use redisson_lock::{Error, OwnedLock, Read, Write};

use super::guards::{GState, Guards, Half, Real, Reals, Reply};
use super::java;
use super::keys::{Slack, Ttl};
use super::locks::{choose, confirmed, out_of, owner, sleep, Lease, Out};
use super::{
    ms, try_lock, window_str, Env, Exp, Step, StepResult, JAVA_WATCHDOG, OWNERS, WAIT, WATCHDOG,
};

#[derive(Clone)]
pub enum Op {
    /// A Java owner: `tryLock(0, lease)`.
    Acquire {
        o: usize,
        half: Half,
        wait: bool,
        lease: Lease,
    },
    /// `reenter()` of a guard (either half): the `g`-th newest of those
    /// that exist.
    Reenter {
        g: usize,
    },
    Unlock {
        g: usize,
    },
    /// `join!` of a guard's `unlock()` and a `try_lock(lease)` of the same
    /// half by the same owner, the take polled first if `take_first`
    /// (issue 34): either order Redis may run is accepted, the one its state
    /// shows is kept.
    UnlockRetake {
        g: usize,
        lease: Lease,
        take_first: bool,
    },
    /// `with_owner(o).unlock()` of `half` (a Java owner: `unlock()`).
    OwnerUnlock {
        o: usize,
        half: Half,
    },
    Forget {
        g: usize,
    },
    Extend {
        g: usize,
        lease: Lease,
    },
    /// `downgrade()` of a write guard.
    Downgrade {
        g: usize,
    },
    ForceUnlock {
        by: usize,
        half: Half,
    },
    Sleep(u64),
}

fn h(half: &Half) -> &'static str {
    if *half == Half::Read {
        "read"
    } else {
        "write"
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = |o: &usize| java::who(*o);
        match self {
            Op::Acquire {
                o,
                half,
                wait,
                lease,
            } => {
                if java::slot(*o).is_some() {
                    write!(
                        f,
                        "{}.{}.{}(lease={lease})",
                        who(o),
                        h(half),
                        if *wait {
                            "lock if free, else try_lock"
                        } else {
                            "try_lock"
                        }
                    )
                } else if *wait {
                    write!(
                        f,
                        "{}.{}.try_lock_for(wait={}, lease={lease})",
                        who(o),
                        h(half),
                        ms(WAIT)
                    )
                } else {
                    write!(f, "{}.{}.try_lock(lease={lease})", who(o), h(half))
                }
            }
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
            Op::OwnerUnlock { o, half } => write!(f, "{}.{}.unlock()", who(o), h(half)),
            Op::Forget { g } => write!(f, "guard[-{}].forget()", g + 1),
            Op::Extend { g, lease } => write!(f, "guard[-{}].extend({lease})", g + 1),
            Op::Downgrade { g } => write!(f, "write_guard[-{}].downgrade()", g + 1),
            Op::ForceUnlock { by, half } => {
                write!(f, "client_of({}).{}.force_unlock()", who(by), h(half))
            }
            Op::Sleep(d) => write!(f, "sleep({d}ms)"),
        }
    }
}

/// Sequences with `owners` owners (Rust ones first).
pub fn strategy_for(owners: usize) -> impl Strategy<Value = Vec<Op>> {
    let o = owner(owners);
    let half = prop_oneof![Just(Half::Read), Just(Half::Write)];
    let g = 0..4usize;
    let op = prop_oneof![
        6 => (o.clone(), half.clone(), any::<bool>(), Lease::strategy())
            .prop_map(|(o, half, wait, lease)| Op::Acquire { o, half, wait, lease }),
        2 => g.clone().prop_map(|g| Op::Reenter { g }),
        4 => g.clone().prop_map(|g| Op::Unlock { g }),
        2 => (g.clone(), Lease::strategy(), any::<bool>())
            .prop_map(|(g, lease, take_first)| Op::UnlockRetake { g, lease, take_first }),
        2 => (o.clone(), half.clone()).prop_map(|(o, half)| Op::OwnerUnlock { o, half }),
        1 => g.clone().prop_map(|g| Op::Forget { g }),
        2 => (g.clone(), Lease::explicit()).prop_map(|(g, lease)| Op::Extend { g, lease }),
        2 => g.prop_map(|g| Op::Downgrade { g }),
        1 => (o, half).prop_map(|(by, half)| Op::ForceUnlock { by, half }),
        1 => sleep().prop_map(Op::Sleep),
    ];
    proptest::collection::vec(op, 1..25)
}

/// Rust owners only.
pub fn strategy() -> impl Strategy<Value = Vec<Op>> {
    strategy_for(OWNERS)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

/// An unlock found no `mode` (the hash is gone).
struct NoMode;

#[derive(Clone)]
struct Model {
    mode: Option<Mode>,
    writer: Option<(usize, u32)>,
    /// Each owner's read hold count.
    readers: Vec<u32>,
    /// Owner `o`'s timeout key `k` is `tkeys[o][k - 1]` (`None`: gone).
    tkeys: Vec<Vec<Option<Ttl>>>,
    n: Ttl,
    g: Guards,
}

struct Before {
    tenures: Vec<bool>,
    n: bool,
    keys: Vec<bool>,
}

impl Model {
    fn clear(&mut self) {
        self.mode = None;
        self.writer = None;
        self.readers.iter_mut().for_each(|c| *c = 0);
    }

    fn in_redis(&self, (o, half): (usize, Half)) -> bool {
        match half {
            Half::Read => self.readers[o] > 0,
            _ => matches!(self.writer, Some((w, _)) if w == o),
        }
    }

    /// Whether a renewal keeps owner `o`'s timeout keys alive (§5.6).
    fn renewing_keys(&self, o: usize) -> bool {
        o < OWNERS && self.readers[o] > 0 && self.g.field_renewing((o, Half::Read))
    }

    /// Whether a renewal keeps `N` alive: a renewed read or write tenure
    /// whose field is in `N`.
    fn renewing_n(&self) -> bool {
        (0..OWNERS).any(|o| {
            self.renewing_keys(o)
                || (self.in_redis((o, Half::Write)) && self.g.field_renewing((o, Half::Write)))
        })
    }

    fn expire(&mut self, now: Instant) {
        self.g.flip(now);
        for o in 0..self.tkeys.len() {
            let renewing = self.renewing_keys(o);
            for k in self.tkeys[o].iter_mut() {
                if k.is_some_and(|e| e.over(renewing, now)) {
                    *k = None;
                }
            }
        }
        if self.mode.is_some() && self.n.over(self.renewing_n(), now) {
            self.clear();
        }
        self.hear();
    }

    fn hear(&mut self) {
        let readers = self.readers.clone();
        let writer = self.writer;
        self.g.hear_removals(|(o, half)| match half {
            Half::Read => readers[o] > 0,
            _ => matches!(writer, Some((w, _)) if w == o),
        });
    }

    fn windows(&self) -> Vec<Exp> {
        let mut w = self.g.windows();
        for (o, keys) in self.tkeys.iter().enumerate() {
            let renewing = self.renewing_keys(o);
            w.extend(keys.iter().flatten().filter_map(|k| k.window(renewing)));
        }
        if self.mode.is_some() {
            w.extend(self.n.window(self.renewing_n()));
        }
        w
    }

    fn before(&self) -> Before {
        Before {
            tenures: self.g.renewing_now(),
            n: self.renewing_n(),
            keys: (0..self.tkeys.len())
                .map(|o| self.renewing_keys(o))
                .collect(),
        }
    }

    fn after(&mut self, before: &Before, at: Instant) {
        self.hear();
        self.g.renewals_stopped(&before.tenures, at);
        if before.n && self.mode.is_some() && !self.renewing_n() {
            self.n = self.n.renewal_stopped(at);
        }
        for o in 0..self.tkeys.len() {
            if before.keys[o] && !self.renewing_keys(o) {
                for k in self.tkeys[o].iter_mut().flatten() {
                    *k = k.renewal_stopped(at);
                }
            }
        }
    }

    fn lease(o: usize, lease: Option<Duration>) -> Duration {
        lease.unwrap_or(if java::slot(o).is_some() {
            JAVA_WATCHDOG
        } else {
            WATCHDOG
        })
    }

    /// §5.2: the owner's read count after it.
    fn read_acquire(
        &mut self,
        o: usize,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Result<u32, Out> {
        let e = Ttl::set(Model::lease(o, lease), t0, t1);
        match self.mode {
            None => {
                self.mode = Some(Mode::Read);
                self.n = e;
            }
            Some(Mode::Read) => self.n = self.n.max(e),
            Some(Mode::Write) if matches!(self.writer, Some((w, _)) if w == o) => {
                self.n = self.n.max(e)
            }
            Some(Mode::Write) => return Err(Out::Busy),
        }
        self.readers[o] += 1;
        let k = self.readers[o] as usize;
        if self.tkeys[o].len() < k {
            self.tkeys[o].resize(k, None);
        }
        self.tkeys[o][k - 1] = Some(e);
        Ok(self.readers[o])
    }

    /// §5.2 or §5.4 for `half`: the hold count after it, and what the
    /// command proves of the key's TTL.
    fn acquire(
        &mut self,
        o: usize,
        half: Half,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Result<(u32, Ttl), Out> {
        match half {
            Half::Read => self
                .read_acquire(o, lease, t0, t1)
                .map(|c| (c, confirmed(lease, t0, t1))),
            _ => self.write_acquire(o, lease, t0, t1),
        }
    }

    /// §5.4: the write count after it, and what the command proves of the
    /// key's TTL (a re-entry adds the lease to the remaining TTL).
    fn write_acquire(
        &mut self,
        o: usize,
        lease: Option<Duration>,
        t0: Instant,
        t1: Instant,
    ) -> Result<(u32, Ttl), Out> {
        let l = Model::lease(o, lease);
        let e = Ttl::set(l, t0, t1);
        match (self.mode, self.writer) {
            (None, _) => {
                self.mode = Some(Mode::Write);
                self.writer = Some((o, 1));
                self.n = e;
                Ok((1, e))
            }
            (Some(Mode::Write), Some((w, c))) if w == o => {
                self.n = self.n.at(self.renewing_n(), t1).plus(l);
                self.writer = Some((o, c + 1));
                Ok((
                    c + 1,
                    Ttl {
                        lo: e.lo,
                        hi: self.n.hi.max(e.hi),
                    },
                ))
            }
            _ => Err(Out::Busy),
        }
    }

    /// What a Rust read unlock for tenure `t` sends as its owner's need
    /// (§5.3); nothing for a write unlock.
    fn need(&mut self, half: Half, t: Option<usize>, t0: Instant, t1: Instant) -> Option<Ttl> {
        match half {
            Half::Read => self.g.remaining_need(t, t0, t1),
            _ => None,
        }
    }

    /// The longest remaining timeout key of any reader (§5.3 step 5).
    fn longest_reader_key(&self, at: Instant) -> Option<Ttl> {
        (0..self.readers.len())
            .flat_map(|p| {
                let renewing = self.renewing_keys(p);
                self.tkeys[p]
                    .iter()
                    .take(self.readers[p] as usize)
                    .flatten()
                    .map(move |k| k.at(renewing, at))
            })
            .reduce(Ttl::max)
    }

    /// §5.3 (and Redisson's read unlock for a Java owner); `need`: what
    /// the owner's remaining holds need, where the client sends it.
    fn read_unlock(&mut self, o: usize, t1: Instant, need: Option<Ttl>) -> Result<Reply, NoMode> {
        let Some(mode) = self.mode else {
            return Err(NoMode);
        };
        if self.readers[o] == 0 {
            return Ok(Reply::NotHeld);
        }
        let java = java::slot(o).is_some();
        let renewing = self.renewing_keys(o);
        let k = self.readers[o] as usize;
        let gone = self.tkeys[o][k - 1].take().map(|t| t.at(renewing, t1));
        self.readers[o] -= 1;
        let c = self.readers[o] as usize;
        if !java && c > 0 {
            match need {
                // No key of the owner lives longer than its holds need, and
                // one lives that long: a key that reached it, cut to it, or
                // else the last one, set to it.
                Some(need) => {
                    let keys = &mut self.tkeys[o][..c];
                    let certainly = keys.iter().flatten().any(|k| k.lo >= need.hi);
                    let possibly = keys.iter().flatten().any(|k| k.hi >= need.lo);
                    for k in keys.iter_mut().flatten() {
                        *k = k.min(need);
                    }
                    let last = &mut keys[c - 1];
                    if !possibly {
                        *last = Some(need);
                    } else if !certainly {
                        // Set to the need, or left as it is: a last key
                        // already gone may stay gone (expired by `t1`).
                        let gone = Ttl { lo: t1, hi: t1 };
                        *last = Some(last.unwrap_or(gone).either(need));
                    }
                }
                // The owner's new last key takes over the leaving one's time.
                None => {
                    if let Some(r) = gone {
                        let last = &mut self.tkeys[o][c - 1];
                        *last = Some(last.map_or(r, |k| k.max(r)));
                    }
                }
            }
        }
        let others = self.writer.is_some() || self.readers.iter().any(|&c| c > 0);
        if others {
            if mode == Mode::Write && !java {
                return Ok(Reply::StillHeld);
            }
            if let Some(longest) = self.longest_reader_key(t1) {
                self.n = longest;
                return Ok(Reply::StillHeld);
            }
            if mode == Mode::Write {
                return Ok(Reply::StillHeld);
            }
        }
        self.clear();
        Ok(Reply::Released)
    }

    /// §5.5 (and Redisson's write unlock for a Java owner).
    fn write_unlock(&mut self, o: usize, t0: Instant, t1: Instant) -> Result<Reply, NoMode> {
        match (self.mode, self.writer) {
            (None, _) => Err(NoMode),
            (Some(Mode::Write), Some((w, c))) if w == o => {
                if c > 1 {
                    self.writer = Some((o, c - 1));
                    if java::slot(o).is_some() {
                        self.n = Ttl::set(JAVA_WATCHDOG, t0, t1);
                    }
                } else if self.readers.iter().any(|&c| c > 0) {
                    self.writer = None;
                    self.mode = Some(Mode::Read);
                } else {
                    self.clear();
                }
                Ok(if c > 1 {
                    Reply::StillHeld
                } else {
                    Reply::Released
                })
            }
            _ => Ok(Reply::NotHeld),
        }
    }

    /// An unlock by owner `o` of `half`: the reply for the guards' model,
    /// and what the caller sees.
    fn unlock(
        &mut self,
        o: usize,
        half: Half,
        t0: Instant,
        t1: Instant,
        java_legacy: bool,
        need: Option<Ttl>,
    ) -> (Reply, Out) {
        let r = match half {
            Half::Read => self.read_unlock(o, t1, need),
            _ => self.write_unlock(o, t0, t1),
        };
        match r {
            Ok(Reply::NotHeld) => (Reply::NotHeld, Out::NotHeld),
            Ok(reply) => (reply, Out::Released),
            // Redisson before 3.44 replies success (§11.3).
            Err(NoMode) if java_legacy => (Reply::NotHeld, Out::Released),
            Err(NoMode) => (Reply::NotHeld, Out::NotHeld),
        }
    }

    /// `extend(lease)` of owner `o`'s `half` hold: the renewal script for
    /// it (§5.6), `max(PTTL, lease)` on `N` and, for a read hold, on the
    /// owner's timeout keys. Whether the field was there.
    fn extend(&mut self, o: usize, half: Half, l: Duration, t0: Instant, t1: Instant) -> bool {
        if !self.in_redis((o, half)) {
            return false;
        }
        let e = Ttl::set(l, t0, t1);
        if half == Half::Read {
            let c = self.readers[o] as usize;
            for k in self.tkeys[o].iter_mut().take(c).flatten() {
                // A key whose own time may have run out before the extend
                // ran (a short-leased key of a renewed owner, which a
                // renewal keeps only if one came in time) is either gone,
                // as `PEXPIRE` of a missing key does nothing, or extended;
                // the next read of the state tells (`learn`).
                *k = if k.lo <= t1 { k.either(e) } else { k.max(e) };
            }
        }
        self.n = self.n.max(e);
        true
    }
}

struct Handles {
    read: Vec<OwnedLock<Read>>,
    write: Vec<OwnedLock<Write>>,
}

pub fn case(env: &Env, ops: &[Op]) -> Result<(), String> {
    let what = match &env.java {
        Some(j) => format!("ReadWriteLock with Java {}", j.version),
        None => "ReadWriteLock".to_owned(),
    };
    super::one_case(env, "model-rw", &what, async |step, name| {
        let mut c = Case::new(env, name);
        c.steps(step, ops).await
    })
}

struct Case<'a> {
    env: &'a Env,
    name: &'a str,
    h: Handles,
    m: Model,
    reals: Reals,
    strays: Vec<Real>,
    /// Which guard the running step picked, for the transcript.
    resolved: String,
}

impl<'a> Case<'a> {
    fn new(env: &'a Env, name: &'a str) -> Case<'a> {
        let mut h = Handles {
            read: Vec::new(),
            write: Vec::new(),
        };
        for o in 0..OWNERS {
            let rw = env.client(o).read_write_lock(name).expect("rw handle");
            h.read.push(rw.read().with_owner(Env::owner(o)));
            h.write.push(rw.write().with_owner(Env::owner(o)));
        }
        let owners = env.owners();
        let now = Instant::now();
        Case {
            env,
            name,
            h,
            m: Model {
                mode: None,
                writer: None,
                readers: vec![0; owners],
                tkeys: vec![Vec::new(); owners],
                n: Ttl::set(Duration::ZERO, now, now),
                g: Guards::new(),
            },
            reals: Reals::default(),
            strays: Vec::new(),
            resolved: String::new(),
        }
    }

    /// The owner and half of guard `g`, which the step's record names.
    fn resolve(&mut self, g: usize) -> (usize, Half) {
        let (o, half) = self.m.g.guards[g].field;
        self.resolved = format!(" (#{g} of owner{o}, {})", h(&half));
        (o, half)
    }

    /// What a real acquisition came to; its guard is kept beside the
    /// model's newest one when the model (`model`) acquired too.
    fn real_acquired(&mut self, real: Result<Real, Error>, model: &Out) -> Out {
        match real {
            Ok(guard) => {
                let (acquired, newest) = (*model == Out::Acquired(None), self.m.g.guards.len() - 1);
                self.reals.keep(guard, acquired, newest, &mut self.strays);
                Out::Acquired(None)
            }
            Err(e) => out_of(Err::<(), _>(e), |()| Out::Busy),
        }
    }

    async fn steps(&mut self, step: &mut Step<'_>, ops: &[Op]) -> StepResult<()> {
        for op in ops {
            let now = step.settle(&self.m.windows()).await;
            self.m.expire(now);
            if let Op::Sleep(d) = *op {
                tokio::time::sleep(Duration::from_millis(d)).await;
                step.record(op, "");
                let now = step.settle(&self.m.windows()).await;
                self.m.expire(now);
                self.finish(step, None).await?;
                continue;
            }
            let before = self.m.before();
            self.resolved.clear();
            let Some((real, model)) = self.apply(step, op).await? else {
                continue;
            };
            self.m.after(&before, Instant::now());
            step.record(
                &format_args!("{op:?}{}", self.resolved),
                &format!("{real:?}"),
            );
            self.finish(step, Some((real, model))).await?;
        }
        Ok(())
    }

    async fn finish(&mut self, step: &mut Step<'_>, reply: Option<(Out, Out)>) -> StepResult<()> {
        self.reals.await_heard(step, &mut self.m.g).await?;
        let state = read_state(self.env, self.name).await;
        let seen = self.reals.snapshot(&self.m.g);
        if let Ok(s) = &state {
            self.learn(s);
        }
        self.reals.learn(&mut self.m.g, &seen);
        step.check_time(&self.m.windows())?;
        if let Some((real, model)) = reply {
            step.expect("reply", real, model)?;
        }
        let s = match state {
            Ok(s) => s,
            Err(e) => return step.mismatch(format!("reading state: {e}")),
        };
        self.check_state(step, &s)?;
        let (env, name) = (self.env, self.name);
        let bound = |(o, half): (usize, Half)| s.bound(env, name, o, half);
        self.reals
            .compare(step, &mut self.m.g, &seen, bound)
            .await?;
        step.compared();
        Ok(())
    }

    /// What the `PTTL`s read prove of the keys' expiries. A timeout key
    /// whose own TTL may have run out (`lo` passed) may be gone: a renewal
    /// extends only keys alive when it runs (`PEXPIRE` of a missing key
    /// does nothing), so a short-leased key of a renewed owner lives on
    /// only if a run came before its lease ended; which it was, the read
    /// tells. (The owner's longest key always carries the renewal, so `N`
    /// and the guards do not depend on it.)
    fn learn(&mut self, s: &State) {
        learn(self.env, self.name, &mut self.m, s);
    }

    async fn apply(&mut self, step: &mut Step<'_>, op: &Op) -> StepResult<Option<(Out, Out)>> {
        let t0 = Instant::now();
        let java_obj = |half: Half| format!("{}:{}", h(&half), self.name);
        let out = match *op {
            Op::Acquire {
                o,
                half,
                wait,
                lease,
            } if java::slot(o).is_some() => {
                let j = self.env.java.as_ref().expect("the Java peer");
                // `lock()` where it cannot block, else `tryLock(0, lease)`.
                let writer = self.m.writer.is_none_or(|(w, _)| w == o);
                let free = match (half, self.m.mode) {
                    (_, None) => true,
                    (Half::Read, Some(Mode::Read)) => true,
                    (_, Some(Mode::Write)) => writer,
                    _ => false,
                };
                let real = if wait && free {
                    j.lock(o, &java_obj(half), lease.get()).await
                } else {
                    j.try_lock(o, &java_obj(half), lease.get()).await
                };
                let t1 = Instant::now();
                let r = self.m.acquire(o, half, lease.get(), t0, t1);
                (real, r.map_or_else(|e| e, |_| Out::Acquired(None)))
            }
            Op::Acquire {
                o,
                half,
                wait,
                lease,
            } => {
                let l = lease.get();
                let wait = if wait { WAIT } else { Duration::ZERO };
                let got = match half {
                    Half::Read => try_lock(&self.h.read[o], wait, l)
                        .await
                        .map(|g| g.map(Real::Read)),
                    _ => try_lock(&self.h.write[o], wait, l)
                        .await
                        .map(|g| g.map(Real::Write)),
                };
                let (real, guard) = match got {
                    Ok(Some(g)) => (Out::Acquired(None), Some(g)),
                    r => (out_of(r, |_| Out::Busy), None),
                };
                let t1 = Instant::now();
                let model = match self.m.acquire(o, half, l, t0, t1) {
                    Ok((c, conf)) => {
                        let g = self.m.g.acquired((o, half), c, l, conf);
                        match guard {
                            Some(guard) => self.reals.set(g, guard),
                            None => self.reals.reserve(g),
                        }
                        Out::Acquired(None)
                    }
                    Err(e) => {
                        self.strays.extend(guard);
                        e
                    }
                };
                (real, model)
            }
            Op::Reenter { g } => {
                let Some(g) = self.m.g.pick(g, |guard| guard.state == GState::Live) else {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                };
                let (o, half) = self.resolve(g);
                let real = match self.reals.get(g) {
                    Some(guard) => guard.reenter().await,
                    None => Err(Error::Closed),
                };
                let t1 = Instant::now();
                let lease = self.m.g.guards[g].lease;
                let model = if self.m.g.refused(g) {
                    Out::NotHeld
                } else {
                    let count = self.m.acquire(o, half, lease, t0, t1);
                    match count {
                        Ok((1, conf)) => {
                            // Taken afresh: released again (§2.9).
                            let fresh = self.m.g.acquired((o, half), 1, lease, conf);
                            self.reals.reserve(fresh);
                            let t = self.m.g.releasing(fresh);
                            let need = self.m.need(half, t, t0, t1);
                            let (reply, _) = self.m.unlock(o, half, t0, t1, false, need);
                            self.m.g.replied(t, reply);
                            Out::NotHeld
                        }
                        Ok((c, conf)) => {
                            let g2 = self.m.g.acquired((o, half), c, lease, conf);
                            self.reals.reserve(g2);
                            Out::Acquired(None)
                        }
                        Err(_) => Out::NotHeld,
                    }
                };
                (self.real_acquired(real, &model), model)
            }
            Op::Unlock { g } => match self.m.g.pick(g, |_| true) {
                None => {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                }
                Some(g) => {
                    let (o, half) = self.resolve(g);
                    let real = match self.reals.take(g) {
                        Some(guard) => guard.unlock().await,
                        None => Err(Error::Closed),
                    };
                    let t1 = Instant::now();
                    let model = match self.m.g.releasing(g) {
                        None => Out::NotHeld,
                        t => {
                            let need = self.m.need(half, t, t0, t1);
                            let (reply, out) = self.m.unlock(o, half, t0, t1, false, need);
                            self.m.g.replied(t, reply);
                            out
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
                let (o, half) = self.resolve(g);
                return Ok(Some(
                    self.unlock_retake(g, o, half, lease.get(), take_first, t0)
                        .await,
                ));
            }
            Op::OwnerUnlock { o, half } => self.owner_unlock(o, half, t0).await,
            Op::Forget { g } => {
                let Some(g) = self.m.g.pick(g, |guard| guard.state == GState::Live) else {
                    step.record(op, "n/a (no guard)");
                    return Ok(None);
                };
                self.resolve(g);
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
                let (o, half) = self.resolve(g);
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
                    let found = self.m.extend(o, half, l, t0, t1);
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
            Op::Downgrade { g } => {
                let g = self.m.g.pick(g, |guard| {
                    guard.field.1 == Half::Write && guard.state == GState::Live
                });
                let o = g.map_or(0, |g| self.m.g.guards[g].field.0);
                if let Some(g) = g {
                    self.resolved = format!(" (#{g} of owner{o})");
                }
                let ok = g.is_some_and(|g| {
                    let guard = &self.m.g.guards[g];
                    java::slot(o).is_none()
                        && guard.state == GState::Live
                        && !self.m.g.refused(g)
                        && self.m.g.current(guard.field) == Some(guard.tenure)
                        && self.m.in_redis((o, Half::Write))
                });
                let (Some(g), true) = (g, ok) else {
                    // A refused downgrade releases the write hold in the
                    // background: not a step whose state can be compared.
                    step.record(op, "n/a (not a live write guard of the writer)");
                    return Ok(None);
                };
                let real = match self.reals.take(g) {
                    Some(Real::Write(w)) => w.downgrade().await.map(Real::Read),
                    _ => Err(Error::Closed),
                };
                let t1 = Instant::now();
                let lease = self.m.g.guards[g].lease;
                let model = match self.m.read_acquire(o, lease, t0, t1) {
                    Ok(c) => {
                        let r =
                            self.m
                                .g
                                .acquired((o, Half::Read), c, lease, confirmed(lease, t0, t1));
                        self.reals.reserve(r);
                        let t = self.m.g.releasing(g);
                        let (reply, _) = self.m.unlock(o, Half::Write, t0, t1, false, None);
                        self.m.g.replied(t, reply);
                        Out::Acquired(None)
                    }
                    Err(e) => e,
                };
                (self.real_acquired(real, &model), model)
            }
            Op::ForceUnlock { by, half } => {
                let real = match java::slot(by) {
                    Some(_) => {
                        let j = self.env.java.as_ref().expect("the Java peer");
                        j.force_unlock(by, &java_obj(half)).await
                    }
                    None => {
                        let r = match half {
                            Half::Read => self.h.read[by].force_unlock().await,
                            _ => self.h.write[by].force_unlock().await,
                        };
                        out_of(r, Out::Bool)
                    }
                };
                let mode = if half == Half::Read {
                    Mode::Read
                } else {
                    Mode::Write
                };
                let held = self.m.mode == Some(mode);
                if held {
                    self.m.clear();
                    if java::slot(by).is_none() {
                        let client = Env::client_of(by);
                        self.m
                            .g
                            .force_unlocked_here(|o| o < OWNERS && Env::client_of(o) == client);
                    }
                }
                (real, Out::Bool(held))
            }
            Op::Sleep(_) => unreachable!("handled by the caller"),
        };
        Ok(Some(out))
    }

    /// [`Op::UnlockRetake`] of guard `g` of owner `o`'s `half`, sent at
    /// `t0`.
    async fn unlock_retake(
        &mut self,
        g: usize,
        o: usize,
        half: Half,
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
        let (read, write) = (self.h.read[o].clone(), self.h.write[o].clone());
        let take = async move {
            let got = match half {
                Half::Read => try_lock(&read, Duration::ZERO, lease)
                    .await
                    .map(|g| g.map(Real::Read)),
                _ => try_lock(&write, Duration::ZERO, lease)
                    .await
                    .map(|g| g.map(Real::Write)),
            };
            match got {
                Ok(Some(g)) => (Out::Acquired(None), Some(g)),
                r => (out_of(r, |_| Out::Busy), None),
            }
        };
        let (unlocked_real, (taken_real, guard)) = if take_first {
            let (t, u) = tokio::join!(take, unlock);
            (u, t)
        } else {
            tokio::join!(unlock, take)
        };
        let t1 = Instant::now();
        // Either order is a linearization: the model runs each on a copy.
        let orders = [false, true].map(|retake_first| {
            let mut m = self.m.clone();
            let take = |m: &mut Model| match m.acquire(o, half, lease, t0, t1) {
                Ok((c, conf)) => {
                    m.g.acquired((o, half), c, lease, conf);
                    (Out::Acquired(None), true)
                }
                Err(e) => (e, false),
            };
            let unlock = |m: &mut Model| match m.g.releasing(g) {
                None => Out::NotHeld,
                t => {
                    let need = m.need(half, t, t0, t1);
                    let (reply, out) = m.unlock(o, half, t0, t1, false, need);
                    m.g.replied(t, reply);
                    out
                }
            };
            let (unlocked, (taken, acquired)) = if retake_first {
                let t = take(&mut m);
                (unlock(&mut m), t)
            } else {
                let u = unlock(&mut m);
                (u, take(&mut m))
            };
            m.after(&before, t1);
            (m, unlocked, taken, acquired)
        });
        // The order whose replies are the real ones and whose state (hash,
        // `N`'s expiry, the timeout keys) Redis shows ([`choose`]).
        let state = read_state(self.env, self.name).await.ok();
        let matching =
            |(_, u, t, _): &(Model, Out, Out, bool)| *u == unlocked_real && *t == taken_real;
        let (env, name) = (self.env, self.name);
        let mut orders = orders;
        if let Some(s) = &state {
            for (m, ..) in &mut orders {
                drop_gone_keys(env, name, m, s);
            }
        }
        let shown = |slack: Slack| {
            let state = &state;
            move |(m, ..): &(Model, Out, Out, bool)| {
                state
                    .as_ref()
                    .is_some_and(|s| differences(env, name, m, s, slack).is_ok())
            }
        };
        // What the guards show ([`choose`]; `finish` checks it again).
        let reals = &self.reals;
        let seen = |(m, _, _, acquired): &(Model, Out, Out, bool)| match &guard {
            Some(real) if *acquired => {
                let newest = m.g.guards.len() - 1;
                m.g.shows(newest, real) && m.g.losses_agree(reals, Some((newest, real)))
            }
            _ => m.g.losses_agree(reals, None),
        };
        let chosen = choose(&orders, matching, shown, seen).unwrap_or(usize::from(take_first));
        let [a, b] = orders;
        let (m, unlocked, taken, acquired) = if chosen == 0 { a } else { b };
        self.m = m;
        if acquired {
            let newest = self.m.g.guards.len() - 1;
            match guard {
                Some(guard) => self.reals.set(newest, guard),
                None => self.reals.reserve(newest),
            }
        } else {
            self.strays.extend(guard);
        }
        (
            Out::Pair(Box::new(unlocked_real), Box::new(taken_real)),
            Out::Pair(Box::new(unlocked), Box::new(taken)),
        )
    }

    /// `with_owner(o).unlock()` of `half` (Rust) or Java's `unlock()`.
    async fn owner_unlock(&mut self, o: usize, half: Half, t0: Instant) -> (Out, Out) {
        let java = java::slot(o).is_some();
        let real = if java {
            let j = self.env.java.as_ref().expect("the Java peer");
            j.unlock(o, &format!("{}:{}", h(&half), self.name)).await
        } else {
            let r = match half {
                Half::Read => self.h.read[o].unlock().await,
                _ => self.h.write[o].unlock().await,
            };
            out_of(r, |()| Out::Released)
        };
        let t1 = Instant::now();
        let t = if java {
            None
        } else {
            self.m.g.releasing_any((o, half))
        };
        let legacy = java && !self.env.java.as_ref().is_some_and(|j| j.since_3_44);
        let need = self.m.need(half, t, t0, t1);
        let (reply, out) = self.m.unlock(o, half, t0, t1, legacy, need);
        self.m.g.replied(t, reply);
        (real, out)
    }

    fn check_state(&self, step: &mut Step<'_>, s: &State) -> StepResult<()> {
        match differences(self.env, self.name, &self.m, s, Slack::Rounding) {
            Ok(()) => Ok(()),
            Err(why) => step.mismatch(why),
        }
    }
}

/// The first way Redis's state `s` differs from the model `m`, if any,
/// each `PTTL` allowed `slack`.
fn differences(env: &Env, name: &str, m: &Model, s: &State, slack: Slack) -> Result<(), String> {
    let expect = |what: &str, real: &dyn fmt::Debug, model: &dyn fmt::Debug, same: bool| {
        if same {
            Ok(())
        } else {
            Err(format!("{what}: real {real:?}, model {model:?}"))
        }
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
    expect("HGETALL N", &s.hash, &hash, s.hash == hash)?;
    if m.mode.is_none() {
        expect("PTTL N", &s.pttl, &-2, s.pttl == -2)?;
    } else if !m.n.fits_by(m.renewing_n(), s.pttl, s.r.0, s.r.1, slack) {
        return Err(format!(
            "PTTL N: real {}, model {}",
            s.pttl,
            window_str(m.n.at(m.renewing_n(), s.r.1), s.r.0)
        ));
    }
    let mut expected = BTreeMap::new();
    for (o, keys) in m.tkeys.iter().enumerate() {
        for (i, k) in keys.iter().enumerate() {
            if let Some(e) = k {
                expected.insert(timeout_key(env, name, o, i + 1), (*e, m.renewing_keys(o)));
            }
        }
    }
    let real: Vec<&String> = s.tkeys.keys().collect();
    let want: Vec<&String> = expected.keys().collect();
    expect("reader timeout keys", &real, &want, real == want)?;
    for (k, (e, renewing)) in &expected {
        let pttl = s.tkeys[k];
        // Listed, then expired before its PTTL was read: Redis allows
        // that once the key's expiry window has begun.
        let expired_since_listed = pttl == -2 && e.may_have_expired(*renewing, s.r.1);
        if !expired_since_listed && !e.fits_by(*renewing, pttl, s.r.0, s.r.1, slack) {
            return Err(format!(
                "PTTL {k}: real {pttl}, model {}",
                window_str(e.at(*renewing, s.r.1), s.r.0)
            ));
        }
    }
    Ok(())
}

/// The model `m` of lock `name` learns what state `s` proves
/// ([`Case::learn`]): the `PTTL`s that fit, and the timeout keys gone.
fn learn(env: &Env, name: &str, m: &mut Model, s: &State) {
    if m.mode.is_some() && m.n.fits(m.renewing_n(), s.pttl, s.r.0, s.r.1) {
        m.n.observed(s.pttl, s.r.0);
    }
    for o in 0..m.tkeys.len() {
        let renewing = m.renewing_keys(o);
        for (i, k) in m.tkeys[o].iter_mut().enumerate() {
            let key = timeout_key(env, name, o, i + 1);
            if let (Some(t), Some(&p)) = (k.as_mut(), s.tkeys.get(&key)) {
                if t.fits(renewing, p, s.r.0, s.r.1) {
                    t.observed(p, s.r.0);
                }
            }
        }
    }
    drop_gone_keys(env, name, m, s);
}

/// The timeout keys of `m` that state `s` lacks and whose own TTL may have
/// run out are gone (a renewal came too late for them).
fn drop_gone_keys(env: &Env, name: &str, m: &mut Model, s: &State) {
    for o in 0..m.tkeys.len() {
        for (i, k) in m.tkeys[o].iter_mut().enumerate() {
            let key = timeout_key(env, name, o, i + 1);
            if k.is_some_and(|t| t.lo <= s.r.1) && !s.tkeys.contains_key(&key) {
                *k = None;
            }
        }
    }
}

fn timeout_key(env: &Env, name: &str, o: usize, k: usize) -> String {
    format!("{{{name}}}:{}:rwlock_timeout:{k}", env.field(o))
}

struct State {
    hash: BTreeMap<String, String>,
    pttl: i64,
    tkeys: BTreeMap<String, i64>,
    r: (Instant, Instant),
}

impl State {
    /// The latest instant owner `o`'s `half` hold can last per the `PTTL`s
    /// read: `N`'s, and for a read hold also the longest of the owner's
    /// timeout keys (a read unlock by anyone sets `N` from them).
    fn bound(&self, env: &Env, name: &str, o: usize, half: Half) -> Option<Instant> {
        let field = env.field(o);
        let field = if half == Half::Write {
            format!("{field}:write")
        } else {
            field
        };
        if !self.hash.contains_key(&field) {
            return None;
        }
        let n = Ttl::real_bound(self.pttl, self.r.1)?;
        if half == Half::Write {
            return Some(n);
        }
        let count: usize = self.hash[&field].parse().unwrap_or(0);
        let keys = (1..=count)
            .filter_map(|k| self.tkeys.get(&timeout_key(env, name, o, k)))
            .filter_map(|&p| Ttl::real_bound(p, self.r.1))
            .max()?;
        Some(n.min(keys))
    }
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
