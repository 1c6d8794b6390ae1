//! The real Java Redisson client as a bench subject (issue 19):
//! `interop/java/RedissonBench.java` in a JVM of its own, started and driven
//! line by line like the bench's other worker processes (its header lists
//! the commands). The JVM runs Redisson's default `Config` with a production
//! JVM's flags (`JVM_FLAGS`); it is warmed (JIT) on the scenario's own path
//! before `ready`, so before its first measured round. Its client CPU is the sum of every JVM thread's on-CPU
//! time (`/proc/PID/task/*/schedstat`, nanoseconds: Netty's event loops,
//! the task threads, GC and JIT compiler threads alike).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::libs::Kind;

/// The Redisson version the bench runs (the one the interop suite reads
/// first; every version builds the same worker).
pub const VERSION: &str = "4.7.0";

/// The JVM's flags (issue 30 §1b): Java as a production user runs it: the
/// server JIT with all its tiers (the default, not restricted), G1, and a
/// fixed heap, touched at start so that no round pays for growing it.
/// `BENCH_JAVA_FLAGS` replaces them (space-separated; empty: the JVM's
/// defaults), for investigation.
pub const JVM_FLAGS: &[&str] = &[
    "-XX:+UseG1GC",
    "-Xms512m",
    "-Xmx512m",
    "-XX:+AlwaysPreTouch",
];

/// The flags this run gives the JVM.
pub fn jvm_flags() -> Vec<String> {
    match std::env::var("BENCH_JAVA_FLAGS") {
        Ok(flags) => flags.split_whitespace().map(str::to_owned).collect(),
        Err(_) => JVM_FLAGS.iter().map(|f| f.to_string()).collect(),
    }
}

/// The JIT warm-up a JVM runs before `ready` (`WARM_PATH` of
/// RedissonBench.java): the scenario's own path, for the whole warm-up.
#[derive(Clone, Copy, Debug)]
pub enum Warm {
    /// Scenario 1: one thread's lock/unlock pairs.
    Pairs,
    /// Scenario 2: 16 threads on their own names.
    Parallel,
    /// Scenarios 3 and 4: 8 threads on one name.
    Contend,
    /// Scenario 3b: as `Contend`, with the 1 ms pause.
    Pause,
    /// The semaphore scenario.
    Sem,
    /// A third each of pairs, contend and sem (scenario 5a and the curves).
    All,
}

impl Warm {
    fn arg(self) -> &'static str {
        match self {
            Warm::Pairs => "pairs",
            Warm::Parallel => "parallel",
            Warm::Contend => "contend",
            Warm::Pause => "pause",
            Warm::Sem => "sem",
            Warm::All => "all",
        }
    }
}

/// How the JVM configures Redisson (`RedissonBench.main`).
#[derive(Clone, Copy, Debug)]
pub enum Setup {
    /// Redisson's default `Config` (only the address set).
    Defaults,
    /// The defaults with a subscription pool of this many connections.
    Pool(u32),
    /// Tuned as a performance-minded Java team would: `nettyThreads` and
    /// `threads` 4 (2 cores), a command pool of 32 connections, all opened
    /// before measuring (`connectionMinimumIdleSize` 32).
    Tuned,
}

impl Setup {
    fn pool(self) -> u32 {
        match self {
            Setup::Pool(pool) => pool,
            Setup::Defaults | Setup::Tuned => 0,
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Setup::Tuned => "tuned",
            Setup::Defaults | Setup::Pool(_) => "defaults",
        }
    }
}

/// The answer to `jvm`: the JVM as it runs.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct JvmInfo {
    pub java_version: String,
    pub vm: String,
    pub flags: String,
    pub gc: String,
    pub heap_max_mib: u64,
    pub processors: u64,
}

/// How long an answer may take beyond the work it reports on.
pub const ANSWER: Duration = Duration::from_secs(30);

/// How to start the Java subject: the worker's class path and the JIT
/// warm-up every JVM runs before `ready`.
#[derive(Clone, Debug)]
pub struct JavaSpec {
    pub classpath: String,
    pub warm: Duration,
}

impl JavaSpec {
    /// The Java subject, or `None` after saying why it is skipped (no
    /// `java`/`javac`, Redisson not built). Under `CI=true` that is an
    /// error instead, so that CI's smoke run always includes Java.
    pub fn find(warm: Duration) -> Result<Option<JavaSpec>> {
        match redisson_lock_testkit::java::locate(VERSION) {
            Ok(redisson) => Ok(Some(JavaSpec {
                classpath: redisson.classpath,
                warm,
            })),
            Err(why) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                bail!("CI=true and the Java Redisson subject cannot run: {why}")
            }
            Err(why) => {
                eprintln!("subject java (Redisson {VERSION}) skipped: {why}");
                Ok(None)
            }
        }
    }

    /// A JVM on `url`, warmed on `path`, with Redisson's default config.
    pub async fn start(&self, kind: Kind, url: &str, path: Warm) -> Result<Java> {
        let setup = if kind == Kind::JavaTuned {
            Setup::Tuned
        } else {
            Setup::Defaults
        };
        Java::start(&self.classpath, url, self.warm, setup, path).await
    }

    /// The JVM the bench runs (a JVM started without warm-up for the question).
    pub async fn describe(&self, url: &str) -> Result<JvmInfo> {
        let mut jvm = Java::start(
            &self.classpath,
            url,
            Duration::ZERO,
            Setup::Defaults,
            Warm::All,
        )
        .await?;
        jvm.call("jvm", ANSWER).await
    }
}

/// CPU time of every thread of process `pid` so far, µs (0 if gone).
pub fn cpu_us(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e3
}

/// One JVM running the worker, killed on drop.
pub struct Java {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pid: u32,
    /// The last lines of the JVM's stderr (Redisson's log), for errors.
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Java {
    /// Start the worker on `url` with Redisson configured per `setup`, warm
    /// it for `warm` on `path`, wait for `ready`.
    pub async fn start(
        classpath: &str,
        url: &str,
        warm: Duration,
        setup: Setup,
        path: Warm,
    ) -> Result<Java> {
        let mut child = Command::new("java")
            .args(jvm_flags())
            .arg("-cp")
            .arg(classpath)
            .arg("RedissonBench")
            .arg(url)
            .arg(warm.as_millis().to_string())
            .arg(setup.pool().to_string())
            .arg(path.arg())
            .arg(setup.arg())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("start java")?;
        let pid = child.id().context("the JVM has no pid")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let mut errors = BufReader::new(child.stderr.take().context("no stderr")?).lines();
        let tail = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                let mut tail = tail.lock();
                if tail.len() == 20 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        let mut java = Java {
            child,
            stdin,
            lines,
            pid,
            stderr,
        };
        let ready = java.recv(Duration::from_secs(60) + warm).await?;
        if !ready.starts_with("ready ") {
            bail!("the Java worker did not start: {ready}");
        }
        Ok(java)
    }

    /// Send one command; its answer comes with [`Java::recv`].
    pub async fn send(&mut self, command: &str) -> Result<()> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .context("write to the Java worker")?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// The next answer, within `limit`; an `err` answer is an error.
    pub async fn recv(&mut self, limit: Duration) -> Result<String> {
        let line = match tokio::time::timeout(limit, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => bail!("the Java worker exited: {}", self.log()),
            Ok(Err(e)) => bail!("reading the Java worker: {e}"),
            Err(_) => bail!("the Java worker did not answer within {limit:?}"),
        };
        if line.starts_with("err ") || line.starts_with("fatal ") {
            bail!("the Java worker failed: {line} ({})", self.log());
        }
        Ok(line)
    }

    /// [`Java::send`], then [`Java::recv`] parsed as JSON.
    pub async fn call<T: serde::de::DeserializeOwned>(
        &mut self,
        command: &str,
        limit: Duration,
    ) -> Result<T> {
        self.send(command).await?;
        let line = self.recv(limit).await?;
        serde_json::from_str(&line).with_context(|| format!("the answer to {command:?}"))
    }

    /// The JVM's process id (its CPU: [`cpu_us`]).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn log(&self) -> String {
        self.stderr
            .lock()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

impl Drop for Java {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The answer to `pairs`.
#[derive(serde::Deserialize)]
pub struct Pairs {
    pub lat_us: Vec<f64>,
    pub elapsed_s: f64,
}

/// The answer to `parallel`.
#[derive(serde::Deserialize)]
pub struct Parallel {
    pub pairs: u64,
    pub elapsed_s: f64,
}

/// The answer to `release` (scenario 5a).
#[derive(serde::Deserialize, serde::Serialize)]
pub struct Drained {
    pub completed: u64,
    pub errors: u64,
    pub hang: bool,
    pub drain_s: f64,
    pub error: String,
    /// Per name, its unlock call to its first waiter's acquisition, µs.
    #[serde(default)]
    pub wake_p50_us: f64,
    #[serde(default)]
    pub wake_p99_us: f64,
}

/// The answer to `memory`.
#[derive(serde::Deserialize)]
pub struct Memory {
    pub rss_kib: u64,
    pub heap_bytes: u64,
}
