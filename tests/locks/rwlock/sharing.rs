//! Sharing and exclusion across clients: readers together, a writer alone,
//! wake-ups, and the blocking halves sharing a thread's owner.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{channel_of, field, map, Listener};
use crate::common;
use crate::common::{spawn_timed_waiter, unique, wait_numsub, Fixture};
#[cfg(feature = "blocking")]
use redisson_lock::blocking::BlockingClient;
use redisson_lock::Owner;
use tokio::sync::Barrier;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_share_while_a_writer_waits() {
    let fx = Fixture::new("rw-share").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    assert_ne!(clients[0].id(), clients[1].id());
    let channel = channel_of(name);
    let holding = Arc::new(Barrier::new(11));
    let release = Arc::new(Barrier::new(11));
    let mut readers = Vec::new();
    for i in 0..10 {
        let read = clients[i % 2].read_write_lock(name).unwrap().read();
        let (holding, release) = (holding.clone(), release.clone());
        readers.push(tokio::spawn(async move {
            let guard = read.lock().await.unwrap();
            holding.wait().await;
            release.wait().await;
            guard.unlock().await.unwrap();
        }));
    }
    // All ten hold at once (a reader excluding another would never arrive).
    tokio::time::timeout(Duration::from_secs(10), holding.wait())
        .await
        .expect("ten concurrent readers");
    let state = fx.hgetall(name).await;
    assert_eq!(state.len(), 11, "{state:?}");
    assert_eq!(state.get("mode").map(String::as_str), Some("read"));
    for client in &clients {
        let prefix = client.id().hyphenated().to_string();
        assert_eq!(state.keys().filter(|f| f.starts_with(&prefix)).count(), 5);
    }

    let write = clients[0].read_write_lock(name).unwrap().write();
    assert!(write.try_lock().await.unwrap().is_none());
    let writer = spawn_timed_waiter(&write, Duration::from_secs(20));
    // Both clients watch their readers' holds; the writer shares the
    // first one's subscription.
    wait_numsub(raw, &channel, 2).await;
    assert!(!writer.is_finished());
    release.wait().await;
    let released_at = Instant::now();
    for reader in readers {
        reader.await.unwrap();
    }
    let (at, guard) = writer.await.unwrap().expect("writer gets the lock");
    assert!(
        at.duration_since(released_at) < Duration::from_secs(2),
        "woken by the last reader's 0 after {:?}",
        at.duration_since(released_at)
    );
    let state = fx.hgetall(name).await;
    assert_eq!(
        state,
        map(&[("mode", "write"), (guard.field(), "1")]),
        "only the writer"
    );
    guard.unlock().await.unwrap();
    wait_numsub(raw, &channel, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_readers_and_its_release_wakes_them_all() {
    let fx = Fixture::new("rw-exclude").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    let channel = channel_of(name);
    let rw = clients[0].read_write_lock(name).unwrap();
    let writer = rw.write().lock().await.unwrap();
    for client in &clients {
        let read = client.read_write_lock(name).unwrap().read();
        assert!(read.try_lock().await.unwrap().is_none());
    }
    let holding = Arc::new(Barrier::new(7));
    let release = Arc::new(Barrier::new(7));
    let readers: Vec<_> = (0..6)
        .map(|i| {
            let read = clients[i % 2].read_write_lock(name).unwrap().read();
            let (holding, release) = (holding.clone(), release.clone());
            tokio::spawn(async move {
                let guard = read
                    .try_lock_for(Duration::from_secs(20))
                    .await
                    .unwrap()
                    .expect("reader gets the lock");
                let at = Instant::now();
                holding.wait().await;
                release.wait().await;
                guard.unlock().await.unwrap();
                at
            })
        })
        .collect();
    // One subscription per client, shared by its three waiting readers.
    wait_numsub(raw, &channel, 2).await;
    let released_at = Instant::now();
    writer.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), holding.wait())
        .await
        .expect("all six readers hold together");
    assert_eq!(fx.hgetall(name).await.len(), 7);
    release.wait().await;
    for reader in readers {
        let at = reader.await.unwrap();
        assert!(
            at.duration_since(released_at) < Duration::from_secs(2),
            "a '1' wakes every reader, woken after {:?}",
            at.duration_since(released_at)
        );
    }
    assert!(!fx.exists(name).await);
    wait_numsub(raw, &channel, 0).await;
}

#[tokio::test]
async fn downgrade_wakes_a_waiting_reader_long_before_the_ttl() {
    let fx = Fixture::new("rw-downgrade").await;
    let (writer_client, reader_client) = (&fx.client, fx.client().await);
    let (raw, name) = (&fx.raw, &fx.name);
    let channel = channel_of(name);
    let rw = writer_client.read_write_lock(name).unwrap();
    let me = Owner::new(1);
    let w = rw.write().with_owner(me).lock().await.unwrap(); // 30 s watchdog lease
    let r = rw.read().with_owner(me).lock().await.unwrap(); // write then read
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 1);
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 1);

    let read = reader_client.read_write_lock(name).unwrap().read();
    let waiter = spawn_timed_waiter(&read, Duration::from_secs(20));
    // The reader's client, and the writer's (its holds' watch).
    wait_numsub(raw, &channel, 2).await;
    let mut listener = Listener::new(raw, &channel).await;
    let downgraded_at = Instant::now();
    w.unlock().await.unwrap();
    let waiter = waiter.await.unwrap();
    let (at, guard) = waiter.expect("the reader shares with the downgraded writer");
    assert!(
        at.duration_since(downgraded_at) < Duration::from_secs(2),
        "woken after {:?} (the TTL was ~30 s)",
        at.duration_since(downgraded_at)
    );
    assert_eq!(listener.next().await, "1");
    assert_eq!(
        fx.hgetall(name).await,
        map(&[
            ("mode", "read"),
            (&field(writer_client, me), "1"),
            (guard.field(), "1")
        ])
    );
    guard.unlock().await.unwrap();
    r.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
    assert_eq!(listener.next().await, "0");
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_halves_share_the_thread_owner() {
    let server = common::Server::start();
    let client =
        BlockingClient::connect_with(redisson_lock::Config::from_url(&server.url).unwrap())
            .unwrap();
    let name = unique("rw-blocking");
    let rw = client.read_write_lock(&name).unwrap();
    assert_eq!(rw.name(), name);
    let (read, write) = (rw.read(), rw.write());
    assert_eq!(read.name(), name);

    let w = write.lock().unwrap();
    let r = read.lock().unwrap(); // the writer may read: same thread, same owner
    assert_eq!(write.hold_count().unwrap(), 1);
    assert_eq!(read.hold_count().unwrap(), 1);
    drop(w); // downgrade
    assert!(read.is_locked().unwrap());
    assert!(!write.is_locked().unwrap());

    let other = client.clone();
    let name2 = name.clone();
    let (read_ok, write_ok) = std::thread::spawn(move || {
        let rw = other.read_write_lock(&name2).unwrap();
        let (read, write) = (rw.read(), rw.write());
        let r = read.try_lock().unwrap();
        let read_ok = r.is_some();
        drop(r);
        let write_ok = write.try_lock_for(Duration::from_millis(100));
        (read_ok, write_ok.unwrap().is_some())
    })
    .join()
    .unwrap();
    assert!(read_ok, "another thread reads alongside");
    assert!(!write_ok, "another thread cannot write");

    r.unlock().unwrap();
    assert!(!read.is_locked().unwrap());
    assert!(!write.is_locked().unwrap());
}

/// A blocking write guard downgrades to a read guard of the same thread:
/// the hash is in read mode with the thread's field, another thread reads
/// alongside, and a writer waits.
#[cfg(feature = "blocking")]
#[test]
fn a_blocking_write_guard_downgrades() {
    let server = common::Server::start();
    let client =
        BlockingClient::connect_with(redisson_lock::Config::from_url(&server.url).unwrap())
            .unwrap();
    let rw = client
        .read_write_lock(&unique("rw-blocking-downgrade"))
        .unwrap();
    let write = rw.write().lock().unwrap();
    let read = write.downgrade().unwrap();
    assert!(!rw.write().is_locked().unwrap(), "no writer left");
    assert!(rw.read().is_locked().unwrap());
    assert_eq!(rw.read().hold_count().unwrap(), 1);
    let other = rw.clone();
    let (read_ok, write_ok) = std::thread::spawn(move || {
        let r = other.read().try_lock().unwrap();
        let w = other.write().try_lock().unwrap();
        (r.is_some(), w.is_some())
    })
    .join()
    .unwrap();
    assert!(read_ok, "another thread reads alongside");
    assert!(!write_ok, "a writer waits for the downgraded reader");
    read.unlock().unwrap();
    assert!(!rw.read().is_locked().unwrap());
}
