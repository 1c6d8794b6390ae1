//! Every lock kind on a real Redis Cluster (3 masters, 3 replicas, started by
//! the harness; `REDIS_CLUSTER_URL` for your own): names in many slots,
//! waking by classic and sharded publish, renewal and latch batches across
//! slots, no leaked subscriptions, and failover (a master killed, a master
//! demoted) with waiters waiting and holders holding.
//!
//! One cluster for the whole file, so the scenarios run in sequence inside
//! one test; each names itself when it fails.
use crate::common;

#[path = "cluster/failover.rs"]
mod failover;
#[path = "cluster/slots.rs"]
mod slots;

use std::time::{Duration, Instant};

use crate::common::topology::{Cluster, Standoff};
use crate::common::unique;
use failover::{
    graceful_failover, lock_lost_in_failover, master_killed, replica_sync_per_node,
    slot_migrated_while_held,
};
use slots::{
    auto_mode, both_mode_bridges_classic_and_sharded, every_kind_excludes_across_slots,
    keyspace_notifications_on_every_master, multi_lock_across_slots,
    renewals_and_latches_across_slots, storm_leaves_no_subscription, tracking_on_every_master,
    wakes_by_publish_in_many_slots,
};

/// Names whose slots differ (and so, mostly, their masters).
fn names(prefix: &str, n: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut slots = std::collections::HashSet::new();
    while names.len() < n {
        let name = unique(prefix);
        if slots.insert(slot_of(&format!("{{{name}}}"))) {
            names.push(name);
        }
    }
    names
}

/// A lock held by a client (watchdog `lease`) and awaited by another.
async fn standoff(cluster: &Cluster, prefix: &str, lease: Duration) -> Standoff {
    Standoff::start(
        cluster
            .client_with(|c| c.lock_watchdog_timeout(lease))
            .await,
        cluster.client().await,
        unique(prefix),
        // The waiter's client, and the holder's (its hold's watch).
        |channel| async move { cluster.subscriptions(&channel).await == 2 },
    )
    .await
}

fn slot_of(key: &str) -> u16 {
    fred::util::redis_keyslot(key.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = Cluster::start().await;
    // Redis 7+ and Valkey have sharded pub/sub; a Redis 6.2 cluster has not.
    let sharded = common::supports_sharded_pubsub(&cluster.raw().await).await;
    eprintln!("sharded pub/sub: {sharded}");
    let started = Instant::now();
    // Each scenario boxed: `block_on` keeps the test's future on the test
    // thread's stack, and unboxed, debug builds made it large enough to
    // overflow that stack on a busy machine.
    macro_rules! scenario {
        ($name:ident) => {
            common::topology::timed(stringify!($name), Box::pin($name(&cluster))).await
        };
    }
    eprintln!("-- auto_mode (sharded: {sharded})");
    Box::pin(auto_mode(&cluster, sharded)).await;
    scenario!(every_kind_excludes_across_slots);
    scenario!(wakes_by_publish_in_many_slots);
    if sharded {
        scenario!(both_mode_bridges_classic_and_sharded);
    }
    scenario!(renewals_and_latches_across_slots);
    scenario!(multi_lock_across_slots);
    scenario!(storm_leaves_no_subscription);
    scenario!(tracking_on_every_master);
    eprintln!("-- keyspace_notifications_on_every_master");
    common::topology::timed(
        "keyspace_notifications_on_every_master",
        Box::pin(keyspace_notifications_on_every_master(&cluster, sharded)),
    )
    .await;
    scenario!(replica_sync_per_node);
    if cluster.private() {
        scenario!(slot_migrated_while_held);
    }
    if cluster.private() {
        scenario!(graceful_failover);
        scenario!(master_killed);
        scenario!(lock_lost_in_failover);
    }
    eprintln!("cluster scenarios took {:?}", started.elapsed());
}
