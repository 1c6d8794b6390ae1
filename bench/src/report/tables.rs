//! The two tables of every scenario, as markdown: the values table (the
//! median of each metric and subject) and the ratios table (A/B, both
//! ways); see `report/mod.rs` for what they mean.

use std::fmt::Write;

use super::data::Data;
use super::format::{fmt, fmt_ratio};
use super::sections::{subject_label, Section};
use super::{json_num, Pooled};
use crate::util::quantile;

/// The values table of `s` for `subjects` (those that ran), with the pooled
/// rows of a contended scenario; returns its medians for the JSON.
pub fn values(
    s: &Section,
    subjects: &[&str],
    data: &Data,
    pooled: &Pooled,
    out: &mut String,
) -> serde_json::Value {
    let mut header = vec![format!("metric (median of {})", data.rounds(s.id))];
    header.extend(subjects.iter().map(|x| subject_label(x).to_string()));
    let mut rows = vec![header];
    let mut medians = serde_json::Map::new();
    for (metric, label) in s.metrics() {
        let values: Vec<f64> = subjects
            .iter()
            .map(|subject| data.median(s.id, subject, metric))
            .collect();
        let json: serde_json::Map<String, serde_json::Value> = subjects
            .iter()
            .zip(&values)
            .map(|(subject, m)| (subject.to_string(), json_num(*m)))
            .collect();
        // A metric this scenario does not measure (e.g. client CPU across processes).
        if json.values().all(serde_json::Value::is_null) {
            continue;
        }
        medians.insert(metric.to_string(), json.into());
        let mut row = vec![label.to_string()];
        row.extend(values.into_iter().map(fmt));
        rows.push(row);
    }
    if s.pooled {
        let handovers = |subject: &str| pooled.handovers(s.id, subject);
        for (q, label) in [
            (0.50, "handover p50 µs, all rounds pooled"),
            (0.99, "handover p99 µs, all rounds pooled"),
            (1.0, "handover max µs, all rounds pooled"),
        ] {
            rows.push(row(label, subjects, |subject| {
                fmt(handovers(subject).map_or(f64::NAN, |v| quantile(v, q)))
            }));
        }
        rows.push(row("handovers, all rounds (count)", subjects, |subject| {
            handovers(subject).map_or(0, Vec::len).to_string()
        }));
        rows.push(row(
            "fairness min/max, all rounds pooled",
            subjects,
            |subject| fmt(pooled.fairness(s.id, subject)),
        ));
    }
    markdown(&rows, 1, out);
    medians.into()
}

/// A row: `label`, then one cell per subject.
fn row(label: &str, subjects: &[&str], cell: impl Fn(&str) -> String) -> Vec<String> {
    let mut row = vec![label.to_string()];
    row.extend(subjects.iter().map(|subject| cell(subject)));
    row
}

/// The ratios table of `s` for the pairs of `subjects` (those that ran),
/// after a blank line; returns its ratios for the JSON, or None (and
/// writes nothing) if no pair ran.
pub fn ratios(
    s: &Section,
    subjects: &[&str],
    data: &Data,
    out: &mut String,
) -> Option<serde_json::Value> {
    let pairs: Vec<(&str, &str)> = s
        .pairs
        .iter()
        .copied()
        .filter(|(a, b)| subjects.contains(a) && subjects.contains(b))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let _ = writeln!(out);
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
    let mut ratios = serde_json::Map::new();
    for (a, b) in pairs {
        let mut pair_json = serde_json::Map::new();
        for metric in s.ratio_metrics {
            let r = data.ratio(s.id, a, b, metric);
            rows.push(vec![
                format!("{a}/{b}"),
                s.metric_label(metric),
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
        ratios.insert(format!("{a}/{b}"), pair_json.into());
    }
    markdown(&rows, 2, out);
    Some(ratios.into())
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
