//! [`RLock`], Redisson's reentrant lock (docs/PROTOCOL.md §2), and
//! [`NonReentrantLock`], its non-reentrant variant (§6.3, Redisson 4.7).

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::base::error::{Result, NON_REENTRANT};
use crate::base::keys::LockKeys;
use crate::client::Client;
use crate::connection::script::{script, Script, ScriptCall};
use crate::engine::protocol::{Protocol, Take, Unlock};
use crate::engine::script_env::ScriptEnv;
use crate::locks::kind::{sealed, Kind, ReentrantKind};
use crate::locks::lock::Lock;

// The scripts this module runs (`lua/`, embedded at build time).
script!(LOCK, "args.lua", "lock.lua");
script!(UNLOCK, "args.lua", "unlock.lua");
script!(FORCE_UNLOCK, "args.lua", "force_unlock.lua");

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
    /// `false` for [`NonReentrant`]'s protocol: the holder taking it again
    /// is refused.
    pub(crate) reentrant: bool,
}

impl Reentrant {
    pub(crate) fn new(name: &str) -> Result<Reentrant> {
        Ok(Reentrant {
            keys: LockKeys::new(name)?,
            reentrant: true,
        })
    }

    /// The acquire call, however the caller waits (the spin lock's too).
    pub(crate) fn plain_acquire_call(&self, field: &str, lease_ms: i64) -> ScriptCall {
        let mut args = vec![Value::Integer(lease_ms), Value::from(field)];
        if !self.reentrant {
            args.push(Value::from(NON_REENTRANT));
        }
        // The name's key is built once per handle and shared by every call.
        ScriptCall::with_keys(&LOCK, vec![self.keys.name_key()], args)
    }
}

impl sealed::Sealed for Reentrant {}
impl Kind for Reentrant {}
impl ReentrantKind for Reentrant {}

/// The [`NonReentrantLock`] kind.
#[derive(Debug)]
pub struct NonReentrant {
    // Its protocol is RLock's, refusing re-entry (`Reentrant` with
    // `reentrant: false`): this type only marks what the lock can do.
    _private: (),
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
            keys: LockKeys::from_name(self.map_name(name)?)?,
            reentrant: true,
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
        let rlock = Arc::new(Reentrant {
            reentrant: false,
            ..Reentrant::new(&self.map_name(name)?)?
        });
        let kind = Arc::new(NonReentrant { _private: () });
        Ok(Lock::new(self.clone(), kind, rlock))
    }
}

impl RLock {
    /// The channel its unlocks are published on (`redisson_lock__channel:{N}`,
    /// after the name mapper).
    pub fn channel(&self) -> &str {
        &self.kind.keys.channel
    }
}

impl Protocol for Reentrant {
    fn kind_label(&self) -> &'static str {
        if self.reentrant {
            "lock"
        } else {
            "non_reentrant_lock"
        }
    }

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn acquire_call(&self, _: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        self.plain_acquire_call(take.field, take.lease_ms)
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        unlock_call(&UNLOCK, "0", env, &self.keys, unlock)
    }

    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall {
        force_unlock_call(&FORCE_UNLOCK, env, &self.keys, "0")
    }
}

/// An acquire call by `script` on `keys` whose arguments are those every
/// acquire script starts with: the lease in milliseconds, then the owner
/// field (the whole call of the kinds whose attempt does not depend on the
/// wait).
pub(crate) fn lease_owner_call(
    script: &'static Script,
    keys: &[&str],
    field: &str,
    lease_ms: i64,
) -> ScriptCall {
    ScriptCall::new(
        script,
        keys,
        vec![Value::Integer(lease_ms), Value::from(field)],
    )
}

/// A forced unlock by `script` of the lock of `keys`: KEYS `[N, channel]`,
/// ARGV `[message, publish command]` (the RLock and read-write lock ones).
pub(crate) fn force_unlock_call(
    script: &'static Script,
    env: &ScriptEnv,
    keys: &LockKeys,
    message: &'static str,
) -> ScriptCall {
    ScriptCall::new(
        script,
        &[&keys.name, &keys.channel],
        vec![Value::from(message), env.publish()],
    )
}

/// An unlock call by `script` in RLock's shape (the kinds with RLock's
/// layout, and the write lock): KEYS `[N, channel, latch]`, ARGV
/// `[message, field, publish command, latch TTL]`, the latch's TTL sized
/// for a hold with the unlock's lease.
pub(crate) fn unlock_call(
    script: &'static Script,
    message: &'static str,
    env: &ScriptEnv,
    keys: &LockKeys,
    unlock: Unlock<'_>,
) -> ScriptCall {
    ScriptCall::with_keys(
        script,
        vec![keys.name_key(), keys.channel_key(), Key::from(unlock.latch)],
        vec![
            Value::from(message),
            Value::from(unlock.field),
            env.publish(),
            env.unlock_latch_ttl_ms(unlock.lease_ms),
        ],
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::base::owner::Owner;
    use crate::connection::config::Config;

    pub(crate) fn env() -> ScriptEnv {
        ScriptEnv::new(&Config::default(), "c".to_owned(), "PUBLISH")
    }

    /// One attempt of `field` with a 30 s lease, trying once.
    fn take(field: &str) -> Take<'_> {
        Take {
            field,
            lease_ms: 30_000,
            mode: crate::engine::protocol::AttemptMode::Once,
        }
    }

    pub(crate) fn keys(call: &ScriptCall) -> Vec<&str> {
        call.keys.iter().filter_map(|k| k.as_str()).collect()
    }

    // docs/PROTOCOL.md §2.2, §2.3, §2.4, §2.5: the calls' keys and arguments,
    // without a server.
    #[test]
    fn rlock_calls() -> Result<()> {
        let env = env();
        let lock = Reentrant::new("orders")?;
        let field = lock.field(&env, Owner::new(7));
        assert_eq!(field, "c:7");
        let acquire = lock.acquire_call(&env, take(&field));
        assert_eq!(keys(&acquire), ["orders"]);
        assert_eq!(acquire.args, [Value::Integer(30_000), Value::from("c:7")]);
        let release = lock.unlock_call(
            &env,
            Unlock {
                field: &field,
                lease_ms: 30_000,
                latch: "latch",
                need_ms: None,
            },
        );
        assert_eq!(
            keys(&release),
            ["orders", "redisson_lock__channel:{orders}", "latch"]
        );
        // The latch outlives a background resend: lease + timeout (§2.4).
        assert_eq!(
            release.args,
            [
                Value::from("0"),
                Value::from("c:7"),
                Value::from("PUBLISH"),
                Value::Integer(33_000),
            ]
        );
        let force = lock.force_unlock_call(&env);
        assert_eq!(keys(&force), ["orders", "redisson_lock__channel:{orders}"]);
        assert_eq!(force.args, [Value::from("0"), Value::from("PUBLISH")]);
        assert_eq!(
            lock.release_channel(),
            Some("redisson_lock__channel:{orders}")
        );
        assert_eq!(lock.latch_prefix(), "redisson_unlock_latch:{orders}");

        let non_reentrant = Reentrant {
            reentrant: false,
            ..lock
        };
        let acquire = non_reentrant.acquire_call(&env, take(&field));
        assert_eq!(
            acquire.args,
            [
                Value::Integer(30_000),
                Value::from("c:7"),
                Value::from(NON_REENTRANT)
            ]
        );
        Ok(())
    }
}
