//! The client registry (docs/PROTOCOL.md §9.6): each client writes who it is
//! (host, process id, name, crate version, start time) under
//! `redisson_lock_client:<clientId>` once it connects, refreshes it every
//! third of its TTL from the watchdog task, and deletes it at shutdown; so an
//! operator who finds `<clientId>:<threadId>` in a lock's hash learns which
//! process holds it. Nothing is sent per acquisition. One `SET … PX`, so
//! the entry never exists without its TTL, and no script: scripts run by a
//! client are what Redisson's own bookkeeping and our tests count.

use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Expiration;

use crate::base::error::Error;
use crate::base::layout;
use crate::base::time::epoch_ms;
use crate::connection::config::Config;
use crate::connection::redis::Redis;
use crate::connection::script::millis;

/// The shortest TTL of an entry: a tiny `lock_watchdog_timeout` (tests use
/// a few milliseconds) must not turn the registry into a busy loop.
const MIN_TTL: Duration = Duration::from_secs(3);

/// This client's registry entry.
pub(crate) struct Registration {
    key: String,
    ttl: Duration,
    /// `field=value` lines (§9.6).
    value: String,
}

impl Registration {
    pub(crate) fn new(config: &Config, client_id: &str) -> Registration {
        let name = config.client_name.clone().unwrap_or_else(executable);
        let pairs = [
            ("host", host()),
            ("pid", std::process::id().to_string()),
            ("name", name),
            (
                "version",
                format!("redisson-lock {}", env!("CARGO_PKG_VERSION")),
            ),
            ("started_ms", epoch_ms().to_string()),
        ];
        Registration {
            key: layout::client_key(client_id),
            ttl: config.lock_watchdog_timeout.max(MIN_TTL),
            value: pairs
                .into_iter()
                .map(|(f, v)| format!("{f}={}\n", v.replace(['\n', '\r'], " ")))
                .collect(),
        }
    }

    /// Write the entry and refresh it every third of its TTL, until the
    /// task is aborted (shutdown). An ACL that refuses the key turns the
    /// registry off for this client (logged once); other failures are
    /// tried again at the next refresh.
    pub(crate) async fn run(self, redis: Redis) {
        let period = self.ttl / 3;
        loop {
            let set: Result<(), _> = redis
                .client
                .set(
                    self.key.as_str(),
                    self.value.as_str(),
                    Some(Expiration::PX(millis(self.ttl))),
                    None,
                    false,
                )
                .await;
            match set.map_err(|e| Error::from_redis(e, &self.key, Duration::ZERO)) {
                Ok(()) => {}
                Err(e @ Error::Auth(_)) => {
                    tracing::warn!(key = self.key.as_str(), error = %e, "the client registry is off for this client: the ACL refuses its key");
                    return;
                }
                Err(e) => {
                    tracing::debug!(key = self.key.as_str(), error = %e, "client registry refresh failed")
                }
            }
            tokio::time::sleep(period).await;
        }
    }
}

/// The host name: the kernel's (Linux), else `HOSTNAME` / `COMPUTERNAME`.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The running executable's file name.
fn executable() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}
