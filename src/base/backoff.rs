//! Pacing of retries: the spin lock's back-off (Redisson's
//! `LockOptions.BackOff`) and the jitter of retry pauses.

use std::time::Duration;

/// How a spin-lock waiter paces its attempts (Redisson's `LockOptions.BackOff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackOff {
    /// Delay `d0 = initial`, then `d(k+1) = min(max, multiplier * d(k) + jitter[0, k] ms)`.
    Exponential {
        /// First delay. Redisson: 1 ms.
        initial: Duration,
        /// Largest delay. Redisson: 128 ms.
        max: Duration,
        /// Growth factor. Redisson: 2.
        multiplier: u32,
    },
    /// The same delay every time. Redisson: 64 ms.
    Constant(Duration),
}

impl Default for BackOff {
    /// Redisson's default: exponential from 1 ms to 128 ms, doubling.
    fn default() -> Self {
        BackOff::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

/// The back-off state of one waiter (a fresh one per acquisition).
#[derive(Clone, Debug)]
pub(crate) struct BackOffState {
    policy: BackOff,
    next: Duration,
    step: u64,
}

impl BackOffState {
    pub(crate) fn new(policy: BackOff) -> BackOffState {
        let next = match policy {
            BackOff::Exponential { initial, .. } => initial,
            BackOff::Constant(d) => d,
        };
        BackOffState {
            policy,
            next,
            step: 0,
        }
    }

    /// The next sleep.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        if let BackOff::Exponential {
            max, multiplier, ..
        } = self.policy
        {
            let jitter = Duration::from_millis(random_below(self.step + 1));
            self.next = delay
                .saturating_mul(multiplier)
                .saturating_add(jitter)
                .min(max);
            self.step += 1;
        }
        delay
    }
}

/// A uniformly random number in `0..bound` (0 if `bound` is 0).
pub(crate) fn random_below(bound: u64) -> u64 {
    if bound == 0 {
        return 0;
    }
    rand::Rng::random_range(&mut rand::rng(), 0..bound)
}

/// Redisson's "equal jitter": a random pause from half of `delay` to all
/// of it, so clients that failed together do not retry together.
pub(crate) fn equal_jitter(delay: Duration) -> Duration {
    let half = delay / 2;
    let spread = u64::try_from((delay - half).as_micros()).unwrap_or(u64::MAX);
    half + Duration::from_micros(random_below(spread.saturating_add(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_grows_to_its_cap() {
        let mut b = BackOffState::new(BackOff::default());
        let delays: Vec<u128> = (0..12).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays[0], 1);
        assert!((2..=3).contains(&delays[1]), "{delays:?}");
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(*delays.last().unwrap_or(&0), 128);
    }

    #[test]
    fn equal_jitter_stays_between_half_and_all() {
        let d = Duration::from_millis(100);
        for _ in 0..1_000 {
            let j = equal_jitter(d);
            assert!(j >= d / 2 && j <= d, "{j:?}");
        }
        assert_eq!(equal_jitter(Duration::ZERO), Duration::ZERO);
        assert!(equal_jitter(Duration::MAX) >= Duration::MAX / 2);
    }

    #[test]
    fn constant_backoff_stays() {
        let mut b = BackOffState::new(BackOff::Constant(Duration::from_millis(64)));
        assert!((0..5).all(|_| b.next_delay() == Duration::from_millis(64)));
    }
}
