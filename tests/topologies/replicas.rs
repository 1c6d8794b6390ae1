//! `Config::replica_sync` on a real master with one replica: every lock
//! write waits (`WAIT`) for the replica, so the replica has the lock when
//! `lock()` returns; when no replica confirms in time the write is undone
//! and the call fails with `Error::NotReplicated`; a master without
//! replicas sends no `WAIT`. One set-up for the file, scenarios in order.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::topology::Replicated;
use crate::common::Server;
use fred::prelude::*;
use redisson_lock::{Client, Config, Error};

async fn synced_client(url: &str, sync: Duration) -> Client {
    Client::connect_with(
        Config::from_url(url)
            .unwrap()
            .replica_sync(sync)
            .retry_attempts(1)
            .retry_delay(Duration::from_millis(10)),
    )
    .await
    .unwrap()
}

/// How many `WAIT` commands the server has run.
async fn waits(raw: &fred::clients::Client) -> u64 {
    common::command_calls(raw, "wait").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas() {
    let set = Replicated::start().await;
    let master = set.master.raw().await;
    let replica = set.replica.raw().await;

    eprintln!("-- the replica has every write when the call returns");
    let client = synced_client(&set.url, Duration::from_secs(2)).await;
    let name = common::unique("synced");
    let before = waits(&master).await;
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    let on_replica: std::collections::HashMap<String, String> =
        replica.hgetall(&name).await.unwrap();
    assert_eq!(on_replica.get(guard.field()).map(String::as_str), Some("1"));
    let inner = guard.reenter().await.unwrap();
    let on_replica: std::collections::HashMap<String, String> =
        replica.hgetall(&name).await.unwrap();
    assert_eq!(on_replica.get(guard.field()).map(String::as_str), Some("2"));
    inner.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    let exists: i64 = replica.exists(&name).await.unwrap();
    assert_eq!(
        exists, 0,
        "the unlock reached the replica before it returned"
    );
    assert_eq!(waits(&master).await - before, 4, "one WAIT per write");

    eprintln!("-- no replica confirms: the acquisition is undone, NotReplicated");
    set.replica.pause();
    let started = Instant::now();
    let outcome = client
        .lock(&name)
        .unwrap()
        .try_lock_for(Duration::from_secs(1))
        .await;
    assert!(
        matches!(outcome, Err(Error::NotReplicated { replicas: 1, .. })),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded: {:?}",
        started.elapsed()
    );
    // Undone in the background right after the reply (the undo's own WAIT
    // fails too, but the master has it).
    common::eventually("the unreplicated acquisition undone", || async {
        master.exists::<i64, _>(&name).await.unwrap() == 0
    })
    .await;
    set.replica.resume();
    common::topology::wait_replicas(&set.master, 1).await;
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();

    eprintln!("-- a master without replicas sends no WAIT");
    let single = Server::private();
    let alone = synced_client(&single.url, Duration::from_secs(2)).await;
    let raw = single.raw().await;
    let guard = alone.lock(&name).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(waits(&raw).await, 0);

    eprintln!("-- a bad setting is refused before connecting");
    let refused = Client::connect_with(
        Config::from_url(&set.url)
            .unwrap()
            .replica_sync(Duration::ZERO),
    )
    .await;
    assert!(matches!(refused, Err(Error::Config(_))), "{refused:?}");

    client.shutdown().await;
    alone.shutdown().await;
}
