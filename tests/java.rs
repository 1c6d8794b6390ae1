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
//! locks, RSemaphore, RPermitExpirableSemaphore and RCountDownLatch (their
//! object methods too: exists, delete, expiry). The core
//! scenarios run again on a Redis Cluster (classic and sharded pub/sub) and
//! under Sentinel. Other tests check docs/PROTOCOL.md §11's statements about
//! versions where they can be observed. `redisson_method_parity` checks
//! docs/REDISSON.md's method table against Redisson 4.7's interfaces.
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
//!
//! This file declares one test per scenario and version; the scenarios are
//! in `tests/java/`: the harness ([`scenarios::Scene`]) in `mod.rs`, the
//! exclusive lock kinds in `locks.rs` and `lock_state.rs`, then `fenced.rs`,
//! `read_write.rs`, `killed_holder.rs`, the semaphores and latch in
//! `sync.rs`, §11 in `versions.rs`, cluster and Sentinel in `topologies.rs`.
mod common;

#[path = "java/mod.rs"]
mod scenarios;
#[path = "java/simulated.rs"]
mod simulated;

use std::time::Duration;

use common::java::{self, Steps};
use scenarios::fair_nudge::fair_nudge;
use scenarios::fenced::fenced;
use scenarios::killed_holder::killed_holder;
use scenarios::locks::{fair, non_reentrant, non_reentrant_fair, rlock, spin};
use scenarios::read_write::read_write;
use scenarios::sync::{latch, permit_semaphore, semaphore};
use scenarios::topologies::{cluster, sentinel};
use scenarios::versions::versions_11;

/// No scenario may take longer than this (a hang fails with both sides' steps).
const SCENARIO_LIMIT: Duration = Duration::from_secs(150);

/// One test per scenario and Redisson version: `rlock::redisson_4_7_0`.
macro_rules! per_version {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            versions!(
                $scenario: redisson_4_7_0 = "4.7.0",
                redisson_3_45_0 = "3.45.0",
                redisson_3_23_0 = "3.23.0",
                redisson_3_17_0 = "3.17.0",
            );
        }
    )*};
}

/// The tests of one scenario, one per version (see [`per_version`]).
macro_rules! versions {
    ($scenario:ident: $($test:ident = $version:literal),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            super::bounded(super::$scenario($version)).await
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
    fair_nudge,
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

/// Every public method of Redisson 4.7's lock and synchronizer interfaces
/// has a row in docs/REDISSON.md's method parity table (tests/java/parity.rs).
#[test]
fn redisson_method_parity() {
    scenarios::parity::check();
}

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
