//! `CountDownLatch` (Redisson's RCountDownLatch, docs/PROTOCOL.md §7.3): the exact
//! Redis state and messages after every operation, awaiters on two clients
//! released together by the last count-down, a latch deleted while awaited
//! (where Java hangs), timeouts and dropped awaits leaving no subscription,
//! Java-shaped scripts written here by hand, bad input. The blocking form:
//! `blocking.rs`.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::{command_calls, eventually, invalid, numsub, wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::{Error, LatchOpened};

/// Redisson's countDown (§7.3), as a Java client runs it.
const JAVA_COUNT_DOWN: &str = "
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end";

/// Redisson's trySetCount (§7.3).
const JAVA_TRY_SET_COUNT: &str = "
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1
end
return 0";

/// Redisson's delete (§7.3): publishes the "new count" message 1.
const JAVA_DELETE: &str = "
if redis.call('del', KEYS[1]) == 1 then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 end
return 0";

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

async fn get(fx: &Fixture, key: &str) -> Option<String> {
    fx.raw.get(key).await.unwrap()
}

async fn java(fx: &Fixture, script: &str, args: &[&str]) -> Value {
    fx.raw
        .eval(
            script,
            vec![fx.name.clone(), channel(&fx.name)],
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn every_operation_leaves_the_spec_state() {
    let fx = Fixture::new("latch-state").await;
    let name = &fx.name;
    let latch = fx.client.count_down_latch(name).unwrap();
    let mut listener = fx.listen(latch.channel()).await;
    assert_eq!(latch.channel(), channel(name), "the spec's channel");

    assert_eq!(latch.count().await.unwrap(), 0, "absent: 0");
    assert!(latch.try_set_count(3).await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));
    assert_eq!(fx.pttl(name).await, -1, "no TTL");
    assert!(!latch.try_set_count(5).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("2"));
    assert_eq!(latch.count().await.unwrap(), 2);
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert!(!fx.exists(name).await, "deleted at zero");
    latch.count_down().await.unwrap();
    assert!(!fx.exists(name).await, "an absent latch stays absent");
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!fx.exists(name).await);
    assert!(!latch.delete().await.unwrap());

    assert_eq!(
        listener.drain().await,
        ["1", "0", "1", "1"],
        "trySetCount, zero reached, trySetCount, delete"
    );

    // A name with a hash tag: the channel still gets braces, as Redisson's.
    let tagged = format!("{{{name}}}:x");
    let latch = fx.client.count_down_latch(&tagged).unwrap();
    assert_eq!(
        latch.channel(),
        format!("redisson_countdownlatch__channel__{{{tagged}}}")
    );
}

/// Six awaiters, three on each of two clients, all return right after the
/// last count-down by a third client, long before any timeout; then no
/// subscription is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaiters_on_two_clients_all_return_after_the_last_count_down() {
    let fx = Fixture::new("latch-many").await;
    let clients = [fx.client.clone(), fx.client().await];
    let counter = fx.client().await.count_down_latch(&fx.name).unwrap();
    assert!(counter.try_set_count(3).await.unwrap());
    let mut awaiters = Vec::new();
    for t in 0..6 {
        let latch = clients[t % 2].count_down_latch(&fx.name).unwrap();
        awaiters.push(tokio::spawn(async move {
            let opened = latch.await_zero().await.unwrap();
            (Instant::now(), opened)
        }));
    }
    wait_numsub(&fx.raw, &channel(&fx.name), 2).await;
    counter.count_down().await.unwrap();
    counter.count_down().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(awaiters.iter().all(|a| !a.is_finished()), "count 1 left");
    let last = Instant::now();
    counter.count_down().await.unwrap();
    for awaiter in awaiters {
        let (at, opened) = tokio::time::timeout(Duration::from_secs(5), awaiter)
            .await
            .expect("returned")
            .unwrap();
        assert_eq!(opened, LatchOpened::Zero);
        assert!(at - last < Duration::from_secs(2), "after {:?}", at - last);
    }
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    // Zero already: returns at once, without subscribing.
    assert_eq!(
        clients[0]
            .count_down_latch(&fx.name)
            .unwrap()
            .await_for(Duration::ZERO)
            .await
            .unwrap(),
        Some(LatchOpened::Zero)
    );
}

/// Deleting a latch while it is awaited (ours, and Java's delete script):
/// the awaiters return `Deleted` (Java's would hang).
#[tokio::test]
async fn delete_during_await_returns_deleted() {
    let fx = Fixture::new("latch-delete").await;
    let other = fx.client().await;
    let latch = fx.client.count_down_latch(&fx.name).unwrap();
    for java_delete in [false, true] {
        assert!(latch.try_set_count(2).await.unwrap());
        let awaiters: Vec<_> = [&fx.client, &other]
            .into_iter()
            .map(|c| {
                let latch = c.count_down_latch(&fx.name).unwrap();
                tokio::spawn(async move { latch.await_for(Duration::from_secs(20)).await })
            })
            .collect();
        wait_numsub(&fx.raw, &channel(&fx.name), 2).await;
        let deleted = Instant::now();
        if java_delete {
            assert_eq!(
                java(&fx, JAVA_DELETE, &["1", "PUBLISH"]).await.as_i64(),
                Some(1)
            );
        } else {
            assert!(latch.delete().await.unwrap());
        }
        for awaiter in awaiters {
            let opened = awaiter.await.unwrap().unwrap();
            assert_eq!(opened, Some(LatchOpened::Deleted));
        }
        assert!(deleted.elapsed() < Duration::from_secs(2));
        wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    }
}

/// An awaiter of a latch of count 1 that re-checks every 100 ms
/// (`lock_watchdog_timeout`, its safety cap) and whose replies may take 10 s,
/// waiting at most `wait`; the latch is then removed with a plain `DEL`, no
/// message. Returns the fixture, the awaiter and when it started.
async fn awaiter_of_a_silently_deleted_latch(
    prefix: &str,
    wait: Duration,
) -> (
    Fixture,
    tokio::task::JoinHandle<redisson_lock::Result<Option<LatchOpened>>>,
    Instant,
) {
    let fx = Fixture::with(prefix, |c| {
        c.lock_watchdog_timeout(Duration::from_millis(100))
            .timeout(Duration::from_secs(10))
    })
    .await;
    let latch = fx.client.count_down_latch(&fx.name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let started = Instant::now();
    let awaiter = tokio::spawn(async move { latch.await_for(wait).await });
    wait_numsub(&fx.raw, &channel(&fx.name), 1).await;
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    (fx, awaiter, started)
}

/// The `GET` that finds the latch gone (command connection) can be answered
/// before its message arrives (pub/sub connection): the awaiter waits for
/// the message and reports what it says. Made certain here: the key is
/// removed with no message, the awaiter's own re-check finds it gone, and
/// only then is the delete's `1` published.
#[tokio::test]
async fn a_delete_message_that_comes_after_the_get_still_says_deleted() {
    let (fx, awaiter, _) =
        awaiter_of_a_silently_deleted_latch("latch-late", Duration::from_secs(20)).await;
    // Every GET counted from now on ran after the DEL (on a private
    // server, the awaiter's; with REDIS_URL possibly another test's, when
    // this test can only pass).
    let gets = command_calls(&fx.raw, "get").await;
    eventually("the awaiter's GET after the DEL", || async {
        command_calls(&fx.raw, "get").await > gets
    })
    .await;
    let published: i64 = fx.raw.publish(channel(&fx.name), "1").await.unwrap();
    assert_eq!(published, 1, "the awaiter is still subscribed");
    let opened = awaiter.await.unwrap().unwrap();
    assert_eq!(opened, Some(LatchOpened::Deleted));
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
}

/// A latch gone with no message (expired, or a plain `DEL`): the awaiter
/// waits for a message that never comes at most until its own deadline, and
/// reports `Zero`.
#[tokio::test]
async fn a_latch_gone_without_a_message_ends_the_wait_by_its_deadline() {
    let (fx, awaiter, started) =
        awaiter_of_a_silently_deleted_latch("latch-silent", Duration::from_millis(600)).await;
    let opened = awaiter.await.unwrap().unwrap();
    assert_eq!(opened, Some(LatchOpened::Zero));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by its 600 ms deadline, not the 10 s timeout: {:?}",
        started.elapsed()
    );
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
}

#[tokio::test]
async fn timeouts_and_dropped_awaits_leave_no_subscription() {
    let fx = Fixture::new("latch-timeout").await;
    let latch = fx.client.count_down_latch(&fx.name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let started = Instant::now();
    assert_eq!(
        latch.await_for(Duration::from_millis(300)).await.unwrap(),
        None
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    assert_eq!(latch.await_for(Duration::ZERO).await.unwrap(), None);
    assert_eq!(numsub(&fx.raw, &channel(&fx.name)).await, 0);

    let awaiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_zero().await }
    });
    wait_numsub(&fx.raw, &channel(&fx.name), 1).await;
    awaiter.abort();
    let _ = awaiter.await;
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    // Dropped at random points: still nothing left.
    for micros in (0..2_000).step_by(100) {
        let _ = tokio::time::timeout(Duration::from_micros(micros), latch.await_zero()).await;
    }
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    assert_eq!(latch.count().await.unwrap(), 1, "awaiting changes nothing");
}

/// Java's scripts, written here from the spec, drive and observe ours.
#[tokio::test]
async fn java_shaped_commands_observe_and_drive_ours() {
    let fx = Fixture::new("latch-java").await;
    let latch = fx.client.count_down_latch(&fx.name).unwrap();
    assert_eq!(
        java(&fx, JAVA_TRY_SET_COUNT, &["1", "2", "PUBLISH"])
            .await
            .as_i64(),
        Some(1)
    );
    assert_eq!(latch.count().await.unwrap(), 2);
    assert!(!latch.try_set_count(4).await.unwrap(), "Java set it");
    let awaiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_zero().await.map(|o| (Instant::now(), o)) }
    });
    wait_numsub(&fx.raw, &channel(&fx.name), 1).await;
    latch.count_down().await.unwrap(); // ours
    let mut listener = fx.listen(&channel(&fx.name)).await;
    let last = Instant::now();
    java(&fx, JAVA_COUNT_DOWN, &["0", "PUBLISH"]).await; // Java's, the last
    let (at, opened) = awaiter.await.unwrap().unwrap();
    assert_eq!(opened, LatchOpened::Zero);
    assert!(at - last < Duration::from_secs(2));
    assert_eq!(listener.drain().await, ["0"]);

    // Ours counts down to zero; a Java awaiter hears "0".
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(listener.drain().await, ["1", "0"]);
    assert!(!fx.exists(&fx.name).await);
}

#[tokio::test]
async fn bad_input_gets_typed_errors_and_writes_nothing() {
    let fx = Fixture::new("latch-bad").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let latch = common::named(|n| client.count_down_latch(n), name);
    for count in [0, 1 << 53, u64::MAX] {
        assert!(invalid(&latch.try_set_count(count).await));
    }
    assert!(!fx.exists(name).await);
    assert!(
        latch.try_set_count((1 << 53) - 1).await.unwrap(),
        "the largest count"
    );
    assert_eq!(latch.count().await.unwrap(), (1 << 53) - 1);
    assert!(latch.delete().await.unwrap());

    let _: () = raw.hset(name, ("f", "1")).await.unwrap();
    let wrong = |r: redisson_lock::Result<()>| matches!(r, Err(Error::WrongType { .. }));
    assert!(wrong(latch.count_down().await));
    assert!(wrong(latch.count().await.map(drop)));
    assert!(wrong(latch.try_set_count(1).await.map(drop)));
    assert!(wrong(latch.await_zero().await.map(drop)));
    assert!(wrong(
        latch.await_for(Duration::from_secs(1)).await.map(drop)
    ));
    let _: i64 = raw.del(name).await.unwrap();
    let _: () = raw.set(name, "three", None, None, false).await.unwrap();
    assert!(wrong(latch.count_down().await));
    assert!(wrong(latch.count().await.map(drop)));
    assert_eq!(get(&fx, name).await.as_deref(), Some("three"), "untouched");
}
