//! Clocks, memory and statistics helpers.

use std::time::Duration;

/// Wall-clock nanoseconds since the epoch: one clock every worker process
/// on this machine shares, so their timestamps can be compared. (Runs last
/// seconds; a clock step during one would show as an outlier.)
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A tokio instant for a `now_ns` timestamp (now if it is in the past).
pub fn instant_at(ns: u64) -> tokio::time::Instant {
    let now = now_ns();
    tokio::time::Instant::now() + Duration::from_nanos(ns.saturating_sub(now))
}

/// Sleep until a `now_ns` timestamp.
pub async fn sleep_until_ns(ns: u64) {
    tokio::time::sleep_until(instant_at(ns)).await;
}

/// Resident set size of this process in KiB (VmRSS from /proc/self/status).
pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The q-quantile (0..=1) of unsorted samples, nearest rank. NaN if empty.
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Median of values, ignoring NaN. NaN if none.
pub fn median(values: &[f64]) -> f64 {
    let v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v;
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
