//! [`FairLock`]: Redisson's `RedissonFairLock` and `RedissonNonReentrantFairLock`
//! (docs/PROTOCOL.md §4): RLock's hash plus a FIFO queue of waiters across all
//! clients, each waiter woken on its own channel.
//!
//! Where Redisson's fair lock can stall (docs/PROTOCOL.md §13.2 Q3, Q4), this side does better
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
use std::time::Duration;

use fred::types::Value;

use crate::base::error::{Error, Result, NON_REENTRANT};
use crate::base::keys::LockKeys;
use crate::base::layout;
use crate::base::time::epoch_ms;
use crate::client::Client;
use crate::connection::script::{millis, script, ScriptCall};
use crate::engine::protocol::{
    read_count_or_ttl, Attempt, AttemptMode, Protocol, Take, Unlock, Waiting,
};
use crate::engine::script_env::ScriptEnv;
use crate::locks::kind::{sealed, Kind, ReentrantKind};
use crate::locks::lock::Lock;

// The scripts this module runs (`lua/`, embedded at build time).
script!(FAIR_LOCK, "args.lua", "fair_purge.lua", "fair_lock.lua");
script!(FAIR_LEAVE, "args.lua", "fair_leave.lua");
script!(FAIR_UNLOCK, "args.lua", "fair_purge.lua", "fair_unlock.lua");
script!(
    FAIR_FORCE_UNLOCK,
    "args.lua",
    "fair_purge.lua",
    "fair_force_unlock.lua"
);

/// Redisson's fair lock (`getFairLock(name)`).
pub type FairLock = Lock<Fair>;

/// Redisson 4.7's non-reentrant fair lock (`getNonReentrantFairLock(name)`):
/// the fair lock's layout, but the holder taking it again is refused with
/// [`Error::NotReentrant`].
pub type NonReentrantFairLock = Lock<NonReentrantFair>;

/// The [`FairLock`] kind and its scripts.
#[derive(Debug)]
pub struct Fair {
    lock: LockKeys,
    /// `redisson_lock_queue:{N}`.
    queue: String,
    /// `redisson_lock_timeout:{N}`.
    timeouts: String,
    reentrant: bool,
}

impl sealed::Sealed for Fair {}
impl Kind for Fair {}
impl ReentrantKind for Fair {}

/// The [`NonReentrantFairLock`] kind.
#[derive(Debug)]
pub struct NonReentrantFair {
    /// Its protocol: the fair lock's, refusing re-entry.
    fair: Arc<Fair>,
}

impl sealed::Sealed for NonReentrantFair {}
impl Kind for NonReentrantFair {}

impl Fair {
    fn new(name: &str, reentrant: bool) -> Result<Fair> {
        Ok(Fair {
            lock: LockKeys::new(name)?,
            queue: layout::fair_queue(name),
            timeouts: layout::fair_timeouts(name),
            reentrant,
        })
    }

    fn keys(&self) -> [&str; 3] {
        [&self.lock.name, &self.queue, &self.timeouts]
    }
}

impl Client {
    /// A handle to the fair lock `name` (Redisson's `getFairLock(name)`):
    /// waiters of all clients get it in the order they queued.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn fair_lock(&self, name: &str) -> Result<FairLock> {
        let kind = Arc::new(Fair::new(&self.map_name(name)?, true)?);
        Ok(Lock::new(self.clone(), kind.clone(), kind))
    }

    /// A fair lock that refuses re-entry with [`Error::NotReentrant`]
    /// (Redisson 4.7's `getNonReentrantFairLock(name)`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn non_reentrant_fair_lock(&self, name: &str) -> Result<NonReentrantFairLock> {
        let fair = Arc::new(Fair::new(&self.map_name(name)?, false)?);
        let kind = Arc::new(NonReentrantFair { fair: fair.clone() });
        Ok(Lock::new(self.clone(), kind, fair))
    }
}

/// Wire accessors of both fair kinds, for tests and inspection.
macro_rules! fair_accessors {
    ($kind:ty, $fair:ident => $get:expr) => {
        impl Lock<$kind> {
            /// The wait queue's key (`redisson_lock_queue:{N}`, a list of owner
            /// fields), after the name mapper: `LRANGE` shows who waits, in order.
            pub fn queue_key(&self) -> &str {
                let $fair = &*self.kind;
                &$get.queue
            }

            /// The waiter deadlines' key (`redisson_lock_timeout:{N}`, a sorted set
            /// of owner fields by the time each leaves the queue if it stops asking).
            pub fn timeout_key(&self) -> &str {
                let $fair = &*self.kind;
                &$get.timeouts
            }

            /// The channel the waiter with this owner field is woken on
            /// (`redisson_lock__channel:{N}:<field>`).
            pub fn waiter_channel(&self, field: &str) -> String {
                let $fair = &*self.kind;
                format!("{}:{field}", $get.lock.channel)
            }
        }
    };
}
fair_accessors!(Fair, f => f);
fair_accessors!(NonReentrantFair, f => f.fair);

/// Redisson's thread-wait time: the caller's wait, else
/// `fair_lock_wait_timeout` for a wait without a time limit.
fn thread_wait(env: &ScriptEnv, wait: Option<Duration>) -> Duration {
    wait.unwrap_or(env.fair_wait())
}

impl Protocol for Fair {
    fn kind_label(&self) -> &'static str {
        if self.reentrant {
            "fair_lock"
        } else {
            "non_reentrant_fair_lock"
        }
    }

    fn keys(&self) -> &LockKeys {
        &self.lock
    }

    fn release_channel(&self) -> Option<&str> {
        None
    }

    fn acquire_call(&self, env: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        // Trying once shifts deadlines by the default wait, as Redisson's tryLock() does.
        let (wait, queue) = match take.mode {
            AttemptMode::Once => (env.fair_wait(), "0"),
            AttemptMode::Waiting { wait } => (thread_wait(env, wait), "1"),
        };
        let mut args = vec![
            Value::Integer(take.lease_ms),
            Value::from(take.field),
            Value::Integer(millis(wait)),
            Value::Integer(epoch_ms()),
            Value::from(queue),
            env.publish(),
        ];
        if !self.reentrant {
            args.push(Value::from(NON_REENTRANT));
        }
        let [name, queue, timeouts] = self.keys();
        ScriptCall::new(
            &FAIR_LOCK,
            &[name, queue, timeouts, &self.lock.channel],
            args,
        )
    }

    fn read_acquire(&self, reply: Value) -> Result<Attempt> {
        match reply {
            Value::Array(items) if matches!(items.as_slice(), [Value::Integer(0), _]) => {
                match items.as_slice() {
                    [_, Value::Integer(ms)] => Ok(Attempt::NextInLine(*ms)),
                    _ => Err(Error::Protocol(format!("fair lock replied {items:?}"))),
                }
            }
            other => read_count_or_ttl(self.kind_label(), other),
        }
    }

    fn waiting(&self, field: &str) -> Waiting<'_> {
        Waiting::Channel(format!("{}:{field}", self.lock.channel).into())
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        ScriptCall::new(
            &FAIR_UNLOCK,
            &[
                &self.lock.name,
                &self.queue,
                &self.timeouts,
                &self.lock.channel,
                unlock.latch,
            ],
            vec![
                Value::from("0"),
                Value::from(unlock.field),
                Value::Integer(epoch_ms()),
                env.publish(),
                env.unlock_latch_ttl_ms(unlock.lease_ms),
            ],
        )
    }

    /// Leave the queue, shifting the others' deadlines by the wait this
    /// waiter queued with; worth trying for as long as the entry can matter:
    /// that wait, at least `fair_lock_wait_timeout` (after it, other clients
    /// purge the entry once it reaches the head).
    fn give_up_call(
        &self,
        env: &ScriptEnv,
        field: &str,
        wait: Option<Duration>,
    ) -> Option<(ScriptCall, Duration)> {
        let wait = thread_wait(env, wait);
        let call = ScriptCall::new(
            &FAIR_LEAVE,
            &[
                &self.queue,
                &self.timeouts,
                &self.lock.name,
                &self.lock.channel,
            ],
            vec![
                Value::from(field),
                Value::Integer(millis(wait)),
                env.publish(),
            ],
        );
        Some((call, wait.max(env.fair_wait())))
    }

    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall {
        ScriptCall::new(
            &FAIR_FORCE_UNLOCK,
            &[
                &self.lock.name,
                &self.queue,
                &self.timeouts,
                &self.lock.channel,
            ],
            vec![Value::from("0"), Value::Integer(epoch_ms()), env.publish()],
        )
    }
}
