//! The tables and the targets: `summarize` turns the records of a run into
//! the printed text and the JSON's `medians`, `ratios` and `targets`
//! (`sections.rs`: what each scenario shows; `tables.rs`: the tables;
//! `data.rs`: medians and ratios; `targets.rs`: the targets).
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

mod data;
mod format;
mod sections;
mod tables;
mod targets;

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::util::Metrics;
use data::Data;
use sections::SECTIONS;

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

pub struct Summary {
    pub table: String,
    pub targets_text: String,
    pub medians: serde_json::Value,
    pub ratios: serde_json::Value,
    pub targets: serde_json::Value,
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
    if let Some(java) = notes.get("java") {
        let _ = writeln!(table, "{java}");
    }
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
        let values = tables::values(s, &subjects, &data, pooled, &mut table);
        medians.insert(s.id.into(), values);
        if let Some(r) = tables::ratios(s, &subjects, &data, &mut table) {
            ratios.insert(s.id.into(), r);
        }
    }
    let (targets_text, targets) = targets::check(&data, pooled);
    Summary {
        table,
        targets_text,
        medians: medians.into(),
        ratios: ratios.into(),
        targets,
    }
}

pub fn json_num(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}
