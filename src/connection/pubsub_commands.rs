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

/// The key whose keyspace notifications `channel` carries
/// (`__keyspace@<db>__:<key>`), if it is such a channel. Those are published
/// only on the node that holds the key, to classic subscribers, whatever
/// the client's [`Commands`]: they are subscribed with a classic
/// `SUBSCRIBE` on that node.
pub(crate) fn keyspace_key(channel: &str) -> Option<&str> {
    channel
        .strip_prefix("__keyspace@")?
        .split_once("__:")
        .map(|(_, key)| key)
}

/// Whether a keyspace notification's event (the message) can mean that the
/// key or a field of it is gone or replaced: anything but the events our
/// own and other clients' lock writes cause on a live key.
pub(crate) fn may_remove(event: &str) -> bool {
    const HARMLESS: [&str; 9] = [
        "expire",
        "persist",
        "hset",
        "hsetnx",
        "hincrby",
        "hincrbyfloat",
        "new",
        "hexpire",
        "hpersist",
    ];
    !HARMLESS.contains(&event)
}

/// Check that the server publishes the keyspace events a holder listens
/// for (`notify-keyspace-events` with `K`, and `g` and `x` or `A`): a
/// [`Error::Config`] naming what is missing if not. A server that refuses
/// `CONFIG GET` (an ACL, a managed service) is trusted.
pub(crate) async fn check_keyspace_events(
    redis: &fred::clients::Client,
    timeout: Duration,
) -> Result<()> {
    let reply = redis
        .custom::<fred::types::Value, _>(
            fred::cmd!("CONFIG"),
            vec!["GET", "notify-keyspace-events"],
        )
        .await;
    let flags = match reply {
        Ok(value) => keyspace_flags(&value),
        Err(e) => match Error::from_redis(e, "", timeout) {
            e if e.is_transient() => return Err(e),
            e => {
                tracing::debug!(error = %e, "CONFIG GET notify-keyspace-events refused; trusting the server");
                return Ok(());
            }
        },
    };
    let Some(flags) = flags else {
        return Ok(());
    };
    let all = flags.contains('A');
    let missing: String = [('K', true), ('g', !all), ('x', !all)]
        .into_iter()
        .filter(|(flag, needed)| *needed && !flags.contains(*flag))
        .map(|(flag, _)| flag)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Config(format!(
        "keyspace_notifications needs the server's notify-keyspace-events to include K, g and x \
         (e.g. \"Kgxe\"); it is {flags:?}, missing {missing:?}"
    )))
}

/// The value of `notify-keyspace-events` in a `CONFIG GET` reply (a map or
/// a `[name, value]` array).
fn keyspace_flags(reply: &fred::types::Value) -> Option<String> {
    use fred::types::Value;
    match reply {
        Value::Array(items) => items.get(1).and_then(Value::as_string),
        Value::Map(map) => map.iter().next().and_then(|(_, v)| v.as_string()),
        _ => None,
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
    if let Some(key) = keyspace_key(channel) {
        slots.push(redis_keyslot(key.as_bytes()));
    } else {
        if commands.classic {
            slots.push(redis_keyslot(subscriber.id().as_bytes()));
        }
        if commands.sharded {
            slots.push(redis_keyslot(channel.as_bytes()));
        }
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
    let (keyspace, channels): (Vec<String>, Vec<String>) = channels
        .into_iter()
        .partition(|c| keyspace_key(c).is_some());
    for (slot, group) in by_key_slot(keyspace, commands.clustered) {
        on_node(subscriber, slot).subscribe(group).await?;
        confirm(subscriber, slot).await?;
    }
    if channels.is_empty() {
        return Ok(());
    }
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
    if let Some(key) = keyspace_key(&channel) {
        let slot = redis_keyslot(key.as_bytes());
        return on_node(subscriber, slot).unsubscribe(channel).await;
    }
    if commands.classic {
        subscriber.unsubscribe(channel.clone()).await?;
    }
    if commands.sharded {
        subscriber.sunsubscribe(channel).await?;
    }
    Ok(())
}

/// `subscriber`, sending to the node that serves `slot` (the only node
/// without a cluster).
fn on_node(
    subscriber: &fred::clients::Client,
    slot: u16,
) -> fred::clients::WithOptions<fred::clients::Client> {
    let options = Options {
        cluster_hash: Some(ClusterHash::Custom(slot)),
        ..Options::default()
    };
    subscriber.with_options(&options)
}

/// PING the node that serves `slot` (the only node without a cluster).
async fn confirm(
    subscriber: &fred::clients::Client,
    slot: u16,
) -> std::result::Result<(), fred::error::Error> {
    on_node(subscriber, slot)
        .ping::<fred::types::Value>(None)
        .await
        .map(drop)
}

/// Keyspace `channels` grouped by the hash slot of their key on a cluster;
/// one group otherwise.
fn by_key_slot(channels: Vec<String>, clustered: bool) -> Vec<(u16, Vec<String>)> {
    if channels.is_empty() {
        return Vec::new();
    }
    if !clustered {
        return vec![(0, channels)];
    }
    let mut groups: HashMap<u16, Vec<String>> = HashMap::new();
    for channel in channels {
        let slot = keyspace_key(&channel).map_or(0, |key| redis_keyslot(key.as_bytes()));
        groups.entry(slot).or_default().push(channel);
    }
    groups.into_iter().collect()
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
