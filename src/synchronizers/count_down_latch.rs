//! [`CountDownLatch`]: Redisson's `RCountDownLatch` (docs/PROTOCOL.md §7.3).
//!
//! Redis holds the count in the string key `N`; the last count-down deletes
//! it and publishes `0` on `redisson_countdownlatch__channel__{N}`, which
//! wakes every awaiter. Setting a count, and deleting the latch, publish `1`.
//! Redisson's awaiters ignore `1`, so a latch deleted while awaited hangs
//! them; ours wake on every message, re-check the count, and return
//! [`LatchOpened::Deleted`].

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Value;

use crate::base::error::{Error, Result};
use crate::base::layout;
use crate::client::Client;
use crate::connection::pubsub::Wake;
use crate::connection::script::{script, ScriptCall};
use crate::engine::acquire::acquire_with;
use crate::engine::acquire::waiter::Outcome;
use crate::engine::shared::Inner;
use crate::synchronizers::count::{get_count, integer, parse_count};
use crate::synchronizers::handle::{handle_accessors, Handle};

// The scripts this module runs (`lua/`, embedded at build time).
script!(LATCH_TRY_SET, "args.lua", "count.lua", "latch_try_set.lua");
script!(
    LATCH_COUNT_DOWN,
    "args.lua",
    "count.lua",
    "latch_count_down.lua"
);
script!(LATCH_DELETE, "args.lua", "latch_delete.lua");

/// The `kind` of spans and metrics.
const KIND: &str = "count_down_latch";

/// The largest count: 2^53 − 1, exact in Lua's numbers (Java takes a `long`).
const MAX_COUNT: u64 = (1 << 53) - 1;

/// How an await ended (see [`CountDownLatch::await_zero`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LatchOpened {
    /// The count is zero: it was counted down to zero (or the latch had not
    /// been set, or was already gone, when the call began: Redisson's
    /// `getCount()` is 0 then too).
    Zero,
    /// The latch was deleted while this call awaited it (Redisson's
    /// `delete()`, which publishes the "new count" message `1`). Java
    /// awaiters do not return in this case; ours do.
    Deleted,
}

/// A handle to Redisson's count-down latch `N` (`getCountDownLatch(name)`).
/// Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let shards = client.count_down_latch("import-2024-06")?;
/// shards.try_set_count(3).await?;
/// // ... each of 3 shards, in any service, Java or Rust, calls count_down() ...
/// # shards.count_down().await?;
/// match shards.await_zero().await? {
///     redisson_lock::LatchOpened::Zero => println!("every shard finished"),
///     redisson_lock::LatchOpened::Deleted => println!("the import was called off"),
///     other => println!("the wait ended: {other:?}"), // `#[non_exhaustive]`
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    shared: Arc<LatchShared>,
}

struct LatchShared {
    /// Its channel is `redisson_countdownlatch__channel__{N}`.
    handle: Handle,
}

handle_accessors!(CountDownLatch, "latch", Wake::Every);

impl Client {
    /// A handle to the count-down latch `name` (Redisson's
    /// `getCountDownLatch(name)`). No command is sent.
    ///
    /// Its channel is `redisson_countdownlatch__channel__{N}`, braces always
    /// added as Redisson does (in a Redis Cluster, a name that contains a
    /// hash tag then lands its channel in another slot; Java has the same
    /// limit, docs/PROTOCOL.md §7.3).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn count_down_latch(&self, name: &str) -> Result<CountDownLatch> {
        let handle = Handle::new(self, name, layout::latch_channel)?;
        Ok(CountDownLatch {
            shared: Arc::new(LatchShared { handle }),
        })
    }
}

impl CountDownLatch {
    /// Set the count if the latch does not exist (Redisson's
    /// `trySetCount`); returns whether it was set. Publishes `1`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a count of 0 or above 2^53 − 1, before
    /// anything is sent; [`Error::WrongType`] if the key holds something
    /// other than a count; a transient error at once (not retried: a retry of
    /// a call that ran would answer `false`).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have set the count.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::InvalidArgument(format!(
                "a latch count must be from 1 to {MAX_COUNT}, got {count}"
            )));
        }
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let reply = self
            .eval(&LATCH_TRY_SET, |inner| {
                vec![Value::from("1"), Value::Integer(count), inner.env.publish()]
            })
            .await?;
        Ok(integer(reply, "latch trySetCount")? == 1)
    }

    /// Count down by one (Redisson's `countDown`): at zero the latch is
    /// deleted and `0` published, waking every awaiter. A latch that does not
    /// exist stays so.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something other than a count; a
    /// transient error at once (not retried, as in Redisson: a retry of a
    /// call that ran would count down twice).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have counted down.
    pub async fn count_down(&self) -> Result<()> {
        self.eval(&LATCH_COUNT_DOWN, |inner| {
            vec![Value::from("0"), inner.env.publish()]
        })
        .await
        .map(drop)
    }

    /// The count now (`GET`; 0 if the latch does not exist).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something other than a count; a
    /// transient error after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    #[doc(alias = "getCount")]
    pub async fn count(&self) -> Result<i64> {
        get_count(self.inner(), &self.shared.handle.name).await
    }

    /// Delete the latch (Redisson's `delete`); returns whether it existed.
    /// Publishes `1`: our awaiters return [`LatchOpened::Deleted`] (Java's
    /// keep waiting).
    ///
    /// # Errors
    ///
    /// A transient error at once (not retried: a retry of a call that ran
    /// would answer `false`).
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have deleted the latch.
    pub async fn delete(&self) -> Result<bool> {
        let reply = self
            .eval(&LATCH_DELETE, |inner| {
                vec![Value::from("1"), inner.env.publish()]
            })
            .await?;
        Ok(integer(reply, "latch delete")? == 1)
    }

    /// Wait until the count is zero, as long as it takes (Redisson's
    /// `await()`). Returns at once if it is zero (or the latch does not
    /// exist); else subscribes and re-checks on every message of the latch,
    /// and at least every `lock_watchdog_timeout` in case a message was lost
    /// (where Java's `await()` could hang). Returns
    /// [`LatchOpened::Deleted`] if the latch was deleted meanwhile (its
    /// message seen), where Java's `await()` hangs.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something other than a count; a
    /// transient error once Redis has failed for longer than the retry
    /// budget; [`Error::Closed`] at shutdown.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind (its
    /// share of the channel subscription is released).
    #[doc(alias = "await")]
    #[doc(alias = "wait")]
    pub async fn await_zero(&self) -> Result<LatchOpened> {
        match self.await_within(None).await? {
            Some(opened) => Ok(opened),
            None => Err(Error::Internal(
                "a wait without a time limit ended early".into(),
            )),
        }
    }

    /// [`await_zero`](Self::await_zero) for at most `wait` (Redisson's
    /// `await(timeout)`; zero: check once; above
    /// [`MAX_DURATION`](crate::MAX_DURATION): no time limit). `None` if the
    /// time ran out with the count above zero.
    ///
    /// # Errors
    ///
    /// As [`await_zero`](Self::await_zero); transient failures are retried
    /// until the deadline, which then returns the last transient error.
    ///
    /// # Cancel safety
    ///
    /// As [`await_zero`](Self::await_zero).
    pub async fn await_for(&self, wait: Duration) -> Result<Option<LatchOpened>> {
        self.await_within(Some(wait)).await
    }

    async fn await_within(&self, wait: Option<Duration>) -> Result<Option<LatchOpened>> {
        let inner = self.inner();
        let name = &self.shared.handle.name;
        let wanted = self.shared.handle.wanted(KIND, Wake::Every, wait);
        // One GET per attempt: the wait loop retries transient errors itself,
        // within the caller's deadline.
        let done = acquire_with(inner, wanted, || async {
            // Boxed: fred's command future (about 5 KB) would otherwise be
            // part of every awaiter's future, several times over.
            let value: Option<String> = Box::pin(inner.redis.client.get(name.as_str()))
                .await
                .map_err(|e| inner.redis.error(e, name))?;
            // Gone: counted down to zero or deleted, each published with
            // its code, which tells the two apart.
            let gone = value.is_none();
            Ok(if parse_count(value, name)? > 0 {
                Outcome::Busy(None)
            } else if gone {
                Outcome::Announced(())
            } else {
                Outcome::Ready(())
            })
        })
        .await?;
        Ok(done.map(|d| match d.last_message {
            Some(1) => LatchOpened::Deleted,
            _ => LatchOpened::Zero,
        }))
    }

    /// Run a latch script once (no retries: see each caller).
    async fn eval(
        &self,
        script: &'static crate::connection::script::Script,
        args: impl Fn(&Inner) -> Vec<Value>,
    ) -> Result<Value> {
        let inner = self.inner();
        inner
            .redis
            .eval(|| {
                ScriptCall::new(
                    script,
                    &[&self.shared.handle.name, &self.shared.handle.channel],
                    args(inner),
                )
            })
            .await
    }
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.shared.handle.name)
            .finish()
    }
}
