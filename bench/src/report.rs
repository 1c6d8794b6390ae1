//! The tables and the targets.
//!
//! Every scenario prints two tables, each consistent in itself:
//!
//! * **values**: for every metric and subject, the median over the rounds
//!   (interleaved scenarios) or runs (sequential ones) of that subject's
//!   per-round value. No ratios in it.
//! * **ratios**: for every pair A/B and headline metric, A's and B's medians
//!   (as in the values table), their quotient (*ratio of medians*, which
//!   therefore matches the values table), and separately the *median of the
//!   per-round ratios* (A's value in round r ÷ B's value in the same round r,
//!   one number per round; both ran within a second of each other) with its
//!   interquartile range and min–max. The per-round form is what the targets
//!   use: it cancels the drift of a shared machine between rounds.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::scenarios::Metrics;
use crate::util::{median, quantile, spread};

/// One measurement: a scenario, a subject (library or method), a round (or
/// run, for the sequential scenarios).
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub scenario: String,
    pub subject: String,
    pub round: usize,
    pub metrics: Metrics,
}

impl Record {
    pub fn new(scenario: &str, subject: &str, round: usize, metrics: Metrics) -> Record {
        Record {
            scenario: scenario.into(),
            subject: subject.into(),
            round,
            metrics,
        }
    }
}

struct Section {
    id: &'static str,
    title: &'static str,
    subjects: &'static [&'static str],
    metrics: &'static [(&'static str, &'static str)],
    /// (A, B) pairs of the ratios table.
    pairs: &'static [(&'static str, &'static str)],
    /// The metrics of the ratios table.
    ratio_metrics: &'static [&'static str],
    /// Contended scenarios: also the handover quantiles of all rounds pooled.
    pooled: bool,
    /// Sequential scenarios are measured in runs, not interleaved rounds.
    sequential: bool,
}

const LIBS: &[&str] = &["ours", "ceiling", "rslock", "arl"];
const WITH_FLOOR: &[&str] = &["ours", "ceiling", "floor", "rslock", "arl"];
const WITH_FLOORS: &[&str] = &["ours", "ceiling", "floor", "floorp", "rslock", "arl"];
const VS: &[(&str, &str)] = &[("ours", "ceiling"), ("ours", "rslock"), ("ours", "arl")];
const VS_FLOOR: &[(&str, &str)] = &[
    ("ours", "floor"),
    ("ceiling", "floor"),
    ("ours", "ceiling"),
    ("ours", "rslock"),
    ("ours", "arl"),
];
const UNCONTENDED: &[(&str, &str)] = &[
    ("pairs_per_s", "lock+unlock pairs/s"),
    ("pair_mean_us", "wall µs/pair (1e6 / pairs/s)"),
    ("pair_p50_us", "pair p50 µs"),
    ("pair_p99_us", "pair p99 µs"),
    ("client_cpu_us_per_pair", "client CPU µs/pair (user+sys)"),
    ("client_user_us_per_pair", "client user CPU µs/pair"),
    ("client_sys_us_per_pair", "client sys CPU µs/pair"),
    ("client_csw_per_pair", "client context switches/pair"),
    ("server_cpu_us_per_pair", "redis-server CPU µs/pair"),
    ("round_trips_per_acq", "client commands/pair"),
    ("server_cmds_per_acq", "server commands/pair"),
];
const UNCONTENDED_RATIOS: &[&str] = &[
    "pairs_per_s",
    "pair_p50_us",
    "pair_p99_us",
    "client_cpu_us_per_pair",
    "server_cpu_us_per_pair",
];
const CONTENDED: &[(&str, &str)] = &[
    ("acq_per_s", "acquisitions/s"),
    ("handover_p50_us", "handover p50 µs"),
    ("handover_p99_us", "handover p99 µs"),
    ("handover_max_us", "handover max µs"),
    ("handovers", "handovers (count)"),
    ("handovers_negative", "handovers < 0 µs (count)"),
    (
        "handover_before_unlock_returned",
        "next lock returned before unlock returned",
    ),
    ("fairness_min_over_max", "fairness min/max"),
    ("same_task_reacquire_share", "same-task re-acquire share"),
    ("wait_p50_us", "wait for lock p50 µs"),
    ("wait_p99_us", "wait for lock p99 µs"),
    ("wait_max_us", "wait for lock max µs"),
    ("waits_abandoned_at_deadline", "waits cut at deadline"),
    ("client_cpu_us_per_acq", "client CPU µs/acq"),
    ("server_cpu_us_per_acq", "redis-server CPU µs/acq"),
    ("round_trips_per_acq", "client commands/acq"),
    ("script_cmds_per_acq", "in-script commands/acq"),
    ("server_cmds_per_acq", "server commands/acq"),
];
const CONTENDED_RATIOS: &[&str] = &[
    "acq_per_s",
    "handover_p50_us",
    "handover_p99_us",
    "wait_p99_us",
    "client_cpu_us_per_acq",
];

const SECTIONS: &[Section] = &[
    Section {
        id: "s1",
        title: "1 uncontended: 1 task, 1 name, on a runtime worker",
        subjects: WITH_FLOOR,
        metrics: UNCONTENDED,
        pairs: VS_FLOOR,
        ratio_metrics: UNCONTENDED_RATIOS,
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s1p",
        title: "1p uncontended, the bench and redis-server pinned to one CPU",
        subjects: WITH_FLOOR,
        metrics: UNCONTENDED,
        pairs: VS_FLOOR,
        ratio_metrics: UNCONTENDED_RATIOS,
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s1m",
        title: "1m uncontended, the loop on the block_on thread (as before issue 12)",
        subjects: WITH_FLOOR,
        metrics: UNCONTENDED,
        pairs: VS_FLOOR,
        ratio_metrics: UNCONTENDED_RATIOS,
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s2",
        title: "2 parallel: 16 tasks, own names (floor: 16 threads and connections; floor, pipelined: 1 thread, 1 connection)",
        subjects: WITH_FLOORS,
        metrics: &[
            ("pairs_per_s", "pairs/s (total)"),
            ("client_cpu_us_per_pair", "client CPU µs/pair (user+sys)"),
            ("client_user_us_per_pair", "client user CPU µs/pair"),
            ("client_sys_us_per_pair", "client sys CPU µs/pair"),
            ("client_csw_per_pair", "client context switches/pair"),
            ("server_cpu_us_per_pair", "redis-server CPU µs/pair"),
            ("round_trips_per_acq", "client commands/pair"),
            ("server_cmds_per_acq", "server commands/pair"),
        ],
        pairs: &[
            ("ours", "floorp"),
            ("ceiling", "floorp"),
            ("ours", "floor"),
            ("ours", "ceiling"),
            ("ours", "rslock"),
            ("ours", "arl"),
        ],
        ratio_metrics: &[
            "pairs_per_s",
            "client_cpu_us_per_pair",
            "server_cpu_us_per_pair",
        ],
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s3",
        title: "3 contended: 8 tasks, 1 process, 1 name",
        subjects: LIBS,
        metrics: CONTENDED,
        pairs: VS,
        ratio_metrics: CONTENDED_RATIOS,
        pooled: true,
        sequential: false,
    },
    Section {
        id: "s3b",
        title: "3b contended, 1 ms pause outside the lock after each unlock (extra)",
        subjects: LIBS,
        metrics: CONTENDED,
        pairs: VS,
        ratio_metrics: CONTENDED_RATIOS,
        pooled: true,
        sequential: false,
    },
    Section {
        id: "s4",
        title: "4 contended: 4 processes x 2 tasks, 1 name",
        subjects: LIBS,
        metrics: CONTENDED,
        pairs: VS,
        ratio_metrics: &["acq_per_s", "handover_p50_us", "handover_p99_us", "wait_p99_us"],
        pooled: true,
        sequential: false,
    },
    Section {
        id: "sem",
        title: "sem semaphore: 4 permits, 16 tasks, 1 process, take 1 and give it back at once",
        subjects: &["ours", "ceiling"],
        metrics: &[
            ("acq_per_s", "acquisitions/s"),
            ("handover_p50_us", "handover p50 µs"),
            ("handover_p99_us", "handover p99 µs"),
            ("handover_max_us", "handover max µs"),
            ("handovers", "handovers (count)"),
            ("acquired_while_free", "acquired a free permit (count)"),
            ("wait_p50_us", "wait for permit p50 µs"),
            ("wait_p99_us", "wait for permit p99 µs"),
            ("waits_abandoned_at_deadline", "waits cut at deadline"),
            ("client_cpu_us_per_acq", "client CPU µs/acq"),
            ("server_cpu_us_per_acq", "redis-server CPU µs/acq"),
            ("round_trips_per_acq", "client commands/acq"),
            ("script_cmds_per_acq", "in-script commands/acq"),
            ("server_cmds_per_acq", "server commands/acq"),
        ],
        pairs: &[("ours", "ceiling")],
        ratio_metrics: &["acq_per_s", "handover_p50_us", "handover_p99_us"],
        pooled: false,
        sequential: false,
    },
    Section {
        id: "s5w",
        title: "5a scale: waiters on held names, 1 process",
        subjects: &["ours", "ceiling"],
        metrics: &[
            ("waiters", "waiters"),
            ("names", "names"),
            ("heap_live_bytes_per_waiter", "heap live bytes/waiter (all waiting)"),
            (
                "heap_peak_start_bytes_per_waiter",
                "heap peak bytes/waiter (until all waiting)",
            ),
            (
                "heap_peak_bytes_per_waiter",
                "heap peak bytes/waiter (until drained)",
            ),
            (
                "heap_after_drain_bytes_per_waiter",
                "heap still live after drain, bytes/waiter",
            ),
            ("bytes_per_waiter", "RSS bytes/waiter (all waiting)"),
            (
                "rss_after_drain_bytes_per_waiter",
                "RSS after drain, bytes/waiter",
            ),
            ("lock_future_bytes", "size of one lock() future, bytes"),
            ("subscribed_channels", "channels subscribed"),
            ("all_waiting_after_s", "s until all waiting"),
            ("drain_s", "s to drain after release"),
            ("completed", "completed"),
            ("errors", "errors"),
            ("hang", "hang (1 = yes)"),
        ],
        pairs: &[("ours", "ceiling")],
        ratio_metrics: &[
            "heap_live_bytes_per_waiter",
            "heap_peak_start_bytes_per_waiter",
            "heap_peak_bytes_per_waiter",
            "bytes_per_waiter",
        ],
        pooled: false,
        sequential: true,
    },
    Section {
        id: "s5r",
        title: "5b scale: held watchdog locks",
        subjects: &["ours"],
        metrics: &[
            ("locks", "held locks"),
            ("interval_ms", "renewal interval ms"),
            ("renew_calls_per_interval", "renewal script calls/interval"),
            ("expected_calls_per_interval", "ceil(locks / batch)"),
            ("runs_per_interval", "renewal runs per interval"),
            ("keys_alive", "lock keys alive after window"),
            ("lost", "guards lost"),
        ],
        pairs: &[],
        ratio_metrics: &[],
        pooled: false,
        sequential: true,
    },
    Section {
        id: "s6i",
        title: "6i stock 10 000, 2 processes, -2 per step",
        subjects: &["lock", "watch"],
        metrics: &[
            ("wall_s", "wall s"),
            ("correct", "final data right (1 = yes)"),
            ("aborted", "aborted transactions"),
            ("server_cmds_per_purchase", "server commands/purchase"),
            ("server_cpu_us_per_purchase", "redis-server CPU µs/purchase"),
        ],
        pairs: &[("watch", "lock")],
        ratio_metrics: &["wall_s", "server_cpu_us_per_purchase"],
        pooled: false,
        sequential: true,
    },
    Section {
        id: "s6ii",
        title: "6ii market 500 x 2000, 8 processes x 10 000 units",
        subjects: &["lock", "watch"],
        metrics: &[
            ("wall_s", "wall s"),
            ("correct", "final data right (1 = yes)"),
            ("aborted", "aborted transactions"),
            ("server_cmds_per_purchase", "server commands/purchase"),
            ("server_cpu_us_per_purchase", "redis-server CPU µs/purchase"),
            ("lock_waits_over_1s", "lock waits >= 1 s"),
            ("max_lock_wait_ms", "longest lock wait ms"),
        ],
        pairs: &[("watch", "lock")],
        ratio_metrics: &["wall_s", "server_cpu_us_per_purchase"],
        pooled: false,
        sequential: true,
    },
];

fn subject_label(s: &str) -> &str {
    match s {
        "ours" => "redisson-lock",
        "arl" => "async-redis-lock",
        "lock" => "per-item lock",
        "watch" => "WATCH/MULTI",
        "floorp" => "floor, pipelined",
        other => other,
    }
}

fn metric_label(section: &Section, metric: &str) -> String {
    section
        .metrics
        .iter()
        .find(|(m, _)| *m == metric)
        .map_or(metric.to_string(), |(_, l)| l.to_string())
}

pub struct Summary {
    pub table: String,
    pub targets_text: String,
    pub medians: serde_json::Value,
    pub ratios: serde_json::Value,
    pub targets: serde_json::Value,
}

/// A ratio A/B of one metric in one scenario, both ways.
#[derive(Clone, Copy)]
struct Ratio {
    a: f64,
    b: f64,
    of_medians: f64,
    median: f64,
    p25: f64,
    p75: f64,
    min: f64,
    max: f64,
    n: usize,
}

impl Ratio {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "a_median": json_num(self.a),
            "b_median": json_num(self.b),
            "ratio_of_medians": json_num(self.of_medians),
            "median_of_per_round_ratios": json_num(self.median),
            "p25": json_num(self.p25),
            "p75": json_num(self.p75),
            "min": json_num(self.min),
            "max": json_num(self.max),
            "rounds": self.n,
        })
    }

    /// "IQR 0.890–0.930, min–max 0.850–0.990, 20 rounds"
    fn text(&self, unit: &str) -> String {
        format!(
            "IQR {}–{}, min–max {}–{}, {} {unit}",
            fmt_ratio(self.p25),
            fmt_ratio(self.p75),
            fmt_ratio(self.min),
            fmt_ratio(self.max),
            self.n
        )
    }
}

struct Data<'a> {
    records: &'a [Record],
}

impl Data<'_> {
    fn values(&self, scenario: &str, subject: &str, metric: &str) -> Vec<f64> {
        self.records
            .iter()
            .filter(|r| r.scenario == scenario && r.subject == subject)
            .map(|r| r.metrics.get(metric).copied().unwrap_or(f64::NAN))
            .collect()
    }

    fn median(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        median(&self.values(scenario, subject, metric))
    }

    fn min(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        self.values(scenario, subject, metric)
            .into_iter()
            .fold(f64::NAN, f64::min)
    }

    fn max(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        self.values(scenario, subject, metric)
            .into_iter()
            .fold(f64::NAN, f64::max)
    }

    fn rounds(&self, scenario: &str) -> usize {
        let mut rounds: Vec<usize> = self
            .records
            .iter()
            .filter(|r| r.scenario == scenario)
            .map(|r| r.round)
            .collect();
        rounds.sort_unstable();
        rounds.dedup();
        rounds.len()
    }

    /// A/B: the ratio of the medians, and the per-round ratios (A and B of
    /// the same round) with their median and spread. A round in which
    /// either value is missing or B is 0 gives no ratio.
    fn ratio(&self, scenario: &str, a: &str, b: &str, metric: &str) -> Ratio {
        let get = |subject: &str| -> BTreeMap<usize, f64> {
            self.records
                .iter()
                .filter(|r| r.scenario == scenario && r.subject == subject)
                .filter_map(|r| r.metrics.get(metric).map(|v| (r.round, *v)))
                .collect()
        };
        let (va, vb) = (get(a), get(b));
        let per_round: Vec<f64> = va
            .iter()
            .filter_map(|(round, x)| match vb.get(round) {
                Some(y) if *y != 0.0 && !y.is_nan() && !x.is_nan() => Some(x / y),
                _ => None,
            })
            .collect();
        let (p25, p75, min, max) = spread(&per_round);
        let (ma, mb) = (
            median(&va.values().copied().collect::<Vec<_>>()),
            median(&vb.values().copied().collect::<Vec<_>>()),
        );
        Ratio {
            a: ma,
            b: mb,
            of_medians: ma / mb,
            median: median(&per_round),
            p25,
            p75,
            min,
            max,
            n: per_round.len(),
        }
    }
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn fmt_ratio(x: f64) -> String {
    if x.is_nan() || x.is_infinite() {
        "-".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// A markdown table; the first `left` columns are left-aligned, the rest right-aligned.
fn markdown(rows: &[Vec<String>], left: usize, out: &mut String) {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
                .max(3)
        })
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = widths[c] - cell.chars().count();
                if c < left {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            let seps: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, w)| {
                    if c < left {
                        "-".repeat(*w)
                    } else {
                        format!("{}:", "-".repeat(w - 1))
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} |", seps.join(" | "));
        }
    }
}

/// The contended scenarios' samples of all rounds together, per
/// (scenario, subject key).
#[derive(Default)]
pub struct Pooled {
    pub handover_us: BTreeMap<(String, String), Vec<f64>>,
    /// Acquisitions per task, summed over the rounds.
    pub per_task: BTreeMap<(String, String), Vec<u64>>,
}

impl Pooled {
    pub fn add(&mut self, scenario: &str, subject: &str, handover_us: Vec<f64>, per_task: &[u64]) {
        let key = (scenario.to_string(), subject.to_string());
        self.handover_us
            .entry(key.clone())
            .or_default()
            .extend(handover_us);
        let sums = self.per_task.entry(key).or_default();
        sums.resize(sums.len().max(per_task.len()), 0);
        for (sum, n) in sums.iter_mut().zip(per_task) {
            *sum += n;
        }
    }

    fn handovers(&self, scenario: &str, subject: &str) -> Option<&Vec<f64>> {
        self.handover_us
            .get(&(scenario.to_string(), subject.to_string()))
    }

    /// Fewest acquisitions of a task ÷ most, over all rounds.
    fn fairness(&self, scenario: &str, subject: &str) -> f64 {
        match self
            .per_task
            .get(&(scenario.to_string(), subject.to_string()))
        {
            Some(v) if !v.is_empty() => {
                let min = *v.iter().min().unwrap_or(&0) as f64;
                let max = *v.iter().max().unwrap_or(&0) as f64;
                if max > 0.0 {
                    min / max
                } else {
                    0.0
                }
            }
            _ => f64::NAN,
        }
    }
}

/// `notes`: how each scenario was measured (one line each, by id).
pub fn summarize(records: &[Record], notes: &BTreeMap<String, String>, pooled: &Pooled) -> Summary {
    let data = Data { records };
    let mut table = String::new();
    let mut medians = serde_json::Map::new();
    let mut ratios = serde_json::Map::new();
    let _ = writeln!(
        table,
        "Values: median over rounds (or runs) of each subject's per-round value.\n\
         Ratios A/B: 'of medians' = A's median / B's median (matches the values);\n\
         'per round' (or run) = median of A/B taken within each round, with IQR and min–max."
    );
    for s in SECTIONS {
        if !records.iter().any(|r| r.scenario == s.id) {
            continue;
        }
        let subjects: Vec<&str> = s
            .subjects
            .iter()
            .copied()
            .filter(|x| {
                records
                    .iter()
                    .any(|r| r.scenario == s.id && r.subject == *x)
            })
            .collect();
        let _ = writeln!(table, "\n## {}", s.title);
        if let Some(note) = notes.get(s.id) {
            let _ = writeln!(table, "{note}");
        }
        let _ = writeln!(table);
        let mut header = vec![format!("metric (median of {})", data.rounds(s.id))];
        header.extend(subjects.iter().map(|x| subject_label(x).to_string()));
        let mut rows = vec![header];
        let mut sec_medians = serde_json::Map::new();
        for (metric, label) in s.metrics {
            let mut row = vec![label.to_string()];
            let mut metric_medians = serde_json::Map::new();
            for subject in &subjects {
                let m = data.median(s.id, subject, metric);
                row.push(fmt(m));
                metric_medians.insert(subject.to_string(), json_num(m));
            }
            // A metric this scenario does not measure (e.g. client CPU across processes).
            if metric_medians.values().all(serde_json::Value::is_null) {
                continue;
            }
            sec_medians.insert(metric.to_string(), metric_medians.into());
            rows.push(row);
        }
        if s.pooled {
            for (q, label) in [
                (0.50, "handover p50 µs, all rounds pooled"),
                (0.99, "handover p99 µs, all rounds pooled"),
                (1.0, "handover max µs, all rounds pooled"),
            ] {
                let mut row = vec![label.to_string()];
                for subject in &subjects {
                    let v = pooled
                        .handovers(s.id, subject)
                        .map_or(f64::NAN, |v| quantile(v, q));
                    row.push(fmt(v));
                }
                rows.push(row);
            }
            let mut row = vec!["handovers, all rounds (count)".to_string()];
            for subject in &subjects {
                let n = pooled.handovers(s.id, subject).map_or(0, Vec::len);
                row.push(n.to_string());
            }
            rows.push(row);
            let mut row = vec!["fairness min/max, all rounds pooled".to_string()];
            for subject in &subjects {
                row.push(fmt(pooled.fairness(s.id, subject)));
            }
            rows.push(row);
        }
        markdown(&rows, 1, &mut table);
        medians.insert(s.id.into(), sec_medians.into());

        let pairs: Vec<(&str, &str)> = s
            .pairs
            .iter()
            .copied()
            .filter(|(a, b)| subjects.contains(a) && subjects.contains(b))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let _ = writeln!(table);
        let per = if s.sequential {
            "per run: median"
        } else {
            "per round: median"
        };
        let mut rows = vec![[
            "A/B",
            "metric",
            "A median",
            "B median",
            "ratio of medians",
            per,
            "IQR",
            "min–max",
            "n",
        ]
        .map(String::from)
        .to_vec()];
        let mut sec_ratios = serde_json::Map::new();
        for (a, b) in pairs {
            let mut pair_json = serde_json::Map::new();
            for metric in s.ratio_metrics {
                let r = data.ratio(s.id, a, b, metric);
                rows.push(vec![
                    format!("{a}/{b}"),
                    metric_label(s, metric),
                    fmt(r.a),
                    fmt(r.b),
                    fmt_ratio(r.of_medians),
                    fmt_ratio(r.median),
                    format!("{}–{}", fmt_ratio(r.p25), fmt_ratio(r.p75)),
                    format!("{}–{}", fmt_ratio(r.min), fmt_ratio(r.max)),
                    r.n.to_string(),
                ]);
                pair_json.insert(metric.to_string(), r.json());
            }
            sec_ratios.insert(format!("{a}/{b}"), pair_json.into());
        }
        markdown(&rows, 2, &mut table);
        ratios.insert(s.id.into(), sec_ratios.into());
    }

    // ------------------------------------------------------------ targets
    let mut targets: Vec<(String, f64, String, bool, String)> = Vec::new();
    let mut t = |name: String, value: f64, goal: &str, met: bool, detail: String| {
        targets.push((name, value, goal.to_string(), met, detail));
    };
    let per_round = |r: &Ratio| format!("median of per-round ratios; {}", r.text("rounds"));

    // Issue 12, client side: measured as the client is today. Against the
    // floor on one CPU (1p): unpinned, where the scheduler puts the floor's
    // thread decides its speed (see BENCHMARKS.md).
    let r = data.ratio("s1p", "ours", "floor", "pairs_per_s");
    let unpinned = data.ratio("s1", "ours", "floor", "pairs_per_s");
    t(
        "[12] 1p uncontended (one CPU) pairs/s, ours / floor".into(),
        r.median,
        ">= 0.85",
        r.median >= 0.85,
        format!(
            "{}; unpinned (1): {}",
            per_round(&r),
            fmt_ratio(unpinned.median)
        ),
    );
    let r = data.ratio("s1", "ours", "ceiling", "pairs_per_s");
    let pinned = data.ratio("s1p", "ours", "ceiling", "pairs_per_s");
    t(
        "[12] 1 uncontended pairs/s, ours / ceiling".into(),
        r.median,
        ">= 1.0",
        r.median >= 1.0,
        format!(
            "{}; one CPU (1p): {}",
            per_round(&r),
            fmt_ratio(pinned.median)
        ),
    );
    let r = data.ratio("s2", "ours", "ceiling", "pairs_per_s");
    t(
        "[12] 2 parallel pairs/s, ours / ceiling".into(),
        r.median,
        ">= 0.95",
        r.median >= 0.95,
        per_round(&r),
    );
    for (metric, what) in [
        ("heap_live_bytes_per_waiter", "live heap"),
        (
            "heap_peak_start_bytes_per_waiter",
            "peak heap while starting",
        ),
    ] {
        let r = data.ratio("s5w", "ours", "ceiling", metric);
        t(
            format!("[12] 5a {what} per waiter, ours / ceiling"),
            r.median,
            "<= 1.0",
            r.median <= 1.0,
            format!(
                "median of per-run ratios, {} runs ({} vs {} bytes, medians)",
                r.n,
                fmt(r.a),
                fmt(r.b)
            ),
        );
    }
    // Issue 4.
    for (peer, label) in [("rslock", "rslock"), ("arl", "async-redis-lock")] {
        let r = data.ratio("s1", "ours", peer, "pairs_per_s");
        t(
            format!("[4] 1 uncontended pairs/s, ours / {label}"),
            r.median,
            ">= 1",
            r.median >= 1.0,
            per_round(&r),
        );
    }
    for (s, label) in [
        ("s3", "3 in-process"),
        ("s4", "4 cross-process"),
        ("s3b", "3b (extra, 1 ms pause)"),
    ] {
        let p99 = |subject: &str| {
            pooled
                .handovers(s, subject)
                .map_or(f64::NAN, |v| quantile(v, 0.99))
        };
        let n = |subject: &str| pooled.handovers(s, subject).map_or(0, Vec::len);
        let ours = p99("ours");
        t(
            format!("[4] {label}: ours handover p99 µs, all rounds pooled"),
            ours,
            "<= 1000",
            ours <= 1000.0,
            format!("{} handovers", n("ours")),
        );
        for (peer, plabel) in [("rslock", "rslock"), ("arl", "async-redis-lock")] {
            let r = p99(peer) / ours;
            t(
                format!("[4] {label}: handover p99 {plabel} / ours, all rounds pooled"),
                r,
                ">= 10",
                r >= 10.0,
                format!("{} vs {} handovers", n(peer), n("ours")),
            );
        }
        let f = pooled.fairness(s, "ours");
        t(
            format!("[4] {label}: ours fairness min/max, all rounds pooled"),
            f,
            ">= 0.8",
            f >= 0.8,
            format!(
                "median of the per-round values {}",
                fmt(data.median(s, "ours", "fairness_min_over_max"))
            ),
        );
        let ours = data.median(s, "ours", "server_cmds_per_acq");
        let ceiling = data.median(s, "ceiling", "server_cmds_per_acq");
        t(
            format!("[4] {label}: server commands/acq, ours - ceiling"),
            ours - ceiling,
            "<= 0",
            ours <= ceiling,
            "difference of the medians".into(),
        );
    }
    for subject in ["ours", "ceiling"] {
        let label = subject_label(subject);
        if data.values("s5w", subject, "waiters").is_empty() {
            t(
                format!("[4] 5a {label}: every waiter served"),
                f64::NAN,
                "= 1",
                false,
                String::new(),
            );
            continue;
        }
        let ok = data.min("s5w", subject, "completed") == data.max("s5w", subject, "waiters")
            && data.max("s5w", subject, "errors") == 0.0
            && data.max("s5w", subject, "hang") == 0.0;
        t(
            format!("[4] 5a {label}: every waiter served, no error, no hang (all runs)"),
            if ok { 1.0 } else { 0.0 },
            "= 1",
            ok,
            String::new(),
        );
    }
    let calls = data.median("s5r", "ours", "renew_calls_per_interval");
    let expected = data.median("s5r", "ours", "expected_calls_per_interval");
    t(
        format!("[4] 5b renewal script calls per interval (expected {expected:.0})"),
        calls,
        "within 10 % of ceil(locks / batch)",
        (calls - expected).abs() <= 0.1 * expected,
        String::new(),
    );
    let r = data.ratio("s6ii", "watch", "lock", "wall_s");
    t(
        "[4] 6ii market wall time, WATCH/MULTI / per-item lock".into(),
        r.median,
        ">= 3",
        r.median >= 3.0,
        format!("median of per-run ratios; {}", r.text("runs")),
    );
    if !data.values("s6ii", "lock", "lock_waits_over_1s").is_empty() {
        let stalls: f64 = data
            .values("s6ii", "lock", "lock_waits_over_1s")
            .iter()
            .sum();
        let worst = data.max("s6ii", "lock", "max_lock_wait_ms");
        t(
            "[4] 6ii (extra) lock waits >= 1 s, all runs together".into(),
            stalls,
            "= 0",
            stalls == 0.0,
            format!("longest wait {worst:.0} ms"),
        );
    }
    let ran_s6 = records.iter().any(|r| r.scenario.starts_with("s6"));
    // Only the scenario/method pairs that ran (a partial run leaves NaN).
    let right = ["s6i", "s6ii"].iter().all(|s| {
        ["lock", "watch"].iter().all(|m| {
            let correct = data.min(s, m, "correct");
            correct.is_nan() || correct == 1.0
        })
    });
    t(
        "[4] 6 final data exactly right (every run, both methods)".into(),
        if !ran_s6 {
            f64::NAN
        } else if right {
            1.0
        } else {
            0.0
        },
        "= 1",
        right,
        String::new(),
    );

    let mut targets_text =
        String::from("\n## Targets ([12] = issue 12, client side; [4] = issue 4)\n");
    let mut targets_json = Vec::new();
    for (name, value, goal, met, detail) in &targets {
        let verdict = if value.is_nan() {
            "N/A"
        } else if *met {
            "MET"
        } else {
            "MISSED"
        };
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!("; {detail}")
        };
        let _ = writeln!(
            targets_text,
            "- [{verdict}] {name}: {} (target {goal}{detail})",
            fmt_ratio(*value)
        );
        targets_json.push(serde_json::json!({
            "target": name, "value": json_num(*value), "goal": goal, "met": met, "detail": detail,
        }));
    }
    Summary {
        table,
        targets_text,
        medians: medians.into(),
        ratios: ratios.into(),
        targets: targets_json.into(),
    }
}

fn json_num(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}
