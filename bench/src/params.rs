//! The sizes of every scenario (`Params`): the published defaults, `--smoke`,
//! and what the command line and the `BENCH_*` variables change.

use anyhow::{ensure, Context, Result};
use serde::Serialize;

use crate::libs::Kind;
use crate::workers::Method;

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
    /// The Java subject's JIT warm-up, before every JVM's first round.
    pub java_warm_ms: u64,
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
    /// The parameters of the command line `args` (without the program name).
    pub fn from_args(args: &[String]) -> Result<Params> {
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
                .context("--only s1,s1p,s1m,s2,s3,s3b,s4,sem,s5w,s5r,s6i,s6ii,s7,cw,cn,cr,cp")?;
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
        Ok(params)
    }

    pub fn is_full_default(&self) -> bool {
        !self.smoke && !self.custom && self.only.is_empty() && self.libs.is_empty()
    }

    pub fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }

    pub fn wants_lib(&self, kind: Kind) -> bool {
        self.libs.is_empty() || self.libs.iter().any(|l| l == kind.key())
    }

    pub fn wants_method(&self, method: Method) -> bool {
        self.libs.is_empty() || self.libs.iter().any(|l| l == method.key())
    }

    pub fn kinds(&self, of: &[Kind]) -> Vec<Kind> {
        of.iter().copied().filter(|k| self.wants_lib(*k)).collect()
    }

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
            java_warm_ms: 3_000,
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
            java_warm_ms: 300,
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
