//! Watching a tenure for its loss on channels (docs/PROTOCOL.md §2.6, §2.9).
//!
//! From [`SETTLE`] after an acquisition starts a tenure until the tenure
//! ends, the client watches, in the background, the lock's release channel
//! (every kind that has one: a forced unlock, and a release by whoever took
//! the lock after an expiry, publish there) and, when
//! [`Config::keyspace_notifications`](crate::Config::keyspace_notifications)
//! is on, the key's keyspace channel. So every guard hears such a loss
//! within a round trip (one in its first moments, when the watch starts),
//! whether or not its `lost()` is awaited: `is_lost()` turns true by
//! itself. One service task per client ([`run`]) starts the watches that
//! are due; a hold released before then costs no subscription, no check
//! and no task.
//!
//! A watcher shares the channel's subscription without being counted as a
//! waiter. It checks the hold (`HEXISTS`) once its subscription is active,
//! unless the channel was already subscribed, with nothing heard, before
//! the acquisition was sent (then nothing can have been missed), and again
//! after every wake-up (a message, a reconnect, a lost connection) while
//! the tenure has a guard that could be told (not while its last hold is
//! being released: that release's own message wakes it). It tells the
//! registry when the field is gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::interfaces::HashesInterface;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::error::Result;
use crate::engine::registry::Watched;
use crate::engine::shared::Inner;
use crate::engine::watches::{Due, GRAIN, SETTLE};
pub(crate) use crate::engine::watches::{Tenure, Watches};

/// Schedule the watch of `tenure`, which started at `sent_at`, on its lock's
/// release channel (if the kind has one) and keyspace channel (if the
/// client listens to keyspace notifications).
pub(crate) fn schedule(inner: &Inner, tenure: Tenure, release_channel: Option<&str>) {
    let keyspace = inner
        .config
        .keyspace_notifications
        .then(|| format!("__keyspace@{}__:{}", inner.keyspace_db(), tenure.name));
    let channels: Vec<(String, &'static str)> = release_channel
        .map(|c| (c.to_owned(), "message on its channel"))
        .into_iter()
        .chain(keyspace.map(|c| (c, "keyspace notification")))
        .collect();
    if channels.is_empty() {
        return;
    }
    let due = Due {
        at: tenure.sent_at + SETTLE,
        tenure,
        channels,
    };
    inner.watches.push(due);
}

/// The client's watch service: starts each queued tenure's watch when it is
/// due, if the tenure still has guards. Ends when the client shuts down or
/// is dropped.
pub(crate) async fn run(
    watches: Arc<Watches>,
    inner: Weak<Inner>,
    mut closing: watch::Receiver<bool>,
) {
    let mut woke = Instant::now();
    loop {
        // At most one wake-up per `GRAIN`, however many tenures start.
        let next = watches.next_at().map(|at| at.max(woke + GRAIN));
        let wait = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => watches.queued().await,
            }
        };
        tokio::select! {
            () = wait => {}
            changed = closing.wait_for(|c| *c) => {
                drop(changed);
                return;
            }
        }
        let now = Instant::now();
        woke = now;
        let due = watches.due(now);
        if due.is_empty() {
            continue;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        for Due {
            tenure, channels, ..
        } in due
        {
            if let Some(alive) = inner
                .holds
                .start_watch(&tenure.name, &tenure.field, tenure.tenure)
            {
                spawn(&inner, tenure, channels, alive);
            }
        }
    }
}

/// Watch `tenure` on `channels` in the background until `alive` closes
/// (the tenure ended).
fn spawn(
    inner: &Arc<Inner>,
    tenure: Tenure,
    channels: Vec<(String, &'static str)>,
    mut alive: watch::Receiver<()>,
) {
    let inner = inner.clone();
    drop(inner.runtime.clone().spawn(async move {
        let ended = async move { while alive.changed().await.is_ok() {} };
        let (inner, tenure) = (&inner, &tenure);
        let watching = futures::future::join_all(
            channels
                .iter()
                .map(|(channel, why)| watch_channel(inner, tenure, channel, why)),
        );
        tokio::select! {
            () = ended => {}
            _ = watching => {}
        }
    }));
}

/// Watch `channel` for `tenure` until the field is found gone, the tenure
/// ends, or the client shuts down. A failed subscribe or check is tried
/// again after `retry_delay`: the renewal path still bounds how late a loss
/// is noticed.
async fn watch_channel(inner: &Arc<Inner>, tenure: &Tenure, channel: &str, why: &'static str) {
    let retry = inner.config.retry_delay.max(Duration::from_millis(1));
    let Tenure {
        name,
        field,
        tenure: id,
        sent_at,
    } = tenure;
    loop {
        // After shutdown the hub is gone: the lease path alone tells.
        if inner.is_closing() || inner.holds.watched(name, field, *id) == Watched::Ended {
            return;
        }
        let Ok(subscription) = inner.hub.watch(channel).await else {
            tokio::time::sleep(retry).await;
            continue;
        };
        let mut first = true;
        while !inner.is_closing() {
            let message = subscription.any_message();
            tokio::pin!(message);
            message.as_mut().enable();
            let check = match inner.holds.watched(name, field, *id) {
                Watched::Ended => return,
                Watched::Releasing => false,
                Watched::Held => !(first && subscription.quiet_since(*sent_at)),
            };
            first = false;
            if !check {
                message.await;
                continue;
            }
            match holds_field(inner, name, field).await {
                Ok(false) => {
                    inner.holds.found_gone(name, field, *id, why);
                    return;
                }
                Ok(true) => message.await,
                Err(_) => {
                    tokio::select! {
                        () = message => {}
                        () = tokio::time::sleep(retry) => {}
                    }
                }
            }
        }
        return;
    }
}

/// Whether `field` holds the lock `name` (`HEXISTS`).
pub(crate) async fn holds_field(inner: &Inner, name: &str, field: &str) -> Result<bool> {
    inner
        .redis
        .key_command(name, |c| {
            let (name, field) = (name.to_owned(), field.to_owned());
            async move { c.hexists(name, field).await }
        })
        .await
}
