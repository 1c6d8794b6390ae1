//! Object listeners (Redisson's `RObservable.addListener`): a [`Stream`] of
//! what a lock or synchronizer hears on the client's pub/sub connection:
//! every message on its channel, and where the server publishes keyspace
//! notifications, its key's removal and expiry. Built on the pub/sub hub
//! (one shared subscription per channel per client); dropping the stream
//! is `removeListener`.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{BoxStream, Stream, StreamExt};
use tokio::sync::broadcast;

use crate::base::error::Result;
use crate::connection::pubsub::{Heard, Subscription, Wake};
use crate::engine::shared::Inner;

/// One event of an [`ObjectEvents`] stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectEvent {
    /// A message on the object's channel, with its code as Redisson
    /// publishes it (docs/PROTOCOL.md §3.1): a lock's unlock (`0`) or
    /// forced or read unlock (`1`); a semaphore's count of released or
    /// added permits; a latch's `0` (opened) or `1` (deleted or reset). A
    /// fair lock's unlock goes to its next waiter's own channel, not here.
    Published(i64),
    /// The key was removed (`DEL`, `UNLINK`, an eviction, a `RENAME` or
    /// `MOVE` away): heard only where the server publishes keyspace
    /// notifications (`notify-keyspace-events` with `K`, `g`; as Redisson's
    /// `DeletedObjectListener` needs).
    Deleted,
    /// The key expired (keyspace notifications with `K` and `x`; Redisson's
    /// `ExpiredObjectListener`).
    Expired,
    /// Events may have been missed: the pub/sub connection dropped (it is
    /// subscribed again by itself), this stream fell more than 256 events
    /// behind, or the client is shutting down. Read the object's state if
    /// it matters.
    Missed,
}

/// The stream of an object's [`ObjectEvent`]s, from
/// [`Lock::events`](crate::Lock::events) and the synchronizers' `events`.
/// Subscribed when it is returned, so nothing published afterwards is
/// missed (but for [`ObjectEvent::Missed`]); dropping it leaves the channels
/// (when no other waiter or listener of this client shares them). It ends
/// when the client is dropped.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use futures::StreamExt;
/// use redisson_lock::ObjectEvent;
///
/// let mut events = client.lock("orders")?.events().await?;
/// while let Some(event) = events.next().await {
///     match event {
///         ObjectEvent::Published(0) => println!("unlocked"),
///         ObjectEvent::Deleted | ObjectEvent::Expired => println!("gone"),
///         other => println!("{other:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "a stream does nothing unless polled; dropping it removes the listener"]
pub struct ObjectEvents {
    events: BoxStream<'static, ObjectEvent>,
    /// The shares of the subscriptions (the object's channel, its key's
    /// keyspace channel): dropped with the stream.
    _subscriptions: [Subscription; 2],
}

impl Stream for ObjectEvents {
    type Item = ObjectEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ObjectEvent>> {
        self.events.poll_next_unpin(cx)
    }
}

impl std::fmt::Debug for ObjectEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectEvents").finish_non_exhaustive()
    }
}

/// Listen to the object whose key is `key` and channel `channel`, whose
/// waiters are woken per `wake` (the listener must not change that).
pub(crate) async fn listen(
    inner: &Inner,
    key: &str,
    channel: &str,
    wake: Wake,
) -> Result<ObjectEvents> {
    if inner.is_closing() {
        return Err(crate::base::error::Error::Closed);
    }
    let keyspace = format!("__keyspace@{}__:{key}", inner.keyspace_db());
    let (messages, heard) = inner.hub.listen(channel, wake).await?;
    let (removals, removed) = inner.hub.listen(&keyspace, Wake::OneOrAll).await?;
    Ok(ObjectEvents {
        events: futures::stream::select(feed(heard), feed(removed)).boxed(),
        _subscriptions: [messages, removals],
    })
}

/// The events of one channel's feed.
fn feed(heard: broadcast::Receiver<Heard>) -> BoxStream<'static, ObjectEvent> {
    futures::stream::unfold(heard, |mut heard| async move {
        let event = match heard.recv().await {
            Ok(Heard::Message(code)) => ObjectEvent::Published(code),
            Ok(Heard::Removed { expired: true }) => ObjectEvent::Expired,
            Ok(Heard::Removed { expired: false }) => ObjectEvent::Deleted,
            Ok(Heard::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => ObjectEvent::Missed,
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((event, heard))
    })
    .boxed()
}
