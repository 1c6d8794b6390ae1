//! The scenarios (see BENCHMARKS.md), one file per family. Each file has
//! its driver (`run`: connects the subjects, runs the rounds or runs in
//! turn, records one `Record` per subject and round) and what a round does.
//! `main.rs` calls the drivers in order; a new subject is one more `Kind`
//! in the driver's subject list and one more arm where a round runs it.

pub mod contended;
pub mod cross_process;
pub mod parallel;
pub mod scale_waiters;
pub mod scale_watchdog;
pub mod semaphore;
pub mod stock_market;
pub mod subject;
pub mod uncontended;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::java::{self, JavaSpec};
use crate::libs::Kind;
use crate::params::Params;
use crate::report::{Pooled, Record};
use crate::server;
use crate::util::Usage;

pub use crate::util::Metrics;

/// The bench's own connection, for the server's counters and FLUSHALL.
pub type Admin = redis::aio::MultiplexedConnection;

/// Upper bound on iterations of any measuring loop (they are also time-bounded).
pub const MAX_ITER: u64 = 50_000_000;

/// What every driver works with: the server, the sizes, and the results.
pub struct Bench<'a> {
    pub url: &'a str,
    pub admin: Admin,
    pub params: &'a Params,
    /// How to start the Java subject; `None`: skipped (said once, at start).
    pub java: Option<JavaSpec>,
    pub records: Vec<Record>,
    /// The contended scenarios' samples of all rounds together.
    pub pooled: Pooled,
    pub progress: Progress,
}

impl<'a> Bench<'a> {
    pub fn new(
        url: &'a str,
        admin: Admin,
        params: &'a Params,
        java: Option<JavaSpec>,
    ) -> Bench<'a> {
        Bench {
            url,
            admin,
            params,
            java,
            records: Vec::new(),
            pooled: Pooled::default(),
            progress: Progress(Instant::now()),
        }
    }
}

impl Bench<'_> {
    /// The subjects of `of` to run: those `--libs` asks for, less Java when
    /// it cannot run here.
    pub fn kinds(&self, of: &[Kind]) -> Vec<Kind> {
        let mut kinds = self.params.kinds(of);
        if self.java.is_none() {
            kinds.retain(|k| !k.is_java());
        }
        kinds
    }

    /// How an interleaved scenario starts: the subjects of `of` to run
    /// ([`Bench::kinds`]), on a server emptied of earlier scenarios' keys.
    pub async fn start_interleaved(&mut self, of: &[Kind]) -> Result<Vec<Kind>> {
        server::flushall(&mut self.admin).await?;
        Ok(self.kinds(of))
    }
}

/// Progress lines on stderr, with the time since the bench started.
pub struct Progress(Instant);

impl Progress {
    pub fn show(&self, what: &str) {
        eprintln!("{what} ({:.0} s so far)", self.elapsed_s());
    }

    pub fn elapsed_s(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// The order of the subjects in round `round`: rotated by one each round,
/// and reversed every other full rotation, so that every subject runs in
/// every position and before and after every other one equally often.
pub fn order(n: usize, round: usize) -> Vec<usize> {
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

pub fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// The server's counters (commands, redis-server CPU) and the client's
/// CPU (this process's, or a JVM's), read at the start of a round.
pub struct Counters {
    commands: HashMap<String, u64>,
    server_cpu_us: f64,
    usage: Usage,
    /// The JVM that is the client, and its CPU µs at the start.
    jvm: Option<(u32, f64)>,
}

/// What `Counters` measured over a round.
pub struct Counted {
    /// This process's CPU, up to `Counters::stop`.
    pub usage: Usage,
    /// redis-server CPU µs and commands, up to `settle` after the stop.
    pub server_cpu_us: f64,
    pub commands: HashMap<String, u64>,
}

impl Counters {
    /// Counters for a round whose client is this process.
    pub async fn start(admin: &mut Admin) -> Result<Counters> {
        Counters::start_for(admin, None).await
    }

    /// Counters for a round whose client is the JVM `jvm` (a pid), if any,
    /// else this process.
    pub async fn start_for(admin: &mut Admin, jvm: Option<u32>) -> Result<Counters> {
        let commands = server::commandstats(admin).await?;
        let server_cpu_us = server::server_cpu_us(admin).await?;
        Ok(Counters {
            commands,
            server_cpu_us,
            usage: Usage::now(),
            jvm: jvm.map(|pid| (pid, java::cpu_us(pid))),
        })
    }

    /// Stop the client's count at once, the server's after `settle` (for
    /// fire-and-forget commands such as latch DELs to land).
    pub async fn stop(self, admin: &mut Admin, settle: Duration) -> Result<Counted> {
        let usage = match self.jvm {
            Some((pid, cpu0)) => Usage::total(java::cpu_us(pid) - cpu0),
            None => Usage::now().since(self.usage),
        };
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
        }
        let cpu1 = server::server_cpu_us(admin).await?;
        let commands = server::diff(&self.commands, &server::commandstats(admin).await?);
        Ok(Counted {
            usage,
            server_cpu_us: cpu1 - self.server_cpu_us,
            commands,
        })
    }
}

impl Counted {
    /// Client and server CPU per acquisition: CPU spans the whole round,
    /// warm-up included, and so do the acquisitions (`acquisitions_all`).
    pub fn per_acquisition(&self, m: &mut Metrics) {
        let acquisitions = m["acquisitions_all"];
        self.usage.per(acquisitions, "acq", m);
        m.insert(
            "server_cpu_us_per_acq".into(),
            self.server_cpu_us / acquisitions.max(1.0),
        );
    }
}

/// Add commands-per-acquisition figures from a commandstats diff.
pub fn add_command_metrics(kind: Kind, metrics: &mut Metrics, diff: &HashMap<String, u64>) {
    let (client, script) = kind.split_commands(diff);
    add_split_commands(metrics, client, script);
}

/// Commands per acquisition: `client` sent by the client, `script` run by
/// its scripts. Counters span the whole round, warm-up included.
pub fn add_split_commands(metrics: &mut Metrics, client: u64, script: u64) {
    let acquisitions = metrics
        .get("acquisitions_all")
        .or_else(|| metrics.get("acquisitions"))
        .copied()
        .unwrap_or(0.0)
        .max(1.0);
    metrics.insert("round_trips_per_acq".into(), client as f64 / acquisitions);
    metrics.insert("script_cmds_per_acq".into(), script as f64 / acquisitions);
    metrics.insert(
        "server_cmds_per_acq".into(),
        (client + script) as f64 / acquisitions,
    );
}

/// The waits of a contended round (lock or semaphore), from each
/// acquisition's (called, returned) instants: those returned at or after
/// `start_ns`, µs, a wait still pending at the deadline (returned =
/// `u64::MAX`) counted with the time it had waited by then (censored); and
/// how many were abandoned at the deadline.
pub fn waits(
    called_returned: impl Iterator<Item = (u64, u64)> + Clone,
    start_ns: u64,
    deadline_ns: u64,
) -> (Vec<f64>, usize) {
    let wait_us = called_returned
        .clone()
        .filter(|(_, returned)| *returned >= start_ns)
        .map(|(called, returned)| (returned.min(deadline_ns).max(called) - called) as f64 / 1e3)
        .collect();
    let abandoned = called_returned
        .filter(|(_, returned)| *returned == u64::MAX)
        .count();
    (wait_us, abandoned)
}
