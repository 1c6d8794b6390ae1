//! Hearing every change of a held key through Redis's client tracking
//! (docs/PROTOCOL.md §2.10), which needs no server setting.
//!
//! The command connection (on a cluster, its connection to each primary)
//! runs `CLIENT TRACKING ON REDIRECT <id> NOLOOP`: from then on the server
//! remembers every key a command on it reads, and when another client (or
//! the server: expiry, eviction, a flush) changes or removes one, it
//! publishes the key's name on `__redis__:invalidate` to the connection
//! `<id>`, the *listener* (one per node, on that node), a connection of
//! this client used for nothing else. The listener hands each name to the watchers of that
//! key ([`Tracked`]), which check their hold again (a read, which re-arms
//! the key: tracking is one-shot). A null message (a flush) wakes every
//! watcher.
//!
//! Tracking is per connection and lost with it: after a reconnect of
//! either connection (or a lagged message stream, or a periodic
//! `CLIENT TRACKINGINFO` that finds it off or its redirect broken) it is
//! turned on again, and then every watcher is woken to check at once,
//! which re-arms every key. On a cluster, a task per primary does this for
//! its node, and the primaries are read again at every topology change
//! and every second. Where the server refuses it (an ACL user without
//! `CLIENT`) tracking is off: the lock's channel, keyspace notifications
//! and the renewal still tell a loss there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{ClientLike, ClusterInterface, EventInterface, PubsubInterface};
use fred::types::config::{Server, ServerConfig};
use fred::types::Value;
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::base::error::Error;
use crate::connection::config::Config;

/// The channel the server redirects invalidations to.
const INVALIDATE: &str = "__redis__:invalidate";

/// How often tracking is checked (`CLIENT TRACKINGINFO`) and turned on
/// again after a failure to, and a cluster's primaries read again.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long a listener dropped while it connects is given to connect before
/// it is quit (fred's default connection timeout).
const CONNECTING: Duration = Duration::from_secs(10);

/// The client's tracking: the watchers of each key, and the listeners.
/// Cheap to clone.
#[derive(Clone)]
pub(crate) struct Tracking {
    shared: Arc<TrackingShared>,
}

struct TrackingShared {
    /// The watched keys: each one's wake-up and how many watch it.
    keys: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
    /// The listener connections, to quit at shutdown.
    listeners: Mutex<Vec<fred::clients::Client>>,
    /// False once the server refused tracking: nothing to watch by it.
    on: AtomicBool,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking {
            shared: Arc::new(TrackingShared {
                keys: Mutex::default(),
                listeners: Mutex::default(),
                on: AtomicBool::new(true),
            }),
        }
    }
}

/// A watcher's interest in one key: woken by [`changed`](Self::changed)
/// when the key may have changed. Dropping it stops the watch.
pub(crate) struct Tracked {
    shared: Arc<TrackingShared>,
    key: String,
    notify: Arc<Notify>,
}

impl Tracked {
    /// A wake-up: an invalidation of the key, a flush, or tracking turned
    /// on again (anything may have been missed before). Create it and call
    /// `enable` on it before the read it follows: that read re-arms the
    /// key, and nothing invalidated after it is missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut keys = self.shared.keys.lock();
        if let Some((_, users)) = keys.get_mut(&self.key) {
            *users -= 1;
            if *users == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

impl Tracking {
    /// Whether tracking is in use (the server did not refuse it).
    pub(crate) fn is_on(&self) -> bool {
        self.shared.on.load(Ordering::Relaxed)
    }

    /// Watch `key`.
    pub(crate) fn watch(&self, key: &str) -> Tracked {
        let mut keys = self.shared.keys.lock();
        let (notify, users) = keys
            .entry(key.to_owned())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        *users += 1;
        Tracked {
            shared: self.shared.clone(),
            key: key.to_owned(),
            notify: notify.clone(),
        }
    }

    /// Wake the watchers of `keys`.
    fn invalidated(&self, keys: &[Value]) {
        let watched = self.shared.keys.lock();
        for key in keys {
            if let Some((notify, _)) = key.as_str().and_then(|k| watched.get(k.as_ref())) {
                notify.notify_waiters();
            }
        }
    }

    /// Wake every watcher.
    fn wake_all(&self) {
        for (notify, _) in self.shared.keys.lock().values() {
            notify.notify_waiters();
        }
    }

    /// Quit every listener connection (shutdown): done in the background,
    /// and awaited here.
    pub(crate) async fn quit(&self) {
        let listeners = std::mem::take(&mut *self.shared.listeners.lock());
        futures::future::join_all(listeners.into_iter().filter_map(quit)).await;
    }

    /// Start tracking on `command`, the client's command connection (each
    /// of its primaries' on a cluster). The task ends when `closing` turns
    /// true, or when the server refuses tracking (then it logs why).
    pub(crate) fn start(
        &self,
        command: fred::clients::Client,
        config: &Config,
        closing: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        // Listeners speak RESP2 whatever the client does: a RESP3 one would
        // get invalidations as pushes, which fred (without its tracking
        // feature) would take for replies.
        let mut config = config.clone();
        config.redis.version = fred::types::RespVersion::RESP2;
        let tracking = self.clone();
        tokio::spawn(async move {
            let refused = if config.redis.server.is_clustered() {
                supervise(&tracking, &command, &config, closing).await
            } else {
                let server = config.redis.server.clone();
                match crate::connection::connect::fred_client_to(&config, server) {
                    Ok(listener) => run_node(&tracking, &command, None, listener, closing).await,
                    // The settings built the command client: not expected.
                    Err(e) => Some(e),
                }
            };
            if let Some(e) = refused {
                tracking.shared.on.store(false, Ordering::Relaxed);
                tracking.wake_all();
                tracing::warn!(error = %e, "client tracking refused: holds are watched on their channels and renewals only");
            }
        })
    }
}

/// On a cluster: one [`run_node`] per primary, started and stopped as the
/// primaries change (a node stops when its `stop` sender is dropped: when
/// its primary goes, and when this ends or is aborted). The error that
/// refused tracking, if one did.
async fn supervise(
    tracking: &Tracking,
    command: &fred::clients::Client,
    config: &Config,
    mut closing: watch::Receiver<bool>,
) -> Option<Error> {
    let mut changes = command.cluster_change_rx();
    let (refusals, mut refused) = tokio::sync::mpsc::unbounded_channel();
    let mut nodes: HashMap<Server, (JoinHandle<()>, watch::Sender<bool>)> = HashMap::new();
    let outcome = loop {
        let primaries = command
            .cached_cluster_state()
            .map(|state| state.unique_primary_nodes())
            .unwrap_or_default();
        nodes.retain(|server, (task, _)| primaries.contains(server) && !task.is_finished());
        for server in primaries {
            if nodes.contains_key(&server) {
                continue;
            }
            let listener = match crate::connection::connect::fred_client_to(
                config,
                ServerConfig::Centralized {
                    server: server.clone(),
                },
            ) {
                Ok(listener) => listener,
                // The settings built the command client: not expected.
                Err(e) => {
                    tracing::debug!(error = %e, node = %server, "no tracking listener for a node");
                    continue;
                }
            };
            let (tracking, command) = (tracking.clone(), command.clone());
            let refusals = refusals.clone();
            let node = server.clone();
            let (stopper, stop) = watch::channel(false);
            let task = tokio::spawn(async move {
                if let Some(e) = run_node(&tracking, &command, Some(node), listener, stop).await {
                    let _ = refusals.send(e);
                }
            });
            nodes.insert(server, (task, stopper));
        }
        tokio::select! {
            () = async { drop(closing.wait_for(|c| *c).await) } => break None,
            e = refused.recv() => break e,
            change = changes.recv() => if matches!(change, Err(RecvError::Closed)) {
                break None;
            },
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    };
    drop(nodes);
    outcome
}

/// Track on `command`'s connection to `node` (the only one off a cluster),
/// redirected to `listener` (a client to that node, not yet connected),
/// until `closing` turns true or its sender is dropped; the error that
/// refused tracking, if one did.
async fn run_node(
    tracking: &Tracking,
    command: &fred::clients::Client,
    node: Option<Server>,
    listener: fred::clients::Client,
    mut closing: watch::Receiver<bool>,
) -> Option<Error> {
    // fred's connection task keeps trying to connect, by the client's
    // reconnect policy, until it does. Started before the listener is
    // listed: a `quit` from the list then always reaches a started client
    // (one not started yet ignores it, and would connect afterwards).
    drop(listener.connect());
    let listener = Registered::new(tracking, listener);
    track_node(tracking, command, node.as_ref(), &listener.0, &mut closing).await
}

/// Quit `listener` in the background (none without a runtime: the
/// connection task ends with it). fred ignores a `quit` until its
/// connection task has started, which it may not have just after
/// `connect`: the connection is waited for first, as long as a connect may
/// take.
fn quit(listener: fred::clients::Client) -> Option<JoinHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(async move {
        let connected = listener.wait_for_connect();
        let _ = tokio::time::timeout(CONNECTING, connected).await;
        let _ = listener.quit().await;
    }))
}

/// A listener in the client's list, quit (in the background) when dropped
/// unless [`Tracking::quit`] took it first: also when its task is aborted
/// part-way (the client dropped while the listener was connecting).
struct Registered(fred::clients::Client, Tracking);

impl Registered {
    fn new(tracking: &Tracking, listener: fred::clients::Client) -> Registered {
        tracking.shared.listeners.lock().push(listener.clone());
        Registered(listener, tracking.clone())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut listeners = self.1.shared.listeners.lock();
        let before = listeners.len();
        listeners.retain(|l| l.id() != self.0.id());
        let mine = listeners.len() < before;
        drop(listeners);
        // No runtime left: the connection task ends with it.
        if mine {
            drop(quit(self.0.clone()));
        }
    }
}

/// The tracking of one node (see the module docs), on `listener` once it
/// connects; the error that refused tracking, if one did.
async fn track_node(
    tracking: &Tracking,
    command: &fred::clients::Client,
    node: Option<&Server>,
    listener: &fred::clients::Client,
    closing: &mut watch::Receiver<bool>,
) -> Option<Error> {
    let to_node = |client: &fred::clients::Client| match node {
        Some(server) => client.with_cluster_node(server.clone()),
        None => client.with_options(&fred::types::config::Options::default()),
    };
    let mut command_reconnects = command.reconnect_rx();
    let mut messages = listener.message_rx();
    loop {
        tokio::select! {
            () = async { drop(closing.wait_for(|c| *c).await) } => return None,
            connected = listener.wait_for_connect() => match connected {
                Ok(()) => break,
                Err(_) => tokio::time::sleep(CHECK_EVERY).await,
            },
        }
    }
    // Only reconnects after the first connection.
    let mut listener_reconnects = listener.reconnect_rx();
    let mut check = tokio::time::interval(CHECK_EVERY);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The listener's id while it is subscribed, and whether the command
    // connection tracks with its invalidations sent there.
    let mut listening: Option<i64> = None;
    let mut on = false;
    loop {
        if listening.is_none() {
            match listen(listener).await {
                Ok(id) => {
                    listening = Some(id);
                    on = false;
                }
                Err(e) if refuses(&e) => return Some(e),
                Err(e) => {
                    // Start again from a new connection (its reconnect
                    // event brings the next try).
                    tracing::debug!(error = %e, "client tracking: the listener failed; reconnecting it");
                    let _ = listener.force_reconnection().await;
                }
            }
        }
        if let (Some(id), false) = (listening, on) {
            match enable(&to_node(command), id).await {
                Ok(()) => {
                    on = true;
                    // Anything before may have been missed.
                    tracking.wake_all();
                }
                Err(e) if refuses(&e) => return Some(e),
                Err(e) => {
                    tracing::debug!(error = %e, "turning client tracking on failed; trying again");
                    if e.to_string().contains("does not exist") {
                        // The listener's connection is gone, and fred has
                        // not noticed yet: start it again.
                        listening = None;
                        let _ = listener.force_reconnection().await;
                    }
                }
            }
        }
        tokio::select! {
            () = async { drop(closing.wait_for(|c| *c).await) } => return None,
            message = messages.recv() => match message {
                Ok(message) if message.channel == INVALIDATE => match message.value {
                    Value::Array(keys) => tracking.invalidated(&keys),
                    // A flush: every key.
                    _ => tracking.wake_all(),
                },
                Ok(_) => {}
                // Invalidations were dropped: check every hold.
                Err(RecvError::Lagged(_)) => tracking.wake_all(),
                Err(RecvError::Closed) => return None,
            },
            event = listener_reconnects.recv() => {
                if matches!(event, Err(RecvError::Closed)) {
                    return None;
                }
                // A new connection: not subscribed, with a new id.
                listening = None;
                on = false;
            }
            event = command_reconnects.recv() => match event {
                Err(RecvError::Closed) => return None,
                Ok(server) if node.is_some_and(|n| *n != server) => {}
                _ => on = false,
            },
            _ = check.tick() => {
                if let (Some(id), true) = (listening, on) {
                    match tracking_redirect(&to_node(command)).await {
                        Ok(Some(redirect)) if redirect == id => {}
                        Ok(_) => on = false,
                        Err(e) => tracing::debug!(error = %e, "CLIENT TRACKINGINFO failed"),
                    }
                }
            }
        }
    }
}

/// Whether `e` says the server will not track for this client (an ACL
/// refusal, a server or proxy without the command), not a passing failure.
fn refuses(e: &Error) -> bool {
    match e {
        Error::Auth(_) => true,
        Error::Redis(cause) => {
            let text = cause.to_string().to_ascii_lowercase();
            text.contains("unknown command") || text.contains("unknown subcommand")
        }
        _ => false,
    }
}

/// Read the listener's id (a connection in subscribed mode cannot run
/// `CLIENT ID`: first), then subscribe it to the invalidations.
async fn listen(listener: &fred::clients::Client) -> Result<i64, Error> {
    let error = |e| Error::from_redis(e, "", Duration::ZERO);
    let id: i64 = listener
        .custom(fred::cmd!("CLIENT"), vec!["ID"])
        .await
        .map_err(error)?;
    listener.subscribe(INVALIDATE).await.map_err(error)?;
    Ok(id)
}

/// Turn tracking on at `command`'s connection, its invalidations sent to
/// the connection `id`.
async fn enable(command: &impl ClientLike, id: i64) -> Result<(), Error> {
    let _: Value = command
        .custom(
            fred::cmd!("CLIENT"),
            vec![
                Value::from("TRACKING"),
                Value::from("ON"),
                Value::from("REDIRECT"),
                Value::from(id),
                Value::from("NOLOOP"),
            ],
        )
        .await
        .map_err(|e| Error::from_redis(e, "", Duration::ZERO))?;
    Ok(())
}

/// Where the command connection's invalidations go (`CLIENT
/// TRACKINGINFO`): the listener's id, or `None` if tracking is off or its
/// redirect is broken.
async fn tracking_redirect(command: &impl ClientLike) -> Result<Option<i64>, Error> {
    let info: Value = command
        .custom(fred::cmd!("CLIENT"), vec!["TRACKINGINFO"])
        .await
        .map_err(|e| Error::from_redis(e, "", Duration::ZERO))?;
    let fields: Vec<(String, Value)> = match info {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [k, v] => Some((k.as_string()?, v.clone())),
                _ => None,
            })
            .collect(),
        Value::Map(map) => map
            .inner()
            .into_iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v)))
            .collect(),
        _ => Vec::new(),
    };
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let flags: Vec<String> = match field("flags") {
        Some(Value::Array(flags)) => flags.iter().filter_map(Value::as_string).collect(),
        _ => Vec::new(),
    };
    let healthy = flags.iter().any(|f| f == "on") && !flags.iter().any(|f| f == "broken_redirect");
    Ok(match field("redirect") {
        Some(Value::Integer(id)) if healthy => Some(*id),
        _ => None,
    })
}
