//! The handover-latency plot: one CDF per library, log-scaled time axis.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One curve: (library, handover samples in µs).
pub type Series = (String, Vec<f64>);
/// One panel: (title, curves).
pub type Panel = (String, Vec<Series>);

pub fn handover_cdf(path: &Path, panels: &[Panel]) -> Result<()> {
    let root = SVGBackend::new(path, (640 * panels.len().max(1) as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (area, (title, series)) in areas.iter().zip(panels) {
        let (lo, hi) = series
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .filter(|v| *v > 0.0)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if lo <= hi {
            (lo.max(1.0) / 1.5, hi * 1.5)
        } else {
            (1.0, 1e6)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
            .map_err(|e| anyhow!("{e:?}"))?;
        chart
            .configure_mesh()
            .x_desc("handover: unlock called → next lock returned, µs (log)")
            .y_desc("fraction of handovers ≤ x")
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        for (idx, (label, samples)) in series.iter().enumerate() {
            let mut v: Vec<f64> = samples.iter().map(|x| x.max(lo)).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len().max(1) as f64;
            // At most ~2000 points per curve keeps the SVG small.
            let step = (v.len() / 2000).max(1);
            let points: Vec<(f64, f64)> = v
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == v.len())
                .map(|(i, x)| (*x, (i + 1) as f64 / n))
                .collect();
            let color = Palette99::pick(idx).to_rgba();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| anyhow!("{e:?}"))?
                .label(format!("{label} (n={})", samples.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(())
}
