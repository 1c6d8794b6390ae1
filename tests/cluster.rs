//! Every lock kind on a real Redis Cluster (3 masters, 3 replicas, started by
//! the harness; `REDIS_CLUSTER_URL` for your own): names in many slots,
//! waking by classic and sharded publish, renewal and latch batches across
//! slots, no leaked subscriptions, and failover (a master killed, a master
//! demoted) with waiters waiting and holders holding.
//!
//! One cluster for the whole file, so the scenarios run in sequence inside
//! one test; each names itself when it fails.
mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::make::{self, Make};
use common::topology::{until, Cluster, Standoff};
use common::unique;
use fred::prelude::*;
use redisson_lock::{Client, Error, Kind, LockGuard, MultiLock, PubSubMode, Reentrant};

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
        |channel| async move { cluster.subscriptions(&channel).await == 1 },
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
    macro_rules! scenario {
        ($name:ident) => {
            common::topology::timed(stringify!($name), $name(&cluster)).await
        };
    }
    eprintln!("-- auto_mode (sharded: {sharded})");
    auto_mode(&cluster, sharded).await;
    scenario!(every_kind_excludes_across_slots);
    scenario!(wakes_by_publish_in_many_slots);
    if sharded {
        scenario!(both_mode_bridges_classic_and_sharded);
    }
    scenario!(renewals_and_latches_across_slots);
    scenario!(multi_lock_across_slots);
    scenario!(storm_leaves_no_subscription);
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

/// `Auto` on a Redis 7 cluster subscribes by SSUBSCRIBE on the node of the
/// channel's slot and unlocks by SPUBLISH (Redisson 3.22+'s default); on a
/// cluster without sharded pub/sub (Redis 6.2) by SUBSCRIBE and PUBLISH, as
/// Redisson does there, and there `Sharded` and `Both` are refused at
/// connect, typed.
async fn auto_mode(cluster: &Cluster, sharded: bool) {
    if !sharded {
        for mode in [PubSubMode::Sharded, PubSubMode::Both] {
            let config = redisson_lock::Config::from_url(&cluster.url)
                .unwrap()
                .pubsub_mode(mode);
            match Client::connect(config).await {
                Err(Error::Config(message)) => assert!(message.contains("Redis 7"), "{message}"),
                other => panic!("{mode:?} on a cluster without sharded pub/sub: {other:?}"),
            }
        }
    }
    let (used, unused) = if sharded {
        ("SHARDNUMSUB", "NUMSUB")
    } else {
        ("NUMSUB", "SHARDNUMSUB")
    };
    let client = cluster.client().await;
    let holder = cluster.client().await;
    for name in names("auto", 3) {
        let guard = holder.lock(&name).unwrap().lock().await.unwrap();
        let lock = client.lock(&name).unwrap();
        let channel = lock.channel().to_string();
        let waiter = common::spawn_waiter(&lock, Duration::from_secs(20));
        until(
            &format!("a subscriber by {used}"),
            Duration::from_secs(5),
            || async { (cluster.count(used, &channel).await == 1).then_some(()) },
        )
        .await;
        assert_eq!(cluster.count(unused, &channel).await, 0, "none by {unused}");
        let got = handed_over(guard, waiter, "woken by publish, not by the 30 s lease").await;
        got.unlock().await.unwrap();
    }
    client.shutdown().await;
    holder.shutdown().await;
}

/// Unlocks `guard`; `waiter` then has the lock within 5 s, woken by the
/// publish (`what` says whose), and it is returned.
async fn handed_over(
    guard: LockGuard<Reentrant>,
    waiter: tokio::task::JoinHandle<Option<LockGuard<Reentrant>>>,
    what: &str,
) -> LockGuard<Reentrant> {
    let unlocked = Instant::now();
    guard.unlock().await.unwrap();
    let got = waiter.await.unwrap().expect("woken");
    assert!(unlocked.elapsed() < Duration::from_secs(5), "{what}");
    got
}

/// Two clients, two tasks each, a non-atomic counter per name: never two
/// holders, for every kind, on names spread over the masters.
async fn every_kind_excludes_across_slots(cluster: &Cluster) {
    let a = cluster.client().await;
    let b = cluster.client().await;
    let raw = cluster.raw().await;
    exclude(&a, &b, &raw, make::rlock).await;
    exclude(&a, &b, &raw, make::non_reentrant).await;
    exclude(&a, &b, &raw, make::fair).await;
    exclude(&a, &b, &raw, make::non_reentrant_fair).await;
    exclude(&a, &b, &raw, make::write).await;
    exclude(&a, &b, &raw, make::spin).await;
    exclude(&a, &b, &raw, make::fenced).await;
    a.shutdown().await;
    b.shutdown().await;
    let _ = raw.quit().await;
}

async fn exclude<K: Kind>(a: &Client, b: &Client, raw: &fred::clients::Client, make: Make<K>) {
    const ROUNDS: i64 = 8;
    for name in names("excl", 3) {
        // The counter lives in the lock's slot, as a caller's data would.
        let counter = format!("{{{name}}}:counter");
        let inside = Arc::new(AtomicI64::new(0));
        let mut tasks = Vec::new();
        for client in [a, b, a, b] {
            let lock = make(client, &name);
            let (raw, counter, inside) = (raw.clone(), counter.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let v: Option<i64> = raw.get(&counter).await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = raw
                        .set(&counter, v.unwrap_or(0) + 1, None, None, false)
                        .await
                        .unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let total: i64 = raw.get(&counter).await.unwrap();
        assert_eq!(total, 4 * ROUNDS, "lost increments on {name}");
        let _: i64 = raw.del(&counter).await.unwrap();
        assert!(!make(a, &name).is_locked().await.unwrap());
    }
}

/// Waiters on names in many slots are each woken by the unlock's publish,
/// in classic and in sharded mode.
async fn wakes_by_publish_in_many_slots(cluster: &Cluster) {
    let sharded = common::supports_sharded_pubsub(&cluster.raw().await).await;
    let modes: &[PubSubMode] = if sharded {
        &[PubSubMode::Classic, PubSubMode::Sharded]
    } else {
        &[PubSubMode::Classic]
    };
    for &mode in modes {
        let holder = cluster.client_with(|c| c.pubsub_mode(mode)).await;
        let waiting = cluster.client_with(|c| c.pubsub_mode(mode)).await;
        let names = names("wake", 6);
        let mut guards = Vec::new();
        for name in &names {
            guards.push(holder.lock(name).unwrap().lock().await.unwrap());
        }
        let waiters: Vec<_> = names
            .iter()
            .map(|name| {
                let lock = waiting.lock(name).unwrap();
                tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(25), None).await })
            })
            .collect();
        for name in &names {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            until("the waiter subscribed", Duration::from_secs(5), || async {
                (cluster.subscriptions(&channel).await == 1).then_some(())
            })
            .await;
        }
        let unlocked = Instant::now();
        for guard in guards {
            guard.unlock().await.unwrap();
        }
        for waiter in waiters {
            let guard = waiter.await.unwrap().unwrap().expect("woken");
            guard.unlock().await.unwrap();
        }
        assert!(
            unlocked.elapsed() < Duration::from_secs(5),
            "{mode:?}: all woken by publish, long before the 30 s leases"
        );
        holder.shutdown().await;
        waiting.shutdown().await;
    }
}

/// `Both` publishes by PUBLISH and SPUBLISH and listens to both: a classic
/// client and a sharded one (Java before and after Redisson 3.22) both wake
/// it, and it wakes both.
async fn both_mode_bridges_classic_and_sharded(cluster: &Cluster) {
    let both = cluster
        .client_with(|c| c.pubsub_mode(PubSubMode::Both))
        .await;
    for mode in [PubSubMode::Classic, PubSubMode::Sharded] {
        let other = cluster.client_with(|c| c.pubsub_mode(mode)).await;
        let name = unique("both");
        // The other side unlocks; the Both client waits.
        let guard = other.lock(&name).unwrap().lock().await.unwrap();
        let lock = both.lock(&name).unwrap();
        let channel = lock.channel().to_string();
        let waiter = common::spawn_waiter(&lock, Duration::from_secs(25));
        until("subscribed both ways", Duration::from_secs(5), || async {
            (cluster.subscriptions(&channel).await == 2).then_some(())
        })
        .await;
        let got = handed_over(guard, waiter, &format!("{mode:?} woke Both")).await;
        // The Both client unlocks; the other side waits.
        let lock = other.lock(&name).unwrap();
        let waiter = common::spawn_waiter(&lock, Duration::from_secs(25));
        until(
            "the other side subscribed",
            Duration::from_secs(5),
            || async { (cluster.subscriptions(&channel).await == 1).then_some(()) },
        )
        .await;
        let got = handed_over(got, waiter, &format!("Both woke {mode:?}")).await;
        got.unlock().await.unwrap();
        other.shutdown().await;
    }
    both.shutdown().await;
}

/// Twenty holds in twenty slots are renewed together (the watchdog groups
/// its batches per slot), and the unlocks' latches are all deleted.
async fn renewals_and_latches_across_slots(cluster: &Cluster) {
    let client = cluster
        .client_with(|c| c.lock_watchdog_timeout(Duration::from_millis(1500)))
        .await;
    let raw = cluster.raw().await;
    let names = names("renew", 20);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).unwrap().lock().await.unwrap());
    }
    // Three leases long: only renewals keep them.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for (name, guard) in names.iter().zip(&guards) {
        assert!(!guard.is_lost(), "{name} lost");
        let pttl: i64 = raw.pttl(name).await.unwrap();
        assert!(pttl > 0, "{name} renewed, pttl {pttl}");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    for name in &names {
        let latch = format!("redisson_unlock_latch:{{{name}}}");
        until("latches deleted", Duration::from_secs(5), || async {
            let keys: Vec<String> = raw
                .with_options(&fred::types::config::Options {
                    cluster_hash: Some(fred::types::ClusterHash::Custom(slot_of(name))),
                    ..Default::default()
                })
                .custom(fred::cmd!("KEYS"), vec![format!("{latch}*")])
                .await
                .ok()?;
            keys.is_empty().then_some(())
        })
        .await;
        let exists: i64 = raw.exists(name.as_str()).await.unwrap();
        assert_eq!(exists, 0);
    }
    client.shutdown().await;
    let _ = raw.quit().await;
}

/// A multi-lock and a RedLock over names on different masters.
async fn multi_lock_across_slots(cluster: &Cluster) {
    let a = cluster.client().await;
    let b = cluster.client().await;
    let names = names("multi", 4);
    let multi = |c: &Client| MultiLock::new(names.iter().map(|n| c.lock(n).unwrap())).unwrap();
    let guard = multi(&a).lock().await.unwrap();
    assert!(multi(&b).try_lock().await.unwrap().is_none());
    let other = tokio::spawn({
        let m = multi(&b);
        async move { m.try_lock_for(Duration::from_secs(20), None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await.unwrap();
    let got = other.await.unwrap().unwrap().expect("all four, once free");
    got.unlock().await.unwrap();
    let red = MultiLock::red_lock(names.iter().map(|n| a.lock(n).unwrap())).unwrap();
    red.lock().await.unwrap().unlock().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

/// 32 tasks on two clients over 8 names, a third of them cancelled at
/// random points: afterwards no subscription is left on any node.
async fn storm_leaves_no_subscription(cluster: &Cluster) {
    let a = cluster.client().await;
    let b = cluster.client().await;
    let names = names("storm", 8);
    let mut tasks = Vec::new();
    for i in 0..32usize {
        let client = if i % 2 == 0 { a.clone() } else { b.clone() };
        let name = names[i % names.len()].clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..6usize {
                let lock = client.lock(&name).unwrap();
                let attempt = async {
                    let guard = lock.lock().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    guard.unlock().await.unwrap();
                };
                if (i + round) % 3 == 0 {
                    let cut = Duration::from_millis(((i * 7 + round * 13) % 20) as u64);
                    let _ = tokio::time::timeout(cut, attempt).await;
                } else {
                    attempt.await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for name in &names {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        until("no subscription left", Duration::from_secs(10), || async {
            (cluster.subscriptions(&channel).await == 0).then_some(())
        })
        .await;
        // A cancelled holder's background release ran.
        until("no lock left", Duration::from_secs(35), || async {
            (!a.lock(name).unwrap().is_locked().await.ok()?).then_some(())
        })
        .await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// With `replica_sync`, every lock write waits for the replica of the
/// master that took it: on each master's replica the lock is there as soon
/// as `lock()` returns.
async fn replica_sync_per_node(cluster: &Cluster) {
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
async fn slot_migrated_while_held(cluster: &Cluster) {
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
        "the waiter subscribed on the new node",
        Duration::from_secs(10),
        || async { (cluster.subscriptions(&standoff.channel).await == 1).then_some(()) },
    )
    .await;
    let _ = src.quit().await;
    let _ = dst.quit().await;
    standoff.settle("slot migrated").await;
}

/// `CLUSTER FAILOVER` on a replica: its master is demoted with its data in
/// sync. The holder keeps its lock (renewed on the new master), the waiter
/// re-subscribes there and is woken by the unlock.
async fn graceful_failover(cluster: &Cluster) {
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
        "the waiter subscribed on the new master",
        Duration::from_secs(10),
        || async { (cluster.subscriptions(&standoff.channel).await == 1).then_some(()) },
    )
    .await;
    standoff.settle("graceful failover").await;
}

/// SIGKILL a master while a lock on it is held and waited for. Nobody
/// hangs: the replica takes over; the holder either still holds (the lock
/// was replicated in time) and its renewals go to the new master, or learns
/// it lost the lock within its lease; the waiter gets the lock once the
/// holder lets go, never while the holder believes it holds.
async fn master_killed(cluster: &Cluster) {
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
async fn lock_lost_in_failover(cluster: &Cluster) {
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
        .try_lock_for(Duration::from_secs(10), None)
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
fn kill_node(cluster: &Cluster, i: usize) {
    cluster.nodes[i].kill();
}
