//! What every blocking handle runs on: the [`Driver`] that blocks a thread
//! on the client's runtime, and [`Bridged`], an async guard released on its
//! thread when dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::runtime::{Handle, Runtime};

use crate::base::error::{Error, Result};

/// The runtime the blocking calls run on: owned, or the async client's.
#[derive(Debug)]
pub(super) struct Driver {
    handle: Handle,
    owned: Option<Runtime>,
    /// How long a dropped guard blocks its thread for its release: one
    /// command timeout; the release then finishes in the background.
    drop_wait: Duration,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(runtime) = self.owned.take() {
            runtime.shutdown_background();
        }
    }
}

impl Driver {
    /// Drive calls on `handle` (the runtime `owned`, if this driver owns
    /// it), blocking a dropped guard's thread at most `drop_wait`.
    pub(super) fn new(handle: Handle, owned: Option<Runtime>, drop_wait: Duration) -> Driver {
        Driver {
            handle,
            owned,
            drop_wait,
        }
    }

    pub(super) fn run<F: Future>(&self, fut: F) -> Result<F::Output> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        Ok(self.handle.block_on(fut))
    }

    /// Release a dropped guard by `unlock`: wait at most `drop_wait`, then
    /// leave it to finish in the background (the release is finish-on-drop,
    /// as an async guard's).
    pub(super) fn release_on_drop<T, F: Future<Output = Result<T>>>(&self, what: &str, unlock: F) {
        // The timer is made inside the runtime (outside, tokio panics).
        let wait = self.drop_wait;
        match self.run(async move { tokio::time::timeout(wait, unlock).await }) {
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "release of a dropped blocking {what} failed")
            }
            Ok(Err(_)) => tracing::debug!(
                wait_ms = u64::try_from(self.drop_wait.as_millis()).unwrap_or(u64::MAX),
                "release of a dropped blocking {what} goes on in the background"
            ),
            Ok(Ok(Ok(_))) | Err(_) => {}
        }
    }
}

/// An async guard, as its blocking twin releases it: through `&mut`, so
/// that the twin keeps the guard itself (no `Option`) and still releases it
/// in its own `Drop`.
pub(super) trait Release {
    /// What its release reports.
    type Output;
    /// What it is called in the log line of a failed release on drop.
    const WHAT: &'static str;

    /// Its release, leaving the guard disarmed (its own drop then sends
    /// nothing); `None` if it was released or kept already. The call
    /// finishes in the background if dropped, even unpolled.
    fn release_now(&mut self) -> Option<BoxFuture<'static, Result<Self::Output>>>;

    /// Keep what it holds, disarmed: nothing is given back.
    fn keep(&mut self);
}

/// An async guard driven from a thread: released there, synchronously, when
/// dropped (at most `drop_wait`, then in the background); every blocking
/// guard is one.
#[derive(Debug)]
pub(super) struct Bridged<G: Release> {
    guard: G,
    pub(super) runtime: Arc<Driver>,
}

impl<G: Release> Bridged<G> {
    pub(super) fn new(guard: G, runtime: Arc<Driver>) -> Bridged<G> {
        Bridged { guard, runtime }
    }

    pub(super) fn get(&self) -> &G {
        &self.guard
    }

    pub(super) fn get_mut(&mut self) -> &mut G {
        &mut self.guard
    }

    /// Release it on this thread; `None` if it was released already.
    pub(super) fn release(mut self) -> Result<Option<G::Output>> {
        match self.guard.release_now() {
            Some(call) => self.runtime.run(call)?.map(Some),
            None => Ok(None),
        }
    }

    /// Keep what it holds: nothing is given back.
    pub(super) fn keep(mut self) {
        self.guard.keep();
    }
}

impl<G: Release> Drop for Bridged<G> {
    fn drop(&mut self) {
        if let Some(call) = self.guard.release_now() {
            // Inside a runtime `run` refuses: the call, dropped unpolled,
            // then finishes in the background.
            self.runtime.release_on_drop(G::WHAT, call);
        }
    }
}
