//! [`FencedLock`]: Redisson's `RedissonFencedLock` (docs/PROTOCOL.md §6.2). An
//! RLock (same hash, channel, unlock and watchdog) whose every acquisition,
//! re-entry included, takes a new value of a counter that never goes back:
//! the fencing token, `max(counter + 1, the server clock in µs)`, so that it
//! stays increasing across a server's loss of the counter (what remains is
//! in docs/PROTOCOL.md §6.2).
//!
//! A lock can be lost while its holder still works (a pause longer than the
//! lease, a partition). Pass the token to the storage the lock protects and
//! have it refuse writes carrying a token lower than the highest it has
//! seen; then a holder that lost the lock cannot overwrite a newer holder's
//! work.
//!
//! ```no_run
//! # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
//! let lock = client.fenced_lock("ledger")?;
//! let guard = lock.lock().await?;
//! let token = guard.fencing_token();
//! // e.g. UPDATE ledger SET ..., fence = $token WHERE fence < $token
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use fred::interfaces::KeysInterface;
use fred::types::Value;

use crate::base::error::{Error, Result};
use crate::base::keys::LockKeys;
use crate::base::layout;
use crate::client::Client;
use crate::connection::script::{script, ScriptCall};
use crate::engine::protocol::hold_count;
use crate::engine::protocol::{Attempt, Protocol, Take, Unlock};
use crate::engine::script_env::ScriptEnv;
use crate::locks::guard::LockGuard;
use crate::locks::kind::{sealed, Kind, ReentrantKind};
use crate::locks::lock::Lock;
use crate::locks::rlock::{lease_owner_call, Reentrant};

// The scripts this module runs (`lua/`, embedded at build time).
script!(FENCED_LOCK, "args.lua", "fenced_lock.lua");

/// Redisson's fenced lock (`getFencedLock(name)`).
pub type FencedLock = Lock<Fenced>;

/// The [`FencedLock`] kind: RLock's scripts, plus the token counter.
#[derive(Debug)]
pub struct Fenced {
    rlock: Reentrant,
    /// `redisson_lock_token:{N}`.
    token_key: String,
}

impl sealed::Sealed for Fenced {}
impl Kind for Fenced {}
impl ReentrantKind for Fenced {}

impl Client {
    /// A handle to the fenced lock `name` (Redisson's `getFencedLock(name)`):
    /// every acquisition carries a strictly increasing fencing token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn fenced_lock(&self, name: &str) -> Result<FencedLock> {
        let name = self.map_name(name)?;
        let kind = Arc::new(Fenced {
            rlock: Reentrant::new(&name)?,
            token_key: layout::fence_token(&name),
        });
        Ok(Lock::new(self.clone(), kind.clone(), kind))
    }
}

impl FencedLock {
    /// The token counter's key (`redisson_lock_token:{N}`, after the name
    /// mapper): the last token handed out.
    pub fn token_key(&self) -> &str {
        &self.kind.token_key
    }

    /// The last token handed out, by any client (Redisson's `getToken()`);
    /// `None` before the first acquisition.
    ///
    /// # Errors
    ///
    /// A transient error if Redis stayed unreachable through
    /// `retry_attempts` retries; [`Error::WrongType`] if the counter's key
    /// holds another type; [`Error::Protocol`] if it holds no integer;
    /// [`Error::Auth`]; [`Error::Closed`] after
    /// [`Client::shutdown`](crate::Client::shutdown).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn token(&self) -> Result<Option<i64>> {
        let key = self.kind.token_key.clone();
        self.inner()
            .redis
            .key_command(&self.kind.token_key, |c| {
                let key = key.clone();
                async move { c.get(key).await }
            })
            .await
    }
}

impl LockGuard<Fenced> {
    /// The fencing token of this acquisition: strictly greater than every
    /// token handed out before it, by any client (Java ones included), also
    /// across a loss of the counter, except as docs/PROTOCOL.md §6.2 says.
    pub fn fencing_token(&self) -> i64 {
        self.hold().token().unwrap_or_default()
    }
}

impl Protocol for Fenced {
    fn kind_label(&self) -> &'static str {
        "fenced_lock"
    }

    fn keys(&self) -> &LockKeys {
        &self.rlock.keys
    }

    fn acquire_call(&self, _: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        let keys = [self.rlock.name(), &self.token_key];
        lease_owner_call(&FENCED_LOCK, &keys, take.field, take.lease_ms)
    }

    /// `{-1, token}` acquired, `{ttl, -1}` busy. Success is read from the
    /// token, so a foreign lock without TTL (PTTL -1) is never taken for ours.
    fn read_acquire(&self, reply: Value) -> Result<Attempt> {
        match &reply {
            Value::Array(items) => {
                if let [Value::Integer(count), Value::Integer(token)] = items.as_slice() {
                    if let (Some(count), true) = (hold_count(*count), *token > 0) {
                        return Ok(Attempt::Acquired {
                            count,
                            token: Some(*token),
                        });
                    }
                }
            }
            Value::Integer(ttl) => return Ok(Attempt::Busy(*ttl)),
            _ => {}
        }
        Err(Error::Protocol(format!("fenced lock replied {reply:?}")))
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        self.rlock.unlock_call(env, unlock)
    }

    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall {
        self.rlock.force_unlock_call(env)
    }
}
