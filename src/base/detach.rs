//! Finishing a Redis call whose caller went away.
//!
//! A lock or unlock command that was already sent may still run on the
//! server after its future is dropped. [`FinishOnDrop`] keeps such a call
//! alive: if dropped before completion, the rest of the call runs as a
//! background task and its outcome goes to a handler (e.g. "it acquired: release").

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tokio::runtime::Handle;
use tokio::sync::watch;

/// Background work that finishes what a caller started (a release, leaving
/// a queue, an orphaned attempt), counted so that a shutdown can wait for
/// it to end.
#[derive(Clone)]
pub(crate) struct Cleanups {
    runtime: Handle,
    running: Arc<watch::Sender<usize>>,
}

impl Cleanups {
    pub(crate) fn new(runtime: Handle) -> Cleanups {
        Cleanups {
            runtime,
            running: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Run `fut` in the background. Safe to call outside the runtime; if it
    /// has shut down, `fut` is dropped and the server-side TTL bounds what
    /// is left behind.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.running.send_modify(|n| *n += 1);
        let done = Finished(self.running.clone());
        drop(self.runtime.spawn(async move {
            let _done = done;
            fut.await;
        }));
    }

    /// Wait until no cleanup runs.
    pub(crate) async fn drained(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }
}

/// Counts a cleanup as ended when dropped, however it ends.
struct Finished(Arc<watch::Sender<usize>>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

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
    cleanups: Cleanups,
}

impl<F, C> FinishOnDrop<F, C>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
    C: FnOnce(F::Output) -> BoxFuture<'static, ()> + Send + 'static,
{
    pub(crate) fn new(cleanups: Cleanups, fut: F, on_orphan: C) -> Self
    where
        F: Sized,
    {
        Self::boxed(cleanups, Box::pin(fut), on_orphan)
    }

    /// [`new`](Self::new) for a call already boxed (a `BoxFuture`): not
    /// boxed again.
    pub(crate) fn boxed(cleanups: Cleanups, fut: Pin<Box<F>>, on_orphan: C) -> Self {
        FinishOnDrop {
            fut: Some(fut),
            on_orphan: Some(on_orphan),
            cleanups,
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
            self.cleanups
                .spawn(async move { on_orphan(fut.await).await });
        }
    }
}
