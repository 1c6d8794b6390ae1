//! Connecting a client's two connections (commands and pub/sub) with the
//! settings the retry layer relies on, and reporting the command
//! connection's losses and reconnects.

use std::time::Duration;

use fred::interfaces::{ClientLike, EventInterface};
use fred::types::config::{ConnectionConfig, PerformanceConfig, ReconnectPolicy};

use crate::base::error::{Error, Result};
use crate::connection::config::Config;

/// Connect the command and the pub/sub connection of a client, both at
/// once, within `config.timeout`. Relies on nothing but the outcome of each
/// connection (fred's `init` subscribes to the connect notification before
/// it starts connecting, so none is missed).
pub(crate) async fn connect(config: &Config) -> Result<Connections> {
    let redis = fred_client(config)?;
    let subscriber = redis.clone_new();
    // Dropped unkept (connecting failed, or the caller dropped this
    // future), it stops both clients' connection tasks, which would
    // otherwise keep reconnecting for the life of the process.
    let connections = Connections {
        redis: redis.clone(),
        subscriber: subscriber.clone(),
        kept: false,
    };
    let connected = tokio::time::timeout(
        config.timeout,
        futures::future::try_join(redis.init(), subscriber.init()),
    )
    .await;
    // A TLS client whose server does not speak TLS on that port may wait
    // for a handshake reply that never comes.
    let hint = if config.redis.uses_tls() {
        " (TLS: is that the server's TLS port?)"
    } else {
        ""
    };
    let server = config.server_description();
    let timed_out = || {
        Error::connection(format!(
            "could not connect within {:?}{hint}",
            config.timeout
        ))
    };
    let failure = match connected {
        Ok(Ok(_tasks)) => return Ok(connections),
        // Whatever timed out while connecting, connecting failed.
        Ok(Err(e)) => match Error::from_redis(e, "", config.timeout) {
            Error::Timeout(_) => timed_out(),
            other => other,
        },
        Err(_) => timed_out(),
    }
    .at(&server);
    drop(connections);
    Err(failure)
}

/// The command and the pub/sub client of a new connection, quit (in the
/// background, without waiting for a server that may never answer) if
/// dropped before [`keep`](Self::keep): a connect that fails later, or is
/// cancelled.
pub(crate) struct Connections {
    pub(crate) redis: fred::clients::Client,
    subscriber: fred::clients::Client,
    kept: bool,
}

impl Connections {
    /// Keep both: the command client and the pub/sub client.
    pub(crate) fn keep(mut self) -> (fred::clients::Client, fred::clients::Client) {
        self.kept = true;
        (self.redis.clone(), self.subscriber.clone())
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        // No runtime left (the caller's is shutting down): the connection
        // tasks end with it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for client in [self.redis.clone(), self.subscriber.clone()] {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), client.quit()).await;
            });
        }
    }
}

fn fred_client(config: &Config) -> Result<fred::clients::Client> {
    fred_client_to(config, config.redis.server.clone())
}

/// A fred client with `config`'s settings (credentials, TLS, timeouts,
/// reconnect policy) for `server`: the configured server, or one node of
/// it (client tracking's listener of a cluster node, `tracking.rs`).
/// Not connected.
pub(crate) fn fred_client_to(
    config: &Config,
    server: fred::types::config::ServerConfig,
) -> Result<fred::clients::Client> {
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
    let mut redis = config.redis.clone();
    redis.server = server;
    fred::types::Builder::from_config(redis)
        .set_performance_config(perf)
        .set_connection_config(connection)
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2))
        .build()
        .map_err(|e| Error::Config(e.to_string()))
}

/// Report the command connection's losses and reconnects as events (the
/// pub/sub connection's are reported by the hub). Servers are shown as
/// `host:port`, never with credentials.
pub(crate) async fn watch_connection(client: fred::clients::Client) {
    use tokio::sync::broadcast::error::RecvError;
    let mut reconnects = client.reconnect_rx();
    let mut errors = client.error_rx();
    loop {
        tokio::select! {
            error = errors.recv() => match error {
                Err(RecvError::Closed) => return,
                Err(RecvError::Lagged(_)) => {}
                Ok((e, server)) => {
                    let server = server.as_ref().map(tracing::field::display);
                    tracing::warn!(server, error = %e, "Redis connection lost");
                }
            },
            event = reconnects.recv() => match event {
                Err(RecvError::Closed) => return,
                Err(RecvError::Lagged(_)) => {}
                Ok(server) => tracing::info!(server = %server, "Redis connection re-established"),
            },
        }
    }
}
