//! The client: connections, identity, and the command layer every lock uses.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{ClientLike, KeysInterface, LuaInterface};
use fred::types::config::{ConnectionConfig, PerformanceConfig, ReconnectPolicy};
use fred::types::{Key, Value};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::lock::RLock;
use crate::owner::Owner;
use crate::pubsub::Hub;
use crate::raw::ScriptCall;
use crate::watchdog::{self, Holds};

/// A connection to Redis shared by every lock taken through it: one fred
/// client for commands, one connection for pub/sub, the lock watchdog, and a
/// random UUID client id (Redisson's `ServiceManager.id`).
///
/// Cheap to clone; all clones share the connections. The connections close
/// when the last clone, lock handle and guard are dropped.
///
/// ```no_run
/// # async fn demo() -> redisson_lock::Result<()> {
/// let client = redisson_lock::Client::from_url("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("orders")?.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    id: Uuid,
    id_text: String,
    pub(crate) config: Config,
    pub(crate) redis: Redis,
    pub(crate) hub: Hub,
    pub(crate) holds: Arc<Holds>,
    pub(crate) runtime: Handle,
    subscriber: fred::clients::Client,
    tasks: Vec<JoinHandle<()>>,
}

impl Client {
    /// Connect with a full [`Config`]. Fails within `config.timeout` if the
    /// server cannot be reached.
    pub async fn connect(config: Config) -> Result<Client> {
        config.validate()?;
        let redis = fred_client(&config)?;
        let subscriber = redis.clone_new();
        // Both connections at once, within one timeout.
        let connected = tokio::time::timeout(
            config.timeout,
            futures::future::try_join(redis.init(), subscriber.init()),
        )
        .await;
        let failure = match connected {
            Ok(Ok(_tasks)) => None,
            Ok(Err(e)) => Some(Error::Connection(e.to_string())),
            Err(_) => Some(Error::Connection(format!(
                "could not connect within {:?}",
                config.timeout
            ))),
        };
        if let Some(e) = failure {
            // Stop the connection tasks without waiting for a server that
            // may never answer.
            for client in [redis, subscriber] {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(1), client.quit()).await;
                });
            }
            return Err(e);
        }
        let (latches, latch_rx) = tokio::sync::mpsc::unbounded_channel();
        let redis = Redis {
            client: redis,
            timeout: config.timeout,
            retry_attempts: config.retry_attempts,
            retry_delay: config.retry_delay,
            latches,
        };
        let holds = Arc::new(Holds::new(config.lock_watchdog_timeout));
        let (hub, mut tasks) =
            Hub::start(subscriber.clone(), config.sharded_pubsub, config.timeout);
        tasks.push(tokio::spawn(delete_latches(
            redis.clone(),
            latch_rx,
            config.redis.server.is_clustered(),
        )));
        tasks.push(tokio::spawn(watchdog::run(
            holds.clone(),
            redis.clone(),
            config.lock_watchdog_batch_size,
            config.retry_delay,
            config.redis.server.is_clustered(),
        )));
        let id = Uuid::new_v4();
        Ok(Client {
            inner: Arc::new(Inner {
                id,
                id_text: id.hyphenated().to_string(),
                config,
                redis,
                hub,
                holds,
                runtime: Handle::current(),
                subscriber,
                tasks,
            }),
        })
    }

    /// Connect to a `redis://` or `rediss://` URL with default settings.
    pub async fn from_url(url: &str) -> Result<Client> {
        Client::connect(Config::from_url(url)?).await
    }

    /// This client's id: the `<clientId>` in every owner field it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A handle to the reentrant lock `name` (Redisson's `getLock(name)`).
    /// Fails only for an empty name; no command is sent.
    pub fn lock(&self, name: &str) -> Result<RLock> {
        RLock::new(self.clone(), name)
    }

    /// A handle to the fair lock `name` (Redisson's `getFairLock(name)`):
    /// waiters of all clients get it in the order they queued.
    pub fn fair_lock(&self, name: &str) -> Result<crate::FairLock> {
        crate::FairLock::new(self.clone(), name, true)
    }

    /// A fair lock that refuses re-entry with
    /// [`Error::NotReentrant`](crate::Error::NotReentrant)
    /// (Redisson 4.7's `getNonReentrantFairLock(name)`).
    pub fn non_reentrant_fair_lock(&self, name: &str) -> Result<crate::FairLock> {
        crate::FairLock::new(self.clone(), name, false)
    }

    /// A handle to the fenced lock `name` (Redisson's `getFencedLock(name)`):
    /// every acquisition carries a strictly increasing fencing token.
    pub fn fenced_lock(&self, name: &str) -> Result<crate::FencedLock> {
        crate::FencedLock::new(self.clone(), name)
    }

    /// A handle to the spin lock `name` (Redisson's `getSpinLock(name)`),
    /// waiting with Redisson's default exponential back-off.
    pub fn spin_lock(&self, name: &str) -> Result<crate::SpinLock> {
        crate::SpinLock::new(self.clone(), name, crate::BackOff::default())
    }

    /// A spin lock with a chosen back-off (`getSpinLock(name, backOff)`).
    pub fn spin_lock_with(&self, name: &str, backoff: crate::BackOff) -> Result<crate::SpinLock> {
        crate::SpinLock::new(self.clone(), name, backoff)
    }

    /// A handle to the read-write lock `name` (Redisson's
    /// `getReadWriteLock(name)`): readers share it, a writer excludes
    /// everyone else. Fails only for an empty name; no command is sent.
    pub fn read_write_lock(&self, name: &str) -> Result<crate::ReadWriteLock> {
        crate::ReadWriteLock::new(self.clone(), name)
    }

    /// The blocking twin of this client, for threads outside any async runtime.
    /// Its calls run on this client's runtime, which must be multi-threaded.
    pub fn blocking(&self) -> Result<crate::blocking::BlockingClient> {
        crate::blocking::BlockingClient::from_async(self.clone())
    }

    /// The underlying fred client for commands, for anything this crate does
    /// not cover. Do not put it into subscriber mode.
    pub fn redis(&self) -> &fred::clients::Client {
        &self.inner.redis.client
    }
}

impl Inner {
    /// The hash field of `owner`: `<clientId>:<ownerId>`.
    pub(crate) fn field(&self, owner: Owner) -> String {
        format!("{}:{}", self.id_text, owner)
    }

    /// `PUBLISH` or `SPUBLISH`, as configured.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.config.sharded_pubsub {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let redis = self.redis.client.clone();
        let subscriber = self.subscriber.clone();
        // Closing is best effort: the runtime may already be gone.
        drop(self.runtime.spawn(async move {
            let _ = subscriber.quit().await;
            let _ = redis.quit().await;
        }));
    }
}

fn fred_client(config: &Config) -> Result<fred::clients::Client> {
    let perf = PerformanceConfig {
        default_command_timeout: config.timeout,
        broadcast_channel_capacity: 4096,
        ..PerformanceConfig::default()
    };
    let connection = ConnectionConfig {
        connection_timeout: config.timeout,
        internal_command_timeout: config.timeout,
        // A command whose connection dies in flight is not resent by fred: lock
        // acquisition is not idempotent; our retry layer resends only what is.
        max_command_attempts: 1,
        ..ConnectionConfig::default()
    };
    fred::types::Builder::from_config(config.redis.clone())
        .set_performance_config(perf)
        .set_connection_config(connection)
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2))
        .build()
        .map_err(|e| Error::Config(e.to_string()))
}

/// The command layer: scripts by EVALSHA with NOSCRIPT fallback, error
/// translation, and retries for idempotent commands.
#[derive(Clone)]
pub(crate) struct Redis {
    pub(crate) client: fred::clients::Client,
    timeout: Duration,
    retry_attempts: u32,
    retry_delay: Duration,
    /// Unlock latch keys to delete, for [`delete_latches`].
    latches: tokio::sync::mpsc::UnboundedSender<String>,
}

impl Redis {
    /// Run `script` once. `keys[0]` names the key in a WRONGTYPE error.
    pub(crate) async fn eval(&self, build: impl Fn() -> ScriptCall) -> Result<Value> {
        let call = build();
        // A cheap handle (reference counted), named in a WRONGTYPE error.
        let first_key = call.keys.first().cloned();
        let reply = match self
            .client
            .evalsha::<Value, _, _, _>(call.script.sha(), call.keys, call.args)
            .await
        {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                // EVAL runs the script and caches it for the next EVALSHA;
                // the arguments are built again rather than kept for this.
                let call = build();
                self.client
                    .eval::<Value, _, _, _>(call.script.body, call.keys, call.args)
                    .await
            }
            other => other,
        };
        reply.map_err(|e| {
            let key = first_key.as_ref().and_then(Key::as_str).unwrap_or_default();
            Error::from_redis(e, key, self.timeout)
        })
    }

    /// Run an idempotent operation, trying again after transient errors.
    pub(crate) async fn retrying<T, F, Fut>(&self, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match op().await {
                Err(e) if e.is_transient() && attempt < self.retry_attempts => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "retrying Redis command");
                    tokio::time::sleep(self.retry_delay).await;
                }
                other => return other,
            }
        }
    }

    /// Run an idempotent operation nobody awaits (a cleanup in the
    /// background), trying again after transient errors until it succeeds
    /// or `until` has passed.
    pub(crate) async fn persisting<T, F, Fut>(&self, until: Instant, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let pause = self.retry_delay.max(Duration::from_millis(10));
        let mut attempt = 0u64;
        loop {
            match op().await {
                Err(e) if e.is_transient() && Instant::now() + pause < until => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "retrying Redis command");
                    tokio::time::sleep(pause).await;
                }
                other => return other,
            }
        }
    }

    /// A plain single-key command, with retries, translating errors.
    pub(crate) async fn key_command<T, F, Fut>(&self, key: &str, op: F) -> Result<T>
    where
        F: Fn(fred::clients::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, fred::error::Error>>,
    {
        self.retrying(|| {
            let fut = op(self.client.clone());
            async move {
                fut.await
                    .map_err(|e| Error::from_redis(e, key, self.timeout))
            }
        })
        .await
    }

    /// Delete an unlock latch soon, without waiting for it.
    pub(crate) fn delete_later(&self, key: String) {
        // The latch expires by itself if the client is gone.
        let _ = self.latches.send(key);
    }
}

/// Delete unlock latches (PROTOCOL.md §2.4: the client deletes its latch once
/// it has the unlock's reply). One task, so an unlock costs a channel send,
/// not a task; latches queued while a DEL is in flight go out together in
/// the next one (per hash slot on a cluster, where a DEL spans one slot).
/// No collection window: measured, its timer wake-ups cost uncontended
/// throughput more than the saved DELs gain (BENCHMARKS.md).
async fn delete_latches(
    redis: Redis,
    mut latches: tokio::sync::mpsc::UnboundedReceiver<String>,
    by_slot: bool,
) {
    const MAX_BATCH: usize = 512;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while latches.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if by_slot {
            let mut by_slots: std::collections::HashMap<u16, Vec<String>> = Default::default();
            for key in batch.drain(..) {
                by_slots
                    .entry(fred::util::redis_keyslot(key.as_bytes()))
                    .or_default()
                    .push(key);
            }
            for keys in by_slots.into_values() {
                delete(&redis, keys).await;
            }
        } else {
            let keys = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
            delete(&redis, keys).await;
        }
    }
}

/// Delete latch keys, retrying after transient errors; a latch that cannot
/// be deleted expires by itself (its TTL covers one unlock's retries).
async fn delete(redis: &Redis, keys: Vec<String>) {
    let outcome = redis
        .retrying(|| {
            let keys = keys.clone();
            async move {
                redis
                    .client
                    .del::<i64, _>(keys)
                    .await
                    .map_err(|e| Error::from_redis(e, "", redis.timeout))
            }
        })
        .await;
    if let Err(e) = outcome {
        tracing::debug!(error = %e, "deleting unlock latches failed; they expire by themselves");
    }
}
