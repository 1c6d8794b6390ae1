//! Fair lock (docs/PROTOCOL.md §4): queue state, FIFO across clients, dead waiters.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{all_within, eventually, spawn_waiter, wait_numsub, Fixture};
use fred::prelude::*;
use parking_lot::Mutex;
use redisson_lock::{Error, FairLock, Owner};

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

async fn queue(raw: &fred::clients::Client, lock: &FairLock) -> Vec<String> {
    raw.lrange(lock.queue_key(), 0, -1).await.unwrap()
}

async fn wait_for_queue_len(raw: &fred::clients::Client, lock: &FairLock, len: usize) {
    eventually("queue length", || {
        let (raw, key) = (raw.clone(), lock.queue_key().to_string());
        async move { raw.llen::<usize, _>(key).await.unwrap() == len }
    })
    .await;
}

#[tokio::test]
async fn keys_and_queue_state_follow_the_spec() {
    let fx = Fixture::new("fair-state").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let lock = client.fair_lock(name).unwrap();
    assert_eq!(lock.queue_key(), format!("redisson_lock_queue:{{{name}}}"));
    assert_eq!(
        lock.timeout_key(),
        format!("redisson_lock_timeout:{{{name}}}")
    );

    let holder = lock.lock().await.unwrap();
    let fields = fx.hgetall(name).await;
    assert_eq!(
        fields,
        HashMap::from([(holder.field().to_string(), "1".to_string())])
    );
    let reentered = holder.reenter().await.unwrap();
    assert_eq!(holder.hold_count().await.unwrap(), 2);
    reentered.unlock().await.unwrap();

    // A waiter with a 10 s wait queues with deadline now + holder TTL + 10 s.
    let before = now_ms();
    let waiter = spawn_waiter(&lock, Duration::from_secs(10));
    wait_for_queue_len(raw, &lock, 1).await;
    let queued = queue(raw, &lock).await;
    let waiter_field = queued[0].clone();
    assert!(waiter_field.starts_with(&client.id().to_string()));
    let deadline: f64 = raw.zscore(lock.timeout_key(), &waiter_field).await.unwrap();
    let expected = before + 30_000.0 + 10_000.0;
    assert!(
        (deadline - expected).abs() < 2_000.0,
        "deadline {deadline} vs {expected}"
    );
    let channel = lock.waiter_channel(&waiter_field);
    wait_numsub(raw, &channel, 1).await;

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let next = waiter.await.unwrap().expect("the head gets the lock");
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "woken by its channel"
    );
    assert_eq!(next.field(), waiter_field);
    assert!(queue(raw, &lock).await.is_empty());
    let waiting: i64 = raw.zcard(lock.timeout_key()).await.unwrap();
    assert_eq!(waiting, 0);
    next.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiters_on_two_clients_get_it_in_queue_order() {
    let fx = Fixture::new("fifo").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    let first = clients[0].fair_lock(name).unwrap();
    let holder = first.lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..10 {
        let lock = clients[i % 2].fair_lock(name).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().push(i);
            guard.unlock().await.unwrap();
        }));
        // The next waiter starts only once this one is queued.
        wait_for_queue_len(raw, &first, i + 1).await;
    }
    holder.unlock().await.unwrap();
    all_within(20, waiters).await;
    assert_eq!(*order.lock(), (0..10).collect::<Vec<_>>());
    assert!(queue(raw, &first).await.is_empty());
}

/// A dead head (a Java client that crashed while queued) does not stall the
/// queue past its deadline: our waiter sleeps until then, not for minutes.
#[tokio::test]
async fn a_dead_queue_head_stalls_nobody_past_its_deadline() {
    let fx = Fixture::new("fair-dead").await;
    let raw = &fx.raw;
    let lock = fx.client.fair_lock(&fx.name).unwrap();
    let holder = lock.lock().await.unwrap();
    let dead = format!("{}:1", uuid::Uuid::new_v4());
    let _: i64 = raw.rpush(lock.queue_key(), dead.clone()).await.unwrap();
    let _: i64 = raw
        .zadd(
            lock.timeout_key(),
            None,
            None,
            false,
            false,
            (now_ms() + 1_500.0, dead.as_str()),
        )
        .await
        .unwrap();

    let waiter = spawn_waiter(&lock, Duration::from_secs(60));
    wait_for_queue_len(raw, &lock, 2).await;
    let started = Instant::now();
    holder.unlock().await.unwrap(); // wakes the dead head's channel only
    let guard = waiter
        .await
        .unwrap()
        .expect("acquired after the dead head's deadline");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    assert!(
        !queue(raw, &lock).await.contains(&dead),
        "the dead head was purged"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn non_reentrant_fair_lock_refuses_reentry() {
    let fx = Fixture::new("fair-nonreentrant").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let lock = client.non_reentrant_fair_lock(name).unwrap();
    let owned = lock.with_owner(Owner::new(5));
    let guard = owned.lock().await.unwrap();
    assert!(matches!(
        owned.try_lock().await,
        Err(Error::NotReentrant { .. })
    ));
    // `guard.reenter()` does not compile for a non-reentrant kind.
    assert!(matches!(
        owned.try_lock_for(Duration::from_millis(200)).await,
        Err(Error::NotReentrant { .. })
    ));
    assert_eq!(owned.hold_count(Owner::new(5)).await.unwrap(), 1);
    let queued: Vec<String> = raw.lrange(lock.queue_key(), 0, -1).await.unwrap();
    assert!(queued.is_empty(), "a refused owner leaves no queue entry");
    guard.unlock().await.unwrap();
}
