//! Hold integrity (issue 27, docs/PROTOCOL.md §2.9): while a guard says it
//! holds a lock nobody else does, and when that stops being true the guard
//! is told, fast. Each test names the defect it pins down; each failed
//! before the registry kept holds by tenure.
mod common;

#[path = "integrity/force.rs"]
mod force;
#[path = "integrity/hearing.rs"]
mod hearing;
#[path = "integrity/latency.rs"]
mod latency;
#[path = "integrity/leases.rs"]
mod leases;
#[path = "integrity/ordering.rs"]
mod ordering;
#[path = "integrity/owners.rs"]
mod owners;
#[path = "integrity/reads.rs"]
mod reads;
#[path = "integrity/tracking.rs"]
mod tracking;

use std::time::Duration;

use redisson_lock::{AnyKind, Client, Lock, LockGuard, LostReason};

/// Every kind a guard can hold, erased, on `client` (name suffixed with the
/// kind so that they do not collide).
pub fn every_kind(client: &Client, name: &str) -> Vec<(&'static str, Lock<AnyKind>)> {
    use common::make::*;
    vec![
        ("lock", rlock(client, &format!("{name}-lock")).into_erased()),
        ("fair", fair(client, &format!("{name}-fair")).into_erased()),
        ("read", read(client, &format!("{name}-read")).into_erased()),
        (
            "write",
            write(client, &format!("{name}-write")).into_erased(),
        ),
        ("spin", spin(client, &format!("{name}-spin")).into_erased()),
        (
            "fenced",
            fenced(client, &format!("{name}-fenced")).into_erased(),
        ),
    ]
}

/// How long until `guard` was told it lost its hold (at most `within`), and
/// why, without awaiting `lost()` (whose channel watcher would check the
/// hold on its own): what the client heard by itself.
pub async fn told_after<K: redisson_lock::Kind>(
    guard: &LockGuard<K>,
    within: Duration,
    what: &str,
) -> (Duration, LostReason) {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(reason) = guard.lost_reason() {
            return (start.elapsed(), reason);
        }
        assert!(
            start.elapsed() < within,
            "{what}: not told within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
