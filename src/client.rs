//! [`Client`]: one application's connection to Redis, shared by every lock
//! and synchronizer taken through it, and how it is set up and shut down.

use std::sync::Arc;

use fred::interfaces::ClientLike;
use tokio::runtime::Handle;
use tokio::sync::watch;
use uuid::Uuid;

use crate::base::error::Result;
use crate::connection::config::Config;
use crate::connection::pubsub::{Commands, Hub};
use crate::connection::redis::Redis;
use crate::connection::tracking::Tracking;
use crate::engine::background::Background;
use crate::engine::registry::Holds;
use crate::engine::renewal;
use crate::engine::script_env::ScriptEnv;
use crate::engine::shared::Inner;

/// A connection to Redis shared by every lock taken through it: one fred
/// client for commands, one connection for pub/sub, the lock watchdog, and a
/// random UUID client id (Redisson's `ServiceManager.id`).
///
/// Cheap to clone; all clones share the connections. The connections close
/// when the last clone, lock handle and guard are dropped, or at
/// [`shutdown`](Self::shutdown).
///
/// ```no_run
/// # async fn demo() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("orders")?.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl Client {
    /// Connect with a full [`Config`]. Fails within `config.timeout` if the
    /// server cannot be reached.
    ///
    /// # Errors
    ///
    /// [`Error::Config`](crate::Error::Config) for settings out of range
    /// (before connecting), or [`PubSubMode::Sharded`](crate::PubSubMode)
    /// / `Both` on a server without sharded pub/sub;
    /// [`Error::Connection`](crate::Error::Connection) if the server cannot
    /// be reached within `config.timeout`; [`Error::Auth`](crate::Error::Auth)
    /// if it refuses the credentials; another translated Redis error if it
    /// answers the first commands with one; [`Error::Auth`](crate::Error::Auth)
    /// naming the commands, if the ACL user may not run one the scripts
    /// need (docs/PROTOCOL.md §9.5).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it starts the client's tasks on the current
    /// one). From code without one, use `blocking::BlockingClient::connect_with`
    /// (feature `blocking`), which starts a runtime of its own.
    ///
    /// # Cancel safety
    ///
    /// Nothing is written to Redis before it returns. A future dropped
    /// part-way closes the connections it opened, in the background.
    pub async fn connect_with(config: Config) -> Result<Client> {
        config.validate()?;
        // Dropped on any error below (or if this future is dropped), the
        // connections are closed in the background.
        let connections = crate::connection::connect::connect(&config).await?;
        let commands = Commands::resolve(config.pubsub_mode, &connections.redis, config.timeout)
            .await
            .map_err(|e| e.at(&config.server_description()))?;
        let id = config.client_id.unwrap_or_else(Uuid::new_v4);
        crate::connection::acl::check(
            &connections.redis,
            &id.hyphenated().to_string(),
            commands.publish(),
            config.timeout,
        )
        .await
        .map_err(|e| e.at(&config.server_description()))?;
        if config.keyspace_notifications {
            crate::connection::pubsub_commands::check_keyspace_events(
                &connections.redis,
                config.timeout,
            )
            .await
            .map_err(|e| e.at(&config.server_description()))?;
        }
        let (redis, subscriber) = connections.keep();
        crate::base::telemetry::describe();
        let (redis, latch_task) = Redis::start(redis, &config);
        let holds = Arc::new(Holds::new(config.lock_watchdog_timeout));
        let permits = Arc::new(crate::engine::permits::Permits::new(
            config.lock_watchdog_timeout,
        ));
        let (hub, mut tasks) = Hub::start(subscriber.clone(), commands, config.timeout);
        tasks.push(latch_task);
        tasks.push(tokio::spawn(crate::connection::connect::watch_connection(
            redis.client.clone(),
        )));
        let registration =
            crate::engine::registration::Registration::new(&config, &id.hyphenated().to_string());
        // One task: the renewals and the registry's refreshes, stopped together.
        let renewals = renewal::run(renewal::Watchdog {
            holds: holds.clone(),
            permits: permits.clone(),
            redis: redis.clone(),
            batch_size: config.lock_watchdog_batch_size,
            retry_delay: config.retry_delay,
            by_slot: config.redis.server.is_clustered(),
            check_every: config.hold_check_interval,
        });
        let registry = registration.run(redis.clone());
        let watchdog = tokio::spawn(async move {
            futures::future::join(renewals, registry).await;
        });
        let closing = watch::Sender::new(false);
        let tracking = Tracking::default();
        tasks.push(tracking.start(redis.client.clone(), &config, closing.subscribe()));
        let env = ScriptEnv::new(&config, id.hyphenated().to_string(), commands.publish());
        let watches = Arc::new(crate::engine::watches::Watches::default());
        let inner = Arc::new(Inner {
            id,
            config,
            redis,
            hub,
            env,
            holds,
            permits,
            watches: watches.clone(),
            runtime: Handle::current(),
            background: Background::new(Handle::current()),
            closing,
            subscriber,
            tracking,
            watchdog,
            tasks,
        });
        // It ends with the client (shutdown, or the last handle dropped).
        drop(tokio::spawn(crate::engine::watch::run(
            watches,
            Arc::downgrade(&inner),
            inner.closing.subscribe(),
        )));
        Ok(Client { inner })
    }

    /// Connect to a `redis://` or `rediss://` URL with default settings
    /// ([`connect_with`](Self::connect_with) takes a [`Config`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`](crate::Error::Config) for a URL that cannot be
    /// parsed; else as [`connect_with`](Self::connect_with).
    ///
    /// # Panics
    ///
    /// As [`connect_with`](Self::connect_with): outside a tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// As [`connect_with`](Self::connect_with).
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(Config::from_url(url)?).await
    }

    /// This client's id: the `<clientId>` in every owner field it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// `name` as Redis sees it: through the configured
    /// [`NameMapper`](crate::NameMapper), if any, and checked.
    pub(crate) fn map_name(&self, name: &str) -> Result<String> {
        crate::base::mapper::validate(name)?;
        let mapped = match &self.inner.config.name_mapper {
            Some(mapper) => mapper.map(name),
            None => return Ok(name.to_owned()),
        };
        crate::base::mapper::validate(&mapped)?;
        Ok(mapped)
    }

    /// Shut the client down gracefully, like Java's `redisson.shutdown()`:
    /// stop renewing (held locks then expire after their lease, and their
    /// guards' `lost()` fires when it can have run out), wake every waiter
    /// with [`Error::Closed`](crate::Error::Closed), refuse new acquisitions,
    /// let the releases and queue leaves already under way finish (for at
    /// most the retry budget, `(timeout + retry_delay) × retry_attempts`),
    /// then abandon the give-backs of permits that still could not reach
    /// Redis ([`pending_releases`](Self::pending_releases)), and close both
    /// connections, even while guards or handles still exist. Guards dropped
    /// afterwards cannot release (their locks expire); every later call
    /// fails with `Error::Closed`. Idempotent.
    ///
    /// An abandoned give-back is logged at `WARN` (one event per semaphore,
    /// with how many give-backs and permits) and counted in the
    /// `redisson_lock_abandoned_releases_total` metric (`reason` `shutdown`),
    /// as is one started after the shutdown (a permit dropped later). Its
    /// permits stay taken: a [`Semaphore`](crate::Semaphore)'s for good (they
    /// have no TTL, like Redisson's) until someone adds or releases permits,
    /// a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)'s until
    /// the permit's lease ends, for good if it has none.
    ///
    /// # Cancel safety
    ///
    /// Everything up to waiting for the releases under way happens before
    /// the first await: once polled, the client is shutting down (renewals
    /// stopped, waiters woken, new acquisitions refused) even if the future
    /// is then dropped. Dropped while it waits, the releases go on but the
    /// connections stay open until the last clone, handle and guard are
    /// dropped; calling `shutdown` again finishes the job.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.closing.send_replace(true);
        inner.watchdog.abort();
        inner.hub.wake_all();
        // Permits that could not be given back by then are reported and left.
        inner.background.shut_down(inner.config.retry_span()).await;
        // Unlock latches no later command will carry.
        let _ =
            tokio::time::timeout(inner.config.timeout, inner.redis.delete_queued_latches()).await;
        // The registry entry (its refreshes stopped with the watchdog task).
        let _ = tokio::time::timeout(inner.config.timeout, inner.unregister()).await;
        inner.redis.close();
        for task in &inner.tasks {
            task.abort();
        }
        let quit = futures::future::join3(
            inner.subscriber.quit(),
            inner.redis.client.quit(),
            inner.tracking.quit(),
        );
        let _ = tokio::time::timeout(inner.config.timeout, quit).await;
    }

    /// How many give-backs of semaphore permits this client is still trying
    /// to send to Redis in the background: the releases of dropped permit
    /// guards ([`SemaphorePermit`](crate::SemaphorePermit),
    /// [`PermitGuard`](crate::PermitGuard)) and the undos of acquisitions
    /// whose reply was lost, while Redis cannot be reached. Each keeps trying
    /// until Redis answers (a permit-expirable semaphore's until the permit's
    /// lease ends) or [`shutdown`](Self::shutdown) abandons it; with the
    /// `metrics` feature, also the `redisson_lock_pending_releases` gauge.
    pub fn pending_releases(&self) -> usize {
        self.inner.background.releases.count()
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.is_closing()
    }

    /// The underlying fred client for commands, for anything this crate does
    /// not cover. Do not put it into subscriber mode.
    pub fn redis(&self) -> &fred::clients::Client {
        &self.inner.redis.client
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("config", &self.inner.config)
            .finish()
    }
}
