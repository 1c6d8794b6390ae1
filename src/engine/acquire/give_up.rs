//! The give-up step of an acquisition that ends without what it waited for
//! (a fair-lock waiter leaving the queue, docs/PROTOCOL.md §4.5), for every
//! protocol that has one: it runs after every earlier step of the
//! acquisition (an attempt still in flight, or its undo), when the waiter
//! ends without the lock or when its future is dropped, and goes on in the
//! background, patiently, if it could not be done while awaited.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::base::error::Result;
use crate::connection::redis::Patience;
use crate::engine::background::Background;
use crate::engine::registry::Order;

/// One try of the step with this patience (idempotent: it may run twice).
type Step = Box<dyn Fn(Patience) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// A give-up step, armed until the acquisition succeeds.
pub(crate) struct GiveUp {
    /// Boxed: only some protocols have one, and every waiter carries this.
    pending: Option<Box<Leaving>>,
}

struct Leaving {
    step: Step,
    order: Order,
    background: Background,
    /// How long trying in the background is worth it.
    patience: Duration,
}

impl GiveUp {
    /// Nothing to do when giving up.
    pub(crate) fn none() -> GiveUp {
        GiveUp { pending: None }
    }

    /// `step`, in the turn of `order`, worth trying for `patience` in the
    /// background.
    pub(crate) fn new(
        order: &Order,
        background: &Background,
        patience: Duration,
        step: impl Fn(Patience) -> BoxFuture<'static, Result<()>> + Send + Sync + 'static,
    ) -> GiveUp {
        GiveUp {
            pending: Some(Box::new(Leaving {
                step: Box::new(step),
                order: order.clone(),
                background: background.clone(),
                patience,
            })),
        }
    }

    /// The acquisition succeeded: nothing to give up.
    pub(crate) fn disarm(&mut self) {
        self.pending = None;
    }

    /// Run the step now, after every earlier step of the acquisition, with
    /// `retry_attempts` tries. If it is dropped part-way or still fails with
    /// a transient error, it stays armed, and `Drop` goes on with it in the
    /// background.
    pub(crate) async fn run(&mut self) {
        if let Some(p) = &self.pending {
            let _turn = p.order.clone().lock_owned().await;
            match (p.step)(Patience::Attempts).await {
                Err(e) if e.is_transient() => return,
                Err(e) => tracing::warn!(error = %e, "giving up an acquisition failed"),
                Ok(()) => {}
            }
        }
        self.pending = None;
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        // A plain future, not a `GiveUp`: dropping it (a runtime shutting
        // down) must not spawn it again.
        if let Some(p) = self.pending.take() {
            let background = p.background.clone();
            background.spawn(async move {
                let _turn = p.order.clone().lock_owned().await;
                let until = Patience::Until(Instant::now() + p.patience);
                if let Err(e) = (p.step)(until).await {
                    tracing::warn!(error = %e, "giving up an acquisition failed");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    //! Without a server: the step is a counter, the turn a plain order.
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use futures::FutureExt;

    use crate::base::error::Error;
    use crate::engine::registry::new_order;

    /// A step that fails transiently `fails` times, counting its tries and
    /// remembering the patience of the last.
    fn counted(
        fails: u32,
    ) -> (
        Arc<AtomicU32>,
        Arc<parking_lot::Mutex<Option<Patience>>>,
        Step,
    ) {
        let tries = Arc::new(AtomicU32::new(0));
        let last = Arc::new(parking_lot::Mutex::new(None));
        let step: Step = {
            let (tries, last) = (tries.clone(), last.clone());
            Box::new(move |patience| {
                let n = tries.fetch_add(1, Ordering::SeqCst);
                *last.lock() = Some(patience);
                async move {
                    if n < fails {
                        Err(Error::connection("down"))
                    } else {
                        Ok(())
                    }
                }
                .boxed()
            })
        };
        (tries, last, step)
    }

    fn give_up(order: &Order, step: Step, background: &Background) -> GiveUp {
        GiveUp::new(order, background, Duration::from_secs(5), step)
    }

    #[tokio::test]
    async fn a_disarmed_step_never_runs() {
        let background = Background::new(tokio::runtime::Handle::current());
        let (tries, _, step) = counted(0);
        let mut leaving = give_up(&new_order(), step, &background);
        leaving.disarm();
        drop(leaving);
        background.drained().await;
        assert_eq!(tries.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_step_that_failed_while_awaited_goes_on_in_the_background() {
        let background = Background::new(tokio::runtime::Handle::current());
        let (tries, last, step) = counted(1);
        let mut leaving = give_up(&new_order(), step, &background);
        leaving.run().await;
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        assert!(matches!(*last.lock(), Some(Patience::Attempts)));
        drop(leaving);
        background.drained().await;
        assert_eq!(tries.load(Ordering::SeqCst), 2, "tried again when dropped");
        assert!(matches!(*last.lock(), Some(Patience::Until(_))));
    }

    #[tokio::test]
    async fn a_dropped_waiter_gives_up_after_the_steps_before_it() {
        let background = Background::new(tokio::runtime::Handle::current());
        let order = new_order();
        // An earlier step of the acquisition (an undo) holds the turn.
        let turn = order.clone().lock_owned().await;
        let (tries, _, step) = counted(0);
        drop(give_up(&order, step, &background));
        tokio::task::yield_now().await;
        assert_eq!(tries.load(Ordering::SeqCst), 0, "waits for the turn");
        drop(turn);
        background.drained().await;
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
