//! [`FairLock`]: Redisson's `RedissonFairLock` and `RedissonNonReentrantFairLock`
//! (PROTOCOL.md §4): RLock's hash plus a FIFO queue of waiters across all
//! clients, each waiter woken on its own channel.
//!
//! Where Redisson's fair lock can stall (§13.2 Q3, Q4), this side does better
//! while writing exactly what Java clients expect: a waiter behind a dead
//! queue head sleeps until that head's deadline instead of spinning; a
//! waiter never sleeps past the holder's lease, since a lease expiry is not
//! announced and the next in line must take the lock then; when the lock is
//! free and another waiter is next in line, it re-checks after 5 ms,
//! doubling, until that waiter has taken it (or its deadline passed); a
//! waiter that gives up always shifts the others' deadlines by the wait it
//! enqueued with, and leaves the queue only after its last attempt has
//! landed (retried until it is known to have run); a head that leaves passes
//! a pending wake-up on; and every wait is bounded, so a lost notification
//! costs at most a deadline.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::types::Value;

use crate::client::{Client, Inner};
use crate::error::{Error, Result, NON_REENTRANT};
use crate::lock::{Kind, Lock};
use crate::names::{prefix_name, LockKeys};
use crate::raw::{Attempt, AttemptMode, Protocol, RawLock, Waiting};
use crate::script;
use crate::script::millis;
use crate::script::ScriptCall;

/// Redisson's fair lock (`getFairLock(name)`), or its non-reentrant variant
/// (`getNonReentrantFairLock(name)`, Redisson 4.7).
pub type FairLock = Lock<Fair>;

/// The [`FairLock`] kind.
#[derive(Clone)]
pub struct Fair {
    keys: Arc<FairKeys>,
}

impl crate::lock::sealed::Sealed for Fair {}
impl Kind for Fair {}

struct FairKeys {
    lock: LockKeys,
    /// `redisson_lock_queue:{N}`.
    queue: String,
    /// `redisson_lock_timeout:{N}`.
    timeouts: String,
    reentrant: bool,
}

impl FairLock {
    pub(crate) fn new(client: Client, name: &str, reentrant: bool) -> Result<FairLock> {
        let lock = LockKeys::new(name)?;
        let keys = Arc::new(FairKeys {
            queue: prefix_name("redisson_lock_queue", name),
            timeouts: prefix_name("redisson_lock_timeout", name),
            lock,
            reentrant,
        });
        let raw = RawLock::new(client, Arc::new(FairProtocol { keys: keys.clone() }));
        Ok(Lock::from_parts(raw, Fair { keys }))
    }

    /// The wait queue's key (`redisson_lock_queue:{N}`, a list of owner fields).
    pub fn queue_key(&self) -> &str {
        &self.kind.keys.queue
    }

    /// The waiter deadlines' key (`redisson_lock_timeout:{N}`, a sorted set).
    pub fn timeout_key(&self) -> &str {
        &self.kind.keys.timeouts
    }

    /// The channel the waiter with this owner field is woken on.
    pub fn waiter_channel(&self, field: &str) -> String {
        format!("{}:{field}", self.kind.keys.lock.channel)
    }

    /// Whether the holder may acquire again; `false` for the non-reentrant
    /// variant, which refuses with [`Error::NotReentrant`](crate::Error::NotReentrant).
    pub fn is_reentrant(&self) -> bool {
        self.kind.keys.reentrant
    }
}

struct FairProtocol {
    keys: Arc<FairKeys>,
}

impl FairProtocol {
    fn keys(&self) -> [&str; 3] {
        [&self.keys.lock.name, &self.keys.queue, &self.keys.timeouts]
    }
}

/// The caller's wall clock in epoch milliseconds, as Redisson's `now`.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

impl Protocol for FairProtocol {
    fn name(&self) -> &str {
        &self.keys.lock.name
    }

    fn acquire(&self, inner: &Inner, field: &str, lease_ms: i64, mode: AttemptMode) -> ScriptCall {
        // Trying once shifts deadlines by the default wait, as Redisson's tryLock() does.
        let (wait, queue) = match mode {
            AttemptMode::Once => (inner.config.fair_lock_wait_timeout, "0"),
            AttemptMode::Waiting { wait } => (wait, "1"),
        };
        let mut args = vec![
            Value::Integer(lease_ms),
            Value::from(field),
            Value::Integer(millis(wait)),
            Value::Integer(now_ms()),
            Value::from(queue),
        ];
        if !self.keys.reentrant {
            args.push(Value::from(NON_REENTRANT));
        }
        ScriptCall::new(&script::FAIR_LOCK, &self.keys(), args)
    }

    fn parse_acquire(&self, reply: Value) -> Result<Attempt> {
        match reply {
            Value::Null => Ok(Attempt::Acquired { token: None }),
            Value::Integer(ttl) => Ok(Attempt::Busy(ttl)),
            Value::Array(items) => match items.as_slice() {
                [Value::Integer(ms)] => Ok(Attempt::NextInLine(*ms)),
                _ => Err(Error::Protocol(format!("fair lock replied {items:?}"))),
            },
            other => Err(Error::Protocol(format!("fair lock replied {other:?}"))),
        }
    }

    fn waiting(&self, field: &str) -> Waiting {
        Waiting::Channel(format!("{}:{field}", self.keys.lock.channel))
    }

    fn release(&self, inner: &Inner, field: &str, lease_ms: i64, latch: &str) -> ScriptCall {
        ScriptCall::new(
            &script::FAIR_UNLOCK,
            &[
                &self.keys.lock.name,
                &self.keys.queue,
                &self.keys.timeouts,
                &self.keys.lock.channel,
                latch,
            ],
            vec![
                Value::from("0"),
                Value::Integer(lease_ms),
                Value::from(field),
                Value::Integer(now_ms()),
                Value::from(inner.publish_command()),
                Value::Integer(millis(inner.config.latch_ttl())),
            ],
        )
    }

    fn latch_prefix(&self) -> &str {
        &self.keys.lock.latch_prefix
    }

    fn gave_up(&self, inner: &Inner, field: &str, wait: Duration) -> Option<ScriptCall> {
        Some(ScriptCall::new(
            &script::FAIR_LEAVE,
            &[
                &self.keys.queue,
                &self.keys.timeouts,
                &self.keys.lock.name,
                &self.keys.lock.channel,
            ],
            vec![
                Value::from(field),
                Value::Integer(millis(wait)),
                Value::from(inner.publish_command()),
            ],
        ))
    }

    fn force_unlock(&self, inner: &Inner) -> ScriptCall {
        ScriptCall::new(
            &script::FAIR_FORCE_UNLOCK,
            &[
                &self.keys.lock.name,
                &self.keys.queue,
                &self.keys.timeouts,
                &self.keys.lock.channel,
            ],
            vec![
                Value::from("0"),
                Value::Integer(now_ms()),
                Value::from(inner.publish_command()),
            ],
        )
    }
}
