//! Benchmarks of `redisson-lock` against the protocol's ceiling and the peer
//! crates, per issue 4. `cargo run --release -p redisson-lock-bench [-- --smoke]`.
//! See BENCHMARKS.md for what every number means.

mod ceiling;
mod ceiling_semaphore;
mod cluster;
mod libs;
mod plot;
mod report;
mod scenarios;
mod semaphore_scenario;
mod server;
mod util;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde::Serialize;

use libs::{Kind, Lib, ALL};
use report::Record;
use scenarios::{Job, Method, Metrics};
use semaphore_scenario::SemLib;
use util::now_ns;

/// Sizes of every scenario; `--smoke` shrinks them all.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub smoke: bool,
    pub runs: usize,
    pub s1_secs: f64,
    pub s2_secs: f64,
    pub s2_tasks: usize,
    pub s3_secs: f64,
    pub s3_tasks: u32,
    pub s4_secs: f64,
    pub s4_processes: u32,
    pub s4_tasks_each: u32,
    pub sem_secs: f64,
    pub sem_tasks: u32,
    pub sem_permits: u32,
    pub waiters: usize,
    pub waiter_names: usize,
    pub watchdog_locks: usize,
    pub watchdog_ms: u64,
    pub watchdog_batch: usize,
    pub watchdog_intervals: u32,
    pub stock_units: i64,
    pub stock_processes: usize,
    pub market_items: usize,
    pub market_units: i64,
    pub market_processes: usize,
    pub market_target: u64,
    /// Scenario ids to run (`--only s1,s3`); empty = all.
    pub only: Vec<String>,
    /// Libraries to run (`--libs ours,ceiling`); empty = all. For profiling.
    pub libs: Vec<String>,
}

impl Params {
    fn is_full_default(&self) -> bool {
        let full = Params::full();
        !self.smoke
            && self.runs == full.runs
            && self.s1_secs == full.s1_secs
            && self.s2_secs == full.s2_secs
            && self.only.is_empty()
            && self.libs.is_empty()
    }

    fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }

    fn wants_lib(&self, kind: Kind) -> bool {
        self.libs.is_empty() || self.libs.iter().any(|l| l == kind.key())
    }

    fn wants_method(&self, method: Method) -> bool {
        self.libs.is_empty() || self.libs.iter().any(|l| l == method_key(method))
    }
}

impl Params {
    fn full() -> Params {
        Params {
            smoke: false,
            runs: 3,
            s1_secs: 2.0,
            s2_secs: 2.0,
            s2_tasks: 16,
            s3_secs: 3.0,
            s3_tasks: 8,
            s4_secs: 3.0,
            s4_processes: 4,
            s4_tasks_each: 2,
            sem_secs: 3.0,
            sem_tasks: 16,
            sem_permits: 4,
            waiters: 10_000,
            waiter_names: 1_000,
            watchdog_locks: 10_000,
            watchdog_ms: 3_000,
            watchdog_batch: 100,
            watchdog_intervals: 4,
            stock_units: 10_000,
            stock_processes: 2,
            market_items: 500,
            market_units: 2_000,
            market_processes: 8,
            market_target: 10_000,
            only: Vec::new(),
            libs: Vec::new(),
        }
    }

    fn smoke() -> Params {
        Params {
            smoke: true,
            runs: 1,
            s1_secs: 0.2,
            s2_secs: 0.2,
            s3_secs: 0.3,
            s4_secs: 0.3,
            sem_secs: 0.5,
            waiters: 500,
            waiter_names: 50,
            watchdog_locks: 500,
            watchdog_ms: 300,
            watchdog_intervals: 2,
            stock_units: 200,
            market_items: 50,
            market_units: 200,
            market_target: 100,
            ..Params::full()
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(args.get(1).map(String::as_str).unwrap_or(""));
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn worker(job: &str) -> ExitCode {
    let outcome = (|| -> Result<serde_json::Value> {
        let job: Job = serde_json::from_str(job).context("worker job")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(scenarios::run_job(job))
    })();
    match outcome {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("worker failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let mut params = if args.iter().any(|a| a == "--smoke") {
        Params::smoke()
    } else {
        Params::full()
    };
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        params.runs = args.get(i + 1).context("--runs N")?.parse()?;
        ensure!(params.runs >= 1, "--runs must be at least 1");
    }
    // For profiling (e.g. under callgrind): stretch scenarios 1 and 2.
    if let Some(secs) = std::env::var("BENCH_S1_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        params.s1_secs = secs;
    }
    if let Some(secs) = std::env::var("BENCH_S2_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        params.s2_secs = secs;
    }
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let list = args
            .get(i + 1)
            .context("--only s1,s2,s3,s3b,s4,sem,s5w,s5r,s6i,s6ii,s7")?;
        params.only = list.split(',').map(str::to_owned).collect();
    }
    if let Some(i) = args.iter().position(|a| a == "--libs") {
        let list = args
            .get(i + 1)
            .context("--libs ours,ceiling,rslock,arl,lock,watch")?;
        params.libs = list.split(',').map(str::to_owned).collect();
    }
    if let Some(bad) = args.iter().find(|a| {
        a.starts_with("--") && !["--smoke", "--runs", "--only", "--libs"].contains(&a.as_str())
    }) {
        anyhow::bail!("unknown option {bad}; usage: redisson-lock-bench [--smoke] [--runs N] [--only s1,s2,...] [--libs ours,ceiling,...]");
    }
    // The server is started from the main thread, before the runtime exists,
    // and is killed when `server` drops, whatever happens below.
    let server = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            eprintln!("using REDIS_URL={url} (its data will be flushed)");
            (None, url)
        }
        _ => {
            let s = server::Server::start()?;
            let url = s.url.clone();
            eprintln!("started redis-server at {url}");
            (Some(s), url)
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(bench(&server.1, &params));
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    outcome
}

async fn bench(url: &str, params: &Params) -> Result<()> {
    let started = Instant::now();
    let mut admin = server::admin(url).await?;
    let mut records: Vec<Record> = Vec::new();
    let mut samples: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for run in 0..params.runs {
        // Rotate the order each run so no library always goes first.
        let mut order = ALL.to_vec();
        order.rotate_left(run % ALL.len());
        order.retain(|k| params.wants_lib(*k));
        eprintln!(
            "run {}/{} ({:.0} s so far)",
            run + 1,
            params.runs,
            started.elapsed().as_secs_f64()
        );

        for &kind in order.iter().filter(|_| params.wants("s1")) {
            server::flushall(&mut admin).await?;
            let lib = Lib::connect(kind, url).await?;
            let m = scenarios::uncontended(
                kind,
                &lib,
                url,
                &format!("s1:{}:{run}", kind.key()),
                secs(params.s1_secs),
            )
            .await?;
            records.push(Record::new("s1", kind.key(), run, m));
        }
        for &kind in order.iter().filter(|_| params.wants("s2")) {
            server::flushall(&mut admin).await?;
            let lib = Lib::connect(kind, url).await?;
            let prefix = format!("s2:{}:{run}", kind.key());
            let m = scenarios::parallel(
                kind,
                &lib,
                url,
                &prefix,
                params.s2_tasks,
                secs(params.s2_secs),
            )
            .await?;
            records.push(Record::new("s2", kind.key(), run, m));
        }
        let variants = [("s3", Duration::ZERO), ("s3b", Duration::from_millis(1))];
        for (id, think, kind) in variants
            .iter()
            .filter(|v| params.wants(v.0))
            .flat_map(|v| order.iter().map(move |k| (v.0, v.1, *k)))
        {
            server::flushall(&mut admin).await?;
            let lib = Lib::connect(kind, url).await?;
            let name = format!("{id}:{}:{run}", kind.key());
            let before = server::commandstats(&mut admin).await?;
            let start = now_ns() + 50_000_000;
            let deadline = start + secs(params.s3_secs).as_nanos() as u64;
            let events =
                scenarios::contend(&lib, &name, params.s3_tasks, 0, start, deadline, think).await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let diff = server::diff(&before, &server::commandstats(&mut admin).await?);
            let c = scenarios::analyze(events, params.s3_tasks, start, deadline);
            let mut m = c.metrics;
            scenarios::add_command_metrics(kind, &mut m, &diff);
            samples
                .entry((id.into(), kind.label().into()))
                .or_default()
                .extend(c.handover_us);
            records.push(Record::new(id, kind.key(), run, m));
        }
        for &kind in order.iter().filter(|_| params.wants("s4")) {
            server::flushall(&mut admin).await?;
            let name = format!("s4:{}:{run}", kind.key());
            let before = server::commandstats(&mut admin).await?;
            let start = now_ns() + 400_000_000;
            let deadline = start + secs(params.s4_secs).as_nanos() as u64;
            let jobs = (0..params.s4_processes)
                .map(|p| Job::Contended {
                    kind,
                    url: url.to_owned(),
                    name: name.clone(),
                    tasks: params.s4_tasks_each,
                    first_task: p * params.s4_tasks_each,
                    start_ns: start,
                    deadline_ns: deadline,
                })
                .collect();
            let answers = scenarios::run_workers(jobs, Duration::from_secs(60)).await?;
            let mut events = Vec::new();
            for a in answers {
                events.extend(serde_json::from_value::<Vec<scenarios::Event>>(a)?);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let diff = server::diff(&before, &server::commandstats(&mut admin).await?);
            let tasks = params.s4_processes * params.s4_tasks_each;
            let c = scenarios::analyze(events, tasks, start, deadline);
            let mut m = c.metrics;
            scenarios::add_command_metrics(kind, &mut m, &diff);
            samples
                .entry(("s4".into(), kind.label().into()))
                .or_default()
                .extend(c.handover_us);
            records.push(Record::new("s4", kind.key(), run, m));
        }
        for &kind in order
            .iter()
            .filter(|k| matches!(k, Kind::Ours | Kind::Ceiling) && params.wants("sem"))
        {
            server::flushall(&mut admin).await?;
            let name = format!("sem:{}:{run}", kind.key());
            let lib = SemLib::connect(kind, url, &name, params.sem_permits).await?;
            semaphore_scenario::warm_up(&lib).await?;
            let before = server::commandstats(&mut admin).await?;
            let start = now_ns() + 50_000_000;
            let deadline = start + secs(params.sem_secs).as_nanos() as u64;
            let events =
                semaphore_scenario::contend(&lib, params.sem_tasks, start, deadline).await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let diff = server::diff(&before, &server::commandstats(&mut admin).await?);
            let mut m =
                semaphore_scenario::analyze(events, params.sem_permits as usize, start, deadline);
            semaphore_scenario::add_command_metrics(&mut m, &diff);
            records.push(Record::new("sem", kind.key(), run, m));
        }
        for kind in [Kind::Ours, Kind::Ceiling]
            .into_iter()
            .filter(|_| params.wants("s5w"))
        {
            server::flushall(&mut admin).await?;
            let job = Job::Waiters {
                kind,
                url: url.to_owned(),
                waiters: params.waiters,
                names: params.waiter_names,
                limit_s: 60,
            };
            let answer = scenarios::run_workers(vec![job], Duration::from_secs(150)).await?;
            records.push(Record::new("s5w", kind.key(), run, numbers(&answer[0])));
        }
        if params.wants("s5r") {
            server::flushall(&mut admin).await?;
            let job = Job::Watchdog {
                url: url.to_owned(),
                locks: params.watchdog_locks,
                watchdog_ms: params.watchdog_ms,
                batch: params.watchdog_batch,
                intervals: params.watchdog_intervals,
            };
            let answer = scenarios::run_workers(vec![job], Duration::from_secs(120)).await?;
            records.push(Record::new("s5r", "ours", run, numbers(&answer[0])));
        }
        for method in [Method::Lock, Method::Watch]
            .into_iter()
            .filter(|m| params.wants("s6i") && params.wants_method(*m))
        {
            records.push(Record::new(
                "s6i",
                method_key(method),
                run,
                stock(url, &mut admin, params, method).await?,
            ));
        }
        for method in [Method::Lock, Method::Watch]
            .into_iter()
            .filter(|m| params.wants("s6ii") && params.wants_method(*m))
        {
            records.push(Record::new(
                "s6ii",
                method_key(method),
                run,
                market(url, &mut admin, params, method).await?,
            ));
        }
    }
    server::flushall(&mut admin).await?;
    let mut cluster_text = String::new();
    if params.wants("s7") {
        eprintln!("scenario 7: a local Redis Cluster");
        let (subjects, text) = cluster::run(url, params.smoke).await?;
        for (subject, m) in subjects {
            records.push(Record::new("s7", &subject, 0, m));
        }
        cluster_text = text;
    }

    let redis_version = redis_version(&mut admin).await.unwrap_or_default();
    let summary = report::summarize(&records);
    println!("{}", summary.table);
    println!("{}", summary.targets_text);
    println!("{cluster_text}");
    eprintln!("total bench time {:.0} s", started.elapsed().as_secs_f64());

    // Only the full default run updates the published results; smoke and
    // partial runs (--only, --libs, --runs) go to results/scratch/.
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    if !params.is_full_default() {
        dir = dir.join("scratch");
    }
    std::fs::create_dir_all(&dir)?;
    let json = serde_json::json!({
        "command": "cargo run --release -p redisson-lock-bench",
        "args": std::env::args().skip(1).collect::<Vec<_>>(),
        "params": params,
        "machine": {
            "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "redis_version": redis_version,
            "url_from_env": std::env::var("REDIS_URL").is_ok(),
        },
        "wall_s": started.elapsed().as_secs_f64(),
        "medians": summary.medians,
        "ratios": summary.ratios,
        "targets": summary.targets,
        "records": records,
    });
    std::fs::write(
        dir.join("latest.txt"),
        format!(
            "{}\n{}\n{cluster_text}",
            summary.table, summary.targets_text
        ),
    )?;
    let json_path = dir.join("latest.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)?)?;
    let panels: Vec<plot::Panel> = [
        ("s3", "Scenario 3: 8 tasks, one process, one name"),
        ("s3b", "Scenario 3b: as 3, 1 ms pause between holds"),
        ("s4", "Scenario 4: 4 processes × 2 tasks, one name"),
    ]
    .iter()
    .map(|(scenario, title)| {
        let series = ALL
            .iter()
            .map(|k| {
                let v = samples
                    .get(&(scenario.to_string(), k.label().to_string()))
                    .cloned()
                    .unwrap_or_default();
                (k.label().to_string(), v)
            })
            .collect();
        (title.to_string(), series)
    })
    .collect();
    let svg_path = dir.join("handover.svg");
    plot::handover_cdf(&svg_path, &panels)?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn method_key(method: Method) -> &'static str {
    match method {
        Method::Lock => "lock",
        Method::Watch => "watch",
    }
}

/// The numeric fields of a worker's answer (booleans as 0/1).
fn numbers(answer: &serde_json::Value) -> Metrics {
    let mut m = Metrics::new();
    if let Some(obj) = answer.as_object() {
        for (k, v) in obj {
            if let Some(x) = v.as_f64() {
                m.insert(k.clone(), x);
            } else if let Some(b) = v.as_bool() {
                m.insert(k.clone(), if b { 1.0 } else { 0.0 });
            }
        }
    }
    m
}

async fn redis_version(admin: &mut redis::aio::MultiplexedConnection) -> Result<String> {
    let text: String = redis::cmd("INFO").arg("server").query_async(admin).await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// Scenario 6 (i): processes take 2 units at a time from one stock key.
async fn stock(
    url: &str,
    admin: &mut redis::aio::MultiplexedConnection,
    params: &Params,
    method: Method,
) -> Result<Metrics> {
    server::flushall(admin).await?;
    let _: () = redis::cmd("SET")
        .arg("stock")
        .arg(params.stock_units)
        .query_async(admin)
        .await?;
    let before = server::commandstats(admin).await?;
    let cpu0 = server::server_cpu_us(admin).await?;
    let start = now_ns() + 400_000_000;
    let jobs = (0..params.stock_processes)
        .map(|_| Job::Stock {
            method,
            url: url.to_owned(),
            start_ns: start,
            limit_s: 120,
        })
        .collect();
    let answers = scenarios::run_workers(jobs, Duration::from_secs(150)).await?;
    let cpu1 = server::server_cpu_us(admin).await?;
    let diff = server::diff(&before, &server::commandstats(admin).await?);
    let finish = answers
        .iter()
        .filter_map(|a| a["finish_ns"].as_u64())
        .max()
        .unwrap_or(start);
    let bought: i64 = answers.iter().filter_map(|a| a["bought"].as_i64()).sum();
    let aborted: u64 = answers.iter().filter_map(|a| a["aborted"].as_u64()).sum();
    let left: i64 = redis::cmd("GET")
        .arg("stock")
        .query_async::<Option<i64>>(admin)
        .await?
        .unwrap_or(-1);
    let correct = left == 0 && bought == params.stock_units;
    if !correct {
        eprintln!(
            "scenario 6i ({method:?}) WRONG: stock left {left}, bought {bought} of {}",
            params.stock_units
        );
    }
    let purchases = (bought as f64 / 2.0).max(1.0);
    Ok(Metrics::from([
        (
            "server_cmds_per_purchase".into(),
            libs::total_commands(&diff) as f64 / purchases,
        ),
        (
            "server_cpu_us_per_purchase".into(),
            (cpu1 - cpu0) / purchases,
        ),
        ("wall_s".into(), (finish - start) as f64 / 1e9),
        ("correct".into(), if correct { 1.0 } else { 0.0 }),
        ("aborted".into(), aborted as f64),
        ("bought".into(), bought as f64),
    ]))
}

/// Scenario 6 (ii): a hash market; processes buy 2 units round-robin.
async fn market(
    url: &str,
    admin: &mut redis::aio::MultiplexedConnection,
    params: &Params,
    method: Method,
) -> Result<Metrics> {
    server::flushall(admin).await?;
    let mut hset = redis::cmd("HSET");
    hset.arg("market");
    for i in 0..params.market_items {
        hset.arg(scenarios::market_field(i))
            .arg(params.market_units);
    }
    let _: i64 = hset.query_async(admin).await?;
    let before = server::commandstats(admin).await?;
    let cpu0 = server::server_cpu_us(admin).await?;
    let start = now_ns() + 400_000_000;
    let jobs = (0..params.market_processes)
        .map(|_| Job::Market {
            method,
            url: url.to_owned(),
            start_ns: start,
            items: params.market_items,
            target: params.market_target,
            limit_s: 240,
        })
        .collect();
    let answers = scenarios::run_workers(jobs, Duration::from_secs(300)).await?;
    let cpu1 = server::server_cpu_us(admin).await?;
    let diff = server::diff(&before, &server::commandstats(admin).await?);
    let finish = answers
        .iter()
        .filter_map(|a| a["finish_ns"].as_u64())
        .max()
        .unwrap_or(start);
    let long_waits: u64 = answers
        .iter()
        .filter_map(|a| a["long_waits"].as_u64())
        .sum();
    let max_wait_ms = answers
        .iter()
        .filter_map(|a| a["max_wait_ms"].as_f64())
        .fold(0.0, f64::max);
    let aborted: u64 = answers.iter().filter_map(|a| a["aborted"].as_u64()).sum();
    let bought: u64 = answers.iter().filter_map(|a| a["bought"].as_u64()).sum();
    let mut sold = vec![0i64; params.market_items];
    for a in &answers {
        for (i, n) in a["per_item"].as_array().into_iter().flatten().enumerate() {
            if let Some(slot) = sold.get_mut(i) {
                *slot += n.as_i64().unwrap_or(0);
            }
        }
    }
    let left: BTreeMap<String, i64> = redis::cmd("HGETALL")
        .arg("market")
        .query_async(admin)
        .await?;
    let mut wrong = 0usize;
    for (i, purchases) in sold.iter().enumerate() {
        let expected = params.market_units - 2 * purchases;
        if left.get(&scenarios::market_field(i)).copied() != Some(expected) {
            wrong += 1;
        }
    }
    let total_left: i64 = left.values().sum();
    let expected_total = params.market_units * params.market_items as i64 - bought as i64;
    let correct = wrong == 0
        && bought == params.market_target * params.market_processes as u64
        && total_left == expected_total;
    if !correct {
        eprintln!("scenario 6ii ({method:?}) WRONG: {wrong} items differ, bought {bought}, left {total_left} (expected {expected_total})");
    }
    let purchases = (bought as f64 / 2.0).max(1.0);
    Ok(Metrics::from([
        (
            "server_cmds_per_purchase".into(),
            libs::total_commands(&diff) as f64 / purchases,
        ),
        (
            "server_cpu_us_per_purchase".into(),
            (cpu1 - cpu0) / purchases,
        ),
        ("wall_s".into(), (finish - start) as f64 / 1e9),
        ("correct".into(), if correct { 1.0 } else { 0.0 }),
        ("aborted".into(), aborted as f64),
        ("bought".into(), bought as f64),
        ("items_wrong".into(), wrong as f64),
        ("lock_waits_over_1s".into(), long_waits as f64),
        ("max_lock_wait_ms".into(), max_wait_ms),
    ]))
}
