//! Replicas and topology changes: replica sync per node, a slot migrated
//! while held, graceful failover, a master killed, a lock lost in failover.

use std::time::{Duration, Instant};

use super::{names, slot_of, standoff};
use crate::common::topology::{until, Cluster};
use crate::common::unique;
use fred::prelude::*;
use redisson_lock::Error;

/// With `replica_sync`, every lock write waits for the replica of the
/// master that took it: on each master's replica the lock is there as soon
/// as `lock()` returns.
pub async fn replica_sync_per_node(cluster: &Cluster) {
    if !cluster.private() {
        return;
    }
    let client = cluster
        .client_with(|c| c.replica_sync(Duration::from_secs(2)))
        .await;
    for name in names("synced", 6) {
        let guard = client.lock(&name).unwrap().lock().await.unwrap();
        let master = cluster.master_of(slot_of(&format!("{{{name}}}"))).await;
        let replica = cluster.replica_of(master).await;
        let raw = cluster.nodes[replica].raw().await;
        // A replica answers reads of its master's slots after READONLY.
        let _: () = raw
            .custom(fred::cmd!("READONLY"), Vec::<String>::new())
            .await
            .unwrap();
        let fields: std::collections::HashMap<String, String> = raw.hgetall(&name).await.unwrap();
        assert_eq!(
            fields.get(guard.field()).map(String::as_str),
            Some("1"),
            "{name} on its replica"
        );
        guard.unlock().await.unwrap();
        let exists: i64 = raw.exists(&name).await.unwrap();
        assert_eq!(exists, 0, "the unlock reached the replica first");
        let _ = raw.quit().await;
    }
    client.shutdown().await;
}

/// Move the slot of a held and awaited lock to another master by hand
/// (`CLUSTER SETSLOT … IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT … NODE`),
/// with renewals running: the client follows ASK and MOVED, renews on the
/// new node, the waiter subscribes again there and is woken by the unlock.
pub async fn slot_migrated_while_held(cluster: &Cluster) {
    let standoff = standoff(cluster, "migrated", Duration::from_millis(1500)).await;
    let name = standoff.name.clone();
    let slot = slot_of(&format!("{{{name}}}"));
    let from = cluster.master_of(slot).await;
    let to = loop {
        let other = cluster.master_of(slot_of(&unique("elsewhere"))).await;
        if other != from {
            break other;
        }
    };
    let src = cluster.nodes[from].raw().await;
    let dst = cluster.nodes[to].raw().await;
    let id = |raw: &fred::clients::Client| {
        let raw = raw.clone();
        async move {
            raw.custom::<String, _>(fred::cmd!("CLUSTER"), vec!["MYID"])
                .await
                .unwrap()
        }
    };
    let (src_id, dst_id) = (id(&src).await, id(&dst).await);
    let slot_text = slot.to_string();
    let setslot = |raw: fred::clients::Client, how: &'static str, node: String| {
        let slot_text = slot_text.clone();
        async move {
            let _: Value = raw
                .custom(
                    fred::cmd!("CLUSTER"),
                    vec!["SETSLOT", &slot_text, how, &node],
                )
                .await
                .unwrap();
        }
    };
    setslot(dst.clone(), "IMPORTING", src_id.clone()).await;
    setslot(src.clone(), "MIGRATING", dst_id.clone()).await;
    // Renewals now meet ASK for keys already moved; move them all.
    let keys: Vec<String> = src
        .custom(
            fred::cmd!("CLUSTER"),
            vec!["GETKEYSINSLOT", &slot_text, "100"],
        )
        .await
        .unwrap();
    assert!(keys.contains(&name), "the lock is in its slot: {keys:?}");
    let mut migrate = vec![
        "127.0.0.1".to_string(),
        cluster.nodes[to].port.to_string(),
        String::new(),
        "0".into(),
        "5000".into(),
        "KEYS".into(),
    ];
    migrate.extend(keys);
    let _: Value = src.custom(fred::cmd!("MIGRATE"), migrate).await.unwrap();
    for node in cluster.nodes.iter().filter(|n| n.is_running()) {
        let raw = node.raw().await;
        let role: Value = raw
            .custom(fred::cmd!("ROLE"), Vec::<String>::new())
            .await
            .unwrap();
        let is_master = matches!(&role, Value::Array(v) if v.first().and_then(Value::as_str).as_deref() == Some("master"));
        if is_master {
            setslot(raw.clone(), "NODE", dst_id.clone()).await;
        }
        let _ = raw.quit().await;
    }
    until(
        "the slot served by its new master",
        Duration::from_secs(10),
        || async { (cluster.master_of(slot).await == to).then_some(()) },
    )
    .await;
    // Two renewal periods on the new node.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        !standoff.guard.is_lost(),
        "the holder kept its lock through the migration"
    );
    let pttl: i64 = dst.pttl(&name).await.unwrap();
    assert!(pttl > 0, "renewed on the new node: pttl {pttl}");
    until(
        "the waiter (and the holder's watch) subscribed on the new node",
        Duration::from_secs(10),
        || async { (cluster.subscriptions(&standoff.channel).await == 2).then_some(()) },
    )
    .await;
    let _ = src.quit().await;
    let _ = dst.quit().await;
    standoff.settle("slot migrated").await;
}

/// `CLUSTER FAILOVER` on a replica: its master is demoted with its data in
/// sync. The holder keeps its lock (renewed on the new master), the waiter
/// re-subscribes there and is woken by the unlock.
pub async fn graceful_failover(cluster: &Cluster) {
    let standoff = standoff(cluster, "graceful", Duration::from_secs(3)).await;
    let slot = slot_of(&format!("{{{}}}", standoff.name));
    let master = cluster.master_of(slot).await;
    let replica = cluster.replica_of(master).await;
    let node = cluster.nodes[replica].raw().await;
    let _: Value = node
        .custom(fred::cmd!("CLUSTER"), vec!["FAILOVER"])
        .await
        .unwrap();
    until("the replica took over", Duration::from_secs(20), || async {
        (cluster.master_of(slot).await == replica).then_some(())
    })
    .await;
    let _ = node.quit().await;
    cluster.wait_ok().await;
    // Two renewal periods on the new master.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !standoff.guard.is_lost(),
        "a graceful failover keeps the lock"
    );
    until(
        "the waiter (and the holder's watch) subscribed on the new master",
        Duration::from_secs(10),
        || async { (cluster.subscriptions(&standoff.channel).await == 2).then_some(()) },
    )
    .await;
    standoff.settle("graceful failover").await;
}

/// SIGKILL a master while a lock on it is held and waited for. Nobody
/// hangs: the replica takes over; the holder either still holds (the lock
/// was replicated in time) and its renewals go to the new master, or learns
/// it lost the lock within its lease; the waiter gets the lock once the
/// holder lets go, never while the holder believes it holds.
pub async fn master_killed(cluster: &Cluster) {
    // Longer than the failover takes (about 3 s here), so that renewals
    // can reach the new master in time.
    let lease = Duration::from_secs(9);
    let standoff = standoff(cluster, "killed", lease).await;
    let slot = slot_of(&format!("{{{}}}", standoff.name));
    let master = cluster.master_of(slot).await;
    let replica = cluster.replica_of(master).await;
    let killed_at = Instant::now();
    kill_node(cluster, master);
    until("the replica took over", Duration::from_secs(30), || async {
        (cluster.master_of(slot).await == replica).then_some(())
    })
    .await;
    eprintln!(
        "   master killed: replica took over after {:?}",
        killed_at.elapsed()
    );
    // Within a lease the holder knows where it stands.
    tokio::time::sleep(lease).await;
    standoff.settle("master killed").await;
    assert!(
        killed_at.elapsed() < Duration::from_secs(45),
        "bounded: {:?}",
        killed_at.elapsed()
    );
}

/// The failover loses the lock: its master dies before its replica got the
/// write (the replica's link is cut and the replica frozen meanwhile, as a
/// slow link would leave it).
/// The new master never saw the lock; the holder learns it within one
/// renewal period of the new master serving, and a waiter takes the lock.
pub async fn lock_lost_in_failover(cluster: &Cluster) {
    let lease = Duration::from_secs(6);
    let holder = cluster
        .client_with(|c| c.lock_watchdog_timeout(lease))
        .await;
    let waiting = cluster.client().await;
    // A name on a master that has a replica: the one that master_killed
    // promoted has none (its old master stays dead).
    let (name, slot, master, replica) = until(
        "a name on a master with a replica",
        Duration::from_secs(30),
        || async {
            let name = unique("lost");
            let slot = slot_of(&format!("{{{name}}}"));
            let master = cluster.master_of(slot).await;
            let replica = cluster.attached_replica(master).await?;
            Some((name, slot, master, replica))
        },
    )
    .await;
    // Freeze the replica and cut its link: the master then has no replica
    // to send the lock to.
    cluster.nodes[replica].pause();
    let node = cluster.nodes[master].raw().await;
    let _: Value = node
        .custom(fred::cmd!("CLIENT"), vec!["KILL", "TYPE", "replica"])
        .await
        .unwrap();
    let _ = node.quit().await;
    let guard = holder.lock(&name).unwrap().lock().await.unwrap();
    kill_node(cluster, master);
    cluster.nodes[replica].resume();
    until("the replica took over", Duration::from_secs(30), || async {
        (cluster.master_of(slot).await == replica).then_some(())
    })
    .await;
    let serving = Instant::now();
    let lost = tokio::time::timeout(lease, guard.lost()).await;
    eprintln!(
        "   lock lost in failover: holder told {:?} after the new master served",
        serving.elapsed()
    );
    assert!(
        lost.is_ok(),
        "the holder learns within a lease that it lost the lock"
    );
    let got = waiting
        .lock(&name)
        .unwrap()
        .try_lock_for(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the lock is free on the new master");
    assert!(
        matches!(guard.unlock().await, Err(Error::NotHeld { .. })),
        "the old holder holds nothing"
    );
    got.unlock().await.unwrap();
    holder.shutdown().await;
    waiting.shutdown().await;
}

/// SIGKILL node `i`: a crash, no goodbye.
pub fn kill_node(cluster: &Cluster, i: usize) {
    cluster.nodes[i].kill();
}
