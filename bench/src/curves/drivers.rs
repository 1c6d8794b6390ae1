//! The five cost curves' drivers (issue 30 §4). Each measures every point
//! with ours and, where it can run, Java, alternating (ABBA) run by run.

use std::time::{Duration, Instant};

use anyhow::Result;
use futures::future::LocalBoxFuture;

use super::Curve;
use crate::java::{self, Warm};
use crate::libs::Kind;
use crate::scenario::scale_waiters::{self, JAVA_CHANNELS_PER_CONNECTION, JAVA_DEFAULT_POOL};
use crate::scenario::{cross_process, order, Bench, Metrics};
use crate::server;
use crate::util::quantile;
use crate::workers::{numbers, run_workers, Job};

const WAITERS: &[super::Metric] = &[
    ("heap_live_bytes_per_waiter", "heap B/waiter"),
    ("bytes_per_waiter", "RSS B/waiter"),
    ("all_waiting_after_s", "s until all wait"),
    ("drain_s", "s to drain"),
    ("subscribed_channels", "channels"),
    ("server_memory_bytes_per_waiter", "server B/waiter"),
    ("completed", "served"),
    ("errors", "errors"),
    ("failed", "failed (1 = yes)"),
];
const NAMES: &[super::Metric] = &[
    ("subscribed_channels", "channels"),
    ("server_memory_bytes_per_name", "server B/name"),
    ("wake_p50_us", "wake-up p50 µs"),
    ("wake_p99_us", "wake-up p99 µs"),
    ("heap_live_bytes_per_waiter", "heap B/waiter"),
    ("all_waiting_after_s", "s until all wait"),
    ("drain_s", "s to drain"),
    ("completed", "served"),
    ("errors", "errors"),
    ("failed", "failed (1 = yes)"),
];
const WATCHDOG: &[super::Metric] = &[
    ("renew_calls_per_interval_time", "renewal calls/interval"),
    ("client_cpu_ms_per_interval", "client CPU ms/interval"),
    ("server_cpu_ms_per_interval", "server CPU ms/interval"),
    ("keys_alive", "keys alive"),
    ("lost", "lost"),
    ("failed", "failed (1 = yes)"),
];
const PROCESSES: &[super::Metric] = &[
    ("acq_per_s", "acquisitions/s"),
    ("handover_p50_us", "handover p50 µs"),
    ("handover_p99_us", "handover p99 µs"),
    ("pooled_handover_p99_us", "handover p99 µs, rounds pooled"),
    ("fairness_min_over_max", "fairness min/max"),
    ("pooled_fairness", "fairness, rounds pooled"),
    ("failed", "failed (1 = yes)"),
];

/// Every curve `--only` asks for (ids `cw`, `cn`, `cr`, `cp`; the cluster
/// curve `cc` is scenario 7's, in `cluster.rs`).
pub async fn run(b: &mut Bench<'_>) -> Result<Vec<Curve>> {
    let mut curves = Vec::new();
    let smoke = b.params.smoke;
    let runs = if smoke { 1 } else { 2 };
    let kinds = b.kinds(&[Kind::Ours, Kind::Java]);
    if b.params.wants("cw") {
        let points: &[usize] = if smoke {
            &[300]
        } else {
            &[1_000, 10_000, 100_000]
        };
        let names = if smoke { 20 } else { 100 };
        let mut c = Curve::new(
            "cw",
            format!("waiters on {names} held names, 1 process"),
            "waiters",
            WAITERS,
            &[
                "heap_live_bytes_per_waiter",
                "bytes_per_waiter",
                "all_waiting_after_s",
                "drain_s",
            ],
            &[
                "heap_live_bytes_per_waiter",
                "bytes_per_waiter",
                "all_waiting_after_s",
                "drain_s",
            ],
        );
        c.note = format!(
            "As scenario 5a (a second client holds the names, the waiters then wait and are \
             released one name after the other); Java with Redisson's default subscription pool \
             ({JAVA_DEFAULT_POOL} × {JAVA_CHANNELS_PER_CONNECTION} channels, enough for {names} \
             names). {runs} run(s) per point, the subjects alternating (ABBA)."
        );
        sweep(b, &mut c, &kinds, points, runs, "waiters", |b, k, n| {
            Box::pin(waiters(b, k, n, names))
        })
        .await;
        curves.push(c);
    }
    if b.params.wants("cn") {
        let points: &[usize] = if smoke { &[30] } else { &[100, 1_000, 10_000] };
        let mut c = Curve::new(
            "cn",
            "names with one waiter each, 1 process".into(),
            "names",
            NAMES,
            &[
                "server_memory_bytes_per_name",
                "wake_p99_us",
                "subscribed_channels",
            ],
            &["server_memory_bytes_per_name", "wake_p50_us", "wake_p99_us"],
        );
        c.note = format!(
            "One waiter per held name; wake-up latency per name: its unlock called → its waiter's \
             lock returned (the holder unlocks the names one after the other). Java with a \
             subscription pool of names/{JAVA_CHANNELS_PER_CONNECTION} connections (at least \
             Redisson's default {JAVA_DEFAULT_POOL}), as a user must set it for that many names. \
             {runs} run(s) per point (ABBA)."
        );
        sweep(b, &mut c, &kinds, points, runs, "names", |b, k, n| {
            Box::pin(waiters(b, k, n, n))
        })
        .await;
        curves.push(c);
    }
    if b.params.wants("cr") {
        let points: &[usize] = if smoke {
            &[300]
        } else {
            &[1_000, 10_000, 100_000]
        };
        let mut c = Curve::new(
            "cr",
            "held watchdog locks, 1 process".into(),
            "locks",
            WATCHDOG,
            &[
                "renew_calls_per_interval_time",
                "client_cpu_ms_per_interval",
                "server_cpu_ms_per_interval",
            ],
            &[
                "renew_calls_per_interval_time",
                "client_cpu_ms_per_interval",
                "server_cpu_ms_per_interval",
            ],
        );
        let p = b.params;
        c.note = format!(
            "Locks taken without a lease (the watchdog renews them), watchdog timeout {} ms \
             (a renewal every {} ms), batch {} (ours: lock_watchdog_batch_size; Java: Redisson's \
             default lockWatchdogBatchSize); counted over {} intervals after 1.5 intervals. \
             {runs} run(s) per point (ABBA).",
            p.watchdog_ms,
            p.watchdog_ms / 3,
            p.watchdog_batch,
            p.watchdog_intervals
        );
        sweep(b, &mut c, &kinds, points, runs, "locks", |b, k, n| {
            Box::pin(watchdog(b, k, n))
        })
        .await;
        curves.push(c);
    }
    if b.params.wants("cp") {
        let points: &[u32] = if smoke { &[2] } else { &[1, 2, 4, 8, 16] };
        let rounds = if smoke { 1 } else { 6 };
        let mut c = Curve::new(
            "cp",
            "processes contending for one name, 1 task each".into(),
            "processes",
            PROCESSES,
            &["acq_per_s", "pooled_handover_p99_us", "pooled_fairness"],
            &["acq_per_s", "handover_p99_us"],
        );
        c.note = format!(
            "Scenario 4's schedule (every subject's slots interleaved, {} ms windows after a \
             {} ms warm-up, a fresh name per slot) with N processes of 1 task each (Java: N \
             JVMs); {rounds} round(s) per point, each a run in the table; the pooled columns \
             pool all rounds' handovers (the same value in every run). One process with one task \
             has nothing to hand over.",
            b.params.s4_round_ms, b.params.warm_ms
        );
        for &n in points {
            b.progress.show(&format!("curve cp: {n} processes"));
            let id = format!("cp{n}");
            if let Err(e) = cross_process::run_with(b, &id, &kinds, n, 1, rounds).await {
                eprintln!("curve cp: {n} processes failed: {e:#}");
                for kind in &kinds {
                    c.add(
                        f64::from(n),
                        kind.key(),
                        0,
                        Metrics::from([("failed".into(), 1.0)]),
                    );
                }
                continue;
            }
            for kind in &kinds {
                let key = (id.clone(), kind.key().to_string());
                let handovers = b.pooled.handover_us.get(&key).cloned().unwrap_or_default();
                let per_task = b.pooled.per_task.get(&key).cloned().unwrap_or_default();
                let (lo, hi) = (
                    per_task.iter().copied().min().unwrap_or(0) as f64,
                    per_task.iter().copied().max().unwrap_or(0) as f64,
                );
                for r in b
                    .records
                    .iter()
                    .filter(|r| r.scenario == id && r.subject == kind.key())
                {
                    let mut m = r.metrics.clone();
                    m.insert("pooled_handover_p99_us".into(), quantile(&handovers, 0.99));
                    m.insert(
                        "pooled_fairness".into(),
                        if hi > 0.0 { lo / hi } else { f64::NAN },
                    );
                    c.add(f64::from(n), kind.key(), r.round, m);
                }
            }
        }
        curves.push(c);
    }
    Ok(curves)
}

/// A point's measurement, or, if it failed, a sample that says so (the
/// curve goes on; the error is printed).
/// Measure every point of `c` in `runs` runs, the subjects `kinds` in a
/// rotating order within each run; a failed measurement is recorded as
/// `failed` and the sweep goes on. `unit` names a point in the progress line.
async fn sweep<'b, F>(
    b: &mut Bench<'b>,
    c: &mut Curve,
    kinds: &[Kind],
    points: &[usize],
    runs: usize,
    unit: &str,
    mut measure: F,
) where
    F: for<'x> FnMut(&'x mut Bench<'b>, Kind, usize) -> LocalBoxFuture<'x, Result<Metrics>>,
{
    for &n in points {
        for run in 0..runs {
            let line = format!("curve {}: {n} {unit}, run {}", c.id, run + 1);
            b.progress.show(&line);
            for i in order(kinds.len(), run) {
                let m = failed_as_metric(measure(b, kinds[i], n).await, c.id);
                c.add(n as f64, kinds[i].key(), run, m);
            }
        }
    }
}

fn failed_as_metric(r: Result<Metrics>, curve: &str) -> Metrics {
    r.unwrap_or_else(|e| {
        eprintln!("curve {curve}: a measurement failed: {e:#}");
        Metrics::from([("failed".into(), 1.0)])
    })
}

/// One waiters measurement (`scale_waiters::measure`), Java with a pool
/// that holds `names` channels.
async fn waiters(b: &mut Bench<'_>, kind: Kind, waiters: usize, names: usize) -> Result<Metrics> {
    let pool = names.div_ceil(JAVA_CHANNELS_PER_CONNECTION);
    let pool = (kind == Kind::Java && pool > JAVA_DEFAULT_POOL).then_some(u32::try_from(pool)?);
    let limit = Duration::from_secs(120);
    let java = b.java.as_ref();
    scale_waiters::measure(b.url, &mut b.admin, java, kind, pool, waiters, names, limit).await
}

/// One watchdog measurement: ours in a worker process (`Job::Watchdog`),
/// Java in a JVM (`watch`), counted from here the same way.
async fn watchdog(b: &mut Bench<'_>, kind: Kind, locks: usize) -> Result<Metrics> {
    let p = b.params;
    server::flushall(&mut b.admin).await?;
    server::settle_clients(&mut b.admin, Duration::from_secs(5)).await?;
    let (Kind::Java, Some(spec)) = (kind, b.java.as_ref()) else {
        let job = Job::Watchdog {
            url: b.url.to_owned(),
            locks,
            watchdog_ms: p.watchdog_ms,
            batch: p.watchdog_batch,
            intervals: p.watchdog_intervals,
        };
        let answer = run_workers(vec![job], Duration::from_secs(300)).await?;
        return Ok(numbers(&answer[0]));
    };
    let mut jvm = spec.start(Kind::Java, b.url, Warm::All).await?;
    // Only the watched locks' keys (the warm-up leaves its semaphore's).
    server::flushall(&mut b.admin).await?;
    let limit = Duration::from_secs(240);
    jvm.send(&format!("watch {locks} {}", p.watchdog_ms))
        .await?;
    jvm.recv(limit).await?;
    let interval = Duration::from_millis(p.watchdog_ms / 3);
    tokio::time::sleep(interval + interval / 2).await;
    let admin = &mut b.admin;
    let s0 = server::commandstats(admin).await?;
    let server0 = server::server_cpu_us(admin).await?;
    let cpu0 = java::cpu_us(jvm.pid());
    let t0 = Instant::now();
    tokio::time::sleep(interval * p.watchdog_intervals).await;
    let cpu = java::cpu_us(jvm.pid()) - cpu0;
    let d = server::diff(&s0, &server::commandstats(admin).await?);
    let server_cpu = server::server_cpu_us(admin).await? - server0;
    let intervals = t0.elapsed().as_secs_f64() / interval.as_secs_f64();
    let get = |k: &str| d.get(k).copied().unwrap_or(0) as f64;
    let dbsize: u64 = redis::cmd("DBSIZE").query_async(admin).await?;
    let done: serde_json::Value = jvm.call("unwatch", limit).await?;
    let mut m = numbers(&done);
    m.extend([
        ("locks".to_string(), locks as f64),
        (
            "renew_calls_per_interval_time".into(),
            (get("evalsha") + get("eval")) / intervals,
        ),
        ("client_cpu_ms_per_interval".into(), cpu / 1e3 / intervals),
        (
            "server_cpu_ms_per_interval".into(),
            server_cpu / 1e3 / intervals,
        ),
        ("keys_alive".into(), dbsize as f64),
        ("lost".into(), locks as f64 - dbsize as f64),
    ]);
    Ok(m)
}
