//! [`Bench`]: a private server, a raw client, a listener, and the checks
//! every script test makes (bad arguments refused, nothing written or
//! published; good ones let through).

use std::time::Duration;

use crate::common::{unique, Server};
use crate::{s, Case};
use fred::prelude::*;
use fred::types::Message;
use tokio::sync::broadcast;

/// A private server, a raw client, and a listener on every channel whose
/// name contains the test's unique `name`.
pub struct Bench {
    pub _server: Server,
    pub raw: fred::clients::Client,
    pub messages: broadcast::Receiver<Message>,
    pub _listener: fred::clients::Client,
    pub name: String,
}

impl Bench {
    pub async fn new(prefix: &str) -> Bench {
        let server = Server::start();
        let raw = server.raw().await;
        let listener = server.raw().await;
        let messages = listener.message_rx();
        let name = unique(prefix);
        listener.psubscribe(format!("*{name}*")).await.unwrap();
        Bench {
            _server: server,
            raw,
            messages,
            _listener: listener,
            name,
        }
    }

    /// Run one command, e.g. `["HSET", key, field, "1"]`.
    pub async fn cmd(&self, parts: &[&str]) -> Value {
        let args: Vec<String> = parts[1..].iter().map(|s| s.to_string()).collect();
        self.raw
            .custom(fred::cmd!(parts[0].to_string()), args)
            .await
            .unwrap_or_else(|e| panic!("{parts:?}: {e}"))
    }

    pub async fn eval(
        &self,
        body: &str,
        keys: &[String],
        args: Vec<String>,
    ) -> Result<Value, Error> {
        self.raw.eval(body, keys.to_vec(), args).await
    }

    /// DUMP and PTTL of each key (nil and -2 when absent).
    pub async fn snapshot(&self, keys: &[String]) -> Vec<(Value, i64)> {
        let mut state = Vec::with_capacity(keys.len());
        for key in keys {
            let dump = self.cmd(&["DUMP", key]).await;
            let pttl = self.cmd(&["PTTL", key]).await.as_i64().unwrap();
            state.push((dump, pttl));
        }
        state
    }

    /// Run `case` with each bad value of each argument in turn (and without
    /// its last argument, and with each call in `extra`), expecting an
    /// INVALID_ARGUMENT error and no change at all.
    pub async fn refuses_bad_args(
        &mut self,
        case: &Case,
        extra: &[(Vec<String>, Vec<String>, &str)],
    ) {
        let mut calls: Vec<(Vec<String>, Vec<String>, String)> = Vec::new();
        for (i, (kind, _)) in case.args.iter().enumerate() {
            for bad in kind.bad_values() {
                let mut args = case.good();
                args[i] = bad.to_string();
                calls.push((case.keys.clone(), args, format!("ARGV[{}]", i + 1)));
            }
        }
        if !case.args.is_empty() {
            let mut args = case.good();
            args.pop();
            calls.push((case.keys.clone(), args, "ARGV[".into()));
        }
        for (keys, args, position) in extra {
            calls.push((keys.clone(), args.clone(), position.to_string()));
        }
        for (keys, args, position) in calls {
            let before = self.snapshot(&case.watch).await;
            let outcome = self.eval(case.body, &keys, args.clone()).await;
            let error = match outcome {
                Err(e) => e.details().to_string(),
                Ok(v) => panic!("{args:?} was accepted: {v:?}"),
            };
            assert!(
                error.starts_with("INVALID_ARGUMENT ") && error.contains(&position),
                "{args:?}: expected INVALID_ARGUMENT at {position}, got {error:?}"
            );
            let after = self.snapshot(&case.watch).await;
            for ((key, (dump0, ttl0)), (dump1, ttl1)) in case.watch.iter().zip(before).zip(after) {
                assert_eq!(dump0, dump1, "{args:?} changed {key}");
                let ttl_kept = if ttl0 < 0 {
                    ttl1 == ttl0
                } else {
                    ttl1 <= ttl0 && ttl1 > ttl0 - 2_000
                };
                assert!(
                    ttl_kept,
                    "{args:?} changed the TTL of {key}: {ttl0} -> {ttl1}"
                );
            }
        }
        self.nothing_published().await;
    }

    /// Nothing reached the listener: a marker published now arrives first.
    pub async fn nothing_published(&mut self) {
        let marker = format!("marker:{}", self.name);
        let _: i64 = self.raw.publish(&marker, "marker").await.unwrap();
        let first = self.next_message().await;
        assert_eq!(
            (first.0.as_str(), first.1.as_str()),
            (marker.as_str(), "marker"),
            "something was published"
        );
    }

    /// The next (channel, message) the listener gets.
    pub async fn next_message(&mut self) -> (String, String) {
        let message = tokio::time::timeout(Duration::from_secs(5), self.messages.recv())
            .await
            .expect("a message within 5 s")
            .unwrap();
        (
            message.channel.to_string(),
            message.value.as_string().unwrap_or_default(),
        )
    }

    /// [`Bench::refuses_bad_args`], then `case` with its good arguments: the
    /// reply.
    pub async fn accepts(
        &mut self,
        case: &Case,
        extra: &[(Vec<String>, Vec<String>, &str)],
    ) -> Value {
        self.refuses_bad_args(case, extra).await;
        self.eval(case.body, &case.keys, case.good())
            .await
            .unwrap_or_else(|e| panic!("{:?} was refused: {e}", case.good()))
    }

    /// A valid unlock's effects: reply 1, every key of `gone` deleted, the
    /// `latch` (if any) set to 1, and `message` published.
    pub async fn released(
        &mut self,
        reply: Value,
        gone: &[&str],
        latch: Option<&str>,
        message: (String, &str),
    ) {
        assert_eq!(reply.as_i64(), Some(1), "the unlock's reply");
        let mut exists = vec!["EXISTS"];
        exists.extend_from_slice(gone);
        assert_eq!(
            self.cmd(&exists).await.as_i64(),
            Some(0),
            "{gone:?} deleted"
        );
        if let Some(latch) = latch {
            assert_eq!(self.get(latch).await.as_i64(), Some(1), "the latch");
        }
        assert_eq!(self.next_message().await, (message.0, s(message.1)));
    }

    pub async fn get(&self, key: &str) -> Value {
        self.cmd(&["GET", key]).await
    }

    /// `LRANGE key 0 -1`.
    pub async fn list(&self, key: &str) -> Vec<String> {
        self.cmd(&["LRANGE", key, "0", "-1"])
            .await
            .convert()
            .unwrap()
    }

    pub async fn pttl(&self, key: &str) -> i64 {
        self.cmd(&["PTTL", key]).await.as_i64().unwrap()
    }

    pub async fn hget(&self, key: &str, field: &str) -> Option<i64> {
        self.cmd(&["HGET", key, field]).await.as_i64()
    }

    /// Hold `key` as the RLock hash `{field: count}` with a 100 s TTL.
    pub async fn held(&self, key: &str, field: &str, count: &str) {
        self.cmd(&["HSET", key, field, count]).await;
        self.cmd(&["PEXPIRE", key, "100000"]).await;
    }

    /// `case` [`accepts`](Self::accepts)ed as a re-entry: the reply `{2}`
    /// (the new hold count), the count of `field` in the case's first key at
    /// 2, and `ttl_key`'s PTTL in `ttl`.
    pub async fn reentered(
        &mut self,
        case: &Case,
        field: &str,
        ttl_key: &str,
        ttl: std::ops::RangeInclusive<i64>,
    ) {
        let reply: Vec<i64> = self.accepts(case, &[]).await.convert().unwrap();
        assert_eq!(reply, [2], "the reply: the new hold count");
        assert_eq!(self.hget(&case.keys[0], field).await, Some(2));
        let pttl = self.pttl(ttl_key).await;
        assert!(ttl.contains(&pttl), "PTTL {pttl} not in {ttl:?}");
    }

    /// A bench, and its name.
    pub async fn named(prefix: &str) -> (Bench, String) {
        let t = Bench::new(prefix).await;
        let n = t.name.clone();
        (t, n)
    }

    /// A bench whose lock (its name, returned too) is [`held`](Self::held)
    /// by `field`, `count` times.
    pub async fn holding(prefix: &str, field: &str, count: &str) -> (Bench, String) {
        let (t, n) = Bench::named(prefix).await;
        t.held(&n, field, count).await;
        (t, n)
    }

    /// A bench whose read-write lock (its name, returned too) is
    /// [`rw_held`](Self::rw_held) in `mode` by `field`.
    pub async fn rw_holding(prefix: &str, mode: &str, field: &str) -> (Bench, String) {
        let (t, n) = Bench::named(prefix).await;
        t.rw_held(&n, mode, field).await;
        (t, n)
    }

    /// Hold `key` as a read-write lock hash in `mode`, with a 100 s TTL.
    pub async fn rw_held(&self, key: &str, mode: &str, field: &str) {
        self.cmd(&["HSET", key, "mode", mode, field, "1"]).await;
        self.cmd(&["PEXPIRE", key, "100000"]).await;
    }
}
