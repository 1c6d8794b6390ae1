//! Mutual exclusion, waking by publish, subscription sharing and waiters'
//! deadlines (dropped waiters, for every kind: kinds.rs).
use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{
    all_within, eventually, numsub, spawn_waiter, wait_numsub, within, Fixture, Server,
};
use fred::prelude::*;
use redisson_lock::{PubSubMode, RLock};

/// Non-atomic read-modify-write of a counter under the lock.
async fn increment(lock: &RLock, raw: &fred::clients::Client, counter: &str, rounds: usize) {
    for _ in 0..rounds {
        let guard = lock.lock().await.unwrap();
        let value: Option<i64> = raw.get(counter).await.unwrap();
        tokio::task::yield_now().await;
        let _: () = raw
            .set(counter, value.unwrap_or(0) + 1, None, None, false)
            .await
            .unwrap();
        guard.unlock().await.unwrap();
    }
}

/// One task per lock, each with its own raw connection, `rounds` increments
/// each of the counter `{name}:counter`; its value once all are done.
async fn counted(fx: &Fixture, locks: Vec<RLock>, rounds: usize) -> i64 {
    let counter = format!("{}:counter", fx.name);
    let mut tasks = Vec::new();
    for lock in locks {
        let raw = fx.raw().await;
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            increment(&lock, &raw, &counter, rounds).await
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    fx.raw.get(&counter).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_owners_lose_no_increment() {
    let fx = Fixture::new("mutex").await;
    let locks = (0..8).map(|_| fx.client.lock(&fx.name).unwrap());
    assert_eq!(counted(&fx, locks.collect(), 25).await, 200);
    let channel = fx.client.lock(&fx.name).unwrap().channel().to_string();
    wait_numsub(&fx.raw, &channel, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_exclude_each_other() {
    let fx = Fixture::new("two-clients").await;
    let clients = [fx.client.clone(), fx.client().await];
    assert_ne!(clients[0].id(), clients[1].id());
    let locks = (0..8).map(|i| clients[i % 2].lock(&fx.name).unwrap());
    assert_eq!(counted(&fx, locks.collect(), 20).await, 160);
}

#[tokio::test]
async fn futures_joined_in_one_task_do_not_share_a_hold() {
    let fx = Fixture::new("join").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let inside = AtomicUsize::new(0);
    let critical = || async {
        let guard = lock.lock().await.unwrap();
        assert_eq!(
            inside.fetch_add(1, Ordering::SeqCst),
            0,
            "two holders at once"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        inside.fetch_sub(1, Ordering::SeqCst);
        guard.unlock().await.unwrap();
    };
    tokio::join!(critical(), critical(), critical());
}

#[tokio::test]
async fn waiter_is_woken_by_publish_long_before_the_ttl() {
    let fx = Fixture::new("wake").await;
    let holder = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    let lock = fx.client().await.lock(&fx.name).unwrap();
    let channel = lock.channel().to_string();

    let waiter = tokio::spawn(async move {
        let guard = lock.try_lock_for(Duration::from_secs(20)).await.unwrap();
        (guard.is_some(), Instant::now(), guard)
    });
    // The waiter is waiting once its subscription shows up on the server
    // (beside the holder's client's: its hold's watch).
    wait_numsub(&fx.raw, &channel, 2).await;
    let released_at = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, at, guard) = waiter.await.unwrap();
    assert!(acquired);
    // The holder's TTL was ~30 s; a publish wakes the waiter within moments.
    assert!(
        at - released_at < Duration::from_secs(2),
        "woken after {:?}",
        at - released_at
    );
    guard.unwrap().unlock().await.unwrap();
    wait_numsub(&fx.raw, &channel, 0).await;
}

#[tokio::test]
async fn waiter_gives_up_at_its_deadline_and_leaves_the_channel() {
    let fx = Fixture::new("deadline").await;
    let holder = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    // The waiter on a client of its own: the holder's client keeps its
    // hold's watch on the channel.
    let lock = fx.client().await.lock(&fx.name).unwrap();
    let started = Instant::now();
    let got = lock.try_lock_for(Duration::from_millis(300)).await;
    let waited = started.elapsed();
    assert!(got.unwrap().is_none());
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    assert!(lock.try_lock_for(Duration::ZERO).await.unwrap().is_none());
    wait_numsub(&fx.raw, lock.channel(), 1).await;
    holder.unlock().await.unwrap();
    wait_numsub(&fx.raw, lock.channel(), 0).await;
}

#[tokio::test]
async fn local_waiters_share_one_subscription() {
    let fx = Fixture::new("shared-sub").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let holder = lock.lock().await.unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let (lock, done) = (lock.clone(), done.clone());
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    let channel = lock.channel().to_string();
    wait_numsub(&fx.raw, &channel, 1).await;
    // Each unlock publishes once and wakes one waiter, which unlocks in turn.
    holder.unlock().await.unwrap();
    all_within(10, waiters).await;
    assert_eq!(done.load(Ordering::SeqCst), 10);
    wait_numsub(&fx.raw, &channel, 0).await;
}

#[tokio::test]
async fn many_waiters_on_many_names_all_finish() {
    let fx = Fixture::new("many").await;
    let mut tasks = Vec::new();
    for i in 0..400 {
        let lock = fx.client.lock(&format!("{}-{}", fx.name, i % 40)).unwrap();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            guard.unlock().await.unwrap();
        }));
    }
    all_within(30, tasks).await;
}

/// Messages published while the subscriber is disconnected are lost; after it
/// reconnects every waiter re-checks at once instead of sleeping out the TTL.
#[tokio::test]
async fn waiters_recheck_after_the_subscriber_reconnects() {
    let fx = Fixture::new("reconnect").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let holder = lock.lock().await.unwrap(); // 30 s watchdog lease
    let waiter = spawn_waiter(&lock, Duration::from_secs(25));
    wait_numsub(&fx.raw, lock.channel(), 1).await;
    // The lock vanishes without any message (as on expiry), then the
    // subscriber connection drops.
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    let started = Instant::now();
    let _: Value = fx
        .raw
        .custom(fred::cmd!("CLIENT"), vec!["KILL", "TYPE", "pubsub"])
        .await
        .unwrap();
    let guard = within(Duration::from_secs(10), "no TTL-long wait", waiter).await;
    assert!(guard.is_some());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "re-checked after {:?}",
        started.elapsed()
    );
    drop(holder); // its background unlock finds the lock gone: logged, harmless
    guard.unwrap().unlock().await.unwrap();
}

/// With `PubSubMode::Sharded`, unlocks go out by SPUBLISH and waiters listen by
/// SSUBSCRIBE (Java Redisson 3.22+ on Redis 7 clusters); Redis 7 accepts both
/// on a single server too. A server without sharded pub/sub (Redis 6.2)
/// refuses the mode at connect, typed, before anything is written.
#[tokio::test]
async fn sharded_pubsub_wakes_waiters() {
    let server = Server::start();
    if !common::supports_sharded_pubsub(&server.raw().await).await {
        let config = redisson_lock::Config::from_url(&server.url)
            .unwrap()
            .pubsub_mode(PubSubMode::Sharded);
        match redisson_lock::Client::connect_with(config).await {
            Err(redisson_lock::Error::Config(message)) => {
                assert!(message.contains("Redis 7"), "{message}")
            }
            other => panic!("sharded mode on a server without it: {other:?}"),
        }
        return;
    }
    drop(server);
    let fx = Fixture::with("sharded", |c| c.pubsub_mode(PubSubMode::Sharded)).await;
    let waiter_client = fx.client_with(|c| c.pubsub_mode(PubSubMode::Sharded)).await;
    let raw = &fx.raw;
    let holder = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    let lock = waiter_client.lock(&fx.name).unwrap();
    let channel = lock.channel().to_string();
    let waiter = spawn_waiter(&lock, Duration::from_secs(20));
    eventually("waiter subscribed by SSUBSCRIBE", || async {
        let reply: Vec<Value> = raw
            .custom(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB", &channel])
            .await
            .unwrap();
        // The waiter's client, and the holder's (its hold's watch).
        reply.get(1).and_then(|v| v.as_i64()) == Some(2)
    })
    .await;
    assert_eq!(numsub(raw, &channel).await, 0, "no classic subscription");
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let guard = waiter.await.unwrap().expect("woken by SPUBLISH");
    assert!(released.elapsed() < Duration::from_secs(2));
    guard.unlock().await.unwrap();
}
