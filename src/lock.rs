//! [`Lock`]: the handle every lock type shares, and [`RLock`], Redisson's
//! reentrant lock.

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Value;

use crate::client::{Client, Inner};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::names::LockKeys;
use crate::owner::Owner;
use crate::raw::{AttemptMode, Protocol, RawLock, Waiting};
use crate::script::ScriptCall;
use crate::script::{self, millis};
use crate::watchdog::Lease;

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// What kind of lock a [`Lock`] is: [`Reentrant`], [`Fair`](crate::Fair),
/// [`Read`](crate::Read), [`Write`](crate::Write), [`Spin`](crate::Spin) or
/// [`Fenced`](crate::Fenced). Sealed: the kinds are Redisson's.
pub trait Kind: sealed::Sealed + Clone + Send + Sync + 'static {}

/// A handle to one lock by name. Cheap to clone. The kind decides the Redis
/// layout and scripts; every kind shares these methods.
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
pub struct Lock<K: Kind> {
    pub(crate) raw: RawLock,
    pub(crate) kind: K,
}

/// Redisson's reentrant lock (`RLock`, `getLock(name)`).
pub type RLock = Lock<Reentrant>;

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

impl<K: Kind> Lock<K> {
    pub(crate) fn from_parts(raw: RawLock, kind: K) -> Lock<K> {
        Lock { raw, kind }
    }

    /// The lock's name (the Redis key of its hash).
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &Client {
        &self.raw.client
    }

    /// A handle whose acquisitions all use `owner`, like Redisson's
    /// `lockAsync(threadId)` family: acquiring again with the same owner
    /// re-enters instead of waiting. Each guard still releases one hold.
    pub fn with_owner(&self, owner: Owner) -> Lock<K> {
        Lock {
            raw: self.raw.with_owner(owner),
            kind: self.kind.clone(),
        }
    }

    /// The hash field this client writes for `owner` on this lock.
    pub fn owner_field(&self, owner: Owner) -> String {
        self.raw.proto.field(self.inner(), owner)
    }

    /// Wait as long as it takes; the watchdog keeps the lock while held.
    pub async fn lock(&self) -> Result<LockGuard> {
        self.raw
            .acquire(None, Lease::Watchdog)
            .await
            .and_then(expect_guard)
    }

    /// Wait as long as it takes; the lock expires `lease` after acquisition
    /// unless unlocked first (no watchdog).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let lease = fixed_lease(lease)?;
        self.raw.acquire(None, lease).await.and_then(expect_guard)
    }

    /// Try once, without waiting; watchdog-renewed if acquired.
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.raw
            .acquire(Some(Duration::ZERO), Lease::Watchdog)
            .await
    }

    /// Wait up to `wait` (zero: try once; above
    /// [`MAX_DURATION`](crate::MAX_DURATION): without a time limit). With
    /// `lease` (1 ms to `MAX_DURATION`), the lock expires that long after
    /// acquisition; without, the watchdog keeps it while held.
    ///
    /// Transient failures (a lost connection, a timed-out attempt) do not end
    /// the wait while time remains: the attempt is undone if it may have
    /// acquired, and retried. The wait ends with the transient error when
    /// its time is up, or after `retry_attempts` failures in a row.
    pub async fn try_lock_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let lease = match lease {
            Some(lease) => fixed_lease(lease)?,
            None => Lease::Watchdog,
        };
        self.raw.acquire(Some(wait), lease).await
    }

    /// Unlock whoever holds it, and wake a waiter. Returns whether it was
    /// held. Local holders see their guards' lost signal fire.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.raw.force_unlock().await
    }

    /// Whether anyone holds the lock.
    pub async fn is_locked(&self) -> Result<bool> {
        let inner = self.inner();
        let reply = inner
            .redis
            .retrying(|| inner.redis.eval(|| self.raw.proto.is_locked()))
            .await?;
        Ok(matches!(reply, Value::Integer(1)))
    }

    /// How long until the lock's key expires (`PTTL`).
    pub async fn remain_time_to_live(&self) -> Result<Ttl> {
        let name = self.name().to_owned();
        let ttl: i64 = self
            .inner()
            .redis
            .key_command(self.name(), |c| {
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
        self.raw.hold_count(&self.owner_field(owner)).await
    }

    /// Whether `owner` holds the lock (`HEXISTS`).
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.raw.is_held(&self.owner_field(owner)).await
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        self.raw.inner()
    }
}

/// The [`RLock`] kind: Redisson's reentrant lock (PROTOCOL.md §2).
#[derive(Clone)]
pub struct Reentrant {
    keys: Arc<LockKeys>,
}

impl sealed::Sealed for Reentrant {}
impl Kind for Reentrant {}

impl RLock {
    pub(crate) fn new(client: Client, name: &str) -> Result<RLock> {
        let keys = Arc::new(LockKeys::new(name)?);
        let raw = RawLock::new(client, Arc::new(ReentrantProtocol { keys: keys.clone() }));
        Ok(Lock::from_parts(raw, Reentrant { keys }))
    }

    /// The channel its unlocks are published on (`redisson_lock__channel:{N}`).
    pub fn channel(&self) -> &str {
        &self.kind.keys.channel
    }
}

/// RLock's scripts (PROTOCOL.md §2.2, §2.3, §2.5).
pub(crate) struct ReentrantProtocol {
    pub keys: Arc<LockKeys>,
}

impl Protocol for ReentrantProtocol {
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
            Value::Integer(millis(inner.config.latch_ttl())),
        ],
    )
}

fn expect_guard(guard: Option<LockGuard>) -> Result<LockGuard> {
    guard.ok_or_else(|| Error::Protocol("an unbounded wait ended without the lock".into()))
}

/// A caller's lease: from one millisecond (PEXPIRE's unit) to
/// [`MAX_DURATION`](crate::MAX_DURATION).
pub(crate) fn fixed_lease(lease: Duration) -> Result<Lease> {
    if lease < Duration::from_millis(1) || lease > crate::MAX_DURATION {
        return Err(Error::InvalidArgument(format!(
            "lease must be from 1 ms to 100 years, got {lease:?}"
        )));
    }
    Ok(Lease::Fixed(lease))
}
