//! The core every acquisition and guard shares (a lock's hold, a
//! semaphore's permits, a permit-expirable semaphore's permit):
//!
//! * an acquire call is never lost ([`unlosable`]): it runs to its end even
//!   if its caller goes away, and what it took that nobody will use, or may
//!   have taken, is given back;
//! * what a guard holds is given back exactly once, either awaited through
//!   [`Armed::release`] (finished in the background if that future is
//!   dropped) or in the background when the guard is dropped; or it is
//!   kept, with [`Armed::forget`].

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;

use crate::base::detach::{Cleanups, FinishOnDrop};
use crate::base::error::Result;

/// What a guard holds, and how to give it back.
pub(crate) trait GiveBack: Send + Sync + 'static {
    /// What an awaited give-back reports.
    type Output: Send + 'static;

    /// The client's background work, which a dropped guard's give-back
    /// joins (so that a shutdown waits for it).
    fn cleanups(&self) -> &Cleanups;

    /// Give back, with someone awaiting the answer (`retry_attempts` tries).
    fn give_back(&self) -> BoxFuture<'static, Result<Self::Output>>;

    /// Give back with nobody awaiting it (the guard was dropped): it keeps
    /// trying as long as that can matter, and reports its own failure.
    fn give_back_later(&self) -> BoxFuture<'static, ()>;

    /// Kept, not given back ([`Armed::forget`]).
    fn kept(&self) {}
}

/// A [`GiveBack`] that is given back on drop unless released or forgotten.
pub(crate) struct Armed<G: GiveBack> {
    held: G,
    armed: bool,
}

impl<G: GiveBack> Armed<G> {
    pub(crate) fn new(held: G) -> Armed<G> {
        Armed { held, armed: true }
    }

    pub(crate) fn get(&self) -> &G {
        &self.held
    }

    pub(crate) fn get_mut(&mut self) -> &mut G {
        &mut self.held
    }

    /// Give back, awaited; dropping the future part-way still completes it
    /// in the background.
    pub(crate) async fn release(mut self) -> Result<G::Output> {
        self.armed = false;
        let call = self.held.give_back();
        FinishOnDrop::boxed(self.held.cleanups().clone(), call, |_| async {}.boxed()).await
    }

    /// Keep what it holds: nothing is given back.
    pub(crate) fn forget(mut self) {
        self.armed = false;
        self.held.kept();
    }
}

impl<G: GiveBack> Drop for Armed<G> {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            let later = self.held.give_back_later();
            self.held.cleanups().spawn(later);
        }
    }
}

/// What an acquire call left that nobody will use.
pub(crate) enum Leftover<'a, T> {
    /// It ran, but its caller went away: this is what it answered.
    Done(&'a T),
    /// Whether it ran is unknown (a transient failure: a timeout or a lost
    /// connection).
    Unknown,
}

/// Run the acquire call `call` so that its outcome is never lost
/// (docs/PROTOCOL.md §9.3): if the caller goes away before the reply, it is
/// finished in the background; then, and when it fails with a transient
/// error, `undo` is asked what to give back for what it left and that runs
/// in the background (joining `cleanups`, so a shutdown waits for it).
pub(crate) async fn unlosable<T, F, U>(cleanups: &Cleanups, call: F, undo: U) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(Leftover<'_, T>) -> Option<BoxFuture<'static, ()>> + Send + 'static,
{
    // Either the caller's side or the orphan's runs it, never both.
    let undo = Arc::new(Mutex::new(Some(undo)));
    let orphan = {
        let undo = undo.clone();
        move |outcome: Result<T>| {
            let left = match &outcome {
                Ok(value) => Some(Leftover::Done(value)),
                Err(e) if e.is_transient() => Some(Leftover::Unknown),
                Err(_) => None,
            };
            let giving_back = left.and_then(|left| undo.lock().take().and_then(|undo| undo(left)));
            async move {
                if let Some(giving_back) = giving_back {
                    giving_back.await;
                }
            }
            .boxed()
        }
    };
    let outcome = FinishOnDrop::new(cleanups.clone(), call, orphan).await;
    if matches!(&outcome, Err(e) if e.is_transient()) {
        if let Some(giving_back) = undo.lock().take().and_then(|undo| undo(Leftover::Unknown)) {
            cleanups.spawn(giving_back);
        }
    }
    outcome
}
