//! The read-only commands `status`, `list` and `watch` send, on the
//! library's command connection, and the reading of their replies.

use std::collections::HashMap;

use redisson_lock::fred::clients::Client as Fred;
use redisson_lock::fred::interfaces::{ClientLike, ClusterInterface};
use redisson_lock::fred::types::{ClusterHash, CustomCommand, Value};
use redisson_lock::Client;

use super::{Subscribers, SHOWN};
use crate::exit::CliResult;

/// Raw commands on the library's command connection.
pub struct Raw<'a> {
    fred: &'a Fred,
    clustered: bool,
}

impl<'a> Raw<'a> {
    pub fn new(client: &'a Client) -> Raw<'a> {
        Raw {
            fred: client.redis(),
            clustered: client.config().redis.server.is_clustered(),
        }
    }

    /// A command whose first argument is its key (routed by it on a cluster).
    pub async fn key(&self, cmd: &'static str, args: Vec<Value>) -> CliResult<Value> {
        Ok(self
            .fred
            .custom(
                CustomCommand::new_static(cmd, ClusterHash::FirstKey, false),
                args,
            )
            .await?)
    }

    pub async fn key_type(&self, key: &str) -> CliResult<String> {
        let v = self.key("TYPE", vec![key.into()]).await?;
        Ok(v.as_string().unwrap_or_else(|| "none".to_owned()))
    }

    pub async fn exists(&self, key: &str) -> CliResult<bool> {
        let v = self.key("EXISTS", vec![key.into()]).await?;
        Ok(v.as_i64() == Some(1))
    }

    pub async fn pttl(&self, key: &str) -> CliResult<i64> {
        let v = self.key("PTTL", vec![key.into()]).await?;
        Ok(v.as_i64().unwrap_or(-2))
    }

    pub(super) async fn int(&self, cmd: &'static str, key: &str) -> CliResult<Option<i64>> {
        Ok(self.key(cmd, vec![key.into()]).await?.as_i64())
    }

    pub(super) async fn hgetall(&self, key: &str) -> CliResult<Vec<(String, Value)>> {
        let v = self.key("HGETALL", vec![key.into()]).await?;
        Ok(pairs(v).into_iter().map(|(k, v)| (text(&k), v)).collect())
    }

    pub(super) async fn zrange_scores(&self, key: &str) -> CliResult<Vec<(Value, Option<f64>)>> {
        let v = self
            .key(
                "ZRANGE",
                vec![
                    key.into(),
                    0.into(),
                    (SHOWN - 1).into(),
                    "WITHSCORES".into(),
                ],
            )
            .await?;
        Ok(pairs(v).into_iter().map(|(m, s)| (m, s.as_f64())).collect())
    }

    /// Subscribers of each channel, by both pub/sub flavours. A flavour the
    /// server does not support (SHARDNUMSUB before Redis 7) reads `None`.
    pub async fn subscribers(&self, channels: &[String]) -> Vec<Subscribers> {
        let mut out = vec![Subscribers::default(); channels.len()];
        if channels.is_empty() {
            return out;
        }
        // NUMSUB: node-local on a cluster, so summed over the masters.
        let numsub = |reply: Value, out: &mut [Subscribers]| {
            let counts: HashMap<String, i64> = pairs(reply)
                .into_iter()
                .map(|(c, n)| (text(&c), n.as_i64().unwrap_or(0)))
                .collect();
            for (slot, ch) in out.iter_mut().zip(channels) {
                let n = counts.get(ch).copied().unwrap_or(0);
                slot.classic = Some(slot.classic.unwrap_or(0) + n);
            }
        };
        let mut args: Vec<Value> = vec!["NUMSUB".into()];
        args.extend(channels.iter().map(|c| Value::from(c.as_str())));
        let numsub_cmd = || CustomCommand::new_static("PUBSUB", ClusterHash::Random, false);
        if self.clustered {
            let nodes = self
                .fred
                .cached_cluster_state()
                .map(|s| s.unique_primary_nodes())
                .unwrap_or_default();
            for node in nodes {
                let reply = self
                    .fred
                    .with_cluster_node(node)
                    .custom::<Value, Value>(numsub_cmd(), args.clone())
                    .await;
                if let Ok(reply) = reply {
                    numsub(reply, &mut out);
                }
            }
        } else if let Ok(reply) = self.fred.custom::<Value, Value>(numsub_cmd(), args).await {
            numsub(reply, &mut out);
        }
        // SHARDNUMSUB: on the node of each channel's slot.
        for (slot, ch) in out.iter_mut().zip(channels) {
            let reply = self
                .fred
                .custom::<Value, Value>(
                    // fred honours only a custom slot on custom commands
                    // (other hashers fall back to the first argument).
                    CustomCommand::new_static("PUBSUB", ClusterHash::from(ch.as_str()), false),
                    vec!["SHARDNUMSUB".into(), ch.as_str().into()],
                )
                .await;
            if let Ok(reply) = reply {
                slot.sharded = pairs(reply).first().and_then(|(_, n)| n.as_i64());
            }
        }
        out
    }
}

/// `[a, b, c, d]` → `[(a, b), (c, d)]` (RESP2 maps and WITHSCORES replies).
fn pairs(v: Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(map) => map
            .inner()
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
        other => {
            let mut items = other.into_array().into_iter();
            let mut out = Vec::new();
            while let (Some(a), Some(b)) = (items.next(), items.next()) {
                out.push((a, b));
            }
            out
        }
    }
}

/// A reply as text; bytes that are not UTF-8 as hex.
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => hex(b),
        },
        other => other.as_string().unwrap_or_default(),
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
