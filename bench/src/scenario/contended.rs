//! Scenarios 3 and 3b: 8 tasks of one process on one name; and what every
//! contended lock scenario shares (scenario 4 too): the tasks' loop
//! (`contend`) and the statistics of a round (`analyze`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::{add_command_metrics, ms, order, waits, Bench, Counters, Metrics, MAX_ITER};
use crate::java::{self, Java, JavaSpec};
use crate::libs::{Kind, Lib, ALL};
use crate::report::Record;
use crate::util::{instant_at, now_ns, quantile, sleep_until_ns};

/// One acquisition: (task, lock called at, lock returned at, unlock called
/// at, unlock returned at), `util::now_ns` ns. A wait abandoned at the
/// deadline is recorded with `u64::MAX` as its later times.
pub type Event = (u32, u64, u64, u64, u64);

/// Scenarios 3 and 3b: 8 tasks of this process on one name.
pub async fn run(b: &mut Bench<'_>, id: &str, think: Duration) -> Result<()> {
    let kinds = b.start_interleaved(&ALL).await?;
    let (url, admin, params, records, pooled) =
        (b.url, &mut b.admin, b.params, &mut b.records, &mut b.pooled);
    let mut subjects = Vec::new();
    for kind in kinds {
        subjects.push((
            kind,
            Contender::connect(kind, url, id, b.java.as_ref()).await?,
        ));
    }
    for r in 0..params.s3_rounds {
        for i in order(subjects.len(), r) {
            let (kind, subject) = &mut subjects[i];
            let name = format!("{id}:{}:{r}", kind.key());
            let counters = Counters::start_for(admin, subject.jvm()).await?;
            let begin = now_ns() + 5_000_000;
            let start = begin + ms(params.warm_ms).as_nanos() as u64;
            let deadline = start + ms(params.s3_round_ms).as_nanos() as u64;
            let events = match subject {
                Contender::Lib(lib) => {
                    contend(lib, &name, params.s3_tasks, 0, begin, deadline, think).await?
                }
                Contender::Java(java) => {
                    let tasks = params.s3_tasks;
                    let think_us = think.as_micros();
                    java.call(
                        &format!("contend {name} {tasks} 0 {begin} {deadline} {think_us}"),
                        Duration::from_nanos(deadline.saturating_sub(now_ns())) + java::ANSWER,
                    )
                    .await?
                }
            };
            let counted = counters.stop(admin, ms(30)).await?;
            let paused = pauses(&events, start, deadline);
            let c = analyze(events, params.s3_tasks, start, deadline);
            let mut m = c.metrics;
            if !think.is_zero() {
                m.insert("pause_p50_us".into(), quantile(&paused, 0.50));
                m.insert("pause_p90_us".into(), quantile(&paused, 0.90));
                m.insert("pause_max_us".into(), quantile(&paused, 1.0));
                m.insert("pauses".into(), paused.len() as f64);
            }
            counted.per_acquisition(&mut m);
            add_command_metrics(*kind, &mut m, &counted.commands);
            pooled.add(id, kind.key(), c.handover_us, &c.per_task);
            records.push(Record::new(id, kind.key(), r, m));
        }
    }
    Ok(())
}

/// A subject of scenarios 3 and 3b: a library of this process, or a JVM.
enum Contender {
    Lib(Lib),
    Java(Java),
}

impl Contender {
    /// Connect `kind` and warm it up (20 pairs; the JVM warms itself).
    async fn connect(kind: Kind, url: &str, id: &str, java: Option<&JavaSpec>) -> Result<Self> {
        if let (true, Some(java)) = (kind.is_java(), java) {
            let path = if id == "s3b" {
                java::Warm::Pause
            } else {
                java::Warm::Contend
            };
            return Ok(Contender::Java(java.start(kind, url, path).await?));
        }
        let lib = Lib::connect(kind, url).await?;
        let warm = format!("{id}:warm:{}", kind.key());
        for _ in 0..20 {
            lib.lock(&warm).await?.unlock().await?;
        }
        Ok(Contender::Lib(lib))
    }

    fn jvm(&self) -> Option<u32> {
        match self {
            Contender::Java(java) => Some(java.pid()),
            Contender::Lib(_) => None,
        }
    }
}

/// `tasks` tasks of this process contending for `name` from `start_ns` (the
/// beginning of the round's warm-up) to `deadline_ns`, each pausing `think`
/// outside the lock after every unlock (zero: re-lock at once); waits in
/// progress at the deadline are abandoned.
pub async fn contend(
    lib: &Lib,
    name: &str,
    tasks: u32,
    first_task: u32,
    start_ns: u64,
    deadline_ns: u64,
    think: Duration,
) -> Result<Vec<Event>> {
    let name: Arc<str> = Arc::from(name);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (lib, name) = (lib.clone(), name.clone());
        handles.push(tokio::spawn(async move {
            sleep_until_ns(start_ns).await;
            let deadline = instant_at(deadline_ns);
            let mut events = Vec::new();
            while now_ns() < deadline_ns && (events.len() as u64) < MAX_ITER {
                let asked = now_ns();
                let held = tokio::select! {
                    biased;
                    _ = tokio::time::sleep_until(deadline) => {
                        events.push((first_task + t, asked, u64::MAX, u64::MAX, u64::MAX));
                        break;
                    }
                    held = lib.lock(&name) => held?,
                };
                let acquired = now_ns();
                let releasing = now_ns();
                held.unlock().await?;
                events.push((first_task + t, asked, acquired, releasing, now_ns()));
                if !think.is_zero() {
                    crate::pause::pause(think).await;
                }
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

/// The pauses the tasks actually took outside the lock (scenario 3b), µs:
/// for each task, from one unlock's return to its next `lock` call, for the
/// pauses that end inside the window `[start_ns, deadline_ns]`. This spans
/// the pause itself and the loop's bookkeeping around it (a few
/// nanoseconds), for every subject alike.
pub fn pauses(events: &[Event], start_ns: u64, deadline_ns: u64) -> Vec<f64> {
    let mut by_task: Vec<&Event> = events.iter().collect();
    by_task.sort_by_key(|e| (e.0, e.1));
    by_task
        .windows(2)
        .filter(|p| p[0].0 == p[1].0 && p[0].4 != u64::MAX)
        .filter(|p| p[1].1 >= start_ns && p[1].1 <= deadline_ns)
        .map(|p| (p[1].1 as i64 - p[0].4 as i64) as f64 / 1e3)
        .collect()
}

/// Throughput, handover latency and fairness of one contended run.
pub struct Contention {
    pub metrics: Metrics,
    pub handover_us: Vec<f64>,
    /// Acquisitions per task inside the window.
    pub per_task: Vec<u64>,
}

/// The statistics of the measuring window `[start_ns, deadline_ns]`: holds
/// whose `lock` returned before `start_ns` belong to the round's warm-up
/// (the tasks start a little earlier, so the window sees waiters already
/// subscribed) and are only used as the predecessor of the first handover.
///
/// A *handover* is a hold by a different task that was already waiting when
/// the previous holder *called* unlock; its latency runs from that unlock
/// call to the next `lock` returning: the unlock request, the script, the
/// publish, the wake-up and the waiter's acquire round trip, all of it. It
/// is kept signed and never clamped (on one machine's shared clock it
/// cannot be negative; `handovers_negative` would show a clock problem).
/// Measuring from the unlock call rather than its return means a client
/// cannot shorten its handovers by returning from unlock late.
pub fn analyze(events: Vec<Event>, tasks: u32, start_ns: u64, deadline_ns: u64) -> Contention {
    let acquisitions_all = events.iter().filter(|e| e.2 != u64::MAX).count();
    let measured = |e: &Event| e.2 >= start_ns;
    // Waits: lock called -> lock returned.
    let (wait_us, abandoned) = waits(events.iter().map(|e| (e.1, e.2)), start_ns, deadline_ns);
    // Holds never overlap and each "lock returned" instant lies inside its
    // hold, so sorting by it gives the order in which the lock was held.
    let mut events: Vec<Event> = events.into_iter().filter(|e| e.2 != u64::MAX).collect();
    events.sort_by_key(|e| e.2);
    let window = (deadline_ns - start_ns) as f64 / 1e9;
    let in_window = events
        .iter()
        .filter(|e| measured(e) && e.2 <= deadline_ns)
        .count();
    let mut per_task = vec![0u64; tasks as usize];
    for e in events.iter().filter(|e| measured(e)) {
        if let Some(c) = per_task.get_mut(e.0 as usize) {
            *c += 1;
        }
    }
    let (mut handover_us, mut same, mut early, mut idle, mut negative) =
        (Vec::new(), 0u64, 0u64, 0u64, 0u64);
    for pair in events.windows(2).filter(|p| measured(&p[1])) {
        let (prev, next) = (pair[0], pair[1]);
        if prev.0 == next.0 {
            same += 1;
        } else if next.1 >= prev.3 {
            // The next holder asked only once the release had begun: it
            // was not waiting for this hold, nobody was handed anything.
            idle += 1;
        } else {
            if next.2 < prev.4 {
                early += 1; // lock returned before the releaser's unlock returned
            }
            let gap = next.2 as i64 - prev.3 as i64;
            if gap < 0 {
                negative += 1;
            }
            handover_us.push(gap as f64 / 1e3);
        }
    }
    let min = per_task.iter().copied().min().unwrap_or(0) as f64;
    let max = per_task.iter().copied().max().unwrap_or(0) as f64;
    let transitions = (same + idle + handover_us.len() as u64).max(1) as f64;
    let metrics = Metrics::from([
        ("acq_per_s".into(), in_window as f64 / window),
        ("acquisitions".into(), in_window as f64),
        ("acquisitions_all".into(), acquisitions_all as f64),
        ("handovers".into(), handover_us.len() as f64),
        ("handover_p50_us".into(), quantile(&handover_us, 0.50)),
        ("handover_p99_us".into(), quantile(&handover_us, 0.99)),
        ("handover_max_us".into(), quantile(&handover_us, 1.0)),
        ("handovers_negative".into(), negative as f64),
        ("handover_before_unlock_returned".into(), early as f64),
        ("acquired_after_release_began".into(), idle as f64),
        ("fair_min".into(), min),
        ("fair_max".into(), max),
        (
            "fairness_min_over_max".into(),
            if max > 0.0 { min / max } else { 0.0 },
        ),
        (
            "same_task_reacquire_share".into(),
            same as f64 / transitions,
        ),
        ("wait_p50_us".into(), quantile(&wait_us, 0.50)),
        ("wait_p99_us".into(), quantile(&wait_us, 0.99)),
        ("wait_max_us".into(), quantile(&wait_us, 1.0)),
        ("waits_abandoned_at_deadline".into(), abandoned as f64),
    ]);
    Contention {
        metrics,
        handover_us,
        per_task,
    }
}
