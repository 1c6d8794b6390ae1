//! The permit-expirable semaphore: available permits, the permits handed out
//! by id with their expiry (score), the reclaim of expired permits where
//! Redisson reclaims them (acquire: as many as it wants; counts and lease
//! queries: all), releases by guard and by id.

use std::fmt;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fred::prelude::*;
use proptest::prelude::*;
use redisson_lock::{Error, PermitGuard, PermitId, PermitLease};

use super::{lease_str, ms, Env, Exp, Step, StepResult, LEASE, WAIT};

/// Redisson's score of a permit that never expires.
const NEVER: f64 = 922_337_203_685_477.0;

#[derive(Clone)]
pub enum Op {
    TrySet {
        c: usize,
        p: u32,
    },
    Add {
        c: usize,
        p: i32,
    },
    SetPermits {
        c: usize,
        p: u32,
    },
    Acquire {
        c: usize,
        lease: bool,
        wait: bool,
    },
    /// The `i`-th kept permit (modulo their number): `guard.release()`.
    ReleaseGuard {
        i: usize,
    },
    /// `try_release(id)` of the `i`-th kept permit, whose guard is then forgotten.
    ReleaseById {
        c: usize,
        i: usize,
    },
    Counts {
        c: usize,
    },
    LeaseTime {
        c: usize,
        i: usize,
    },
    Sleep(u64),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::TrySet { c, p } => write!(f, "client{c}.try_set_permits({p})"),
            Op::Add { c, p } => write!(f, "client{c}.add_permits({p})"),
            Op::SetPermits { c, p } => write!(f, "client{c}.set_permits({p})"),
            Op::Acquire { c, lease, wait } => {
                let lease = lease_str(lease.then_some(LEASE));
                if *wait {
                    write!(f, "client{c}.try_acquire_for({}, lease={lease})", ms(WAIT))
                } else {
                    write!(f, "client{c}.try_acquire(lease={lease})")
                }
            }
            Op::ReleaseGuard { i } => write!(f, "permit[{i}].release()"),
            Op::ReleaseById { c, i } => write!(f, "client{c}.try_release(permit[{i}].id())"),
            Op::Counts { c } => write!(f, "client{c}.(available, acquired)"),
            Op::LeaseTime { c, i } => write!(f, "client{c}.lease_time(permit[{i}].id())"),
            Op::Sleep(d) => write!(f, "sleep({d}ms)"),
        }
    }
}

/// One case: `ops` on a fresh semaphore, against the model.
pub fn case(env: &Env, ops: &[Op]) -> Result<(), String> {
    let kind = "PermitExpirableSemaphore";
    super::one_case(env, "model-pes", kind, async |step, name| {
        run(env, step, name, ops).await
    })
}

pub fn strategy() -> impl Strategy<Value = Vec<Op>> {
    let c = 0..2usize;
    let op = prop_oneof![
        2 => (c.clone(), 0u32..4).prop_map(|(c, p)| Op::TrySet { c, p }),
        1 => (c.clone(), -1i32..3).prop_map(|(c, p)| Op::Add { c, p }),
        1 => (c.clone(), 0u32..5).prop_map(|(c, p)| Op::SetPermits { c, p }),
        6 => (c.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(c, lease, wait)| Op::Acquire { c, lease, wait }),
        3 => (0usize..8).prop_map(|i| Op::ReleaseGuard { i }),
        2 => (c.clone(), 0usize..8).prop_map(|(c, i)| Op::ReleaseById { c, i }),
        2 => c.clone().prop_map(|c| Op::Counts { c }),
        1 => (c, 0usize..8).prop_map(|(c, i)| Op::LeaseTime { c, i }),
        2 => prop_oneof![Just(20u64), Just(130u64)].prop_map(Op::Sleep),
    ];
    proptest::collection::vec(op, 1..30)
}

#[derive(Debug, PartialEq)]
enum Out {
    Ok,
    Bool(bool),
    Counts(i64, i64),
    Acquired,
    Busy,
    Lease(String),
    Err(String),
}

fn out_of<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => ok(v),
        Err(e) => Out::Err(e.to_string()),
    }
}

#[derive(Clone)]
struct Model {
    avail: Option<i64>,
    /// The permits in `Z`, by id: `None` never expires.
    z: Vec<(PermitId, Option<Exp>)>,
    /// Each permit's score as Redis holds it (checked against its window
    /// after the acquisition): the reclaim takes the lowest scores first,
    /// ties by member bytes, and two clients can write the same millisecond.
    scores: std::collections::HashMap<String, f64>,
}

impl Model {
    fn expired(e: &Option<Exp>, now: Instant) -> bool {
        e.is_some_and(|e| e.over(now))
    }

    /// `R(limit)`: the expired permits, earliest first, back to `N`.
    fn reclaim(&mut self, limit: usize, now: Instant) {
        let mut expired: Vec<(usize, f64, String)> = self
            .z
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| Self::expired(e, now))
            .map(|(i, (id, _))| {
                let id = id.to_string();
                (i, self.scores.get(&id).copied().unwrap_or(f64::NAN), id)
            })
            .collect();
        expired.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.2.cmp(&b.2)));
        expired.truncate(limit);
        if expired.is_empty() {
            return;
        }
        let mut gone: Vec<usize> = expired.iter().map(|(i, ..)| *i).collect();
        gone.sort_unstable_by(|a, b| b.cmp(a));
        for i in &gone {
            self.z.remove(*i);
        }
        self.avail = Some(self.avail.unwrap_or(0) + gone.len() as i64);
    }

    fn release(&mut self, id: &PermitId, now: Instant) -> bool {
        match self.z.iter().position(|(p, _)| p == id) {
            None => false,
            Some(i) => {
                let (_, e) = self.z.remove(i);
                self.avail = Some(self.avail.unwrap_or(0) + 1);
                !Self::expired(&e, now)
            }
        }
    }

    fn windows(&self) -> Vec<Exp> {
        self.z.iter().filter_map(|(_, e)| *e).collect()
    }
}

async fn run(env: &Env, step: &mut Step<'_>, name: &str, ops: &[Op]) -> StepResult<()> {
    let sems = env.per_client("semaphore", |c| c.permit_expirable_semaphore(name));
    let mut guards: Vec<PermitGuard> = Vec::new();
    let mut m = Model {
        avail: None,
        z: Vec::new(),
        scores: std::collections::HashMap::new(),
    };
    for op in ops {
        let now = step.settle(&m.windows()).await;
        // Other outcomes the step may have had besides `model` (a waiting
        // acquisition ends after one of several attempts).
        let mut alts: Vec<(Model, Out)> = Vec::new();
        let t0 = Instant::now();
        let (real, mut model) = match *op {
            Op::TrySet { c, p } => {
                let real = out_of(sems[c].try_set_permits(p).await, Out::Bool);
                let set = m.avail.is_none();
                if set {
                    m.avail = Some(i64::from(p));
                }
                (real, Out::Bool(set))
            }
            Op::Add { c, p } => {
                let real = out_of(sems[c].add_permits(p).await, |()| Out::Ok);
                m.avail = Some(m.avail.unwrap_or(0) + i64::from(p));
                (real, Out::Ok)
            }
            Op::SetPermits { c, p } => {
                let real = out_of(sems[c].set_permits(p).await, |()| Out::Ok);
                let p = i64::from(p);
                m.avail = Some(match m.avail {
                    None => p,
                    Some(_) => p - m.z.len() as i64,
                });
                (real, Out::Ok)
            }
            Op::Acquire { c, lease, wait } => {
                let lease = lease.then_some(LEASE);
                let r = if wait {
                    sems[c].try_acquire_for(WAIT, lease).await
                } else {
                    sems[c].try_acquire(lease).await
                };
                let t1 = Instant::now();
                let mut id = None;
                let real = out_of(r, |g| match g {
                    Some(g) => {
                        id = Some(g.id());
                        guards.push(g);
                        Out::Acquired
                    }
                    None => Out::Busy,
                });
                // Each attempt reclaims at most one expired permit (R(1))
                // and takes one if any is available; a waiting acquisition
                // makes as many attempts as its 15 ms allow, so it may end
                // after any of them: every such outcome is a candidate, and
                // the real reply and state must be one of them.
                let expired = m.z.iter().filter(|(_, e)| Model::expired(e, now)).count();
                let attempts = if wait { expired.max(1) } else { 1 };
                let mut cand = m.clone();
                for _ in 0..attempts {
                    cand.reclaim(1, now);
                    if let Some(a) = cand.avail.filter(|&a| a >= 1) {
                        cand.avail = Some(a - 1);
                        if let Some(id) = id {
                            cand.z.push((id, lease.map(|_| Exp::lease(lease, t0, t1))));
                        }
                        alts.push((cand.clone(), Out::Acquired));
                        break;
                    }
                    alts.push((cand.clone(), Out::Busy));
                }
                let (last, model) = alts.pop().unwrap_or((m.clone(), Out::Busy));
                m = last;
                (real, model)
            }
            Op::ReleaseGuard { i } => {
                if guards.is_empty() {
                    step.record(op, "n/a (no permit)");
                    continue;
                }
                let g = guards.remove(i % guards.len());
                let id = g.id();
                let real = out_of(g.release().await, Out::Bool);
                (real, Out::Bool(m.release(&id, now)))
            }
            Op::ReleaseById { c, i } => {
                if guards.is_empty() {
                    step.record(op, "n/a (no permit)");
                    continue;
                }
                let g = guards.remove(i % guards.len());
                let id = g.id();
                g.forget();
                let real = out_of(sems[c].try_release(&id).await, Out::Bool);
                (real, Out::Bool(m.release(&id, now)))
            }
            Op::Counts { c } => {
                let a = sems[c].available_permits().await;
                let h = sems[c].acquired_permits().await;
                let real = match (a, h) {
                    (Ok(a), Ok(h)) => Out::Counts(a, h),
                    (a, h) => Out::Err(format!("{a:?} {h:?}")),
                };
                m.reclaim(usize::MAX, now);
                (real, Out::Counts(m.avail.unwrap_or(0), m.z.len() as i64))
            }
            Op::LeaseTime { c, i } => {
                if guards.is_empty() {
                    step.record(op, "n/a (no permit)");
                    continue;
                }
                let id = guards[i % guards.len()].id();
                let r = sems[c].lease_time(&id).await;
                let t1 = Instant::now();
                m.reclaim(usize::MAX, now);
                let entry = m.z.iter().find(|(p, _)| *p == id).map(|(_, e)| *e);
                let real = match (r, entry) {
                    (Ok(Some(PermitLease::Expires(d))), Some(Some(e))) => {
                        let left = d.as_millis() as i64;
                        if e.fits(left, t0, t1) {
                            Out::Lease("expires (fits)".into())
                        } else {
                            Out::Lease(format!("expires in {left} ms"))
                        }
                    }
                    (Ok(Some(PermitLease::Expires(d))), _) => {
                        Out::Lease(format!("expires in {d:?}"))
                    }
                    (Ok(Some(PermitLease::Never)), _) => Out::Lease("never".into()),
                    (Ok(Some(other)), _) => Out::Lease(format!("{other:?}")),
                    (Ok(None), _) => Out::Lease("none".into()),
                    (Err(e), _) => Out::Err(e.to_string()),
                };
                let model = match entry {
                    None => "none",
                    Some(None) => "never",
                    Some(Some(_)) => "expires (fits)",
                };
                (real, Out::Lease(model.into()))
            }
            Op::Sleep(d) => {
                step.slept(op, d).await;
                continue;
            }
        };
        let read = read_state(env, name);
        let state = step.observed(op, &real, read, &m.windows()).await?;
        let (value, members) = match state {
            Ok(s) => s,
            Err(e) => return step.mismatch(format!("reading state: {e}")),
        };
        let real_ids: Vec<String> = members.iter().map(|(id, _)| id.clone()).collect();
        let matches = |m: &Model| {
            let mut ids: Vec<String> = m.z.iter().map(|(id, _)| id.to_string()).collect();
            ids.sort();
            value == m.avail.map(|a| a.to_string()) && ids == real_ids
        };
        if !matches(&m) {
            if let Some((alt, _)) = alts
                .into_iter()
                .find(|(alt, out)| *out == real && matches(alt))
            {
                step.record(&"  (ended after an earlier attempt)", "");
                m = alt;
                model = Out::Busy;
            }
        }
        step.expect("reply", real, model)?;
        step.expect("GET N", value, m.avail.map(|a| a.to_string()))?;
        let mut want_ids: Vec<String> = m.z.iter().map(|(id, _)| id.to_string()).collect();
        want_ids.sort();
        step.expect("ZRANGE Z (ids)", real_ids, want_ids)?;
        for (id, score) in &members {
            let Some((_, e)) = m.z.iter().find(|(p, _)| p.to_string() == *id) else {
                continue;
            };
            let fits = match e {
                None => *score == NEVER,
                Some(Exp::At { lo, hi }) => {
                    *score >= epoch_ms(*lo) - 3.0 && *score <= epoch_ms(*hi) + 3.0
                }
                Some(Exp::Long) => false,
            };
            if !fits {
                step.mismatch(format!("score of {id}: real {score}, model {e:?}"))?;
            }
            m.scores.insert(id.clone(), *score);
        }
        step.compared();
    }
    Ok(())
}

/// An instant as epoch milliseconds on this host's wall clock.
fn epoch_ms(at: Instant) -> f64 {
    let now = Instant::now();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0;
    if at >= now {
        wall + (at - now).as_secs_f64() * 1000.0
    } else {
        wall - (now - at).as_secs_f64() * 1000.0
    }
}

type Members = Vec<(String, f64)>;

/// `GET N` and `ZRANGE Z 0 -1 WITHSCORES`, members as 32 hex digits, sorted.
async fn read_state(
    env: &Env,
    name: &str,
) -> Result<(Option<String>, Members), fred::error::Error> {
    let value: Option<String> = env.raw.get(name).await?;
    let raw: Value = env
        .raw
        .zrange(
            format!("{{{name}}}:timeout"),
            0,
            -1,
            None,
            false,
            None,
            true,
        )
        .await?;
    let mut flat = Vec::new();
    flatten(raw, &mut flat);
    let mut members = Vec::new();
    for pair in flat.chunks(2) {
        let [member, score] = pair else { break };
        let id: String = match member {
            Value::Bytes(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
            Value::String(s) => s.as_bytes().iter().map(|x| format!("{x:02x}")).collect(),
            other => format!("{other:?}"),
        };
        let score = match score {
            Value::Double(d) => *d,
            other => other.as_f64().unwrap_or(f64::NAN),
        };
        members.push((id, score));
    }
    members.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((value, members))
}

fn flatten(v: Value, out: &mut Vec<Value>) {
    match v {
        Value::Array(items) => items.into_iter().for_each(|i| flatten(i, out)),
        Value::Null => {}
        other => out.push(other),
    }
}
