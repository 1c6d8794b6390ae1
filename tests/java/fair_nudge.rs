//! A Java fair waiter queued behind a holder that died (issue 29, item 5;
//! docs/PROTOCOL.md §4.4, §11.2): Redisson 3.12–3.23 can park such a head
//! with no timeout once the dead holder's TTL runs out; a Rust fair attempt
//! that finds the lock free with that head in line wakes it on its channel.

use std::time::{Duration, Instant};

use crate::scenarios::{java_woken, until, Scene};
use fred::prelude::*;

/// How long the head is given to take the free lock by itself.
const BY_ITSELF: Duration = Duration::from_secs(3);

pub async fn fair_nudge(version: &str) {
    let Some(mut s) = Scene::start(version, "fair-nudge").await else {
        return;
    };
    let name = s.name("dead-holder");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    // A holder that died: only its hash, with 2 s to live.
    let _: () = s.fx.raw.hset(&name, ("dead:1", "1")).await.unwrap();
    let _: bool = s.fx.raw.pexpire(&name, 2_000, None).await.unwrap();
    let jfield = s.java.owner_field("t2").await;
    let mut waiting = s.java.send("t2", &format!("lock fair:{name}")).await;
    until(&s.steps, "java's waiter queued", || async {
        let queued: Vec<String> = s.fx.raw.lrange(&queue, 0, -1).await.unwrap();
        queued == [jfield.clone()]
    })
    .await;
    // The dead holder's key expires (or java's head has taken the lock
    // already, which re-creates it).
    let start = Instant::now();
    while !waiting.is_done() && s.fx.raw.exists::<bool, _>(&name).await.unwrap() {
        if start.elapsed() > Duration::from_secs(10) {
            s.steps
                .fail("the dead holder's key did not expire within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let expired = Instant::now();
    while !waiting.is_done() && expired.elapsed() < BY_ITSELF {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let by_itself = waiting.is_done();
    s.note(format!(
        "java's head took the free lock by itself: {by_itself} (within {BY_ITSELF:?})"
    ));
    if matches!(version, "3.17.0" | "3.23.0") {
        s.steps.check(
            !by_itself,
            "Redisson 3.12-3.23 parks the head with no timeout: it should still wait",
        );
    }
    if !by_itself {
        // A Rust fair attempt (trying once) finds the lock free with Java's
        // waiter at the head: not its turn, but it wakes the head.
        let nudged = Instant::now();
        let fair = s.fx.client.fair_lock(&name).unwrap();
        let mine = fair.try_lock().await.unwrap();
        s.steps
            .check(mine.is_none(), "it is java's turn, not rust's");
        java_woken(
            &s.steps,
            waiting,
            "java's head after a rust attempt",
            nudged,
        )
        .await;
    } else {
        waiting.ok().await;
    }
    s.java.ok("t2", &format!("unlock fair:{name}")).await;
}
