//! The seam between the engine and the lock kinds: what one kind of lock
//! is on the wire ([`Protocol`]: its keys, the script calls it builds from a
//! [`ScriptEnv`], how its waiters wait and how its holds are renewed), and
//! what its acquire script can answer ([`Attempt`]).
//!
//! A kind builds calls and reads replies; it sends nothing. The engine
//! (`raw`) runs them, so each kind's calls can be checked without a server.

use std::time::Duration;

use fred::types::{Key, Value};

use crate::base::backoff::BackOffState;
use crate::base::error::{Error, Result};
use crate::base::keys::LockKeys;
use crate::base::owner::Owner;
use crate::connection::script::script;
use crate::connection::script::ScriptCall;
use crate::engine::registry::Renewal;
use crate::engine::script_env::ScriptEnv;

// The scripts this module runs (`lua/`, embedded at build time).
script!(RENEW, "args.lua", "renew.lua");
script!(IS_LOCKED, "is_locked.lua");

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Attempt {
    /// Acquired or re-entered: the owner field's hold count after it (1:
    /// the field was absent, a fresh take); `token` for fenced locks.
    Acquired { count: u32, token: Option<i64> },
    /// Held by someone else; wait at most this many ms (negative: unknown).
    Busy(i64),
    /// Free, but another waiter is next in line (fair lock): it takes the
    /// lock at once, or, if it is dead, its turn ends in this many ms. Its
    /// taking the lock is not announced, so re-check soon, backing off.
    NextInLine(i64),
}

/// Whether an attempt may join a wait queue (fair locks) or only try.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AttemptMode {
    /// Try without waiting (Redisson's `tryLock()`).
    Once,
    /// Part of a wait of this long (`None`: no time limit); a fair lock
    /// enqueues with it.
    Waiting { wait: Option<Duration> },
}

/// How a waiter learns that trying again may succeed.
pub(crate) enum Waiting<'a> {
    /// Subscribe to this channel; unlocks publish on it.
    Channel(std::borrow::Cow<'a, str>),
    /// No messages: sleep per this back-off between attempts (spin lock).
    BackOff(Box<BackOffState>),
}

/// One acquire attempt's arguments.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Take<'a> {
    /// The owner field.
    pub field: &'a str,
    /// The lease in milliseconds (the `PEXPIRE` value).
    pub lease_ms: i64,
    /// How the caller waits.
    pub mode: AttemptMode,
}

/// One release's arguments (the unlock script's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unlock<'a> {
    /// The owner field.
    pub field: &'a str,
    /// The lease of the hold released, in milliseconds (sizes the latch's
    /// TTL).
    pub lease_ms: i64,
    /// The release's unlock latch key.
    pub latch: &'a str,
    /// Where [`Protocol::releases_to_need`] and known: how long the owner's
    /// remaining holds need to last, in milliseconds.
    pub need_ms: Option<i64>,
}

/// The Redis side of one lock type.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// The kind, as the `kind` field of spans and label of metrics: the
    /// name of the client method that makes it (`lock`, `fair_lock`, …).
    fn kind_label(&self) -> &'static str;

    /// The lock's keys and channel.
    fn keys(&self) -> &LockKeys;

    /// The lock's name (`N`).
    fn name(&self) -> &str {
        &self.keys().name
    }

    /// The owner field for `owner`: `<clientId>:<ownerId>`, plus any suffix.
    fn field(&self, env: &ScriptEnv, owner: Owner) -> String {
        env.field(owner)
    }

    /// The acquire script for one attempt.
    fn acquire_call(&self, env: &ScriptEnv, take: Take<'_>) -> ScriptCall;

    /// Read the acquire script's reply (`{count}`: acquired; integer: busy
    /// TTL).
    fn read_acquire(&self, reply: Value) -> Result<Attempt> {
        read_count_or_ttl(self.kind_label(), reply)
    }

    /// How a waiter with `field` waits: by default on the lock's channel.
    fn waiting(&self, _field: &str) -> Waiting<'_> {
        Waiting::Channel(self.keys().channel.as_str().into())
    }

    /// The channel on which every release and forced unlock of this lock
    /// publishes, which a holder may watch to learn at once that its hold is
    /// gone; `None` where there is none (the fair lock publishes to its next
    /// waiter only, the spin lock not at all).
    fn release_channel(&self) -> Option<&str> {
        Some(&self.keys().channel)
    }

    /// The unlock script: one hold of the field away, made idempotent by
    /// its latch ([`Unlock`]).
    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall;

    /// Whether an unlock sets the time the owner's remaining holds keep to
    /// what they need (the read lock, docs/PROTOCOL.md §5.3); other kinds'
    /// unlocks leave a held key's TTL as it is.
    fn releases_to_need(&self) -> bool {
        false
    }

    /// The prefix of this lock's unlock latch keys (made when unlocking:
    /// every lock handle would otherwise carry it).
    fn latch_prefix(&self) -> String {
        crate::base::layout::unlock_latch_prefix(&self.keys().name)
    }

    /// Cleanup when a waiter that waited `wait` (`None`: without a time
    /// limit) gives up (fair lock: leave the queue), and how long trying it
    /// is worth in the background.
    fn give_up_call(
        &self,
        _env: &ScriptEnv,
        _field: &str,
        _wait: Option<Duration>,
    ) -> Option<(ScriptCall, Duration)> {
        None
    }

    /// Whether anyone holds the lock; replies 1 or 0.
    fn is_locked_call(&self) -> ScriptCall {
        ScriptCall::new(&IS_LOCKED, &[self.name()], Vec::new())
    }

    /// The forced unlock script; replies 1 if something was unlocked.
    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall;

    /// How the watchdog renews a hold of this lock.
    fn renewal(&self) -> Renewal {
        HASH_RENEWAL
    }
}

/// The usual acquire reply of the lock labelled `label`: `{count}`
/// acquired (or re-entered), an integer the holder's TTL.
pub(crate) fn read_count_or_ttl(label: &str, reply: Value) -> Result<Attempt> {
    match reply {
        Value::Integer(ttl) => Ok(Attempt::Busy(ttl)),
        Value::Array(items) => match items.as_slice() {
            [Value::Integer(count)] => match hold_count(*count) {
                Some(count) => Ok(Attempt::Acquired { count, token: None }),
                None => Err(Error::Protocol(format!("{label} replied {items:?}"))),
            },
            _ => Err(Error::Protocol(format!("{label} replied {items:?}"))),
        },
        other => Err(Error::Protocol(format!("{label} replied {other:?}"))),
    }
}

/// A hold count replied by an acquire script: at least 1.
pub(crate) fn hold_count(count: i64) -> Option<u32> {
    u32::try_from(count).ok().filter(|c| *c >= 1)
}

/// Renewal of a hash held by one field (RLock, fair, write, spin, fenced):
/// `HEXISTS N field` then `PEXPIRE N max(PTTL N, lease)`; `KEYS = N…`,
/// `ARGV = lease, field…`.
pub(crate) static HASH_RENEWAL: Renewal = Renewal {
    script: &RENEW,
    append: |name, field, keys, args| {
        keys.push(Key::from(name));
        args.push(Value::from(field));
    },
};
