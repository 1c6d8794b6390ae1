//! Object listeners (`events()`, Redisson's `addListener`): what a lock, a
//! semaphore and a latch hear on the client's pub/sub connection, and the
//! key's removal and expiry where the server publishes keyspace
//! notifications; dropping the stream leaves the channel.

use std::time::Duration;

use fred::prelude::*;
use futures::StreamExt;
use redisson_lock::{ObjectEvent, ObjectEvents};

use crate::common::{unique, wait_numsub, Server};

/// The next event, within a generous bound (a publish arrives in
/// milliseconds; an expiry within the server's expire cycle).
async fn next(events: &mut ObjectEvents) -> ObjectEvent {
    tokio::time::timeout(Duration::from_secs(3), events.next())
        .await
        .expect("an event within 3 s")
        .expect("the stream goes on")
}

#[tokio::test]
async fn a_lock_listener_hears_unlocks_removals_and_expiries() {
    let server = Server::private();
    let raw = server.raw().await;
    let _: () = raw
        .custom(
            fred::cmd!("CONFIG"),
            vec!["SET", "notify-keyspace-events", "Kgx"],
        )
        .await
        .unwrap();
    let listener = server.client().await;
    let other = server.client().await;
    let name = unique("events");
    let mut events = listener.lock(&name).unwrap().events().await.unwrap();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    wait_numsub(&raw, &channel, 1).await;

    // Another client's unlock: Redisson's unlock message, and the key's
    // `del` (either first: two channels).
    let lock = other.lock(&name).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    let mut two = [next(&mut events).await, next(&mut events).await];
    two.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(two, [ObjectEvent::Deleted, ObjectEvent::Published(0)]);
    // A forced unlock publishes too.
    let guard = lock.lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    let two = [next(&mut events).await, next(&mut events).await];
    assert!(two.contains(&ObjectEvent::Deleted), "{two:?}");
    assert!(
        two.iter().any(|e| matches!(e, ObjectEvent::Published(_))),
        "{two:?}"
    );
    drop(guard);
    // A DEL of the held key: a keyspace `del`, and no message.
    let guard = lock.lock().await.unwrap();
    let _: i64 = raw.del(&name).await.unwrap();
    assert_eq!(next(&mut events).await, ObjectEvent::Deleted);
    guard.forget();
    // A hold whose lease runs out: a keyspace `expired`.
    lock.lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap()
        .forget();
    assert_eq!(next(&mut events).await, ObjectEvent::Expired);

    // Dropped: the listener is gone, and so is the subscription.
    drop(events);
    wait_numsub(&raw, &channel, 0).await;
}

#[tokio::test]
async fn synchronizer_listeners_hear_releases_and_count_downs() {
    let server = Server::private();
    let client = server.client().await;
    let other = server.client().await;

    let name = unique("sem-events");
    let semaphore = client.semaphore(&name).unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let mut events = semaphore.events().await.unwrap();
    let two = other.semaphore(&name).unwrap().acquire(2).await.unwrap();
    two.release().await.unwrap();
    assert_eq!(next(&mut events).await, ObjectEvent::Published(2));

    let name = unique("latch-events");
    let latch = client.count_down_latch(&name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let mut events = latch.events().await.unwrap();
    other
        .count_down_latch(&name)
        .unwrap()
        .count_down()
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, ObjectEvent::Published(0));
}
