//! Scenario 5b: many held watchdog locks in one worker process, renewal
//! script calls per interval (the worker's side is `watchdog`, run as
//! `Job::Watchdog`).

use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;

use super::Bench;
use crate::report::Record;
use crate::server;
use crate::util::Usage;
use crate::workers::{numbers, run_workers, Job};

/// `runs` runs, each in a fresh worker process (ours only).
pub async fn run(b: &mut Bench<'_>, runs: usize) -> Result<()> {
    let (url, admin, params, records, progress) =
        (b.url, &mut b.admin, b.params, &mut b.records, &b.progress);
    for run in 0..runs {
        progress.show(&format!("scenario s5r, run {}/{runs}", run + 1));
        server::flushall(admin).await?;
        let job = Job::Watchdog {
            url: url.to_owned(),
            locks: params.watchdog_locks,
            watchdog_ms: params.watchdog_ms,
            batch: params.watchdog_batch,
            intervals: params.watchdog_intervals,
        };
        let answer = run_workers(vec![job], Duration::from_secs(120)).await?;
        records.push(Record::new("s5r", "ours", run, numbers(&answer[0])));
    }
    Ok(())
}

/// `locks` held watchdog locks: how many renewal script calls one renewal
/// interval costs.
pub async fn watchdog(
    url: &str,
    locks: usize,
    watchdog: Duration,
    batch: usize,
    intervals: u32,
) -> Result<serde_json::Value> {
    let mut admin = server::admin(url).await?;
    let config = redisson_lock::Config::from_url(url)?
        .lock_watchdog_timeout(watchdog)
        .lock_watchdog_batch_size(batch);
    let client = redisson_lock::Client::connect_with(config).await?;
    let guards: Vec<redisson_lock::LockGuard<redisson_lock::Reentrant>> =
        futures::stream::iter(0..locks)
            .map(|i| {
                let client = client.clone();
                async move { client.lock(&format!("held:{i}"))?.lock().await }
            })
            .buffer_unordered(256)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<redisson_lock::Result<_>>()?;
    let interval = watchdog / 3;
    // Let one renewal run pass first (it loads the script: NOSCRIPT + EVAL).
    tokio::time::sleep(interval + interval / 2).await;
    let s0 = server::commandstats(&mut admin).await?;
    let server_cpu0 = server::server_cpu_us(&mut admin).await?;
    let usage0 = Usage::now();
    let t0 = Instant::now();
    tokio::time::sleep(interval * intervals).await;
    let usage = Usage::now().since(usage0);
    let s1 = server::commandstats(&mut admin).await?;
    let server_cpu = server::server_cpu_us(&mut admin).await? - server_cpu0;
    let window = t0.elapsed();
    let elapsed_intervals = window.as_secs_f64() / interval.as_secs_f64();
    let d = server::diff(&s0, &s1);
    let get = |k: &str| d.get(k).copied().unwrap_or(0) as f64;
    // Each renewal run checks every held lock once with HEXISTS.
    let runs = get("hexists") / locks as f64;
    let calls = get("evalsha") + get("eval");
    let dbsize: u64 = redis::cmd("DBSIZE").query_async(&mut admin).await?;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let mut unlock_errors = 0u64;
    let mut pending =
        futures::stream::iter(guards.into_iter().map(|g| g.unlock())).buffer_unordered(256);
    while let Some(r) = pending.next().await {
        if r.is_err() {
            unlock_errors += 1;
        }
    }
    Ok(serde_json::json!({
        "locks": locks,
        "batch": batch,
        "interval_ms": interval.as_millis() as u64,
        "window_s": window.as_secs_f64(),
        "renewal_runs": runs,
        "renew_script_calls": calls,
        "renew_calls_per_interval": if runs > 0.0 { calls / runs } else { f64::NAN },
        "renew_calls_per_interval_time": calls / elapsed_intervals,
        "client_cpu_ms_per_interval": (usage.user_us + usage.sys_us) / 1e3 / elapsed_intervals,
        "server_cpu_ms_per_interval": server_cpu / 1e3 / elapsed_intervals,
        "expected_calls_per_interval": locks.div_ceil(batch),
        "runs_per_interval": runs / (window.as_secs_f64() / interval.as_secs_f64()),
        "keys_alive": dbsize,
        "lost": lost,
        "unlock_errors": unlock_errors,
    }))
}
