//! [`Inner`]: what every lock, guard and synchronizer of one
//! [`Client`](crate::Client) shares: its connections, identity, settings,
//! hold registry and background work.

use std::sync::Arc;

use fred::interfaces::{ClientLike, KeysInterface};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::connection::config::Config;
use crate::connection::pubsub::Hub;
use crate::connection::redis::Redis;
use crate::engine::background::Background;
use crate::engine::registry::Holds;
use crate::engine::script_env::ScriptEnv;

/// The shared state of one client (behind its `Arc`).
pub(crate) struct Inner {
    pub(crate) id: Uuid,
    pub(crate) config: Config,
    pub(crate) redis: Redis,
    pub(crate) hub: Hub,
    /// What script calls take from this client.
    pub(crate) env: ScriptEnv,
    pub(crate) holds: Arc<Holds>,
    /// The watchdog permits of permit-expirable semaphores.
    pub(crate) permits: Arc<crate::engine::permits::Permits>,
    /// The tenures whose watch is yet to start ([`crate::engine::watch`]).
    pub(crate) watches: Arc<crate::engine::watches::Watches>,
    pub(crate) runtime: Handle,
    /// The background service: work finishing what callers started
    /// (releases, undos, queue leaves, give-backs of permits), which a
    /// shutdown waits for, then stops.
    pub(crate) background: Background,
    /// Set by [`Client::shutdown`](crate::Client::shutdown): no new
    /// acquisition, waiters stop.
    pub(crate) closing: watch::Sender<bool>,
    /// The pub/sub connection (the hub's).
    pub(crate) subscriber: fred::clients::Client,
    /// Client tracking: the watchers of held keys, and the listener
    /// connections invalidations are redirected to.
    pub(crate) tracking: crate::connection::tracking::Tracking,
    /// The watchdog task ([`renewal`](crate::engine::renewal)).
    pub(crate) watchdog: JoinHandle<()>,
    /// The hub's and the command layer's background tasks.
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

impl Inner {
    /// Delete an unlock latch or a permit latch once its call has answered
    /// (docs/PROTOCOL.md §2.4, §7.1): at once in the background while this
    /// client has waiters, else with the next script if one comes soon
    /// (`deferred_delete.rs`).
    pub(crate) fn delete_latch_later(&self, latch: String) {
        self.redis.delete_later(latch, self.hub.has_waiters());
    }

    /// Delete this client's registry entry (docs/PROTOCOL.md §9.6), once;
    /// a failure leaves it to its TTL.
    pub(crate) async fn unregister(&self) {
        let key = crate::base::layout::client_key(&self.id.hyphenated().to_string());
        let deleted: std::result::Result<i64, _> = self.redis.client.del(key).await;
        if let Err(e) = deleted {
            tracing::debug!(error = %e, "deleting the client registry entry failed");
        }
    }

    /// Whether the client is shutting down (or shut down).
    pub(crate) fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// The database number in keyspace channel names
    /// (`__keyspace@<db>__:<key>`): the configured one, 0 on a cluster.
    pub(crate) fn keyspace_db(&self) -> u8 {
        if self.config.redis.server.is_clustered() {
            0
        } else {
            self.config.redis.database.unwrap_or(0)
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watchdog.abort();
        for task in &self.tasks {
            task.abort();
        }
        let redis = self.redis.client.clone();
        let subscriber = self.subscriber.clone();
        let tracking = self.tracking.clone();
        // Closing is best effort: the runtime may already be gone.
        drop(self.runtime.spawn(async move {
            tracking.quit().await;
            let _ = subscriber.quit().await;
            let _ = redis.quit().await;
        }));
    }
}
