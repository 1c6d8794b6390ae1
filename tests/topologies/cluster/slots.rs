//! Every kind across the cluster's slots: pub/sub modes, exclusion,
//! wake-ups, renewals and latches, multi-locks, no leaked subscription.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{common, names, slot_of};
use crate::common::make::{self, Make};
use crate::common::topology::{until, Cluster};
use crate::common::unique;
use fred::prelude::*;
use redisson_lock::{Client, Error, Kind, LockGuard, MultiLock, PubSubMode, Reentrant};

/// `Auto` on a Redis 7 cluster subscribes by SSUBSCRIBE on the node of the
/// channel's slot and unlocks by SPUBLISH (Redisson 3.22+'s default); on a
/// cluster without sharded pub/sub (Redis 6.2) by SUBSCRIBE and PUBLISH, as
/// Redisson does there, and there `Sharded` and `Both` are refused at
/// connect, typed.
pub async fn auto_mode(cluster: &Cluster, sharded: bool) {
    if !sharded {
        for mode in [PubSubMode::Sharded, PubSubMode::Both] {
            let config = redisson_lock::Config::from_url(&cluster.url)
                .unwrap()
                .pubsub_mode(mode);
            match Client::connect_with(config).await {
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
            // The waiter's client, and the holder's (its hold's watch).
            || async { (cluster.count(used, &channel).await == 2).then_some(()) },
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
pub async fn handed_over(
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
pub async fn every_kind_excludes_across_slots(cluster: &Cluster) {
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

pub async fn exclude<K: Kind>(a: &Client, b: &Client, raw: &fred::clients::Client, make: Make<K>) {
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
pub async fn wakes_by_publish_in_many_slots(cluster: &Cluster) {
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
                tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(25)).await })
            })
            .collect();
        for name in &names {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            // The waiter's client, and the holder's (its hold's watch).
            until("the waiter subscribed", Duration::from_secs(5), || async {
                (cluster.subscriptions(&channel).await == 2).then_some(())
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
pub async fn both_mode_bridges_classic_and_sharded(cluster: &Cluster) {
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
        // The Both client both ways, and the holder's watch.
        until("subscribed both ways", Duration::from_secs(5), || async {
            (cluster.subscriptions(&channel).await == 3).then_some(())
        })
        .await;
        let got = handed_over(guard, waiter, &format!("{mode:?} woke Both")).await;
        // The Both client unlocks; the other side waits.
        let lock = other.lock(&name).unwrap();
        let waiter = common::spawn_waiter(&lock, Duration::from_secs(25));
        until(
            "the other side subscribed",
            Duration::from_secs(5),
            // Beside the Both client's watch of its hold, both ways.
            || async { (cluster.subscriptions(&channel).await == 3).then_some(()) },
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
pub async fn renewals_and_latches_across_slots(cluster: &Cluster) {
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
pub async fn multi_lock_across_slots(cluster: &Cluster) {
    let a = cluster.client().await;
    let b = cluster.client().await;
    let names = names("multi", 4);
    let multi = |c: &Client| MultiLock::new(names.iter().map(|n| c.lock(n).unwrap())).unwrap();
    let guard = multi(&a).lock().await.unwrap();
    assert!(multi(&b).try_lock().await.unwrap().is_none());
    let other = tokio::spawn({
        let m = multi(&b);
        async move { m.try_lock_for(Duration::from_secs(20)).await }
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
pub async fn storm_leaves_no_subscription(cluster: &Cluster) {
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

/// Keyspace notifications on a cluster (docs/PROTOCOL.md §2.9): they are
/// published only on the node that holds the key, so each holder listens
/// there (a classic `SUBSCRIBE` on the key's node, whatever the pub/sub
/// mode); a plain `DEL` of keys on every master is heard within a second
/// (the next renewal is 10 s away), in each mode the cluster supports.
pub async fn keyspace_notifications_on_every_master(cluster: &Cluster, sharded: bool) {
    for node in cluster.node_clients().await {
        crate::common::config_set(&node, "notify-keyspace-events", "Kgxe").await;
        let _ = node.quit().await;
    }
    let raw = cluster.raw().await;
    let modes: &[PubSubMode] = if sharded {
        &[PubSubMode::Classic, PubSubMode::Sharded]
    } else {
        &[PubSubMode::Classic]
    };
    for &mode in modes {
        let client = cluster
            .client_with(|c| c.pubsub_mode(mode).keyspace_notifications(true))
            .await;
        for name in names("keyspace", 6) {
            let guard = client.lock(&name).unwrap().lock().await.unwrap();
            let channel = format!("__keyspace@0__:{name}");
            until(
                "the holder listens on its key",
                Duration::from_secs(5),
                || async { (cluster.count("NUMSUB", &channel).await == 1).then_some(()) },
            )
            .await;
            let _: i64 = raw.del(&name).await.unwrap();
            // Not `lost()` (the registry's signal either way): the guard's
            // own view, as a blocking job would poll it.
            until("the DEL heard", Duration::from_secs(1), || async {
                guard.is_lost().then_some(())
            })
            .await;
        }
        client.shutdown().await;
    }
}

/// The keys `INFO stats` says every node tracks, summed.
async fn tracked_keys(cluster: &Cluster) -> i64 {
    let mut total = 0;
    for node in cluster.node_clients().await {
        let info: String = node
            .custom(fred::cmd!("INFO"), vec!["stats"])
            .await
            .unwrap_or_default();
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("tracking_total_keys:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0);
        let _ = node.quit().await;
    }
    total
}

/// With the default settings (no keyspace notifications), a `DEL` of a held
/// key is heard at once on every master: client tracking runs on the
/// client's connection to each primary, redirected to a listener on that
/// node (docs/PROTOCOL.md §2.10).
pub async fn tracking_on_every_master(cluster: &Cluster) {
    let client = cluster.client().await;
    let raw = cluster.raw().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for node in cluster.node_clients().await {
        let list: String = node
            .custom(fred::cmd!("CLIENT"), vec!["LIST"])
            .await
            .unwrap();
        eprintln!("DEBUG node:\n{list}");
    }
    for name in names("tracking", 6) {
        let guard = client.lock(&name).unwrap().lock().await.unwrap();
        // Until the watch has read the key (bounded: it may have before the
        // count was taken; the watch starts 10 ms after the acquisition).
        let after = tracked_keys(cluster).await;
        let start = Instant::now();
        while tracked_keys(cluster).await <= after && start.elapsed() < Duration::from_secs(1) {}
        let _: i64 = raw.del(&name).await.unwrap();
        // Far below the first renewal (10 s).
        until("the DEL heard", Duration::from_secs(1), || async {
            guard.is_lost().then_some(())
        })
        .await;
    }
    client.shutdown().await;
}
