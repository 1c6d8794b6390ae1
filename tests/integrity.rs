//! Hold integrity (issue 27, docs/PROTOCOL.md §2.9): while a guard says it
//! holds a lock nobody else does, and when that stops being true the guard
//! is told, fast. Each test names the defect it pins down; each failed
//! before the registry kept holds by tenure.
mod common;

#[path = "integrity/hearing.rs"]
mod hearing;
#[path = "integrity/latency.rs"]
mod latency;
#[path = "integrity/leases.rs"]
mod leases;
#[path = "integrity/owners.rs"]
mod owners;
#[path = "integrity/reads.rs"]
mod reads;

use std::time::Duration;

use redisson_lock::{AnyKind, Client, Lock, LockGuard, LostReason};

/// Every kind a guard can hold, erased, on `client` (name suffixed with the
/// kind so that they do not collide).
pub fn every_kind(client: &Client, name: &str) -> Vec<(&'static str, Lock<AnyKind>)> {
    use common::make::*;
    vec![
        ("lock", rlock(client, &format!("{name}-lock")).erase()),
        ("fair", fair(client, &format!("{name}-fair")).erase()),
        ("read", read(client, &format!("{name}-read")).erase()),
        ("write", write(client, &format!("{name}-write")).erase()),
        ("spin", spin(client, &format!("{name}-spin")).erase()),
        ("fenced", fenced(client, &format!("{name}-fenced")).erase()),
    ]
}

/// How long `guard.lost()` took to resolve, at most `within`; and why.
pub async fn lost_after<K: redisson_lock::Kind>(
    guard: &LockGuard<K>,
    within: Duration,
    what: &str,
) -> (Duration, LostReason) {
    let start = tokio::time::Instant::now();
    let reason = tokio::time::timeout(within, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("{what}: lost() did not fire within {within:?}"));
    (start.elapsed(), reason)
}
