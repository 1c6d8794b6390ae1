//! Looking at a Redis server from a test: plain fred clients, pub/sub
//! subscriber counts, `INFO` fields, every key's contents, and bounded
//! waits for effects with no event to observe.

use std::time::{Duration, Instant};

use fred::prelude::*;

/// A plain fred client of `url` (any URL fred reads: a single server, a
/// cluster, ...), connected. Panics if it cannot connect.
pub async fn raw_client(url: &str) -> fred::clients::Client {
    let client = fred::clients::Client::new(
        fred::types::config::Config::from_url(url).expect("a valid URL"),
        None,
        None,
        None,
    );
    client.init().await.expect("raw client connects");
    client
}

/// Subscribers of `channel`, per PUBSUB NUMSUB.
pub async fn numsub(raw: &fred::clients::Client, channel: &str) -> i64 {
    let reply: Vec<Value> = raw
        .custom(
            fred::cmd!("PUBSUB"),
            vec!["NUMSUB".to_string(), channel.to_string()],
        )
        .await
        .unwrap();
    reply.get(1).and_then(|v| v.as_i64()).unwrap_or(-1)
}

/// Wait (bounded: 5 s) until `check` holds; for effects that happen in
/// background tasks with no event to observe (a fire-and-forget DEL, an
/// UNSUBSCRIBE).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Run `op` until it returns `Some`, at most `within`.
pub async fn until<T, F, Fut>(what: &str, within: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = op().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait (bounded) until `channel` has exactly `n` subscribers: how a test
/// knows a waiter is waiting (it subscribes first) or has left.
pub async fn wait_numsub(raw: &fred::clients::Client, channel: &str, n: i64) {
    eventually(&format!("{n} subscriber(s) on {channel}"), || async move {
        numsub(raw, channel).await == n
    })
    .await;
}

/// Every key matching `matches`: `key (type, pttl): contents`.
pub async fn describe_keys(
    raw: &fred::clients::Client,
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    let keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
    let mut out = Vec::new();
    for key in keys.into_iter().filter(|k| matches(k)) {
        let kind: String = raw
            .custom(fred::cmd!("TYPE"), vec![key.clone()])
            .await
            .unwrap();
        let pttl: i64 = raw.pttl(&key).await.unwrap();
        let range = |cmd: &str| -> Vec<String> {
            let mut args = vec![key.clone(), "0".into(), "-1".into()];
            if cmd == "ZRANGE" {
                args.push("WITHSCORES".into());
            }
            args
        };
        let contents: Value = match kind.as_str() {
            "hash" => raw.custom(fred::cmd!("HGETALL"), vec![key.clone()]).await,
            "list" => raw.custom(fred::cmd!("LRANGE"), range("LRANGE")).await,
            "zset" => raw.custom(fred::cmd!("ZRANGE"), range("ZRANGE")).await,
            "string" => raw.custom(fred::cmd!("GET"), vec![key.clone()]).await,
            _ => Ok(Value::Null),
        }
        .unwrap_or(Value::Null);
        out.push(format!("{key} ({kind}, pttl {pttl} ms): {contents:?}"));
    }
    out
}

/// Whether the server behind `raw` has sharded pub/sub (Redis 7+, Valkey):
/// it knows `PUBSUB SHARDNUMSUB`. Tests of sharded pub/sub ask this rather
/// than assume a version; without it they check the typed refusal instead.
pub async fn supports_sharded_pubsub(raw: &fred::clients::Client) -> bool {
    raw.custom::<Value, _>(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB"])
        .await
        .is_ok()
}

/// How many times the server has run `command` (`INFO commandstats`): how a
/// test sees a command it cannot otherwise observe (a `WAIT`, a watcher's
/// `HEXISTS`).
pub async fn command_calls(raw: &fred::clients::Client, command: &str) -> u64 {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `field` of `INFO section` (e.g. `role` of `replication`), if the server
/// answers and has it.
pub async fn info_field(raw: &fred::clients::Client, section: &str, field: &str) -> Option<String> {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec![section.to_string()])
        .await
        .ok()?;
    field_of(&info, field)
}

/// The value of `field:` in `INFO`-style text (`name:value` lines).
pub fn field_of(text: &str, field: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}
