//! RSemaphore, RPermitExpirableSemaphore and RCountDownLatch across sides.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::common::java::Pending;
use crate::scenarios::locks::counter;
use crate::scenarios::{java_woken, woken, Scene, WAKE};
use fred::prelude::*;

pub async fn semaphore(version: &str) {
    let Some(mut s) = Scene::start(version, "semaphore-interop").await else {
        return;
    };
    // Permits read alike.
    let name = s.name("permits");
    let sem = s.fx.client.semaphore(&name).unwrap();
    let available = format!("available sem:{name}");
    let op = format!("trysetpermits sem:{name} 3");
    let (set, read) = (sem.try_set_permits(5), sem.available_permits());
    java_sets_up(&mut s, &op, set, read, 3).await;
    let p = sem.acquire(2).await.unwrap();
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 1, "rust took 2").await;
    s.java.ok("t1", &format!("addpermits sem:{name} 4")).await;
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 5, "java added 4").await;
    p.release().await.unwrap();
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 7, "rust gave 2 back").await;
    s.steps.eq(
        s.get(&name).await,
        Some("7".into()),
        "the semaphore key (decimal count)",
    );

    // Mutual exclusion with one permit.
    java_semaphore(&mut s, "sem", "counter", 1).await;
    counter(&mut s, "sem", 20).await;

    // Java releases, a Rust waiter wakes.
    let name = java_semaphore(&mut s, "sem", "wake-j2r", 0).await;
    let sem = s.fx.client.semaphore(&name).unwrap();
    let waiter = s.waiter(
        async move {
            sem.try_acquire_permits_for(1, Duration::from_secs(30))
                .await
                .unwrap()
        },
        |p| format!("try_acquire_permits_for returned {}", p.is_some()),
    );
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    let released = s.java.call("t1", &format!("release sem:{name}")).await;
    let (at, p) = waiter.returned().await;
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
    let what = "java semaphore waiter after rust release";
    java_woken(&s.steps, waiting, what, Instant::now()).await;
    s.steps.eq(
        sem.available_permits().await.unwrap(),
        0,
        "permits after java took the released one",
    );

    semaphore_objects(&mut s).await;
}

pub async fn permit_semaphore(version: &str) {
    let Some(mut s) = Scene::start(version, "pes-interop").await else {
        return;
    };
    let name = s.name("ids");
    let sem = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let available = format!("available pes:{name}");
    let op = format!("trysetpermits pes:{name} 2");
    let (set, read) = (sem.try_set_permits(5), sem.available_permits());
    java_sets_up(&mut s, &op, set, read, 2).await;
    let timeouts = format!("{{{name}}}:timeout");
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
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 1, "java's acquire").await;
    s.steps.eq(
        sem.try_release(&id).await.unwrap(),
        true,
        "rust releases java's permit by id",
    );
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 2, "rust released java's id").await;
    // A Rust permit, released by Java.
    let guard = sem.acquire(Some(Duration::from_secs(60))).await.unwrap();
    let rid = guard.id();
    guard.forget();
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 1, "rust's acquire").await;
    let op = format!("tryrelease pes:{name} {rid}");
    s.java_says("t1", &op, "true", "java releases rust's permit by id")
        .await;
    let rust = sem.available_permits().await.unwrap();
    both_read(&mut s, &available, rust, 2, "java released rust's id").await;

    // A Java permit with a short lease comes back to a Rust waiter when it expires.
    let name = java_semaphore(&mut s, "pes", "expiry", 1).await;
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

    java_semaphore(&mut s, "pes", "counter", 1).await;
    counter(&mut s, "pes", 20).await;

    // Wake-ups both ways.
    let name = java_semaphore(&mut s, "pes", "wake-j2r", 1).await;
    let jid = s.java.ok("t1", &format!("acquire pes:{name} -1")).await;
    let sem = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let waiter = s.waiter(async move { sem.acquire(None).await.unwrap() }, |_| {
        "permit acquired".into()
    });
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    let op = format!("release pes:{name} {jid}");
    let released = s.java.call("t1", &op).await.at;
    let what = "rust permit waiter after java release";
    let p = waiter.woken(&s.steps, what, released).await;

    let waiting = s.java.send("t2", &format!("acquire pes:{name} -1")).await;
    s.subscribed(&format!("redisson_sc:{{{name}}}"), 1).await;
    s.steps.eq(
        p.release().await.unwrap(),
        true,
        "rust release of its permit",
    );
    let what = "java permit waiter after rust release";
    java_woken(&s.steps, waiting, what, Instant::now()).await;

    renewed_permit(&mut s).await;
    permit_semaphore_objects(&mut s).await;
}

/// A Rust permit renewed by the watchdog (issue 36, redisson#3046): Java
/// counts it taken long past its first lease (Java's `availablePermits`
/// reclaims expired permits first), Java's `tryRelease(id)` releases it,
/// and the Rust guard then hears it lost.
async fn renewed_permit(s: &mut Scene) {
    const WATCHDOG: Duration = Duration::from_millis(900);
    let name = java_semaphore(s, "pes", "renewed", 1).await;
    let client =
        s.fx.client_with(|c| c.lock_watchdog_timeout(WATCHDOG))
            .await;
    let sem = client.permit_expirable_semaphore(&name).unwrap();
    let permit = sem.acquire_renewed().await.unwrap();
    let taken = Instant::now();
    let available = format!("available pes:{name}");
    // Past two first leases, by the renewals (no sleep stands in for one:
    // each is seen in Redis).
    let timeouts = format!("{{{name}}}:timeout");
    let mut scores = Vec::new();
    while taken.elapsed() < 2 * WATCHDOG {
        let members: Vec<(Vec<u8>, f64)> =
            s.fx.raw
                .zrange(&timeouts, 0, -1, None, false, None, true)
                .await
                .unwrap();
        if let Some((_, score)) = members.first() {
            if scores.last() != Some(score) {
                scores.push(*score);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.steps.check(
        scores.len() >= 4,
        format!("the renewed permit's expiry moved every third of its lease: {scores:?}"),
    );
    let rust = sem.available_permits().await.unwrap();
    both_read(s, &available, rust, 0, "two leases of a renewed permit").await;
    let lost = permit.lost();
    let op = format!("tryrelease pes:{name} {}", permit.id());
    s.java_says(
        "t1",
        &op,
        "true",
        "java releases the renewed rust permit by id",
    )
    .await;
    let reason = tokio::time::timeout(Duration::from_secs(5), lost).await;
    s.steps.eq(
        reason.ok(),
        Some(redisson_lock::LostReason::Gone),
        "the rust guard hears its permit released by java",
    );
    s.steps.eq(
        permit.release().await.unwrap(),
        false,
        "the rust release finds java released it",
    );
    let rust = sem.available_permits().await.unwrap();
    both_read(s, &available, rust, 1, "java released the renewed permit").await;
    client.shutdown().await;
}

pub async fn latch(version: &str) {
    let Some(mut s) = Scene::start(version, "latch-interop").await else {
        return;
    };
    let name = s.name("j2r");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    let op = format!("trysetcount latch:{name} 2");
    let (set, read) = (latch.try_set_count(5), latch.count());
    java_sets_up(&mut s, &op, set, read, 2).await;
    let l2 = latch.clone();
    let waiter = s.waiter(
        async move { l2.await_for(Duration::from_secs(30)).await.unwrap() },
        |r| format!("await_for returned {r:?}"),
    );
    s.subscribed(&latch_channel(&name), 1).await;
    s.java.ok("t1", &format!("countdown latch:{name}")).await;
    let (count, rust) = (format!("count latch:{name}"), latch.count().await);
    both_read(&mut s, &count, rust.unwrap(), 1, "java's count down").await;
    latch.count_down().await.unwrap();
    let released = Instant::now();
    s.note("count_down returned (count 0)");
    let (at, r) = waiter.returned().await;
    s.steps.check(r.is_some(), "rust awaiter opened");
    woken(
        &s.steps,
        "rust latch awaiter after rust's last count down",
        released,
        at,
    );
    let rust = latch.count().await.unwrap();
    both_read(&mut s, &count, rust, 0, "the last count down").await;

    let name = s.name("j-wait");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    s.steps.eq(
        latch.try_set_count(2).await.unwrap(),
        true,
        "rust try_set_count(2)",
    );
    let (count, rust) = (format!("count latch:{name}"), latch.count().await);
    both_read(&mut s, &count, rust.unwrap(), 2, "rust's try_set_count(2)").await;
    let waiting = java_awaits(&mut s, &name).await;
    latch.count_down().await.unwrap();
    s.java.ok("t1", &format!("countdown latch:{name}")).await;
    let what = "java latch awaiter after the last count down";
    java_opened(&s, waiting, what, Instant::now()).await;

    // Rust's count down wakes the Java awaiter.
    let name = s.name("r2j");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    latch.try_set_count(1).await.unwrap();
    let waiting = java_awaits(&mut s, &name).await;
    latch.count_down().await.unwrap();
    let what = "java latch awaiter after rust's count down";
    java_opened(&s, waiting, what, Instant::now()).await;

    latch_objects(&mut s).await;
}

/// Java's `pttl` reply (`remainTimeToLive`) is within a minute and one
/// second below it: an expiry of 60 s set just now.
fn about_a_minute(ms: i64) -> bool {
    (59_000..=60_000).contains(&ms)
}

/// RSemaphore as an object, both ways: `isExists`, `expire`,
/// `remainTimeToLive`, `clearExpire` and `delete` of one side seen by the
/// other, with the same effect on the key (docs/PROTOCOL.md §7.5).
async fn semaphore_objects(s: &mut Scene) {
    let name = s.name("object");
    let sem = s.fx.client.semaphore(&name).unwrap();
    let obj = format!("sem:{name}");
    java_on(s, &obj, "exists", "false", "java isExists before").await;
    java_on(s, &obj, "trysetpermits 3", "true", "java trySetPermits").await;
    s.steps.eq(sem.exists().await.unwrap(), true, "rust exists");
    s.steps.eq(
        sem.expire(Duration::from_secs(60)).await.unwrap(),
        true,
        "rust expire(60 s)",
    );
    let ttl = s.java_int("t1", &format!("remainttl {obj}")).await;
    s.steps.check(
        about_a_minute(ttl),
        format!("java remainTimeToLive {ttl} ms after rust's expire"),
    );
    s.steps
        .eq(sem.clear_expire().await.unwrap(), true, "rust clear_expire");
    s.steps
        .eq(s.pttl(&name).await, -1, "PTTL after rust's clear_expire");
    java_on(s, &obj, "expire 60000", "true", "java expire(60 s)").await;
    let ttl = sem.remain_time_to_live().await.unwrap();
    let in_a_minute = matches!(ttl, redisson_lock::Ttl::Expires(d)
        if d <= Duration::from_secs(60) && d > Duration::from_secs(59));
    s.steps.check(
        in_a_minute,
        format!("rust remain_time_to_live {ttl:?} after java's expire"),
    );
    java_on(s, &obj, "clearexpire", "true", "java clearExpire").await;
    s.steps.eq(
        sem.remain_time_to_live().await.unwrap(),
        redisson_lock::Ttl::NoExpiry,
        "rust remain_time_to_live after java's clearExpire",
    );
    java_on(s, &obj, "delete", "true", "java delete").await;
    s.steps.eq(
        sem.exists().await.unwrap(),
        false,
        "rust exists after java's delete",
    );
    s.steps
        .eq(sem.delete().await.unwrap(), false, "rust delete of nothing");
    s.steps.eq(
        sem.try_set_permits(2).await.unwrap(),
        true,
        "rust try_set_permits",
    );
    s.steps.eq(sem.delete().await.unwrap(), true, "rust delete");
    java_on(
        s,
        &obj,
        "exists",
        "false",
        "java isExists after rust's delete",
    )
    .await;
    java_on(
        s,
        &obj,
        "remainttl",
        "-2",
        "java remainTimeToLive of nothing",
    )
    .await;
}

/// RPermitExpirableSemaphore as an object, both ways: `delete`, `expire`
/// and `clearExpire` act on `N` and `{N}:timeout` alike on both sides.
async fn permit_semaphore_objects(s: &mut Scene) {
    let name = s.name("object");
    let pes = s.fx.client.permit_expirable_semaphore(&name).unwrap();
    let timeouts = pes.timeouts_key().to_string();
    let obj = format!("pes:{name}");
    java_on(s, &obj, "trysetpermits 3", "true", "java trySetPermits").await;
    s.java.ok("t1", &format!("acquire {obj} -1")).await;
    pes.acquire(None).await.unwrap().forget();
    java_on(s, &obj, "exists", "true", "java isExists").await;
    s.steps.eq(pes.exists().await.unwrap(), true, "rust exists");
    java_on(s, &obj, "expire 60000", "true", "java expire(60 s)").await;
    for key in [&name, &timeouts] {
        let ttl = s.pttl(key).await;
        s.steps.check(
            about_a_minute(ttl),
            format!("PTTL {key} = {ttl} after java's expire"),
        );
    }
    s.steps
        .eq(pes.clear_expire().await.unwrap(), true, "rust clear_expire");
    s.steps.eq(
        (s.pttl(&name).await, s.pttl(&timeouts).await),
        (-1, -1),
        "both keys persist after rust's clear_expire",
    );
    s.steps.eq(
        pes.expire(Duration::from_secs(60)).await.unwrap(),
        true,
        "rust expire(60 s)",
    );
    let ttl = s.pttl(&timeouts).await;
    s.steps.check(
        about_a_minute(ttl),
        format!("PTTL {timeouts} = {ttl} after rust's expire"),
    );
    let ttl = s.java_int("t1", &format!("remainttl {obj}")).await;
    s.steps.check(
        about_a_minute(ttl),
        format!("java remainTimeToLive {ttl} after rust's expire"),
    );
    java_on(s, &obj, "clearexpire", "true", "java clearExpire").await;
    s.steps.eq(
        (s.pttl(&name).await, s.pttl(&timeouts).await),
        (-1, -1),
        "both keys persist after java's clearExpire",
    );
    s.steps.eq(pes.delete().await.unwrap(), true, "rust delete");
    s.steps.eq(
        (s.pttl(&name).await, s.pttl(&timeouts).await),
        (-2, -2),
        "both keys gone after rust's delete",
    );
    java_on(
        s,
        &obj,
        "exists",
        "false",
        "java isExists after rust's delete",
    )
    .await;
    java_on(s, &obj, "trysetpermits 1", "true", "java trySetPermits").await;
    pes.acquire(None).await.unwrap().forget();
    java_on(s, &obj, "delete", "true", "java delete").await;
    s.steps.eq(
        (s.pttl(&name).await, s.pttl(&timeouts).await),
        (-2, -2),
        "both keys gone after java's delete",
    );
    s.steps.eq(
        pes.exists().await.unwrap(),
        false,
        "rust exists after java's delete",
    );
}

/// RCountDownLatch as an object: `isExists` alike; Java's `delete`
/// publishes what ends a Rust await with `Deleted`, and Java sees Rust's.
async fn latch_objects(s: &mut Scene) {
    let name = s.name("object");
    let latch = s.fx.client.count_down_latch(&name).unwrap();
    let obj = format!("latch:{name}");
    s.steps
        .eq(latch.exists().await.unwrap(), false, "rust exists before");
    java_on(s, &obj, "trysetcount 2", "true", "java trySetCount").await;
    s.steps
        .eq(latch.exists().await.unwrap(), true, "rust exists");
    let l2 = latch.clone();
    let waiter = s.waiter(
        async move { l2.await_for(Duration::from_secs(30)).await.unwrap() },
        |r| format!("await_for returned {r:?}"),
    );
    s.subscribed(&latch_channel(&name), 1).await;
    java_on(s, &obj, "delete", "true", "java delete").await;
    let (_, opened) = waiter.returned().await;
    s.steps.eq(
        opened,
        Some(redisson_lock::LatchOpened::Deleted),
        "rust awaiter after java's delete",
    );
    s.steps.eq(
        latch.try_set_count(1).await.unwrap(),
        true,
        "rust try_set_count",
    );
    java_on(s, &obj, "exists", "true", "java isExists").await;
    s.steps
        .eq(latch.delete().await.unwrap(), true, "rust delete");
    java_on(
        s,
        &obj,
        "exists",
        "false",
        "java isExists after rust's delete",
    )
    .await;
}

/// Java's `op` (with `args`, if any, after the object) on the object
/// `obj`, thread t1, replies `ok want`.
async fn java_on(s: &mut Scene, obj: &str, op: &str, want: &str, what: &str) {
    let (op, args) = op.split_once(' ').unwrap_or((op, ""));
    let line = format!("{op} {obj} {args}");
    s.java_says("t1", line.trim_end(), want, what).await;
}

/// A fresh semaphore of `kind` (`sem`, `pes`) named `s.name(what)`, which
/// Java sets up with `permits`: its name.
async fn java_semaphore(s: &mut Scene, kind: &str, what: &str, permits: u32) -> String {
    let name = s.name(what);
    let op = format!("trysetpermits {kind}:{name} {permits}");
    s.java.ok("t1", &op).await;
    name
}

/// Both sides read `value` after `after`: Rust's read is `rust`, Java's
/// is `op` (`available sem:N`, `count latch:N`).
async fn both_read(s: &mut Scene, op: &str, rust: i64, value: i64, after: &str) {
    s.steps
        .eq(rust, value, format!("rust reads ({op}) after {after}"));
    let java = s.java.ok("t1", op).await;
    s.steps
        .eq(java, value.to_string(), format!("java {op} after {after}"));
}

/// Java sets an object up first with `op` (`trysetpermits sem:N 3`, …:
/// it replies `true`); then Rust's own set-up (`rust_sets`) is refused and
/// Rust reads Java's `value` (`rust_reads`).
async fn java_sets_up(
    s: &mut Scene,
    op: &str,
    rust_sets: impl Future<Output = redisson_lock::Result<bool>>,
    rust_reads: impl Future<Output = redisson_lock::Result<i64>>,
    value: i64,
) {
    let set = s.java.ok("t1", op).await;
    s.steps.eq(set.as_str(), "true", format!("java {op}"));
    let set = rust_sets.await.unwrap();
    s.steps
        .eq(set, false, format!("rust's set-up after java {op}"));
    let read = rust_reads.await.unwrap();
    s.steps
        .eq(read, value, format!("rust reads what java {op} set"));
}

/// The channel a latch's awaiters listen on.
fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A Java thread (t2) awaits the latch `name` for 30 s at most, subscribed.
async fn java_awaits(s: &mut Scene, name: &str) -> Pending {
    let op = format!("await latch:{name} 30000");
    let waiting = s.java.send("t2", &op).await;
    s.subscribed(&latch_channel(name), 1).await;
    waiting
}

/// The Java awaiter `waiting` sees the latch open within [`WAKE`] of `opened`.
async fn java_opened(s: &Scene, waiting: Pending, what: &str, opened: Instant) {
    let reply = java_woken(&s.steps, waiting, what, opened).await;
    let awaited = reply.value.as_str();
    s.steps
        .eq(awaited, "true", format!("{what}: java's await(30 s)"));
}
