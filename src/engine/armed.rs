//! What every guard shares (a lock's hold, a semaphore's permits, a
//! permit-expirable semaphore's permit): what it holds is given back
//! exactly once, either awaited through [`Armed::give_back_now`] (finished
//! in the background if that future is dropped) or in the background when
//! the guard is dropped; or it is kept, with [`Armed::keep`].

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::base::error::Result;
use crate::engine::background::{Background, FinishOnDrop};

/// What a guard holds, and how to give it back.
pub(crate) trait GiveBack: Send + Sync + 'static {
    /// What an awaited give-back reports.
    type Output: Send + 'static;

    /// The client's background work, which a dropped guard's give-back
    /// joins (so that a shutdown waits for it).
    fn background(&self) -> &Background;

    /// Give back, with someone awaiting the answer (`retry_attempts` tries).
    fn give_back(&self) -> BoxFuture<'static, Result<Self::Output>>;

    /// Give back with nobody awaiting it (the guard was dropped): it keeps
    /// trying as long as that can matter, and reports its own failure.
    fn give_back_later(&self) -> BoxFuture<'static, ()>;

    /// Kept, not given back ([`Armed::keep`]).
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

    /// Give back: disarms this and returns the call, to await, which
    /// finishes in the background if dropped part-way or even unpolled;
    /// `None` if it was given back or kept already. Through `&mut`, so that
    /// a wrapper that gives back in its own `Drop` (the blocking guards)
    /// can hold the guard itself.
    pub(crate) fn give_back_now(&mut self) -> Option<BoxFuture<'static, Result<G::Output>>> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        let call = self.held.give_back();
        let background = self.held.background().clone();
        Some(FinishOnDrop::boxed(background, call, |_| async {}.boxed()).boxed())
    }

    /// Keep what it holds: nothing is given back.
    pub(crate) fn keep(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.held.kept();
        }
    }
}

impl<G: GiveBack> Drop for Armed<G> {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            let later = self.held.give_back_later();
            self.held.background().spawn(later);
        }
    }
}
