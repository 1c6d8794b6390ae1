//! Scenario 2: 16 tasks of one process, each on its own free name.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use super::subject::{Runner, Subject};
use super::{add_command_metrics, ms, order, Admin, Bench, Counters, Metrics, MAX_ITER};
use crate::java;
use crate::libs::{Kind, WITH_FLOORS};
use crate::report::Record;
use crate::util::{now_ns, sleep_until_ns};

/// Scenario 2: 16 tasks on their own names.
pub async fn run(b: &mut Bench<'_>) -> Result<()> {
    let kinds = b.start_interleaved(&WITH_FLOORS).await?;
    let (url, admin, params, records) = (b.url, &mut b.admin, b.params, &mut b.records);
    let mut subjects = Vec::new();
    for kind in kinds {
        subjects.push(Subject::connect(kind, url, params.s2_tasks, b.java.as_ref()).await?);
    }
    let length = ms(params.s2_round_ms);
    for s in &mut subjects {
        let prefix = format!("s2:{}", s.kind.key());
        round(s, admin, &prefix, params.s2_tasks, length * 2).await?;
    }
    for r in 0..params.s2_rounds {
        for i in order(subjects.len(), r) {
            let s = &mut subjects[i];
            let prefix = format!("s2:{}", s.kind.key());
            let m = round(s, admin, &prefix, params.s2_tasks, length).await?;
            records.push(Record::new("s2", s.kind.key(), r, m));
        }
    }
    Ok(())
}

/// One round of scenario 2: `tasks` tasks (the floor: threads), each on its
/// own name `<prefix>:<i>`, from a common start for `duration`.
async fn round(
    subject: &mut Subject,
    admin: &mut Admin,
    prefix: &str,
    tasks: usize,
    duration: Duration,
) -> Result<Metrics> {
    let counters = Counters::start_for(admin, subject.jvm()).await?;
    let (pairs, elapsed_s) = match &mut subject.runner {
        Runner::Java(java) => {
            let start = now_ns() + 5_000_000;
            let run: java::Parallel = java
                .call(
                    &format!("parallel {prefix} {tasks} {start} {}", duration.as_millis()),
                    duration + java::ANSWER,
                )
                .await?;
            (run.pairs, run.elapsed_s)
        }
        Runner::Lib(lib) => {
            let start = now_ns() + 5_000_000;
            let deadline = start + duration.as_nanos() as u64;
            let mut handles = Vec::new();
            for t in 0..tasks {
                let (lib, name) = (lib.clone(), format!("{prefix}:{t}"));
                handles.push(tokio::spawn(async move {
                    sleep_until_ns(start).await;
                    let mut n = 0u64;
                    while now_ns() < deadline && n < MAX_ITER {
                        lib.lock(&name).await?.unlock().await?;
                        n += 1;
                    }
                    anyhow::Ok((n, now_ns()))
                }));
            }
            let (mut pairs, mut end) = (0u64, start);
            for h in handles {
                let (n, finished) = h.await??;
                pairs += n;
                end = end.max(finished);
            }
            (pairs, (end - start) as f64 / 1e9)
        }
        Runner::Floor(conns) if subject.kind == Kind::FloorP => {
            let mut floor = conns.pop().context("no floor connection")?;
            let names: Vec<String> = (0..tasks).map(|t| format!("{prefix}:{t}")).collect();
            let (outcome, floor) = tokio::task::spawn_blocking(move || {
                let outcome = (|| {
                    let mut owners = Vec::with_capacity(names.len());
                    let start = Instant::now();
                    let mut pairs = 0u64;
                    while start.elapsed() < duration && pairs < MAX_ITER {
                        floor.step(&names, &mut owners)?;
                        pairs += names.len() as u64;
                    }
                    let elapsed = start.elapsed().as_secs_f64();
                    floor.finish()?;
                    anyhow::Ok((pairs, elapsed))
                })();
                (outcome, floor)
            })
            .await?;
            conns.push(floor);
            outcome?
        }
        Runner::Floor(conns) => {
            ensure!(conns.len() >= tasks, "the floor needs {tasks} connections");
            let mut owned = std::mem::take(conns);
            let prefix = prefix.to_owned();
            let (outcome, owned) = tokio::task::spawn_blocking(move || {
                let start = Instant::now() + Duration::from_millis(5);
                let deadline = start + duration;
                let outcome = std::thread::scope(|scope| {
                    let threads: Vec<_> = owned
                        .iter_mut()
                        .take(tasks)
                        .enumerate()
                        .map(|(t, floor)| {
                            let name = format!("{prefix}:{t}");
                            scope.spawn(move || -> Result<(u64, Instant)> {
                                std::thread::sleep(start.saturating_duration_since(Instant::now()));
                                let mut n = 0u64;
                                while Instant::now() < deadline && n < MAX_ITER {
                                    let owner = floor.lock(&name)?;
                                    floor.unlock(&name, owner)?;
                                    n += 1;
                                }
                                let end = Instant::now();
                                floor.finish()?;
                                Ok((n, end))
                            })
                        })
                        .collect();
                    let (mut pairs, mut end) = (0u64, start);
                    for t in threads {
                        let (n, finished) = t
                            .join()
                            .map_err(|_| anyhow::anyhow!("a floor thread panicked"))??;
                        pairs += n;
                        end = end.max(finished);
                    }
                    anyhow::Ok((pairs, end.duration_since(start).as_secs_f64()))
                });
                (outcome, owned)
            })
            .await?;
            *conns = owned;
            outcome?
        }
    };
    let counted = counters.stop(admin, Duration::from_millis(5)).await?;
    let mut m = Metrics::from([
        ("pairs_per_s".into(), pairs as f64 / elapsed_s),
        (
            "server_cpu_us_per_pair".into(),
            counted.server_cpu_us / pairs.max(1) as f64,
        ),
        ("pairs".into(), pairs as f64),
        ("acquisitions".into(), pairs as f64),
    ]);
    counted.usage.per(pairs as f64, "pair", &mut m);
    add_command_metrics(subject.kind, &mut m, &counted.commands);
    Ok(m)
}
