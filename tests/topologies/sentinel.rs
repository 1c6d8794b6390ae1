//! Locks through Redis Sentinel (1 master, 1 replica, 3 sentinels started by
//! the harness; `REDIS_SENTINEL_URL` for your own): the client finds the
//! master through the sentinels, follows it through a failover (ordered by
//! `SENTINEL FAILOVER`, or forced by killing the master), and locks taken
//! afterwards behave normally. One set-up for the file, scenarios in order.
use crate::common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::topology::{until, wait_replicas, Sentinels, Standoff, SERVICE};
use crate::common::unique;
use fred::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel() {
    let set = Sentinels::start().await;
    // Boxed, as in tests/topologies/cluster.rs: the test future stays small on the
    // test thread's stack.
    macro_rules! scenario {
        ($name:ident) => {
            common::topology::timed(stringify!($name), Box::pin($name(&set))).await
        };
    }
    scenario!(excludes_and_wakes);
    scenario!(tracking_hears_a_delete);
    if set.private() {
        scenario!(ordered_failover);
        scenario!(master_killed);
    }
}

/// Two clients through the sentinels, four tasks on one name: never two
/// holders, and each unlock wakes the next waiter.
async fn excludes_and_wakes(set: &Sentinels) {
    let a = set.client().await;
    let b = set.client().await;
    let name = unique("sentinel");
    let inside = Arc::new(AtomicI64::new(0));
    let total = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for client in [&a, &b, &a, &b] {
        let lock = client.lock(&name).unwrap();
        let (inside, total) = (inside.clone(), total.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = lock.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::task::yield_now().await;
                total.fetch_add(1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(total.load(Ordering::SeqCst), 40);
    a.shutdown().await;
    b.shutdown().await;
}

/// With the default settings, a `DEL` of a held key on the master is heard
/// at once (client tracking, docs/PROTOCOL.md §2.10, on the connections the
/// sentinels pointed the client to), far below the first renewal (10 s).
async fn tracking_hears_a_delete(set: &Sentinels) {
    let client = set.client().await;
    let master = set.master().await;
    let raw = set.servers[master].raw().await;
    for name in [unique("sentinel-tracking-a"), unique("sentinel-tracking-b")] {
        let guard = client.lock(&name).unwrap().lock().await.unwrap();
        // Until the watch has read the key (bounded: it may have before the
        // count was taken; the watch starts 10 ms after the acquisition).
        let tracked = || async {
            redisson_lock_testkit::info_field(&raw, "stats", "tracking_total_keys")
                .await
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
        };
        let after = tracked().await;
        let start = Instant::now();
        while tracked().await <= after && start.elapsed() < Duration::from_secs(1) {}
        let _: i64 = raw.del(&name).await.unwrap();
        until("the DEL heard", Duration::from_secs(1), || async {
            guard.is_lost().then_some(())
        })
        .await;
    }
    let _ = raw.quit().await;
    client.shutdown().await;
}

/// Hold a lock and keep a waiter waiting while `failover` moves the master;
/// then check the holder kept its lock on the new master (or was told it
/// lost it), the waiter gets it after the unlock, and new locks work.
async fn across_failover(set: &Sentinels, what: &str, failover: impl AsyncFnOnce(usize)) {
    let lease = Duration::from_secs(9);
    let master = set.master().await;
    let raw = set.servers[master].raw().await;
    let standoff = Standoff::start(
        set.client_with(|c| c.lock_watchdog_timeout(lease)).await,
        set.client().await,
        unique("failover"),
        |channel| {
            let raw = raw.clone();
            // The waiter's client, and the holder's (its hold's watch).
            async move { common::numsub(&raw, &channel).await == 2 }
        },
    )
    .await;
    let _ = raw.quit().await;
    let name = standoff.name.clone();
    let started = Instant::now();
    failover(master).await;
    until("a new master", Duration::from_secs(30), || async {
        (set.master().await != master).then_some(())
    })
    .await;
    eprintln!("   {what}: new master after {:?}", started.elapsed());
    // Within a lease the holder knows where it stands.
    tokio::time::sleep(lease).await;
    standoff.settle(what).await;
    // Locks taken after the failover behave normally (the clients were
    // shut down with the standoff: new ones).
    let holder = set.client().await;
    let waiting = set.client().await;
    let lock = waiting.lock(&name).unwrap();
    let again = holder.lock(&name).unwrap().lock().await.unwrap();
    let waiter = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let unlocked = Instant::now();
    again.unlock().await.unwrap();
    let got = waiter.await.unwrap().unwrap().expect("woken");
    assert!(unlocked.elapsed() < Duration::from_secs(5));
    got.unlock().await.unwrap();
    holder.shutdown().await;
    waiting.shutdown().await;
}

/// `SENTINEL FAILOVER`: the replica is promoted, the old master demoted.
async fn ordered_failover(set: &Sentinels) {
    across_failover(set, "ordered failover", async |_| {
        let raw = set.sentinels[0].raw().await;
        let _: Value = raw
            .custom(fred::cmd!("SENTINEL"), vec!["FAILOVER", SERVICE])
            .await
            .unwrap();
        let _ = raw.quit().await;
    })
    .await;
    // The demoted master replicates from the new one again.
    let master = set.master().await;
    wait_replicas(&set.servers[master], 1).await;
}

/// SIGKILL the master: the sentinels agree it is down and promote the replica.
async fn master_killed(set: &Sentinels) {
    across_failover(set, "master killed", async |master| {
        set.servers[master].kill();
    })
    .await;
}
