//! The exclusive lock kinds (`rlock`, `fair`, `non_reentrant`,
//! `non_reentrant_fair`, `spin`): exclusion by a shared counter, wake-ups
//! both ways, and what only one kind does (fair queue order, the spin lock's
//! silence, refused re-entry).

use std::time::{Duration, Instant};

use crate::common::java::Status;
use crate::scenarios::lock_state::{
    force_unlock_wakes, foreign_unlock, state_java_holds, state_rust_holds,
};
use crate::scenarios::{java_woken, kind_supported, owner, rust_lock, until, woken, Scene};
use fred::prelude::*;
use futures::StreamExt;
use redisson_lock::{Client, Error};

pub async fn rlock(version: &str) {
    lock_kind(version, "lock").await
}

pub async fn fair(version: &str) {
    lock_kind(version, "fair").await
}

pub async fn non_reentrant(version: &str) {
    lock_kind(version, "nrlock").await
}

pub async fn non_reentrant_fair(version: &str) {
    lock_kind(version, "nrfair").await
}

pub async fn spin(version: &str) {
    lock_kind(version, "spin").await
}

/// Every scenario that applies to a lock kind, in one JVM.
pub async fn lock_kind(version: &str, kind: &str) {
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
    if kind == "lock" {
        listener_hears_java(&mut s).await;
    }
}

/// A Rust object listener (`events()`, Redisson's `addListener`) hears a
/// Java unlock: Redisson's unlock message on the lock's channel.
async fn listener_hears_java(s: &mut Scene) {
    let (name, jobj) = s.java_holds("lock", "listener").await;
    let mut events = s.fx.client.lock(&name).unwrap().events().await.unwrap();
    let released = s.java.call("t1", &format!("unlock {jobj}")).await;
    s.steps.eq(released.status, Status::Ok, "java unlock");
    let heard = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
    s.steps.eq(
        heard.ok().flatten(),
        Some(redisson_lock::ObjectEvent::Published(0)),
        "a rust listener hears java's unlock",
    );
}

/// Two Java threads and two Rust tasks increment one plain key, each round
/// a GET, a 1 ms window and a SET under the lock (or semaphore permit):
/// any overlap loses an update.
pub async fn counter(s: &mut Scene, kind: &str, rounds: u32) {
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
pub async fn critical(
    client: &Client,
    raw: &fred::clients::Client,
    kind: &str,
    name: &str,
    key: &str,
) {
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
pub async fn wake_java_to_rust(s: &mut Scene, kind: &str) {
    let (name, jobj) = s.java_holds(kind, "wake-j2r").await;
    let (field, waiter) = s.rust_waits(kind, &name, owner(1)).await;
    let released = s.java.call("t1", &format!("unlock {jobj}")).await;
    s.steps.eq(released.status, Status::Ok, "java unlock");
    let (at, guard) = waiter.returned().await;
    let guard = guard.unwrap_or_else(|e| s.steps.fail(format!("rust lock() failed: {e}")));
    woken(
        &s.steps,
        &format!("{kind}: rust waiter after java unlock"),
        released.at,
        at,
    );
    let what = format!("{kind}: the hash once the rust waiter took it");
    s.hash_held(&name, kind, &field, 1, what).await;
    guard.unlock().await.unwrap();
}

/// Rust holds; a Java waiter is woken by Rust's unlock.
pub async fn wake_rust_to_java(s: &mut Scene, kind: &str) {
    let name = s.name("wake-r2j");
    let jobj = format!("{kind}:{name}");
    let guard = rust_lock(&s.fx.client, kind, &name).lock().await.unwrap();
    s.note(format!("holds {kind}:{name}"));
    let (jfield, waiting) = s.java_waits(kind, &name).await;
    guard.unlock().await.unwrap();
    let released = Instant::now();
    s.note("unlock returned");
    let what = format!("{kind}: java waiter after rust unlock");
    java_woken(&s.steps, waiting, &what, released).await;
    let what = format!("{kind}: the hash once the java waiter took it");
    s.hash_held(&name, kind, &jfield, 1, what).await;
    s.java.ok("t2", &format!("unlock {jobj}")).await;
}

/// Fair lock: waiters of both sides queue in one list in arrival order and
/// get the lock in that order, each woken by the previous unlock.
pub async fn fair_queue_order(s: &mut Scene, kind: &str) {
    let name = s.name("queue");
    let jobj = format!("{kind}:{name}");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    s.java.ok("t1", &format!("lock {jobj}")).await;
    let ra = rust_lock(&s.fx.client, kind, &name).with_owner(owner(6));
    let rb = rust_lock(&s.fx.client, kind, &name).with_owner(owner(7));
    let (fa, fb) = (ra.owner_field(owner(6)), rb.owner_field(owner(7)));
    let jfield = s.java.owner_field("t2").await;
    let a = s.waiter(async move { ra.lock().await.unwrap() }, |_| {
        "A: acquired".into()
    });
    let raw = s.fx.raw.clone();
    let queued = |n: usize| {
        let raw = raw.clone();
        let queue = queue.clone();
        async move { raw.llen::<usize, _>(&queue).await.unwrap() >= n }
    };
    until(&s.steps, "rust A queued", || queued(1)).await;
    let mut j = s.java.send("t2", &format!("lock {jobj}")).await;
    until(&s.steps, "java t2 queued", || queued(2)).await;
    let b = s.waiter(async move { rb.lock().await.unwrap() }, |_| {
        "B: acquired".into()
    });
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
    let what = format!("{kind}: rust A (head) after java t1 unlock");
    let ga = a.woken(&s.steps, &what, released.at).await;
    s.steps.check(
        !j.is_done(),
        format!("{kind}: java t2 must still wait while rust A holds"),
    );
    ga.unlock().await.unwrap();
    let what = format!("{kind}: java t2 (next) after rust A unlock");
    java_woken(&s.steps, j, &what, Instant::now()).await;
    let what = format!("{kind}: java t2 holds after rust A");
    s.hash_held(&name, kind, &jfield, 1, what).await;
    let released = s.java.call("t2", &format!("unlock {jobj}")).await;
    let what = format!("{kind}: rust B (last) after java t2 unlock");
    let gb = b.woken(&s.steps, &what, released.at).await;
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
pub async fn spin_is_an_rlock_without_messages(s: &mut Scene) {
    let name = s.name("spin-rlock");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock spin:{name}")).await;
    let rlock = s.fx.client.lock(&name).unwrap();
    s.steps.check(
        rlock.try_lock().await.unwrap().is_none(),
        "rust RLock try_lock on a Java spin hold must fail (same layout)",
    );
    let what = "java spin hold layout".to_string();
    s.hash_held(&name, "spin", &jfield, 1, what).await;
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let what = "messages published by java's spin unlock (none, §6.1)";
    s.java_publishes_nothing(&channel, &format!("unlock spin:{name}"), what)
        .await;
}

/// Non-reentrant kinds (4.7): neither side re-enters its own hold.
pub async fn reentry_refused(s: &mut Scene, kind: &str) {
    let (name, jobj) = s.java_holds(kind, "reentry").await;
    s.java
        .err(
            "t1",
            &format!("lock {jobj}"),
            "IllegalMonitorStateException",
        )
        .await;
    let jfield = s.java.owner_field("t1").await;
    let what = format!("{kind}: java hold after its refused re-entry");
    s.hash_held(&name, kind, &jfield, 1, what).await;
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
