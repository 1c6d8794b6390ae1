//! Interop with the real Java Redisson client, every supported version.
//!
//! What it proves: a JVM running Redisson (`interop/java/RedissonPeer.java`,
//! driven line by line) and this crate, on the same private Redis, exclude
//! each other (a shared counter incremented non-atomically under the lock
//! comes out exact), wake each other by publish in both directions (well
//! within a second while leases are 30 s), read each other's state alike
//! (owner fields `javaClientId:threadId`, hold counts, TTLs, permits, latch
//! counts, fair queue order), refuse each other's unlocks, force-unlock each
//! other awake, hand a lock over at its TTL when the JVM holding it is killed,
//! share fencing tokens, and downgrade write to read locks on both sides; for
//! RLock, fair, non-reentrant (fair and plain), read-write, spin and fenced
//! locks, RSemaphore, RPermitExpirableSemaphore and RCountDownLatch. The core
//! scenarios run again on a Redis Cluster (classic and sharded pub/sub) and
//! under Sentinel. Other tests check docs/PROTOCOL.md §11's statements about
//! versions where they can be observed.
//!
//! Each scenario is one test per Redisson version (`rlock::redisson_4_7_0`,
//! ...), one JVM per test, run against the builds found in
//! `target/redisson-java/{4.7.0,3.45.0,3.23.0,3.17.0}/classpath`.
//!
//! ```sh
//! cargo test --test java                              # every version built
//! REDISSON_VERSIONS=4.7.0,3.17.0 cargo test --test java   # exactly these, required
//! ```
//!
//! With `REDISSON_VERSIONS` unset and nothing built, 4.7.0 is built once with
//! `../shared/redisson-java/build.sh`; without `java`/`javac` (or that
//! script) the tests print "skipped: ..." and pass, unless `CI=true`.
//! Failure messages name the version and print both sides' steps in order.
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::java::{self, Peer, Status, Steps, Topology};
use common::Fixture;
use fred::prelude::*;
use redisson_lock::{AnyKind, Client, Error, Lock, Owner, PubSubMode, Ttl};

/// A waiter must be woken this soon after the release returned: far below
/// the 30 s lease and the 30 s re-check cap, so only a publish can do it.
const WAKE: Duration = Duration::from_millis(1000);
/// The default lease (lock watchdog timeout) on both sides.
const LEASE_MS: i64 = 30_000;

/// No scenario may take longer than this (a hang fails with both sides' steps).
const SCENARIO_LIMIT: Duration = Duration::from_secs(150);

/// One test per scenario and Redisson version: `rlock::redisson_4_7_0`.
macro_rules! per_version {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redisson_4_7_0() {
                super::bounded(super::$scenario("4.7.0")).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redisson_3_45_0() {
                super::bounded(super::$scenario("3.45.0")).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redisson_3_23_0() {
                super::bounded(super::$scenario("3.23.0")).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redisson_3_17_0() {
                super::bounded(super::$scenario("3.17.0")).await
            }
        }
    )*};
}

/// Run a scenario within [`SCENARIO_LIMIT`], else fail with its steps.
async fn bounded(scenario: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(SCENARIO_LIMIT, scenario)
        .await
        .is_err()
    {
        let test = std::thread::current().name().unwrap_or("?").to_string();
        panic!(
            "{test}: the scenario did not finish within {SCENARIO_LIMIT:?}; steps so far:\n{}",
            Steps::of_test(&test)
        );
    }
}

per_version!(
    rlock,
    fair,
    non_reentrant,
    non_reentrant_fair,
    spin,
    fenced,
    read_write,
    killed_holder,
    semaphore,
    permit_semaphore,
    latch,
    versions_11,
    cluster,
    sentinel,
);

/// Every version `REDISSON_VERSIONS` names has tests here.
#[test]
fn redisson_versions_are_known() {
    if let Some(list) = java::required_versions() {
        for v in list {
            assert!(
                java::VERSIONS.contains(&v.as_str()),
                "REDISSON_VERSIONS names {v}, which has no tests (known: {:?})",
                java::VERSIONS
            );
        }
    }
}

// ---------------------------------------------------------------- harness

/// One scenario: a private server, a Rust client, a raw client and a JVM.
struct Scene {
    fx: Fixture,
    java: Peer,
    steps: Steps,
    version: String,
}

impl Scene {
    async fn start(version: &str, scenario: &str) -> Option<Scene> {
        Scene::start_with(version, scenario, &[]).await
    }

    async fn start_with(version: &str, scenario: &str, extra: &[&str]) -> Option<Scene> {
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
    fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.fx.name)
    }

    fn note(&self, what: impl AsRef<str>) {
        self.steps.note(format!("rust: {}", what.as_ref()));
    }

    async fn hash(&self, key: &str) -> HashMap<String, String> {
        self.fx.raw.hgetall(key).await.unwrap()
    }

    async fn pttl(&self, key: &str) -> i64 {
        self.fx.raw.pttl(key).await.unwrap()
    }

    async fn get(&self, key: &str) -> Option<String> {
        self.fx.raw.get(key).await.unwrap()
    }

    /// Wait (at most 10 s) until `channel` has at least `n` subscribers.
    async fn subscribed(&self, channel: &str, n: i64) {
        until(
            &self.steps,
            &format!("{n} subscriber(s) on {channel}"),
            || async { common::numsub(&self.fx.raw, channel).await >= n },
        )
        .await;
        self.note(format!("sees >= {n} subscriber(s) on {channel}"));
    }

    /// Wait until nobody is subscribed to `channel`: a Rust waiter's
    /// subscription is gone, so that a later [`Scene::subscribed`] sees
    /// the Java waiter's own.
    async fn unsubscribed(&self, channel: &str) {
        until(
            &self.steps,
            &format!("no subscriber on {channel}"),
            || async { common::numsub(&self.fx.raw, channel).await == 0 },
        )
        .await;
        self.note(format!("sees no subscriber on {channel}"));
    }

    /// Wait until a waiter for the `kind` lock `name` (owner field `field`)
    /// waits: it subscribed to its channel, or, for a spin lock (which never
    /// subscribes), it retried twice since `before` script calls.
    async fn waits(&self, kind: &str, name: &str, field: &str, before: i64) {
        // Both clients try, subscribe, then try again before they park; a
        // Redisson waiter that has not parked yet misses a "1" (read-unlock)
        // message (its LockPubSub releases only the threads already queued
        // on the latch) and sleeps out the lock's TTL, as it would after a
        // Java unlock. So: subscribed, and the second try made.
        if let Some(channel) = waiter_channel(kind, name, field) {
            self.subscribed(&channel, 1).await;
        }
        self.scripts_since(before, 2).await;
    }

    /// The JVM's `remainTimeToLive` of `jobj` (its thread t1), in ms.
    async fn java_ttl(&mut self, jobj: &str) -> i64 {
        self.java
            .ok("t1", &format!("ttl {jobj}"))
            .await
            .parse()
            .unwrap()
    }

    /// Wait until a spin-lock waiter (which never subscribes) has retried at
    /// least twice since `before` script calls: it is in its back-off loop.
    async fn scripts_since(&self, before: i64, more: i64) {
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
async fn until<F, Fut>(steps: &Steps, what: &str, mut check: F)
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
async fn pttl_rises(steps: &Steps, raw: &fred::clients::Client, key: &str, what: &str) {
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
async fn script_calls(raw: &fred::clients::Client) -> i64 {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    cmdstat(&info, "eval") + cmdstat(&info, "evalsha")
}

fn cmdstat(info: &str, cmd: &str) -> i64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn result<T>(r: &redisson_lock::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("error {e}"),
    }
}

/// Check that a waiter was woken within [`WAKE`] of the release returning.
fn woken(steps: &Steps, what: &str, released: Instant, woken: Instant) {
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

/// Rust locks of each kind, by the Java peer's kind names, erased to one type.
fn rust_lock(client: &Client, kind: &str, name: &str) -> Lock<AnyKind> {
    match kind {
        "lock" => client.lock(name).unwrap().erase(),
        "fair" => client.fair_lock(name).unwrap().erase(),
        "nrlock" => client.non_reentrant_lock(name).unwrap().erase(),
        "nrfair" => client.non_reentrant_fair_lock(name).unwrap().erase(),
        "spin" => client.spin_lock(name).unwrap().erase(),
        "fenced" => client.fenced_lock(name).unwrap().erase(),
        "read" => client.read_write_lock(name).unwrap().read().erase(),
        "write" => client.read_write_lock(name).unwrap().write().erase(),
        other => panic!("no such kind {other}"),
    }
}

/// The channel a waiter of `kind` listens on (`None`: it never subscribes).
fn waiter_channel(kind: &str, name: &str, field: &str) -> Option<String> {
    match kind {
        "lock" | "nrlock" | "fenced" => Some(format!("redisson_lock__channel:{{{name}}}")),
        "fair" | "nrfair" => Some(format!("redisson_lock__channel:{{{name}}}:{field}")),
        "read" | "write" => Some(format!("redisson_rwlock:{{{name}}}")),
        _ => None,
    }
}

/// A read-write lock's hash in read mode, held once by each of `readers`
/// (hash fields).
fn read_hash(readers: &[&str]) -> HashMap<String, String> {
    let mut h = HashMap::new();
    h.insert("mode".to_string(), "read".to_string());
    for field in readers {
        h.insert(field.to_string(), "1".to_string());
    }
    h
}

/// The hash field a holder of `kind` writes for owner field `field`.
fn hold_field(kind: &str, field: &str) -> String {
    if kind == "write" && !field.ends_with(":write") {
        format!("{field}:write")
    } else {
        field.to_string()
    }
}

/// The whole hash a single holder `field` of `kind` leaves with `count` holds.
fn expected_hash(kind: &str, field: &str, count: u32) -> HashMap<String, String> {
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
fn owner(n: i64) -> Owner {
    Owner::new(900_000 + n)
}

/// Whether this version should have `kind` (docs/PROTOCOL.md: fenced lock
/// from 3.23 among ours, the non-reentrant kinds from 4.7).
fn has_kind(version: &str, kind: &str) -> bool {
    match kind {
        "nrlock" | "nrfair" => version.starts_with("4."),
        "fenced" => version != "3.17.0",
        _ => true,
    }
}

/// Ask the JVM once whether it has `kind`; skip (print and `false`) if not,
/// failing if that contradicts [`has_kind`].
async fn kind_supported(s: &mut Scene, kind: &str) -> bool {
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

// ---------------------------------------------------------------- lock kinds

async fn rlock(version: &str) {
    lock_kind(version, "lock").await
}

async fn fair(version: &str) {
    lock_kind(version, "fair").await
}

async fn non_reentrant(version: &str) {
    lock_kind(version, "nrlock").await
}

async fn non_reentrant_fair(version: &str) {
    lock_kind(version, "nrfair").await
}

async fn spin(version: &str) {
    lock_kind(version, "spin").await
}

/// Every scenario that applies to a lock kind, in one JVM.
async fn lock_kind(version: &str, kind: &str) {
    let Some(mut s) = Scene::start(version, &format!("{kind}-interop")).await else {
        return;
    };
    if !kind_supported(&mut s, kind).await {
        return;
    }
    counter(&mut s, kind, 25).await;
    wake_java_to_rust(&mut s, kind).await;
    wake_rust_to_java(&mut s, kind).await;
    state_java_holds(&mut s, kind).await;
    state_rust_holds(&mut s, kind).await;
    foreign_unlock(&mut s, kind).await;
    force_unlock_wakes(&mut s, kind).await;
    if kind == "fair" || kind == "nrfair" {
        fair_queue_order(&mut s, kind).await;
    }
    if kind == "spin" {
        spin_is_an_rlock_without_messages(&mut s).await;
    }
    if kind.starts_with("nr") {
        reentry_refused(&mut s, kind).await;
    }
}

/// Two Java threads and two Rust tasks increment one plain key, each round
/// a GET, a 1 ms window and a SET under the lock (or semaphore permit):
/// any overlap loses an update.
async fn counter(s: &mut Scene, kind: &str, rounds: u32) {
    let name = s.name("counter");
    let key = s.name("counter-value");
    let t1 = s
        .java
        .send("t1", &format!("counter {kind}:{name} {key} {rounds}"))
        .await;
    let t2 = s
        .java
        .send("t2", &format!("counter {kind}:{name} {key} {rounds}"))
        .await;
    s.note(format!(
        "two tasks run {rounds} rounds each on {kind}:{name}"
    ));
    let mut tasks = Vec::new();
    for task in 0..2 {
        let client = s.fx.client.clone();
        let raw = s.fx.raw.clone();
        let (name, key, kind) = (name.clone(), key.clone(), kind.to_string());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                critical(&client, &raw, &kind, &name, &key).await;
            }
            task
        }));
    }
    for t in tasks {
        t.await.expect("rust counter task");
    }
    s.note("rust counter tasks done");
    t1.ok().await;
    t2.ok().await;
    let got = s.get(&key).await;
    s.steps.eq(
        got,
        Some((rounds * 4).to_string()),
        format!(
            "{kind}: the counter after 2 Java threads and 2 Rust tasks did {rounds} \
             increments each under the lock (mutual exclusion across Java and Rust)"
        ),
    );
}

/// One round of the counter workload under `kind`.
async fn critical(client: &Client, raw: &fred::clients::Client, kind: &str, name: &str, key: &str) {
    async fn bump(raw: &fred::clients::Client, key: &str) {
        let v: Option<i64> = raw.get(key).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _: () = raw
            .set(key, v.unwrap_or(0) + 1, None, None, false)
            .await
            .unwrap();
    }
    match kind {
        "sem" => {
            let permit = client.semaphore(name).unwrap().acquire(1).await.unwrap();
            bump(raw, key).await;
            permit.release().await.unwrap();
        }
        "pes" => {
            let sem = client.permit_expirable_semaphore(name).unwrap();
            let permit = sem.acquire(None).await.unwrap();
            bump(raw, key).await;
            assert!(permit.release().await.unwrap(), "our permit was released");
        }
        _ => {
            let guard = rust_lock(client, kind, name).lock().await.unwrap();
            bump(raw, key).await;
            guard.unlock().await.unwrap();
        }
    }
}

/// Java holds; a Rust waiter is woken by Java's unlock.
async fn wake_java_to_rust(s: &mut Scene, kind: &str) {
    let name = s.name("wake-j2r");
    let jobj = format!("{kind}:{name}");
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(1));
    let field = lock.owner_field(owner(1));
    let before = script_calls(&s.fx.raw).await;
    let steps = s.steps.clone();
    let waiter = tokio::spawn(async move {
        steps.note("rust: lock() starts waiting");
        let guard = lock.lock().await;
        let at = Instant::now();
        steps.note(format!("rust: lock() returned {}", result(&guard)));
        (at, guard)
    });
    s.waits(kind, &name, &field, before).await;
    let released = s.java.call("t1", &format!("unlock {jobj}")).await;
    s.steps.eq(released.status, Status::Ok, "java unlock");
    let (at, guard) = waiter.await.unwrap();
    let guard = guard.unwrap_or_else(|e| s.steps.fail(format!("rust lock() failed: {e}")));
    woken(
        &s.steps,
        &format!("{kind}: rust waiter after java unlock"),
        released.at,
        at,
    );
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &field, 1),
        format!("{kind}: the hash once the rust waiter took it"),
    );
    guard.unlock().await.unwrap();
}

/// Rust holds; a Java waiter is woken by Rust's unlock.
async fn wake_rust_to_java(s: &mut Scene, kind: &str) {
    let name = s.name("wake-r2j");
    let jobj = format!("{kind}:{name}");
    let guard = rust_lock(&s.fx.client, kind, &name).lock().await.unwrap();
    s.note(format!("holds {kind}:{name}"));
    let jfield = s.java.owner_field("t2").await;
    let before = script_calls(&s.fx.raw).await;
    let waiting = s.java.send("t2", &format!("lock {jobj}")).await;
    s.waits(kind, &name, &jfield, before).await;
    guard.unlock().await.unwrap();
    let released = Instant::now();
    s.note("unlock returned");
    let reply = waiting.reply().await;
    s.steps
        .eq(reply.status, Status::Ok, "java lock() after rust unlock");
    woken(
        &s.steps,
        &format!("{kind}: java waiter after rust unlock"),
        released,
        reply.at,
    );
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, 1),
        format!("{kind}: the hash once the java waiter took it"),
    );
    s.java.ok("t2", &format!("unlock {jobj}")).await;
}

fn ttl_ms(ttl: Ttl) -> i64 {
    match ttl {
        Ttl::NotLocked => -2,
        Ttl::NoExpiry => -1,
        Ttl::Expires(d) => d.as_millis() as i64,
    }
}

/// A TTL that must be close below `lease`.
fn check_ttl(steps: &Steps, what: &str, ttl: i64, lease: i64) {
    steps.check(
        ttl > lease - 5_000 && ttl <= lease,
        format!("{what}: TTL {ttl} ms, expected within 5 s below {lease} ms"),
    );
}

/// Java holds twice: Redis and Rust read exactly Java's owner field, count
/// and TTL.
async fn state_java_holds(s: &mut Scene, kind: &str) {
    let name = s.name("state-java");
    let jobj = format!("{kind}:{name}");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let reentrant = !kind.starts_with("nr");
    if reentrant {
        s.java.ok("t1", &format!("lock {jobj}")).await;
    }
    let count = if reentrant { 2 } else { 1 };
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, count),
        format!("{kind}: the hash of a Java holder (owner field clientId:threadId, count)"),
    );
    // Write re-entry adds the lease to the TTL (Redisson's, kept: Q5).
    let lease = if kind == "write" {
        LEASE_MS * i64::from(count)
    } else {
        LEASE_MS
    };
    check_ttl(
        &s.steps,
        &format!("{kind}: PTTL of a Java watchdog hold ({count}x)"),
        s.pttl(&name).await,
        lease,
    );
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(2));
    s.steps.eq(
        lock.is_locked().await.unwrap(),
        true,
        format!("{kind}: rust is_locked of a Java hold"),
    );
    let ttl = ttl_ms(lock.remain_time_to_live().await.unwrap());
    check_ttl(
        &s.steps,
        &format!("{kind}: rust remain_time_to_live of a Java hold"),
        ttl,
        lease,
    );
    let jttl = s.java_ttl(&jobj).await;
    s.steps.check(
        (jttl - ttl).abs() < 2_000,
        format!("{kind}: java ttl {jttl} ms and rust ttl {ttl} ms differ by 2 s or more"),
    );
    s.steps.eq(
        s.java.ok("t1", &format!("holdcount {jobj}")).await,
        count.to_string(),
        format!("{kind}: java getHoldCount"),
    );
    let tried = lock.try_lock().await.unwrap();
    s.steps.check(
        tried.is_none(),
        format!("{kind}: rust try_lock of a Java-held lock must fail"),
    );
    for _ in 0..count {
        s.java.ok("t1", &format!("unlock {jobj}")).await;
    }
    s.steps.eq(
        lock.is_locked().await.unwrap(),
        false,
        format!("{kind}: rust is_locked after java's last unlock"),
    );
    s.steps.eq(
        s.fx.exists(&name).await,
        false,
        format!("{kind}: hash gone after java's last unlock"),
    );
}

/// Rust holds twice (once with a lease): Java reads it as held by someone
/// else, with the same TTL.
async fn state_rust_holds(s: &mut Scene, kind: &str) {
    let name = s.name("state-rust");
    let jobj = format!("{kind}:{name}");
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(3));
    let field = lock.owner_field(owner(3));
    let reentrant = !kind.starts_with("nr");
    let first = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let second = if reentrant {
        Some(lock.lock_with_lease(Duration::from_secs(20)).await.unwrap())
    } else {
        None
    };
    let count = if reentrant { 2 } else { 1 };
    s.note(format!("holds {jobj} {count}x with a 20 s lease"));
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &field, count),
        format!("{kind}: the hash of a Rust holder"),
    );
    s.steps.eq(
        s.java.ok("t1", &format!("islocked {jobj}")).await,
        "true".into(),
        format!("{kind}: java isLocked of a Rust hold"),
    );
    s.steps.eq(
        s.java.ok("t1", &format!("held {jobj}")).await,
        "false".into(),
        format!("{kind}: java isHeldByCurrentThread of a Rust hold"),
    );
    s.steps.eq(
        s.java.ok("t1", &format!("holdcount {jobj}")).await,
        "0".into(),
        format!("{kind}: java getHoldCount of a Rust hold"),
    );
    let jttl = s.java_ttl(&jobj).await;
    let lease = if kind == "write" {
        20_000 * i64::from(count)
    } else {
        20_000
    };
    check_ttl(
        &s.steps,
        &format!("{kind}: java remainTimeToLive of a Rust 20 s lease ({count}x)"),
        jttl,
        lease,
    );
    s.steps.eq(
        s.java.ok("t1", &format!("trylock {jobj} 0 -1")).await,
        "false".into(),
        format!("{kind}: java tryLock(0) of a Rust-held lock"),
    );
    s.steps.eq(
        lock.hold_count(owner(3)).await.unwrap(),
        count,
        format!("{kind}: rust hold_count"),
    );
    if let Some(second) = second {
        second.unlock().await.unwrap();
        s.steps.eq(
            s.java.ok("t1", &format!("islocked {jobj}")).await,
            "true".into(),
            format!("{kind}: java isLocked after one of two rust unlocks"),
        );
    }
    first.unlock().await.unwrap();
    s.steps.eq(
        s.java.ok("t1", &format!("islocked {jobj}")).await,
        "false".into(),
        format!("{kind}: java isLocked after rust's last unlock"),
    );
}

/// Neither side can unlock the other's hold; the hold stays.
async fn foreign_unlock(s: &mut Scene, kind: &str) {
    let name = s.name("foreign");
    let jobj = format!("{kind}:{name}");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(4));
    match lock.unlock().await {
        Err(Error::NotHeld { .. }) => s.note("unlock of java's hold: NotHeld, as expected"),
        other => s.steps.fail(format!(
            "{kind}: rust unlock of a Java hold must be NotHeld, got {other:?}"
        )),
    }
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, 1),
        format!("{kind}: java's hold after a refused rust unlock"),
    );
    s.java.ok("t1", &format!("unlock {jobj}")).await;

    let guard = lock.lock().await.unwrap();
    s.java
        .err(
            "t1",
            &format!("unlock {jobj}"),
            "IllegalMonitorStateException",
        )
        .await;
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &lock.owner_field(owner(4)), 1),
        format!("{kind}: rust's hold after a refused java unlock"),
    );
    guard.unlock().await.unwrap();
}

/// A forced unlock on one side wakes a waiter on the other.
async fn force_unlock_wakes(s: &mut Scene, kind: &str) {
    // Java holds, Rust waits, Java force-unlocks from another thread.
    let name = s.name("force-j");
    let jobj = format!("{kind}:{name}");
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(5));
    let field = lock.owner_field(owner(5));
    let before = script_calls(&s.fx.raw).await;
    let steps = s.steps.clone();
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await;
        steps.note(format!("rust: lock() returned {}", result(&guard)));
        (Instant::now(), guard)
    });
    s.waits(kind, &name, &field, before).await;
    let forced = s.java.call("t2", &format!("forceunlock {jobj}")).await;
    s.steps.eq(
        forced.value.as_str(),
        "true",
        format!("{kind}: java forceUnlock of its own hold"),
    );
    let (at, guard) = waiter.await.unwrap();
    woken(
        &s.steps,
        &format!("{kind}: rust waiter after java forceUnlock"),
        forced.at,
        at,
    );
    guard.unwrap().unlock().await.unwrap();
    let _ = s.java.call("t1", &format!("unlock {jobj}")).await; // its hold is gone: refused

    // Rust holds, Java waits, Rust force-unlocks.
    let name = s.name("force-r");
    let jobj = format!("{kind}:{name}");
    let lock = rust_lock(&s.fx.client, kind, &name);
    let guard = lock.lock().await.unwrap();
    let jfield = s.java.owner_field("t2").await;
    let before = script_calls(&s.fx.raw).await;
    let waiting = s.java.send("t2", &format!("lock {jobj}")).await;
    s.waits(kind, &name, &jfield, before).await;
    s.steps.eq(
        lock.force_unlock().await.unwrap(),
        true,
        format!("{kind}: rust force_unlock"),
    );
    let released = Instant::now();
    let reply = waiting.reply().await;
    s.steps.eq(
        reply.status,
        Status::Ok,
        "java lock() after rust force_unlock",
    );
    woken(
        &s.steps,
        &format!("{kind}: java waiter after rust force_unlock"),
        released,
        reply.at,
    );
    match guard.unlock().await {
        Err(Error::NotHeld { .. }) => {}
        other => s.steps.fail(format!(
            "{kind}: unlock of a force-unlocked rust guard: {other:?}"
        )),
    }
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, 1),
        format!("{kind}: java holds after rust's force unlock"),
    );
    s.java.ok("t2", &format!("unlock {jobj}")).await;

    // Rust holds and awaits lost(); Java force-unlocks: kinds whose unlocks
    // publish on one channel hear it at once (docs/PROTOCOL.md §2.6), not at
    // the next renewal, 10 s away.
    if matches!(kind, "lock" | "nrlock") {
        let name = s.name("force-lost");
        let jobj = format!("{kind}:{name}");
        let guard = rust_lock(&s.fx.client, kind, &name).lock().await.unwrap();
        let lost = tokio::spawn(guard.lost());
        s.subscribed(&format!("redisson_lock__channel:{{{name}}}"), 1)
            .await;
        let forced = s.java.call("t2", &format!("forceunlock {jobj}")).await;
        s.steps.eq(
            forced.value.as_str(),
            "true",
            format!("{kind}: java forceUnlock of rust's hold"),
        );
        let lost = tokio::time::timeout(WAKE, lost).await;
        s.steps.check(
            lost.is_ok(),
            format!("{kind}: rust's lost() within {WAKE:?} of java's forceUnlock"),
        );
        s.steps
            .check(guard.is_lost(), format!("{kind}: rust guard is lost"));
    }
}

/// Fair lock: waiters of both sides queue in one list in arrival order and
/// get the lock in that order, each woken by the previous unlock.
async fn fair_queue_order(s: &mut Scene, kind: &str) {
    let name = s.name("queue");
    let jobj = format!("{kind}:{name}");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let ra = rust_lock(&s.fx.client, kind, &name).with_owner(owner(6));
    let rb = rust_lock(&s.fx.client, kind, &name).with_owner(owner(7));
    let (fa, fb) = (ra.owner_field(owner(6)), rb.owner_field(owner(7)));
    let jfield = s.java.owner_field("t2").await;
    let spawn_waiter = |lock: Lock<AnyKind>, label: &'static str| {
        let steps = s.steps.clone();
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            steps.note(format!("rust {label}: acquired"));
            (Instant::now(), guard)
        })
    };
    let a = spawn_waiter(ra, "A");
    let raw = s.fx.raw.clone();
    let queued = |n: usize| {
        let raw = raw.clone();
        let queue = queue.clone();
        async move { raw.llen::<usize, _>(&queue).await.unwrap() >= n }
    };
    until(&s.steps, "rust A queued", || queued(1)).await;
    let mut j = s.java.send("t2", &format!("lock {jobj}")).await;
    until(&s.steps, "java t2 queued", || queued(2)).await;
    let b = spawn_waiter(rb, "B");
    until(&s.steps, "rust B queued", || queued(3)).await;
    let list: Vec<String> = s.fx.raw.lrange(&queue, 0, -1).await.unwrap();
    s.steps.eq(
        list,
        vec![fa.clone(), jfield.clone(), fb.clone()],
        format!("{kind}: the fair queue (rust A, java t2, rust B in arrival order)"),
    );
    // Java's lock() queues with its default thread-wait: 300 s since 3.13.3 (§11.2).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let jscore: Option<f64> = s.fx.raw.zscore(&timeouts, &jfield).await.unwrap();
    let ascore: Option<f64> = s.fx.raw.zscore(&timeouts, &fa).await.unwrap();
    let (jscore, ascore) = (jscore.unwrap(), ascore.unwrap());
    s.note(format!(
        "deadlines: rust A {:.0} ms ahead, java t2 {:.0} ms after A",
        ascore - now,
        jscore - ascore
    ));
    s.steps.check(
        (jscore - ascore - 300_000.0).abs() < 5_000.0,
        format!(
            "{kind}: java's deadline should be rust A's + 300 000 ms (Redisson's default \
             thread wait since 3.13.3), got +{:.0} ms",
            jscore - ascore
        ),
    );
    let released = s.java.call("t1", &format!("unlock {jobj}")).await;
    let (at, ga) = a.await.unwrap();
    woken(
        &s.steps,
        &format!("{kind}: rust A (head) after java t1 unlock"),
        released.at,
        at,
    );
    s.steps.check(
        !j.is_done(),
        format!("{kind}: java t2 must still wait while rust A holds"),
    );
    ga.unlock().await.unwrap();
    let released = Instant::now();
    let reply = j.reply().await;
    woken(
        &s.steps,
        &format!("{kind}: java t2 (next) after rust A unlock"),
        released,
        reply.at,
    );
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, 1),
        format!("{kind}: java t2 holds after rust A"),
    );
    let released = s.java.call("t2", &format!("unlock {jobj}")).await;
    let (at, gb) = b.await.unwrap();
    woken(
        &s.steps,
        &format!("{kind}: rust B (last) after java t2 unlock"),
        released.at,
        at,
    );
    gb.unlock().await.unwrap();
    let left: i64 =
        s.fx.raw
            .exists(vec![queue.clone(), timeouts.clone()])
            .await
            .unwrap();
    s.steps.eq(
        left,
        0,
        format!("{kind}: queue and deadlines gone once everyone had the lock"),
    );
}

/// The spin lock is an RLock layout that never publishes: an RLock waiter
/// on the other side is not woken by a spin unlock (only its TTL would),
/// and Java's spin unlock publishes nothing.
async fn spin_is_an_rlock_without_messages(s: &mut Scene) {
    let name = s.name("spin-rlock");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock spin:{name}")).await;
    let rlock = s.fx.client.lock(&name).unwrap();
    s.steps.check(
        rlock.try_lock().await.unwrap().is_none(),
        "rust RLock try_lock on a Java spin hold must fail (same layout)",
    );
    s.steps.eq(
        s.hash(&name).await,
        expected_hash("spin", &jfield, 1),
        "java spin hold layout",
    );
    let mut listener =
        s.fx.listen(&format!("redisson_lock__channel:{{{name}}}"))
            .await;
    s.java.ok("t1", &format!("unlock spin:{name}")).await;
    let heard = listener.drain().await;
    s.steps.eq(
        heard,
        Vec::<String>::new(),
        "messages published by java's spin unlock (none, §6.1)",
    );
}

/// Non-reentrant kinds (4.7): neither side re-enters its own hold.
async fn reentry_refused(s: &mut Scene, kind: &str) {
    let name = s.name("reentry");
    let jobj = format!("{kind}:{name}");
    s.java.ok("t1", &format!("lock {jobj}")).await;
    s.java
        .err(
            "t1",
            &format!("lock {jobj}"),
            "IllegalMonitorStateException",
        )
        .await;
    let jfield = s.java.owner_field("t1").await;
    s.steps.eq(
        s.hash(&name).await,
        expected_hash(kind, &jfield, 1),
        format!("{kind}: java hold after its refused re-entry"),
    );
    s.java.ok("t1", &format!("unlock {jobj}")).await;
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(8));
    let guard = lock.lock().await.unwrap();
    match lock.try_lock().await {
        Err(Error::NotReentrant { .. }) => s.note("re-entry refused: NotReentrant"),
        other => s.steps.fail(format!(
            "{kind}: rust re-entry must be NotReentrant, got {:?}",
            other.map(|g| g.is_some())
        )),
    }
    s.steps.eq(
        s.java.ok("t2", &format!("trylock {jobj} 0 -1")).await,
        "false".into(),
        format!("{kind}: java tryLock of a rust non-reentrant hold"),
    );
    guard.unlock().await.unwrap();
}

// ---------------------------------------------------------------- fenced

async fn fenced(version: &str) {
    let Some(mut s) = Scene::start(version, "fenced-interop").await else {
        return;
    };
    if !kind_supported(&mut s, "fenced").await {
        return;
    }
    let name = s.name("tokens");
    let lock = s.fx.client.fenced_lock(&name).unwrap().with_owner(owner(1));
    let mut last = 0i64;
    let mut next = |steps: &Steps, token: i64, who: &str| {
        steps.check(
            token > last,
            format!("fencing token from {who}: {token}, not above the last one {last}"),
        );
        last = token;
    };
    for round in 0..3 {
        let jt: i64 = s
            .java
            .ok("t1", &format!("locktoken fenced:{name}"))
            .await
            .parse()
            .unwrap();
        next(&s.steps, jt, "java lockAndGetToken");
        // Java re-entry takes a token too (§6.2).
        let jt2: i64 = s
            .java
            .ok("t1", &format!("locktoken fenced:{name}"))
            .await
            .parse()
            .unwrap();
        next(&s.steps, jt2, "java re-entry");
        let seen =
            s.fx.client
                .fenced_lock(&name)
                .unwrap()
                .token()
                .await
                .unwrap();
        s.steps
            .eq(seen, Some(jt2), "rust token() reads java's last token");
        s.java.ok("t1", &format!("unlock fenced:{name}")).await;
        s.java.ok("t1", &format!("unlock fenced:{name}")).await;
        let g = lock.lock().await.unwrap();
        next(&s.steps, g.fencing_token(), "rust lock");
        let g2 = g.reenter().await.unwrap();
        next(&s.steps, g2.fencing_token(), "rust re-entry");
        let jt: String = s.java.ok("t2", &format!("token fenced:{name}")).await;
        s.steps.eq(
            jt,
            g2.fencing_token().to_string(),
            "java getToken reads rust's last token",
        );
        s.steps.eq(
            s.java
                .ok("t2", &format!("trylocktoken fenced:{name} 0 -1"))
                .await,
            "null".into(),
            "java tryLockAndGetToken of a rust-held fenced lock",
        );
        g2.unlock().await.unwrap();
        g.unlock().await.unwrap();
        s.note(format!("round {round} done"));
    }
    counter(&mut s, "fenced", 20).await;
    let after: i64 = s
        .java
        .ok("t1", &format!("token fenced:{}", s.name("counter")))
        .await
        .parse()
        .unwrap();
    s.steps.eq(
        after,
        80,
        "fenced counter: one token per acquisition on both sides (4 x 20)",
    );
    wake_java_to_rust(&mut s, "fenced").await;
    wake_rust_to_java(&mut s, "fenced").await;
    foreign_unlock(&mut s, "fenced").await;
}

// ---------------------------------------------------------------- read-write

async fn read_write(version: &str) {
    let Some(mut s) = Scene::start(version, "rw-interop").await else {
        return;
    };
    counter(&mut s, "write", 20).await;
    wake_java_to_rust(&mut s, "write").await;
    wake_rust_to_java(&mut s, "write").await;
    state_java_holds(&mut s, "write").await;
    state_rust_holds(&mut s, "write").await;
    foreign_unlock(&mut s, "write").await;
    foreign_unlock(&mut s, "read").await;

    // Readers of both sides share the lock; a writer on one side waits for
    // the other side's reader and is woken by its read unlock.
    let name = s.name("share");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock read:{name}")).await;
    let rread = rw.read().with_owner(owner(1));
    let rfield = rread.owner_field(owner(1));
    let rg = rread.try_lock().await.unwrap();
    s.steps
        .check(rg.is_some(), "rust read lock beside a java read lock");
    let want = read_hash(&[&jfield, &rfield]);
    s.steps.eq(
        s.hash(&name).await,
        want,
        "read-write hash with a java and a rust reader",
    );
    for field in [&jfield, &rfield] {
        let key = format!("{{{name}}}:{field}:rwlock_timeout:1");
        check_ttl(
            &s.steps,
            &format!("reader timeout key {key}"),
            s.pttl(&key).await,
            LEASE_MS,
        );
    }
    rg.unwrap().unlock().await.unwrap();
    let writer = rw.write().with_owner(owner(2));
    let steps = s.steps.clone();
    let w = tokio::spawn(async move {
        let g = writer.lock().await.unwrap();
        steps.note("rust: write lock acquired");
        (Instant::now(), g)
    });
    s.subscribed(&format!("redisson_rwlock:{{{name}}}"), 1)
        .await;
    let released = s.java.call("t1", &format!("unlock read:{name}")).await;
    let (at, wg) = w.await.unwrap();
    woken(
        &s.steps,
        "rust writer after java read unlock",
        released.at,
        at,
    );
    // Rust writer holds; a java reader waits and is woken by the write unlock ("1").
    // The Rust writer's subscription must be gone first, or the count below
    // could be its, not the Java reader's.
    s.unsubscribed(&format!("redisson_rwlock:{{{name}}}")).await;
    let jfield = s.java.owner_field("t2").await;
    let before = script_calls(&s.fx.raw).await;
    let reading = s.java.send("t2", &format!("lock read:{name}")).await;
    s.waits("read", &name, &jfield, before).await;
    wg.unlock().await.unwrap();
    let released = Instant::now();
    let reply = reading.reply().await;
    woken(
        &s.steps,
        "java reader after rust write unlock",
        released,
        reply.at,
    );
    s.java.ok("t2", &format!("unlock read:{name}")).await;

    // Downgrade on the Java side: write, read, unlock write. Redisson
    // publishes nothing (Q5); the hash is left in read mode with java's read
    // hold, which a rust reader shares at once.
    let name = s.name("downgrade-java");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock write:{name}")).await;
    s.java.ok("t1", &format!("lock read:{name}")).await;
    let mut listener = s.fx.listen(&format!("redisson_rwlock:{{{name}}}")).await;
    s.java.ok("t1", &format!("unlock write:{name}")).await;
    let heard = listener.drain().await;
    s.steps.eq(
        heard,
        Vec::<String>::new(),
        "messages of java's write->read downgrade (none: Q5)",
    );
    let want = read_hash(&[&jfield]);
    s.steps
        .eq(s.hash(&name).await, want, "hash after java's downgrade");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let shared = rw.read().try_lock().await.unwrap();
    s.steps.check(
        shared.is_some(),
        "rust reader shares java's downgraded lock",
    );
    s.steps.check(
        rw.write().try_lock().await.unwrap().is_none(),
        "rust writer refused after java's downgrade",
    );
    shared.unwrap().unlock().await.unwrap();
    s.java.ok("t1", &format!("unlock read:{name}")).await;
    s.steps.eq(
        s.fx.exists(&name).await,
        false,
        "hash gone after the java reader left",
    );

    // Downgrade on the Rust side wakes a waiting java reader (§14 item 8).
    let name = s.name("downgrade-rust");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let wg = rw.write().with_owner(owner(3)).lock().await.unwrap();
    let rfield = rw.read().owner_field(owner(3));
    let jfield = s.java.owner_field("t2").await;
    let reading = s.java.send("t2", &format!("lock read:{name}")).await;
    s.subscribed(&format!("redisson_rwlock:{{{name}}}"), 1)
        .await;
    let rg = wg.downgrade().await.unwrap();
    let released = Instant::now();
    let reply = reading.reply().await;
    woken(
        &s.steps,
        "java reader after rust's write->read downgrade",
        released,
        reply.at,
    );
    let want = read_hash(&[&jfield, &rfield]);
    s.steps.eq(
        s.hash(&name).await,
        want,
        "hash after rust's downgrade and java's read",
    );
    s.steps.eq(
        s.java.ok("t1", &format!("trylock write:{name} 0 -1")).await,
        "false".into(),
        "java writer refused while rust and java read",
    );
    rg.unlock().await.unwrap();
    s.java.ok("t2", &format!("unlock read:{name}")).await;
}

// ---------------------------------------------------------------- killed JVM

/// A JVM holding locks (one watchdog-renewed, one with a lease) is killed
/// with SIGKILL: Rust waiters get each lock when its TTL runs out, not
/// before, and not much later.
async fn killed_holder(version: &str) {
    let Some(mut s) = Scene::start_with(version, "killed-holder", &["--watchdog", "1500"]).await
    else {
        return;
    };
    let (a, b) = (s.name("watchdog"), s.name("lease"));
    s.java.ok("t1", &format!("lock lock:{a}")).await;
    s.java.ok("t2", &format!("lock lock:{b} 2500")).await;
    // The watchdog renews every 500 ms: see A's TTL go up again.
    pttl_rises(&s.steps, &s.fx.raw, &a, "java's watchdog renews lock A").await;
    s.note("saw java's watchdog renew A");
    let mut waiters = Vec::new();
    for name in [&a, &b] {
        let lock = s.fx.client.lock(name).unwrap();
        let steps = s.steps.clone();
        let label = name.clone();
        waiters.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            steps.note(format!("rust: acquired {label}"));
            (Instant::now(), g)
        }));
        s.subscribed(&format!("redisson_lock__channel:{{{name}}}"), 1)
            .await;
    }
    s.java.kill().await;
    let killed = Instant::now();
    let ttl_a = s.pttl(&a).await;
    let ttl_b = s.pttl(&b).await;
    s.note(format!("after kill: PTTL A {ttl_a} ms, B {ttl_b} ms"));
    s.steps.check(
        ttl_a > 0 && ttl_a <= 1500,
        format!("A's TTL after the kill: {ttl_a}"),
    );
    s.steps.check(
        ttl_b > 0 && ttl_b <= 2500,
        format!("B's TTL after the kill: {ttl_b}"),
    );
    for (waiter, (label, ttl)) in waiters
        .into_iter()
        .zip([("A (watchdog)", ttl_a), ("B (lease)", ttl_b)])
    {
        let (at, g) = waiter.await.unwrap();
        let after = at.duration_since(killed).as_millis() as i64;
        s.steps.check(
            after >= ttl - 50 && after < ttl + 1000,
            format!("lock {label} of the killed JVM went to the rust waiter {after} ms after the kill; its TTL then was {ttl} ms"),
        );
        g.unlock().await.unwrap();
    }
}

// ---------------------------------------------------------------- semaphores

async fn semaphore(version: &str) {
    let Some(mut s) = Scene::start(version, "semaphore-interop").await else {
        return;
    };
    // Permits read alike.
    let name = s.name("permits");
    let sem = s.fx.client.semaphore(&name).unwrap();
    s.steps.eq(
        s.java
            .ok("t1", &format!("trysetpermits sem:{name} 3"))
            .await,
        "true".into(),
        "java trySetPermits(3)",
    );
    s.steps.eq(
        sem.try_set_permits(5).await.unwrap(),
        false,
        "rust try_set_permits on an existing semaphore",
    );
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        3,
        "rust reads java's permits",
    );
    let p = sem.acquire(2).await.unwrap();
    s.steps.eq(
        s.java.ok("t1", &format!("available sem:{name}")).await,
        "1".into(),
        "java reads permits after rust took 2",
    );
    s.java.ok("t1", &format!("addpermits sem:{name} 4")).await;
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        5,
        "rust reads permits after java added 4",
    );
    p.release().await.unwrap();
    s.steps.eq(
        s.java.ok("t1", &format!("available sem:{name}")).await,
        "7".into(),
        "java reads permits after rust gave 2 back",
    );
    s.steps.eq(
        s.get(&name).await,
        Some("7".into()),
        "the semaphore key (decimal count)",
    );

    // Mutual exclusion with one permit.
    let cname = s.name("counter");
    s.java
        .ok("t1", &format!("trysetpermits sem:{cname} 1"))
        .await;
    counter(&mut s, "sem", 20).await;

    // Java releases, a Rust waiter wakes.
    let name = s.name("wake-j2r");
    s.java
        .ok("t1", &format!("trysetpermits sem:{name} 0"))
        .await;
    let sem = s.fx.client.semaphore(&name).unwrap();
    let steps = s.steps.clone();
    let waiter = tokio::spawn(async move {
        let p = sem
            .try_acquire_for(Duration::from_secs(30), 1)
            .await
            .unwrap();
        steps.note(format!("rust: try_acquire_for returned {}", p.is_some()));
        (Instant::now(), p)
    });
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    let released = s.java.call("t1", &format!("release sem:{name}")).await;
    let (at, p) = waiter.await.unwrap();
    s.steps
        .check(p.is_some(), "rust acquired the permit java released");
    woken(
        &s.steps,
        "rust semaphore waiter after java release",
        released.at,
        at,
    );
    p.unwrap().forget();

    // Rust releases, a Java waiter wakes.
    let name = s.name("wake-r2j");
    let sem = s.fx.client.semaphore(&name).unwrap();
    s.steps.eq(
        sem.try_set_permits(0).await.unwrap(),
        true,
        "rust try_set_permits(0)",
    );
    let waiting = s.java.send("t2", &format!("acquire sem:{name}")).await;
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    sem.release(1).await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    s.steps
        .eq(reply.status, Status::Ok, "java acquire after rust release");
    woken(
        &s.steps,
        "java semaphore waiter after rust release",
        released,
        reply.at,
    );
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        0,
        "permits after java took the released one",
    );
}

async fn permit_semaphore(version: &str) {
    let Some(mut s) = Scene::start(version, "pes-interop").await else {
        return;
    };
    let name = s.name("ids");
    let sem = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let timeouts = format!("{{{name}}}:timeout");
    s.steps.eq(
        s.java
            .ok("t1", &format!("trysetpermits pes:{name} 2"))
            .await,
        "true".into(),
        "java trySetPermits(2)",
    );
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        2,
        "rust reads java's permits",
    );
    // A Java permit id, released by Rust.
    let jid = s.java.ok("t1", &format!("acquire pes:{name} 60000")).await;
    let members: Vec<(Vec<u8>, f64)> =
        s.fx.raw
            .zrange(&timeouts, 0, -1, None, false, None, true)
            .await
            .unwrap();
    s.steps.eq(
        members.len(),
        1,
        "permits in the timeout set after java's acquire",
    );
    let (member, score) = &members[0];
    let id: redisson_lock::PermitId = jid
        .parse()
        .unwrap_or_else(|e| s.steps.fail(format!("java's id {jid}: {e}")));
    s.steps.eq(
        member.as_slice(),
        id.as_bytes().as_slice(),
        "java's permit id is stored as its 16 raw bytes (3.17+)",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    s.steps.check(
        (score - now - 60_000.0).abs() < 5_000.0,
        format!("java's permit expiry {score} is not now + 60 s"),
    );
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        1,
        "rust reads permits after java's acquire",
    );
    s.steps.eq(
        sem.try_release(&id).await.unwrap(),
        true,
        "rust releases java's permit by id",
    );
    s.steps.eq(
        s.java.ok("t1", &format!("available pes:{name}")).await,
        "2".into(),
        "java reads permits after rust released its id",
    );
    // A Rust permit, released by Java.
    let guard = sem.acquire(Some(Duration::from_secs(60))).await.unwrap();
    let rid = guard.id();
    guard.forget();
    s.steps.eq(
        s.java.ok("t1", &format!("available pes:{name}")).await,
        "1".into(),
        "java reads permits after rust's acquire",
    );
    s.steps.eq(
        s.java
            .ok("t1", &format!("tryrelease pes:{name} {rid}"))
            .await,
        "true".into(),
        "java releases rust's permit by id",
    );
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        2,
        "rust reads permits after java released its id",
    );

    // A Java permit with a short lease comes back to a Rust waiter when it expires.
    let name = s.name("expiry");
    s.java
        .ok("t1", &format!("trysetpermits pes:{name} 1"))
        .await;
    let taken = Instant::now();
    s.java.ok("t1", &format!("acquire pes:{name} 700")).await;
    let sem = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let got = sem
        .try_acquire_for(Duration::from_secs(10), None)
        .await
        .unwrap();
    let after = taken.elapsed();
    s.note(format!(
        "acquired the expired java permit {after:?} after java took it"
    ));
    s.steps
        .check(got.is_some(), "rust acquires after java's permit expired");
    s.steps.check(
        after >= Duration::from_millis(650) && after < Duration::from_millis(700) + WAKE,
        format!("rust got java's expired 700 ms permit {after:?} after it was taken"),
    );
    got.unwrap().release().await.unwrap();

    let cname = s.name("counter");
    s.java
        .ok("t1", &format!("trysetpermits pes:{cname} 1"))
        .await;
    counter(&mut s, "pes", 20).await;

    // Wake-ups both ways.
    let name = s.name("wake-j2r");
    s.java
        .ok("t1", &format!("trysetpermits pes:{name} 1"))
        .await;
    let jid = s.java.ok("t1", &format!("acquire pes:{name} -1")).await;
    let sem = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let steps = s.steps.clone();
    let waiter = tokio::spawn(async move {
        let p = sem.acquire(None).await.unwrap();
        steps.note("rust: permit acquired");
        (Instant::now(), p)
    });
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    let released = s
        .java
        .call("t1", &format!("release pes:{name} {jid}"))
        .await;
    let (at, p) = waiter.await.unwrap();
    woken(
        &s.steps,
        "rust permit waiter after java release",
        released.at,
        at,
    );

    let waiting = s.java.send("t2", &format!("acquire pes:{name} -1")).await;
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    s.steps.eq(
        p.release().await.unwrap(),
        true,
        "rust release of its permit",
    );
    let released = Instant::now();
    let reply = waiting.reply().await;
    s.steps
        .eq(reply.status, Status::Ok, "java acquire after rust release");
    woken(
        &s.steps,
        "java permit waiter after rust release",
        released,
        reply.at,
    );
}

// ---------------------------------------------------------------- latch

async fn latch(version: &str) {
    let Some(mut s) = Scene::start(version, "latch-interop").await else {
        return;
    };
    let name = s.name("j2r");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    s.steps.eq(
        s.java
            .ok("t1", &format!("trysetcount latch:{name} 2"))
            .await,
        "true".into(),
        "java trySetCount(2)",
    );
    s.steps.eq(
        latch.try_set_count(5).await.unwrap(),
        false,
        "rust try_set_count on an existing latch",
    );
    s.steps.eq(
        latch.get_count().await.unwrap(),
        2,
        "rust reads java's count",
    );
    let l2 = latch.clone();
    let steps = s.steps.clone();
    let waiter = tokio::spawn(async move {
        let r = l2.await_for(Duration::from_secs(30)).await.unwrap();
        steps.note(format!("rust: await_for returned {r:?}"));
        (Instant::now(), r)
    });
    s.subscribed(&format!("redisson_countdownlatch__channel__{{{name}}}"), 1)
        .await;
    s.java.ok("t1", &format!("countdown latch:{name}")).await;
    s.steps.eq(
        latch.get_count().await.unwrap(),
        1,
        "rust reads the count after java's count down",
    );
    s.steps.eq(
        s.java.ok("t1", &format!("count latch:{name}")).await,
        "1".into(),
        "java reads its count",
    );
    latch.count_down().await.unwrap();
    let released = Instant::now();
    s.note("count_down returned (count 0)");
    let (at, r) = waiter.await.unwrap();
    s.steps.check(r.is_some(), "rust awaiter opened");
    woken(
        &s.steps,
        "rust latch awaiter after rust's last count down",
        released,
        at,
    );
    s.steps.eq(
        s.java.ok("t1", &format!("count latch:{name}")).await,
        "0".into(),
        "java reads the opened latch",
    );

    let name = s.name("j-wait");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    s.steps.eq(
        latch.try_set_count(2).await.unwrap(),
        true,
        "rust try_set_count(2)",
    );
    s.steps.eq(
        s.java.ok("t1", &format!("count latch:{name}")).await,
        "2".into(),
        "java reads rust's count",
    );
    let waiting = s
        .java
        .send("t2", &format!("await latch:{name} 30000"))
        .await;
    s.subscribed(&format!("redisson_countdownlatch__channel__{{{name}}}"), 1)
        .await;
    latch.count_down().await.unwrap();
    s.java.ok("t1", &format!("countdown latch:{name}")).await;
    let opened = Instant::now();
    let reply = waiting.reply().await;
    s.steps
        .eq(reply.value.as_str(), "true", "java await(30 s) opened");
    woken(
        &s.steps,
        "java latch awaiter after the last count down",
        opened,
        reply.at,
    );

    // Rust's count down wakes the Java awaiter.
    let name = s.name("r2j");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    latch.try_set_count(1).await.unwrap();
    let waiting = s
        .java
        .send("t2", &format!("await latch:{name} 30000"))
        .await;
    s.subscribed(&format!("redisson_countdownlatch__channel__{{{name}}}"), 1)
        .await;
    latch.count_down().await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    s.steps.eq(
        reply.value.as_str(),
        "true",
        "java await(30 s) after rust count down",
    );
    woken(
        &s.steps,
        "java latch awaiter after rust's count down",
        released,
        reply.at,
    );
}

// ---------------------------------------------------------------- §11

/// Statements of docs/PROTOCOL.md §11 that one can observe from outside.
async fn versions_11(version: &str) {
    let Some(mut s) = Scene::start(version, "protocol-11").await else {
        return;
    };
    let v = version.to_string();
    let at_least = |major: u32, minor: u32| {
        let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap());
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        (a, b) >= (major, minor)
    };

    // §11.1 first acquisition: one field, value 1 (HINCRBY, same state as HSET).
    let name = s.name("first");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock lock:{name}")).await;
    s.steps.eq(
        s.hash(&name).await,
        expected_hash("lock", &jfield, 1),
        "§11.1 first acquisition",
    );

    // §11.1 unlock latch: written by Java from 3.24 on, never before.
    let mut set = KeysSet::start(&s.fx).await;
    s.java.ok("t1", &format!("unlock lock:{name}")).await;
    let events: Vec<String> = set
        .drain()
        .await
        .into_iter()
        .filter(|k| k.starts_with("redisson_unlock_latch:"))
        .collect();
    s.note(format!(
        "unlock latch keys set by java's unlock: {events:?}"
    ));
    s.steps.eq(
        events.len() == 1,
        at_least(3, 24),
        format!(
            "§11.1: Java {version} writes an unlock latch (expected from 3.24); events {events:?}"
        ),
    );

    // §11.1 unlock of an absent key: nil (IllegalMonitorStateException), nothing published.
    let name = s.name("absent");
    let mut listener =
        s.fx.listen(&format!("redisson_lock__channel:{{{name}}}"))
            .await;
    s.java
        .err(
            "t1",
            &format!("unlock lock:{name}"),
            "IllegalMonitorStateException",
        )
        .await;
    s.steps.eq(
        listener.drain().await,
        Vec::<String>::new(),
        "§11.1: an unlock of an absent key publishes nothing",
    );

    // §11.1 lease 0: expires at once before 3.17.1, "no lease" (watchdog) from 3.17.1.
    let name = s.name("lease0");
    s.java.ok("t1", &format!("lock lock:{name} 0")).await;
    let ttl = s.pttl(&name).await;
    s.note(format!("PTTL after java lock(lease 0): {ttl}"));
    if version == "3.17.0" {
        s.steps.check(ttl == -2, format!("§11.1: Redisson 3.17.0 with lease 0 should leave no key (expires at once), PTTL {ttl}"));
    } else {
        check_ttl(
            &s.steps,
            "§11.1: lease 0 means the watchdog from 3.17.1",
            ttl,
            LEASE_MS,
        );
        s.java.ok("t1", &format!("unlock lock:{name}")).await;
    }

    // §11.3 read unlock of a hash without `mode`: success up to 3.43, nil
    // (IllegalMonitorStateException) from 3.44; the crate's RLock hash has no mode.
    let name = s.name("nomode");
    let g = s.fx.client.lock(&name).unwrap().lock().await.unwrap();
    let mut listener = s.fx.listen(&format!("redisson_rwlock:{{{name}}}")).await;
    set.drain().await;
    let reply = s.java.call("t1", &format!("unlock read:{name}")).await;
    let heard = listener.drain().await;
    let latches = set
        .drain()
        .await
        .into_iter()
        .filter(|k| k.starts_with("redisson_unlock_latch:"))
        .count();
    s.steps.eq(
        latches,
        usize::from(at_least(3, 24)),
        "§11.3/§5.3: unlock latches written by java's read unlock of a hash without mode",
    );
    s.note(format!(
        "java read unlock of a mode-less hash: {:?} {}; published {heard:?}",
        reply.status, reply.value
    ));
    if at_least(3, 44) {
        s.steps.check(
            reply.status == Status::Err
                && reply.exception().ends_with("IllegalMonitorStateException"),
            format!(
                "§11.3: from 3.44 a read unlock of a hash without mode is nil (IMSE), got {:?} {}",
                reply.status, reply.value
            ),
        );
    } else {
        s.steps.eq(
            reply.status,
            Status::Ok,
            "§11.3: up to 3.43 a read unlock of a hash without mode succeeds",
        );
    }
    s.steps.eq(
        heard,
        vec!["0".to_string()],
        "§5.3 step 2: a read unlock of a hash without mode publishes 0",
    );
    s.steps.eq(
        s.fx.exists(&name).await,
        true,
        "the rust RLock hash survives java's read unlock",
    );
    g.unlock().await.unwrap();

    // §11.3 read re-entry: PEXPIRE max(PTTL N, lease) since 3.11.1.
    let name = s.name("reread");
    s.java.ok("t1", &format!("lock read:{name} 20000")).await;
    s.java.ok("t1", &format!("lock read:{name} 3000")).await;
    check_ttl(
        &s.steps,
        "§11.3: a read re-entry with a shorter lease keeps the longer TTL",
        s.pttl(&name).await,
        20_000,
    );
    s.java.ok("t1", &format!("unlock read:{name}")).await;
    s.java.ok("t1", &format!("unlock read:{name}")).await;

    // §11.3 read renewal: up to 4.4 Java refreshes every reader's timeout
    // key, from 4.5 only its own. A rust reader with a 20 s lease next to a
    // java reader renewed every 500 ms (watchdog 1.5 s in a second JVM).
    let redisson = java::redisson(version).unwrap();
    let mut fast = Peer::start_as(
        "java#2",
        &redisson,
        &Topology::Single(s.fx.server.url.clone()),
        &["--watchdog", "1500"],
        &s.steps,
    )
    .await;
    let name = s.name("renew");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let rg = rw
        .read()
        .with_owner(owner(1))
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let rkey = format!(
        "{{{name}}}:{}:rwlock_timeout:1",
        rw.read().owner_field(owner(1))
    );
    let jfield = fast.owner_field("t1").await;
    fast.ok("t1", &format!("lock read:{name}")).await;
    let jkey = format!("{{{name}}}:{jfield}:rwlock_timeout:1");
    pttl_rises(
        &s.steps,
        &s.fx.raw,
        &jkey,
        "java#2 renews its reader timeout key",
    )
    .await;
    let rttl = s.pttl(&rkey).await;
    s.note(format!(
        "after java#2 renewed: rust reader's timeout key PTTL {rttl} ms"
    ));
    if at_least(4, 5) {
        s.steps.check(rttl > 15_000, format!("§11.3: from 4.5 Java renews only its own readers; the rust reader's key has PTTL {rttl}"));
    } else {
        s.steps.check(rttl <= 1_500, format!("§11.3: up to 4.4 Java renews every reader's key to its lease (1500); the rust reader's key has PTTL {rttl}"));
    }
    fast.ok("t1", &format!("unlock read:{name}")).await;
    rg.unlock().await.unwrap();

    // §11.4 / §3.4: the publish command on a single server is PUBLISH.
    s.steps.eq(
        s.java.publish.as_str(),
        "PUBLISH",
        "publish command on a single server",
    );
}

// ---------------------------------------------------------------- topologies

/// Where to count a channel's subscribers.
enum Subs<'a> {
    /// One server (a Sentinel-managed master).
    Server(&'a fred::clients::Client),
    /// Summed over a cluster's nodes, `NUMSUB` or `SHARDNUMSUB`.
    Cluster(&'a common::topology::Cluster, &'static str),
}

impl Subs<'_> {
    async fn count(&self, channel: &str) -> i64 {
        match self {
            Subs::Server(raw) => common::numsub(raw, channel).await,
            Subs::Cluster(cluster, sub) => cluster.count(sub, channel).await,
        }
    }

    async fn wait(&self, steps: &Steps, channel: &str) {
        until(steps, &format!("a subscriber on {channel}"), || async {
            self.count(channel).await >= 1
        })
        .await;
        steps.note(format!("rust: sees a subscriber on {channel}"));
    }
}

/// The core scenarios on another deployment: RLock exclusion and wake-ups
/// both ways, semaphore wake-ups both ways.
async fn core_on(
    steps: &Steps,
    java: &mut Peer,
    client: &Client,
    raw: &fred::clients::Client,
    subs: &Subs<'_>,
    prefix: &str,
) {
    // Exclusion: a Java thread and a Rust task on one counter.
    let name = format!("{prefix}-counter");
    let key = format!("{prefix}-counter-value");
    let rounds = 15;
    let j = java
        .send("t1", &format!("counter lock:{name} {key} {rounds}"))
        .await;
    for _ in 0..rounds {
        critical(client, raw, "lock", &name, &key).await;
    }
    j.ok().await;
    let got: Option<i64> = raw.get(&key).await.unwrap();
    steps.eq(
        got,
        Some(2 * i64::from(rounds)),
        "counter under an RLock shared by a java thread and a rust task",
    );

    // Java -> Rust.
    let name = format!("{prefix}-wake");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    java.ok("t1", &format!("lock lock:{name}")).await;
    let lock = client.lock(&name).unwrap();
    let st = steps.clone();
    let w = tokio::spawn(async move {
        let g = lock.lock().await.unwrap();
        st.note("rust: lock acquired");
        (Instant::now(), g)
    });
    subs.wait(steps, &channel).await;
    let released = java.call("t1", &format!("unlock lock:{name}")).await;
    let (at, g) = w.await.unwrap();
    woken(steps, "rust waiter after java unlock", released.at, at);
    // Rust -> Java.
    let waiting = java.send("t2", &format!("lock lock:{name}")).await;
    subs.wait(steps, &channel).await;
    g.unlock().await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    steps.eq(reply.status, Status::Ok, "java lock after rust unlock");
    woken(steps, "java waiter after rust unlock", released, reply.at);
    java.ok("t2", &format!("unlock lock:{name}")).await;

    // Semaphore, both ways.
    let name = format!("{prefix}-sem");
    let channel = format!("redisson_sc:{{{name}}}");
    java.ok("t1", &format!("trysetpermits sem:{name} 0")).await;
    let sem = client.semaphore(&name).unwrap();
    let st = steps.clone();
    let s2 = sem.clone();
    let w = tokio::spawn(async move {
        let p = s2.acquire(1).await.unwrap();
        st.note("rust: permit acquired");
        (Instant::now(), p)
    });
    subs.wait(steps, &channel).await;
    let released = java.call("t1", &format!("release sem:{name}")).await;
    let (at, p) = w.await.unwrap();
    woken(
        steps,
        "rust semaphore waiter after java release",
        released.at,
        at,
    );
    p.forget();
    let waiting = java.send("t2", &format!("acquire sem:{name}")).await;
    subs.wait(steps, &channel).await;
    sem.release(1).await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    steps.eq(reply.status, Status::Ok, "java acquire after rust release");
    woken(
        steps,
        "java semaphore waiter after rust release",
        released,
        reply.at,
    );
}

/// The core scenarios on a Redis Cluster, once with classic pub/sub
/// (`PUBLISH`) on both sides and once sharded (`SPUBLISH`), where the
/// server and the Redisson version can.
async fn cluster(version: &str) {
    let Some(redisson) = java::redisson(version) else {
        return;
    };
    let started = Instant::now();
    let cluster = common::topology::Cluster::start().await;
    let ready_in = started.elapsed();
    let nodes: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://{}", n.addr()))
        .collect();
    let raw = cluster.raw().await;
    // Whether the servers shard pub/sub: ask, as the crate does (Redis 7+).
    let sharding = raw
        .custom::<Value, _>(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB"])
        .await
        .is_ok();
    // Redisson (3.17+) follows each lock script with a WAIT and, before 4.x,
    // fails the call when no replica acknowledges within a second: wait for
    // the replicas' first sync (Redis 7 delays diskless syncs by 5 s).
    replicas_online(&cluster).await;
    let online_in = started.elapsed();
    for (mode, java_mode, command, sub) in [
        (PubSubMode::Classic, "off", "PUBLISH", "NUMSUB"),
        (PubSubMode::Sharded, "on", "SPUBLISH", "SHARDNUMSUB"),
    ] {
        let steps = Steps::new(format!("Redisson {version}, cluster, {command}"));
        steps.note(format!(
            "rust: cluster up in {ready_in:?}, replicas in sync after {online_in:?}"
        ));
        if mode == PubSubMode::Sharded && !sharding {
            println!(
                "skipped: the Redis cluster has no sharded pub/sub (PUBSUB SHARDNUMSUB refused)"
            );
            continue;
        }
        let mut java = Peer::start(
            &redisson,
            &Topology::Cluster {
                nodes: nodes.clone(),
                sharded: java_mode,
            },
            &[],
            &steps,
        )
        .await;
        if java.publish != command {
            // 3.17 knows only PUBLISH; 3.22 and 3.23 always shard where the
            // cluster can (no ShardedSubscriptionMode before 3.24).
            steps.check(
                (version == "3.17.0" && command == "SPUBLISH")
                    || (version == "3.23.0" && command == "PUBLISH"),
                format!(
                    "Redisson {version} on a cluster, asked for {command}, publishes with {}",
                    java.publish
                ),
            );
            println!(
                "skipped: Redisson {version} cannot use {command} on a Redis 7 cluster (it uses {})",
                java.publish
            );
            continue;
        }
        let client = cluster.client_with(|c| c.pubsub_mode(mode)).await;
        let prefix = common::unique(&format!("cluster-{}", command.to_lowercase()));
        core_on(
            &steps,
            &mut java,
            &client,
            &raw,
            &Subs::Cluster(&cluster, sub),
            &prefix,
        )
        .await;
        client.shutdown().await;
    }
}

/// Wait until every master of our private cluster has its replica in sync.
async fn replicas_online(cluster: &common::topology::Cluster) {
    for node in &cluster.nodes {
        let raw = node.raw().await;
        let info: String = raw
            .custom(fred::cmd!("INFO"), vec!["replication"])
            .await
            .unwrap();
        let _ = raw.quit().await;
        if info.contains("role:master") {
            common::topology::wait_replicas(node, 1).await;
        }
    }
}

/// The core scenarios under Sentinel (Java and Rust find the master
/// through the sentinels).
async fn sentinel(version: &str) {
    let Some(redisson) = java::redisson(version) else {
        return;
    };
    let steps = Steps::new(format!("Redisson {version}, sentinel"));
    steps.note("rust: starting a master, a replica and 3 sentinels");
    let sentinels = common::topology::Sentinels::start().await;
    steps.note("rust: sentinels ready");
    let addrs: Vec<String> = sentinels
        .sentinels
        .iter()
        .map(|n| format!("redis://{}", n.addr()))
        .collect();
    let mut java = Peer::start(
        &redisson,
        &Topology::Sentinel {
            master: common::topology::SERVICE.to_string(),
            sentinels: addrs,
        },
        &[],
        &steps,
    )
    .await;
    let client = sentinels.client().await;
    steps.note("rust: client connected through the sentinels");
    let master = sentinels.master().await;
    let raw = sentinels.servers[master].raw().await;
    steps.note(format!(
        "rust: master is {}",
        sentinels.servers[master].addr()
    ));
    let prefix = common::unique("sentinel");
    // §11.1: Redisson follows a lock script with WAIT when it counts
    // replicas. The peer reads from the master (readMode MASTER, so that its
    // counter reads are not stale): 3.17 and 3.23 then count no replica and
    // send no WAIT; 3.45+ ask the master (INFO replication) and do.
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let before = cmdstat(&info, "wait");
    let name = format!("{prefix}-wait");
    java.ok("t1", &format!("lock lock:{name}")).await;
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let after = cmdstat(&info, "wait");
    steps.note(format!(
        "rust: WAIT calls on the master {before} -> {after}"
    ));
    let expect = !matches!(version, "3.17.0" | "3.23.0");
    steps.eq(
        after > before,
        expect,
        "§11.1/§9.1: java's lock on a master with a replica is followed by WAIT (readMode MASTER)",
    );
    java.ok("t1", &format!("unlock lock:{name}")).await;
    core_on(
        &steps,
        &mut java,
        &client,
        &raw,
        &Subs::Server(&raw),
        &prefix,
    )
    .await;
    client.shutdown().await;
}

// ---------------------------------------------------------------- keyspace events

/// The keys `SET` on a server, from keyevent notifications (turned on for
/// the whole server: `notify-keyspace-events E$`).
struct KeysSet {
    client: fred::clients::Client,
    rx: tokio::sync::broadcast::Receiver<fred::types::KeyspaceEvent>,
}

impl KeysSet {
    async fn start(fx: &Fixture) -> KeysSet {
        let _: Value = fx
            .raw
            .custom(
                fred::cmd!("CONFIG"),
                vec!["SET", "notify-keyspace-events", "E$"],
            )
            .await
            .unwrap();
        let client = fx.raw.clone_new();
        client.init().await.unwrap();
        // fred hands keyspace and keyevent messages to this receiver, not to
        // `message_rx`.
        let rx = client.keyspace_event_rx();
        client.subscribe("__keyevent@0__:set").await.unwrap();
        let _: Value = client.ping(None).await.unwrap();
        let mut keys = KeysSet { client, rx };
        let probe = format!("{}-probe", fx.name);
        let _: () = fx.raw.set(&probe, 1, None, None, false).await.unwrap();
        assert_eq!(
            keys.drain().await,
            vec![probe],
            "keyevent notifications work"
        );
        keys
    }

    /// Every key set since the last drain, in order.
    async fn drain(&mut self) -> Vec<String> {
        let _: Value = self.client.ping(None).await.unwrap();
        let mut out = Vec::new();
        while let Ok(e) = self.rx.try_recv() {
            out.push(e.key.as_str().unwrap_or_default().to_string());
        }
        out
    }
}
