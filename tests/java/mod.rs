//! The Java interop scenarios (see `tests/java.rs`) and their harness: one
//! [`Scene`] per test (a private server, a Rust client, a raw client and a
//! JVM), polling and timing checks, the kind names both sides share.

pub mod fair_nudge;
pub mod fenced;
pub mod killed_holder;
pub mod lock_state;
pub mod locks;
pub mod parity;
pub mod read_write;
pub mod sync;
pub mod topologies;
pub mod versions;

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::java::{self, Peer, Pending, Reply, Status, Steps, Topology};
use crate::common::Fixture;
use fred::prelude::*;
use redisson_lock::{AnyKind, Client, Error, Lock, LockGuard, Owner, Ttl};

/// A waiter must be woken this soon after the release returned: far below
/// the 30 s lease and the 30 s re-check cap, so only a publish can do it.
pub const WAKE: Duration = Duration::from_millis(1000);
/// The default lease (lock watchdog timeout) on both sides.
pub const LEASE_MS: i64 = 30_000;

/// One scenario: a private server, a Rust client, a raw client and a JVM.
pub struct Scene {
    pub fx: Fixture,
    pub java: Peer,
    pub steps: Steps,
    pub version: String,
}

impl Scene {
    pub async fn start(version: &str, scenario: &str) -> Option<Scene> {
        Scene::start_with(version, scenario, &[]).await
    }

    pub async fn start_with(version: &str, scenario: &str, extra: &[&str]) -> Option<Scene> {
        let redisson = java::redisson(version)?;
        let fx = Fixture::new(scenario).await;
        let steps = Steps::new(format!("Redisson {version}, {scenario}"));
        steps.note(format!(
            "rust: client id {}, server {}",
            fx.client.id(),
            fx.server.url
        ));
        let java = Peer::start(
            &redisson,
            &Topology::Single(fx.server.url.clone()),
            extra,
            &steps,
        )
        .await;
        Some(Scene {
            fx,
            java,
            steps,
            version: version.to_string(),
        })
    }

    /// A fresh lock name for one sub-scenario.
    pub fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.fx.name)
    }

    pub fn note(&self, what: impl AsRef<str>) {
        self.steps.note(format!("rust: {}", what.as_ref()));
    }

    pub async fn hash(&self, key: &str) -> HashMap<String, String> {
        self.fx.raw.hgetall(key).await.unwrap()
    }

    pub async fn pttl(&self, key: &str) -> i64 {
        self.fx.raw.pttl(key).await.unwrap()
    }

    pub async fn get(&self, key: &str) -> Option<String> {
        self.fx.raw.get(key).await.unwrap()
    }

    /// Wait (at most 10 s) until `channel` has at least `n` subscribers.
    pub async fn subscribed(&self, channel: &str, n: i64) {
        until(
            &self.steps,
            &format!("{n} subscriber(s) on {channel}"),
            || async { common::numsub(&self.fx.raw, channel).await >= n },
        )
        .await;
        self.note(format!("sees >= {n} subscriber(s) on {channel}"));
    }

    /// Wait until a waiter for the `kind` lock `name` (owner field `field`)
    /// waits: it subscribed to its channel, or, for a spin lock (which never
    /// subscribes), it retried twice since `before` script calls.
    pub async fn waits(&self, kind: &str, name: &str, field: &str, before: i64) {
        self.waits_beside(kind, name, field, before, 0).await;
    }

    /// [`waits`](Self::waits), on a channel `others` other clients are
    /// subscribed to already (a Rust holder's watch).
    pub async fn waits_beside(
        &self,
        kind: &str,
        name: &str,
        field: &str,
        before: i64,
        others: i64,
    ) {
        // Both clients try, subscribe, then try again before they park; a
        // Redisson waiter that has not parked yet misses a "1" (read-unlock)
        // message (its LockPubSub releases only the threads already queued
        // on the latch) and sleeps out the lock's TTL, as it would after a
        // Java unlock. So: subscribed, and the second try made.
        if let Some(channel) = waiter_channel(kind, name, field) {
            self.subscribed(&channel, 1 + others).await;
        }
        self.scripts_since(before, 2).await;
    }

    /// The JVM's `remainTimeToLive` of `jobj` (its thread t1), in ms.
    pub async fn java_ttl(&mut self, jobj: &str) -> i64 {
        self.java_int("t1", &format!("ttl {jobj}")).await
    }

    /// Check that Java's `op` on `slot` ends `ok` with `want`.
    pub async fn java_says(&mut self, slot: &str, op: &str, want: &str, what: &str) {
        let got = self.java.ok(slot, op).await;
        self.steps.eq(got.as_str(), want, what);
    }

    /// Java's `ok` reply to `op` on `slot`, an integer.
    pub async fn java_int(&mut self, slot: &str, op: &str) -> i64 {
        let reply = self.java.ok(slot, op).await;
        reply.parse().unwrap_or_else(|e| {
            self.steps.fail(format!(
                "`{slot}: {op}` replied {reply:?}, not an integer: {e}"
            ))
        })
    }

    /// Check that the hash `name` is held `count` times by `field` alone,
    /// as a holder of `kind` writes it.
    pub async fn hash_held(&self, name: &str, kind: &str, field: &str, count: u32, what: String) {
        let hash = self.hash(name).await;
        self.steps.eq(hash, expected_hash(kind, field, count), what);
    }

    /// Java's thread t1 takes (`lock()`) a fresh `kind` lock named
    /// `self.name(what)`: its name, and the peer's name for it (`kind:name`).
    pub async fn java_holds(&mut self, kind: &str, what: &str) -> (String, String) {
        let name = self.name(what);
        let jobj = format!("{kind}:{name}");
        self.java.ok("t1", &format!("lock {jobj}")).await;
        (name, jobj)
    }

    /// A Rust task with owner `owner` waits in `lock()` of the `kind` lock
    /// `name` (see [`Scene::waits`]): its owner field, and the waiter.
    pub async fn rust_waits(&self, kind: &str, name: &str, owner: Owner) -> (String, RustLocker) {
        let lock = rust_lock(&self.fx.client, kind, name).with_owner(owner);
        let field = lock.owner_field(owner);
        let before = script_calls(&self.fx.raw).await;
        self.note(format!("lock() of {kind}:{name} starts waiting"));
        let waiter = self.waiter(async move { lock.lock().await }, |guard| {
            format!("lock() returned {}", result(guard))
        });
        self.waits(kind, name, &field, before).await;
        (field, waiter)
    }

    /// Java's thread t2 waits in `lock()` of the `kind` lock `name` (see
    /// [`Scene::waits`]): its owner field, and the call.
    pub async fn java_waits(&mut self, kind: &str, name: &str) -> (String, Pending) {
        self.java_waits_beside(kind, name, 0).await
    }

    /// [`java_waits`](Self::java_waits), on a channel `others` other clients
    /// are subscribed to already (a Rust holder's watch).
    pub async fn java_waits_beside(
        &mut self,
        kind: &str,
        name: &str,
        others: i64,
    ) -> (String, Pending) {
        let field = self.java.owner_field("t2").await;
        let before = script_calls(&self.fx.raw).await;
        let waiting = self.java.send("t2", &format!("lock {kind}:{name}")).await;
        self.waits_beside(kind, name, &field, before, others).await;
        (field, waiting)
    }

    /// Check that Java's `op` (thread t1, ending `ok`) publishes nothing on
    /// `channel`.
    pub async fn java_publishes_nothing(&mut self, channel: &str, op: &str, what: &str) {
        let mut listener = self.fx.listen(channel).await;
        self.java.ok("t1", op).await;
        let heard = listener.drain().await;
        self.steps.eq(heard, Vec::<String>::new(), what);
    }

    /// Start a Rust waiter: `wait` in a task (see [`Waiter::spawn`]).
    pub fn waiter<T, F, S>(&self, wait: F, said: S) -> Waiter<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
        S: FnOnce(&T) -> String + Send + 'static,
    {
        Waiter::spawn(&self.steps, wait, said)
    }

    /// Wait until a spin-lock waiter (which never subscribes) has retried at
    /// least twice since `before` script calls: it is in its back-off loop.
    pub async fn scripts_since(&self, before: i64, more: i64) {
        until(
            &self.steps,
            &format!("{more} more script calls"),
            || async { script_calls(&self.fx.raw).await >= before + more },
        )
        .await;
    }
}

/// Poll `check` (10 ms apart) until it holds, at most 10 s, else fail with
/// the steps.
pub async fn until<F, Fut>(steps: &Steps, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        if Instant::now() > deadline {
            steps.fail(format!("timed out (10 s) waiting for: {what}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Wait (at most 10 s, polling) until `key`'s PTTL goes up: someone renewed it.
pub async fn pttl_rises(steps: &Steps, raw: &fred::clients::Client, key: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut low = i64::MAX;
    loop {
        let t: i64 = raw.pttl(key).await.unwrap();
        if t > low.saturating_add(100) {
            steps.note(format!(
                "rust: {what}: PTTL of {key} rose from {low} to {t} ms"
            ));
            return;
        }
        low = low.min(t);
        if Instant::now() > deadline {
            steps.fail(format!(
                "timed out (10 s) waiting for: {what} (PTTL of {key} never rose; last {t})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `EVAL` + `EVALSHA` calls the server has run (INFO commandstats).
pub async fn script_calls(raw: &fred::clients::Client) -> i64 {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    cmdstat(&info, "eval") + cmdstat(&info, "evalsha")
}

pub fn cmdstat(info: &str, cmd: &str) -> i64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn result<T>(r: &redisson_lock::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("error {e}"),
    }
}

/// Check that a waiter was woken within [`WAKE`] of the release returning.
pub fn woken(steps: &Steps, what: &str, released: Instant, woken: Instant) {
    let after = woken.saturating_duration_since(released);
    steps.note(format!(
        "{what}: woken {after:?} after the release returned"
    ));
    steps.check(
        after < WAKE,
        format!(
            "{what}: the waiter got it {after:?} after the release returned, not within \
             {WAKE:?} (the lease is 30 s: only a publish it listens to wakes it this soon)"
        ),
    );
}

/// A Rust waiter running in a task: what its wait returned, and when.
pub struct Waiter<T>(tokio::task::JoinHandle<(Instant, T)>);

impl<T: Send + 'static> Waiter<T> {
    /// Run `wait` in a task; when it returns, the steps note `said` of what
    /// it returned.
    pub fn spawn<F, S>(steps: &Steps, wait: F, said: S) -> Waiter<T>
    where
        F: Future<Output = T> + Send + 'static,
        S: FnOnce(&T) -> String + Send + 'static,
    {
        let steps = steps.clone();
        Waiter(tokio::spawn(async move {
            let got = wait.await;
            let at = Instant::now();
            steps.note(format!("rust: {}", said(&got)));
            (at, got)
        }))
    }

    /// When the wait returned, and what.
    pub async fn returned(self) -> (Instant, T) {
        self.0.await.unwrap()
    }

    /// What the wait returned, which must be within [`WAKE`] of `released`.
    pub async fn woken(self, steps: &Steps, what: &str, released: Instant) -> T {
        let (at, got) = self.returned().await;
        woken(steps, what, released, at);
        got
    }
}

/// A Rust task waiting in `lock()`.
pub type RustLocker = Waiter<redisson_lock::Result<LockGuard<AnyKind>>>;

/// Check that a Rust unlock was refused with [`Error::NotHeld`].
pub fn not_held(steps: &Steps, unlocked: redisson_lock::Result<()>, what: &str) {
    match unlocked {
        Err(Error::NotHeld { .. }) => steps.note(format!("rust: {what}: NotHeld, as expected")),
        other => steps.fail(format!("{what}: must be NotHeld, got {other:?}")),
    }
}

/// Java's `waiting` call must end `ok` within [`WAKE`] of `released` (when
/// the Rust release that wakes it returned): its reply.
pub async fn java_woken(steps: &Steps, waiting: Pending, what: &str, released: Instant) -> Reply {
    let reply = waiting.reply().await;
    steps.eq(&reply.status, &Status::Ok, format!("{what}: java's call"));
    woken(steps, what, released, reply.at);
    reply
}

/// Rust locks of each kind, by the Java peer's kind names, erased to one type.
pub fn rust_lock(client: &Client, kind: &str, name: &str) -> Lock<AnyKind> {
    match kind {
        "lock" => client.lock(name).unwrap().into_erased(),
        "fair" => client.fair_lock(name).unwrap().into_erased(),
        "nrlock" => client.non_reentrant_lock(name).unwrap().into_erased(),
        "nrfair" => client.non_reentrant_fair_lock(name).unwrap().into_erased(),
        "spin" => client.spin_lock(name).unwrap().into_erased(),
        "fenced" => client.fenced_lock(name).unwrap().into_erased(),
        "read" => client.read_write_lock(name).unwrap().read().into_erased(),
        "write" => client.read_write_lock(name).unwrap().write().into_erased(),
        other => panic!("no such kind {other}"),
    }
}

/// The channel a waiter of `kind` listens on (`None`: it never subscribes).
pub fn waiter_channel(kind: &str, name: &str, field: &str) -> Option<String> {
    match kind {
        "lock" | "nrlock" | "fenced" => Some(format!("redisson_lock__channel:{{{name}}}")),
        "fair" | "nrfair" => Some(format!("redisson_lock__channel:{{{name}}}:{field}")),
        "read" | "write" => Some(format!("redisson_rwlock:{{{name}}}")),
        _ => None,
    }
}

/// A read-write lock's hash in read mode, held once by each of `readers`
/// (hash fields).
pub fn read_hash(readers: &[&str]) -> HashMap<String, String> {
    let mut h = HashMap::new();
    h.insert("mode".to_string(), "read".to_string());
    for field in readers {
        h.insert(field.to_string(), "1".to_string());
    }
    h
}

/// The hash field a holder of `kind` writes for owner field `field`.
pub fn hold_field(kind: &str, field: &str) -> String {
    if kind == "write" && !field.ends_with(":write") {
        format!("{field}:write")
    } else {
        field.to_string()
    }
}

/// The whole hash a single holder `field` of `kind` leaves with `count` holds.
pub fn expected_hash(kind: &str, field: &str, count: u32) -> HashMap<String, String> {
    let mut h = HashMap::new();
    h.insert(hold_field(kind, field), count.to_string());
    match kind {
        "write" => {
            h.insert("mode".into(), "write".into());
        }
        "read" => {
            h.insert("mode".into(), "read".into());
        }
        _ => {}
    }
    h
}

/// A Rust owner id (below 2^48, like a Java thread id but far from them).
pub fn owner(n: i64) -> Owner {
    Owner::new(900_000 + n)
}

/// Whether this version should have `kind` (docs/PROTOCOL.md: fenced lock
/// from 3.23 among ours, the non-reentrant kinds from 4.7).
pub fn has_kind(version: &str, kind: &str) -> bool {
    match kind {
        "nrlock" | "nrfair" => version.starts_with("4."),
        "fenced" => version != "3.17.0",
        _ => true,
    }
}

/// Ask the JVM once whether it has `kind`; skip (print and `false`) if not,
/// failing if that contradicts [`has_kind`].
pub async fn kind_supported(s: &mut Scene, kind: &str) -> bool {
    let probe = s.name("probe");
    let reply = s.java.call("t9", &format!("islocked {kind}:{probe}")).await;
    let has = reply.status != Status::Unsupported;
    s.steps.eq(
        has,
        has_kind(&s.version, kind),
        format!("Redisson {} has the {kind} kind", s.version),
    );
    if !has {
        println!(
            "skipped: Redisson {} has no {kind} kind ({})",
            s.version, reply.value
        );
    }
    has
}

pub fn ttl_ms(ttl: Ttl) -> i64 {
    match ttl {
        Ttl::NotLocked => -2,
        Ttl::NoExpiry => -1,
        Ttl::Expires(d) => d.as_millis() as i64,
    }
}

/// A TTL that must be close below `lease`.
pub fn check_ttl(steps: &Steps, what: &str, ttl: i64, lease: i64) {
    steps.check(
        ttl > lease - 5_000 && ttl <= lease,
        format!("{what}: TTL {ttl} ms, expected within 5 s below {lease} ms"),
    );
}
