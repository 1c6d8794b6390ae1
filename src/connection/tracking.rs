//! Hearing every change of a held key through Redis's client tracking
//! (docs/PROTOCOL.md §2.10), which needs no server setting.
//!
//! The command connection runs `CLIENT TRACKING ON REDIRECT <id> NOLOOP`:
//! from then on the server remembers every key a command on it reads, and
//! when another client (or the server: expiry, eviction, a flush) changes
//! or removes one, it publishes the key's name on `__redis__:invalidate` to
//! the connection `<id>`, the *listener*, a connection of this client used
//! for nothing else. The listener hands each name to the watchers of that
//! key ([`Tracked`]), which check their hold again (a read, which re-arms
//! the key: tracking is one-shot). A null message (a flush) wakes every
//! watcher.
//!
//! Tracking is per connection and lost with it: after a reconnect of
//! either connection (or a lagged message stream, or a periodic
//! `CLIENT TRACKINGINFO` that finds it off or its redirect broken) it is
//! turned on again, and then every watcher is woken to check at once,
//! which re-arms every key. Off on a cluster (tracking is per node
//! connection) and where the server refuses it (an ACL user without
//! `CLIENT`): the lock's channel, keyspace notifications and the renewal
//! still tell a loss there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
use fred::types::Value;
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::base::error::Error;

/// The channel the server redirects invalidations to.
const INVALIDATE: &str = "__redis__:invalidate";

/// How often tracking is checked (`CLIENT TRACKINGINFO`), and turned on
/// again after a failure to.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The client's tracking: the watchers of each key. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Tracking {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// The watched keys: each one's wake-up and how many watch it.
    keys: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// A watcher's interest in one key: woken by [`changed`](Self::changed)
/// when the key may have changed. Dropping it stops the watch.
pub(crate) struct Tracked {
    shared: Arc<Shared>,
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

    /// Start tracking on `command` (the client's command connection), with
    /// `listener` (a connected client used for nothing else) receiving the
    /// invalidations. The task ends when `closing` turns true, the listener
    /// stops, or the server refuses tracking (then it logs why).
    pub(crate) fn start(
        &self,
        command: fred::clients::Client,
        listener: fred::clients::Client,
        closing: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        tokio::spawn(run(self.clone(), command, listener, closing))
    }
}

/// The tracking task (see the module docs).
async fn run(
    tracking: Tracking,
    command: fred::clients::Client,
    listener: fred::clients::Client,
    mut closing: watch::Receiver<bool>,
) {
    let mut command_reconnects = command.reconnect_rx();
    let mut listener_reconnects = listener.reconnect_rx();
    let mut messages = listener.message_rx();
    let mut check = tokio::time::interval(CHECK_EVERY);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The listener's id while it is subscribed, and whether the command
    // connection tracks with its invalidations sent there.
    let mut listening: Option<i64> = None;
    let mut on = false;
    loop {
        if let Err(e) = turn_on(&tracking, &command, &listener, &mut listening, &mut on).await {
            if !e.is_transient() {
                tracing::warn!(error = %e, "client tracking refused: holds are watched on their channels and renewals only");
                return;
            }
            tracing::debug!(error = %e, "turning client tracking on failed; trying again");
        }
        tokio::select! {
            () = async { drop(closing.wait_for(|c| *c).await) } => return,
            message = messages.recv() => match message {
                Ok(message) if message.channel == INVALIDATE => match message.value {
                    Value::Array(keys) => tracking.invalidated(&keys),
                    // A flush: every key.
                    _ => tracking.wake_all(),
                },
                Ok(_) => {}
                // Invalidations were dropped: check every hold.
                Err(RecvError::Lagged(_)) => tracking.wake_all(),
                Err(RecvError::Closed) => return,
            },
            event = listener_reconnects.recv() => {
                if matches!(event, Err(RecvError::Closed)) {
                    return;
                }
                // A new connection: not subscribed, with a new id.
                listening = None;
                on = false;
            }
            event = command_reconnects.recv() => {
                if matches!(event, Err(RecvError::Closed)) {
                    return;
                }
                on = false;
            }
            _ = check.tick() => {
                if let (Some(id), true) = (listening, on) {
                    match tracking_redirect(&command).await {
                        Ok(Some(redirect)) if redirect == id => {}
                        Ok(_) => on = false,
                        Err(e) => tracing::debug!(error = %e, "CLIENT TRACKINGINFO failed"),
                    }
                }
            }
        }
    }
}

/// Subscribe the listener if it is not, and turn tracking on at the command
/// connection if it is not; once turned on, wake every watcher (anything
/// before may have been missed).
async fn turn_on(
    tracking: &Tracking,
    command: &fred::clients::Client,
    listener: &fred::clients::Client,
    listening: &mut Option<i64>,
    on: &mut bool,
) -> Result<(), Error> {
    let error = |e| Error::from_redis(e, "", Duration::ZERO);
    let id = match *listening {
        Some(id) => id,
        None => {
            // A connection in subscribed mode cannot run `CLIENT ID`: ask
            // first.
            let id: i64 = listener
                .custom(fred::cmd!("CLIENT"), vec!["ID"])
                .await
                .map_err(error)?;
            listener.subscribe(INVALIDATE).await.map_err(error)?;
            *listening = Some(id);
            *on = false;
            id
        }
    };
    if *on {
        return Ok(());
    }
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
        .map_err(error)?;
    *on = true;
    tracking.wake_all();
    Ok(())
}

/// Where the command connection's invalidations go (`CLIENT
/// TRACKINGINFO`): the listener's id, or `None` if tracking is off or its
/// redirect is broken.
async fn tracking_redirect(command: &fred::clients::Client) -> Result<Option<i64>, Error> {
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
