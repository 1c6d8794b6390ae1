//! One acquire attempt whose outcome is never lost (docs/PROTOCOL.md §9.3),
//! for every lock kind and synchronizer: it runs to its end even if its
//! caller goes away, and what it took that nobody will use, or may have
//! taken, is given back, in the acquisition's turn when it has one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;

use crate::base::error::{Error, Result};
use crate::engine::background::{Background, FinishOnDrop};

/// What an acquire call left that nobody will use.
pub(crate) enum Leftover<'a, T> {
    /// It ran, but its caller went away: this is what it answered.
    Done(&'a T),
    /// Whether it ran is unknown: it failed with this transient `error` (a
    /// timeout, a lost connection; or it ran, but was not replicated).
    /// `abandoned`: its caller went away, so nothing waits for the undo.
    Unknown { error: &'a Error, abandoned: bool },
}

/// Run the acquire call `call` so that its outcome is never lost. `call`
/// carries `S`, the acquisition's turn to talk to Redis (`()` where there is
/// none), and hands it back with its outcome. If the caller goes away before
/// the reply, the call is finished in the background; then, and when it
/// fails with a transient error, `undo` is asked what to give back for what
/// it left, and is handed the turn to hold while it does: what it returns
/// runs in the background (joining `background`, so that a shutdown waits for
/// it), and the next step that waits for the turn comes after it. On success
/// the value comes back with the turn, for the caller to record what it took
/// before letting the turn go. The call comes boxed: a command future is
/// large, and no waiting future should carry one inline.
pub(crate) async fn unlosable<T, S, F, U>(
    background: &Background,
    call: Pin<Box<F>>,
    undo: U,
) -> Result<(T, S)>
where
    T: Send + 'static,
    S: Send + 'static,
    F: Future<Output = (Result<T>, S)> + Send + 'static,
    U: FnOnce(Leftover<'_, T>, S) -> Option<BoxFuture<'static, ()>> + Send + 'static,
{
    // Either the caller's side or the orphan's runs it, never both.
    let undo = Arc::new(Mutex::new(Some(undo)));
    let orphan = {
        let undo = undo.clone();
        move |(outcome, turn): (Result<T>, S)| {
            let left = match &outcome {
                Ok(value) => Some(Leftover::Done(value)),
                Err(e) if e.is_transient() => Some(Leftover::Unknown {
                    error: e,
                    abandoned: true,
                }),
                Err(_) => None,
            };
            let giving_back =
                left.and_then(|left| undo.lock().take().and_then(|undo| undo(left, turn)));
            async move {
                if let Some(giving_back) = giving_back {
                    giving_back.await;
                }
            }
            .boxed()
        }
    };
    match FinishOnDrop::boxed(background.clone(), call, orphan).await {
        (Ok(value), turn) => Ok((value, turn)),
        (Err(e), turn) => {
            if e.is_transient() {
                let undo = undo.lock().take();
                let left = Leftover::Unknown {
                    error: &e,
                    abandoned: false,
                };
                if let Some(giving_back) = undo.and_then(|undo| undo(left, turn)) {
                    background.spawn(giving_back);
                }
            }
            Err(e)
        }
    }
}

/// [`unlosable`] without a turn.
pub(crate) async fn unlosable_call<T, F, U>(
    background: &Background,
    call: Pin<Box<F>>,
    undo: U,
) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(Leftover<'_, T>) -> Option<BoxFuture<'static, ()>> + Send + 'static,
{
    let call = Box::pin(async move { (call.await, ()) });
    let undo = move |left: Leftover<'_, T>, ()| undo(left);
    unlosable(background, call, undo)
        .await
        .map(|(value, ())| value)
}

#[cfg(test)]
mod tests {
    //! Cancellation without a server: the calls are futures the test
    //! drives through channels.
    use super::*;
    use tokio::sync::oneshot;

    fn background() -> Background {
        Background::new(tokio::runtime::Handle::current())
    }

    /// Run `unlosable` with `call` and `undo` in a caller that is dropped
    /// while it waits for the reply.
    async fn abandoned<F, U>(background: &Background, call: F, undo: U)
    where
        F: Future<Output = (Result<u32>, oneshot::Sender<()>)> + Send + 'static,
        U: FnOnce(Leftover<'_, u32>, oneshot::Sender<()>) -> Option<BoxFuture<'static, ()>>
            + Send
            + 'static,
    {
        let background = background.clone();
        let caller = tokio::spawn(async move {
            let _ = unlosable(&background, Box::pin(call), undo).await;
        });
        tokio::task::yield_now().await;
        caller.abort();
        let _ = caller.await;
    }

    /// What an undo was asked to give back.
    #[derive(Debug, PartialEq)]
    enum Undone {
        Done(u32),
        Unknown,
    }

    /// A call that answers what the test sends it, and an undo that reports
    /// what it was asked to give back (and drops the turn it was given).
    #[allow(clippy::type_complexity)]
    fn scripted(
        turn: oneshot::Sender<()>,
    ) -> (
        oneshot::Sender<Result<u32>>,
        impl Future<Output = (Result<u32>, oneshot::Sender<()>)> + Send + 'static,
        impl FnOnce(Leftover<'_, u32>, oneshot::Sender<()>) -> Option<BoxFuture<'static, ()>>
            + Send
            + 'static,
        oneshot::Receiver<Undone>,
    ) {
        let (answer, reply) = oneshot::channel::<Result<u32>>();
        let (undone_tx, undone) = oneshot::channel();
        let call = async move {
            let reply = reply
                .await
                .unwrap_or_else(|_| Err(Error::connection("the test dropped the reply")));
            (reply, turn)
        };
        let undo = move |left: Leftover<'_, u32>, turn: oneshot::Sender<()>| {
            let what = match left {
                Leftover::Done(n) => Undone::Done(*n),
                Leftover::Unknown { .. } => Undone::Unknown,
            };
            Some(
                async move {
                    let _ = undone_tx.send(what);
                    drop(turn);
                }
                .boxed(),
            )
        };
        (answer, call, undo, undone)
    }

    #[tokio::test]
    async fn a_success_comes_back_with_the_turn_and_nothing_is_undone() {
        let (turn_tx, mut turn_rx) = oneshot::channel();
        let (answer, call, undo, undone) = scripted(turn_tx);
        answer.send(Ok(7)).unwrap();
        let (value, turn) = unlosable(&background(), Box::pin(call), undo)
            .await
            .unwrap();
        assert_eq!(value, 7);
        assert!(turn_rx.try_recv().is_err(), "the turn is still held");
        drop(turn);
        assert!(undone.await.is_err(), "no undo ran");
    }

    #[tokio::test]
    async fn a_call_whose_caller_went_away_is_finished_and_undone_in_turn() {
        let (turn_tx, turn_rx) = oneshot::channel::<()>();
        let (answer, call, undo, undone) = scripted(turn_tx);
        let background = background();
        // The caller is waiting for the reply: drop it there.
        abandoned(&background, call, undo).await;
        answer.send(Ok(3)).unwrap();
        assert_eq!(undone.await.unwrap(), Undone::Done(3));
        // The undo held the turn until it was done.
        assert!(turn_rx.await.is_err());
        background.drained().await;
    }

    #[tokio::test]
    async fn a_transient_failure_is_undone_and_returned() {
        let (turn_tx, _turn_rx) = oneshot::channel();
        let (answer, call, undo, undone) = scripted(turn_tx);
        answer.send(Err(Error::connection("lost"))).unwrap();
        let outcome = unlosable(&background(), Box::pin(call), undo).await;
        assert!(matches!(outcome, Err(e) if e.is_transient()));
        assert_eq!(undone.await.unwrap(), Undone::Unknown);
    }

    #[tokio::test]
    async fn a_definite_failure_undoes_nothing() {
        let (turn_tx, _turn_rx) = oneshot::channel();
        let (answer, call, undo, undone) = scripted(turn_tx);
        answer
            .send(Err(Error::InvalidArgument("bad".into())))
            .unwrap();
        assert!(unlosable(&background(), Box::pin(call), undo)
            .await
            .is_err());
        assert!(undone.await.is_err(), "no undo ran");
    }

    #[tokio::test]
    async fn a_caller_gone_before_a_definite_failure_undoes_nothing() {
        let (turn_tx, _turn_rx) = oneshot::channel();
        let (answer, call, undo, undone) = scripted(turn_tx);
        let background = background();
        abandoned(&background, call, undo).await;
        answer
            .send(Err(Error::InvalidArgument("bad".into())))
            .unwrap();
        background.drained().await;
        assert!(undone.await.is_err(), "no undo ran");
    }
}
