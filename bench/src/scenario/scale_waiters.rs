//! Scenario 5a: many waiters on held names in one worker process, memory
//! per waiter (the worker's side is `waiters`, run as `Job::Waiters`).

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};

use super::{order, Admin, Bench, Metrics};
use crate::alloc;
use crate::java::{self, Drained, Java, JavaSpec, Memory};
use crate::libs::{Kind, Lib, WAITERS};
use crate::report::Record;
use crate::server;
use crate::util::{now_ns, quantile, vm_rss_kib};
use crate::workers::{numbers, run_workers, Job};

/// Every subject in a fresh worker process (Java: a fresh JVM), run after
/// run (order ABBA).
pub async fn run(b: &mut Bench<'_>) -> Result<()> {
    let kinds = b.kinds(&WAITERS);
    let (url, admin, params, records, progress) =
        (b.url, &mut b.admin, b.params, &mut b.records, &b.progress);
    // Java with Redisson's defaults, and, when its names need more channels
    // than the default subscription pool holds, with a pool that holds them.
    let pool = params.waiter_names.div_ceil(JAVA_CHANNELS_PER_CONNECTION);
    let mut subjects: Vec<(Kind, Option<u32>)> = kinds.iter().map(|k| (*k, None)).collect();
    if kinds.contains(&Kind::Java) && pool > JAVA_DEFAULT_POOL {
        subjects.push((Kind::Java, Some(u32::try_from(pool)?)));
    }
    let runs = params.runs;
    for run in 0..runs {
        progress.show(&format!("scenario s5w, run {}/{runs}", run + 1));
        for i in order(subjects.len(), run) {
            let (kind, pool) = subjects[i];
            let limit = Duration::from_secs(60);
            let (waiters, names) = (params.waiters, params.waiter_names);
            let m = measure(
                url,
                admin,
                b.java.as_ref(),
                kind,
                pool,
                waiters,
                names,
                limit,
            )
            .await?;
            let key = match (kind, pool) {
                (Kind::Java, Some(_)) => "javapool",
                _ => kind.key(),
            };
            records.push(Record::new("s5w", key, run, m));
        }
    }
    Ok(())
}

/// One measurement on a flushed server: `waiters` waiters on `names` held
/// names, `kind` in a fresh worker process (Java: a fresh JVM with the
/// subscription pool `pool`, or Redisson's default).
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    url: &str,
    admin: &mut Admin,
    java: Option<&JavaSpec>,
    kind: Kind,
    pool: Option<u32>,
    waiters: usize,
    names: usize,
    limit: Duration,
) -> Result<Metrics> {
    server::flushall(admin).await?;
    server::settle_clients(admin, Duration::from_secs(5)).await?;
    if let (Kind::Java, Some(java)) = (kind, java) {
        return java_waiters(java, url, admin, waiters, names, pool, limit).await;
    }
    let job = Job::Waiters {
        kind,
        url: url.to_owned(),
        waiters,
        names,
        limit_s: limit.as_secs(),
    };
    let answer = run_workers(vec![job], limit * 2 + Duration::from_secs(30)).await?;
    Ok(numbers(&answer[0]))
}

/// Redisson's defaults: `subscriptionConnectionPoolSize` and
/// `subscriptionsPerConnection`.
pub const JAVA_DEFAULT_POOL: usize = 50;
pub const JAVA_CHANNELS_PER_CONNECTION: usize = 5;

/// Scenario 5a in a JVM: a second Redisson client holds the names, then
/// `waiters` waiters (`lockAsync` with their own thread ids, as tasks are
/// ours) wait on them. Memory per waiter: the JVM's heap after a full GC
/// (live objects, as the bench's allocator counts ours) and its RSS.
async fn java_waiters(
    java: &JavaSpec,
    url: &str,
    admin: &mut Admin,
    waiters: usize,
    names: usize,
    pool: Option<u32>,
    limit: Duration,
) -> Result<Metrics> {
    let setup = pool.map_or(java::Setup::Defaults, java::Setup::Pool);
    let mut jvm = Java::start(&java.classpath, url, java.warm, setup, java::Warm::All).await?;
    let prefix = "scale:java";
    jvm.send(&format!("hold {prefix} {names}")).await?;
    jvm.recv(limit).await?;
    let before: Memory = jvm.call("memory", limit).await?;
    let server0 = server::used_memory(admin).await?;
    let evals = |stats: &std::collections::HashMap<String, u64>| {
        stats.get("evalsha").copied().unwrap_or(0) + stats.get("eval").copied().unwrap_or(0)
    };
    let evals0 = evals(&server::commandstats(admin).await?);
    jvm.send(&format!("wait {prefix} {names} {waiters}"))
        .await?;
    jvm.recv(limit).await?;
    // As for ours: until every waiter has tried twice (try, subscribe, try
    // again); or until the count has stood still for 2 s, when some failed.
    let started = Instant::now();
    let (mut seen, mut moved) = (0, Instant::now());
    loop {
        let n = evals(&server::commandstats(admin).await?) - evals0;
        if n >= 2 * waiters as u64 || started.elapsed() >= limit {
            break;
        }
        if n != seen {
            (seen, moved) = (n, Instant::now());
        } else if moved.elapsed() >= Duration::from_secs(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting_after_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting: Memory = jvm.call("memory", limit).await?;
    let server1 = server::used_memory(admin).await?;
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson_lock__channel:*")
        .query_async(admin)
        .await?;
    let drained: Drained = jvm
        .call(
            &format!("release {}", limit.as_secs()),
            limit + java::ANSWER,
        )
        .await?;
    let after: Memory = jvm.call("memory", limit).await?;
    if !drained.error.is_empty() {
        eprintln!(
            "s5w java (subscription pool {}): {} of {waiters} waiters failed, the first with {}",
            pool.map_or("default".to_string(), |p| p.to_string()),
            drained.errors,
            drained.error
        );
    }
    let n = waiters as f64;
    let kib = |a: u64, b: u64| (a as f64 - b as f64) * 1024.0 / n;
    let bytes = |a: u64, b: u64| (a as f64 - b as f64) / n;
    Ok(Metrics::from([
        ("waiters".into(), n),
        ("names".into(), names as f64),
        (
            "subscription_pool".into(),
            pool.map_or(JAVA_DEFAULT_POOL as f64, f64::from),
        ),
        ("rss_before_kib".into(), before.rss_kib as f64),
        ("rss_waiting_kib".into(), waiting.rss_kib as f64),
        (
            "bytes_per_waiter".into(),
            kib(waiting.rss_kib, before.rss_kib),
        ),
        (
            "rss_after_drain_bytes_per_waiter".into(),
            kib(after.rss_kib, before.rss_kib),
        ),
        (
            "heap_live_bytes_per_waiter".into(),
            bytes(waiting.heap_bytes, before.heap_bytes),
        ),
        (
            "heap_after_drain_bytes_per_waiter".into(),
            bytes(after.heap_bytes, before.heap_bytes),
        ),
        ("subscribed_channels".into(), channels.len() as f64),
        ("all_waiting_after_s".into(), waiting_after_s),
        ("drain_s".into(), drained.drain_s),
        ("wake_p50_us".into(), drained.wake_p50_us),
        ("wake_p99_us".into(), drained.wake_p99_us),
        (
            "server_memory_bytes_per_waiter".into(),
            (server1 - server0) / n,
        ),
        (
            "server_memory_bytes_per_name".into(),
            (server1 - server0) / names as f64,
        ),
        ("completed".into(), drained.completed as f64),
        ("errors".into(), drained.errors as f64),
        ("hang".into(), if drained.hang { 1.0 } else { 0.0 }),
    ]))
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
    let server0 = server::used_memory(&mut admin).await?;
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
    let server1 = server::used_memory(&mut admin).await?;
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson_lock__channel:*")
        .query_async(&mut admin)
        .await?;
    let released = Instant::now();
    // The instant each name's unlock was called (the wake-up latency of a
    // name runs from it to its first waiter's acquisition).
    let mut unlocked = Vec::with_capacity(names);
    for h in held {
        unlocked.push(now_ns());
        h.unlock().await?;
    }
    let all = futures::future::join_all(handles);
    let (finished, done, failed, wake_us) = match tokio::time::timeout(limit, all).await {
        Ok(outcomes) => {
            let mut first = vec![u64::MAX; names];
            for (i, o) in outcomes.iter().enumerate() {
                if let Ok(Ok(at)) = o {
                    first[i % names] = first[i % names].min(*at);
                }
            }
            let wake_us: Vec<f64> = first
                .iter()
                .zip(&unlocked)
                .filter(|(at, _)| **at != u64::MAX)
                .map(|(at, u)| (*at as i64 - *u as i64) as f64 / 1e3)
                .collect();
            let done = outcomes.iter().filter(|o| matches!(o, Ok(Ok(_)))).count();
            (true, done, outcomes.len() - done, wake_us)
        }
        Err(_) => (false, 0, 0, Vec::new()),
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
        "wake_p50_us": quantile(&wake_us, 0.50),
        "wake_p99_us": quantile(&wake_us, 0.99),
        "server_memory_bytes_per_waiter": (server1 - server0) / waiters as f64,
        "server_memory_bytes_per_name": (server1 - server0) / names as f64,
        "completed": done,
        "errors": failed,
        "hang": !finished,
    }))
}
