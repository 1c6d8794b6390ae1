//! A JVM killed while holding: Rust waiters get the locks at their TTL.

use std::time::Instant;

use crate::scenarios::{pttl_rises, Scene};

/// A JVM holding locks (one watchdog-renewed, one with a lease) is killed
/// with SIGKILL: Rust waiters get each lock when its TTL runs out, not
/// before, and not much later.
pub async fn killed_holder(version: &str) {
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
