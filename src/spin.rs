//! [`SpinLock`]: Redisson's `RedissonSpinLock` (PROTOCOL.md §6.1). RLock's
//! layout and acquire script, so it excludes RLocks of the same name, but no
//! pub/sub: waiters sleep per a back-off and try again.

use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;

use crate::client::{Client, Inner};
use crate::error::Result;
use crate::lock::{millis, Kind, Lock, ReentrantProtocol};
use crate::names::LockKeys;
use crate::raw::{AttemptMode, Protocol, RawLock, ScriptCall, Waiting};
use crate::script;

/// Redisson's spin lock (`getSpinLock(name)`).
pub type SpinLock = Lock<Spin>;

/// The [`SpinLock`] kind.
#[derive(Clone)]
pub struct Spin {
    _private: (),
}

impl crate::lock::sealed::Sealed for Spin {}
impl Kind for Spin {}

/// How a spin-lock waiter paces its attempts (Redisson's `LockOptions.BackOff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
pub(crate) struct Backoff {
    policy: BackOff,
    next: Duration,
    step: u64,
}

impl Backoff {
    pub(crate) fn new(policy: BackOff) -> Backoff {
        let next = match policy {
            BackOff::Exponential { initial, .. } => initial,
            BackOff::Constant(d) => d,
        };
        Backoff {
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

/// A uniformly random number in `0..bound`.
fn random_below(bound: u64) -> u64 {
    let random = uuid::Uuid::new_v4().as_u128();
    u64::try_from(random % u128::from(bound.max(1))).unwrap_or(0)
}

impl SpinLock {
    pub(crate) fn new(client: Client, name: &str, backoff: BackOff) -> Result<SpinLock> {
        let proto = SpinProtocol {
            rlock: ReentrantProtocol {
                keys: Arc::new(LockKeys::new(name)?),
            },
            backoff,
        };
        Ok(Lock::from_parts(
            RawLock::new(client, Arc::new(proto)),
            Spin { _private: () },
        ))
    }
}

/// RLock's acquire script and keys; its own unlock (no publish), forced
/// unlock (plain DEL) and waiting (back-off).
struct SpinProtocol {
    rlock: ReentrantProtocol,
    backoff: BackOff,
}

impl Protocol for SpinProtocol {
    fn name(&self) -> &str {
        self.rlock.name()
    }

    fn acquire(&self, inner: &Inner, field: &str, lease_ms: i64, mode: AttemptMode) -> ScriptCall {
        self.rlock.acquire(inner, field, lease_ms, mode)
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::Backoff(Backoff::new(self.backoff))
    }

    fn release(&self, inner: &Inner, field: &str, lease_ms: i64, latch: &str) -> ScriptCall {
        ScriptCall::new(
            &script::SPIN_UNLOCK,
            &[self.name(), latch],
            vec![
                Value::Integer(lease_ms),
                Value::from(field),
                Value::Integer(millis(inner.config.latch_ttl())),
            ],
        )
    }

    fn latch_prefix(&self) -> &str {
        self.rlock.latch_prefix()
    }

    fn force_unlock(&self, _inner: &Inner) -> ScriptCall {
        ScriptCall::new(&script::DELETE, &[self.name()], Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_grows_to_its_cap() {
        let mut b = Backoff::new(BackOff::default());
        let delays: Vec<u128> = (0..12).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays[0], 1);
        assert!((2..=3).contains(&delays[1]), "{delays:?}");
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(*delays.last().unwrap_or(&0), 128);
    }

    #[test]
    fn constant_backoff_stays() {
        let mut b = Backoff::new(BackOff::Constant(Duration::from_millis(64)));
        assert!((0..5).all(|_| b.next_delay() == Duration::from_millis(64)));
    }
}
