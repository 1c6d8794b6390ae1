//! Watching a hold for its loss on a channel (docs/PROTOCOL.md §2.6, §2.9):
//! the lock's release channel while a guard's `lost()` is awaited, and the
//! key's keyspace channel for as long as the hold lasts when
//! [`Config::keyspace_notifications`](crate::Config::keyspace_notifications)
//! is on. A watcher shares the channel's subscription without being counted
//! as a waiter, checks the hold (`HEXISTS`) once its subscription is active
//! and again after every wake-up (a message, a reconnect, a lost
//! connection), and tells the registry when the field is gone.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::HashesInterface;

use crate::base::error::Result;
use crate::engine::shared::Inner;

/// Watch `channel` for the hold of `field` on the lock `name` in tenure
/// `tenure`, until `until` resolves, the field is found gone, or the client
/// shuts down. A failed subscribe or check is tried again after
/// `retry_delay`: the renewal path still bounds how late a loss is noticed.
pub(crate) async fn watch(
    inner: Arc<Inner>,
    name: String,
    field: String,
    channel: String,
    tenure: u64,
    why: &'static str,
    until: impl Future<Output = ()>,
) {
    let watching = async {
        let retry = inner.config.retry_delay.max(Duration::from_millis(1));
        loop {
            // After shutdown the hub is gone: the lease path alone tells.
            if inner.is_closing() {
                return;
            }
            let Ok(subscription) = inner.hub.watch(&channel).await else {
                tokio::time::sleep(retry).await;
                continue;
            };
            while !inner.is_closing() {
                let message = subscription.any_message();
                tokio::pin!(message);
                message.as_mut().enable();
                match holds_field(&inner, &name, &field).await {
                    Ok(false) => {
                        inner.holds.found_gone(&name, &field, tenure, why);
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
        }
    };
    tokio::select! {
        () = until => {}
        () = watching => {}
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

/// Watch the keyspace channel of `name` for the tenure `tenure` of `field`
/// until `alive` closes (the tenure ended), in the background.
pub(crate) fn keyspace(
    inner: &Arc<Inner>,
    name: &str,
    field: &str,
    tenure: u64,
    mut alive: tokio::sync::watch::Receiver<()>,
) {
    let channel = format!("__keyspace@{}__:{name}", inner.keyspace_db());
    let until = async move { while alive.changed().await.is_ok() {} };
    drop(inner.runtime.spawn(watch(
        inner.clone(),
        name.to_owned(),
        field.to_owned(),
        channel,
        tenure,
        "keyspace notification",
        until,
    )));
}
