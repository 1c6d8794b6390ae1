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
use tokio::runtime::Handle;

type Orphan<T> = Box<dyn FnOnce(T) -> BoxFuture<'static, ()> + Send>;

/// A future that, if dropped before it completes, is completed in the
/// background and its output handed to `on_orphan`.
pub(crate) struct FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fut: Option<Pin<Box<F>>>,
    on_orphan: Option<Orphan<F::Output>>,
    runtime: Handle,
}

impl<F> FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub(crate) fn new(
        runtime: Handle,
        fut: F,
        on_orphan: impl FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Self {
        FinishOnDrop {
            fut: Some(Box::pin(fut)),
            on_orphan: Some(Box::new(on_orphan)),
            runtime,
        }
    }
}

impl<F> Future for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
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

impl<F> Drop for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let (Some(fut), Some(on_orphan)) = (self.fut.take(), self.on_orphan.take()) {
            // Safe to call outside the runtime; if it has shut down, the task
            // is dropped and the server-side TTL bounds what is left behind.
            self.runtime
                .spawn(async move { on_orphan(fut.await).await });
        }
    }
}
