//! Benchmarks of `redisson-lock` against the protocol's floor and ceiling
//! and the peer crates (issues 4 and 12).
//! `cargo run --release -p redisson-lock-bench [-- --smoke]`.
//! See BENCHMARKS.md for what every number means.
//!
//! This file: the command line, the server, and `bench`, which runs the
//! scenarios in order (`scenario/`, one file per family; worker processes
//! in `workers.rs`) and writes the results (`report/`).

mod alloc;
mod ceiling;
mod ceiling_pubsub;
mod ceiling_semaphore;
mod cluster;
mod curves;
mod floor;
mod java;
mod libs;
mod params;
mod pause;
mod plot;
mod report;
mod scenario;
mod server;
mod util;
mod workers;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use java::JavaSpec;

use libs::{Kind, ALL};
use params::Params;
use report::Record;
use scenario::uncontended::Placement;
use scenario::{
    contended, cross_process, parallel, scale_waiters, scale_watchdog, semaphore, stock_market,
    uncontended, Admin, Bench,
};
use workers::Job;

/// Counts live and peak heap bytes when scenario 5a turns it on (`alloc.rs`).
#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return workers::main(args.get(1).map(String::as_str).unwrap_or(""), run_job);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let params = Params::from_args(args)?;
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
    let admin = server::admin(url).await?;
    let java = if params.wants_lib(Kind::Java) || params.wants_lib(Kind::JavaTuned) {
        JavaSpec::find(Duration::from_millis(params.java_warm_ms))?
    } else {
        None
    };
    let mut notes: BTreeMap<String, String> = BTreeMap::new();
    if let Some(spec) = java.as_ref() {
        let jvm = spec.describe(url).await?;
        eprintln!(
            "java: {} ({}), flags: {}, GC: {}",
            jvm.java_version, jvm.vm, jvm.flags, jvm.gc
        );
        notes.insert(
            "java".into(),
            format!(
                "java: Redisson {} (the real Java client, built from ../shared/redisson-java), \
                 interop/java/RedissonBench.java in a JVM of its own: Java {} ({}), flags `{}` \
                 (GC: {}; max heap {} MiB; {} processors); `java`: Redisson's defaults (Config: only \
                 the address set), `javatuned` (scenarios 1, 2, 3, 3b, 4, sem): nettyThreads and \
                 threads 4, a command pool of 32 connections opened before measuring; ours/Java \
                 targets compare with the faster of the two; JIT warm-up {} ms on the scenario's own path before its first \
                 round; a task is a Java thread; its client CPU is every JVM thread's (GC and \
                 JIT included).",
                java::VERSION,
                jvm.java_version,
                jvm.vm,
                jvm.flags,
                jvm.gc,
                jvm.heap_max_mib,
                jvm.processors,
                params.java_warm_ms
            ),
        );
        notes.insert("java_jvm".into(), serde_json::to_string(&jvm)?);
    }
    let mut b = Bench::new(url, admin, params, java);
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
        b.progress.show(&format!("scenario {id}"));
        uncontended::run(&mut b, id, placement).await?;
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
            b.progress.show("scenario s1p");
            // The bench (every thread) and redis-server on CPU 0 only, so
            // that no subject's pairs cross CPUs (see BENCHMARKS.md).
            let pinned = Pinned(util::pin(&[std::process::id(), redis_pid], "0")?);
            uncontended::run(&mut b, "s1p", Placement::Worker).await?;
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
        b.progress.show("scenario s2");
        parallel::run(&mut b).await?;
        notes.insert(
            "s2".into(),
            interleaved(params.s2_rounds, params.s2_round_ms, ""),
        );
    }
    for (id, think) in [("s3", Duration::ZERO), ("s3b", Duration::from_millis(1))] {
        if !params.wants(id) {
            continue;
        }
        b.progress.show(&format!("scenario {id}"));
        contended::run(&mut b, id, think).await?;
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
        b.progress.show("scenario s4");
        cross_process::run(&mut b).await?;
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
        b.progress.show("scenario sem");
        semaphore::run(&mut b).await?;
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
        scale_waiters::run(&mut b).await?;
        notes.insert(
            "s5w".into(),
            sequential("one worker process per subject and run"),
        );
    }
    if params.wants("s5r") && params.wants_lib(Kind::Ours) {
        let runs = runs.min(2);
        scale_watchdog::run(&mut b, runs).await?;
        notes.insert(
            "s5r".into(),
            format!("Sequential: {runs} run(s) (a count, not a timing)."),
        );
    }
    for id in ["s6i", "s6ii"] {
        if !params.wants(id) {
            continue;
        }
        stock_market::run(&mut b, id).await?;
        notes.insert(
            id.into(),
            sequential("fixed work, one worker process per client process"),
        );
    }
    server::flushall(&mut b.admin).await?;
    let mut cluster_text = String::new();
    let mut cluster_curve = None;
    if params.wants("s7") {
        b.progress.show("scenario 7: a local Redis Cluster");
        let (subjects, text, rounds) = cluster::run(url, params.smoke).await?;
        for (subject, m) in subjects {
            b.records.push(Record::new("s7", &subject, 0, m));
        }
        cluster_text = text;
        cluster_curve = Some(curves::cluster(rounds));
    }

    let mut curves = curves::run(&mut b).await?;
    curves.extend(cluster_curve);
    server::flushall(&mut b.admin).await?;
    let curves_text: String = curves.iter().map(|c| c.table() + "\n").collect();

    let redis_version = redis_version(&mut b.admin).await.unwrap_or_default();
    let summary = report::summarize(&b.records, &notes, &b.pooled);
    println!("{}", summary.table);
    println!("{}", summary.targets_text);
    println!("{cluster_text}");
    println!("{curves_text}");
    eprintln!("total bench time {:.0} s", b.progress.elapsed_s());

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
        "wall_s": b.progress.elapsed_s(),
        "notes": notes,
        "medians": summary.medians,
        "ratios": summary.ratios,
        "targets": summary.targets,
        "records": b.records,
        "curves": curves,
    });
    std::fs::write(
        dir.join("latest.txt"),
        format!(
            "{}\n{}\n{cluster_text}\n{curves_text}",
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
                let v = b
                    .pooled
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
    for c in &curves {
        let path = c.plot(&dir)?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}

async fn redis_version(admin: &mut Admin) -> Result<String> {
    let text: String = redis::cmd("INFO").arg("server").query_async(admin).await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// A worker process's job: the worker side of its scenario.
async fn run_job(job: Job) -> Result<serde_json::Value> {
    match job {
        Job::Rounds {
            kinds,
            url,
            tasks,
            first_task,
            slots,
        } => cross_process::rounds(kinds, &url, tasks, first_task, slots).await,
        Job::Waiters {
            kind,
            url,
            waiters,
            names,
            limit_s,
        } => {
            let limit = Duration::from_secs(limit_s);
            scale_waiters::waiters(kind, &url, waiters, names, limit).await
        }
        Job::Watchdog {
            url,
            locks,
            watchdog_ms,
            batch,
            intervals,
        } => {
            scale_watchdog::watchdog(
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
        } => {
            let limit = Duration::from_secs(limit_s);
            stock_market::stock(method, &url, start_ns, limit).await
        }
        Job::Market {
            method,
            url,
            start_ns,
            items,
            target,
            limit_s,
        } => {
            let limit = Duration::from_secs(limit_s);
            stock_market::market(method, &url, start_ns, items, target, limit).await
        }
    }
}
