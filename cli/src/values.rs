//! The values of options: durations (`--lease 30s`, `-n 200ms`) and signals
//! (`--signal TERM`) parsed for clap, and durations formatted for people.

use std::fmt;
use std::time::Duration;

use nix::sys::signal::Signal;

/// The longest duration taken: 100 years.
const MAX_SECONDS: f64 = 3_155_760_000.0;

/// Parse a duration with humantime (`500ms`, `10s`, `2m`, `1h`, `1.5s`,
/// `1h 30m`); a bare number is seconds (`0` is zero).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = |why: &dyn fmt::Display| {
        format!("{why}: expected a number with a unit, like 500ms, 10s, 2m or 1h")
    };
    let bare = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && !text.starts_with('.')
        && !text.ends_with('.');
    let duration = if bare {
        let seconds: f64 = text.parse().map_err(|e| bad(&e))?;
        if !seconds.is_finite() || seconds > MAX_SECONDS {
            return Err("too long (at most 100 years)".into());
        }
        Duration::from_secs_f64(seconds)
    } else {
        humantime::parse_duration(text).map_err(|e| bad(&e))?
    };
    if duration.as_secs_f64() > MAX_SECONDS {
        return Err("too long (at most 100 years)".into());
    }
    Ok(duration)
}

/// A duration of at least `min`.
fn at_least(text: &str, min: Duration, what: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < min {
        return Err(format!(
            "{what} must be at least {}",
            humantime::format_duration(min)
        ));
    }
    Ok(d)
}

/// A lock's (or semaphore's, latch's) name: the library's own rule, in its
/// words, where clap would say "a value is required".
pub fn parse_name(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("lock name must not be empty".into());
    }
    Ok(text.to_owned())
}

pub fn parse_lease(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_millis(1), "--lease")
}

/// `--watchdog`: the library's smallest lock watchdog timeout, 3 ms.
pub fn parse_watchdog(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_millis(3), "--watchdog")
}

/// `--timeout`: a reply timeout of at least 1 ms.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_millis(1), "--timeout")
}

pub fn parse_check(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_millis(10), "--check")
}

pub fn parse_interval(text: &str) -> Result<Duration, String> {
    at_least(text, Duration::from_millis(50), "--interval")
}

/// A signal for `--signal`: `TERM`, `SIGTERM`, `term` or `15` (only
/// signals with a name).
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    let upper = text.trim().to_ascii_uppercase();
    let signal = if !upper.is_empty() && upper.chars().all(|c| c.is_ascii_digit()) {
        upper
            .parse::<i32>()
            .ok()
            .and_then(|n| Signal::try_from(n).ok())
    } else {
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        format!("SIG{name}").parse::<Signal>().ok()
    };
    signal.ok_or_else(|| "expected a signal name like TERM, INT, HUP, KILL, or its number".into())
}

/// A duration for humans: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn format_duration_ms(ms: i64) -> String {
    let negative = ms < 0;
    let ms = ms.unsigned_abs();
    let text = if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else if ms < 86_400_000 {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    } else {
        format!("{}d{:02}h", ms / 86_400_000, (ms % 86_400_000) / 3_600_000)
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("0.25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "s", "ms", "5x", "-1s", ".5", "5.", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("200y").is_err());
        assert!(parse_duration("999999999999").is_err());
        assert!(parse_check("5ms").is_err());
        assert!(parse_interval("10ms").is_err());
        assert!(parse_lease("0").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_duration_ms(850), "850ms");
        assert_eq!(format_duration_ms(12_340), "12.3s");
        assert_eq!(format_duration_ms(245_000), "4m05s");
        assert_eq!(format_duration_ms(7_380_000), "2h03m");
        assert_eq!(format_duration_ms(-1500), "-1.5s");
    }

    #[test]
    fn signals() {
        for (text, sig) in [
            ("TERM", Signal::SIGTERM),
            ("sigint", Signal::SIGINT),
            ("9", Signal::SIGKILL),
            ("usr1", Signal::SIGUSR1),
        ] {
            assert_eq!(parse_signal(text).unwrap(), sig, "{text}");
        }
        for bad in ["", "TERM;rm", "0", "99", "SIG", "NOPE"] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
    }
}
