//! Scenario 5a: many waiters on held names in one worker process, memory
//! per waiter (the worker's side is `waiters`, run as `Job::Waiters`).

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};

use super::{order, Bench};
use crate::alloc;
use crate::libs::{Kind, Lib};
use crate::report::Record;
use crate::server;
use crate::util::vm_rss_kib;
use crate::workers::{numbers, run_workers, Job};

/// Every subject in a fresh worker process, run after run (order ABBA).
pub async fn run(b: &mut Bench<'_>) -> Result<()> {
    let (url, admin, params, records, progress) =
        (b.url, &mut b.admin, b.params, &mut b.records, &b.progress);
    let kinds = params.kinds(&[Kind::Ours, Kind::Ceiling]);
    let runs = params.runs;
    for run in 0..runs {
        progress.show(&format!("scenario s5w, run {}/{runs}", run + 1));
        for i in order(kinds.len(), run) {
            let kind = kinds[i];
            server::flushall(admin).await?;
            let job = Job::Waiters {
                kind,
                url: url.to_owned(),
                waiters: params.waiters,
                names: params.waiter_names,
                limit_s: 60,
            };
            let answer = run_workers(vec![job], Duration::from_secs(150)).await?;
            records.push(Record::new("s5w", kind.key(), run, numbers(&answer[0])));
        }
    }
    Ok(())
}

/// `waiters` tasks waiting on `names` held locks in this process: memory per
/// waiter while they all wait (heap counted by the bench's allocator, and
/// RSS), then release and check that every one gets its turn.
pub async fn waiters(
    kind: Kind,
    url: &str,
    waiters: usize,
    names: usize,
    limit: Duration,
) -> Result<serde_json::Value> {
    let mut admin = server::admin(url).await?;
    let holder = Lib::connect(kind, url).await?;
    let lib = Lib::connect(kind, url).await?;
    let name = |i: usize| format!("scale:{}:{}", kind.key(), i % names);
    let mut held = Vec::new();
    for i in 0..names {
        held.push(holder.lock(&name(i)).await?);
    }
    // Warm the waiters' client (and the allocator) a little before measuring.
    lib.lock("scale:warmup").await?.unlock().await?;
    let evalsha0 = server::commandstats(&mut admin)
        .await?
        .get("evalsha")
        .copied()
        .unwrap_or(0);
    // Everything the bench itself needs per waiter is allocated before the
    // baseline: the names (moved into the tasks) and the handles' vector.
    let mut waiter_names: Vec<String> = (0..waiters).map(name).collect();
    let mut handles = Vec::with_capacity(waiters);
    let rss0 = vm_rss_kib();
    alloc::start();
    for name in waiter_names.drain(..) {
        handles.push(lib.spawn_lock_unlock(name));
    }
    // Every waiter tries once, subscribes, tries again, then sleeps: wait
    // until the server has seen both tries of all of them.
    let started = Instant::now();
    loop {
        let evalsha = server::commandstats(&mut admin)
            .await?
            .get("evalsha")
            .copied()
            .unwrap_or(0);
        if evalsha - evalsha0 >= 2 * waiters as u64 {
            break;
        }
        ensure!(
            started.elapsed() < limit,
            "waiters still not all waiting after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting_after_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (live1, peak1) = (alloc::live(), alloc::peak());
    let rss1 = vm_rss_kib();
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson_lock__channel:*")
        .query_async(&mut admin)
        .await?;
    let released = Instant::now();
    for h in held {
        h.unlock().await?;
    }
    let all = futures::future::join_all(handles);
    let (finished, done, failed) = match tokio::time::timeout(limit, all).await {
        Ok(outcomes) => {
            let done = outcomes.iter().filter(|o| matches!(o, Ok(Ok(())))).count();
            (true, done, outcomes.len() - done)
        }
        Err(_) => (false, 0, 0),
    };
    let drain_s = released.elapsed().as_secs_f64();
    // Background work of the last wake-ups (latch DELs, unsubscribes).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (live2, peak2) = (alloc::live(), alloc::peak());
    let rss2 = vm_rss_kib();
    let per = |bytes: isize| bytes as f64 / waiters as f64;
    Ok(serde_json::json!({
        "waiters": waiters,
        "names": names,
        "rss_before_kib": rss0,
        "rss_waiting_kib": rss1,
        "bytes_per_waiter": (rss1 as f64 - rss0 as f64) * 1024.0 / waiters as f64,
        "rss_after_drain_bytes_per_waiter": (rss2 as f64 - rss0 as f64) * 1024.0 / waiters as f64,
        "heap_live_bytes_per_waiter": per(live1),
        "heap_peak_start_bytes_per_waiter": per(peak1),
        "heap_peak_bytes_per_waiter": per(peak2),
        "heap_after_drain_bytes_per_waiter": per(live2),
        "subscribed_channels": channels.len(),
        "lock_future_bytes": lib.lock_future_bytes(),
        "all_waiting_after_s": waiting_after_s,
        "drain_s": drain_s,
        "completed": done,
        "errors": failed,
        "hang": !finished,
    }))
}
