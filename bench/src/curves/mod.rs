//! Cost curves (issue 30 §4): how each cost grows with the work, ours beside
//! Java where Java can run. A curve is a list of points (the work's size,
//! `x`); at every point each subject runs `runs` times, the subjects
//! alternating (ABBA) run by run, before the next point. Every run's metrics
//! are kept (`samples`, in `latest.json`); the tables give the median and
//! min–max per point, and ours/Java as the median of the per-run ratios
//! (run r of ours ÷ run r of Java, measured one after the other). The
//! drivers are in `drivers.rs`; the plots in `plot.rs` (`curve`).

mod drivers;

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::plot;
use crate::util::{median, spread, Metrics};

pub use drivers::run;

/// (metric key, label).
pub type Metric = (&'static str, &'static str);

/// One curve: its points' samples and how to show them.
#[derive(Serialize)]
pub struct Curve {
    /// Short id: `--only` and the plot's file name (`curve_<id>.svg`).
    pub id: &'static str,
    pub title: String,
    pub x_label: &'static str,
    /// How it was measured.
    pub note: String,
    /// The table's columns (and the plot's panels: `plotted`).
    #[serde(skip)]
    pub metrics: &'static [Metric],
    #[serde(skip)]
    pub plotted: &'static [&'static str],
    /// The metrics of the ours/Java lines.
    #[serde(skip)]
    pub ratio_metrics: &'static [&'static str],
    /// (x, subject, run, metrics): every run of every point.
    pub samples: Vec<(f64, String, usize, Metrics)>,
}

impl Curve {
    pub fn new(
        id: &'static str,
        title: String,
        x_label: &'static str,
        metrics: &'static [Metric],
        plotted: &'static [&'static str],
        ratio_metrics: &'static [&'static str],
    ) -> Curve {
        Curve {
            id,
            title,
            x_label,
            note: String::new(),
            metrics,
            plotted,
            ratio_metrics,
            samples: Vec::new(),
        }
    }

    pub fn add(&mut self, x: f64, subject: &str, run: usize, m: Metrics) {
        self.samples.push((x, subject.to_string(), run, m));
    }

    fn xs(&self) -> Vec<f64> {
        let mut xs: Vec<f64> = self.samples.iter().map(|s| s.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs
    }

    fn subjects(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.samples {
            if !out.contains(&s.1) {
                out.push(s.1.clone());
            }
        }
        out
    }

    /// Every run's value of `metric` for `subject` at `x`, by run.
    fn values(&self, x: f64, subject: &str, metric: &str) -> Vec<(usize, f64)> {
        self.samples
            .iter()
            .filter(|s| s.0 == x && s.1 == subject)
            .filter_map(|s| s.3.get(metric).map(|v| (s.2, *v)))
            .filter(|(_, v)| !v.is_nan())
            .collect()
    }

    /// Median and min–max of `metric` for `subject` at `x`.
    fn stat(&self, x: f64, subject: &str, metric: &str) -> Option<(f64, f64, f64)> {
        let v: Vec<f64> = self
            .values(x, subject, metric)
            .into_iter()
            .map(|p| p.1)
            .collect();
        if v.is_empty() {
            return None;
        }
        let (min, _, _, max) = spread(&v);
        Some((median(&v), min, max))
    }

    /// The text table: per point and subject, each metric's median
    /// [min–max]; then ours/Java per point.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "Curve {}: {}", self.id, self.title);
        if !self.note.is_empty() {
            let _ = writeln!(t, "  {}", self.note);
        }
        let mut header = format!("  {:>8} {:<8}", self.x_label_short(), "subject");
        for (_, label) in self.metrics {
            let _ = write!(header, " | {label}");
        }
        let _ = writeln!(t, "{header}");
        let subjects = self.subjects();
        for x in self.xs() {
            for subject in &subjects {
                if !self.samples.iter().any(|s| s.0 == x && &s.1 == subject) {
                    continue;
                }
                let mut row = format!("  {:>8} {:<8}", x, subject_label(subject));
                for (key, _) in self.metrics {
                    let cell = match self.stat(x, subject, key) {
                        Some((m, lo, hi)) if lo != hi => {
                            format!("{} [{}–{}]", num(m), num(lo), num(hi))
                        }
                        Some((m, _, _)) => num(m),
                        None => "-".into(),
                    };
                    let _ = write!(row, " | {cell}");
                }
                let _ = writeln!(t, "{row}");
            }
        }
        if subjects.iter().any(|s| s == "ours") && subjects.iter().any(|s| s == "java") {
            let _ = writeln!(
                t,
                "  ours/Java, median of per-run ratios [min–max] (n runs):"
            );
            for x in self.xs() {
                let mut row = format!("  {:>8}", x);
                for key in self.ratio_metrics {
                    let ours = self.values(x, "ours", key);
                    let java = self.values(x, "java", key);
                    let ratios: Vec<f64> = ours
                        .iter()
                        .filter_map(|(r, a)| {
                            java.iter().find(|(r2, _)| r2 == r).map(|(_, b)| a / b)
                        })
                        .filter(|v| v.is_finite())
                        .collect();
                    if ratios.is_empty() {
                        continue;
                    }
                    let (lo, _, _, hi) = spread(&ratios);
                    let label = self
                        .metrics
                        .iter()
                        .find(|(k, _)| k == key)
                        .map_or(*key, |(_, l)| l);
                    let _ = write!(
                        row,
                        " | {label} {:.3} [{:.3}–{:.3}] ({})",
                        median(&ratios),
                        lo,
                        hi,
                        ratios.len()
                    );
                }
                let _ = writeln!(t, "{row}");
            }
        }
        t
    }

    fn x_label_short(&self) -> &'static str {
        self.x_label.split(' ').next().unwrap_or(self.x_label)
    }

    /// The plot: one panel per plotted metric, one line per subject
    /// (medians, min–max as bars), the x axis logarithmic.
    pub fn plot(&self, dir: &Path) -> Result<std::path::PathBuf> {
        let path = dir.join(format!("curve_{}.svg", self.id));
        let subjects = self.subjects();
        let panels: Vec<plot::CurvePanel> = self
            .plotted
            .iter()
            .map(|key| {
                let label = self
                    .metrics
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or(*key, |(_, l)| l);
                let lines = subjects
                    .iter()
                    .map(|s| {
                        let points = self
                            .xs()
                            .into_iter()
                            .filter_map(|x| {
                                let (m, lo, hi) = self.stat(x, s, key)?;
                                m.is_finite().then_some((x, m, lo, hi))
                            })
                            .collect();
                        (subject_label(s).to_string(), points)
                    })
                    .collect();
                (label.to_string(), lines)
            })
            .collect();
        plot::curve(&path, &self.title, self.x_label, &panels)?;
        Ok(path)
    }
}

/// The cluster curve (`cc`) from scenario 7's interleaved rounds: scenario
/// 2's 16 tasks on a one-master and a three-master cluster, the single
/// server (not in cluster mode) measured in the same rounds as the baseline.
pub fn cluster(rounds: Vec<(&'static str, usize, f64)>) -> Curve {
    let mut c = Curve::new(
        "cc",
        "Redis Cluster, scenario 2 (16 tasks, own names), ours".into(),
        "masters",
        &[("pairs_per_s", "pairs/s")],
        &["pairs_per_s"],
        &[],
    );
    c.note = format!(
        "Scenario 7's rounds ({} per subject, interleaved, order rotated): a cluster of 1 master \
         (every slot on one redis-server) and of 3 masters + 3 replicas, and the single server \
         (\"single\", at x = 1) in the same rounds. All 7 redis-servers, the bench and its tasks \
         share this machine's {} cores: a cluster here measures the overhead of cluster mode \
         and of routing, never the scaling separate hosts would give. Java is not run here \
         (RedissonBench.java connects to one server).",
        rounds.iter().filter(|r| r.0 == "single").count(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for (subject, round, pairs) in rounds {
        let (x, key) = match subject {
            "cluster1" => (1.0, "cluster"),
            "cluster3" => (3.0, "cluster"),
            _ => (1.0, "single"),
        };
        c.add(
            x,
            key,
            round,
            Metrics::from([("pairs_per_s".into(), pairs)]),
        );
    }
    c
}

fn subject_label(s: &str) -> &str {
    match s {
        "ours" => "ours",
        "java" => "Java",
        other => other,
    }
}

/// A compact number: 3 significant digits, no exponent below 1e9.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
