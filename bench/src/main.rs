//! Benchmarks of `redisson-lock` against the protocol's floor and ceiling
//! and the peer crates (issues 4 and 12).
//! `cargo run --release -p redisson-lock-bench [-- --smoke]`.
//! See BENCHMARKS.md for what every number means.

mod alloc;
mod ceiling;
mod ceiling_semaphore;
mod cluster;
mod floor;
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

use libs::{Kind, Lib, ALL, WITH_FLOOR, WITH_FLOORS};
use report::{Pooled, Record};
use scenarios::{Job, Method, Metrics, Placement, Slot, Subject};
use semaphore_scenario::SemClients;
use util::{now_ns, sleep_until_ns, Usage};

/// Counts live and peak heap bytes when scenario 5a turns it on (`alloc.rs`).
#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Sizes of every scenario; `--smoke` shrinks them all.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub smoke: bool,
    /// Set by `--rounds`, `--runs` and the `BENCH_*` variables: not the
    /// published configuration.
    pub custom: bool,
    /// Runs of every sequential scenario (5a, 6i, 6ii; 5b runs at most 2).
    pub runs: usize,
    // Interleaved scenarios: in each round every subject runs once, for the
    // scenario's round length. `--rounds N` sets every `*_rounds`.
    pub s1_rounds: usize,
    pub s1m_rounds: usize,
    /// Scenario 1p: as 1, with the bench and redis-server pinned to one CPU.
    pub s1p_rounds: usize,
    pub s1_round_ms: u64,
    pub s2_rounds: usize,
    pub s2_round_ms: u64,
    pub s2_tasks: usize,
    /// Scenarios 3 and 3b.
    pub s3_rounds: usize,
    pub s3_round_ms: u64,
    pub s3_tasks: u32,
    pub s4_rounds: usize,
    pub s4_round_ms: u64,
    /// Contended scenarios (3, 3b, 4, sem): the tasks start this long before
    /// each round's measuring window (subscriptions set up, steady state).
    pub warm_ms: u64,
    /// Pause between scenario-4 slots (the tasks finish their last hold).
    pub s4_gap_ms: u64,
    pub s4_processes: u32,
    pub s4_tasks_each: u32,
    pub sem_rounds: usize,
    pub sem_round_ms: u64,
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
    /// Subjects to run (`--libs ours,ceiling,floor`); empty = all.
    pub libs: Vec<String>,
}

impl Params {
    fn is_full_default(&self) -> bool {
        !self.smoke && !self.custom && self.only.is_empty() && self.libs.is_empty()
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

    fn kinds(&self, of: &[Kind]) -> Vec<Kind> {
        of.iter().copied().filter(|k| self.wants_lib(*k)).collect()
    }
}

impl Params {
    fn full() -> Params {
        Params {
            smoke: false,
            custom: false,
            runs: 5,
            s1_rounds: 60,
            s1m_rounds: 40,
            s1p_rounds: 40,
            s1_round_ms: 50,
            s2_rounds: 60,
            s2_round_ms: 50,
            s2_tasks: 16,
            s3_rounds: 20,
            s3_round_ms: 200,
            s3_tasks: 8,
            s4_rounds: 20,
            s4_round_ms: 200,
            warm_ms: 30,
            s4_gap_ms: 40,
            s4_processes: 4,
            s4_tasks_each: 2,
            sem_rounds: 20,
            sem_round_ms: 200,
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
            s1_rounds: 2,
            s1m_rounds: 2,
            s1p_rounds: 2,
            s1_round_ms: 30,
            s2_rounds: 2,
            s2_round_ms: 30,
            s3_rounds: 2,
            s3_round_ms: 50,
            s4_rounds: 2,
            s4_round_ms: 50,
            warm_ms: 10,
            s4_gap_ms: 40,
            sem_rounds: 2,
            sem_round_ms: 50,
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
    let count = |flag: &str| -> Result<Option<usize>> {
        let Some(i) = args.iter().position(|a| a == flag) else {
            return Ok(None);
        };
        let n: usize = args.get(i + 1).context("--rounds N / --runs N")?.parse()?;
        ensure!(n >= 1, "{flag} must be at least 1");
        Ok(Some(n))
    };
    if let Some(n) = count("--rounds")? {
        params.s1_rounds = n;
        params.s1m_rounds = n;
        params.s1p_rounds = n;
        params.s2_rounds = n;
        params.s3_rounds = n;
        params.s4_rounds = n;
        params.sem_rounds = n;
        params.custom = true;
    }
    if let Some(n) = count("--runs")? {
        params.runs = n;
        params.custom = true;
    }
    // For profiling (e.g. under callgrind): stretch the rounds of scenarios 1 and 2.
    if let Some(secs) = std::env::var("BENCH_S1_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        params.s1_round_ms = (secs * 1e3) as u64;
        params.custom = true;
    }
    if let Some(secs) = std::env::var("BENCH_S2_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        params.s2_round_ms = (secs * 1e3) as u64;
        params.custom = true;
    }
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let list = args
            .get(i + 1)
            .context("--only s1,s1p,s1m,s2,s3,s3b,s4,sem,s5w,s5r,s6i,s6ii,s7")?;
        params.only = list.split(',').map(str::to_owned).collect();
    }
    if let Some(i) = args.iter().position(|a| a == "--libs") {
        let list = args
            .get(i + 1)
            .context("--libs ours,ceiling,floor,floorp,rslock,arl,lock,watch")?;
        params.libs = list.split(',').map(str::to_owned).collect();
    }
    let known = ["--smoke", "--rounds", "--runs", "--only", "--libs"];
    if let Some(bad) = args
        .iter()
        .find(|a| a.starts_with("--") && !known.contains(&a.as_str()))
    {
        anyhow::bail!("unknown option {bad}; usage: redisson-lock-bench [--smoke] [--rounds N] [--runs N] [--only s1,s2,...] [--libs ours,ceiling,floor,floorp,...]");
    }
    // The server is started from the main thread, before the runtime exists,
    // and is killed when `server` drops, whatever happens below.
    let server = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            eprintln!("using REDIS_URL={url} (its data will be flushed)");
            (None, url)
        }
        _ => {
            let s = server::start();
            let url = s.url.clone();
            eprintln!("started redis-server at {url}");
            (Some(s), url)
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let redis_pid = server
        .0
        .as_ref()
        .and_then(redisson_lock_testkit::Server::pid);
    let outcome = rt.block_on(bench(&server.1, redis_pid, &params));
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    outcome
}

/// The order of the subjects in round `round`: rotated by one each round,
/// and reversed every other full rotation, so that every subject runs in
/// every position and before and after every other one equally often.
fn order(n: usize, round: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..n).collect();
    if n == 0 {
        return o;
    }
    o.rotate_left(round % n);
    if (round / n) % 2 == 1 {
        o.reverse();
    }
    o
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

type Admin = redis::aio::MultiplexedConnection;

/// Undoes `util::pin` when dropped: each process's previous CPU mask back,
/// for every thread.
struct Pinned(Vec<(u32, String)>);

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Err(e) = util::unpin(&self.0) {
            eprintln!("could not unpin: {e:#}");
        }
    }
}

/// `redis_pid`: the server this bench started (scenario 1p pins it).
async fn bench(url: &str, redis_pid: Option<u32>, params: &Params) -> Result<()> {
    let started = Instant::now();
    let mut admin = server::admin(url).await?;
    let mut records: Vec<Record> = Vec::new();
    let mut pooled = Pooled::default();
    let mut notes: BTreeMap<String, String> = BTreeMap::new();
    let progress =
        |what: &str| eprintln!("{what} ({:.0} s so far)", started.elapsed().as_secs_f64());
    let interleaved = |rounds: usize, round_ms: u64, extra: &str| {
        format!(
            "Interleaved: {rounds} round(s); in each, every subject runs {round_ms} ms in turn \
             (order rotated each round, reversed every other rotation){extra}."
        )
    };

    for (id, placement) in [("s1", Placement::Worker), ("s1m", Placement::BlockOn)] {
        if !params.wants(id) {
            continue;
        }
        progress(&format!("scenario {id}"));
        uncontended(url, &mut admin, params, id, placement, &mut records).await?;
        let place = match placement {
            Placement::Worker => "; the loop runs in a spawned task on a runtime worker",
            Placement::BlockOn => "; the loop runs on the block_on thread",
        };
        notes.insert(
            id.into(),
            interleaved(
                if id == "s1" {
                    params.s1_rounds
                } else {
                    params.s1m_rounds
                },
                params.s1_round_ms,
                &format!("{place}, the floor on a thread of its own"),
            ),
        );
    }
    if params.wants("s1p") {
        if let Some(redis_pid) = redis_pid {
            progress("scenario s1p");
            // The bench (every thread) and redis-server on CPU 0 only, so
            // that no subject's pairs cross CPUs (see BENCHMARKS.md).
            let pinned = Pinned(util::pin(&[std::process::id(), redis_pid], "0")?);
            uncontended(
                url,
                &mut admin,
                params,
                "s1p",
                Placement::Worker,
                &mut records,
            )
            .await?;
            drop(pinned);
            notes.insert(
                "s1p".into(),
                interleaved(
                    params.s1p_rounds,
                    params.s1_round_ms,
                    "; the bench process (every thread) and redis-server pinned to CPU 0; \
                     the loop runs in a spawned task on a runtime worker, the floor on a \
                     thread of its own",
                ),
            );
        } else {
            eprintln!("scenario s1p skipped: it pins the redis-server the bench starts (REDIS_URL is set)");
        }
    }
    if params.wants("s2") {
        progress("scenario s2");
        parallel(url, &mut admin, params, &mut records).await?;
        notes.insert(
            "s2".into(),
            interleaved(params.s2_rounds, params.s2_round_ms, ""),
        );
    }
    for (id, think) in [("s3", Duration::ZERO), ("s3b", Duration::from_millis(1))] {
        if !params.wants(id) {
            continue;
        }
        progress(&format!("scenario {id}"));
        contended(
            url,
            &mut admin,
            params,
            id,
            think,
            &mut records,
            &mut pooled,
        )
        .await?;
        notes.insert(
            id.into(),
            interleaved(
                params.s3_rounds,
                params.s3_round_ms,
                &format!(
                    "; a fresh lock name every round, the tasks started {} ms before the \
                     measured window (warm-up: waiters subscribed)",
                    params.warm_ms
                ),
            ),
        );
    }
    if params.wants("s4") {
        progress("scenario s4");
        cross_process(url, &mut admin, params, &mut records, &mut pooled).await?;
        notes.insert(
            "s4".into(),
            interleaved(
                params.s4_rounds,
                params.s4_round_ms,
                &format!(
                    ", {} ms apart plus a {} ms warm-up before each; the {} worker processes \
                     follow one wall-clock schedule with every library connected; a fresh lock \
                     name every round",
                    params.s4_gap_ms, params.warm_ms, params.s4_processes
                ),
            ),
        );
    }
    if params.wants("sem") {
        progress("scenario sem");
        semaphore(url, &mut admin, params, &mut records).await?;
        notes.insert(
            "sem".into(),
            interleaved(
                params.sem_rounds,
                params.sem_round_ms,
                &format!(
                    "; a fresh semaphore every round, the tasks started {} ms before the \
                     measured window",
                    params.warm_ms
                ),
            ),
        );
    }

    // Sequential scenarios: each measurement needs processes of its own.
    let runs = params.runs;
    let sequential = |what: &str| {
        format!(
            "Sequential (each run in fresh worker processes): {runs} run(s), {what}; \
             the order of the subjects alternates between runs (ABBA)."
        )
    };
    if params.wants("s5w") {
        let kinds = params.kinds(&[Kind::Ours, Kind::Ceiling]);
        for run in 0..runs {
            progress(&format!("scenario s5w, run {}/{runs}", run + 1));
            for i in order(kinds.len(), run) {
                let kind = kinds[i];
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
        }
        notes.insert(
            "s5w".into(),
            sequential("one worker process per subject and run"),
        );
    }
    if params.wants("s5r") && params.wants_lib(Kind::Ours) {
        let runs = runs.min(2);
        for run in 0..runs {
            progress(&format!("scenario s5r, run {}/{runs}", run + 1));
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
        notes.insert(
            "s5r".into(),
            format!("Sequential: {runs} run(s) (a count, not a timing)."),
        );
    }
    let methods: Vec<Method> = [Method::Lock, Method::Watch]
        .into_iter()
        .filter(|m| params.wants_method(*m))
        .collect();
    for id in ["s6i", "s6ii"] {
        if !params.wants(id) {
            continue;
        }
        for run in 0..runs {
            progress(&format!("scenario {id}, run {}/{runs}", run + 1));
            for i in order(methods.len(), run) {
                let method = methods[i];
                let m = if id == "s6i" {
                    stock(url, &mut admin, params, method).await?
                } else {
                    market(url, &mut admin, params, method).await?
                };
                records.push(Record::new(id, method_key(method), run, m));
            }
        }
        notes.insert(
            id.into(),
            sequential("fixed work, one worker process per client process"),
        );
    }
    server::flushall(&mut admin).await?;
    let mut cluster_text = String::new();
    if params.wants("s7") {
        progress("scenario 7: a local Redis Cluster");
        let (subjects, text) = cluster::run(url, params.smoke).await?;
        for (subject, m) in subjects {
            records.push(Record::new("s7", &subject, 0, m));
        }
        cluster_text = text;
    }

    let redis_version = redis_version(&mut admin).await.unwrap_or_default();
    let summary = report::summarize(&records, &notes, &pooled);
    println!("{}", summary.table);
    println!("{}", summary.targets_text);
    println!("{cluster_text}");
    eprintln!("total bench time {:.0} s", started.elapsed().as_secs_f64());

    // Only the full default run updates the published results; smoke and
    // partial runs (--only, --libs, --rounds, --runs) go to results/scratch/.
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
            "loadavg_at_end": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
            "redis_version": redis_version,
            "url_from_env": std::env::var("REDIS_URL").is_ok(),
        },
        "wall_s": started.elapsed().as_secs_f64(),
        "notes": notes,
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
                let v = pooled
                    .handover_us
                    .get(&(scenario.to_string(), k.key().to_string()))
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

/// Scenario 1 (and 1m): one task, one free name, lock+unlock pairs.
async fn uncontended(
    url: &str,
    admin: &mut Admin,
    params: &Params,
    id: &str,
    placement: Placement,
    records: &mut Vec<Record>,
) -> Result<()> {
    server::flushall(admin).await?;
    let mut subjects = Vec::new();
    for kind in params.kinds(&WITH_FLOOR) {
        subjects.push(Subject::connect(kind, url, 1).await?);
    }
    let round = ms(params.s1_round_ms);
    // Warm-up, not recorded: connections, scripts, allocator, caches.
    for s in &mut subjects {
        let name = format!("{id}:{}", s.kind.key());
        scenarios::uncontended_round(s, admin, &name, round * 2, placement).await?;
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
            let m = scenarios::uncontended_round(s, admin, &name, round, placement).await?;
            records.push(Record::new(id, s.kind.key(), r, m));
        }
    }
    Ok(())
}

/// Scenario 2: 16 tasks on their own names.
async fn parallel(
    url: &str,
    admin: &mut Admin,
    params: &Params,
    records: &mut Vec<Record>,
) -> Result<()> {
    server::flushall(admin).await?;
    let mut subjects = Vec::new();
    for kind in params.kinds(&WITH_FLOORS) {
        subjects.push(Subject::connect(kind, url, params.s2_tasks).await?);
    }
    let round = ms(params.s2_round_ms);
    for s in &mut subjects {
        let prefix = format!("s2:{}", s.kind.key());
        scenarios::parallel_round(s, admin, &prefix, params.s2_tasks, round * 2).await?;
    }
    for r in 0..params.s2_rounds {
        for i in order(subjects.len(), r) {
            let s = &mut subjects[i];
            let prefix = format!("s2:{}", s.kind.key());
            let m = scenarios::parallel_round(s, admin, &prefix, params.s2_tasks, round).await?;
            records.push(Record::new("s2", s.kind.key(), r, m));
        }
    }
    Ok(())
}

/// Scenarios 3 and 3b: 8 tasks of this process on one name.
async fn contended(
    url: &str,
    admin: &mut Admin,
    params: &Params,
    id: &str,
    think: Duration,
    records: &mut Vec<Record>,
    pooled: &mut Pooled,
) -> Result<()> {
    server::flushall(admin).await?;
    let mut libs = Vec::new();
    for kind in params.kinds(&ALL) {
        let lib = Lib::connect(kind, url).await?;
        let warm = format!("{id}:warm:{}", kind.key());
        for _ in 0..20 {
            lib.lock(&warm).await?.unlock().await?;
        }
        libs.push((kind, lib));
    }
    for r in 0..params.s3_rounds {
        for i in order(libs.len(), r) {
            let (kind, lib) = &libs[i];
            let name = format!("{id}:{}:{r}", kind.key());
            let before = server::commandstats(admin).await?;
            let cpu0 = server::server_cpu_us(admin).await?;
            let u0 = Usage::now();
            let begin = now_ns() + 5_000_000;
            let start = begin + ms(params.warm_ms).as_nanos() as u64;
            let deadline = start + ms(params.s3_round_ms).as_nanos() as u64;
            let events =
                scenarios::contend(lib, &name, params.s3_tasks, 0, begin, deadline, think).await?;
            let usage = Usage::now().since(u0);
            tokio::time::sleep(ms(30)).await;
            let cpu1 = server::server_cpu_us(admin).await?;
            let diff = server::diff(&before, &server::commandstats(admin).await?);
            let c = scenarios::analyze(events, params.s3_tasks, start, deadline);
            let mut m = c.metrics;
            // CPU and commands span the whole round, warm-up included.
            let acquisitions = m["acquisitions_all"];
            usage.per(acquisitions, "acq", &mut m);
            m.insert(
                "server_cpu_us_per_acq".into(),
                (cpu1 - cpu0) / acquisitions.max(1.0),
            );
            scenarios::add_command_metrics(*kind, &mut m, &diff);
            pooled.add(id, kind.key(), c.handover_us, &c.per_task);
            records.push(Record::new(id, kind.key(), r, m));
        }
    }
    Ok(())
}

/// Scenario 4: 4 worker processes × 2 tasks on one name, every library in
/// every worker, all following one wall-clock schedule of slots.
async fn cross_process(
    url: &str,
    admin: &mut Admin,
    params: &Params,
    records: &mut Vec<Record>,
    pooled: &mut Pooled,
) -> Result<()> {
    server::flushall(admin).await?;
    let kinds = params.kinds(&ALL);
    let (length, warm, gap) = (
        ms(params.s4_round_ms).as_nanos() as u64,
        ms(params.warm_ms).as_nanos() as u64,
        ms(params.s4_gap_ms).as_nanos() as u64,
    );
    // Slot i: tasks start at offset - warm, the window is [offset, offset +
    // length], then a gap for the last holds to finish.
    let mut slots = Vec::new();
    let mut offset = gap + warm;
    for r in 0..params.s4_rounds {
        for i in order(kinds.len(), r) {
            let kind = kinds[i];
            slots.push(Slot {
                round: r,
                kind,
                name: format!("s4:{}:{r}", kind.key()),
                offset_ns: offset,
                warm_ns: warm,
                length_ns: length,
            });
            offset += length + gap + warm;
        }
    }
    let jobs = (0..params.s4_processes)
        .map(|p| Job::Rounds {
            kinds: kinds.clone(),
            url: url.to_owned(),
            tasks: params.s4_tasks_each,
            first_task: p * params.s4_tasks_each,
            slots: slots.clone(),
        })
        .collect();
    let mut workers = scenarios::Synced::start(jobs, Duration::from_secs(60)).await?;
    let base = now_ns() + 100_000_000;
    workers.go(base).await?;
    // Server counters in the middle of every gap: before each slot's
    // warm-up, and after the last slot.
    let mut marks = Vec::with_capacity(slots.len() + 1);
    for at in slots
        .iter()
        .map(|s| s.offset_ns)
        .chain(std::iter::once(offset))
    {
        sleep_until_ns(base + at - warm - gap / 2).await;
        marks.push((
            server::commandstats(admin).await?,
            server::server_cpu_us(admin).await?,
        ));
    }
    let schedule_s = offset as f64 / 1e9;
    let answers = workers
        .finish(Duration::from_secs_f64(60.0 + schedule_s))
        .await?;
    let mut per_process: Vec<Vec<Vec<scenarios::Event>>> = Vec::new();
    for a in answers {
        per_process.push(serde_json::from_value(a)?);
    }
    let tasks = params.s4_processes * params.s4_tasks_each;
    for (i, slot) in slots.iter().enumerate() {
        let mut events = Vec::new();
        for p in &mut per_process {
            events.append(p.get_mut(i).context("a worker's answer lacks a slot")?);
        }
        let start = base + slot.offset_ns;
        let c = scenarios::analyze(events, tasks, start, start + slot.length_ns);
        let mut m = c.metrics;
        let diff = server::diff(&marks[i].0, &marks[i + 1].0);
        let acquisitions = m["acquisitions_all"];
        m.insert(
            "server_cpu_us_per_acq".into(),
            (marks[i + 1].1 - marks[i].1) / acquisitions.max(1.0),
        );
        scenarios::add_command_metrics(slot.kind, &mut m, &diff);
        pooled.add("s4", slot.kind.key(), c.handover_us, &c.per_task);
        records.push(Record::new("s4", slot.kind.key(), slot.round, m));
    }
    Ok(())
}

/// Scenario sem: 16 tasks, a semaphore of 4 permits.
async fn semaphore(
    url: &str,
    admin: &mut Admin,
    params: &Params,
    records: &mut Vec<Record>,
) -> Result<()> {
    server::flushall(admin).await?;
    let mut clients = Vec::new();
    for kind in params.kinds(&[Kind::Ours, Kind::Ceiling]) {
        let c = SemClients::connect(kind, url).await?;
        let warm = c
            .semaphore(&format!("sem:warm:{}", kind.key()), params.sem_permits)
            .await?;
        semaphore_scenario::warm_up(&warm).await?;
        clients.push((kind, c));
    }
    for r in 0..params.sem_rounds {
        for i in order(clients.len(), r) {
            let (kind, c) = &clients[i];
            let lib = c
                .semaphore(&format!("sem:{}:{r}", kind.key()), params.sem_permits)
                .await?;
            let before = server::commandstats(admin).await?;
            let cpu0 = server::server_cpu_us(admin).await?;
            let u0 = Usage::now();
            let begin = now_ns() + 5_000_000;
            let start = begin + ms(params.warm_ms).as_nanos() as u64;
            let deadline = start + ms(params.sem_round_ms).as_nanos() as u64;
            let events =
                semaphore_scenario::contend(&lib, params.sem_tasks, begin, deadline).await?;
            let usage = Usage::now().since(u0);
            tokio::time::sleep(ms(30)).await;
            let cpu1 = server::server_cpu_us(admin).await?;
            let diff = server::diff(&before, &server::commandstats(admin).await?);
            let mut m = semaphore_scenario::analyze(
                events,
                params.sem_permits as usize,
                begin,
                start,
                deadline,
            );
            let acquisitions = m["acquisitions_all"];
            usage.per(acquisitions, "acq", &mut m);
            m.insert(
                "server_cpu_us_per_acq".into(),
                (cpu1 - cpu0) / acquisitions.max(1.0),
            );
            semaphore_scenario::add_command_metrics(&mut m, &diff);
            records.push(Record::new("sem", kind.key(), r, m));
        }
    }
    Ok(())
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
