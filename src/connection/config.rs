//! Client configuration, named after Redisson's `Config` where it has a twin.

use std::sync::Arc;
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::base::mapper::NameMapper;
use crate::base::time::MAX_DURATION;

/// Which pub/sub commands carry unlock messages (Redisson's
/// `shardedSubscriptionMode`). Redis delivers `SPUBLISH` only to
/// `SSUBSCRIBE` and `PUBLISH` only to `SUBSCRIBE`, so every client sharing a
/// lock must agree, or waiters are woken only by their holder's TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PubSubMode {
    /// Sharded on a cluster whose servers support it (Redis 7+, checked
    /// once at connect with `PUBSUB SHARDNUMSUB`), classic everywhere else:
    /// what Java Redisson 3.22+ does by default.
    #[default]
    Auto,
    /// `PUBLISH`/`SUBSCRIBE`: Redisson before 3.22, and every Redisson on a
    /// single server, Sentinel or a replicated set-up.
    Classic,
    /// `SPUBLISH`/`SSUBSCRIBE` (Redis 7+), on the node that owns the
    /// channel's slot: Redisson 3.22+ on a Redis 7 cluster.
    Sharded,
    /// Publish with both commands and listen on both, for a cluster shared
    /// with Java services on both sides of Redisson 3.22. Costs one more
    /// publish per unlock and one more subscription per waited channel; a
    /// duplicate message only makes a waiter check again.
    Both,
}

/// How a [`Client`](crate::Client) connects and how its locks behave.
///
/// Field names follow Redisson's configuration (in snake_case) so that a Rust
/// service can mirror the settings of the Java services it shares locks with.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Config;
///
/// let config = Config::from_url("redis://:secret@127.0.0.1:6379/2")?
///     .lock_watchdog_timeout(Duration::from_secs(10))
///     .timeout(Duration::from_millis(500));
/// assert_eq!(config.lock_watchdog_batch_size, 100);
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// Where and how to connect: server(s), credentials, database, TLS. This
    /// is fred's own configuration, so centralized, cluster and sentinel
    /// set-ups are described the way fred describes them.
    pub redis: fred::types::config::Config,
    /// Lease given to locks taken without an explicit lease, renewed every
    /// third of it while held (a failed renewal is tried again after
    /// `retry_delay`). Redisson's `lockWatchdogTimeout`. Default 30 s; 3 ms
    /// to [`MAX_DURATION`].
    pub lock_watchdog_timeout: Duration,
    /// How many held locks one renewal script call renews. Redisson's
    /// `lockWatchdogBatchSize`. Default 100.
    pub lock_watchdog_batch_size: usize,
    /// How long to wait for the reply to one command (also bounds connecting
    /// and subscribing). Redisson's `timeout`. Default 3 s; 1 ms to
    /// [`MAX_DURATION`].
    pub timeout: Duration,
    /// How many times an idempotent command (unlock with its latch, queries,
    /// latch deletion) is tried again after a transient error (timeout, lost
    /// connection, server loading or failing over). Lock acquisition is
    /// never blindly resent: an attempt with an unknown outcome is undone
    /// first. Cleanups nobody awaits (a dropped guard's unlock, leaving a
    /// fair queue) keep trying until the hold's lease or the queue entry's
    /// deadline can have passed. A wait without a time limit gives up after
    /// `(timeout + retry_delay) × retry_attempts` of failures in a row.
    /// Redisson's `retryAttempts`. Default 4.
    pub retry_attempts: u32,
    /// Pause between those attempts: a random pause from half of it to all
    /// of it (Redisson's equal jitter), so clients that failed together do
    /// not retry together. Redisson's `retryDelay`. Default 1 s; at most
    /// [`MAX_DURATION`].
    pub retry_delay: Duration,
    /// How long a fair-lock waiter that waits without a time limit stays in
    /// the queue before other clients may consider it dead. Redisson's
    /// `fairLockWaitTimeout`. Default 5 min; 1 ms to [`MAX_DURATION`].
    pub fair_lock_wait_timeout: Duration,
    /// Which pub/sub commands unlock messages travel by. Redisson's
    /// `shardedSubscriptionMode`; default [`PubSubMode::Auto`], as in
    /// Redisson 3.22+.
    pub pubsub_mode: PubSubMode,
    /// Wait for replicas after every script that may write (lock acquire,
    /// unlock, renewal, force-unlock, leaving a fair queue, and every
    /// semaphore and latch script but the read-only ones, even when it
    /// found nothing to change): `WAIT` for all the
    /// master's connected replicas, at most this long. If none confirms,
    /// the call fails with [`Error::NotReplicated`] (transient: an
    /// acquisition is undone and tried again, an unlock resent with its
    /// latch, a renewal counts as failed), as Redisson's
    /// `checkLockSyncedSlaves` with `slavesSyncTimeout`. Costs one more
    /// round trip per write; a master with no replica skips the `WAIT`
    /// (replicas are counted again every 10 s).
    /// Default none (no `WAIT`); 1 ms to [`MAX_DURATION`].
    pub replica_sync: Option<Duration>,
    /// Maps every lock name to the name Redis sees (Redisson's
    /// `nameMapper`), e.g. a prefix per tenant. Default none.
    pub name_mapper: Option<Arc<dyn NameMapper>>,
    /// Check every hold of this client this often, in one read-only script
    /// call per `lock_watchdog_batch_size` holds (per hash slot on a
    /// cluster): a hold whose key or field is gone (a `DEL`, an expiry, a
    /// `FLUSHALL`, a failover that lost it, a forced unlock that published
    /// nothing) is then reported by `lost()` within this interval plus a
    /// round trip. Without it, such a loss is learnt at the next renewal (a
    /// third of `lock_watchdog_timeout`) or, for a hold with an explicit
    /// lease, when the lease ends. Client tracking already hears every such
    /// loss within a round trip by default (docs/PROTOCOL.md §2.10) but a
    /// `SWAPDB` and keys the server's full tracking table dropped; see also
    /// [`keyspace_notifications`](Self::keyspace_notifications). Costs one
    /// `HEXISTS` per hold per interval on the server (docs/PROTOCOL.md §2.9).
    /// Default none; 1 ms to [`MAX_DURATION`].
    pub hold_check_interval: Option<Duration>,
    /// Listen, for every lock this client holds, on the key's keyspace
    /// channel (`__keyspace@<db>__:<N>`, through the client's pub/sub
    /// connection; on a cluster, on the node that serves the key) and check
    /// the hold again on every event that can remove it (`del`, `expired`,
    /// `evicted`, `rename_from`, …): a loss by `DEL`, `UNLINK`, expiry,
    /// eviction or a forced unlock by any client is then reported by
    /// `lost()` within a round trip. The server must publish them:
    /// `notify-keyspace-events` with `K`, `g` and `x` (e.g. `Kgxe`);
    /// connecting checks that with `CONFIG GET` where the server allows it
    /// ([`Error::Config`] if not set; a server that refuses `CONFIG` is
    /// trusted). Flushes and failovers publish no such event: combine with
    /// [`hold_check_interval`](Self::hold_check_interval) to bound those.
    /// Costs a `SUBSCRIBE` and an `UNSUBSCRIBE` per held lock name on the
    /// pub/sub connection (off the acquire path) and one `HEXISTS` per
    /// event. Default off: client tracking hears all of this (and flushes)
    /// by default, with no server setting (docs/PROTOCOL.md §2.10); this adds
    /// a second way for a server whose tracking table is full or an ACL user
    /// that may not run `CLIENT`.
    pub keyspace_notifications: bool,
    /// The client id (Redisson's connection manager id: the `<clientId>`
    /// half of every owner field `<clientId>:<threadId>` the client writes).
    /// Default none: a random one per [`Client`](crate::Client), as Redisson
    /// does. Set it only to act for a client known to be gone, e.g. to
    /// release the hold of a process that died (a [`Lock`](crate::Lock)
    /// handle [`with_owner`](crate::Lock::with_owner) of its owner, then
    /// [`unlock`](crate::OwnedLock::unlock)), as the command-line tool's
    /// guardian does: two live clients with one id own each other's holds.
    pub client_id: Option<uuid::Uuid>,
    /// The name this client registers under in the client registry
    /// (docs/PROTOCOL.md §9.6), beside its host, process id, crate version
    /// and start time, so that an operator sees who holds a lock (the CLI's
    /// `status` and `list` show it for each holder). Default none: the
    /// executable's file name.
    pub client_name: Option<String>,
}

/// Shows where and how the client connects, never a password (neither the
/// server's nor a sentinel's), whatever fred features are enabled.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("server", &ShownServer(&self.redis.server))
            .field("tls", &self.redis.uses_tls())
            .field("database", &self.redis.database)
            .field("username", &self.redis.username)
            .field(
                "password",
                &self.redis.password.as_ref().map(|_| "<redacted>"),
            )
            .field("lock_watchdog_timeout", &self.lock_watchdog_timeout)
            .field("lock_watchdog_batch_size", &self.lock_watchdog_batch_size)
            .field("timeout", &self.timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("fair_lock_wait_timeout", &self.fair_lock_wait_timeout)
            .field("pubsub_mode", &self.pubsub_mode)
            .field("replica_sync", &self.replica_sync)
            .field("name_mapper", &self.name_mapper)
            .field("hold_check_interval", &self.hold_check_interval)
            .field("keyspace_notifications", &self.keyspace_notifications)
            .field("client_id", &self.client_id)
            .field("client_name", &self.client_name)
            .finish()
    }
}

/// The deployment and its hosts, without fred's `Debug` of the server
/// config: with fred's `sentinel-auth` feature that shows the sentinels'
/// password.
struct ShownServer<'a>(&'a fred::types::config::ServerConfig);

impl std::fmt::Debug for ShownServer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use fred::types::config::ServerConfig;
        let server = self.0;
        let hosts: Vec<String> = server.hosts().iter().map(ToString::to_string).collect();
        if let ServerConfig::Sentinel { service_name, .. } = server {
            f.debug_struct("Sentinel")
                .field("service_name", service_name)
                .field("sentinels", &hosts)
                .finish_non_exhaustive()
        } else if server.is_clustered() {
            f.debug_tuple("Clustered").field(&hosts).finish()
        } else if server.is_unix_socket() {
            f.debug_tuple("Unix").field(&hosts).finish()
        } else {
            f.debug_tuple("Centralized").field(&hosts).finish()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            redis: fred::types::config::Config::default(),
            lock_watchdog_timeout: Duration::from_secs(30),
            lock_watchdog_batch_size: 100,
            timeout: Duration::from_secs(3),
            retry_attempts: 4,
            retry_delay: Duration::from_secs(1),
            fair_lock_wait_timeout: Duration::from_secs(300),
            pubsub_mode: PubSubMode::Auto,
            replica_sync: None,
            name_mapper: None,
            hold_check_interval: None,
            keyspace_notifications: false,
            client_id: None,
            client_name: None,
        }
    }
}

impl Config {
    /// Parse a `redis://` or `rediss://` URL (`redis://[user:password@]host[:port][/db]`),
    /// keeping every other setting at its default. The cluster and sentinel
    /// forms of fred (`redis-cluster://`, `redis-sentinel://`, and their
    /// `rediss-` twins) work too; see the README's *Deployments*.
    ///
    /// A TLS URL (`rediss…://`) gets a TLS configuration that trusts the
    /// system's root certificates (features `tls-rustls` or
    /// `tls-native-tls`; rustls when both are on). For a private CA, replace
    /// [`redis.tls`](fred::types::config::Config) after parsing (README,
    /// *TLS*).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the URL cannot be parsed, or if it asks for TLS
    /// and this build has no TLS support (it never falls back to plaintext).
    /// The message never repeats the URL's password or sentinel password.
    pub fn from_url(url: &str) -> Result<Config> {
        // The URL is not repeated in errors: it may carry a password.
        let redis = crate::connection::tls::parse_url(url)?;
        Ok(Config {
            redis,
            ..Config::default()
        })
    }

    /// Set [`lock_watchdog_timeout`](Self::lock_watchdog_timeout).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn lock_watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.lock_watchdog_timeout = timeout;
        self
    }

    /// Set [`lock_watchdog_batch_size`](Self::lock_watchdog_batch_size).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn lock_watchdog_batch_size(mut self, size: usize) -> Self {
        self.lock_watchdog_batch_size = size;
        self
    }

    /// Set [`timeout`](Self::timeout).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Set [`retry_attempts`](Self::retry_attempts).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.retry_attempts = attempts;
        self
    }

    /// Set [`retry_delay`](Self::retry_delay).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Set [`fair_lock_wait_timeout`](Self::fair_lock_wait_timeout).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.fair_lock_wait_timeout = timeout;
        self
    }

    /// Set [`pubsub_mode`](Self::pubsub_mode).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn pubsub_mode(mut self, mode: PubSubMode) -> Self {
        self.pubsub_mode = mode;
        self
    }

    /// Set [`replica_sync`](Self::replica_sync): wait up to `timeout` for
    /// replicas after every lock write; `None` turns it off again.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redisson_lock::Config::default().replica_sync(Duration::from_millis(500));
    /// assert_eq!(config.replica_sync, Some(Duration::from_millis(500)));
    /// assert_eq!(config.replica_sync(None).replica_sync, None);
    /// ```
    #[must_use = "a Config setter returns the changed Config"]
    pub fn replica_sync(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.replica_sync = timeout.into();
        self
    }

    /// Set [`name_mapper`](Self::name_mapper).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn name_mapper(mut self, mapper: impl NameMapper) -> Self {
        self.name_mapper = Some(Arc::new(mapper));
        self
    }

    /// Set [`hold_check_interval`](Self::hold_check_interval): check every
    /// hold this often; `None` turns the check off again.
    #[must_use = "a Config setter returns the changed Config"]
    pub fn hold_check_interval(mut self, interval: impl Into<Option<Duration>>) -> Self {
        self.hold_check_interval = interval.into();
        self
    }

    /// Set [`keyspace_notifications`](Self::keyspace_notifications).
    #[must_use = "a Config setter returns the changed Config"]
    pub fn keyspace_notifications(mut self, on: bool) -> Self {
        self.keyspace_notifications = on;
        self
    }

    /// Set [`client_name`](Self::client_name): the name this client
    /// registers under.
    #[must_use = "a Config setter returns the changed Config"]
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Set [`client_id`](Self::client_id): act as the client with this id.
    #[must_use = "a Config setter returns the changed Config"]
    pub fn client_id(mut self, id: uuid::Uuid) -> Self {
        self.client_id = Some(id);
        self
    }

    /// Check the settings that would make locks misbehave: every duration
    /// within its bounds (at most [`MAX_DURATION`]), a batch of at least one.
    pub(crate) fn validate(&self) -> Result<()> {
        let bounded = |name: &str, value: Duration, min: Duration| {
            if value < min || value > MAX_DURATION {
                Err(Error::Config(format!(
                    "{name} must be from {min:?} to {MAX_DURATION:?} (100 years), got {value:?}"
                )))
            } else {
                Ok(())
            }
        };
        bounded(
            "lock_watchdog_timeout",
            self.lock_watchdog_timeout,
            Duration::from_millis(3),
        )?;
        bounded("timeout", self.timeout, Duration::from_millis(1))?;
        bounded("retry_delay", self.retry_delay, Duration::ZERO)?;
        bounded(
            "fair_lock_wait_timeout",
            self.fair_lock_wait_timeout,
            Duration::from_millis(1),
        )?;
        if let Some(wait) = self.replica_sync {
            bounded("replica_sync", wait, Duration::from_millis(1))?;
        }
        if let Some(every) = self.hold_check_interval {
            bounded("hold_check_interval", every, Duration::from_millis(1))?;
        }
        if self.lock_watchdog_batch_size == 0 {
            return Err(Error::Config(
                "lock_watchdog_batch_size must be at least 1".into(),
            ));
        }
        if self.retry_span() > MAX_DURATION {
            return Err(Error::Config(
                "(timeout + retry_delay) x retry_attempts must not exceed 100 years".into(),
            ));
        }
        Ok(())
    }

    /// How long retrying one command can take: `(timeout + retry_delay) ×
    /// retry_attempts` (at least one try, at least 1 ms). Also how long a
    /// wait without a time limit keeps going while Redis is unreachable.
    pub(crate) fn retry_span(&self) -> Duration {
        let per_try = self.timeout.saturating_add(self.retry_delay);
        per_try
            .saturating_mul(self.retry_attempts.max(1))
            .max(Duration::from_millis(1))
    }

    /// Where this configuration connects, for error messages: `host:port`
    /// for a single server; `cluster h1:p1, h2:p2` (the configured nodes)
    /// and `sentinel h1:p1, h2:p2 (service NAME)` where the node an error
    /// concerns is not known. Hosts and ports only, never credentials.
    pub(crate) fn server_description(&self) -> String {
        use fred::types::config::ServerConfig;
        let server = &self.redis.server;
        let hosts = server
            .hosts()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if let ServerConfig::Sentinel { service_name, .. } = server {
            format!("sentinel {hosts} (service {service_name})")
        } else if server.is_clustered() {
            format!("cluster {hosts}")
        } else {
            hosts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn errors_name_the_server_without_credentials() {
        // The default address too (issue 29: a refused default connection
        // named no address).
        assert_eq!(Config::default().server_description(), "127.0.0.1:6379");
        let config = Config::from_url("redis://user:pw-1@10.1.2.3:6380/2").unwrap();
        assert_eq!(config.server_description(), "10.1.2.3:6380");
        // The configured nodes, in fred's order.
        for (url, start, end) in [
            (
                "redis-cluster://user:pw-1@10.0.0.1:7000?node=10.0.0.2:7001",
                "cluster ",
                "",
            ),
            (
                "redis-sentinel://:pw-1@10.0.0.1:7000/0?sentinelServiceName=main&node=10.0.0.2:7001",
                "sentinel ",
                " (service main)",
            ),
        ] {
            let shown = Config::from_url(url).unwrap().server_description();
            assert!(shown.starts_with(start) && shown.ends_with(end), "{shown}");
            assert!(shown.contains("10.0.0.1:7000, ") || shown.contains(", 10.0.0.1:7000"), "{shown}");
            assert!(shown.contains("10.0.0.2:7001"), "{shown}");
            assert!(!shown.contains("pw-1") && !shown.contains("user"), "{shown}");
        }
    }
}
