//! Finishing a Redis call whose caller went away.
//!
//! A lock or unlock command that was already sent may still run on the
//! server after its future is dropped. [`FinishOnDrop`] keeps such a call
//! alive: if dropped before completion, the rest of the call runs as a
//! background task and its outcome goes to a handler (e.g. "it acquired: release").

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;

use crate::engine::background::service::Background;

/// A future that, if dropped before it completes, is completed in the
/// background and its output handed to `on_orphan`. Costs one allocation
/// (the pinned call) until then.
pub(crate) struct FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
    fut: Option<Pin<Box<F>>>,
    on_orphan: Option<C>,
    background: Background,
}

impl<F, C> FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
    pub(crate) fn new(background: Background, fut: F, on_orphan: C) -> Self
    where
        F: Sized,
    {
        Self::boxed(background, Box::pin(fut), on_orphan)
    }

    /// [`new`](Self::new) for a call already boxed (a `BoxFuture`): not
    /// boxed again.
    pub(crate) fn boxed(background: Background, fut: Pin<Box<F>>, on_orphan: C) -> Self {
        FinishOnDrop {
            fut: Some(fut),
            on_orphan: Some(on_orphan),
            background,
        }
    }
}

// Nothing is pinned in place: the call lives in its own box.
impl<F, C> Unpin for FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
}

impl<F, C> Future for FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Pending; // polled after completion: never again ready
        };
        let out = futures::ready!(fut.as_mut().poll(cx));
        this.fut = None;
        Poll::Ready(out)
    }
}

impl<F, C> Drop for FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
    fn drop(&mut self) {
        if let (Some(fut), Some(on_orphan)) = (self.fut.take(), self.on_orphan.take()) {
            self.background
                .spawn(async move { on_orphan(fut.await).await });
        }
    }
}
