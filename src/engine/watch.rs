//! Watching a tenure for its loss (docs/PROTOCOL.md §2.6, §2.9, §2.10).
//!
//! From [`SETTLE`] after an acquisition starts a tenure until the tenure
//! ends, the client watches, in the background: the key by client tracking
//! (every change of it, whoever made it, and every reconnect; unless the
//! server refused tracking), the lock's release channel (every kind that has one: a forced
//! unlock, and a release by whoever took the lock after an expiry, publish
//! there) and, when
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
//! after every wake-up (a message, an invalidation, a reconnect, a lost
//! connection) while the tenure has a guard that could be told (not while
//! its last hold is being released: that release's own message wakes it).
//! The tracking watch always checks first: that read is what makes the
//! server track the key. It tells the registry when the field is gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::interfaces::HashesInterface;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::base::error::Result;
use crate::engine::protocol::Protocol;
use crate::engine::registry::Watched;
use crate::engine::shared::Inner;
use crate::engine::watches::{Due, Source, GRAIN, SETTLE};
pub(crate) use crate::engine::watches::{TenureKey, Watches};

/// Schedule the watch of `field`'s tenure `tenure` of the lock of `proto`,
/// which started at `sent_at`. Nothing is copied but the field until the
/// watch is due (most holds end before): then it listens by client tracking
/// (if the client tracks), on its lock's release channel (if the kind has
/// one) and on its keyspace channel (if the client listens to keyspace
/// notifications).
pub(crate) fn schedule(
    inner: &Inner,
    proto: &Arc<dyn Protocol>,
    field: &Arc<str>,
    tenure: u64,
    sent_at: Instant,
) {
    let listens = inner.tracking.is_on()
        || proto.release_channel().is_some()
        || inner.config.keyspace_notifications;
    if !listens {
        return;
    }
    inner.watches.push(Due {
        at: sent_at + SETTLE,
        proto: proto.clone(),
        field: field.clone(),
        tenure,
        sent_at,
    });
}

/// Where the watch of a tenure of the lock of `proto` listens, each with
/// what a loss heard there is reported as.
fn sources(inner: &Inner, proto: &dyn Protocol) -> Vec<(Source, &'static str)> {
    let keyspace = inner
        .config
        .keyspace_notifications
        .then(|| format!("__keyspace@{}__:{}", inner.keyspace_db(), proto.name()));
    let tracking = inner
        .tracking
        .is_on()
        .then_some((Source::Tracking, "client tracking"));
    let channel = proto.release_channel();
    tracking
        .into_iter()
        .chain(channel.map(|c| (Source::Channel(c.to_owned()), "message on its channel")))
        .chain(keyspace.map(|c| (Source::Channel(c), "keyspace notification")))
        .collect()
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
        for due in due {
            let name = due.proto.name();
            let Some(alive) = inner.holds.start_watch(name, &due.field, due.tenure) else {
                continue;
            };
            // Not empty, unless tracking was turned off since: then there is
            // nothing to listen to, and the watch ends at once.
            let sources = sources(&inner, due.proto.as_ref());
            let tenure = TenureKey {
                name: name.to_owned(),
                field: due.field,
                tenure: due.tenure,
                sent_at: due.sent_at,
            };
            spawn(&inner, tenure, sources, alive);
        }
    }
}

/// Watch `tenure` on `sources` in the background until `alive` closes
/// (the tenure ended).
fn spawn(
    inner: &Arc<Inner>,
    tenure: TenureKey,
    sources: Vec<(Source, &'static str)>,
    mut alive: watch::Receiver<()>,
) {
    let inner = inner.clone();
    drop(inner.runtime.clone().spawn(async move {
        let ended = async move { while alive.changed().await.is_ok() {} };
        let (inner, tenure) = (&inner, &tenure);
        let watching = futures::future::join_all(
            sources
                .iter()
                .map(|(source, why)| watch_source(inner, tenure, source, why)),
        );
        tokio::select! {
            () = ended => {}
            _ = watching => {}
        }
    }));
}

/// What a watch listens on: a channel's subscription, or the key's
/// tracking.
enum Listening {
    Channel(crate::connection::pubsub::Subscription),
    Tracked(crate::connection::tracking::Tracked),
}

impl Listening {
    /// The next wake-up (to `enable` before the check it follows).
    fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        match self {
            Listening::Channel(s) => s.any_message(),
            Listening::Tracked(t) => t.changed(),
        }
    }

    /// Whether nothing can have been missed since `t` (see
    /// [`Subscription::quiet_since`](crate::connection::pubsub::Subscription::quiet_since)).
    /// Never for tracking: the key is tracked only once read after our
    /// last write, which the first check does.
    fn quiet_since(&self, t: Instant) -> bool {
        match self {
            Listening::Channel(s) => s.quiet_since(t),
            Listening::Tracked(_) => false,
        }
    }
}

/// Watch `source` for `tenure` until the field is found gone, the tenure
/// ends, or the client shuts down. A failed subscribe or check is tried
/// again after `retry_delay`: the renewal path still bounds how late a loss
/// is noticed.
async fn watch_source(inner: &Arc<Inner>, tenure: &TenureKey, source: &Source, why: &'static str) {
    let retry = inner.config.retry_delay.max(Duration::from_millis(1));
    let TenureKey {
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
        let listening = match source {
            // Boxed: needed once, and the watch lasts as long as the hold.
            Source::Channel(channel) => match Box::pin(inner.hub.watch(channel)).await {
                Ok(subscription) => Listening::Channel(subscription),
                Err(_) => {
                    tokio::time::sleep(retry).await;
                    continue;
                }
            },
            Source::Tracking => Listening::Tracked(inner.tracking.watch(name)),
        };
        let mut first = true;
        while !inner.is_closing() {
            let message = listening.woken();
            tokio::pin!(message);
            message.as_mut().enable();
            let check = match inner.holds.watched(name, field, *id) {
                Watched::Ended => return,
                Watched::Releasing => false,
                Watched::Held => !(first && listening.quiet_since(*sent_at)),
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
