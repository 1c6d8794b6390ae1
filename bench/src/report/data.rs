//! The records of a run, queried by scenario, subject and metric; and the
//! A/B ratios of two subjects, both ways (of the medians, and per round).

use std::collections::BTreeMap;

use super::format::fmt_ratio;
use super::{json_num, Record};
use crate::util::{median, spread};

/// A ratio A/B of one metric in one scenario, both ways.
#[derive(Clone, Copy)]
pub struct Ratio {
    pub a: f64,
    pub b: f64,
    pub of_medians: f64,
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Ratio {
    pub fn json(&self) -> serde_json::Value {
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
    pub fn text(&self, unit: &str) -> String {
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

pub struct Data<'a> {
    pub records: &'a [Record],
}

impl Data<'_> {
    pub fn values(&self, scenario: &str, subject: &str, metric: &str) -> Vec<f64> {
        self.records
            .iter()
            .filter(|r| r.scenario == scenario && r.subject == subject)
            .map(|r| r.metrics.get(metric).copied().unwrap_or(f64::NAN))
            .collect()
    }

    pub fn median(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        median(&self.values(scenario, subject, metric))
    }

    pub fn min(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        self.values(scenario, subject, metric)
            .into_iter()
            .fold(f64::NAN, f64::min)
    }

    pub fn max(&self, scenario: &str, subject: &str, metric: &str) -> f64 {
        self.values(scenario, subject, metric)
            .into_iter()
            .fold(f64::NAN, f64::max)
    }

    pub fn rounds(&self, scenario: &str) -> usize {
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

    /// [`ratio`](Self::ratio) of `a` against whichever of `bs` has the
    /// highest median `metric` (the fastest, for a throughput), and its name.
    pub fn against_faster<'b>(
        &self,
        scenario: &str,
        a: &str,
        bs: &[&'b str],
        metric: &str,
    ) -> (Ratio, &'b str) {
        let mut best: Option<(Ratio, &str)> = None;
        for b in bs {
            let r = self.ratio(scenario, a, b, metric);
            if r.n == 0 {
                continue;
            }
            if best.as_ref().is_none_or(|(kept, _)| r.b > kept.b) {
                best = Some((r, b));
            }
        }
        best.unwrap_or_else(|| (self.ratio(scenario, a, bs[0], metric), bs[0]))
    }

    /// A/B: the ratio of the medians, and the per-round ratios (A and B of
    /// the same round) with their median and spread. A round in which
    /// either value is missing or B is 0 gives no ratio.
    pub fn ratio(&self, scenario: &str, a: &str, b: &str, metric: &str) -> Ratio {
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
