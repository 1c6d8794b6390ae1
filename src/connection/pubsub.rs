//! One Redis subscription per channel per client, shared by every local
//! waiter and reference counted (docs/PROTOCOL.md §3.2, §3.3).
//!
//! Waiters hold a [`Subscription`]; the first one for a channel subscribes,
//! the last one to drop it unsubscribes. Subscribe and unsubscribe commands
//! go through one task in order, so a leave-and-rejoin can never end up
//! unsubscribed. Messages wake waiters through a [`Notify`], per the
//! channel's [`Wake`] policy, chosen by whoever subscribes: `0` wakes one
//! (a permit is stored if none waits) and `1` wakes all; or a count `m`
//! wakes `min(m, local waiters)`; or any message wakes all. After the subscriber
//! reconnects, every channel is subscribed again and every waiter woken to
//! re-check, since messages published during the gap are lost; when the
//! connection is lost, every waiter is woken at once too, so none sleeps on
//! a dead connection until its holder's TTL.
//!
//! A holder may also [`watch`](Hub::watch) its lock's channel, to re-check its
//! hold whenever anything is published there (a forced unlock): a watcher
//! shares the channel's subscription but is never counted or woken as a
//! waiter, so it takes no wake-up meant for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{ClusterInterface, EventInterface};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch, Notify};
use tokio::task::JoinHandle;

use crate::base::error::{Error, Result};
pub(crate) use crate::connection::pubsub_commands::Commands;
use crate::connection::pubsub_commands::{
    may_remove, message_code, placement, subscribe, unsubscribe,
};

/// The hub of one client.
pub(crate) struct Hub {
    shared: Arc<HubShared>,
}

struct HubShared {
    channels: Mutex<HashMap<String, Arc<ChannelEntry>>>,
    /// Subscriptions held by waiters (not watchers), on every channel.
    waiters: AtomicUsize,
    ops: mpsc::UnboundedSender<Op>,
    timeout: Duration,
}

struct ChannelEntry {
    /// The channel's name (the map's key too), for its subscribers' drop.
    channel: Box<str>,
    /// Local holders of a [`Subscription`]; changed only under the map lock.
    refs: Mutex<usize>,
    /// How many of `refs` are watchers, not waiters.
    watchers: AtomicUsize,
    ready: watch::Sender<Ready>,
    notify: Notify,
    /// Every message, reconnect and connection loss, for watchers.
    any: Notify,
    /// On a cluster: the nodes the subscription was made on, to notice when
    /// the channel's slot has moved to another node.
    placed: Mutex<Vec<String>>,
    /// How messages wake the waiters, set by the first subscriber.
    wake: Wake,
    /// How many messages arrived so far, and the code of the last one.
    messages: Mutex<(u64, i64)>,
    /// Object listeners' feed, made by the first listener.
    listeners: Mutex<Option<broadcast::Sender<Heard>>>,
    /// When a watcher was last woken, or the channel last (re)subscribed:
    /// a watcher whose hold was taken after it, on a channel subscribed
    /// since, has missed nothing ([`Subscription::quiet_since`]).
    stirred: Mutex<tokio::time::Instant>,
}

/// How a channel's messages wake its local waiters (docs/PROTOCOL.md §3.3),
/// chosen by the first subscriber of the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// `0` wakes one waiter, `1` wakes all, anything else none (what
    /// Redisson's lock channels carry).
    OneOrAll,
    /// A count `m` wakes `min(m, local waiters)` waiters (a count of 0 or
    /// less wakes none).
    Counted,
    /// Any message wakes every waiter.
    Every,
}

/// What an object listener hears on a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heard {
    /// A message with this code.
    Message(i64),
    /// A keyspace event that can remove the key: `expired`, or another
    /// (`del`, `evicted`, `rename_from`, …).
    Removed {
        /// Whether it was an expiry.
        expired: bool,
    },
    /// Messages may have been lost (the connection dropped, this listener
    /// fell behind, or the client is shutting down).
    Missed,
}

/// How many events a listener may fall behind before it hears
/// [`Heard::Missed`].
const LISTENER_BACKLOG: usize = 256;

#[derive(Clone, Debug)]
enum Ready {
    Pending,
    Subscribed,
    Failed(Error),
}

enum Op {
    Subscribe(String),
    Unsubscribe(String),
}

/// A waiter's share of a channel subscription. Dropping it leaves the channel.
pub(crate) struct Subscription {
    shared: Arc<HubShared>,
    entry: Arc<ChannelEntry>,
    /// How many messages the channel had seen when this subscription joined.
    since: u64,
    /// A watcher (a holder re-checking its hold), not a waiter.
    watcher: bool,
}

impl Hub {
    /// Start the hub's tasks on `subscriber`, a connection used for nothing else.
    pub(crate) fn start(
        subscriber: fred::clients::Client,
        commands: Commands,
        timeout: Duration,
    ) -> (Hub, Vec<JoinHandle<()>>) {
        let (ops, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(HubShared {
            channels: Mutex::new(HashMap::new()),
            waiters: AtomicUsize::new(0),
            ops,
            timeout,
        });
        let tasks = vec![
            tokio::spawn(run_ops(subscriber.clone(), shared.clone(), rx, commands)),
            tokio::spawn(run_messages(subscriber, shared.clone())),
        ];
        (Hub { shared }, tasks)
    }

    /// Whether any local waiter holds a subscription, on any channel.
    pub(crate) fn has_waiters(&self) -> bool {
        self.shared.waiters.load(Ordering::Relaxed) > 0
    }

    /// Join `channel` as a waiter, waiting until the server confirmed the
    /// subscription (at most the command timeout); messages wake waiters per
    /// `wake` (if this is the channel's first local subscriber; later ones
    /// share its policy).
    pub(crate) async fn subscribe(&self, channel: &str, wake: Wake) -> Result<Subscription> {
        self.join(channel, wake, false).await
    }

    /// Join `channel` as a watcher: woken through
    /// [`Subscription::any_message`] by every message, never counted or
    /// woken as a waiter. It waits for the subscription without a time
    /// limit (it fails only if the server refuses it or the hub stops). A keyspace channel (`__keyspace@<db>__:<key>`) is
    /// subscribed on the node that holds the key, and wakes its watchers
    /// only for events that can remove the key or a field of it.
    pub(crate) async fn watch(&self, channel: &str) -> Result<Subscription> {
        self.join(channel, Wake::OneOrAll, true).await
    }

    /// Join `channel` as a watcher that also receives every message,
    /// removal event and possible loss on it (an object listener); returns
    /// once the server confirmed the subscription, so nothing published
    /// after that is missed. A caller waits for it, so at most the command
    /// timeout, as a waiter does.
    pub(crate) async fn listen(
        &self,
        channel: &str,
        wake: Wake,
    ) -> Result<(Subscription, broadcast::Receiver<Heard>)> {
        let subscription = self.enter(channel, wake, true);
        let heard = subscription.entry.listener();
        self.ready(&subscription, false).await?;
        Ok((subscription, heard))
    }

    async fn join(&self, channel: &str, wake: Wake, watcher: bool) -> Result<Subscription> {
        let subscription = self.enter(channel, wake, watcher);
        self.ready(&subscription, watcher).await?;
        Ok(subscription)
    }

    /// Take a share of `channel`'s subscription, asking for it if this is
    /// its first local subscriber. Dropping the share (even by
    /// cancellation) leaves.
    fn enter(&self, channel: &str, wake: Wake, watcher: bool) -> Subscription {
        let (entry, first) = {
            let mut channels = self.shared.channels.lock();
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| {
                    Arc::new(ChannelEntry {
                        channel: channel.into(),
                        refs: Mutex::new(0),
                        watchers: AtomicUsize::new(0),
                        ready: watch::Sender::new(Ready::Pending),
                        notify: Notify::new(),
                        any: Notify::new(),
                        placed: Mutex::new(Vec::new()),
                        wake,
                        messages: Mutex::new((0, 0)),
                        listeners: Mutex::new(None),
                        stirred: Mutex::new(tokio::time::Instant::now()),
                    })
                })
                .clone();
            let mut refs = entry.refs.lock();
            *refs += 1;
            let first = *refs == 1;
            drop(refs);
            let count = if watcher {
                &entry.watchers
            } else {
                &self.shared.waiters
            };
            count.fetch_add(1, Ordering::Relaxed);
            (entry, first)
        };
        if first {
            crate::base::telemetry::subscription(true);
        }
        // From here on, dropping `subscription` (even by cancellation) leaves.
        let since = entry.messages.lock().0;
        let subscription = Subscription {
            shared: self.shared.clone(),
            entry,
            since,
            watcher,
        };
        if first {
            let _ = self.shared.ops.send(Op::Subscribe(channel.to_owned()));
        }
        subscription
    }

    /// Wait until `subscription`'s channel is subscribed: at most the
    /// command timeout, or as long as it takes for `background` work (a
    /// hold's watch) nobody waits on.
    async fn ready(&self, subscription: &Subscription, background: bool) -> Result<()> {
        let mut ready = subscription.entry.ready.subscribe();
        let settled = ready.wait_for(|r| !matches!(r, Ready::Pending));
        // A hold's watch is background work nobody waits on: it waits for
        // its subscription as long as the queue of them takes (many holds
        // taken at once), rather than give up and queue it again.
        let outcome = if background {
            Ok(settled.await)
        } else {
            tokio::time::timeout(self.shared.timeout, settled).await
        };
        match outcome {
            Err(_) => Err(Error::Timeout(self.shared.timeout)),
            Ok(Err(_)) => Err(Error::connection("pub/sub hub stopped")),
            Ok(Ok(r)) => match &*r {
                Ready::Failed(e) => Err(e.clone()),
                _ => Ok(()),
            },
        }
    }
}

impl Hub {
    /// Wake every waiter of every channel to re-check (shutdown).
    pub(crate) fn wake_all(&self) {
        for (_, entry) in self.shared.all() {
            entry.wake_all();
        }
    }
}

impl Subscription {
    /// A wake-up from this channel. Create it and call `enable` on it before
    /// the acquire attempt it follows, so no message between the attempt and
    /// the wait is missed.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.entry.notify.notified()
    }

    /// The code of the last message on this channel since this
    /// subscription joined, if any arrived.
    pub(crate) fn last_message(&self) -> Option<i64> {
        let (count, code) = *self.entry.messages.lock();
        (count > self.since).then_some(code)
    }

    /// A watcher's wake-up: any message on the channel, a reconnect or a
    /// lost connection. Create it and call `enable` on it before the check
    /// it follows, so nothing published in between is missed.
    pub(crate) fn any_message(&self) -> tokio::sync::futures::Notified<'_> {
        self.entry.any.notified()
    }

    /// Whether the channel has been subscribed since before `t`, with no
    /// message, reconnect or lost connection since: everything published
    /// after a command sent at `t` ran will still wake this watcher. (Call
    /// it after enabling [`any_message`](Self::any_message).)
    pub(crate) fn quiet_since(&self, t: tokio::time::Instant) -> bool {
        matches!(*self.entry.ready.borrow(), Ready::Subscribed) && *self.entry.stirred.lock() < t
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.shared.channels.lock();
        let count = if self.watcher {
            &self.entry.watchers
        } else {
            &self.shared.waiters
        };
        count.fetch_sub(1, Ordering::Relaxed);
        let mut refs = self.entry.refs.lock();
        *refs -= 1;
        if *refs == 0 {
            drop(refs);
            crate::base::telemetry::subscription(false);
            channels.remove(&*self.entry.channel);
            let _ = self
                .shared
                .ops
                .send(Op::Unsubscribe(self.entry.channel.to_string()));
        }
    }
}

impl ChannelEntry {
    /// A new object listener's feed.
    fn listener(&self) -> broadcast::Receiver<Heard> {
        self.listeners
            .lock()
            .get_or_insert_with(|| broadcast::Sender::new(LISTENER_BACKLOG))
            .subscribe()
    }

    /// Tell the object listeners, if any.
    fn tell(&self, heard: Heard) {
        if let Some(listeners) = &*self.listeners.lock() {
            let _ = listeners.send(heard);
        }
    }

    /// Wake the watchers (and note when).
    fn stir(&self) {
        *self.stirred.lock() = tokio::time::Instant::now();
        self.any.notify_waiters();
    }

    /// The channel is (again) subscribed.
    fn subscribed(&self) {
        *self.stirred.lock() = tokio::time::Instant::now();
        self.ready.send_replace(Ready::Subscribed);
    }

    /// Wake waiters for a message with `code`, per the channel's policy.
    fn deliver(&self, code: i64) {
        {
            let mut messages = self.messages.lock();
            *messages = (messages.0.wrapping_add(1), code);
        }
        self.tell(Heard::Message(code));
        self.stir();
        match (self.wake, code) {
            (Wake::OneOrAll, 0) => self.notify.notify_one(),
            (Wake::OneOrAll, 1) => self.notify.notify_waiters(),
            (Wake::OneOrAll, _) => {}
            (Wake::Counted, m) => {
                let waiters = self.waiters();
                let wake = usize::try_from(m).unwrap_or(0).min(waiters);
                for _ in 0..wake {
                    self.notify.notify_one();
                }
            }
            (Wake::Every, _) => self.wake_all(),
        }
    }

    /// Local waiters on this channel (its subscribers less its watchers).
    fn waiters(&self) -> usize {
        self.refs
            .lock()
            .saturating_sub(self.watchers.load(Ordering::Relaxed))
    }

    fn wake_all(&self) {
        // Every caller is a moment when messages may have been lost.
        self.tell(Heard::Missed);
        self.stir();
        self.notify.notify_waiters();
        // Also leave a permit for a waiter between its attempt and its wait.
        self.notify.notify_one();
    }
}

impl HubShared {
    fn entry(&self, channel: &str) -> Option<Arc<ChannelEntry>> {
        self.channels.lock().get(channel).cloned()
    }

    fn all(&self) -> Vec<(String, Arc<ChannelEntry>)> {
        self.channels
            .lock()
            .iter()
            .map(|(c, e)| (c.clone(), e.clone()))
            .collect()
    }
}

/// Run subscribe/unsubscribe commands in order, and subscribe again after
/// reconnects and cluster changes (docs/PROTOCOL.md §3.5).
async fn run_ops(
    subscriber: fred::clients::Client,
    shared: Arc<HubShared>,
    mut ops: mpsc::UnboundedReceiver<Op>,
    commands: Commands,
) {
    let mut reconnects = subscriber.reconnect_rx();
    let mut errors = subscriber.error_rx();
    // Redis drops sharded subscriptions when their slot moves (a failover
    // or resharding), and fred does not report it; a node that died takes
    // classic ones with it. On a cluster, while anyone waits, the topology
    // is read again every second (Redisson's `scanInterval`) and the
    // channels whose node changed are subscribed again where they now live.
    let mut scan = tokio::time::interval(Duration::from_secs(1));
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Channels whose subscription could not be made again (after a
    // reconnect or a slot move): tried again a second after each failure
    // (not at once: a refused SUBSCRIBE's error reply may still be on its
    // way, and must not be taken for the answer to the next one).
    let mut failed: Vec<String> = Vec::new();
    let retry_in = Duration::from_secs(1);
    let mut retry_at = tokio::time::Instant::now();
    loop {
        tokio::select! {
            op = ops.recv() => match op {
                None => return,
                Some(Op::Subscribe(channel)) => {
                    let Some(entry) = shared.entry(&channel) else { continue };
                    let placed = placement(&subscriber, commands, &channel);
                    let outcome = match subscribe(&subscriber, commands, vec![channel.clone()]).await {
                        Ok(()) => {
                            *entry.placed.lock() = placed;
                            *entry.stirred.lock() = tokio::time::Instant::now();
                            Ready::Subscribed
                        }
                        // An ACL user that may not listen on the channel
                        // waits in vain: say so, not "try again".
                        Err(e) => {
                            tracing::debug!(channel = channel.as_str(), error = %e, "subscribing failed");
                            let text = e.to_string();
                            Ready::Failed(match Error::from_redis(e, "", Duration::ZERO) {
                                e @ Error::Auth(_) => e,
                                _ => Error::connection(format!("subscribe failed: {text}")),
                            })
                        }
                    };
                    entry.ready.send_replace(outcome);
                }
                Some(Op::Unsubscribe(channel)) => {
                    if shared.entry(&channel).is_some() {
                        continue; // rejoined meanwhile; its Subscribe is queued
                    }
                    if let Err(e) = unsubscribe(&subscriber, commands, channel.clone()).await {
                        tracing::debug!(channel = channel.as_str(), error = %e, "unsubscribing failed");
                    }
                }
            },
            error = errors.recv() => {
                match error {
                    Err(RecvError::Closed) => return,
                    Err(RecvError::Lagged(_)) => {}
                    Ok((e, server)) => {
                        let server = server.as_ref().map(tracing::field::display);
                        tracing::warn!(server, error = %e, "Redis pub/sub connection lost; waking every waiter");
                    }
                }
                // The connection is lost: messages are lost until it is
                // back. Wake every waiter to re-check at once (and fail
                // fast with a transient error while Redis is unreachable)
                // rather than sleep until the holder's TTL; the reconnect
                // below wakes them again.
                for (_, entry) in shared.all() {
                    entry.wake_all();
                }
            }
            event = reconnects.recv() => {
                match event {
                    Err(RecvError::Closed) => return,
                    Err(RecvError::Lagged(_)) => {}
                    Ok(server) => {
                        tracing::info!(server = %server, "Redis pub/sub connection re-established");
                    }
                }
                failed = resubscribe(&subscriber, commands, shared.all(), "reconnect").await;
                retry_at = tokio::time::Instant::now() + retry_in;
            }
            () = tokio::time::sleep_until(retry_at), if !failed.is_empty() => {
                let again: Vec<_> = std::mem::take(&mut failed)
                    .into_iter()
                    .filter_map(|c| shared.entry(&c).map(|e| (c, e)))
                    .collect();
                failed = resubscribe(&subscriber, commands, again, "retry").await;
                retry_at = tokio::time::Instant::now() + retry_in;
            }
            _ = scan.tick(), if commands.clustered => {
                let entries = shared.all();
                if entries.is_empty() {
                    continue;
                }
                if let Err(e) = subscriber.sync_cluster().await {
                    tracing::debug!(error = %e, "reading the cluster topology failed");
                    continue;
                }
                let moved: Vec<_> = entries
                    .into_iter()
                    .filter(|(channel, entry)| {
                        *entry.placed.lock() != placement(&subscriber, commands, channel)
                    })
                    .collect();
                if !moved.is_empty() {
                    failed.extend(resubscribe(&subscriber, commands, moved, "slot_moved").await);
                    retry_at = tokio::time::Instant::now() + retry_in;
                }
            }
        }
    }
}

/// Subscribe to `entries` again, then wake all their waiters to re-check:
/// messages published meanwhile are lost. Subscribing to a channel already
/// subscribed on that connection changes nothing. The channels it could not
/// subscribe to: they count as not subscribed (a new waiter's join fails,
/// and is tried again) until a later try succeeds.
async fn resubscribe(
    subscriber: &fred::clients::Client,
    commands: Commands,
    entries: Vec<(String, Arc<ChannelEntry>)>,
    why: &str,
) -> Vec<String> {
    if entries.is_empty() {
        return Vec::new();
    }
    let channels = entries.iter().map(|(c, _)| c.clone()).collect();
    let placed: Vec<_> = entries
        .iter()
        .map(|(channel, _)| placement(subscriber, commands, channel))
        .collect();
    for (channel, _) in &entries {
        tracing::debug!(
            channel = channel.as_str(),
            reason = why,
            "subscribing again"
        );
    }
    let failed = match subscribe(subscriber, commands, channels).await {
        Ok(()) => {
            for ((_, entry), placed) in entries.iter().zip(placed) {
                *entry.placed.lock() = placed;
                entry.subscribed();
            }
            tracing::debug!(channels = entries.len(), reason = why, "subscribed again");
            Vec::new()
        }
        Err(e) => {
            // Forget where they were, and try again in a second.
            tracing::warn!(channels = entries.len(), reason = why, error = %e, "subscribing again failed; trying again in 1 s");
            let failure = Ready::Failed(Error::connection(format!("subscribe failed: {e}")));
            for (_, entry) in &entries {
                entry.placed.lock().clear();
                entry.ready.send_replace(failure.clone());
            }
            entries.iter().map(|(c, _)| c.clone()).collect()
        }
    };
    for (_, entry) in entries {
        entry.wake_all();
    }
    failed
}

/// Deliver messages to the waiters of their channel, and keyspace events
/// (which fred hands over on a receiver of their own) to the watchers of
/// their key's channel.
async fn run_messages(subscriber: fred::clients::Client, shared: Arc<HubShared>) {
    let mut messages = subscriber.message_rx();
    let mut events = subscriber.keyspace_event_rx();
    let lagged = |shared: &HubShared| {
        // Some messages were dropped: wake everyone to re-check.
        for (_, entry) in shared.all() {
            entry.wake_all();
        }
    };
    loop {
        tokio::select! {
            message = messages.recv() => match message {
                Ok(message) => {
                    let Some(entry) = shared.entry(&message.channel) else {
                        continue;
                    };
                    if let Some(code) = message_code(&message.value) {
                        entry.deliver(code);
                    }
                }
                Err(RecvError::Lagged(_)) => lagged(&shared),
                Err(RecvError::Closed) => return,
            },
            event = events.recv() => match event {
                Ok(event) => {
                    // Only watchers listen here: wake them for an event that
                    // can have removed the key or a field of it.
                    if !may_remove(&event.operation) {
                        continue;
                    }
                    let key = String::from_utf8_lossy(event.key.as_bytes());
                    let channel = format!("__keyspace@{}__:{key}", event.db);
                    if let Some(entry) = shared.entry(&channel) {
                        entry.tell(Heard::Removed {
                            expired: event.operation == "expired",
                        });
                        entry.stir();
                    }
                }
                Err(RecvError::Lagged(_)) => lagged(&shared),
                Err(RecvError::Closed) => return,
            },
        }
    }
}
