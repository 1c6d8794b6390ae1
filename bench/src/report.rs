//! Medians across runs, ratios within a run, the table and the targets.

use std::fmt::Write;

use serde::Serialize;

use crate::scenarios::Metrics;
use crate::util::median;

/// One measurement: a scenario, a subject (library or method), a run.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub scenario: String,
    pub subject: String,
    pub run: usize,
    pub metrics: Metrics,
}

impl Record {
    pub fn new(scenario: &str, subject: &str, run: usize, metrics: Metrics) -> Record {
        Record {
            scenario: scenario.into(),
            subject: subject.into(),
            run,
            metrics,
        }
    }
}

struct Section {
    id: &'static str,
    title: &'static str,
    subjects: &'static [&'static str],
    metrics: &'static [(&'static str, &'static str)],
    /// (numerator, denominator) subjects; each ratio is taken within one run,
    /// then the median across runs is shown.
    ratios: &'static [(&'static str, &'static str)],
}

const LIBS: &[&str] = &["ours", "ceiling", "rslock", "arl"];
const VS: &[(&str, &str)] = &[("ours", "ceiling"), ("ours", "rslock"), ("ours", "arl")];
const CONTENDED: &[(&str, &str)] = &[
    ("acq_per_s", "acquisitions/s"),
    ("handover_p50_us", "handover p50 µs"),
    ("handover_p99_us", "handover p99 µs"),
    ("handover_max_us", "handover max µs"),
    ("handovers", "handovers (count)"),
    ("fairness_min_over_max", "fairness min/max"),
    ("same_task_reacquire_share", "same-task re-acquire share"),
    ("wait_p50_us", "wait for lock p50 µs"),
    ("wait_p99_us", "wait for lock p99 µs"),
    ("wait_max_us", "wait for lock max µs"),
    ("waits_abandoned_at_deadline", "waits cut at deadline"),
    ("round_trips_per_acq", "client round trips/acq"),
    ("script_cmds_per_acq", "in-script commands/acq"),
    ("server_cmds_per_acq", "server commands/acq"),
];

const SECTIONS: &[Section] = &[
    Section {
        id: "s1",
        title: "1 uncontended: 1 task, 1 name",
        subjects: LIBS,
        metrics: &[
            ("pairs_per_s", "lock+unlock pairs/s"),
            ("pair_p50_us", "pair p50 µs"),
            ("pair_p99_us", "pair p99 µs"),
            ("round_trips_per_acq", "client round trips/pair"),
            ("server_cmds_per_acq", "server commands/pair"),
        ],
        ratios: VS,
    },
    Section {
        id: "s2",
        title: "2 parallel: 16 tasks, own names",
        subjects: LIBS,
        metrics: &[
            ("pairs_per_s", "pairs/s (total)"),
            ("server_cpu_us_per_pair", "redis-server CPU µs/pair"),
            ("round_trips_per_acq", "client round trips/pair"),
            ("server_cmds_per_acq", "server commands/pair"),
        ],
        ratios: VS,
    },
    Section {
        id: "s3",
        title: "3 contended: 8 tasks, 1 process, 1 name",
        subjects: LIBS,
        metrics: CONTENDED,
        ratios: VS,
    },
    Section {
        id: "s3b",
        title: "3b contended, 1 ms pause outside the lock after each unlock (extra)",
        subjects: LIBS,
        metrics: CONTENDED,
        ratios: VS,
    },
    Section {
        id: "s4",
        title: "4 contended: 4 processes x 2 tasks, 1 name",
        subjects: LIBS,
        metrics: CONTENDED,
        ratios: VS,
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
            ("round_trips_per_acq", "client round trips/acq"),
            ("script_cmds_per_acq", "in-script commands/acq"),
            ("server_cmds_per_acq", "server commands/acq"),
        ],
        ratios: &[("ours", "ceiling")],
    },
    Section {
        id: "s5w",
        title: "5a scale: waiters on held names, 1 process",
        subjects: &["ours", "ceiling"],
        metrics: &[
            ("waiters", "waiters"),
            ("names", "names"),
            ("bytes_per_waiter", "RSS bytes/waiter"),
            ("lock_future_bytes", "size of one lock() future, bytes"),
            ("subscribed_channels", "channels subscribed"),
            ("all_waiting_after_s", "s until all waiting"),
            ("drain_s", "s to drain after release"),
            ("completed", "completed"),
            ("errors", "errors"),
            ("hang", "hang (1 = yes)"),
        ],
        ratios: &[("ours", "ceiling")],
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
        ratios: &[],
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
        ratios: &[("watch", "lock")],
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
        ratios: &[("watch", "lock")],
    },
];

fn subject_label(s: &str) -> &str {
    match s {
        "ours" => "redisson-lock",
        "arl" => "async-redis-lock",
        "lock" => "per-item lock",
        "watch" => "WATCH/MULTI",
        other => other,
    }
}

pub struct Summary {
    pub table: String,
    pub targets_text: String,
    pub medians: serde_json::Value,
    pub ratios: serde_json::Value,
    pub targets: serde_json::Value,
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

    /// Median over runs of (a / b) within each run.
    fn ratio(&self, scenario: &str, a: &str, b: &str, metric: &str) -> f64 {
        let runs: Vec<usize> = self
            .records
            .iter()
            .filter(|r| r.scenario == scenario)
            .map(|r| r.run)
            .collect();
        let mut runs = runs;
        runs.sort_unstable();
        runs.dedup();
        let get = |subject: &str, run: usize| {
            self.records
                .iter()
                .find(|r| r.scenario == scenario && r.subject == subject && r.run == run)
                .and_then(|r| r.metrics.get(metric).copied())
        };
        let per_run: Vec<f64> = runs
            .iter()
            .filter_map(|&run| match (get(a, run), get(b, run)) {
                (Some(x), Some(y)) if y != 0.0 => Some(x / y),
                _ => None,
            })
            .collect();
        median(&per_run)
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

pub fn summarize(records: &[Record]) -> Summary {
    let data = Data { records };
    let runs = records.iter().map(|r| r.run).max().map_or(0, |r| r + 1);
    let mut table = String::new();
    let mut medians = serde_json::Map::new();
    let mut ratios = serde_json::Map::new();
    let _ = writeln!(
        table,
        "Medians of {runs} run(s); ratios are taken within each run, then the median is shown."
    );
    for s in SECTIONS {
        if !records.iter().any(|r| r.scenario == s.id) {
            continue;
        }
        let _ = writeln!(table, "\n## {}", s.title);
        let mut header = vec!["metric".to_string()];
        header.extend(s.subjects.iter().map(|x| subject_label(x).to_string()));
        header.extend(s.ratios.iter().map(|(a, b)| format!("{a}/{b}")));
        let mut rows = vec![header];
        let mut sec_medians = serde_json::Map::new();
        let mut sec_ratios = serde_json::Map::new();
        for (metric, label) in s.metrics {
            let mut row = vec![label.to_string()];
            let mut metric_medians = serde_json::Map::new();
            for subject in s.subjects {
                let m = data.median(s.id, subject, metric);
                row.push(fmt(m));
                metric_medians.insert(subject.to_string(), json_num(m));
            }
            let mut metric_ratios = serde_json::Map::new();
            for (a, b) in s.ratios {
                let r = data.ratio(s.id, a, b, metric);
                row.push(fmt(r));
                metric_ratios.insert(format!("{a}/{b}"), json_num(r));
            }
            sec_medians.insert(metric.to_string(), metric_medians.into());
            sec_ratios.insert(metric.to_string(), metric_ratios.into());
            rows.push(row);
        }
        medians.insert(s.id.into(), sec_medians.into());
        ratios.insert(s.id.into(), sec_ratios.into());
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    let pad = widths[c] - cell.chars().count();
                    if c == 0 {
                        format!("{cell}{}", " ".repeat(pad))
                    } else {
                        format!("{}{cell}", " ".repeat(pad))
                    }
                })
                .collect();
            let _ = writeln!(table, "| {} |", cells.join(" | "));
            if i == 0 {
                let seps: Vec<String> = widths
                    .iter()
                    .enumerate()
                    .map(|(c, w)| {
                        if c == 0 {
                            "-".repeat(*w)
                        } else {
                            format!("{}:", "-".repeat(w - 1))
                        }
                    })
                    .collect();
                let _ = writeln!(table, "| {} |", seps.join(" | "));
            }
        }
    }

    // Targets of issue 4.
    let mut targets = Vec::new();
    let mut t = |name: String, value: f64, goal: &str, met: bool| {
        targets.push((name, value, goal.to_string(), met));
    };
    let r = data.ratio("s1", "ours", "ceiling", "pairs_per_s");
    t(
        "1 uncontended pairs/s, ours / ceiling".into(),
        r,
        ">= 0.95",
        r >= 0.95,
    );
    for (peer, label) in [("rslock", "rslock"), ("arl", "async-redis-lock")] {
        let r = data.ratio("s1", "ours", peer, "pairs_per_s");
        t(
            format!("1 uncontended pairs/s, ours / {label}"),
            r,
            ">= 1",
            r >= 1.0,
        );
    }
    let r = data.ratio("s2", "ours", "ceiling", "pairs_per_s");
    t(
        "2 parallel pairs/s, ours / ceiling".into(),
        r,
        ">= 0.90",
        r >= 0.90,
    );
    for (s, label) in [
        ("s3", "3 in-process"),
        ("s4", "4 cross-process"),
        ("s3b", "3b (extra, 1 ms pause)"),
    ] {
        let p99 = data.median(s, "ours", "handover_p99_us");
        t(
            format!("{label}: ours handover p99 (µs)"),
            p99,
            "<= 1000",
            p99 <= 1000.0,
        );
        for (peer, plabel) in [("rslock", "rslock"), ("arl", "async-redis-lock")] {
            let r = data.ratio(s, peer, "ours", "handover_p99_us");
            t(
                format!("{label}: handover p99 {plabel} / ours"),
                r,
                ">= 10",
                r >= 10.0,
            );
        }
        let f = data.median(s, "ours", "fairness_min_over_max");
        t(
            format!("{label}: ours fairness min/max"),
            f,
            ">= 0.8",
            f >= 0.8,
        );
        let ours = data.median(s, "ours", "server_cmds_per_acq");
        let ceiling = data.median(s, "ceiling", "server_cmds_per_acq");
        t(
            format!("{label}: server commands/acq, ours - ceiling"),
            ours - ceiling,
            "<= 0",
            ours <= ceiling,
        );
    }
    for subject in ["ours", "ceiling"] {
        if data.values("s5w", subject, "waiters").is_empty() {
            t(
                format!("5a {}: every waiter served", subject_label(subject)),
                f64::NAN,
                "= 1",
                false,
            );
            continue;
        }
        let ok = data.min("s5w", subject, "completed") == data.max("s5w", subject, "waiters")
            && data.max("s5w", subject, "errors") == 0.0
            && data.max("s5w", subject, "hang") == 0.0;
        let label = subject_label(subject);
        t(
            format!("5a {label}: every waiter served, no error, no hang (all runs)"),
            if ok { 1.0 } else { 0.0 },
            "= 1",
            ok,
        );
    }
    let calls = data.median("s5r", "ours", "renew_calls_per_interval");
    let expected = data.median("s5r", "ours", "expected_calls_per_interval");
    t(
        format!("5b renewal script calls per interval (expected {expected:.0})"),
        calls,
        "within 10 % of ceil(locks / batch)",
        (calls - expected).abs() <= 0.1 * expected,
    );
    let r = data.ratio("s6ii", "watch", "lock", "wall_s");
    t(
        "6ii market wall time, WATCH/MULTI / per-item lock".into(),
        r,
        ">= 3",
        r >= 3.0,
    );
    if !data.values("s6ii", "lock", "lock_waits_over_1s").is_empty() {
        let stalls: f64 = data
            .values("s6ii", "lock", "lock_waits_over_1s")
            .iter()
            .sum();
        let worst = data.max("s6ii", "lock", "max_lock_wait_ms");
        t(
            format!(
                "6ii (extra) lock waits >= 1 s, all runs together (longest wait {worst:.0} ms)"
            ),
            stalls,
            "= 0",
            stalls == 0.0,
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
        "6 final data exactly right (every run, both methods)".into(),
        if !ran_s6 {
            f64::NAN
        } else if right {
            1.0
        } else {
            0.0
        },
        "= 1",
        right,
    );

    let mut targets_text = String::from("\n## Targets (issue 4)\n");
    let mut targets_json = Vec::new();
    for (name, value, goal, met) in &targets {
        let verdict = if value.is_nan() {
            "NOT RUN"
        } else if *met {
            "MET"
        } else {
            "MISSED"
        };
        let _ = writeln!(
            targets_text,
            "- [{verdict}] {name}: {} (target {goal})",
            fmt(*value)
        );
        targets_json.push(serde_json::json!({ "target": name, "value": json_num(*value), "goal": goal, "met": met }));
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
