//! The raw lock layer: one acquire loop, one release path and one guard for
//! every lock type, driven by a [`Protocol`] that says which scripts to run
//! and how to wait (the shape of `lock_api`'s raw traits).
//!
//! A lock type (reentrant, fair, read, write, spin, fenced) is a `Protocol`
//! implementation: its keys, its acquire/unlock/force-unlock scripts, the
//! channel its waiters listen on (or a back-off for the spin lock), what to
//! do when a waiter gives up (the fair lock leaves its queue), and how the
//! watchdog renews it.

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::HashesInterface;
use fred::types::{Key, Value};
use futures::FutureExt;
use tokio::time::Instant;

use crate::client::{Client, Inner};
use crate::detach::FinishOnDrop;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::owner::Owner;
use crate::script::Script;
use crate::watchdog::{Lease, Renewal};

/// One script invocation.
#[derive(Clone)]
pub(crate) struct ScriptCall {
    pub script: &'static Script,
    pub keys: Vec<Key>,
    pub args: Vec<Value>,
}

impl ScriptCall {
    pub(crate) fn new(script: &'static Script, keys: &[&str], args: Vec<Value>) -> ScriptCall {
        ScriptCall {
            script,
            keys: keys.iter().map(|k| Key::from(*k)).collect(),
            args,
        }
    }
}

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Attempt {
    /// Acquired or re-entered; `token` for fenced locks.
    Acquired { token: Option<i64> },
    /// Held by someone else; wait at most this many ms (negative: unknown).
    Busy(i64),
}

/// Whether an attempt may join a wait queue (fair locks) or only try.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AttemptMode {
    /// Try without waiting (Redisson's `tryLock()`).
    Once,
    /// Part of a wait; a fair lock enqueues with this thread-wait time.
    Waiting { wait: Duration },
}

/// How a waiter learns that trying again may succeed.
pub(crate) enum Waiting {
    /// Subscribe to this channel; unlocks publish on it.
    Channel(String),
    /// No messages: sleep per this back-off between attempts (spin lock).
    Backoff(crate::spin::Backoff),
}

/// The Redis side of one lock type.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// The lock's name (`N`).
    fn name(&self) -> &str;

    /// The owner field for `owner`: `<clientId>:<ownerId>`, plus any suffix.
    fn field(&self, inner: &Inner, owner: Owner) -> String {
        inner.field(owner)
    }

    /// The acquire script for `field` with a lease of `lease_ms`.
    fn acquire(&self, inner: &Inner, field: &str, lease_ms: i64, mode: AttemptMode) -> ScriptCall;

    /// Read the acquire script's reply (nil: acquired; integer: busy TTL).
    fn parse_acquire(&self, reply: Value) -> Result<Attempt> {
        match reply {
            Value::Null => Ok(Attempt::Acquired { token: None }),
            Value::Integer(ttl) => Ok(Attempt::Busy(ttl)),
            other => Err(Error::Protocol(format!("lock replied {other:?}"))),
        }
    }

    /// How a waiter with `field` waits.
    fn waiting(&self, field: &str) -> Waiting;

    /// The unlock script: one hold of `field` away, latch at `latch`.
    fn release(&self, inner: &Inner, field: &str, lease_ms: i64, latch: &str) -> ScriptCall;

    /// The prefix of this lock's unlock latch keys.
    fn latch_prefix(&self) -> &str;

    /// Cleanup when a waiter gives up (fair lock: leave the queue).
    fn gave_up(&self, _inner: &Inner, _field: &str, _wait: Duration) -> Option<ScriptCall> {
        None
    }

    /// Whether anyone holds the lock; replies 1 or 0.
    fn is_locked(&self) -> ScriptCall {
        ScriptCall::new(&crate::script::IS_LOCKED, &[self.name()], Vec::new())
    }

    /// The forced unlock script; replies 1 if something was unlocked.
    fn force_unlock(&self, inner: &Inner) -> ScriptCall;

    /// How the watchdog renews a hold of this lock.
    fn renewal(&self) -> Renewal {
        Renewal::Hash
    }
}

/// A lock of some protocol, as seen from one client. Cheap to clone.
#[derive(Clone)]
pub(crate) struct RawLock {
    pub client: Client,
    pub proto: Arc<dyn Protocol>,
    /// Fixed owner for every acquisition, or a fresh one each time.
    pub owner: Option<Owner>,
}

impl RawLock {
    pub(crate) fn new(client: Client, proto: Arc<dyn Protocol>) -> RawLock {
        RawLock {
            client,
            proto,
            owner: None,
        }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.client.inner
    }

    pub(crate) fn name(&self) -> &str {
        self.proto.name()
    }

    pub(crate) fn with_owner(&self, owner: Owner) -> RawLock {
        RawLock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The acquire loop (PROTOCOL.md §2.8): try; subscribe; then try again
    /// and wait for a message, the holder's TTL or the deadline, whichever
    /// comes first. `wait == None` waits forever.
    pub(crate) async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<LockGuard>> {
        let start = Instant::now();
        let deadline = wait.map(|w| start + w);
        let owner = self.owner.unwrap_or_else(Owner::generate);
        let field = self.proto.field(self.inner(), owner);
        // Redisson's fair-lock thread-wait time: the caller's wait, else the default.
        let mode = match wait {
            Some(w) if w.is_zero() => AttemptMode::Once,
            Some(w) => AttemptMode::Waiting { wait: w },
            None => AttemptMode::Waiting {
                wait: self.inner().config.fair_lock_wait_timeout,
            },
        };
        // A waiter that goes away without the lock (error, deadline, or its
        // future dropped) runs the protocol's give-up step: a fair-lock
        // waiter may have joined the queue with its very first attempt.
        let mut leaving = GiveUp::new(self, &field, mode);
        let outcome = async {
            if let Some(guard) = self.try_acquire(owner, &field, lease, mode).await? {
                return Ok(Some(guard));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            self.wait_loop(owner, &field, lease, mode, deadline).await
        }
        .await;
        match &outcome {
            Ok(Some(_)) => leaving.disarm(),
            Ok(None) | Err(_) => leaving.run().await,
        }
        outcome
    }

    async fn wait_loop(
        &self,
        owner: Owner,
        field: &str,
        lease: Lease,
        mode: AttemptMode,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>> {
        // Never wait longer than one watchdog period without re-checking: a
        // message can be lost (reconnect gap, PUBLISH/SPUBLISH mismatch).
        let cap = self.inner().config.lock_watchdog_timeout;
        let (subscription, mut backoff) = match self.proto.waiting(field) {
            Waiting::Channel(channel) => {
                let subscribing = self.inner().hub.subscribe(&channel);
                let subscription = match deadline {
                    None => subscribing.await?,
                    Some(d) => match tokio::time::timeout_at(d, subscribing).await {
                        Ok(subscription) => subscription?,
                        Err(_) => return Ok(None),
                    },
                };
                (Some(subscription), None)
            }
            Waiting::Backoff(backoff) => (None, Some(backoff)),
        };
        loop {
            let notified = subscription.as_ref().map(|s| s.notified());
            tokio::pin!(notified);
            if let Some(n) = notified.as_mut().as_pin_mut() {
                n.enable();
            }
            let ttl = match self.attempt(field, lease, mode).await? {
                (Attempt::Acquired { token }, sent_at) => {
                    return Ok(Some(self.guard(owner, field, lease, sent_at, token)))
                }
                (Attempt::Busy(ttl), _) => ttl,
            };
            let now = Instant::now();
            let mut pause = match backoff.as_mut() {
                Some(b) => b.next_delay(),
                None => u64::try_from(ttl)
                    .map_or(cap, Duration::from_millis)
                    .min(cap),
            };
            if let Some(d) = deadline {
                if now >= d {
                    return Ok(None);
                }
                pause = pause.min(d - now);
            }
            match notified.as_pin_mut() {
                Some(n) => {
                    tokio::select! {
                        _ = n => {}
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
                None => tokio::time::sleep(pause).await,
            }
        }
    }

    /// One attempt; on success, the guard.
    async fn try_acquire(
        &self,
        owner: Owner,
        field: &str,
        lease: Lease,
        mode: AttemptMode,
    ) -> Result<Option<LockGuard>> {
        Ok(match self.attempt(field, lease, mode).await? {
            (Attempt::Acquired { token }, sent_at) => {
                Some(self.guard(owner, field, lease, sent_at, token))
            }
            (Attempt::Busy(_), _) => None,
        })
    }

    /// One run of the acquire script, with the time it was sent. If the
    /// caller goes away before the reply, the call is finished in the
    /// background and a hold it took is released.
    async fn attempt(
        &self,
        field: &str,
        lease: Lease,
        mode: AttemptMode,
    ) -> Result<(Attempt, Instant)> {
        let inner = self.inner().clone();
        let lease_ms = crate::lock::millis(lease.duration(inner.config.lock_watchdog_timeout));
        let sent_at = Instant::now();
        let fut = {
            let (inner, proto, field) = (inner.clone(), self.proto.clone(), field.to_owned());
            async move {
                let build = || proto.acquire(&inner, &field, lease_ms, mode);
                let reply = inner.redis.eval(build).await?;
                proto.parse_acquire(reply)
            }
        };
        let orphan = {
            let (inner, proto, field) = (inner.clone(), self.proto.clone(), field.to_owned());
            move |outcome: Result<Attempt>| {
                async move {
                    if let Ok(Attempt::Acquired { .. }) = outcome {
                        let _status = inner.holds.acquired(proto.name(), &field, lease, proto.renewal(), sent_at);
                        if let Err(e) = release(&inner, proto.as_ref(), &field).await {
                            tracing::warn!(lock = %proto.name(), error = %e, "releasing a lock acquired by a cancelled call failed");
                        }
                    }
                }
                .boxed()
            }
        };
        match FinishOnDrop::new(inner.runtime.clone(), fut, orphan).await {
            Ok(attempt) => Ok((attempt, sent_at)),
            Err(e) => {
                if e.is_transient() && inner.holds.count(self.name(), field) == 0 {
                    // The script may have run with its reply lost. The owner
                    // held nothing before, so releasing once undoes exactly
                    // that acquisition, and is harmless if it never ran.
                    let (proto, field) = (self.proto.clone(), field.to_owned());
                    inner.runtime.spawn({
                        let inner = inner.clone();
                        async move {
                            let _ = release(&inner, proto.as_ref(), &field).await;
                        }
                    });
                }
                Err(e)
            }
        }
    }

    fn guard(
        &self,
        owner: Owner,
        field: &str,
        lease: Lease,
        sent_at: Instant,
        token: Option<i64>,
    ) -> LockGuard {
        let status =
            self.inner()
                .holds
                .acquired(self.name(), field, lease, self.proto.renewal(), sent_at);
        LockGuard::new(
            self.with_owner(owner),
            owner,
            field.to_owned(),
            lease,
            status,
            token,
        )
    }

    /// Re-enter with `owner`'s existing hold: try once, never wait. A hold
    /// known lost, or no longer in Redis, is refused rather than taken
    /// afresh (the acquire script would take a free lock).
    pub(crate) async fn reenter(
        &self,
        owner: Owner,
        lease: Lease,
        lost: bool,
    ) -> Result<LockGuard> {
        let field = self.proto.field(self.inner(), owner);
        let not_held = || Error::NotHeld {
            name: self.name().to_owned(),
            owner: field.clone(),
        };
        if lost || !self.is_held(&field).await? {
            return Err(not_held());
        }
        match self
            .try_acquire(owner, &field, lease, AttemptMode::Once)
            .await?
        {
            Some(guard) => Ok(guard),
            None => Err(not_held()),
        }
    }

    /// How many holds `field` has (`HGET`; 0 if none).
    pub(crate) async fn hold_count(&self, field: &str) -> Result<u32> {
        let name = self.name().to_owned();
        let field = field.to_owned();
        let count: Option<i64> = self
            .inner()
            .redis
            .key_command(self.name(), |c| {
                let (name, field) = (name.clone(), field.clone());
                async move { c.hget(name, field).await }
            })
            .await?;
        Ok(count.map_or(0, |c| u32::try_from(c).unwrap_or(0)))
    }

    /// Whether `field` holds the lock (`HEXISTS`).
    pub(crate) async fn is_held(&self, field: &str) -> Result<bool> {
        let name = self.name().to_owned();
        let field = field.to_owned();
        self.inner()
            .redis
            .key_command(self.name(), |c| {
                let (name, field) = (name.clone(), field.clone());
                async move { c.hexists(name, field).await }
            })
            .await
    }

    /// Unlock whoever holds it; if something was unlocked, local holders
    /// see their lost signal fire. (A read-lock force unlock of a lock held
    /// for writing unlocks nothing, and the writer keeps its hold.)
    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        let inner = self.inner();
        let reply = inner
            .redis
            .retrying(|| inner.redis.eval(|| self.proto.force_unlock(inner)))
            .await?;
        let unlocked = matches!(reply, Value::Integer(1));
        if unlocked {
            inner.holds.lose_all(self.name());
        }
        Ok(unlocked)
    }
}

/// Runs the protocol's give-up step if a waiter leaves without the lock,
/// including when its future is dropped.
struct GiveUp {
    pending: Option<(Arc<Inner>, ScriptCall)>,
}

impl GiveUp {
    fn new(lock: &RawLock, field: &str, mode: AttemptMode) -> GiveUp {
        let pending = match mode {
            AttemptMode::Waiting { wait } => lock
                .proto
                .gave_up(lock.inner(), field, wait)
                .map(|call| (lock.inner().clone(), call)),
            AttemptMode::Once => None,
        };
        GiveUp { pending }
    }

    fn disarm(&mut self) {
        self.pending = None;
    }

    /// Run the step. It stays pending until it has run, so if this future
    /// is dropped part-way, `Drop` sends it again (the step is idempotent).
    async fn run(&mut self) {
        if let Some((inner, call)) = &self.pending {
            let outcome = inner
                .redis
                .retrying(|| inner.redis.eval(|| call.clone()))
                .await;
            if let Err(e) = outcome {
                tracing::warn!(error = %e, "leaving the wait queue failed");
            }
        }
        self.pending = None;
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            let runtime = pending.0.runtime.clone();
            let mut rest = GiveUp {
                pending: Some(pending),
            };
            runtime.spawn(async move { rest.run().await });
        }
    }
}

/// Outcome of an unlock.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The count went down but the owner still holds the lock.
    StillHeld,
    /// The lock was released and waiters notified.
    Released,
}

/// Take one hold of `field` away: the unlock script with a fresh latch id,
/// retried with that same id after transient errors, then the latch deleted.
pub(crate) async fn release(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
) -> Result<Unlocked> {
    let registry = inner.holds.released(proto.name(), field);
    if let Some(run) = registry.wait_for_run {
        // A renewal that includes this hold is in flight: let it land first,
        // so no renewal scheduled before the unlock can run after it.
        inner.holds.wait_for_run(run).await;
    }
    let latch = crate::names::latch_key(proto.latch_prefix());
    let lease_ms =
        crate::lock::millis(registry.lease.unwrap_or(inner.config.lock_watchdog_timeout));
    let reply = inner
        .redis
        .retrying(|| {
            inner
                .redis
                .eval(|| proto.release(inner, field, lease_ms, &latch))
        })
        .await?;
    inner.redis.delete_later(latch);
    match reply {
        Value::Null => Err(Error::NotHeld {
            name: proto.name().to_owned(),
            owner: field.to_owned(),
        }),
        Value::Integer(0) => Ok(Unlocked::StillHeld),
        Value::Integer(1) => Ok(Unlocked::Released),
        other => Err(Error::Protocol(format!("unlock replied {other:?}"))),
    }
}
