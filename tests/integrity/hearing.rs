//! Hearing every loss fast: keyspace notifications and the hold check
//! (docs/PROTOCOL.md §2.9), and a failed re-subscribe that is tried again
//! (defect 7).

use std::time::Duration;

use fred::prelude::*;
use redisson_lock::{Error, LostReason};

use crate::common::{eventually, numsub, unique, wait_numsub, within, Server};
use crate::{every_kind, told_after};

/// Arguments of a private server that publishes the keyspace events a
/// holder listens for.
pub const NOTIFYING: [&str; 2] = ["--notify-keyspace-events", "Kgxe"];

/// Far below the next renewal (10 s with the default 30 s watchdog) and
/// any lease used here: only the mechanism under test can be this fast.
const HEARD: Duration = Duration::from_millis(1000);

/// The keyspace channel of `key` in database 0.
pub fn keyspace(key: &str) -> String {
    format!("__keyspace@0__:{key}")
}

/// Asking for keyspace notifications a server does not publish is a
/// configuration error at connect, naming the setting.
#[tokio::test]
async fn keyspace_notifications_a_server_does_not_send_are_refused() {
    let server = Server::private();
    let config = redisson_lock::Config::from_url(&server.url)
        .unwrap()
        .keyspace_notifications(true);
    match redisson_lock::Client::connect_with(config).await {
        Err(Error::Config(message)) => {
            assert!(message.contains("notify-keyspace-events"), "{message}")
        }
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

/// With keyspace notifications, every kind hears a plain `DEL` of its key
/// (no message on any lock channel, nobody awaiting `lost()` yet) at once,
/// and so does a forced unlock by another client of the kinds whose forced
/// unlock publishes nothing a holder hears (fair, spin).
#[tokio::test]
async fn keyspace_notifications_tell_every_kind_of_a_delete_at_once() {
    let server = Server::private_with(&NOTIFYING);
    let client = server.client_with(|c| c.keyspace_notifications(true)).await;
    let other = server.client().await;
    let raw = server.raw().await;
    let name = unique("keyspace-del");
    for (kind, lock) in every_kind(&client, &name) {
        let key = lock.name().to_owned();
        let guard = lock.lock().await.unwrap();
        wait_numsub(&raw, &keyspace(&key), 1).await;
        let _: i64 = raw.del(&key).await.unwrap();
        let (after, reason) = told_after(&guard, HEARD, kind).await;
        assert_eq!(reason, LostReason::Gone, "{kind}");
        println!("{kind}: DEL heard after {after:?}");
        drop(guard);
        wait_numsub(&raw, &keyspace(&key), 0).await;
    }
    for (kind, lock) in every_kind(&client, &format!("{name}-forced")) {
        if !matches!(kind, "fair" | "spin") {
            continue;
        }
        let key = lock.name().to_owned();
        let guard = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
        wait_numsub(&raw, &keyspace(&key), 1).await;
        let theirs = every_kind(&other, &format!("{name}-forced"))
            .into_iter()
            .find(|(k, _)| *k == kind)
            .unwrap()
            .1;
        assert!(theirs.force_unlock().await.unwrap());
        let (after, reason) = told_after(&guard, HEARD, kind).await;
        assert_eq!(reason, LostReason::Gone, "{kind}");
        println!("{kind}: forced unlock by another client heard after {after:?}");
    }
}

/// The hold check hears what no event announces (a `FLUSHALL`), for a
/// watchdog hold and for one with a long explicit lease alike.
#[tokio::test]
async fn the_hold_check_hears_a_flush() {
    let server = Server::private();
    let every = Duration::from_millis(100);
    let client = server.client_with(|c| c.hold_check_interval(every)).await;
    let raw = server.raw().await;
    let name = unique("hold-check");
    let lock = client.lock(&name).unwrap();
    let renewed = lock.lock().await.unwrap();
    let leased = client
        .fair_lock(&format!("{name}-leased"))
        .unwrap()
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let _: () = raw.flushall(false).await.unwrap();
    for (what, after) in [
        (
            "watchdog hold",
            told_after(&renewed, HEARD, "renewed").await,
        ),
        ("leased hold", told_after(&leased, HEARD, "leased").await),
    ] {
        assert_eq!(after.1, LostReason::Gone, "{what}");
        println!("{what}: FLUSHALL heard after {:?}", after.0);
    }
}

/// Defect 7: a re-subscribe after a reconnect that fails (here the server
/// refuses the channel for a while, by ACL) is tried again until it works,
/// so a waiter is woken by the next unlock's message, not at the holder's
/// TTL.
#[tokio::test]
async fn a_failed_resubscribe_is_tried_again() {
    let server = Server::private();
    let holder = server.client().await;
    let waiter_client = server.client().await;
    let raw = server.raw().await;
    let name = unique("resubscribe");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let held = holder.lock(&name).unwrap().lock().await.unwrap();
    let lock = waiter_client.lock(&name).unwrap();
    let waiter = tokio::spawn(async move { lock.lock().await });
    // The holder's client watches the channel too (its hold's watch).
    wait_numsub(&raw, &channel, 2).await;
    let _: () = raw
        .custom(fred::cmd!("ACL"), vec!["LOG", "RESET"])
        .await
        .unwrap();
    let acl = |rule: &'static str| {
        let raw = raw.clone();
        async move {
            let _: () = raw
                .custom(fred::cmd!("ACL"), vec!["SETUSER", "default", rule])
                .await
                .unwrap();
        }
    };
    acl("resetchannels").await;
    let _ = redisson_lock_testkit::faults::client_kill(
        &raw,
        redisson_lock_testkit::faults::ClientType::Pubsub,
    )
    .await;
    // The waiter's client reconnected and was refused the channel.
    eventually("a refused SUBSCRIBE in the ACL log", || async {
        let log: Vec<Value> = raw
            .custom(fred::cmd!("ACL"), vec!["LOG"])
            .await
            .unwrap_or_default();
        !log.is_empty()
    })
    .await;
    acl("allchannels").await;
    eventually("subscribed again", || async {
        numsub(&raw, &channel).await == 2
    })
    .await;
    held.unlock().await.unwrap();
    let woken = "woken by the unlock, long before the 30 s TTL";
    let guard = within(Duration::from_secs(5), woken, waiter).await.unwrap();
    guard.unlock().await.unwrap();
}

/// Issue 34, item 2: every guard of a kind with a release channel (the
/// lock, fenced lock, read and write locks) hears a forced unlock by
/// another client within a round trip, while nobody awaits `lost()`: the
/// client watches the channel from the moment the hold starts, with the
/// default `Config` (the next renewal would be 10 s away).
#[tokio::test]
async fn every_guard_hears_a_forced_unlock_without_awaiting_lost() {
    let server = Server::private();
    let client = server.client().await;
    let other = server.client().await;
    let raw = server.raw().await;
    let name = unique("heard-unawaited");
    for ((kind, lock), (_, theirs)) in every_kind(&client, &name)
        .into_iter()
        .zip(every_kind(&other, &name))
    {
        if matches!(kind, "fair" | "spin") {
            // No message a holder can hear: item 3 (client tracking).
            continue;
        }
        for lease in [None, Some(Duration::from_secs(60))] {
            let guard = match lease {
                None => lock.lock().await.unwrap(),
                Some(lease) => lock.lock_with_lease(lease).await.unwrap(),
            };
            let channel = release_channel(kind, lock.name());
            wait_numsub(&raw, &channel, 1).await;
            assert!(theirs.force_unlock().await.unwrap(), "{kind}");
            let (after, reason) = told_after(&guard, HEARD, kind).await;
            assert_eq!(reason, LostReason::Gone, "{kind}, lease {lease:?}");
            println!(
                "{kind} (lease {lease:?}): forced unlock heard after {after:?}, lost() not awaited"
            );
            drop(guard);
            // The watch ends with the hold.
            wait_numsub(&raw, &channel, 0).await;
        }
    }
}

/// The same with the blocking API, whose only way to learn of a loss is to
/// poll `is_lost()`: a job checking it every few milliseconds stops within
/// a round trip of a forced unlock, not at the next renewal.
#[test]
fn a_blocking_guard_polling_is_lost_hears_a_forced_unlock() {
    let server = crate::common::Server::start();
    let client = redisson_lock::blocking::BlockingClient::connect(&server.url).unwrap();
    let other = redisson_lock::blocking::BlockingClient::connect(&server.url).unwrap();
    let name = unique("heard-blocking");
    let guard = client.lock(&name).unwrap().lock().unwrap();
    let start = std::time::Instant::now();
    let theirs = other.lock(&name).unwrap();
    // Until the watch is subscribed, a forced unlock is still heard: the
    // watcher checks the hold once its subscription is active.
    assert!(theirs.force_unlock().unwrap());
    while !guard.is_lost() {
        assert!(start.elapsed() < HEARD, "not told within {HEARD:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    println!("blocking: forced unlock heard after {:?}", start.elapsed());
}

/// The channel every release of the lock `key` of `kind` publishes on
/// (docs/PROTOCOL.md §3.1).
fn release_channel(kind: &str, key: &str) -> String {
    match kind {
        "read" | "write" => format!("redisson_rwlock:{{{key}}}"),
        _ => format!("redisson_lock__channel:{{{key}}}"),
    }
}

/// Many holds taken at once (2 000 names on one client) are all watched:
/// every lock's channel gets its subscription (queued on the client's one
/// pub/sub connection, each watch waiting its turn), a forced unlock of any
/// of them is heard within a round trip, and releasing them all leaves no
/// subscription behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_holds_are_all_watched() {
    use futures::StreamExt;
    const HOLDS: usize = 2_000;
    let server = Server::private();
    let client = server.client().await;
    let other = server.client().await;
    let raw = server.raw().await;
    let prefix = unique("many-watched");
    let guards: Vec<_> = futures::stream::iter(0..HOLDS)
        .map(|i| {
            let lock = client.lock(&format!("{prefix}:{i}")).unwrap();
            async move { lock.lock().await.unwrap() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let pattern = format!("redisson_lock__channel:{{{prefix}:*");
    let channels = || {
        let (raw, pattern) = (raw.clone(), pattern.clone());
        async move {
            let listed: Vec<String> = raw
                .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", pattern.as_str()])
                .await
                .unwrap();
            listed.len()
        }
    };
    let started = tokio::time::Instant::now();
    while channels().await < HOLDS {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} of {HOLDS} watched after 30 s",
            channels().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "{HOLDS} holds watched {:?} after the last was taken",
        started.elapsed()
    );
    let victim = &guards[HOLDS / 2];
    assert!(other
        .lock(victim.name())
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    let (after, reason) = told_after(victim, HEARD, "one of many").await;
    assert_eq!(reason, LostReason::Gone);
    println!("forced unlock of one of {HOLDS} heard after {after:?}");
    assert_eq!(guards.iter().filter(|g| g.is_lost()).count(), 1);
    for guard in guards {
        drop(guard);
    }
    let started = tokio::time::Instant::now();
    while channels().await > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} subscriptions left 30 s after the release",
            channels().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
