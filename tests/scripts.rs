//! Every script that writes (the locks', the semaphores' and the latch's)
//! checks its arguments before its first write (`lua/args.lua`): a bad one is refused with an `INVALID_ARGUMENT` error
//! naming its position, and Redis is left exactly as it was (keys, values,
//! TTLs, no latch, nothing published). Each script is also run once with good
//! arguments, to show that the checks let them through.
//!
//! The scripts are run by plain EVAL, their bodies concatenated the way
//! `src/connection/script.rs` does it.
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{unique, Server};
use fred::prelude::*;
use fred::types::Message;
use tokio::sync::broadcast;

/// The files in `lua/`, concatenated in order, the rest run through
/// `args.lua`'s `run_body` (as `script!` in src/connection/script.rs).
macro_rules! body {
    ("args.lua", $($file:literal),+) => {
        concat!(
            include_str!("../lua/args.lua"),
            "\nreturn run_body(function()\n",
            $(include_str!(concat!("../lua/", $file)),)+
            "\nend)\n"
        )
    };
}

/// A permit-expirable-semaphore script: `count.lua`, `pes_reclaim.lua`, then
/// the file.
macro_rules! pes_body {
    ($file:literal) => {
        body!("args.lua", "count.lua", "pes_reclaim.lua", $file)
    };
}

/// What an argument is, and so which values it must refuse.
#[derive(Clone, Copy)]
enum Kind {
    /// Milliseconds, 1..=100 years.
    Ms,
    /// Milliseconds, 0..=100 years (the fair-lock thread-wait time).
    Ms0,
    /// The caller's epoch milliseconds.
    Epoch,
    /// How many owner fields follow (rw_renew_read).
    Count,
    /// An owner field or a message: any non-empty string.
    Text,
    /// "PUBLISH" or "SPUBLISH".
    Publish,
    /// "0" or "1".
    Flag,
    /// A permit count, 1..=i32::MAX.
    Permits,
    /// A permit count, 0..=i32::MAX.
    Permits0,
    /// A change of permits, i32::MIN..=i32::MAX.
    Delta,
    /// A latch count, 1..=2^53 - 1.
    Positive,
    /// A permit id: 16 bytes.
    Id,
}

const I64_MAX: &str = "9223372036854775807";

impl Kind {
    fn bad_values(self) -> &'static [&'static str] {
        match self {
            Kind::Ms => &[
                I64_MAX,
                "0",
                "-1",
                "abc",
                "1.5",
                "",
                "3155760000001",
                "1e3",
                "01",
                " 5",
            ],
            Kind::Ms0 => &[I64_MAX, "-1", "abc", "1.5", "", "3155760000001", "1e3"],
            Kind::Epoch => &["0", "-1", "abc", "1.5", "", "9007199254740992", I64_MAX],
            // Each test gives one owner per count: "2" claims one too many.
            Kind::Count => &["0", "-1", "abc", "1.5", "", "2"],
            Kind::Text => &[""],
            Kind::Publish => &["publish", "SET", "DEL", "", "SPUBLISH "],
            Kind::Flag => &["2", "", "yes"],
            Kind::Permits => &["0", "-1", "abc", "1.5", "", "2147483648", "01", "1e3"],
            Kind::Permits0 => &["-1", "abc", "1.5", "", "2147483648", "01"],
            Kind::Delta => &[
                "abc",
                "1.5",
                "",
                "2147483648",
                "-2147483649",
                "--1",
                "-0",
                "01",
                "+1",
            ],
            Kind::Positive => &["0", "-1", "abc", "", "9007199254740992", I64_MAX],
            Kind::Id => &["", "short", "0123456789abcdefX"],
        }
    }
}

/// One script call: body, keys, good arguments with their kinds, and every
/// key whose state must not change when an argument is refused.
struct Case {
    body: &'static str,
    keys: Vec<String>,
    args: Vec<(Kind, String)>,
    watch: Vec<String>,
}

/// `case!(body; keys…; Kind value, …; watched…)`: a [`Case`]; keys and
/// watched keys are `String` locals (cloned), each value goes through [`s`],
/// and `..watch` gives the watched keys as one `Vec`.
macro_rules! case {
    ($body:expr; $($key:ident),+; $($kind:ident $value:expr),+; ..$watch:expr) => {
        Case {
            body: $body,
            keys: vec![$($key.clone()),+],
            args: vec![$((Kind::$kind, s($value))),+],
            watch: $watch,
        }
    };
    ($body:expr; $($key:ident),+; $($kind:ident $value:expr),+; $($watched:ident),+) => {
        case!($body; $($key),+; $($kind $value),+; ..vec![$($watched.clone()),+])
    };
}

impl Case {
    fn good(&self) -> Vec<String> {
        self.args.iter().map(|(_, v)| v.clone()).collect()
    }
}

/// A private server, a raw client, and a listener on every channel whose
/// name contains the test's unique `name`.
struct Bench {
    _server: Server,
    raw: fred::clients::Client,
    messages: broadcast::Receiver<Message>,
    _listener: fred::clients::Client,
    name: String,
}

impl Bench {
    async fn new(prefix: &str) -> Bench {
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
    async fn cmd(&self, parts: &[&str]) -> Value {
        let args: Vec<String> = parts[1..].iter().map(|s| s.to_string()).collect();
        self.raw
            .custom(fred::cmd!(parts[0].to_string()), args)
            .await
            .unwrap_or_else(|e| panic!("{parts:?}: {e}"))
    }

    async fn eval(&self, body: &str, keys: &[String], args: Vec<String>) -> Result<Value, Error> {
        self.raw.eval(body, keys.to_vec(), args).await
    }

    /// DUMP and PTTL of each key (nil and -2 when absent).
    async fn snapshot(&self, keys: &[String]) -> Vec<(Value, i64)> {
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
    async fn refuses_bad_args(&mut self, case: &Case, extra: &[(Vec<String>, Vec<String>, &str)]) {
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
    async fn nothing_published(&mut self) {
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
    async fn next_message(&mut self) -> (String, String) {
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
    async fn accepts(&mut self, case: &Case, extra: &[(Vec<String>, Vec<String>, &str)]) -> Value {
        self.refuses_bad_args(case, extra).await;
        self.eval(case.body, &case.keys, case.good())
            .await
            .unwrap_or_else(|e| panic!("{:?} was refused: {e}", case.good()))
    }

    /// A valid unlock's effects: reply 1, every key of `gone` deleted, the
    /// `latch` (if any) set to 1, and `message` published.
    async fn released(
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

    async fn get(&self, key: &str) -> Value {
        self.cmd(&["GET", key]).await
    }

    /// `LRANGE key 0 -1`.
    async fn list(&self, key: &str) -> Vec<String> {
        self.cmd(&["LRANGE", key, "0", "-1"])
            .await
            .convert()
            .unwrap()
    }

    async fn pttl(&self, key: &str) -> i64 {
        self.cmd(&["PTTL", key]).await.as_i64().unwrap()
    }

    async fn hget(&self, key: &str, field: &str) -> Option<i64> {
        self.cmd(&["HGET", key, field]).await.as_i64()
    }

    /// Hold `key` as the RLock hash `{field: count}` with a 100 s TTL.
    async fn held(&self, key: &str, field: &str, count: &str) {
        self.cmd(&["HSET", key, field, count]).await;
        self.cmd(&["PEXPIRE", key, "100000"]).await;
    }

    /// `case` [`accepts`](Self::accepts)ed as a re-entry: a nil reply, the
    /// count of `field` in the case's first key at 2, and `ttl_key`'s PTTL in
    /// `ttl`.
    async fn reentered(
        &mut self,
        case: &Case,
        field: &str,
        ttl_key: &str,
        ttl: std::ops::RangeInclusive<i64>,
    ) {
        assert!(self.accepts(case, &[]).await.is_null());
        assert_eq!(self.hget(&case.keys[0], field).await, Some(2));
        assert!(ttl.contains(&self.pttl(ttl_key).await));
    }

    /// A bench, and its name.
    async fn named(prefix: &str) -> (Bench, String) {
        let t = Bench::new(prefix).await;
        let n = t.name.clone();
        (t, n)
    }

    /// A bench whose lock (its name, returned too) is [`held`](Self::held)
    /// by `field`, `count` times.
    async fn holding(prefix: &str, field: &str, count: &str) -> (Bench, String) {
        let (t, n) = Bench::named(prefix).await;
        t.held(&n, field, count).await;
        (t, n)
    }

    /// A bench whose read-write lock (its name, returned too) is
    /// [`rw_held`](Self::rw_held) in `mode` by `field`.
    async fn rw_holding(prefix: &str, mode: &str, field: &str) -> (Bench, String) {
        let (t, n) = Bench::named(prefix).await;
        t.rw_held(&n, mode, field).await;
        (t, n)
    }

    /// Hold `key` as a read-write lock hash in `mode`, with a 100 s TTL.
    async fn rw_held(&self, key: &str, mode: &str, field: &str) {
        self.cmd(&["HSET", key, "mode", mode, field, "1"]).await;
        self.cmd(&["PEXPIRE", key, "100000"]).await;
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An array reply's elements as integers.
fn ints(reply: Value) -> Vec<Option<i64>> {
    reply.into_array().iter().map(|v| v.as_i64()).collect()
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

fn latch(name: &str) -> String {
    format!(
        "redisson_unlock_latch:{{{name}}}:{}",
        uuid::Uuid::new_v4().simple()
    )
}

/// The fair lock's keys: N, Q, Z, channel base.
fn fair_keys(name: &str) -> [String; 4] {
    [
        name.to_string(),
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("redisson_lock__channel:{{{name}}}"),
    ]
}

#[tokio::test]
async fn args_error_text() {
    let t = Bench::new("text").await;
    let keys = vec![t.name.clone()];
    let error = t
        .eval(
            body!("args.lua", "lock.lua"),
            &keys,
            vec![s("abc"), s("c:1")],
        )
        .await
        .unwrap_err();
    assert!(
        error.details().starts_with(
            "INVALID_ARGUMENT ARGV[1] must be an integer of milliseconds in [1, 3155760000000], got \"abc\""
        ),
        "{error:?}"
    );
    let error = t
        .eval(body!("args.lua", "lock.lua"), &keys, vec![s("1000")])
        .await
        .unwrap_err();
    assert!(
        error
            .details()
            .starts_with("INVALID_ARGUMENT ARGV[2] must be a non-empty string, got nothing"),
        "{error:?}"
    );
    let error = t
        .eval(
            body!("args.lua", "lock.lua"),
            &keys,
            vec![s("1\r\n2"), s("c:1")],
        )
        .await
        .unwrap_err();
    assert!(error.details().contains("got \"1??2\""), "{error:?}");
    assert_eq!(t.cmd(&["EXISTS", &t.name]).await.as_i64(), Some(0));
}

#[tokio::test]
async fn lock() {
    let (mut t, n) = Bench::holding("lock", "c:1", "1").await;
    let case = case!(body!("args.lua", "lock.lua"); n; Ms 30_000, Text "c:1"; n);
    // Valid: re-entered, TTL reset to the lease.
    t.reentered(&case, "c:1", &n, 29_000..=30_000).await;
    // The largest lease is taken.
    let reply = t
        .eval(
            body!("args.lua", "lock.lua"),
            &case.keys,
            vec![s(3_155_760_000_000i64), s("c:1")],
        )
        .await
        .unwrap();
    assert!(reply.is_null());
    assert!(t.pttl(&n).await > 3_155_000_000_000);
}

#[tokio::test]
async fn unlock() {
    let (mut t, n) = Bench::holding("unlock", "c:1", "1").await;
    let channel = format!("redisson_lock__channel:{{{n}}}");
    let latch = unlocks(&mut t, body!("args.lua", "unlock.lua"), channel, "c:1", "0").await;
    assert!((15_000..=16_000).contains(&t.pttl(&latch).await));
}

/// `body` (unlock or rw_write_unlock) releases `owner`'s only hold on the
/// lock: bad arguments refused, then the lock deleted, a latch set and
/// `message` published on `channel`. Returns the latch.
async fn unlocks(
    t: &mut Bench,
    body: &'static str,
    channel: String,
    owner: &str,
    message: &str,
) -> String {
    let n = t.name.clone();
    let latch = latch(&n);
    let case = case!(body; n, channel, latch;
        Text message, Ms 30_000, Text owner, Publish "PUBLISH", Ms 16_000;
        n, latch);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n], Some(&latch), (channel, message))
        .await;
    latch
}

#[tokio::test]
async fn force_unlock() {
    let (mut t, n) = Bench::holding("force", "c:1", "1").await;
    let channel = format!("redisson_lock__channel:{{{n}}}");
    force_unlocks(&mut t, body!("args.lua", "force_unlock.lua"), channel, "0").await;
}

/// `body` (force_unlock, rw_read_force_unlock or rw_write_force_unlock)
/// refuses bad arguments, then deletes the held lock and publishes `message`
/// on `channel`.
async fn force_unlocks(t: &mut Bench, body: &'static str, channel: String, message: &str) {
    let n = t.name.clone();
    let case = case!(body; n, channel; Text message, Publish "PUBLISH"; n);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n], None, (channel, message)).await;
}

#[tokio::test]
async fn renew() {
    let mut t = Bench::new("renew").await;
    let (n1, n2) = (format!("{}:1", t.name), format!("{}:2", t.name));
    t.held(&n1, "c:1", "1").await;
    t.held(&n2, "c:2", "1").await;
    let case =
        case!(body!("args.lua", "renew.lua"); n1, n2; Ms 30_000, Text "c:1", Text "c:2"; n1, n2);
    let extra = [(
        case.keys.clone(),
        vec![s(30_000), s("c:1"), s("c:2"), s("c:3")],
        "ARGV[4]",
    )];
    let reply = t.accepts(&case, &extra).await;
    let renewed: Vec<i64> = reply.convert().unwrap();
    assert_eq!(renewed, [1, 1]);
    for key in [&n1, &n2] {
        assert!((29_000..=30_000).contains(&t.pttl(key).await));
    }
}

#[tokio::test]
async fn spin_unlock() {
    let (mut t, n) = Bench::named("spin").await;
    let latch = latch(&n);
    t.held(&n, "c:1", "2").await;
    let case = case!(body!("args.lua", "spin_unlock.lua"); n, latch;
        Ms 30_000, Text "c:1", Ms 16_000;
        n, latch);
    let reply = t.accepts(&case, &[]).await;
    assert_eq!(reply.as_i64(), Some(0));
    assert_eq!(t.hget(&n, "c:1").await, Some(1));
    assert!((29_000..=30_000).contains(&t.pttl(&n).await));
    assert_eq!(t.get(&latch).await.as_i64(), Some(0));
}

#[tokio::test]
async fn delete() {
    // No ARGV to check; the fragment in front of it changes nothing.
    let (t, n) = Bench::holding("delete", "c:1", "1").await;
    let keys = vec![n.clone()];
    assert_eq!(
        t.eval(body!("args.lua", "delete.lua"), &keys, vec![])
            .await
            .unwrap()
            .as_i64(),
        Some(1)
    );
    assert_eq!(
        t.eval(body!("args.lua", "delete.lua"), &keys, vec![])
            .await
            .unwrap()
            .as_i64(),
        Some(0)
    );
}

#[tokio::test]
async fn fenced_lock() {
    let (mut t, n) = Bench::named("fenced").await;
    let token = format!("redisson_lock_token:{{{n}}}");
    let case =
        case!(body!("args.lua", "fenced_lock.lua"); n, token; Ms 30_000, Text "c:1"; n, token);
    let reply = t.accepts(&case, &[]).await;
    let reply: Vec<i64> = reply.convert().unwrap();
    assert_eq!(reply, [-1, 1]);
    assert_eq!(t.hget(&n, "c:1").await, Some(1));
    assert!((29_000..=30_000).contains(&t.pttl(&n).await));
}

#[tokio::test]
async fn fair_lock() {
    let mut t = Bench::new("fair-lock").await;
    let [n, q, z, _] = fair_keys(&t.name);
    let now = now_ms();
    // Held by someone else, with a stale waiter at the head: a valid call
    // purges it and joins the queue.
    t.held(&n, "c:9", "1").await;
    t.cmd(&["RPUSH", &q, "stale"]).await;
    t.cmd(&["ZADD", &z, &s(now - 1_000), "stale"]).await;
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_lock.lua"); n, q, z;
        Ms 30_000, Text "c:1", Ms0 60_000, Epoch now, Flag "1";
        n, q, z);
    let reply = t.accepts(&case, &[]).await;
    let ttl = reply.as_i64().unwrap();
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    assert_eq!(t.list(&q).await, ["c:1"]);
    let deadline = t.cmd(&["ZSCORE", &z, "c:1"]).await.as_f64().unwrap() as i64;
    assert_eq!(deadline, now + ttl + 60_000);
    // A wait of 0 ms is valid (a sub-millisecond wait, or a zero
    // fair_lock_wait_timeout): only trying, busy.
    let reply = t
        .eval(
            body!("args.lua", "fair_purge.lua", "fair_lock.lua"),
            &case.keys,
            vec![s(30_000), s("c:2"), s(0), s(now_ms()), s("0")],
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(1));
}

#[tokio::test]
async fn fair_leave() {
    let mut t = Bench::new("fair-leave").await;
    let [n, q, z, base] = fair_keys(&t.name);
    let now = now_ms();
    // The head leaves a free lock: the next waiter's deadline moves up by the
    // wait, and it is woken.
    t.cmd(&["RPUSH", &q, "c:1", "c:2"]).await;
    t.cmd(&[
        "ZADD",
        &z,
        &s(now + 60_000),
        "c:1",
        &s(now + 120_000),
        "c:2",
    ])
    .await;
    let case = case!(body!("args.lua", "fair_leave.lua"); q, z, n, base;
        Text "c:1", Ms0 60_000, Publish "PUBLISH";
        q, z, n);
    let reply = t.accepts(&case, &[]).await;
    assert!(reply.is_null());
    assert_eq!(t.list(&q).await, ["c:2"]);
    let deadline = t.cmd(&["ZSCORE", &z, "c:2"]).await.as_f64().unwrap() as i64;
    assert_eq!(deadline, now + 60_000);
    assert_eq!(t.next_message().await, (format!("{base}:c:2"), s("0")));
    // A wait of 0 ms is valid.
    let reply = t
        .eval(
            body!("args.lua", "fair_leave.lua"),
            &case.keys,
            vec![s("c:2"), s(0), s("PUBLISH")],
        )
        .await
        .unwrap();
    assert!(reply.is_null());
    assert_eq!(t.cmd(&["EXISTS", &q, &z]).await.as_i64(), Some(0));
}

/// Fair-lock state where a valid unlock or force-unlock writes everything it
/// can: N held by c:1, a stale head to purge, then c:2 to wake.
async fn fair_held(t: &Bench, now: i64) -> [String; 4] {
    let keys = fair_keys(&t.name);
    let [n, q, z, _] = &keys;
    t.held(n, "c:1", "1").await;
    t.cmd(&["RPUSH", q, "stale", "c:2"]).await;
    t.cmd(&["ZADD", z, &s(now - 1_000), "stale", &s(now + 60_000), "c:2"])
        .await;
    keys
}

#[tokio::test]
async fn fair_unlock() {
    let mut t = Bench::new("fair-unlock").await;
    let now = now_ms();
    let [n, q, z, base] = fair_held(&t, now).await;
    let latch = latch(&n);
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_unlock.lua"); n, q, z, base, latch;
        Text "0", Ms 30_000, Text "c:1", Epoch now, Publish "PUBLISH", Ms 16_000;
        n, q, z, latch);
    let reply = t.accepts(&case, &[]).await;
    let woken = (format!("{base}:c:2"), "0");
    t.released(reply, &[&n], Some(&latch), woken).await;
    assert_eq!(t.list(&q).await, ["c:2"]);
}

#[tokio::test]
async fn fair_force_unlock() {
    let mut t = Bench::new("fair-force").await;
    let now = now_ms();
    let [n, q, z, base] = fair_held(&t, now).await;
    let case = case!(body!("args.lua", "fair_purge.lua", "fair_force_unlock.lua"); n, q, z, base;
        Text "0", Epoch now, Publish "PUBLISH";
        n, q, z);
    let reply = t.accepts(&case, &[]).await;
    let woken = (format!("{base}:c:2"), "0");
    t.released(reply, &[&n], None, woken).await;
    assert_eq!(t.list(&q).await, ["c:2"]);
}

/// The read-write lock's keys for owner c:1: N, channel, key prefix, the
/// owner's timeout prefix.
fn rw_keys(name: &str) -> [String; 4] {
    [
        name.to_string(),
        format!("redisson_rwlock:{{{name}}}"),
        format!("{{{name}}}"),
        format!("{{{name}}}:c:1:rwlock_timeout"),
    ]
}

#[tokio::test]
async fn rw_read_lock() {
    let mut t = Bench::new("read-lock").await;
    let [n, _, _, timeouts] = rw_keys(&t.name);
    let (t1, t2) = (format!("{timeouts}:1"), format!("{timeouts}:2"));
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_read_lock.lua"); n, timeouts;
        Ms 30_000, Text "c:1", Text "c:1:write";
        n, t1, t2);
    t.reentered(&case, "c:1", &t2, 29_000..=30_000).await;
}

#[tokio::test]
async fn rw_read_unlock() {
    let mut t = Bench::new("read-unlock").await;
    let [n, channel, prefix, timeouts] = rw_keys(&t.name);
    let t1 = format!("{timeouts}:1");
    let latch = latch(&n);
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_read_unlock.lua"); n, channel, timeouts, prefix, latch;
        Text "0", Text "c:1", Publish "PUBLISH", Ms 16_000;
        n, t1, latch);
    let reply = t.accepts(&case, &[]).await;
    t.released(reply, &[&n, &t1], Some(&latch), (channel, "0"))
        .await;
}

#[tokio::test]
async fn rw_write_lock() {
    let (mut t, n) = Bench::rw_holding("write-lock", "write", "c:1:write").await;
    let case = case!(body!("args.lua", "rw_write_lock.lua"); n; Ms 30_000, Text "c:1:write"; n);
    // Re-entry adds the lease to the remaining TTL.
    t.reentered(&case, "c:1:write", &n, 120_000..=130_000).await;
}

#[tokio::test]
async fn rw_write_unlock() {
    let mut t = Bench::new("write-unlock").await;
    let [n, channel, _, _] = rw_keys(&t.name);
    t.rw_held(&n, "write", "c:1:write").await;
    unlocks(
        &mut t,
        body!("args.lua", "rw_write_unlock.lua"),
        channel,
        "c:1:write",
        "1",
    )
    .await;
}

#[tokio::test]
async fn rw_read_force_unlock() {
    rw_force_unlock(body!("args.lua", "rw_read_force_unlock.lua"), "read", "0").await;
}

#[tokio::test]
async fn rw_write_force_unlock() {
    rw_force_unlock(body!("args.lua", "rw_write_force_unlock.lua"), "write", "1").await;
}

async fn rw_force_unlock(body: &'static str, mode: &str, message: &str) {
    let mut t = Bench::new(mode).await;
    let [n, channel, _, _] = rw_keys(&t.name);
    t.rw_held(&n, mode, "c:1").await;
    force_unlocks(&mut t, body, channel, message).await;
}

#[tokio::test]
async fn rw_renew_read() {
    let mut t = Bench::new("renew-read").await;
    let [n, _, prefix, timeouts] = rw_keys(&t.name);
    let t1 = format!("{timeouts}:1");
    t.rw_held(&n, "read", "c:1").await;
    t.cmd(&["SET", &t1, "1", "PX", "100000"]).await;
    let case = case!(body!("args.lua", "rw_renew_read.lua"); n, prefix;
        Ms 30_000, Count 1, Text "c:1";
        n, t1);
    let extra = [
        // An argument too many.
        (
            case.keys.clone(),
            vec![s(30_000), s(1), s("c:1"), s("c:2")],
            "ARGV[4]",
        ),
        // A lock without its key prefix.
        (
            vec![n.clone(), prefix.clone(), n.clone()],
            vec![s(30_000), s(1), s("c:1"), s(1), s("c:1")],
            "KEYS[3]",
        ),
    ];
    let reply = t.accepts(&case, &extra).await;
    let renewed: Vec<i64> = reply.convert().unwrap();
    assert_eq!(renewed, [1]);
    for key in [&n, &t1] {
        assert!((29_000..=30_000).contains(&t.pttl(key).await));
    }
}

fn sem_keys(name: &str) -> (String, String, String) {
    (
        name.to_string(),
        format!("redisson_sc:{{{name}}}"),
        format!(
            "redisson_sc_latch:{{{name}}}:{}",
            uuid::Uuid::new_v4().simple()
        ),
    )
}

#[tokio::test]
async fn semaphore_scripts() {
    let mut t = Bench::new("sem").await;
    let (n, ch, latch) = sem_keys(&t.name);
    t.cmd(&["SET", &n, "5"]).await;
    let watch = vec![n.clone(), latch.clone()];
    let acquire = case!(body!("args.lua", "count.lua", "semaphore_acquire.lua"); n, latch;
        Permits 2, Ms 32_000;
        ..watch.clone());
    assert_eq!(t.accepts(&acquire, &[]).await.as_i64(), Some(1));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("3"));
    assert_eq!(t.get(&latch).await.as_string().as_deref(), Some("1"));

    let release = case!(body!("args.lua", "count.lua", "semaphore_release.lua"); n, ch, latch;
        Permits 2, Publish "PUBLISH", Ms 32_000, Flag "0";
        ..watch.clone());
    assert_eq!(t.accepts(&release, &[]).await.as_i64(), Some(5));
    assert_eq!(t.next_message().await, (ch.clone(), s("5")));
    assert!(
        t.eval(
            body!("args.lua", "count.lua", "semaphore_release.lua"),
            &release.keys,
            release.good()
        )
        .await
        .unwrap()
        .is_null(),
        "a replay"
    );
    assert_eq!(t.get(&latch).await.as_string().as_deref(), Some("0"));

    let release_if_exists = case!(
        body!("args.lua", "count.lua", "semaphore_release_if_exists.lua"); n, ch;
        Permits 1, Publish "PUBLISH";
        ..watch.clone());
    assert_eq!(t.accepts(&release_if_exists, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("6")));

    let add = case!(body!("args.lua", "count.lua", "semaphore_add.lua"); n, ch;
        Delta -2, Publish "PUBLISH", Flag "0";
        ..watch.clone());
    assert_eq!(t.accepts(&add, &[]).await.as_i64(), Some(4));
    assert_eq!(t.next_message().await, (ch.clone(), s("4")));
    for extreme in ["-2147483648", "2147483647"] {
        let args = vec![s(extreme), s("PUBLISH"), s("1")];
        t.eval(
            body!("args.lua", "count.lua", "semaphore_add.lua"),
            &add.keys,
            args,
        )
        .await
        .unwrap();
    }
    assert_eq!(t.next_message().await, (ch.clone(), s("2147483647")));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("3"));

    // trySetPermits on an absent semaphore; the TTL is optional.
    let absent = format!("{n}-absent");
    let try_set = case!(body!("args.lua", "count.lua", "semaphore_try_set.lua"); absent, ch;
        Permits0 3, Publish "PUBLISH";
        absent);
    let bad_ttls: Vec<(Vec<String>, Vec<String>, &str)> = ["0", "abc", "3155760000001"]
        .iter()
        .map(|ttl| {
            (
                try_set.keys.clone(),
                vec![s(3), s("PUBLISH"), s(ttl)],
                "ARGV[3]",
            )
        })
        .collect();
    t.refuses_bad_args(&try_set, &bad_ttls).await;
    let with_ttl = vec![s(0), s("PUBLISH"), s(10_000)];
    assert_eq!(
        t.eval(
            body!("args.lua", "count.lua", "semaphore_try_set.lua"),
            &try_set.keys,
            with_ttl
        )
        .await
        .unwrap()
        .as_i64(),
        Some(1)
    );
    assert!((9_000..=10_000).contains(&t.pttl(&absent).await));
    assert_eq!(t.next_message().await, (ch.clone(), s("0")));

    // drainPermits has no ARGV to check.
    let reply = t
        .eval(
            body!("args.lua", "count.lua", "semaphore_drain.lua"),
            std::slice::from_ref(&n),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(3));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("0"));
    t.nothing_published().await;
}

#[tokio::test]
async fn permit_expirable_semaphore_scripts() {
    let (mut t, n) = Bench::named("pes").await;
    let z = format!("{{{n}}}:timeout");
    let ch = format!("redisson_sc:{{{n}}}");
    let now = now_ms();
    t.cmd(&["SET", &n, "2"]).await;
    t.cmd(&["ZADD", &z, &s(now + 60_000), "held-permit-0001"])
        .await;
    let watch = vec![n.clone(), z.clone()];
    let id = s("0123456789abcdef");
    let acquire = case!(pes_body!("pes_acquire.lua"); n, z, ch;
        Permits 1, Epoch now + 30_000, Epoch now, Epoch "922337203685477", Publish "PUBLISH",
        Id id.clone();
        ..watch.clone());
    let two_ids = {
        let mut args = acquire.good();
        args[0] = s(2);
        (acquire.keys.clone(), args, "ARGV[1]")
    };
    let reply = t.accepts(&acquire, &[two_ids]).await;
    assert_eq!(ints(reply), [Some(1), Some(0)]);
    assert_eq!(
        t.cmd(&["ZSCORE", &z, &id]).await.as_i64(),
        Some(now + 30_000)
    );

    let update = case!(pes_body!("pes_update_lease.lua"); n, z, ch;
        Id id.clone(), Epoch now + 40_000, Epoch now, Publish "PUBLISH";
        ..watch.clone());
    assert_eq!(t.accepts(&update, &[]).await.as_i64(), Some(1));

    let lease_time = case!(pes_body!("pes_lease_time.lua"); n, z, ch;
        Id id.clone(), Epoch "922337203685477", Epoch now, Publish "PUBLISH";
        ..watch.clone());
    let reply = t.accepts(&lease_time, &[]).await;
    assert_eq!(reply.as_i64(), Some(40_000));

    let counts =
        case!(pes_body!("pes_counts.lua"); n, z, ch; Epoch now, Publish "PUBLISH"; ..watch.clone());
    let reply = t.accepts(&counts, &[]).await;
    assert_eq!(ints(reply), [Some(1), Some(2)]);

    let set_permits = case!(body!("args.lua", "count.lua", "pes_set_permits.lua"); n, ch, z;
        Permits0 4, Publish "PUBLISH";
        ..watch.clone());
    let reply = t.accepts(&set_permits, &[]).await;
    assert_eq!(reply.as_i64(), Some(2), "4 in all, 2 taken");
    assert_eq!(t.next_message().await, (ch.clone(), s("4")));

    let release_many = case!(pes_body!("pes_release_many.lua"); n, ch, z;
        Permits 2, Epoch now, Publish "PUBLISH", Id id.clone(), Id "held-permit-0001";
        ..watch.clone());
    t.refuses_bad_args(&release_many, &[]).await;
    let release = case!(pes_body!("pes_release.lua"); n, ch, z;
        Id id.clone(), Permits 1, Epoch now, Publish "PUBLISH";
        ..watch.clone());
    t.refuses_bad_args(&release, &[]).await;
    let reply = t
        .eval(
            pes_body!("pes_release_many.lua"),
            &release_many.keys,
            release_many.good(),
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(2));
    assert_eq!(t.next_message().await, (ch.clone(), s("2")));
    let reply = t
        .eval(pes_body!("pes_release.lua"), &release.keys, release.good())
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(-1), "already released");
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("4"));
    t.nothing_published().await;
}

#[tokio::test]
async fn latch_scripts() {
    let (mut t, n) = Bench::named("latch").await;
    let ch = format!("redisson_countdownlatch__channel__{{{n}}}");
    let try_set = case!(body!("args.lua", "count.lua", "latch_try_set.lua"); n, ch;
        Flag "1", Positive 2, Publish "PUBLISH";
        n);
    assert_eq!(t.accepts(&try_set, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("1")));
    let count_down = case!(body!("args.lua", "count.lua", "latch_count_down.lua"); n, ch;
        Flag "0", Publish "PUBLISH";
        n);
    assert_eq!(t.accepts(&count_down, &[]).await.as_i64(), Some(1));
    let delete =
        case!(body!("args.lua", "latch_delete.lua"); n, ch; Flag "1", Publish "PUBLISH"; n);
    assert_eq!(t.accepts(&delete, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("1")));
    t.nothing_published().await;
}
