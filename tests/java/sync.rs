//! RSemaphore, RPermitExpirableSemaphore and RCountDownLatch across sides.

use std::time::{Duration, Instant};

use crate::common::java::Status;
use crate::scenarios::locks::counter;
use crate::scenarios::{woken, Scene, WAKE};
use fred::prelude::*;

pub async fn semaphore(version: &str) {
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

pub async fn permit_semaphore(version: &str) {
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

pub async fn latch(version: &str) {
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
