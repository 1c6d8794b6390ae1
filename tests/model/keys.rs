//! When a key expires, derived from the Redis commands the scripts run on
//! it (docs/PROTOCOL.md §2.9's table, §2.2–§2.6, §4.3–§4.6, §5.2–§5.6):
//! `PEXPIRE L` sets the expiry, `PEXPIRE max(PTTL, L)` keeps the later of
//! the two, `PEXPIRE (PTTL + L)` adds, and a renewal run keeps a key alive
//! for at least `WATCHDOG` after each run, at times the model does not see.
//!
//! A [`Ttl`] is the window `[lo, hi]` of real instants in which the key
//! expires if nothing touches it again: a command sent at `t0` and answered
//! at `t1` ran somewhere in between. While a renewal keeps the key alive
//! ("renewing", decided by the caller from the holds that renew it), the
//! key does not expire and its upper bound is unknown; when the renewal
//! stops at `t`, the key expires no later than `t + WATCHDOG + RENEW_SLACK`
//! (the last run, or one still in flight, set at most `WATCHDOG` from
//! then). Each `PTTL` read raises `lo` to what it proves.

use std::time::{Duration, Instant};

use super::{Exp, MARGIN, RENEW_SLACK, WATCHDOG};

/// How far a `PTTL` may lie outside a window, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slack {
    /// None: to tell apart two orders of a step whose windows both fit
    /// with rounding.
    Strict = 0,
    /// Redis's and the clock's rounding: what every check allows.
    Rounding = 3,
}

/// When a key expires unless touched again: somewhere in `[lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ttl {
    pub lo: Instant,
    pub hi: Instant,
}

impl Ttl {
    /// `PEXPIRE key L` (or `SET … PX L`), sent at `t0`, answered at `t1`.
    pub fn set(l: Duration, t0: Instant, t1: Instant) -> Ttl {
        Ttl {
            lo: t0 + l,
            hi: t1 + l,
        }
    }

    /// The later of two expiries: `PEXPIRE key max(PTTL key, L)`, a
    /// hand-over of a key's remaining time, or the longest of several keys.
    pub fn max(self, other: Ttl) -> Ttl {
        Ttl {
            lo: self.lo.max(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    /// The earlier of two expiries: a key cut to a need (`PEXPIRE key
    /// need` when it lives longer).
    pub fn min(self, other: Ttl) -> Ttl {
        Ttl {
            lo: self.lo.min(other.lo),
            hi: self.hi.min(other.hi),
        }
    }

    /// Either of two expiries (which one, the model cannot tell).
    pub fn either(self, other: Ttl) -> Ttl {
        Ttl {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    /// `PEXPIRE key (PTTL key + L)`.
    pub fn plus(self, l: Duration) -> Ttl {
        Ttl {
            lo: self.lo + l,
            hi: self.hi + l,
        }
    }

    /// The window as it stands at `at`: while `renewing`, the key lives at
    /// least until its last renewal plus the watchdog, and at most until
    /// `at + WATCHDOG + RENEW_SLACK`.
    pub fn at(self, renewing: bool, at: Instant) -> Ttl {
        if renewing {
            Ttl {
                lo: self.lo,
                hi: self.hi.max(at + WATCHDOG + RENEW_SLACK),
            }
        } else {
            self
        }
    }

    /// The renewal that kept the key alive stopped at `at` (the step that
    /// stopped it was answered then).
    pub fn renewal_stopped(self, at: Instant) -> Ttl {
        self.at(true, at)
    }

    /// Certainly expired at `now` (never while renewing).
    pub fn over(self, renewing: bool, now: Instant) -> bool {
        !renewing && self.hi + MARGIN <= now
    }

    /// The window the settle logic must wait out (none while renewing).
    pub fn window(self, renewing: bool) -> Option<Exp> {
        (!renewing).then_some(Exp::At {
            lo: self.lo,
            hi: self.hi,
        })
    }

    /// Whether a real `PTTL` read between `r0` and `r1` fits (`0`: the
    /// key is in its last millisecond, where its window allows that).
    pub fn fits(self, renewing: bool, pttl: i64, r0: Instant, r1: Instant) -> bool {
        self.fits_by(renewing, pttl, r0, r1, Slack::Rounding)
    }

    /// [`fits`](Self::fits), with `slack` for Redis's and the clock's
    /// rounding.
    pub fn fits_by(
        self,
        renewing: bool,
        pttl: i64,
        r0: Instant,
        r1: Instant,
        slack: Slack,
    ) -> bool {
        let slack = slack as i64;
        let w = self.at(renewing, r1);
        let low = w.lo.saturating_duration_since(r1).as_millis() as i64 - slack;
        let high = w.hi.saturating_duration_since(r0).as_millis() as i64 + slack;
        pttl >= 0 && pttl >= low && pttl <= high
    }

    /// Whether the key may have expired by `r1`: its window has begun
    /// (within the 3 ms slack of [`fits`](Self::fits)). A key listed by one
    /// command and read by the next may then be gone at the read.
    pub fn may_have_expired(self, renewing: bool, r1: Instant) -> bool {
        self.at(renewing, r1).lo <= r1 + Duration::from_millis(3)
    }

    /// A `PTTL` of `pttl` read from `r0` on proves the key lives until
    /// `r0 + pttl` at least (less a millisecond of rounding).
    pub fn observed(&mut self, pttl: i64, r0: Instant) {
        if pttl > 1 {
            self.lo = self.lo.max(r0 + Duration::from_millis(pttl as u64 - 1));
            // Checked by `fits` first: beyond `hi` only by rounding, or
            // through a renewal.
            self.hi = self.hi.max(self.lo);
        }
    }

    /// The real expiry a `PTTL` read proves at most: `r1 + pttl + 1 ms`.
    pub fn real_bound(pttl: i64, r1: Instant) -> Option<Instant> {
        (pttl > 0).then(|| r1 + Duration::from_millis(pttl as u64 + 1))
    }
}
