//! Time as the wire and the API take it: the range every caller-given
//! duration must be in, and the wall clock scripts compare with.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::base::error::{Error, Result};

/// The longest lease, timeout or other duration this crate sends to Redis:
/// 100 years (of 365.25 days). Longer leases and settings are refused with
/// [`Error::InvalidArgument`] or [`Error::Config`] before anything is
/// written; a longer *wait* simply means waiting without a time limit.
///
/// The bound keeps every TTL and fair-lock deadline the scripts compute
/// (now + wait + lease) exact in Lua's doubles and inside Redis's expiry range.
pub const MAX_DURATION: Duration = Duration::from_millis(3_155_760_000_000);

/// `d`, if it is from one millisecond (the wire's unit) to
/// [`MAX_DURATION`]; else [`Error::InvalidArgument`] naming `what`
/// (`lease`, `ttl`, …).
pub(crate) fn checked(what: &str, d: Duration) -> Result<Duration> {
    if d < Duration::from_millis(1) || d > MAX_DURATION {
        return Err(Error::InvalidArgument(format!(
            "{what} must be from 1 ms to 100 years, got {d:?}"
        )));
    }
    Ok(d)
}

/// Milliseconds since the Unix epoch on this client's clock: the `now` that
/// the fair lock's and the permit-expirable semaphore's scripts take, as
/// Redisson's do (at least 1).
pub(crate) fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_one_ms_to_one_hundred_years() {
        assert!(checked("lease", Duration::ZERO).is_err());
        assert!(checked("lease", Duration::from_micros(999)).is_err());
        assert!(checked("ttl", MAX_DURATION + Duration::from_millis(1)).is_err());
        assert_eq!(checked("lease", MAX_DURATION).ok(), Some(MAX_DURATION));
        let Err(Error::InvalidArgument(message)) = checked("ttl", Duration::ZERO) else {
            panic!("zero ttl accepted");
        };
        assert_eq!(message, "ttl must be from 1 ms to 100 years, got 0ns");
    }
}
