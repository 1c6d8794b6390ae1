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
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(())
}

/// One line of a curve panel: (subject, points (x, median, min, max)).
pub type CurveLine = (String, Vec<(f64, f64, f64, f64)>);
/// One panel of a curve plot: (metric label, lines).
pub type CurvePanel = (String, Vec<CurveLine>);

/// A cost curve: one panel per metric side by side, x logarithmic, y from 0
/// (linear), medians joined by lines, each point's min–max as a bar.
pub fn curve(path: &Path, title: &str, x_label: &str, panels: &[CurvePanel]) -> Result<()> {
    let n = panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (420 * n, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| anyhow!("{e:?}"))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (area, (label, lines)) in areas.iter().zip(panels) {
        let points = lines.iter().flat_map(|(_, p)| p.iter());
        let (x_lo, x_hi, y_hi) = points.fold((f64::MAX, f64::MIN, 0f64), |(a, b, c), p| {
            (a.min(p.0), b.max(p.0), c.max(p.3).max(p.1))
        });
        let (x_lo, x_hi) = if x_lo <= x_hi {
            (x_lo / 1.5, x_hi * 1.5)
        } else {
            (1.0, 10.0)
        };
        let y_hi = if y_hi > 0.0 { y_hi * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .caption(label, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..y_hi)
            .map_err(|e| anyhow!("{e:?}"))?;
        chart
            .configure_mesh()
            .x_desc(format!("{x_label} (log)"))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        for (idx, (subject, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(idx).to_rgba();
            let medians: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
            chart
                .draw_series(LineSeries::new(medians.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow!("{e:?}"))?
                .label(subject.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(medians.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| anyhow!("{e:?}"))?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color)),
                )
                .map_err(|e| anyhow!("{e:?}"))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(())
}

/// The series legend of a panel, at `position`, on a light box.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e:?}"))
}
