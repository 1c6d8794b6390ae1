//! Scenario `sem`: a semaphore of 4 permits, 16 tasks of one process taking
//! one permit each and giving it back at once, as fast as they can; ours
//! against the semaphore ceiling (`ceiling_semaphore.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{add_split_commands, ms, order, waits, Bench, Counters, Metrics};
use crate::ceiling_semaphore::{CeilingPermit, CeilingSemaphore};
use crate::java::{self, Java};
use crate::libs::{Kind, SEMAPHORES};
use crate::report::Record;
use crate::util::{instant_at, now_ns, quantile, sleep_until_ns};

/// Scenario sem: 16 tasks, a semaphore of 4 permits.
pub async fn run(b: &mut Bench<'_>) -> Result<()> {
    let kinds = b.start_interleaved(&SEMAPHORES).await?;
    let (url, admin, params, records) = (b.url, &mut b.admin, b.params, &mut b.records);
    let mut subjects = Vec::new();
    for kind in kinds {
        if let (true, Some(java)) = (kind.is_java(), b.java.as_ref()) {
            subjects.push((
                kind,
                Subject::Java(Box::new(
                    java.start(kind, url, crate::java::Warm::Sem).await?,
                )),
            ));
            continue;
        }
        let c = SemClients::connect(kind, url).await?;
        let warm = c
            .semaphore(&format!("sem:warm:{}", kind.key()), params.sem_permits)
            .await?;
        warm_up(&warm).await?;
        subjects.push((kind, Subject::Rust(c)));
    }
    let (tasks, permits) = (params.sem_tasks, params.sem_permits);
    for r in 0..params.sem_rounds {
        for i in order(subjects.len(), r) {
            let (kind, subject) = &mut subjects[i];
            let name = format!("sem:{}:{r}", kind.key());
            let lib = match subject {
                Subject::Rust(c) => Some(c.semaphore(&name, permits).await?),
                Subject::Java(_) => None,
            };
            let jvm = match subject {
                Subject::Java(java) => Some(java.pid()),
                Subject::Rust(_) => None,
            };
            let counters = Counters::start_for(admin, jvm).await?;
            let begin = now_ns() + 5_000_000;
            let start = begin + ms(params.warm_ms).as_nanos() as u64;
            let deadline = start + ms(params.sem_round_ms).as_nanos() as u64;
            let events = match subject {
                Subject::Java(java) => {
                    // The JVM sets the permits itself (trySetPermits) first.
                    java.call(
                        &format!("sem {name} {permits} {tasks} {begin} {deadline}"),
                        Duration::from_nanos(deadline.saturating_sub(now_ns())) + java::ANSWER,
                    )
                    .await?
                }
                Subject::Rust(_) => {
                    let lib = lib.as_ref().context("a Rust subject has its semaphore")?;
                    contend(lib, tasks, begin, deadline).await?
                }
            };
            let counted = counters.stop(admin, ms(30)).await?;
            let mut m = analyze(events, permits as usize, begin, start, deadline);
            counted.per_acquisition(&mut m);
            add_command_metrics(&mut m, &counted.commands);
            records.push(Record::new("sem", kind.key(), r, m));
        }
    }
    Ok(())
}

/// A subject of scenario sem: a Rust client, or a JVM.
enum Subject {
    Rust(SemClients),
    Java(Box<Java>),
}

/// One acquisition: (task, acquire called, acquire returned, release called),
/// `util::now_ns` ns; a wait abandoned at the deadline has `u64::MAX` as its
/// return and release times.
pub type SemEvent = (u32, u64, u64, u64);

/// The two semaphore clients under test, each with its handle to one
/// semaphore (a user keeps the handle; the ceiling keeps the name).
#[derive(Clone)]
pub enum SemLib {
    Ours(redisson_lock::Semaphore),
    Ceiling(CeilingSemaphore, Arc<str>),
}

enum SemHeld {
    Ours(redisson_lock::SemaphorePermit),
    Ceiling(CeilingPermit),
}

/// A connected subject of scenario sem: the library's client (which also
/// sets the permits, for both) and, for the ceiling, its own client. Each
/// round gets a fresh semaphore: the ceiling is not cancellation safe, so a
/// wait abandoned at a round's deadline may leak a permit of that round's.
pub struct SemClients {
    kind: Kind,
    ours: redisson_lock::Client,
    ceiling: Option<CeilingSemaphore>,
}

impl SemClients {
    pub async fn connect(kind: Kind, url: &str) -> Result<SemClients> {
        let ours = redisson_lock::Client::connect(url).await?;
        let ceiling = match kind {
            Kind::Ceiling => Some(CeilingSemaphore::connect(url).await?),
            _ => None,
        };
        Ok(SemClients {
            kind,
            ours,
            ceiling,
        })
    }

    /// Set the semaphore `name` to `permits` permits (with the library's
    /// `try_set_permits`, for both) and return this subject's handle to it.
    pub async fn semaphore(&self, name: &str, permits: u32) -> Result<SemLib> {
        let semaphore = self.ours.semaphore(name)?;
        anyhow::ensure!(
            semaphore.try_set_permits(permits).await?,
            "semaphore {name} already set"
        );
        Ok(match (&self.ceiling, self.kind) {
            (Some(ceiling), Kind::Ceiling) => SemLib::Ceiling(ceiling.clone(), Arc::from(name)),
            _ => SemLib::Ours(semaphore),
        })
    }
}

impl SemLib {
    async fn acquire(&self) -> Result<SemHeld> {
        Ok(match self {
            SemLib::Ours(semaphore) => SemHeld::Ours(semaphore.acquire(1).await?),
            SemLib::Ceiling(client, name) => SemHeld::Ceiling(client.acquire(name, 1).await?),
        })
    }
}

impl SemHeld {
    async fn release(self) -> Result<()> {
        match self {
            SemHeld::Ours(permit) => permit.release().await?,
            SemHeld::Ceiling(permit) => permit.release().await?,
        }
        Ok(())
    }
}

/// `tasks` tasks taking and giving back one permit from `start_ns` (the
/// round's warm-up begins) to `deadline_ns`; waits in progress at the
/// deadline are abandoned.
pub async fn contend(
    lib: &SemLib,
    tasks: u32,
    start_ns: u64,
    deadline_ns: u64,
) -> Result<Vec<SemEvent>> {
    let mut handles = Vec::new();
    for t in 0..tasks {
        let lib = lib.clone();
        handles.push(tokio::spawn(async move {
            sleep_until_ns(start_ns).await;
            let deadline = instant_at(deadline_ns);
            let mut events = Vec::new();
            while now_ns() < deadline_ns {
                let asked = now_ns();
                let held = tokio::select! {
                    biased;
                    _ = tokio::time::sleep_until(deadline) => {
                        events.push((t, asked, u64::MAX, u64::MAX));
                        break;
                    }
                    held = lib.acquire() => held?,
                };
                let acquired = now_ns();
                let releasing = now_ns();
                held.release().await?;
                events.push((t, asked, acquired, releasing));
            }
            anyhow::Ok(events)
        }));
    }
    let mut events = Vec::new();
    for h in handles {
        events.extend(h.await??);
    }
    Ok(events)
}

/// Throughput and handover latency of one round with `permits` permits,
/// the tasks starting at `begin_ns` (warm-up), measured from `start_ns` to
/// `deadline_ns`.
///
/// A handover is a permit passing from a releaser to a task that was
/// already waiting: permits freed (the initial ones at `begin_ns`, then one
/// per release call) are matched, oldest first, to acquisitions in the order
/// they returned; an acquisition whose task asked before its permit was
/// freed counts as a handover of `acquired - freed` (from the release call
/// to the waiter's acquire returning: the release script, the publish, the
/// wake-up and the waiter's acquire round trip), else as taking a permit
/// that sat free. Only acquisitions returning at or after `start_ns` count;
/// the warm-up's are matched, so that the window starts in steady state.
pub fn analyze(
    events: Vec<SemEvent>,
    permits: usize,
    begin_ns: u64,
    start_ns: u64,
    deadline_ns: u64,
) -> Metrics {
    let measured = |e: &SemEvent| e.2 >= start_ns;
    let (wait_us, abandoned) = waits(events.iter().map(|e| (e.1, e.2)), start_ns, deadline_ns);
    let done: Vec<SemEvent> = events.into_iter().filter(|e| e.2 != u64::MAX).collect();
    // (time, 0 = release / 1 = acquisition, asked): releases first on ties.
    let mut timeline: Vec<(u64, u8, u64)> = Vec::with_capacity(done.len() * 2);
    for e in &done {
        timeline.push((e.3, 0, 0));
        timeline.push((e.2, 1, e.1));
    }
    timeline.sort_unstable();
    let mut free: VecDeque<u64> = VecDeque::from(vec![begin_ns; permits]);
    let (mut handover_us, mut sat_free) = (Vec::new(), 0u64);
    for (at, what, asked) in timeline {
        if what == 0 {
            free.push_back(at);
            continue;
        }
        let freed = free.pop_front();
        if at < start_ns {
            continue;
        }
        match freed {
            // Signed, never clamped (`freed <= at` by construction).
            Some(freed) if asked <= freed => {
                handover_us.push((at as i64 - freed as i64) as f64 / 1e3)
            }
            _ => sat_free += 1,
        }
    }
    let window = (deadline_ns - start_ns) as f64 / 1e9;
    let in_window = done
        .iter()
        .filter(|e| measured(e) && e.2 <= deadline_ns)
        .count();
    Metrics::from([
        ("acq_per_s".into(), in_window as f64 / window),
        ("acquisitions".into(), in_window as f64),
        ("acquisitions_all".into(), done.len() as f64),
        ("handovers".into(), handover_us.len() as f64),
        ("handover_p50_us".into(), quantile(&handover_us, 0.50)),
        ("handover_p99_us".into(), quantile(&handover_us, 0.99)),
        ("handover_max_us".into(), quantile(&handover_us, 1.0)),
        ("acquired_while_free".into(), sat_free as f64),
        ("wait_p50_us".into(), quantile(&wait_us, 0.50)),
        ("wait_p99_us".into(), quantile(&wait_us, 0.99)),
        ("waits_abandoned_at_deadline".into(), abandoned as f64),
    ])
}

/// Commands per acquisition from a commandstats diff: the scripts call GET,
/// DECRBY and SET (acquire) and GET, INCRBY, PUBLISH and SET (release); the
/// clients send EVALSHA, the latch DELs, (UN)SUBSCRIBE and PING.
pub fn add_command_metrics(metrics: &mut Metrics, diff: &HashMap<String, u64>) {
    let get = |k: &str| diff.get(k).copied().unwrap_or(0);
    let total = crate::libs::total_commands(diff);
    let script: u64 = ["get", "decrby", "set", "incrby", "publish"]
        .iter()
        .map(|k| get(k))
        .sum();
    add_split_commands(metrics, total.saturating_sub(script), script);
}

/// A short warm-up: load the scripts and open the connections.
pub async fn warm_up(lib: &SemLib) -> Result<()> {
    for _ in 0..20 {
        lib.acquire().await?.release().await?;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}
