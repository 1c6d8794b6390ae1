//! [`RLock`]: Redisson's reentrant lock, and the acquire/release protocol
//! every guard goes through.

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{HashesInterface, KeysInterface};
use fred::types::{Key, Value};
use futures::FutureExt;
use tokio::time::Instant;

use crate::client::{Client, Inner};
use crate::detach::FinishOnDrop;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::names::LockKeys;
use crate::owner::Owner;
use crate::script;
use crate::watchdog::Lease;

/// A handle to one Redisson reentrant lock (`RLock`) by name. Cheap to clone.
///
/// Every acquisition returns a [`LockGuard`]. By default each acquisition
/// gets a fresh [`Owner`], so two futures can never share a hold by accident,
/// even inside one task; re-enter through [`LockGuard::reenter`]. Use
/// [`with_owner`](Self::with_owner) for Redisson's explicit `threadId` model.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
///
/// let lock = client.lock("inventory")?;
/// // Wait up to 2 s; hold for at most 10 s (no watchdog).
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
///     // ... critical section ...
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RLock {
    pub(crate) client: Client,
    pub(crate) keys: Arc<LockKeys>,
    owner: Option<Owner>,
}

/// The remaining time to live of a lock's key (`PTTL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist: nobody holds the lock.
    NotLocked,
    /// The key exists without expiry (someone removed its TTL).
    NoExpiry,
    /// The key expires after this long.
    Expires(Duration),
}

/// One run of the acquire script.
#[derive(Debug)]
enum Attempt {
    Acquired,
    /// Held by someone else; their remaining TTL in ms (-1: no TTL).
    Busy(i64),
}

impl RLock {
    pub(crate) fn new(client: Client, name: &str) -> Result<RLock> {
        Ok(RLock {
            client,
            keys: Arc::new(LockKeys::new(name)?),
            owner: None,
        })
    }

    /// The lock's name (the Redis key of its hash).
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The channel its unlocks are published on.
    pub fn channel(&self) -> &str {
        &self.keys.channel
    }

    /// A handle whose acquisitions all use `owner`, like Redisson's
    /// `lockAsync(threadId)` family: acquiring again with the same owner
    /// re-enters instead of waiting. Each guard still releases one hold.
    pub fn with_owner(&self, owner: Owner) -> RLock {
        RLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The owner field (`<clientId>:<ownerId>`) this client writes for `owner`.
    pub fn owner_field(&self, owner: Owner) -> String {
        self.inner().field(owner)
    }

    /// Wait as long as it takes; the watchdog keeps the lock while held.
    pub async fn lock(&self) -> Result<LockGuard> {
        self.acquire(None, Lease::Watchdog)
            .await
            .and_then(expect_guard)
    }

    /// Wait as long as it takes; the lock expires `lease` after acquisition
    /// unless unlocked first (no watchdog).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let lease = fixed_lease(lease)?;
        self.acquire(None, lease).await.and_then(expect_guard)
    }

    /// Try once, without waiting; watchdog-renewed if acquired.
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Some(Duration::ZERO), Lease::Watchdog).await
    }

    /// Wait up to `wait` (zero: try once). With `lease`, the lock expires that
    /// long after acquisition; without, the watchdog keeps it while held.
    pub async fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let lease = match lease {
            Some(lease) => fixed_lease(lease)?,
            None => Lease::Watchdog,
        };
        self.acquire(Some(wait), lease).await
    }

    /// Delete the lock whoever holds it, and wake a waiter. Returns whether it
    /// was held. Local holders see their guards' lost signal fire.
    pub async fn force_unlock(&self) -> Result<bool> {
        let inner = self.inner();
        inner.holds.lose_all(&self.keys.name);
        let reply = inner
            .redis
            .retrying(|| {
                inner.redis.eval(
                    &script::FORCE_UNLOCK,
                    vec![
                        Key::from(self.keys.name.as_str()),
                        Key::from(self.keys.channel.as_str()),
                    ],
                    vec![Value::from("0"), Value::from(inner.publish_command())],
                )
            })
            .await?;
        Ok(matches!(reply, Value::Integer(1)))
    }

    /// Whether anyone holds the lock (`EXISTS`).
    pub async fn is_locked(&self) -> Result<bool> {
        let name = self.keys.name.clone();
        let n: i64 = self
            .inner()
            .redis
            .key_command(&self.keys.name, |c| {
                let name = name.clone();
                async move { c.exists(name).await }
            })
            .await?;
        Ok(n == 1)
    }

    /// How long until the lock expires (`PTTL`).
    pub async fn remain_time_to_live(&self) -> Result<Ttl> {
        let name = self.keys.name.clone();
        let ttl: i64 = self
            .inner()
            .redis
            .key_command(&self.keys.name, |c| {
                let name = name.clone();
                async move { c.pttl(name).await }
            })
            .await?;
        Ok(match ttl {
            -2 => Ttl::NotLocked,
            -1 => Ttl::NoExpiry,
            ms => Ttl::Expires(Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        })
    }

    /// How many times `owner` holds the lock (`HGET`; 0 if not held).
    pub async fn hold_count(&self, owner: Owner) -> Result<u32> {
        let name = self.keys.name.clone();
        let field = self.owner_field(owner);
        let count: Option<i64> = self
            .inner()
            .redis
            .key_command(&self.keys.name, |c| {
                let (name, field) = (name.clone(), field.clone());
                async move { c.hget(name, field).await }
            })
            .await?;
        Ok(count.map_or(0, |c| u32::try_from(c).unwrap_or(0)))
    }

    /// Whether `owner` holds the lock (`HEXISTS`).
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        let name = self.keys.name.clone();
        let field = self.owner_field(owner);
        self.inner()
            .redis
            .key_command(&self.keys.name, |c| {
                let (name, field) = (name.clone(), field.clone());
                async move { c.hexists(name, field).await }
            })
            .await
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.client.inner
    }

    /// The acquire loop (PROTOCOL.md §2.8): try; subscribe; then try again
    /// and wait for a message, the holder's TTL or the deadline, whichever
    /// comes first. `wait == None` waits forever.
    async fn acquire(&self, wait: Option<Duration>, lease: Lease) -> Result<Option<LockGuard>> {
        let deadline = wait.map(|w| Instant::now() + w);
        let owner = self.owner.unwrap_or_else(Owner::generate);
        if let (Attempt::Acquired, sent_at) = self.attempt(owner, lease).await? {
            return Ok(Some(self.guard(owner, lease, sent_at)));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        let subscribing = self.inner().hub.subscribe(&self.keys.channel);
        let subscription = match deadline {
            None => subscribing.await?,
            Some(d) => match tokio::time::timeout_at(d, subscribing).await {
                Ok(subscription) => subscription?,
                Err(_) => return Ok(None),
            },
        };
        // Never wait longer than one watchdog period without re-checking: a
        // message can be lost (reconnect gap, PUBLISH/SPUBLISH mismatch).
        let cap = self.inner().config.lock_watchdog_timeout;
        loop {
            let notified = subscription.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let ttl = match self.attempt(owner, lease).await? {
                (Attempt::Acquired, sent_at) => return Ok(Some(self.guard(owner, lease, sent_at))),
                (Attempt::Busy(ttl), _) => ttl,
            };
            let now = Instant::now();
            let mut pause = u64::try_from(ttl)
                .map_or(cap, Duration::from_millis)
                .min(cap);
            if let Some(d) = deadline {
                if now >= d {
                    return Ok(None);
                }
                pause = pause.min(d - now);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One run of the acquire script, with the time it was sent. If the
    /// caller goes away before the reply, the call is finished in the
    /// background and a hold it took is released.
    async fn attempt(&self, owner: Owner, lease: Lease) -> Result<(Attempt, Instant)> {
        let inner = self.inner().clone();
        let field = inner.field(owner);
        let lease_ms = match lease {
            Lease::Fixed(d) => d,
            Lease::Watchdog => inner.config.lock_watchdog_timeout,
        };
        let keys = vec![Key::from(self.keys.name.as_str())];
        let args = vec![
            Value::Integer(millis(lease_ms)),
            Value::from(field.as_str()),
        ];
        let sent_at = Instant::now();
        let call = {
            let inner = inner.clone();
            async move {
                inner
                    .redis
                    .eval(&script::LOCK, keys, args)
                    .await
                    .and_then(parse_attempt)
            }
        };
        let orphan = {
            let (lock, field) = (self.clone(), field.clone());
            move |outcome: Result<Attempt>| {
                async move {
                    if let Ok(Attempt::Acquired) = outcome {
                        let inner = lock.inner();
                        let _status = inner.holds.acquired(&lock.keys.name, owner, &field, lease, sent_at);
                        if let Err(e) = release(inner, &lock.keys, owner).await {
                            tracing::warn!(lock = %lock.keys.name, error = %e, "releasing a lock acquired by a cancelled call failed");
                        }
                    }
                }
                .boxed()
            }
        };
        let outcome = FinishOnDrop::new(inner.runtime.clone(), call, orphan).await;
        match outcome {
            Ok(attempt) => Ok((attempt, sent_at)),
            Err(e) => {
                if e.is_transient() && inner.holds.count(&self.keys.name, owner) == 0 {
                    // The script may have run with its reply lost. The owner
                    // held nothing before, so releasing once undoes exactly
                    // that acquisition, and is harmless if it never ran.
                    let lock = self.clone();
                    inner.runtime.spawn(async move {
                        let _ = release(lock.inner(), &lock.keys, owner).await;
                    });
                }
                Err(e)
            }
        }
    }

    fn guard(&self, owner: Owner, lease: Lease, sent_at: Instant) -> LockGuard {
        let field = self.inner().field(owner);
        let status = self
            .inner()
            .holds
            .acquired(&self.keys.name, owner, &field, lease, sent_at);
        LockGuard::new(self.with_owner(owner), owner, lease, status)
    }

    /// Re-enter with `owner`'s existing hold: try once, never wait.
    pub(crate) async fn reenter(&self, owner: Owner, lease: Lease) -> Result<LockGuard> {
        match self.attempt(owner, lease).await? {
            (Attempt::Acquired, sent_at) => Ok(self.guard(owner, lease, sent_at)),
            (Attempt::Busy(_), _) => Err(Error::NotHeld {
                name: self.keys.name.clone(),
                owner: self.owner_field(owner),
            }),
        }
    }
}

/// Outcome of an unlock.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The count went down but the owner still holds the lock.
    StillHeld,
    /// The lock was deleted and waiters notified.
    Released,
}

/// Take one hold of `owner` away: the unlock script with a fresh latch id,
/// retried with that same id after transient errors, then the latch deleted.
pub(crate) async fn release(inner: &Arc<Inner>, keys: &LockKeys, owner: Owner) -> Result<Unlocked> {
    let registry = inner.holds.released(&keys.name, owner);
    if let Some(run) = registry.wait_for_run {
        // A renewal that includes this hold is in flight: let it land first,
        // so no renewal scheduled before the unlock can run after it.
        inner.holds.wait_for_run(run).await;
    }
    let field = inner.field(owner);
    let latch = keys.new_latch();
    let lease = registry.lease.unwrap_or(inner.config.lock_watchdog_timeout);
    let reply = inner
        .redis
        .retrying(|| {
            inner.redis.eval(
                &script::UNLOCK,
                vec![
                    Key::from(keys.name.as_str()),
                    Key::from(keys.channel.as_str()),
                    Key::from(latch.as_str()),
                ],
                vec![
                    Value::from("0"),
                    Value::Integer(millis(lease)),
                    Value::from(field.as_str()),
                    Value::from(inner.publish_command()),
                    Value::Integer(millis(inner.config.latch_ttl())),
                ],
            )
        })
        .await?;
    inner.redis.delete_later(latch);
    match reply {
        Value::Null => Err(Error::NotHeld {
            name: keys.name.clone(),
            owner: field,
        }),
        Value::Integer(0) => Ok(Unlocked::StillHeld),
        Value::Integer(1) => Ok(Unlocked::Released),
        other => Err(Error::Protocol(format!("unlock replied {other:?}"))),
    }
}

fn parse_attempt(reply: Value) -> Result<Attempt> {
    match reply {
        Value::Null => Ok(Attempt::Acquired),
        Value::Integer(ttl) => Ok(Attempt::Busy(ttl)),
        other => Err(Error::Protocol(format!("lock replied {other:?}"))),
    }
}

fn expect_guard(guard: Option<LockGuard>) -> Result<LockGuard> {
    guard.ok_or_else(|| Error::Protocol("an unbounded wait ended without the lock".into()))
}

/// A caller's lease must be at least one millisecond (PEXPIRE's unit).
fn fixed_lease(lease: Duration) -> Result<Lease> {
    if lease < Duration::from_millis(1) {
        return Err(Error::InvalidArgument(format!(
            "lease must be at least 1 ms, got {lease:?}"
        )));
    }
    Ok(Lease::Fixed(lease))
}

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
