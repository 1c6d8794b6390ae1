//! [`RLock`], Redisson's reentrant lock (docs/PROTOCOL.md §2), and
//! [`NonReentrantLock`], its non-reentrant variant (§6.3, Redisson 4.7).

use std::sync::Arc;

use fred::types::Value;

use crate::base::error::{Result, NON_REENTRANT};
use crate::base::names::LockKeys;
use crate::client::{Client, Inner};
use crate::connection::script::{self, millis, ScriptCall};
use crate::engine::kind::{sealed, Kind, ReentrantKind};
use crate::engine::lock::Lock;
use crate::engine::raw::{AttemptMode, Protocol, Waiting};

/// Redisson's reentrant lock (`RLock`, `getLock(name)`).
pub type RLock = Lock<Reentrant>;

/// Redisson's non-reentrant lock (`getNonReentrantLock(name)`): RLock's
/// layout, but the holder taking it again is refused with
/// [`Error::NotReentrant`](crate::Error::NotReentrant).
pub type NonReentrantLock = Lock<NonReentrant>;

/// The [`RLock`] kind and its scripts (docs/PROTOCOL.md §2.2, §2.3, §2.5).
#[derive(Debug)]
pub struct Reentrant {
    pub(crate) keys: LockKeys,
}

impl sealed::Sealed for Reentrant {}
impl Kind for Reentrant {}
impl ReentrantKind for Reentrant {}

/// The [`NonReentrantLock`] kind.
#[derive(Debug)]
pub struct NonReentrant {
    rlock: Reentrant,
}

impl sealed::Sealed for NonReentrant {}
impl Kind for NonReentrant {}

impl Client {
    /// A handle to the reentrant lock `name` (Redisson's `getLock(name)`).
    /// No command is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn lock(&self, name: &str) -> Result<RLock> {
        let kind = Arc::new(Reentrant {
            keys: LockKeys::new(&self.map_name(name)?)?,
        });
        Ok(Lock::new(self.clone(), kind.clone(), kind))
    }

    /// A handle to the non-reentrant lock `name` (Redisson 4.7's
    /// `getNonReentrantLock(name)`): RLock's layout and channel, but
    /// acquiring it again with the owner that holds it fails with
    /// [`Error::NotReentrant`](crate::Error::NotReentrant).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn non_reentrant_lock(&self, name: &str) -> Result<NonReentrantLock> {
        let kind = Arc::new(NonReentrant {
            rlock: Reentrant {
                keys: LockKeys::new(&self.map_name(name)?)?,
            },
        });
        Ok(Lock::new(self.clone(), kind.clone(), kind))
    }
}

impl RLock {
    /// The channel its unlocks are published on (`redisson_lock__channel:{N}`).
    #[doc(hidden)]
    pub fn channel(&self) -> &str {
        &self.kind.keys.channel
    }
}

impl Protocol for Reentrant {
    fn kind(&self) -> &'static str {
        "lock"
    }

    fn name(&self) -> &str {
        &self.keys.name
    }

    fn acquire(
        &self,
        _inner: &Inner,
        field: &str,
        lease_ms: i64,
        _mode: AttemptMode,
    ) -> ScriptCall {
        ScriptCall::new(
            &script::LOCK,
            &[&self.keys.name],
            vec![Value::Integer(lease_ms), Value::from(field)],
        )
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::Channel(self.keys.channel.clone())
    }

    fn release_channel(&self) -> Option<&str> {
        Some(&self.keys.channel)
    }

    fn release(&self, inner: &Inner, field: &str, lease_ms: i64, latch: &str) -> ScriptCall {
        unlock_call(inner, &self.keys, field, lease_ms, latch)
    }

    fn latch_prefix(&self) -> &str {
        &self.keys.latch_prefix
    }

    fn force_unlock(&self, inner: &Inner) -> ScriptCall {
        ScriptCall::new(
            &script::FORCE_UNLOCK,
            &[&self.keys.name, &self.keys.channel],
            vec![Value::from("0"), Value::from(inner.publish_command())],
        )
    }
}

impl Protocol for NonReentrant {
    fn kind(&self) -> &'static str {
        "non_reentrant_lock"
    }

    fn name(&self) -> &str {
        self.rlock.name()
    }

    fn acquire(&self, inner: &Inner, field: &str, lease_ms: i64, mode: AttemptMode) -> ScriptCall {
        let mut call = self.rlock.acquire(inner, field, lease_ms, mode);
        call.args.push(Value::from(NON_REENTRANT));
        call
    }

    fn waiting(&self, field: &str) -> Waiting {
        self.rlock.waiting(field)
    }

    fn release_channel(&self) -> Option<&str> {
        self.rlock.release_channel()
    }

    fn release(&self, inner: &Inner, field: &str, lease_ms: i64, latch: &str) -> ScriptCall {
        self.rlock.release(inner, field, lease_ms, latch)
    }

    fn latch_prefix(&self) -> &str {
        self.rlock.latch_prefix()
    }

    fn force_unlock(&self, inner: &Inner) -> ScriptCall {
        self.rlock.force_unlock(inner)
    }
}

/// The RLock unlock script call (shared by the kinds with RLock's layout).
pub(crate) fn unlock_call(
    inner: &Inner,
    keys: &LockKeys,
    field: &str,
    lease_ms: i64,
    latch: &str,
) -> ScriptCall {
    ScriptCall::new(
        &script::UNLOCK,
        &[&keys.name, &keys.channel, latch],
        vec![
            Value::from("0"),
            Value::Integer(lease_ms),
            Value::from(field),
            Value::from(inner.publish_command()),
            Value::Integer(millis(
                inner
                    .config
                    .latch_ttl(std::time::Duration::from_millis(lease_ms.unsigned_abs())),
            )),
        ],
    )
}
