//! Worker processes: this binary run as `worker <job json>` for the
//! scenarios that need processes of their own (4, 5a, 5b, 6i, 6ii). A job
//! (and the vocabulary it carries: `Slot`, `Method`) is started and answered
//! here; what it does lives with its scenario, and `main.rs` dispatches it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

use crate::libs::Kind;
use crate::util::Metrics;

/// The worker process's `main`: run `job` with `run` (the scenarios'
/// worker sides, dispatched by `main.rs`), print its answer (one JSON line).
pub fn main<F>(job: &str, run: impl FnOnce(Job) -> F) -> ExitCode
where
    F: std::future::Future<Output = Result<serde_json::Value>>,
{
    let outcome = (|| -> Result<serde_json::Value> {
        let job: Job = serde_json::from_str(job).context("worker job")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(run(job))
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

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Method {
    /// A `redisson_lock` lock around read-modify-write.
    Lock,
    /// WATCH / read / MULTI-write-EXEC, abandoned on conflict.
    Watch,
}

impl Method {
    /// The subject key of the records and of `--libs`.
    pub fn key(self) -> &'static str {
        match self {
            Method::Lock => "lock",
            Method::Watch => "watch",
        }
    }
}

/// Start a worker process (this binary, `worker <json>`) on `job`; its
/// stdout piped, its stderr this process's; killed when dropped.
fn spawn(job: &Job, stdin: std::process::Stdio) -> Result<tokio::process::Child> {
    tokio::process::Command::new(std::env::current_exe()?)
        .arg("worker")
        .arg(serde_json::to_string(job)?)
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("spawning a worker process")
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
        let mut children = Vec::new();
        for job in &jobs {
            let mut child = spawn(job, std::process::Stdio::piped())?;
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
    let mut children = Vec::new();
    for job in &jobs {
        children.push(spawn(job, std::process::Stdio::null())?);
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

/// The numeric fields of a worker's answer (booleans as 0/1).
pub fn numbers(answer: &serde_json::Value) -> Metrics {
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
