//! The scenarios of issue 4, in-process parts and worker-process jobs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use fred::interfaces::{HashesInterface, KeysInterface};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::alloc;
use crate::floor::Floor;
use crate::libs::{Kind, Lib};
use crate::server;
use crate::util::{instant_at, now_ns, quantile, sleep_until_ns, vm_rss_kib, Usage};

pub type Metrics = BTreeMap<String, f64>;

/// One acquisition: (task, lock called at, lock returned at, unlock called
/// at, unlock returned at), `util::now_ns` ns. A wait abandoned at the
/// deadline is recorded with `u64::MAX` as its later times.
pub type Event = (u32, u64, u64, u64, u64);

/// Upper bound on iterations of any measuring loop (they are also time-bounded).
const MAX_ITER: u64 = 50_000_000;

// ------------------------------------------------------------ scenarios 1, 2

/// What runs a scenario-1 or -2 round: a library, or the floor client (one
/// blocking connection per task). Held once per subject, so unboxed.
#[allow(clippy::large_enum_variant)]
pub enum Runner {
    Lib(Lib),
    Floor(Vec<Floor>),
}

/// One subject of an interleaved scenario, connected once for all its rounds.
pub struct Subject {
    pub kind: Kind,
    pub runner: Runner,
}

impl Subject {
    /// Connect `kind`; the floor opens `floor_connections` connections, the
    /// pipelined floor one.
    pub async fn connect(kind: Kind, url: &str, floor_connections: usize) -> Result<Subject> {
        let floor_connections = if kind == Kind::FloorP {
            1
        } else {
            floor_connections
        };
        let runner = if matches!(kind, Kind::Floor | Kind::FloorP) {
            let url = url.to_owned();
            Runner::Floor(
                tokio::task::spawn_blocking(move || {
                    (0..floor_connections)
                        .map(|_| Floor::connect(&url))
                        .collect::<Result<Vec<_>>>()
                })
                .await??,
            )
        } else {
            Runner::Lib(Lib::connect(kind, url).await?)
        };
        Ok(Subject { kind, runner })
    }
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
pub async fn uncontended_round(
    subject: &mut Subject,
    admin: &mut redis::aio::MultiplexedConnection,
    name: &str,
    duration: Duration,
    placement: Placement,
) -> Result<Metrics> {
    let before = server::commandstats(admin).await?;
    let cpu0 = server::server_cpu_us(admin).await?;
    let run = match &mut subject.runner {
        Runner::Lib(lib) => {
            let (lib, name) = (lib.clone(), name.to_owned());
            let pairs = async move { lib_pairs(&lib, &name, duration).await };
            match placement {
                Placement::Worker => tokio::spawn(pairs).await??,
                Placement::BlockOn => pairs.await?,
            }
        }
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
    // Let fire-and-forget latch DELs land before counting commands.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cpu1 = server::server_cpu_us(admin).await?;
    let diff = server::diff(&before, &server::commandstats(admin).await?);
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
            (cpu1 - cpu0) / pairs.max(1.0),
        ),
    ]);
    run.usage.per(pairs, "pair", &mut m);
    if let Some((writes, reads)) = run.syscalls {
        m.insert(
            "socket_calls_per_pair".into(),
            (writes + reads) as f64 / pairs.max(1.0),
        );
    }
    add_command_metrics(subject.kind, &mut m, &diff);
    Ok(m)
}

/// One round of scenario 2: `tasks` tasks (the floor: threads), each on its
/// own name `<prefix>:<i>`, from a common start for `duration`.
pub async fn parallel_round(
    subject: &mut Subject,
    admin: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    tasks: usize,
    duration: Duration,
) -> Result<Metrics> {
    let before = server::commandstats(admin).await?;
    let cpu0 = server::server_cpu_us(admin).await?;
    let u0 = Usage::now();
    let (pairs, elapsed_s) = match &mut subject.runner {
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
    let usage = Usage::now().since(u0);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cpu1 = server::server_cpu_us(admin).await?;
    let diff = server::diff(&before, &server::commandstats(admin).await?);
    let mut m = Metrics::from([
        ("pairs_per_s".into(), pairs as f64 / elapsed_s),
        (
            "server_cpu_us_per_pair".into(),
            (cpu1 - cpu0) / pairs.max(1) as f64,
        ),
        ("pairs".into(), pairs as f64),
        ("acquisitions".into(), pairs as f64),
    ]);
    usage.per(pairs as f64, "pair", &mut m);
    add_command_metrics(subject.kind, &mut m, &diff);
    Ok(m)
}

// ------------------------------------------------------------ scenarios 3, 4

/// `tasks` tasks of this process contending for `name` from `start_ns` (the
/// beginning of the round's warm-up) to `deadline_ns`, each pausing `think`
/// outside the lock after every unlock (zero: re-lock at once); waits in
/// progress at the deadline are abandoned.
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
                        events.push((first_task + t, asked, u64::MAX, u64::MAX, u64::MAX));
                        break;
                    }
                    held = lib.lock(&name) => held?,
                };
                let acquired = now_ns();
                let releasing = now_ns();
                held.unlock().await?;
                events.push((first_task + t, asked, acquired, releasing, now_ns()));
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
    /// Acquisitions per task inside the window.
    pub per_task: Vec<u64>,
}

/// The statistics of the measuring window `[start_ns, deadline_ns]`: holds
/// whose `lock` returned before `start_ns` belong to the round's warm-up
/// (the tasks start a little earlier, so the window sees waiters already
/// subscribed) and are only used as the predecessor of the first handover.
///
/// A *handover* is a hold by a different task that was already waiting when
/// the previous holder *called* unlock; its latency runs from that unlock
/// call to the next `lock` returning: the unlock request, the script, the
/// publish, the wake-up and the waiter's acquire round trip, all of it. It
/// is kept signed and never clamped (on one machine's shared clock it
/// cannot be negative; `handovers_negative` would show a clock problem).
/// Measuring from the unlock call rather than its return means a client
/// cannot shorten its handovers by returning from unlock late.
pub fn analyze(events: Vec<Event>, tasks: u32, start_ns: u64, deadline_ns: u64) -> Contention {
    let acquisitions_all = events.iter().filter(|e| e.2 != u64::MAX).count();
    let measured = |e: &Event| e.2 >= start_ns;
    // Waits: lock called -> lock returned; a wait still pending at the
    // deadline counts with the time it had waited by then (censored).
    let wait_us: Vec<f64> = events
        .iter()
        .filter(|e| measured(e))
        .map(|e| (e.2.min(deadline_ns).max(e.1) - e.1) as f64 / 1e3)
        .collect();
    let abandoned = events.iter().filter(|e| e.2 == u64::MAX).count();
    // Holds never overlap and each "lock returned" instant lies inside its
    // hold, so sorting by it gives the order in which the lock was held.
    let mut events: Vec<Event> = events.into_iter().filter(|e| e.2 != u64::MAX).collect();
    events.sort_by_key(|e| e.2);
    let window = (deadline_ns - start_ns) as f64 / 1e9;
    let in_window = events
        .iter()
        .filter(|e| measured(e) && e.2 <= deadline_ns)
        .count();
    let mut per_task = vec![0u64; tasks as usize];
    for e in events.iter().filter(|e| measured(e)) {
        if let Some(c) = per_task.get_mut(e.0 as usize) {
            *c += 1;
        }
    }
    let (mut handover_us, mut same, mut early, mut idle, mut negative) =
        (Vec::new(), 0u64, 0u64, 0u64, 0u64);
    for pair in events.windows(2).filter(|p| measured(&p[1])) {
        let (prev, next) = (pair[0], pair[1]);
        if prev.0 == next.0 {
            same += 1;
        } else if next.1 >= prev.3 {
            // The next holder asked only once the release had begun: it
            // was not waiting for this hold, nobody was handed anything.
            idle += 1;
        } else {
            if next.2 < prev.4 {
                early += 1; // lock returned before the releaser's unlock returned
            }
            let gap = next.2 as i64 - prev.3 as i64;
            if gap < 0 {
                negative += 1;
            }
            handover_us.push(gap as f64 / 1e3);
        }
    }
    let min = per_task.iter().copied().min().unwrap_or(0) as f64;
    let max = per_task.iter().copied().max().unwrap_or(0) as f64;
    let transitions = (same + idle + handover_us.len() as u64).max(1) as f64;
    let metrics = Metrics::from([
        ("acq_per_s".into(), in_window as f64 / window),
        ("acquisitions".into(), in_window as f64),
        ("acquisitions_all".into(), acquisitions_all as f64),
        ("handovers".into(), handover_us.len() as f64),
        ("handover_p50_us".into(), quantile(&handover_us, 0.50)),
        ("handover_p99_us".into(), quantile(&handover_us, 0.99)),
        ("handover_max_us".into(), quantile(&handover_us, 1.0)),
        ("handovers_negative".into(), negative as f64),
        ("handover_before_unlock_returned".into(), early as f64),
        ("acquired_after_release_began".into(), idle as f64),
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
        per_task,
    }
}

/// Add commands-per-acquisition figures from a commandstats diff.
pub fn add_command_metrics(
    kind: Kind,
    metrics: &mut Metrics,
    diff: &std::collections::HashMap<String, u64>,
) {
    // Counters span the whole round, warm-up included.
    let acquisitions = metrics
        .get("acquisitions_all")
        .or_else(|| metrics.get("acquisitions"))
        .copied()
        .unwrap_or(0.0)
        .max(1.0);
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
    /// Scenario 4: this process's `tasks` tasks contend in every slot of
    /// `slots`, the same schedule in every process. Connects every library
    /// first, prints `ready`, reads the common base instant (`now_ns`) from
    /// stdin, then answers with the events of each slot.
    Rounds {
        kinds: Vec<Kind>,
        url: String,
        tasks: u32,
        first_task: u32,
        slots: Vec<Slot>,
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
        Job::Rounds {
            kinds,
            url,
            tasks,
            first_task,
            slots,
        } => {
            let mut libs = std::collections::HashMap::new();
            for kind in kinds {
                let lib = Lib::connect(kind, &url).await?;
                let warm = format!("s4:warm:{}:{first_task}", kind.key());
                for _ in 0..20 {
                    lib.lock(&warm).await?.unlock().await?;
                }
                libs.insert(kind, lib);
            }
            println!("ready");
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await??;
            let base: u64 = line.trim().parse().context("base instant on stdin")?;
            let mut answer = Vec::with_capacity(slots.len());
            for slot in slots {
                let lib = libs
                    .get(&slot.kind)
                    .context("slot of a library not connected")?;
                let start = base + slot.offset_ns;
                let events = contend(
                    lib,
                    &slot.name,
                    tasks,
                    first_task,
                    start - slot.warm_ns,
                    start + slot.length_ns,
                    Duration::ZERO,
                )
                .await?;
                answer.push(events);
            }
            Ok(serde_json::to_value(answer)?)
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

/// One slot of an interleaved multi-process schedule: `kind` contends for
/// `name` from `base + offset_ns - warm_ns` (warm-up) to `base + offset_ns +
/// length_ns`; the window measured starts at `base + offset_ns`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slot {
    pub round: usize,
    pub kind: Kind,
    pub name: String,
    pub offset_ns: u64,
    pub warm_ns: u64,
    pub length_ns: u64,
}

/// Worker processes that run one schedule together (`Job::Rounds`).
pub struct Synced {
    children: Vec<(
        tokio::process::Child,
        tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    )>,
}

impl Synced {
    /// Start the workers and wait until every one has connected.
    pub async fn start(jobs: Vec<Job>, limit: Duration) -> Result<Synced> {
        use tokio::io::AsyncBufReadExt;
        let exe = std::env::current_exe()?;
        let mut children = Vec::new();
        for job in &jobs {
            let mut child = tokio::process::Command::new(&exe)
                .arg("worker")
                .arg(serde_json::to_string(job)?)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .context("spawning a worker process")?;
            let stdout = child.stdout.take().context("worker stdout")?;
            children.push((child, tokio::io::BufReader::new(stdout).lines()));
        }
        for (_, lines) in &mut children {
            let line = tokio::time::timeout(limit, lines.next_line())
                .await
                .context("a worker did not get ready in time")??;
            ensure!(
                line.as_deref() == Some("ready"),
                "a worker said {line:?} instead of ready"
            );
        }
        Ok(Synced { children })
    }

    /// Tell every worker the base instant of the schedule.
    pub async fn go(&mut self, base_ns: u64) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        for (child, _) in &mut self.children {
            let stdin = child.stdin.as_mut().context("worker stdin")?;
            stdin.write_all(format!("{base_ns}\n").as_bytes()).await?;
            stdin.flush().await?;
        }
        Ok(())
    }

    /// Each worker's answer (its last line of output).
    pub async fn finish(self, limit: Duration) -> Result<Vec<serde_json::Value>> {
        let mut answers = Vec::new();
        for (mut child, mut lines) in self.children {
            let mut last = None;
            let read = async {
                while let Some(line) = lines.next_line().await? {
                    last = Some(line);
                }
                anyhow::Ok(child.wait().await?)
            };
            let status = tokio::time::timeout(limit, read)
                .await
                .context("a worker did not finish in time")??;
            ensure!(status.success(), "a worker process failed: {status}");
            answers.push(serde_json::from_str(
                &last.context("a worker printed nothing")?,
            )?);
        }
        Ok(answers)
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
/// waiter while they all wait (heap counted by the bench's allocator, and
/// RSS), then release and check that every one gets its turn.
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
