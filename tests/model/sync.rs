//! The semaphore (permits, the permit latches of held permits) and the
//! count-down latch (count, try-set, awaiters woken by count-down and
//! delete), run against the real crate.

use std::fmt;
use std::time::{Duration, Instant};

use fred::prelude::*;
use proptest::prelude::*;
use redisson_lock::{Error, LatchOpened, SemaphorePermit};

use super::{ms, Env, Step, StepResult, WAIT};

// ---------------------------------------------------------------- semaphore

#[derive(Clone)]
pub enum SemOp {
    TrySet {
        c: usize,
        p: u32,
    },
    /// `try_acquire(n)` or `try_acquire_permits_for(n, WAIT)`; the permit is kept.
    Acquire {
        c: usize,
        n: u32,
        wait: bool,
    },
    /// Release the `i`-th kept permit (modulo their number).
    ReleaseGuard {
        i: usize,
    },
    /// Guard-less `release(n)`.
    Release {
        c: usize,
        n: u32,
    },
    Add {
        c: usize,
        p: i32,
    },
    Drain {
        c: usize,
    },
    Available {
        c: usize,
    },
}

impl fmt::Debug for SemOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SemOp::TrySet { c, p } => write!(f, "client{c}.try_set_permits({p})"),
            SemOp::Acquire { c, n, wait: false } => write!(f, "client{c}.try_acquire({n})"),
            SemOp::Acquire { c, n, wait: true } => {
                write!(f, "client{c}.try_acquire_permits_for({n}, {})", ms(WAIT))
            }
            SemOp::ReleaseGuard { i } => write!(f, "permit[{i}].release()"),
            SemOp::Release { c, n } => write!(f, "client{c}.release({n})"),
            SemOp::Add { c, p } => write!(f, "client{c}.add_permits({p})"),
            SemOp::Drain { c } => write!(f, "client{c}.drain_permits()"),
            SemOp::Available { c } => write!(f, "client{c}.available_permits()"),
        }
    }
}

pub fn sem_strategy() -> impl Strategy<Value = Vec<SemOp>> {
    let c = 0..2usize;
    let op = prop_oneof![
        2 => (c.clone(), 0u32..4).prop_map(|(c, p)| SemOp::TrySet { c, p }),
        6 => (c.clone(), 1u32..3, any::<bool>()).prop_map(|(c, n, wait)| SemOp::Acquire { c, n, wait }),
        4 => (0usize..8).prop_map(|i| SemOp::ReleaseGuard { i }),
        2 => (c.clone(), 1u32..3).prop_map(|(c, n)| SemOp::Release { c, n }),
        2 => (c.clone(), -2i32..3).prop_map(|(c, p)| SemOp::Add { c, p }),
        1 => c.clone().prop_map(|c| SemOp::Drain { c }),
        1 => c.prop_map(|c| SemOp::Available { c }),
    ];
    proptest::collection::vec(op, 1..30)
}

#[derive(Debug, PartialEq)]
enum Out {
    Ok,
    Bool(bool),
    Int(i64),
    Acquired,
    Busy,
    Opened(Option<LatchOpened>),
    Err(String),
}

fn out_of<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => ok(v),
        Err(e) => Out::Err(e.to_string()),
    }
}

pub fn sem_case(env: &Env, ops: &[SemOp]) -> Result<(), String> {
    super::one_case(env, "model-sem", "Semaphore", async |step, name| {
        sem_run(env, step, name, ops).await
    })
}

async fn sem_run(env: &Env, step: &mut Step<'_>, name: &str, ops: &[SemOp]) -> StepResult<()> {
    let sems = env.per_client("semaphore", |c| c.semaphore(name));
    let mut permits: Vec<SemaphorePermit> = Vec::new();
    // The model: the count in `N` (None: missing) and the permits held.
    let mut count: Option<i64> = None;
    let mut held: Vec<u32> = Vec::new();
    for op in ops {
        let (real, model) = match *op {
            SemOp::TrySet { c, p } => {
                let real = out_of(sems[c].try_set_permits(p).await, Out::Bool);
                let set = count.is_none();
                if set {
                    count = Some(i64::from(p));
                }
                (real, Out::Bool(set))
            }
            SemOp::Acquire { c, n, wait } => {
                let r = if wait {
                    sems[c].try_acquire_permits_for(n, WAIT).await
                } else {
                    sems[c].try_acquire(n).await
                };
                let real = out_of(r, |p| match p {
                    Some(p) => {
                        permits.push(p);
                        Out::Acquired
                    }
                    None => Out::Busy,
                });
                let model = match count {
                    Some(v) if v >= i64::from(n) => {
                        count = Some(v - i64::from(n));
                        held.push(n);
                        Out::Acquired
                    }
                    _ => Out::Busy,
                };
                (real, model)
            }
            SemOp::ReleaseGuard { i } => {
                if permits.is_empty() {
                    step.record(op, "n/a (no permit)");
                    continue;
                }
                let i = i % permits.len();
                let real = out_of(permits.remove(i).release().await, |()| Out::Ok);
                let n = held.remove(i);
                count = Some(count.unwrap_or(0) + i64::from(n));
                (real, Out::Ok)
            }
            SemOp::Release { c, n } => {
                let real = out_of(sems[c].release(n).await, |()| Out::Ok);
                count = Some(count.unwrap_or(0) + i64::from(n));
                (real, Out::Ok)
            }
            SemOp::Add { c, p } => {
                let real = out_of(sems[c].add_permits(p).await, |()| Out::Ok);
                count = Some(count.unwrap_or(0) + i64::from(p));
                (real, Out::Ok)
            }
            SemOp::Drain { c } => {
                let real = out_of(sems[c].drain_permits().await, Out::Int);
                let had = count.unwrap_or(0);
                if count.is_some() {
                    count = Some(0);
                }
                (real, Out::Int(had))
            }
            SemOp::Available { c } => {
                let real = out_of(sems[c].available_permits().await, Out::Int);
                (real, Out::Int(count.unwrap_or(0)))
            }
        };
        step.record(op, &format!("{real:?}"));
        step.expect("reply", real, model)?;
        let raw = &env.raw;
        let value: Option<String> = raw.get(name).await.unwrap_or(Some("<error>".into()));
        step.expect("GET N", value, count.map(|c| c.to_string()))?;
        let pttl: i64 = raw.pttl(name).await.unwrap_or(0);
        step.expect("PTTL N", pttl, if count.is_some() { -1 } else { -2 })?;
        // Every held permit has its latch at "1"; released ones say "0"
        // until the background task deletes them.
        let latches: Vec<String> = raw
            .custom(
                fred::cmd!("KEYS"),
                vec![format!("redisson_sc_latch:{{{name}}}:*")],
            )
            .await
            .unwrap_or_default();
        let mut ones = 0;
        for l in &latches {
            let v: Option<String> = raw.get(l).await.unwrap_or(None);
            if v.as_deref() == Some("1") {
                ones += 1;
            }
        }
        step.expect("permit latches at 1", ones, held.len())?;
        step.compared();
    }
    Ok(())
}

// ------------------------------------------------------------------- latch

#[derive(Clone)]
pub enum LatchOp {
    TrySet {
        c: usize,
        n: u64,
    },
    CountDown {
        c: usize,
    },
    GetCount {
        c: usize,
    },
    Delete {
        c: usize,
    },
    /// `await_for(WAIT)` in line.
    AwaitShort {
        c: usize,
    },
    /// `await_zero()` in a task, left waiting (once subscribed) for a
    /// count-down to zero or a delete to end it.
    SpawnAwait {
        c: usize,
    },
}

pub fn latch_strategy() -> impl Strategy<Value = Vec<LatchOp>> {
    let c = 0..2usize;
    let op = prop_oneof![
        3 => (c.clone(), 1u64..4).prop_map(|(c, n)| LatchOp::TrySet { c, n }),
        5 => c.clone().prop_map(|c| LatchOp::CountDown { c }),
        1 => c.clone().prop_map(|c| LatchOp::GetCount { c }),
        1 => c.clone().prop_map(|c| LatchOp::Delete { c }),
        1 => c.clone().prop_map(|c| LatchOp::AwaitShort { c }),
        2 => c.prop_map(|c| LatchOp::SpawnAwait { c }),
    ];
    proptest::collection::vec(op, 1..30)
}

impl fmt::Debug for LatchOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LatchOp::TrySet { c, n } => write!(f, "client{c}.try_set_count({n})"),
            LatchOp::CountDown { c } => write!(f, "client{c}.count_down()"),
            LatchOp::GetCount { c } => write!(f, "client{c}.count()"),
            LatchOp::Delete { c } => write!(f, "client{c}.delete()"),
            LatchOp::AwaitShort { c } => write!(f, "client{c}.await_for({})", ms(WAIT)),
            LatchOp::SpawnAwait { c } => write!(f, "spawn client{c}.await_zero()"),
        }
    }
}

pub fn latch_case(env: &Env, ops: &[LatchOp]) -> Result<(), String> {
    super::one_case(env, "model-latch", "CountDownLatch", async |step, name| {
        latch_run(env, step, name, ops).await
    })
}

type Awaiter = tokio::task::JoinHandle<redisson_lock::Result<LatchOpened>>;

async fn latch_run(env: &Env, step: &mut Step<'_>, name: &str, ops: &[LatchOp]) -> StepResult<()> {
    let latches = env.per_client("latch", |c| c.count_down_latch(name));
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    let mut count: Option<i64> = None;
    // One pending awaiter per client at most (their subscription is how
    // the test knows they wait).
    let mut awaiters: [Option<Awaiter>; 2] = [None, None];
    let result = async {
        for op in ops {
            // What a pending awaiter must return after this step.
            let mut opens = None;
            let (real, model) = match *op {
                LatchOp::TrySet { c, n } => {
                    let real = out_of(latches[c].try_set_count(n).await, Out::Bool);
                    let set = count.is_none();
                    if set {
                        count = Some(n as i64);
                    }
                    (real, Out::Bool(set))
                }
                LatchOp::CountDown { c } => {
                    let real = out_of(latches[c].count_down().await, |()| Out::Ok);
                    if let Some(v) = count {
                        count = (v > 1).then_some(v - 1);
                        if v == 1 {
                            opens = Some(LatchOpened::Zero);
                        }
                    }
                    (real, Out::Ok)
                }
                LatchOp::GetCount { c } => {
                    let real = out_of(latches[c].count().await, Out::Int);
                    (real, Out::Int(count.unwrap_or(0)))
                }
                LatchOp::Delete { c } => {
                    let real = out_of(latches[c].delete().await, Out::Bool);
                    let existed = count.take().is_some();
                    if existed {
                        opens = Some(LatchOpened::Deleted);
                    }
                    (real, Out::Bool(existed))
                }
                LatchOp::AwaitShort { c } => {
                    let real = out_of(latches[c].await_for(WAIT).await, Out::Opened);
                    let model = if count.is_some() {
                        None
                    } else {
                        Some(LatchOpened::Zero)
                    };
                    (real, Out::Opened(model))
                }
                LatchOp::SpawnAwait { c } => {
                    if awaiters[c].is_some() || count.is_none() {
                        step.record(op, "n/a (one awaiter per client, on a set latch)");
                        continue;
                    }
                    // Earlier waiters' subscriptions must be gone first, so
                    // that the count seen next is this awaiter's.
                    let before = awaiters.iter().flatten().count() as i64;
                    until_numsub(env, step, &channel, before).await?;
                    let latch = latches[c].clone();
                    awaiters[c] = Some(tokio::spawn(async move { latch.await_zero().await }));
                    until_numsub(env, step, &channel, before + 1).await?;
                    step.record(op, "waiting");
                    continue;
                }
            };
            step.record(op, &format!("{real:?}"));
            step.expect("reply", real, model)?;
            for (c, slot) in awaiters.iter_mut().enumerate() {
                let Some(handle) = slot.as_mut() else {
                    continue;
                };
                match opens {
                    Some(expected) => {
                        let r = tokio::time::timeout(Duration::from_secs(3), handle).await;
                        let r = match r {
                            Ok(Ok(Ok(o))) => format!("{o:?}"),
                            other => format!("{other:?}"),
                        };
                        step.record(&format!("  client{c}'s awaiter"), &r);
                        step.expect("awaiter", r, format!("{expected:?}"))?;
                        *slot = None;
                    }
                    None if handle.is_finished() => {
                        return step.mismatch(format!("client{c}'s awaiter ended early"));
                    }
                    None => {}
                }
            }
            // No subscription outlives its waiters.
            let pending = awaiters.iter().flatten().count() as i64;
            until_numsub(env, step, &channel, pending).await?;
            let value: Option<String> = env.raw.get(name).await.unwrap_or(Some("<error>".into()));
            step.expect("GET N", value, count.map(|c| c.to_string()))?;
            let pttl: i64 = env.raw.pttl(name).await.unwrap_or(0);
            step.expect("PTTL N", pttl, if count.is_some() { -1 } else { -2 })?;
            step.compared();
        }
        Ok(())
    }
    .await;
    for a in awaiters.iter().flatten() {
        a.abort();
    }
    result
}

/// Wait (at most 3 s) until exactly `n` connections subscribe to `channel`.
async fn until_numsub(env: &Env, step: &mut Step<'_>, channel: &str, n: i64) -> StepResult<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let subs = crate::common::numsub(&env.raw, channel).await;
        if subs == n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return step.mismatch(format!("{subs} subscribers of {channel}, expected {n}"));
        }
        tokio::task::yield_now().await;
    }
}
