//! The pub/sub commands of one client (docs/PROTOCOL.md §3.4, §3.5): which
//! it uses (classic, sharded or both, resolved once at connect), where a
//! channel's subscription lives on a cluster, subscribing with a confirmed
//! round trip, and reading a message's code.

use std::collections::HashMap;
use std::time::Duration;

use fred::interfaces::{ClientLike, ClusterInterface, PubsubInterface};
use fred::types::config::Options;
use fred::types::ClusterHash;
use fred::util::redis_keyslot;

use crate::base::error::{Error, Result};
use crate::connection::config::PubSubMode;

/// The pub/sub commands a client uses, resolved from its
/// [`PubSubMode`] once at connect (docs/PROTOCOL.md §3.4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Commands {
    classic: bool,
    sharded: bool,
    /// On a cluster, sharded subscriptions go per slot, and confirming
    /// PINGs to the node that holds the subscription.
    pub(crate) clustered: bool,
}

impl Commands {
    /// Resolve `mode` against the server behind `redis`: `Auto` is sharded
    /// on a cluster whose nodes know `PUBSUB SHARDNUMSUB` (Redis 7+),
    /// classic elsewhere. `Sharded` and `Both` are refused up front on a
    /// server without sharded pub/sub, where every unlock script would fail
    /// after its writes.
    pub(crate) async fn resolve(
        mode: PubSubMode,
        redis: &fred::clients::Client,
        timeout: Duration,
    ) -> Result<Commands> {
        let clustered = redis.is_clustered();
        let supports_sharded = || async {
            let reply = redis
                .custom::<fred::types::Value, _>(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB"])
                .await;
            // Redis before 7 replies "ERR unknown subcommand"; a lost
            // connection or a refusal is an error of its own.
            match reply {
                Ok(_) => Ok(true),
                Err(e) => match Error::from_redis(e, "", timeout) {
                    Error::Redis(_) => Ok(false),
                    other => Err(other),
                },
            }
        };
        let (classic, sharded) = match mode {
            PubSubMode::Classic => (true, false),
            PubSubMode::Auto => {
                let sharded = clustered && supports_sharded().await?;
                (!sharded, sharded)
            }
            PubSubMode::Sharded | PubSubMode::Both => {
                if !supports_sharded().await? {
                    return Err(Error::Config(
                        "sharded pub/sub (PubSubMode::Sharded or Both) needs Redis 7 or later"
                            .into(),
                    ));
                }
                (mode == PubSubMode::Both, true)
            }
        };
        Ok(Commands {
            classic,
            sharded,
            clustered,
        })
    }

    /// The publish argument of every script that publishes.
    pub(crate) fn publish(&self) -> &'static str {
        match (self.classic, self.sharded) {
            (true, true) => "BOTH",
            (false, true) => "SPUBLISH",
            _ => "PUBLISH",
        }
    }
}

/// The nodes that serve `channel`'s subscriptions now, per the client's
/// cluster routing table (empty without a cluster).
pub(crate) fn placement(
    subscriber: &fred::clients::Client,
    commands: Commands,
    channel: &str,
) -> Vec<String> {
    if !commands.clustered {
        return Vec::new();
    }
    let Some(state) = subscriber.cached_cluster_state() else {
        return Vec::new();
    };
    let mut slots = Vec::with_capacity(2);
    if commands.classic {
        slots.push(redis_keyslot(subscriber.id().as_bytes()));
    }
    if commands.sharded {
        slots.push(redis_keyslot(channel.as_bytes()));
    }
    slots
        .into_iter()
        .map(|slot| {
            state
                .get_server(slot)
                .map(ToString::to_string)
                .unwrap_or_default()
        })
        .collect()
}

/// Subscribe to `channels` and return once the server confirmed it.
///
/// fred resolves (S)SUBSCRIBE once it is written, not when the server has
/// processed it. A PING on the same connection is answered only after
/// everything sent before it, so its reply proves the subscription is
/// active; only then may a waiter re-check the lock, or an unlock published
/// between its re-check and its subscription would be lost. On a cluster,
/// classic subscriptions live on the node of the client id's slot (fred's
/// choice) and sharded ones on the node of the channel's slot, one slot per
/// command; each PING goes to that same node.
pub(crate) async fn subscribe(
    subscriber: &fred::clients::Client,
    commands: Commands,
    channels: Vec<String>,
) -> std::result::Result<(), fred::error::Error> {
    if commands.classic {
        subscriber.subscribe(channels.clone()).await?;
        confirm(subscriber, redis_keyslot(subscriber.id().as_bytes())).await?;
    }
    if commands.sharded {
        for (slot, group) in by_slot(channels, commands.clustered) {
            subscriber.ssubscribe(group).await?;
            confirm(subscriber, slot).await?;
        }
    }
    Ok(())
}

pub(crate) async fn unsubscribe(
    subscriber: &fred::clients::Client,
    commands: Commands,
    channel: String,
) -> std::result::Result<(), fred::error::Error> {
    if commands.classic {
        subscriber.unsubscribe(channel.clone()).await?;
    }
    if commands.sharded {
        subscriber.sunsubscribe(channel).await?;
    }
    Ok(())
}

/// PING the node that serves `slot` (the only node without a cluster).
async fn confirm(
    subscriber: &fred::clients::Client,
    slot: u16,
) -> std::result::Result<(), fred::error::Error> {
    let options = Options {
        cluster_hash: Some(ClusterHash::Custom(slot)),
        ..Options::default()
    };
    subscriber
        .with_options(&options)
        .ping::<fred::types::Value>(None)
        .await
        .map(drop)
}

/// `channels` grouped by hash slot on a cluster (a sharded subscription
/// names channels of one slot); one group otherwise.
fn by_slot(channels: Vec<String>, clustered: bool) -> Vec<(u16, Vec<String>)> {
    if !clustered {
        let slot = channels.first().map_or(0, |c| redis_keyslot(c.as_bytes()));
        return vec![(slot, channels)];
    }
    let mut groups: HashMap<u16, Vec<String>> = HashMap::new();
    for channel in channels {
        groups
            .entry(redis_keyslot(channel.as_bytes()))
            .or_default()
            .push(channel);
    }
    groups.into_iter().collect()
}

/// Payloads are decimal ASCII numbers (LongCodec).
pub(crate) fn message_code(value: &fred::types::Value) -> Option<i64> {
    match value {
        fred::types::Value::Integer(i) => Some(*i),
        other => other.as_str().and_then(|s| s.trim().parse().ok()),
    }
}
