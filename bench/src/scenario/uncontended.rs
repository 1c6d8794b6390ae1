//! Scenarios 1, 1p and 1m: one task, one free name, lock+unlock pairs.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::subject::{Runner, Subject};
use super::{add_command_metrics, ms, order, Admin, Bench, Counters, Metrics, MAX_ITER};
use crate::floor::Floor;
use crate::java::{self, Java};
use crate::libs::{Lib, WITH_FLOOR};
use crate::report::Record;
use crate::util::{quantile, Usage};

/// Scenario `id` (1, 1p or 1m): every subject in turn, round by round.
pub async fn run(b: &mut Bench<'_>, id: &str, placement: Placement) -> Result<()> {
    let mut kinds = b.start_interleaved(&WITH_FLOOR).await?;
    if id != "s1" {
        // 1p pins this process and the server, 1m places our loop: Java
        // runs in scenario 1 only.
        kinds.retain(|k| !k.is_java());
    }
    let (url, admin, params, records) = (b.url, &mut b.admin, b.params, &mut b.records);
    let mut subjects = Vec::new();
    for kind in kinds {
        subjects.push(Subject::connect(kind, url, 1, b.java.as_ref()).await?);
    }
    let length = ms(params.s1_round_ms);
    // Warm-up, not recorded: connections, scripts, allocator, caches.
    for s in &mut subjects {
        let name = format!("{id}:{}", s.kind.key());
        round(s, admin, &name, length * 2, placement).await?;
    }
    let rounds = match (id, placement) {
        ("s1p", _) => params.s1p_rounds,
        (_, Placement::Worker) => params.s1_rounds,
        (_, Placement::BlockOn) => params.s1m_rounds,
    };
    for r in 0..rounds {
        for i in order(subjects.len(), r) {
            let s = &mut subjects[i];
            let name = format!("{id}:{}", s.kind.key());
            let m = round(s, admin, &name, length, placement).await?;
            records.push(Record::new(id, s.kind.key(), r, m));
        }
    }
    Ok(())
}

/// Where scenario 1 runs its loop (the floor always runs on its own thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A spawned task, on a runtime worker thread, as application code runs.
    Worker,
    /// The `block_on` thread itself: every reply needs a cross-thread wake-up.
    BlockOn,
}

/// The timed part of one scenario-1 round.
struct PairRun {
    lat_us: Vec<f64>,
    elapsed_s: f64,
    usage: Usage,
    /// (write, read) socket calls, floor only.
    syscalls: Option<(u64, u64)>,
}

async fn lib_pairs(lib: &Lib, name: &str, duration: Duration) -> Result<PairRun> {
    let mut lat_us = Vec::with_capacity(1 << 16);
    let u0 = Usage::now();
    let start = Instant::now();
    while start.elapsed() < duration && (lat_us.len() as u64) < MAX_ITER {
        let t0 = Instant::now();
        lib.lock(name).await?.unlock().await?;
        lat_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    Ok(PairRun {
        lat_us,
        elapsed_s,
        usage: Usage::now().since(u0),
        syscalls: None,
    })
}

async fn java_pairs(java: &mut Java, name: &str, duration: Duration) -> Result<PairRun> {
    let cpu0 = java::cpu_us(java.pid());
    let run: java::Pairs = java
        .call(
            &format!("pairs {name} {}", duration.as_millis()),
            duration + java::ANSWER,
        )
        .await?;
    Ok(PairRun {
        lat_us: run.lat_us,
        elapsed_s: run.elapsed_s,
        usage: Usage::total(java::cpu_us(java.pid()) - cpu0),
        syscalls: None,
    })
}

fn floor_pairs(floor: &mut Floor, name: &str, duration: Duration) -> Result<PairRun> {
    let mut lat_us = Vec::with_capacity(1 << 16);
    let s0 = floor.syscalls();
    let u0 = Usage::now();
    let start = Instant::now();
    while start.elapsed() < duration && (lat_us.len() as u64) < MAX_ITER {
        let t0 = Instant::now();
        let owner = floor.lock(name)?;
        floor.unlock(name, owner)?;
        lat_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let usage = Usage::now().since(u0);
    floor.finish()?;
    let s1 = floor.syscalls();
    Ok(PairRun {
        lat_us,
        elapsed_s,
        usage,
        syscalls: Some((s1.0 - s0.0, s1.1 - s0.1)),
    })
}

/// One round of scenario 1: one task locking and unlocking one free name
/// for `duration`. Client CPU is this process's, over the timed loop (the
/// other subjects are idle meanwhile); server CPU and commands are read
/// before and after the round.
async fn round(
    subject: &mut Subject,
    admin: &mut Admin,
    name: &str,
    duration: Duration,
    placement: Placement,
) -> Result<Metrics> {
    let counters = Counters::start(admin).await?;
    let run = match &mut subject.runner {
        Runner::Lib(lib) => {
            let (lib, name) = (lib.clone(), name.to_owned());
            let pairs = async move { lib_pairs(&lib, &name, duration).await };
            match placement {
                Placement::Worker => tokio::spawn(pairs).await??,
                Placement::BlockOn => pairs.await?,
            }
        }
        Runner::Java(java) => java_pairs(java, name, duration).await?,
        Runner::Floor(conns) => {
            let mut conn = conns.pop().context("no floor connection")?;
            let name = name.to_owned();
            let (run, conn) = tokio::task::spawn_blocking(move || {
                let run = floor_pairs(&mut conn, &name, duration);
                (run, conn)
            })
            .await?;
            conns.push(conn);
            run?
        }
    };
    // Let fire-and-forget latch DELs land before counting commands. The
    // client's CPU is the timed loop's (`run.usage`).
    let counted = counters.stop(admin, Duration::from_millis(5)).await?;
    let pairs = run.lat_us.len() as f64;
    let mut m = Metrics::from([
        ("pairs_per_s".into(), pairs / run.elapsed_s),
        ("pair_mean_us".into(), run.elapsed_s * 1e6 / pairs.max(1.0)),
        ("pair_p50_us".into(), quantile(&run.lat_us, 0.50)),
        ("pair_p99_us".into(), quantile(&run.lat_us, 0.99)),
        ("pairs".into(), pairs),
        ("acquisitions".into(), pairs),
        (
            "server_cpu_us_per_pair".into(),
            counted.server_cpu_us / pairs.max(1.0),
        ),
    ]);
    run.usage.per(pairs, "pair", &mut m);
    if let Some((writes, reads)) = run.syscalls {
        m.insert(
            "socket_calls_per_pair".into(),
            (writes + reads) as f64 / pairs.max(1.0),
        );
    }
    add_command_metrics(subject.kind, &mut m, &counted.commands);
    Ok(m)
}
