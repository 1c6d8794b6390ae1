//! [`SpinLock`]: Redisson's `RedissonSpinLock` (docs/PROTOCOL.md §6.1). RLock's
//! layout and acquire script, so it excludes RLocks of the same name, but no
//! pub/sub: waiters sleep per a back-off and try again.

use std::sync::Arc;

use fred::types::Value;

use crate::base::backoff::{BackOff, BackOffState};
use crate::base::error::Result;
use crate::base::keys::LockKeys;
use crate::client::Client;
use crate::connection::script::{script, ScriptCall};
use crate::engine::protocol::{Protocol, Take, Unlock, Waiting};
use crate::engine::script_env::ScriptEnv;
use crate::locks::kind::{sealed, Kind, ReentrantKind};
use crate::locks::lock::Lock;
use crate::locks::rlock::Reentrant;

// The scripts this module runs (`lua/`, embedded at build time).
script!(SPIN_UNLOCK, "args.lua", "spin_unlock.lua");
script!(DELETE, "args.lua", "delete.lua");

/// Redisson's spin lock (`getSpinLock(name)`).
pub type SpinLock = Lock<Spin>;

/// The [`SpinLock`] kind: RLock's acquire script and keys; its own unlock
/// (no publish), forced unlock (plain DEL) and waiting (back-off).
#[derive(Debug)]
pub struct Spin {
    rlock: Reentrant,
    backoff: BackOff,
}

impl sealed::Sealed for Spin {}
impl Kind for Spin {}
impl ReentrantKind for Spin {}

impl Client {
    /// A handle to the spin lock `name` (Redisson's `getSpinLock(name)`),
    /// waiting with Redisson's default exponential back-off.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn spin_lock(&self, name: &str) -> Result<SpinLock> {
        self.spin_lock_with(name, BackOff::default())
    }

    /// A spin lock with a chosen back-off (`getSpinLock(name, backOff)`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn spin_lock_with(&self, name: &str, backoff: BackOff) -> Result<SpinLock> {
        let kind = Arc::new(Spin {
            rlock: Reentrant::new(&self.map_name(name)?)?,
            backoff,
        });
        Ok(Lock::new(self.clone(), kind.clone(), kind))
    }
}

impl Protocol for Spin {
    fn kind_label(&self) -> &'static str {
        "spin_lock"
    }

    fn keys(&self) -> &LockKeys {
        &self.rlock.keys
    }

    fn acquire_call(&self, _: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        self.rlock.plain_acquire_call(take.field, take.lease_ms)
    }

    fn waiting(&self, _field: &str) -> Waiting<'_> {
        Waiting::BackOff(Box::new(BackOffState::new(self.backoff)))
    }

    fn release_channel(&self) -> Option<&str> {
        None
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        ScriptCall::new(
            &SPIN_UNLOCK,
            &[self.name(), unlock.latch],
            vec![
                Value::from(unlock.field),
                env.unlock_latch_ttl_ms(unlock.lease_ms),
            ],
        )
    }

    fn force_unlock_call(&self, _env: &ScriptEnv) -> ScriptCall {
        ScriptCall::new(&DELETE, &[self.name()], Vec::new())
    }
}
