//! [`SpinLock`]: Redisson's `RedissonSpinLock` (PROTOCOL.md §6.1). RLock's
//! layout and acquire script, so it excludes RLocks of the same name, but no
//! pub/sub: waiters sleep per a back-off and try again.

use std::sync::Arc;

use fred::types::Value;

use crate::backoff::{BackOff, Backoff};
use crate::client::{Client, Inner};
use crate::error::Result;
use crate::lock::{Kind, Lock, ReentrantProtocol};
use crate::names::LockKeys;
use crate::raw::{AttemptMode, Protocol, RawLock, Waiting};
use crate::script;
use crate::script::millis;
use crate::script::ScriptCall;

/// Redisson's spin lock (`getSpinLock(name)`).
pub type SpinLock = Lock<Spin>;

/// The [`SpinLock`] kind.
#[derive(Clone)]
pub struct Spin {
    _private: (),
}

impl crate::lock::sealed::Sealed for Spin {}
impl Kind for Spin {}

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
