//! [`Semaphore`]: Redisson's `RSemaphore` (docs/PROTOCOL.md §7.1), with RAII
//! permits ([`SemaphorePermit`]).
//!
//! Redis holds the available count in the string key `N`; a release adds to
//! it and publishes the new count on `redisson_sc:{N}`, which wakes up to
//! that many waiters (§3.3). Permits are not owned in Redisson: anyone may
//! release. This crate keeps that wire protocol and adds one short-lived key
//! per acquisition, the permit latch `redisson_sc_latch:{N}:<32 hex id>`
//! (written by the acquire and release scripts, deleted by the client right
//! after a release), so that an acquisition whose reply was lost is undone
//! exactly and a release retried after a lost reply is not counted twice.
//! Java clients never read it.

use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::time::Instant;

use crate::base::error::{Error, Result};
use crate::base::keys::latch_key;
use crate::base::layout;
use crate::client::Client;
use crate::connection::pubsub::Wake;
use crate::connection::script::{millis, script, ScriptCall};
use crate::engine::acquire::attempt::{unlosable_call, Leftover};
use crate::engine::acquire::waiter::Outcome;
use crate::engine::acquire::{acquire_with, Wanted};
use crate::engine::armed::{Armed, GiveBack};
use crate::engine::background::Background;
use crate::engine::shared::Inner;
use crate::synchronizers::count::{check_permits, integer};
use crate::synchronizers::handle::{handle_accessors, Handle};

// The scripts this module runs (`lua/`, embedded at build time).
script!(
    SEMAPHORE_ACQUIRE,
    "args.lua",
    "count.lua",
    "semaphore_acquire.lua"
);

/// The `kind` of spans and metrics.
pub(super) const KIND: &str = "semaphore";

/// A handle to Redisson's semaphore `N` (`getSemaphore(name)`). Cheap to
/// clone. No command is sent until a method is called.
///
/// Acquiring returns a [`SemaphorePermit`] that gives its permits back when
/// released or dropped, like tokio's `SemaphorePermit`;
/// [`forget`](SemaphorePermit::forget) keeps them taken. A Java thread and a
/// Rust task acquire and release the same permits and wake each other.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let partner_api = client.semaphore("partner-api")?;
/// partner_api.try_set_permits(4).await?; // once; false if already set
/// let permit = partner_api.acquire(1).await?;
/// // ... at most 4 calls in flight, across every service ...
/// permit.release().await?; // or drop it: released in the background
/// # Ok(()) }
/// ```
///
/// # Counts and their types
///
/// The types say what each number can be: permits taken, given back or set
/// are a `u32` (a count, never negative; at most Java's `int`, 2^31 − 1);
/// [`add_permits`](Self::add_permits) takes an `i32` (a change, negative to
/// take permits away, as Java's `addPermits(int)`); what is *read*
/// ([`available_permits`](Self::available_permits),
/// [`drain_permits`](Self::drain_permits)) is an `i64`, because the stored
/// count is whatever any client left there, negative after a negative
/// `addPermits`, or above 2^31 after many releases.
///
/// # Cancel safety
///
/// Every future may be dropped at any await point. An acquire script already
/// sent is finished in the background and the permits it took are given
/// back; a waiter leaves its channel when dropped.
///
/// # Give-backs in the background
///
/// A permit dropped without [`release`](SemaphorePermit::release), and an
/// acquisition whose reply was lost (undone), give their permits back in
/// the background, trying until Redis answers or the client shuts down
/// (these permits have no TTL). Exact as long as Redis answers within twice
/// the retry budget of a try that may have reached it unanswered; see
/// [`Client::pending_releases`](crate::Client::pending_releases) and the
/// README (*Guarantees and limits*) for what can stay taken otherwise.
#[derive(Clone)]
pub struct Semaphore {
    pub(super) shared: Arc<SemaphoreShared>,
}

pub(super) struct SemaphoreShared {
    /// Its channel is `redisson_sc:{N}`.
    pub(super) handle: Handle,
    /// `redisson_sc_latch:{N}`, to which `:<id>` is appended.
    pub(super) latch_prefix: String,
}

handle_accessors!(Semaphore, "semaphore", Wake::Counted);

impl Client {
    /// A handle to the semaphore `name` (Redisson's `getSemaphore(name)`).
    /// No command is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        let handle = Handle::new(self, name, layout::semaphore_channel)?;
        Ok(Semaphore {
            shared: Arc::new(SemaphoreShared {
                latch_prefix: layout::semaphore_latch_prefix(&handle.name),
                handle,
            }),
        })
    }
}

/// How long a permit latch lives: twice the retry budget, so that every
/// retry of an awaited release, all sent within one budget of the first try,
/// still finds it. A give-back in the background that keeps trying longer
/// sends only what the latch still makes exact ([`Semaphore::give_back`]).
pub(super) fn permit_latch_ttl(inner: &Inner) -> Duration {
    inner
        .config
        .retry_span()
        .saturating_mul(2)
        .min(crate::base::time::MAX_DURATION)
}

impl Semaphore {
    /// Take `permits` permits, waiting as long as it takes (Redisson's
    /// `acquire(permits)`). Zero permits: a permit of nothing, at once,
    /// without a command.
    ///
    /// The wait sleeps until a release is published on the channel; it
    /// re-checks at least every `lock_watchdog_timeout` in case a message was
    /// lost (where Java's `acquire()` would wait for the next release).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits, before
    /// anything is sent; [`Error::WrongType`] if the key holds something
    /// other than a count; a transient error once Redis has failed for longer
    /// than the retry budget; [`Error::Closed`] at shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back whatever it took, in the background.
    pub async fn acquire(&self, permits: u32) -> Result<SemaphorePermit> {
        match self.acquire_within(None, permits).await? {
            Some(permit) => Ok(permit),
            None => Err(Error::Internal(
                "a wait without a time limit ended without permits".into(),
            )),
        }
    }

    /// Try once to take `permits` permits, without waiting (Redisson's
    /// `tryAcquire(permits)`): `None` if fewer are available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); a transient error is returned at once
    /// (an attempt it may have left behind is undone in the background).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        self.acquire_within(Some(Duration::ZERO), permits).await
    }

    pub(crate) async fn acquire_within(
        &self,
        wait: Option<Duration>,
        permits: u32,
    ) -> Result<Option<SemaphorePermit>> {
        check_permits(permits)?;
        if permits == 0 {
            return Ok(Some(SemaphorePermit::new(self.clone(), 0, None)));
        }
        let wanted = Wanted {
            permits: Some(permits),
            ..self.shared.handle.wanted(KIND, Wake::Counted, wait)
        };
        let done = acquire_with(self.inner(), wanted, || self.attempt(permits)).await;
        done.map(|done| done.map(|d| d.value))
    }

    /// One run of the acquire script. If the caller goes away before the
    /// reply, the script is finished in the background and what it took is
    /// given back; if its outcome is unknown (a timeout or a lost
    /// connection), the permit latch tells the undo whether it took anything.
    async fn attempt(&self, permits: u32) -> Result<Outcome<SemaphorePermit>> {
        let inner = self.inner().clone();
        let latch = latch_key(&self.shared.latch_prefix);
        let sent_at = Instant::now();
        let fut = {
            let (inner, shared, latch) = (inner.clone(), self.shared.clone(), latch.clone());
            async move {
                let ttl = millis(permit_latch_ttl(&inner));
                let call = || {
                    ScriptCall::new(
                        &SEMAPHORE_ACQUIRE,
                        &[&shared.handle.name, &latch],
                        vec![Value::Integer(permits.into()), Value::Integer(ttl)],
                    )
                };
                let reply = inner.redis.eval_attempt(call).await?;
                Ok::<bool, Error>(integer(reply, "semaphore acquire")? == 1)
            }
        };
        let undo = {
            let (semaphore, latch) = (self.clone(), latch.clone());
            move |left: Leftover<'_, bool>| {
                let (mode, exact_until) = match left {
                    Leftover::Done(true) => (Mode::Release, None),
                    Leftover::Done(false) => return None,
                    // Had the attempt taken its permits, its latch would
                    // say so at least until then.
                    Leftover::Unknown { .. } => (
                        Mode::Undo,
                        sent_at.checked_add(permit_latch_ttl(semaphore.inner())),
                    ),
                };
                Some(semaphore.give_back_later(permits, latch, mode, exact_until, None))
            }
        };
        Ok(
            match unlosable_call(&inner.background, Box::pin(fut), undo).await? {
                true => Outcome::Ready(SemaphorePermit::new(self.clone(), permits, Some(latch))),
                false => Outcome::Busy(None),
            },
        )
    }
}

/// What the release script does.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    /// Give back, unless the latch says it was given back already.
    Release,
    /// Give back only if the latch says the acquisition took the permits.
    Undo,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.shared.handle.name)
            .finish()
    }
}

/// Permits taken from a [`Semaphore`]. Give them back with
/// [`release`](Self::release) to learn whether that worked; a permit dropped
/// without releasing gives them back in the background, trying until Redis
/// answers or the client shuts down (errors are logged through `tracing`;
/// [`Client::shutdown`](crate::Client::shutdown) waits for it, for at most
/// the retry budget, see [`Semaphore`]); [`forget`](Self::forget) keeps them
/// taken.
#[must_use = "dropping the permit releases it at once"]
pub struct SemaphorePermit(Armed<TakenPermits>);

/// What a [`SemaphorePermit`] holds.
struct TakenPermits {
    semaphore: Semaphore,
    permits: u32,
    /// The acquisition's permit latch (`None` for zero permits).
    latch: Option<String>,
}

impl GiveBack for TakenPermits {
    type Output = ();

    fn background(&self) -> &Background {
        &self.semaphore.inner().background
    }

    fn give_back(&self) -> BoxFuture<'static, Result<()>> {
        let Some(latch) = self.latch.clone() else {
            return async { Ok(()) }.boxed();
        };
        crate::base::telemetry::unheld(KIND);
        let (semaphore, permits) = (self.semaphore.clone(), self.permits);
        async move {
            let handed = Instant::now();
            let released = semaphore.release_awaited(permits, &latch).await;
            if matches!(&released, Err(e) if e.is_transient()) {
                // Not confirmed: given back in the background from now on,
                // as a dropped permit is (any try may have run).
                let later =
                    semaphore.give_back_later(permits, latch, Mode::Release, None, Some(handed));
                semaphore.inner().background.spawn(later);
            }
            released.map(drop)
        }
        .boxed()
    }

    fn give_back_later(&self) -> BoxFuture<'static, ()> {
        let Some(latch) = self.latch.clone() else {
            return async {}.boxed();
        };
        crate::base::telemetry::unheld(KIND);
        self.semaphore
            .give_back_later(self.permits, latch, Mode::Release, None, None)
    }

    /// Only the acquisition's permit latch is deleted.
    fn kept(&self) {
        if let Some(latch) = self.latch.clone() {
            crate::base::telemetry::unheld(KIND);
            self.semaphore.inner().delete_latch_later(latch);
        }
    }
}

impl SemaphorePermit {
    fn new(semaphore: Semaphore, permits: u32, latch: Option<String>) -> SemaphorePermit {
        if latch.is_some() {
            crate::base::telemetry::held(KIND);
        }
        SemaphorePermit(Armed::new(TakenPermits {
            semaphore,
            permits,
            latch,
        }))
    }

    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.0.get().permits
    }

    /// The semaphore the permits belong to.
    pub fn semaphore(&self) -> &Semaphore {
        &self.0.get().semaphore
    }

    /// Give the permits back: the count goes up and the new count is
    /// published, waking waiters.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key was replaced by something other than a
    /// count; a transient error if Redis stayed unreachable through
    /// `retry_attempts` retries (each retry is safe: it never gives back
    /// twice): the permits are then given back in the background, as when a
    /// permit is dropped (see [`Semaphore`],
    /// [`Client::pending_releases`](crate::Client::pending_releases));
    /// [`Error::Closed`] after shutdown.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way still completes the release in the
    /// background.
    pub async fn release(mut self) -> Result<()> {
        match self.release_now() {
            Some(call) => call.await,
            None => Ok(()),
        }
    }

    /// Keep the permits taken, like `forget` on tokio's permits: they stay
    /// taken until someone calls [`Semaphore::release`] (a Java client
    /// included). Only the acquisition's permit latch is deleted.
    pub fn forget(mut self) {
        self.keep();
    }

    /// [`release`](Self::release) through `&mut`, for a wrapper that
    /// releases in its own `Drop`; `None` if released or kept already.
    pub(crate) fn release_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        self.0.give_back_now()
    }

    /// [`forget`](Self::forget) through `&mut`.
    pub(crate) fn keep(&mut self) {
        self.0.keep();
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("semaphore", &self.0.get().semaphore.shared.handle.name)
            .field("permits", &self.0.get().permits)
            .finish()
    }
}
