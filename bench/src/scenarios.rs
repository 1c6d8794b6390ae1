//! The scenarios of issue 4, in-process parts and worker-process jobs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use fred::interfaces::{HashesInterface, KeysInterface};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::libs::{Kind, Lib};
use crate::server;
use crate::util::{instant_at, now_ns, quantile, sleep_until_ns, vm_rss_kib};

pub type Metrics = BTreeMap<String, f64>;

/// One acquisition: (task, lock called at, lock returned at, unlock returned
/// at), `util::now_ns` ns. A wait abandoned at the deadline is recorded with
/// `u64::MAX` as its return times.
pub type Event = (u32, u64, u64, u64);

/// Upper bound on iterations of any measuring loop (they are also time-bounded).
const MAX_ITER: u64 = 50_000_000;

// ---------------------------------------------------------------- scenario 1

/// One task locking and unlocking one name.
pub async fn uncontended(
    kind: Kind,
    lib: &Lib,
    url: &str,
    name: &str,
    duration: Duration,
) -> Result<Metrics> {
    let mut admin = server::admin(url).await?;
    for _ in 0..100 {
        lib.lock(name).await?.unlock().await?;
    }
    let before = server::commandstats(&mut admin).await?;
    let mut lat_us = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration && (lat_us.len() as u64) < MAX_ITER {
        let t0 = Instant::now();
        lib.lock(name).await?.unlock().await?;
        lat_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let elapsed = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let diff = server::diff(&before, &server::commandstats(&mut admin).await?);
    let mut m = Metrics::from([
        ("pairs_per_s".into(), lat_us.len() as f64 / elapsed),
        ("pair_p50_us".into(), quantile(&lat_us, 0.50)),
        ("pair_p99_us".into(), quantile(&lat_us, 0.99)),
        ("pairs".into(), lat_us.len() as f64),
        ("acquisitions".into(), lat_us.len() as f64),
    ]);
    add_command_metrics(kind, &mut m, &diff);
    Ok(m)
}

// ---------------------------------------------------------------- scenario 2

/// `tasks` tasks, each on its own name; redis-server CPU per pair.
pub async fn parallel(
    kind: Kind,
    lib: &Lib,
    url: &str,
    prefix: &str,
    tasks: usize,
    duration: Duration,
) -> Result<Metrics> {
    let mut admin = server::admin(url).await?;
    for t in 0..tasks {
        for _ in 0..20 {
            lib.lock(&format!("{prefix}:{t}")).await?.unlock().await?;
        }
    }
    let before = server::commandstats(&mut admin).await?;
    let cpu0 = server::server_cpu_us(&mut admin).await?;
    let start = now_ns() + 20_000_000;
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
    let cpu1 = server::server_cpu_us(&mut admin).await?;
    let elapsed = (end - start) as f64 / 1e9;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let diff = server::diff(&before, &server::commandstats(&mut admin).await?);
    let mut m = Metrics::from([
        ("pairs_per_s".into(), pairs as f64 / elapsed),
        (
            "server_cpu_us_per_pair".into(),
            (cpu1 - cpu0) / pairs.max(1) as f64,
        ),
        ("pairs".into(), pairs as f64),
        ("acquisitions".into(), pairs as f64),
    ]);
    add_command_metrics(kind, &mut m, &diff);
    Ok(m)
}

// ------------------------------------------------------------ scenarios 3, 4

/// `tasks` tasks of this process contending for `name` from `start_ns` to
/// `deadline_ns`, each pausing `think` outside the lock after every unlock
/// (zero: re-lock at once); waits in progress at the deadline are abandoned.
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
                        events.push((first_task + t, asked, u64::MAX, u64::MAX));
                        break;
                    }
                    held = lib.lock(&name) => held?,
                };
                let acquired = now_ns();
                held.unlock().await?;
                events.push((first_task + t, asked, acquired, now_ns()));
                if !think.is_zero() {
                    tokio::time::sleep(think).await;
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

/// Throughput, handover latency and fairness of one contended run.
pub struct Contention {
    pub metrics: Metrics,
    pub handover_us: Vec<f64>,
}

pub fn analyze(events: Vec<Event>, tasks: u32, start_ns: u64, deadline_ns: u64) -> Contention {
    // Waits: lock called -> lock returned; a wait still pending at the
    // deadline counts with the time it had waited by then (censored).
    let wait_us: Vec<f64> = events
        .iter()
        .map(|e| (e.2.min(deadline_ns).max(e.1) - e.1) as f64 / 1e3)
        .collect();
    let abandoned = events.iter().filter(|e| e.2 == u64::MAX).count();
    // Holds never overlap and each "lock returned" instant lies inside its
    // hold, so sorting by it gives the order in which the lock was held.
    // Tuples become (task, acquired, unlocked, asked).
    let mut events: Vec<(u32, u64, u64, u64)> = events
        .into_iter()
        .filter(|e| e.2 != u64::MAX)
        .map(|e| (e.0, e.2, e.3, e.1))
        .collect();
    events.sort_by_key(|e| e.1);
    let window = (deadline_ns - start_ns) as f64 / 1e9;
    let in_window = events.iter().filter(|e| e.1 <= deadline_ns).count();
    let mut per_task = vec![0u64; tasks as usize];
    for e in &events {
        if let Some(c) = per_task.get_mut(e.0 as usize) {
            *c += 1;
        }
    }
    let (mut handover_us, mut same, mut early, mut idle) = (Vec::new(), 0u64, 0u64, 0u64);
    for pair in events.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if prev.0 == next.0 {
            same += 1;
        } else if next.3 > prev.2 {
            // The next holder only asked after the unlock returned: the lock
            // sat free, nobody was handed anything.
            idle += 1;
        } else {
            if next.1 < prev.2 {
                early += 1; // woken before the releaser's unlock call returned
            }
            handover_us.push(next.1.saturating_sub(prev.2) as f64 / 1e3);
        }
    }
    let min = per_task.iter().copied().min().unwrap_or(0) as f64;
    let max = per_task.iter().copied().max().unwrap_or(0) as f64;
    let transitions = events.len().saturating_sub(1).max(1) as f64;
    let metrics = Metrics::from([
        ("acq_per_s".into(), in_window as f64 / window),
        ("acquisitions".into(), events.len() as f64),
        ("handovers".into(), handover_us.len() as f64),
        ("handover_p50_us".into(), quantile(&handover_us, 0.50)),
        ("handover_p99_us".into(), quantile(&handover_us, 0.99)),
        ("handover_max_us".into(), quantile(&handover_us, 1.0)),
        ("handover_before_unlock_returned".into(), early as f64),
        ("acquired_while_idle".into(), idle as f64),
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
    }
}

/// Add commands-per-acquisition figures from a commandstats diff.
pub fn add_command_metrics(
    kind: Kind,
    metrics: &mut Metrics,
    diff: &std::collections::HashMap<String, u64>,
) {
    let acquisitions = metrics.get("acquisitions").copied().unwrap_or(0.0).max(1.0);
    let (client, script) = kind.split_commands(diff);
    metrics.insert("round_trips_per_acq".into(), client as f64 / acquisitions);
    metrics.insert("script_cmds_per_acq".into(), script as f64 / acquisitions);
    metrics.insert(
        "server_cmds_per_acq".into(),
        (client + script) as f64 / acquisitions,
    );
}

// -------------------------------------------------------------- worker jobs

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Method {
    /// A `redisson_lock` lock around read-modify-write.
    Lock,
    /// WATCH / read / MULTI-write-EXEC, abandoned on conflict.
    Watch,
}

/// What a worker process does (sent as JSON on its command line).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "job")]
pub enum Job {
    Contended {
        kind: Kind,
        url: String,
        name: String,
        tasks: u32,
        first_task: u32,
        start_ns: u64,
        deadline_ns: u64,
    },
    Waiters {
        kind: Kind,
        url: String,
        waiters: usize,
        names: usize,
        limit_s: u64,
    },
    Watchdog {
        url: String,
        locks: usize,
        watchdog_ms: u64,
        batch: usize,
        intervals: u32,
    },
    Stock {
        method: Method,
        url: String,
        start_ns: u64,
        limit_s: u64,
    },
    Market {
        method: Method,
        url: String,
        start_ns: u64,
        items: usize,
        target: u64,
        limit_s: u64,
    },
}

pub async fn run_job(job: Job) -> Result<serde_json::Value> {
    match job {
        Job::Contended {
            kind,
            url,
            name,
            tasks,
            first_task,
            start_ns,
            deadline_ns,
        } => {
            let lib = Lib::connect(kind, &url).await?;
            let events = contend(
                &lib,
                &name,
                tasks,
                first_task,
                start_ns,
                deadline_ns,
                Duration::ZERO,
            )
            .await?;
            Ok(serde_json::to_value(events)?)
        }
        Job::Waiters {
            kind,
            url,
            waiters,
            names,
            limit_s,
        } => scale_waiters(kind, &url, waiters, names, Duration::from_secs(limit_s)).await,
        Job::Watchdog {
            url,
            locks,
            watchdog_ms,
            batch,
            intervals,
        } => {
            scale_watchdog(
                &url,
                locks,
                Duration::from_millis(watchdog_ms),
                batch,
                intervals,
            )
            .await
        }
        Job::Stock {
            method,
            url,
            start_ns,
            limit_s,
        } => stock(method, &url, start_ns, Duration::from_secs(limit_s)).await,
        Job::Market {
            method,
            url,
            start_ns,
            items,
            target,
            limit_s,
        } => {
            market(
                method,
                &url,
                start_ns,
                items,
                target,
                Duration::from_secs(limit_s),
            )
            .await
        }
    }
}

/// Run jobs in worker processes (this binary, `worker <json>`), collecting
/// each one's JSON answer. Children are killed if this future is dropped.
pub async fn run_workers(jobs: Vec<Job>, limit: Duration) -> Result<Vec<serde_json::Value>> {
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for job in &jobs {
        let child = tokio::process::Command::new(&exe)
            .arg("worker")
            .arg(serde_json::to_string(job)?)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("spawning a worker process")?;
        children.push(child);
    }
    let outputs = tokio::time::timeout(
        limit,
        futures::future::join_all(children.into_iter().map(|c| c.wait_with_output())),
    )
    .await
    .with_context(|| format!("worker processes did not finish within {limit:?}"))?;
    let mut answers = Vec::new();
    for output in outputs {
        let output = output?;
        ensure!(
            output.status.success(),
            "a worker process failed: {}",
            output.status
        );
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().last().context("a worker printed nothing")?;
        answers.push(serde_json::from_str(line)?);
    }
    Ok(answers)
}

// ------------------------------------------------------------ scenario 5

/// `waiters` tasks waiting on `names` held locks in this process: memory per
/// waiter while they all wait, then release and check that every one gets
/// its turn.
async fn scale_waiters(
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
    let rss0 = vm_rss_kib();
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(waiters);
    for i in 0..waiters {
        let (lib, name, done, failed) = (lib.clone(), name(i), done.clone(), failed.clone());
        handles.push(tokio::spawn(async move {
            let outcome = async { lib.lock(&name).await?.unlock().await }.await;
            match outcome {
                Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                Err(_) => failed.fetch_add(1, Ordering::Relaxed),
            };
        }));
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
    let finished = tokio::time::timeout(limit, all).await.is_ok();
    let drain_s = released.elapsed().as_secs_f64();
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    Ok(serde_json::json!({
        "waiters": waiters,
        "names": names,
        "rss_before_kib": rss0,
        "rss_waiting_kib": rss1,
        "bytes_per_waiter": (rss1.saturating_sub(rss0) * 1024) as f64 / waiters as f64,
        "subscribed_channels": channels.len(),
        "lock_future_bytes": lib.lock_future_bytes(),
        "all_waiting_after_s": waiting_after_s,
        "drain_s": drain_s,
        "completed": done,
        "errors": failed,
        "hang": !finished,
    }))
}

/// `locks` held watchdog locks: how many renewal script calls one renewal
/// interval costs.
async fn scale_watchdog(
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
    let client = redisson_lock::Client::connect(config).await?;
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
    let t0 = Instant::now();
    tokio::time::sleep(interval * intervals).await;
    let s1 = server::commandstats(&mut admin).await?;
    let window = t0.elapsed();
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
        "expected_calls_per_interval": locks.div_ceil(batch),
        "runs_per_interval": runs / (window.as_secs_f64() / interval.as_secs_f64()),
        "keys_alive": dbsize,
        "lost": lost,
        "unlock_errors": unlock_errors,
    }))
}

// ------------------------------------------------------------ scenario 6

/// Take 2 units of "stock" at a time until it is 0.
async fn stock(
    method: Method,
    url: &str,
    start_ns: u64,
    limit: Duration,
) -> Result<serde_json::Value> {
    let (mut bought, mut aborted, mut iterations) = (0u64, 0u64, 0u64);
    match method {
        Method::Lock => {
            let client = redisson_lock::Client::from_url(url).await?;
            let redis = client.redis().clone();
            let lock = client.lock("stock-lock")?;
            sleep_until_ns(start_ns).await;
            let started = Instant::now();
            loop {
                iterations += 1;
                ensure!(
                    started.elapsed() < limit && iterations < MAX_ITER,
                    "stock (lock) did not finish"
                );
                let guard = lock.lock().await?;
                let n: i64 = redis.get::<Option<i64>, _>("stock").await?.unwrap_or(0);
                if n <= 0 {
                    guard.unlock().await?;
                    break;
                }
                let _: () = redis.set("stock", n - 2, None, None, false).await?;
                guard.unlock().await?;
                bought += 2;
            }
        }
        Method::Watch => {
            let mut con = server::admin(url).await?;
            sleep_until_ns(start_ns).await;
            let started = Instant::now();
            loop {
                iterations += 1;
                ensure!(
                    started.elapsed() < limit && iterations < MAX_ITER,
                    "stock (watch) did not finish"
                );
                let _: () = redis::cmd("WATCH")
                    .arg("stock")
                    .query_async(&mut con)
                    .await?;
                let n: i64 = redis::cmd("GET")
                    .arg("stock")
                    .query_async::<Option<i64>>(&mut con)
                    .await?
                    .unwrap_or(0);
                if n <= 0 {
                    let _: () = redis::cmd("UNWATCH").query_async(&mut con).await?;
                    break;
                }
                let reply: redis::Value = redis::pipe()
                    .atomic()
                    .set("stock", n - 2)
                    .query_async(&mut con)
                    .await?;
                if matches!(reply, redis::Value::Nil) {
                    aborted += 1;
                } else {
                    bought += 2;
                }
            }
        }
    }
    Ok(serde_json::json!({ "bought": bought, "aborted": aborted, "finish_ns": now_ns() }))
}

pub fn market_field(i: usize) -> String {
    format!("item-{i}")
}

/// Buy 2 units of item i, i+1, … round-robin until `target` units are bought.
async fn market(
    method: Method,
    url: &str,
    start_ns: u64,
    items: usize,
    target: u64,
    limit: Duration,
) -> Result<serde_json::Value> {
    let (mut bought, mut aborted, mut iterations) = (0u64, 0u64, 0u64);
    let mut per_item = vec![0u64; items];
    let mut i = 0usize;
    // Lock waits of a second or more (a lost wake-up falls back to the TTL).
    let (mut long_waits, mut max_wait) = (0u64, Duration::ZERO);
    match method {
        Method::Lock => {
            let client = redisson_lock::Client::from_url(url).await?;
            let redis = client.redis().clone();
            let locks = (0..items)
                .map(|i| client.lock(&format!("market-lock:{i}")))
                .collect::<redisson_lock::Result<Vec<_>>>()?;
            sleep_until_ns(start_ns).await;
            let started = Instant::now();
            while bought < target {
                iterations += 1;
                ensure!(
                    started.elapsed() < limit && iterations < MAX_ITER,
                    "market (lock) did not finish"
                );
                let asked = Instant::now();
                let guard = locks[i].lock().await?;
                let waited = asked.elapsed();
                max_wait = max_wait.max(waited);
                if waited >= Duration::from_secs(1) {
                    long_waits += 1;
                }
                let n: i64 = redis
                    .hget::<Option<i64>, _, _>("market", market_field(i))
                    .await?
                    .unwrap_or(0);
                if n >= 2 {
                    let _: i64 = redis.hset("market", (market_field(i), n - 2)).await?;
                    bought += 2;
                    per_item[i] += 1;
                }
                guard.unlock().await?;
                i = (i + 1) % items;
            }
        }
        Method::Watch => {
            let mut con = server::admin(url).await?;
            sleep_until_ns(start_ns).await;
            let started = Instant::now();
            while bought < target {
                iterations += 1;
                ensure!(
                    started.elapsed() < limit && iterations < MAX_ITER,
                    "market (watch) did not finish"
                );
                let _: () = redis::cmd("WATCH")
                    .arg("market")
                    .query_async(&mut con)
                    .await?;
                let n: i64 = redis::cmd("HGET")
                    .arg("market")
                    .arg(market_field(i))
                    .query_async::<Option<i64>>(&mut con)
                    .await?
                    .unwrap_or(0);
                if n >= 2 {
                    let reply: redis::Value = redis::pipe()
                        .atomic()
                        .hset("market", market_field(i), n - 2)
                        .query_async(&mut con)
                        .await?;
                    if matches!(reply, redis::Value::Nil) {
                        aborted += 1;
                    } else {
                        bought += 2;
                        per_item[i] += 1;
                    }
                } else {
                    let _: () = redis::cmd("UNWATCH").query_async(&mut con).await?;
                }
                i = (i + 1) % items;
            }
        }
    }
    if bought > target {
        bail!("bought {bought} > target {target}");
    }
    Ok(serde_json::json!({
        "bought": bought,
        "aborted": aborted,
        "per_item": per_item,
        "finish_ns": now_ns(),
        "long_waits": long_waits,
        "max_wait_ms": max_wait.as_secs_f64() * 1e3,
    }))
}
