//! The exclusive lock kinds' state read across sides: holds, counts and TTLs
//! both ways, refused foreign unlocks, forced unlocks waking the other side.

use std::time::{Duration, Instant};

use crate::scenarios::{
    check_ttl, expected_hash, java_woken, not_held, owner, rust_lock, ttl_ms, Scene, LEASE_MS, WAKE,
};

/// Java holds twice: Redis and Rust read exactly Java's owner field, count
/// and TTL.
pub async fn state_java_holds(s: &mut Scene, kind: &str) {
    let (name, jobj) = s.java_holds(kind, "state-java").await;
    let jfield = s.java.owner_field("t1").await;
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
pub async fn state_rust_holds(s: &mut Scene, kind: &str) {
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
pub async fn foreign_unlock(s: &mut Scene, kind: &str) {
    let (name, jobj) = s.java_holds(kind, "foreign").await;
    let jfield = s.java.owner_field("t1").await;
    let lock = rust_lock(&s.fx.client, kind, &name).with_owner(owner(4));
    let what = format!("{kind}: rust unlock of a Java hold");
    not_held(&s.steps, lock.unlock().await, &what);
    let what = format!("{kind}: java's hold after a refused rust unlock");
    s.hash_held(&name, kind, &jfield, 1, what).await;
    s.java.ok("t1", &format!("unlock {jobj}")).await;

    let guard = lock.lock().await.unwrap();
    s.java
        .err(
            "t1",
            &format!("unlock {jobj}"),
            "IllegalMonitorStateException",
        )
        .await;
    let field = lock.owner_field(owner(4));
    let what = format!("{kind}: rust's hold after a refused java unlock");
    s.hash_held(&name, kind, &field, 1, what).await;
    guard.unlock().await.unwrap();
}

/// A forced unlock on one side wakes a waiter on the other.
pub async fn force_unlock_wakes(s: &mut Scene, kind: &str) {
    // Java holds, Rust waits, Java force-unlocks from another thread.
    let (name, jobj) = s.java_holds(kind, "force-j").await;
    let (_, waiter) = s.rust_waits(kind, &name, owner(5)).await;
    let forced = s.java.call("t2", &format!("forceunlock {jobj}")).await;
    s.steps.eq(
        forced.value.as_str(),
        "true",
        format!("{kind}: java forceUnlock of its own hold"),
    );
    let what = format!("{kind}: rust waiter after java forceUnlock");
    let guard = waiter.woken(&s.steps, &what, forced.at).await;
    guard.unwrap().unlock().await.unwrap();
    let _ = s.java.call("t1", &format!("unlock {jobj}")).await; // its hold is gone: refused

    // Rust holds, Java waits, Rust force-unlocks.
    let name = s.name("force-r");
    let jobj = format!("{kind}:{name}");
    let lock = rust_lock(&s.fx.client, kind, &name);
    let guard = lock.lock().await.unwrap();
    let (jfield, waiting) = s.java_waits(kind, &name).await;
    s.steps.eq(
        lock.force_unlock().await.unwrap(),
        true,
        format!("{kind}: rust force_unlock"),
    );
    let what = format!("{kind}: java waiter after rust force_unlock");
    java_woken(&s.steps, waiting, &what, Instant::now()).await;
    let what = format!("{kind}: unlock of a force-unlocked rust guard");
    not_held(&s.steps, guard.unlock().await, &what);
    let what = format!("{kind}: java holds after rust's force unlock");
    s.hash_held(&name, kind, &jfield, 1, what).await;
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
