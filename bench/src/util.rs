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

/// CPU time and context switches of this whole process (every thread), from
/// `getrusage(RUSAGE_SELF)`: microsecond resolution, unlike `/proc/self/stat`'s
/// 10 ms ticks, so it can be read around rounds of a few hundred ms.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user_us: f64,
    pub sys_us: f64,
    /// Voluntary context switches (blocked: waiting for a socket, a lock, a park).
    pub vcsw: f64,
    /// Involuntary context switches (preempted).
    pub ivcsw: f64,
}

impl Usage {
    pub fn now() -> Usage {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage only writes the struct it is given; RUSAGE_SELF
        // is always valid, and on (impossible) failure the zeroed struct stays.
        let ru = unsafe {
            libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
            ru.assume_init()
        };
        let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
        Usage {
            user_us: us(ru.ru_utime),
            sys_us: us(ru.ru_stime),
            vcsw: ru.ru_nvcsw as f64,
            ivcsw: ru.ru_nivcsw as f64,
        }
    }

    /// `self - earlier`.
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            user_us: self.user_us - earlier.user_us,
            sys_us: self.sys_us - earlier.sys_us,
            vcsw: self.vcsw - earlier.vcsw,
            ivcsw: self.ivcsw - earlier.ivcsw,
        }
    }

    /// Another process's CPU known only as a total (the JVM's, summed over
    /// its threads' `schedstat`): user, sys and context switches unknown
    /// (NaN), and left out by [`Usage::per`].
    pub fn total(cpu_us: f64) -> Usage {
        Usage {
            user_us: cpu_us,
            sys_us: f64::NAN,
            vcsw: f64::NAN,
            ivcsw: f64::NAN,
        }
    }

    /// Per-operation figures under `client_*` keys.
    pub fn per(self, ops: f64, unit: &str, m: &mut std::collections::BTreeMap<String, f64>) {
        let ops = ops.max(1.0);
        if self.sys_us.is_nan() {
            m.insert(format!("client_cpu_us_per_{unit}"), self.user_us / ops);
            return;
        }
        m.insert(
            format!("client_cpu_us_per_{unit}"),
            (self.user_us + self.sys_us) / ops,
        );
        m.insert(format!("client_user_us_per_{unit}"), self.user_us / ops);
        m.insert(format!("client_sys_us_per_{unit}"), self.sys_us / ops);
        m.insert(
            format!("client_csw_per_{unit}"),
            (self.vcsw + self.ivcsw) / ops,
        );
    }
}

/// (p25, p75, min, max) of values, ignoring NaN; NaNs if none.
pub fn spread(values: &[f64]) -> (f64, f64, f64, f64) {
    let v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (quantile(&v, 0.25), quantile(&v, 0.75), min, max)
}

/// Restrict every thread of each process in `pids` to the CPUs `cpus`
/// (a `taskset` list such as `0`), with util-linux `taskset -a -p -c`.
/// Threads created later inherit the mask of the thread that creates them.
/// Returns each process's previous mask, for [`unpin`].
pub fn pin(pids: &[u32], cpus: &str) -> anyhow::Result<Vec<(u32, String)>> {
    let mut before = Vec::new();
    for &pid in pids {
        // "pid 123's current affinity mask: 3"
        let out = taskset(&["-p", &pid.to_string()])?;
        let mask = out
            .rsplit(':')
            .next()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| anyhow::anyhow!("taskset -p {pid}: unexpected output {out:?}"))?
            .to_owned();
        before.push((pid, mask));
        if let Err(e) = taskset(&["-a", "-p", "-c", cpus, &pid.to_string()]) {
            let _ = unpin(&before);
            return Err(e);
        }
    }
    Ok(before)
}

/// Give every thread of each process its mask from [`pin`] back.
pub fn unpin(masks: &[(u32, String)]) -> anyhow::Result<()> {
    for (pid, mask) in masks {
        taskset(&["-a", "-p", mask, &pid.to_string()])?;
    }
    Ok(())
}

fn taskset(args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("taskset")
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("taskset (util-linux) is needed to pin: {e}"))?;
    anyhow::ensure!(
        out.status.success(),
        "taskset {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One round's (or run's) figures, by metric key.
pub type Metrics = std::collections::BTreeMap<String, f64>;
