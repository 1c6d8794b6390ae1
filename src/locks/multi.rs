//! [`MultiLock`]: several locks taken as one (Redisson's `RedissonMultiLock`),
//! and its majority form, RedLock (`RedissonRedLock`), over locks on one
//! client or on several independent Redis servers (docs/PROTOCOL.md §8.1, §8.2).
//!
//! Client-side only: each member keeps its own Redis layout, so a member can
//! be any lock kind. A round tries the members in order; a member that fails
//! (busy, or its server unreachable) uses up the failure budget (none for a
//! multi-lock, `n - (n/2 + 1)` for RedLock); once it is spent, every member
//! taken in that round is released and, while time remains, the round starts
//! again. A dropped future releases whatever it held.
//!
//! ```no_run
//! # async fn demo(a: redisson_lock::Client, b: redisson_lock::Client, c: redisson_lock::Client) -> redisson_lock::Result<()> {
//! use std::time::Duration;
//! use redisson_lock::MultiLock;
//!
//! // RedLock over three independent servers: a majority (2 of 3) suffices.
//! let red = MultiLock::red_lock([a.lock("job")?, b.lock("job")?, c.lock("job")?])?;
//! if let Some(guard) = red.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
//!     // ... at least 2 of 3 members held for at least 10 s ...
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::{Error, Result};
use crate::base::lost::LostReason;
use crate::engine::hold::RawHold;
use crate::engine::raw::RawLock;
use crate::engine::registry::Lease;
use crate::locks::guard::LockGuard;
use crate::locks::kind::{AnyKind, Kind};
use crate::locks::lock::Lock;

/// Several locks acquired as one: all of them (multi-lock) or a majority
/// (RedLock). Cheap to clone.
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Arc<[RawLock]>,
    /// How many members may fail in a successful round.
    failures_allowed: usize,
    majority: bool,
}

impl MultiLock {
    /// All-or-nothing over `locks` (Redisson's `RedissonMultiLock`). For
    /// members of several kinds, [`into_erased`](Lock::into_erased) each one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no member, or for one lock twice on
    /// one client (it would wait for itself).
    pub fn new<K: Kind>(locks: impl IntoIterator<Item = impl Into<Lock<K>>>) -> Result<MultiLock> {
        MultiLock::build(locks, false)
    }

    /// A majority (`n/2 + 1`) of `locks`, each usually on its own independent
    /// server (Redisson's `RedissonRedLock`).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn red_lock<K: Kind>(
        locks: impl IntoIterator<Item = impl Into<Lock<K>>>,
    ) -> Result<MultiLock> {
        MultiLock::build(locks, true)
    }

    fn build<K: Kind>(
        locks: impl IntoIterator<Item = impl Into<Lock<K>>>,
        majority: bool,
    ) -> Result<MultiLock> {
        let members: Arc<[RawLock]> = locks.into_iter().map(|l| l.into().raw).collect();
        if members.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        // Each member is taken by an owner of its own, so one lock twice
        // (or two kinds of one name, e.g. the read and write halves) on one
        // client would wait for itself.
        for (i, a) in members.iter().enumerate() {
            if members[..i]
                .iter()
                .any(|b| Arc::ptr_eq(a.inner(), b.inner()) && a.name() == b.name())
            {
                return Err(Error::InvalidArgument(format!(
                    "lock {:?} is a member twice on the same client; it would wait for itself",
                    a.name()
                )));
            }
        }
        let n = members.len();
        Ok(MultiLock {
            failures_allowed: if majority { n - (n / 2 + 1) } else { 0 },
            majority,
            members,
        })
    }

    /// How many members a successful acquisition holds at least.
    pub fn quorum(&self) -> usize {
        self.members.len() - self.failures_allowed
    }

    /// Whether enough members are locked (by anyone) for the whole to be
    /// held: all of them for a multi-lock, a majority for RedLock.
    ///
    /// # Errors
    ///
    /// The first member query that fails, as [`Lock::is_locked`] (a member
    /// whose server stays unreachable fails the whole call, RedLock
    /// included).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn is_locked(&self) -> Result<bool> {
        let mut locked = 0;
        for member in self.members.iter() {
            let inner = member.inner();
            let reply = inner
                .redis
                .retrying(member.name(), || {
                    inner.redis.eval(|| member.proto.is_locked_call())
                })
                .await?;
            if matches!(reply, fred::types::Value::Integer(1)) {
                locked += 1;
            }
        }
        Ok(locked >= self.quorum())
    }

    /// Whether `owner` holds the whole (Redisson's
    /// `isHeldByThread(threadId)` and `isHeldByCurrentThread()`): every
    /// member for a multi-lock, a majority for RedLock (Java's RedLock asks
    /// every member, so one unreachable server makes it `false` there). Each
    /// member is asked (`HEXISTS`) on its own client, for the field
    /// `<that client's id>:<owner>`.
    ///
    /// This answers for members acquired by `owner`: locks made with
    /// [`Lock::with_owner`] before [`new`](Self::new), as a Java thread
    /// would. A multi-lock acquired with the default owners (a fresh one per
    /// member and acquisition) is asked through its guard,
    /// [`MultiGuard::is_held`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{MultiLock, Owner};
    /// let me = Owner::new(7);
    /// let both = MultiLock::new([
    ///     client.lock("from")?.with_owner(me),
    ///     client.lock("to")?.with_owner(me),
    /// ])?;
    /// let guard = both.lock().await?;
    /// assert!(both.is_held_by(me).await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The first member query that fails, as [`Lock::is_held_by`].
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    #[doc(alias = "isHeldByThread")]
    #[doc(alias = "is_held_by_thread")]
    pub async fn is_held_by(&self, owner: crate::base::owner::Owner) -> Result<bool> {
        let mut held = 0;
        for member in self.members.iter() {
            let field = member.proto.field(&member.inner().env, owner);
            if member.is_held(&field).await? {
                held += 1;
            }
        }
        Ok(held >= self.quorum())
    }

    /// The members' names, in acquisition order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.members.iter().map(RawLock::name)
    }

    /// Wait as long as it takes; members are watchdog-renewed while held.
    /// It waits in rounds of 1.5 s per member, as Redisson does.
    ///
    /// # Errors
    ///
    /// A round that ends without the locks and with no member merely busy
    /// ends the wait with the last member's error: a transient error when
    /// the servers stayed unreachable through the round, or a definite one
    /// ([`Error::WrongType`], [`Error::Auth`], [`Error::Closed`], …).
    ///
    /// # Cancel safety
    ///
    /// The future may be dropped at any await point without leaking a hold:
    /// members already taken in the current round are released in the
    /// background, and a member's acquisition in flight is finished in the
    /// background and released, as for [`Lock::lock`].
    pub async fn lock(&self) -> Result<MultiGuard> {
        let round = self.base_wait();
        let acquired = self.traced(None, async {
            loop {
                if let Some(guard) = self.try_lock_within(round, None).await? {
                    return Ok(Some(guard));
                }
            }
        });
        expect_guard(acquired.await)
    }

    /// Take every member ([`lock`](Self::lock)), run `work` with the guard,
    /// and release them all, as [`Lock::run`]: if too many members are lost
    /// while `work` runs ([`MultiGuard::lost`]), `work` is stopped at its
    /// next await and the call ends with [`Error::Lost`], naming the first
    /// member found lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let both = redisson_lock::MultiLock::new([
    ///     client.lock("account:1")?,
    ///     client.lock("account:2")?,
    /// ])?;
    /// let moved = both.run(async |_guard| {
    ///     // ... move money between the two accounts ...
    ///     100
    /// }).await?;
    /// # let _ = moved; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Lost`] if the whole was lost while
    /// `work` ran (its result is gone with it); as [`MultiGuard::unlock`] if
    /// the final unlock fails.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock) while waiting; dropped while `work` runs,
    /// `work` is dropped and every member released in the background.
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&MultiGuard) -> T) -> Result<T> {
        let guard = self.lock().await?;
        let outcome = tokio::select! {
            biased;
            reason = guard.lost() => Err(reason),
            output = work(&guard) => Ok(output),
        };
        match outcome {
            Ok(output) => {
                guard.unlock().await?;
                Ok(output)
            }
            Err(reason) => {
                let name = guard
                    .guards
                    .iter()
                    .find(|g| g.lost_reason().is_some())
                    .map_or_else(
                        || self.names().collect::<Vec<_>>().join(","),
                        |g| g.name().to_owned(),
                    );
                Err(Error::Lost { name, reason })
            }
        }
    }

    /// Wait as long as it takes; every member lives at least `lease` after
    /// the acquisition completes (see [`try_lock_for`](Self::try_lock_for)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION), before anything is sent; else
    /// as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        crate::locks::lock::fixed_lease(lease)?;
        // Redisson's rounds: a random wait below the lease, so contenders desynchronize.
        let base = self.base_wait();
        let (low, high) = if lease <= base {
            (lease / 2, lease)
        } else {
            (base, lease)
        };
        let acquired = self.traced(None, async {
            loop {
                let span = millis_u64(high.saturating_sub(low)).max(1);
                let round = low + Duration::from_millis(crate::base::backoff::random_below(span));
                if let Some(guard) = self.try_lock_within(round, Some(lease)).await? {
                    return Ok(Some(guard));
                }
            }
        });
        expect_guard(acquired.await)
    }

    /// Try each member once, without waiting.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.try_lock_for(Duration::ZERO).await
    }

    /// Acquire within `wait`; the watchdog renews the members. Returns `None`
    /// when the time is up; an error only when no member was merely busy.
    /// With [`try_lock_for_with_lease`](Self::try_lock_for_with_lease),
    /// members are taken with a lease of `lease + wait` instead, so each
    /// lives at least `lease` after the whole acquisition completes and at
    /// most `lease + wait` (Redisson takes them with `2 × wait` and shortens
    /// them afterwards, an extra round trip per member).
    ///
    /// # Errors
    ///
    /// When the time is up and no member was merely busy, the last member's error
    /// (a transient one if their servers were unreachable, or a definite one
    /// such as [`Error::WrongType`] or [`Error::Closed`]).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.traced(Some(wait), self.try_lock_within(wait, None))
            .await
    }

    /// [`try_lock_for`](Self::try_lock_for), every member living at least
    /// `lease` after the acquisition completes, with no watchdog (Redisson's
    /// `tryLock(wait, lease, unit)`).
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for), [`Error::InvalidArgument`]
    /// for a lease below 1 ms or above [`MAX_DURATION`](crate::MAX_DURATION)
    /// included.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock).
    pub async fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.traced(Some(wait), self.try_lock_within(wait, Some(lease)))
            .await
    }

    /// Run an acquisition in a `redisson_lock.multi_acquire` span that
    /// records how long it took and how it ended.
    async fn traced(
        &self,
        wait: Option<Duration>,
        acquiring: impl Future<Output = Result<Option<MultiGuard>>>,
    ) -> Result<Option<MultiGuard>> {
        let span = tracing::debug_span!(
            "redisson_lock.multi_acquire",
            locks = self.members.len(),
            quorum = self.quorum(),
            red_lock = self.majority,
            wait_ms = wait.map(millis_u64),
            waited_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let start = Instant::now();
        let acquired = acquiring.instrument(span.clone()).await;
        span.record("waited_ms", millis_u64(start.elapsed()));
        match &acquired {
            Ok(Some(_)) => span.record("outcome", "acquired"),
            Ok(None) if wait.is_some_and(|w| w.is_zero()) => span.record("outcome", "busy"),
            Ok(None) => span.record("outcome", "timeout"),
            Err(e) => span
                .record("outcome", "error")
                .record("error", tracing::field::display(e)),
        };
        acquired
    }

    /// [`try_lock_for`](Self::try_lock_for), within a span.
    async fn try_lock_within(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        let member_lease = match lease {
            Some(l) => {
                crate::locks::lock::fixed_lease(l)?;
                Lease::Fixed(l.saturating_add(wait).min(crate::base::time::MAX_DURATION))
            }
            None => Lease::Watchdog,
        };
        // A wait too long to represent is no time limit.
        let deadline = Instant::now()
            .checked_add(wait.min(crate::base::time::MAX_DURATION))
            .unwrap_or_else(|| Instant::now() + crate::base::time::MAX_DURATION);
        loop {
            match self.round(wait, deadline, member_lease).await {
                Round::Acquired(guards) => return Ok(Some(self.guard(guards))),
                Round::Failed { error } => {
                    if Instant::now() >= deadline {
                        return match error {
                            Some(e) => Err(e),
                            None => Ok(None),
                        };
                    }
                }
            }
        }
    }

    /// One pass over the members.
    async fn round(&self, wait: Duration, deadline: Instant, lease: Lease) -> Round {
        let n = self.members.len();
        let mut held: Vec<LockGuard<AnyKind>> = Vec::with_capacity(n);
        let mut budget = self.failures_allowed;
        let mut busy = false;
        let mut error = None;
        for member in self.members.iter() {
            let remain = deadline.saturating_duration_since(Instant::now());
            let member_wait = if wait.is_zero() {
                Duration::ZERO
            } else if self.majority {
                (remain / u32::try_from(n).unwrap_or(u32::MAX))
                    .max(Duration::from_millis(1))
                    .min(remain)
            } else {
                remain
            };
            let acquired = match member.acquire(Some(member_wait), lease).await {
                Ok(Some(acquired)) => {
                    held.push(LockGuard::new(
                        RawHold::new(member, acquired),
                        Arc::new(AnyKind::new()),
                    ));
                    true
                }
                Ok(None) => {
                    busy = true;
                    false
                }
                Err(e) => {
                    tracing::debug!(lock = member.name(), error = %e, "multi-lock member failed");
                    error = Some(e);
                    false
                }
            };
            if !acquired {
                if n - held.len() == self.failures_allowed {
                    break; // the rest may all fail and a majority is still held
                }
                if budget == 0 {
                    release_all(held).await;
                    return Round::Failed {
                        error: if busy { None } else { error },
                    };
                }
                budget -= 1;
            }
            if !wait.is_zero() && Instant::now() >= deadline && held.len() < self.quorum() {
                release_all(held).await;
                return Round::Failed {
                    error: if busy { None } else { error },
                };
            }
        }
        if held.len() >= self.quorum() {
            Round::Acquired(held)
        } else {
            release_all(held).await;
            Round::Failed {
                error: if busy { None } else { error },
            }
        }
    }

    fn guard(&self, guards: Vec<LockGuard<AnyKind>>) -> MultiGuard {
        MultiGuard {
            may_lose: guards.len() - self.quorum(),
            majority: self.majority,
            guards,
        }
    }

    /// Redisson's base round for an unbounded wait: 1.5 s per member.
    fn base_wait(&self) -> Duration {
        Duration::from_millis(1_500)
            .saturating_mul(u32::try_from(self.members.len()).unwrap_or(u32::MAX))
    }
}

enum Round {
    Acquired(Vec<LockGuard<AnyKind>>),
    Failed { error: Option<Error> },
}

/// Unlock members in parallel, ignoring errors (a lost member is simply gone).
async fn release_all(guards: Vec<LockGuard<AnyKind>>) {
    futures::future::join_all(guards.into_iter().map(LockGuard::unlock)).await;
}

/// The members held by one multi-lock or RedLock acquisition. Dropping it
/// releases them in the background.
#[must_use = "dropping the guard releases the locks at once"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard<AnyKind>>,
    /// How many members may be lost before the whole is lost.
    may_lose: usize,
    majority: bool,
}

impl MultiGuard {
    /// The member guards, in acquisition order.
    pub fn guards(&self) -> &[LockGuard<AnyKind>] {
        &self.guards
    }

    /// When the member whose loss would break the whole (the earliest for a
    /// multi-lock, the quorum-th latest for RedLock) expires at the
    /// earliest, as its [`LockGuard::expires_at`]; `None` while the watchdog
    /// renews the members. As with a single guard, the whole counts as lost
    /// a drift margin (1 % + 2 ms) before then.
    #[doc(alias = "valid_until")]
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        let mut expiries: Vec<std::time::Instant> = self
            .guards
            .iter()
            .map(LockGuard::expires_at)
            .collect::<Option<_>>()?;
        expiries.sort();
        expiries.get(self.may_lose).copied()
    }

    /// Release every member, in parallel. A multi-lock reports the first
    /// member's error; RedLock, like Redisson's, ignores member errors.
    ///
    /// # Errors
    ///
    /// For a multi-lock, the first member's error, as
    /// [`LockGuard::unlock`] ([`Error::NotHeld`] for a member that was
    /// lost); the other members are released all the same. RedLock: none.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes every member's unlock
    /// in the background.
    pub async fn unlock(mut self) -> Result<()> {
        match self.unlock_now() {
            Some(call) => call.await,
            None => Ok(()),
        }
    }

    /// [`unlock`](Self::unlock) through `&mut`, for a wrapper that releases
    /// in its own `Drop`: every member is left disarmed; `None` if none was
    /// left to release.
    pub(crate) fn unlock_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        let calls: Vec<_> = self
            .guards
            .iter_mut()
            .filter_map(LockGuard::unlock_now)
            .collect();
        if calls.is_empty() {
            return None;
        }
        let majority = self.majority;
        Some(Box::pin(async move {
            let results = futures::future::join_all(calls).await;
            if majority {
                return Ok(());
            }
            results.into_iter().collect()
        }))
    }

    /// Resolves once too many members are lost (any one for a multi-lock,
    /// enough to fall below the majority for RedLock), to the reason of the
    /// member loss that broke the whole; as [`LockGuard::lost`], never if
    /// the guard is unlocked first.
    pub fn lost(&self) -> crate::base::lost::Lost {
        let mut lost: FuturesUnordered<_> = self.guards.iter().map(LockGuard::lost).collect();
        let may_lose = self.may_lose;
        crate::base::lost::Lost::new(async move {
            let mut count = 0;
            while let Some(reason) = lost.next().await {
                count += 1;
                if count > may_lose {
                    return reason;
                }
            }
            std::future::pending().await
        })
    }

    /// Why the whole is lost, if too many members are known to be lost right
    /// now: the reason of the first lost member, in acquisition order.
    pub fn lost_reason(&self) -> Option<LostReason> {
        if !self.is_lost() {
            return None;
        }
        self.guards.iter().find_map(LockGuard::lost_reason)
    }

    /// Whether enough members are still held by this guard's owners, per
    /// Redis: all of them for a multi-lock, a majority for RedLock.
    ///
    /// # Errors
    ///
    /// The first member query that fails, as [`LockGuard::is_held`] (a
    /// member whose server stays unreachable fails the whole call, RedLock
    /// included).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    pub async fn is_held(&self) -> Result<bool> {
        let mut held = 0;
        for guard in &self.guards {
            if guard.is_held().await? {
                held += 1;
            }
        }
        Ok(held + self.may_lose >= self.guards.len())
    }

    /// Whether too many members are known to be lost right now.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().filter(|g| g.is_lost()).count() > self.may_lose
    }
}

/// The guard of a wait without a time limit, which ends with one.
fn expect_guard(acquired: Result<Option<MultiGuard>>) -> Result<MultiGuard> {
    acquired?.ok_or_else(|| {
        Error::Internal("a wait without a time limit ended without the locks".into())
    })
}

fn millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
