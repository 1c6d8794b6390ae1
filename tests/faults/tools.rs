//! The fault-injection toolbox (the test kit's proxy, faults and child
//! processes; the lock jobs in `tests/common/fault.rs`) does what it says:
//! the proxy stalls, cuts and refuses; the server restarts on its port;
//! CLIENT KILL / PAUSE and SCRIPT FLUSH act; child processes hold locks,
//! die, and exclude each other.
use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::fault::{
    client_kill, client_pause, client_unpause, raw_client, script_flush, try_raw_client,
    ChildProcess, ClientType, Job, PauseMode, Proxy,
};
use crate::common::{eventually, unique, Server};
use fred::prelude::*;
use tokio::task::JoinHandle;

const SHORT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn proxy_forwards_stalls_and_resumes() {
    let server = Server::private();
    let proxy = Proxy::start(server.port).await;
    let client = raw_client(&proxy.url(), true).await;
    assert_eq!(proxy.connections(), 1);
    let _: () = client.set("k", "v", None, None, false).await.unwrap();
    let v: Option<String> = client.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("v"));

    proxy.stall();
    let mut pending = tokio::spawn({
        let client = client.clone();
        async move { client.get::<Option<String>, _>("k").await }
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut pending)
            .await
            .is_err(),
        "a stalled proxy answered"
    );
    proxy.resume();
    let v = tokio::time::timeout(SHORT, pending)
        .await
        .expect("the held GET completes after resume")
        .unwrap()
        .unwrap();
    assert_eq!(v.as_deref(), Some("v"));
}

/// `SET key 1` through `client`, in a task of its own.
fn spawn_set(client: &Client, key: &'static str) -> JoinHandle<Result<(), Error>> {
    let client = client.clone();
    tokio::spawn(async move { client.set::<(), _, _>(key, "1", None, None, false).await })
}

/// `set` completes, successfully, within [`SHORT`].
async fn done_within_short(set: JoinHandle<Result<(), Error>>) {
    tokio::time::timeout(SHORT, set)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn proxy_stalls_one_direction() {
    let server = Server::private();
    let raw = server.raw().await;
    let proxy = Proxy::start(server.port).await;
    let client = raw_client(&proxy.url(), true).await;

    // Replies held: the server runs the SET, the client hears nothing.
    proxy.stall_to_client();
    let mut set = spawn_set(&client, "a");
    eventually("the SET reached the server", || async {
        raw.exists::<i64, _>("a").await.unwrap() == 1
    })
    .await;
    assert!(tokio::time::timeout(Duration::from_millis(200), &mut set)
        .await
        .is_err());
    proxy.resume();
    done_within_short(set).await;

    // Requests held: the server never sees the SET until resumed.
    proxy.stall_to_server();
    let mut set = spawn_set(&client, "b");
    assert!(tokio::time::timeout(Duration::from_millis(200), &mut set)
        .await
        .is_err());
    assert_eq!(raw.exists::<i64, _>("b").await.unwrap(), 0);
    proxy.resume();
    done_within_short(set).await;
    assert_eq!(raw.exists::<i64, _>("b").await.unwrap(), 1);
}

#[tokio::test]
async fn proxy_delay_adds_latency() {
    let server = Server::private();
    let proxy = Proxy::start(server.port).await;
    let client = raw_client(&proxy.url(), true).await;
    proxy.set_delay(Duration::from_millis(150));
    let started = Instant::now();
    let _: Option<String> = client.get("k").await.unwrap();
    // 150 ms each way
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    proxy.set_delay(Duration::ZERO);
    let started = Instant::now();
    let _: Option<String> = client.get("k").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn proxy_cut_drops_connections_and_fred_reconnects() {
    let server = Server::private();
    let proxy = Arc::new(Proxy::start(server.port).await);
    let client = raw_client(&proxy.url(), true).await;
    let mut reconnected = client.reconnect_rx();
    assert_eq!(proxy.connections(), 1);

    // Refusing new connections first makes the drop observable as 0.
    proxy.refuse(true);
    proxy.cut();
    proxy.wait_connections(0, SHORT).await;
    // Each reconnection attempt is accepted, then closed at once.
    let err = try_raw_client(&proxy.url()).await;
    assert!(err.is_err(), "a refused connect succeeded");
    assert_eq!(proxy.connections(), 0);

    proxy.refuse(false);
    tokio::time::timeout(SHORT, reconnected.recv())
        .await
        .expect("fred reconnects once the proxy accepts again")
        .unwrap();
    proxy.wait_connections(1, SHORT).await;
    let _: () = client.set("k", "v", None, None, false).await.unwrap();

    // A plain cut: the connection drops and fred comes back by itself.
    proxy.cut();
    tokio::time::timeout(SHORT, reconnected.recv())
        .await
        .expect("fred reconnects after a cut")
        .unwrap();
    let v: Option<String> = client.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    proxy.wait_connections(1, SHORT).await;

    // Dropping the proxy closes what is left.
    let mut errors = client.error_rx();
    drop(proxy);
    let _ = tokio::time::timeout(SHORT, errors.recv())
        .await
        .expect("the client loses its connection with the proxy");
}

/// Dropping the proxy closes its listener and both sides of every connection:
/// its tasks are gone.
#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let server = Server::private();
    let raw = server.raw().await;
    let proxy = Proxy::start(server.port).await;
    let port = proxy.port();
    let _a = raw_client(&proxy.url(), false).await;
    let _b = raw_client(&proxy.url(), false).await;
    proxy.stall(); // even stalled connections close
    assert_eq!(proxy.connections(), 2);
    assert_eq!(server_clients(&raw).await, 3);
    drop(proxy);
    eventually("the upstream connections close", || async {
        server_clients(&raw).await == 1
    })
    .await;
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err());
}

/// Connections the server has, per CLIENT LIST.
async fn server_clients(raw: &fred::clients::Client) -> usize {
    let list: String = raw
        .custom(fred::cmd!("CLIENT"), vec!["LIST"])
        .await
        .unwrap();
    list.lines().filter(|l| !l.trim().is_empty()).count()
}

#[tokio::test]
async fn restart_keeps_the_port_and_loses_the_data() {
    let mut server = Server::private();
    let port = server.port;
    let client = raw_client(&server.url, true).await;
    let _: () = client.set("k", "v", None, None, false).await.unwrap();

    server.restart();
    assert_eq!(server.port, port);
    assert!(server.is_running());
    // The raw client reconnects to the new, empty server.
    eventually("the client reads from the restarted server", || async {
        matches!(client.get::<Option<String>, _>("k").await, Ok(None))
    })
    .await;

    server.kill();
    assert!(!server.is_running());
    assert!(try_raw_client(&server.url).await.is_err());
    server.start_again();
    let fresh = server.raw().await;
    assert_eq!(fresh.exists::<i64, _>("k").await.unwrap(), 0);
}

#[tokio::test]
async fn client_kill_counts_by_type() {
    let server = Server::private();
    let raw = server.raw().await;
    let plain = [server.raw().await, server.raw().await];
    let subscriber = server.raw().await;
    subscriber.subscribe("some-channel").await.unwrap();
    assert_eq!(client_kill(&raw, ClientType::Pubsub).await, 1);
    assert_eq!(client_kill(&raw, ClientType::Normal).await, 2);
    assert_eq!(client_kill(&raw, ClientType::Normal).await, 0);
    // SKIPME: the killer's own connection is untouched.
    let _: () = raw.set("k", "v", None, None, false).await.unwrap();
    drop(plain);
}

#[tokio::test]
async fn client_pause_delays_writes() {
    let server = Server::private();
    let raw = server.raw().await;
    let writer = server.raw().await;

    // ALL: a write waits for the pause to end.
    client_pause(&raw, Duration::from_millis(400), PauseMode::All).await;
    let started = Instant::now();
    let _: () = writer.set("k", "1", None, None, false).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );

    // WRITE: reads go on, a write waits until unpaused.
    client_pause(&raw, Duration::from_secs(30), PauseMode::Write).await;
    let mut set = tokio::spawn({
        let writer = writer.clone();
        async move { writer.set::<(), _, _>("k", "2", None, None, false).await }
    });
    let v: Option<String> = raw.get("k").await.unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    assert!(tokio::time::timeout(Duration::from_millis(200), &mut set)
        .await
        .is_err());
    client_unpause(&raw).await;
    let set = common::within(SHORT, "the write runs once unpaused", set).await;
    set.unwrap();
}

#[tokio::test]
async fn script_flush_empties_the_cache() {
    let server = Server::private();
    let raw = server.raw().await;
    let sha: String = raw.script_load("return 1").await.unwrap();
    let exists: Vec<i64> = raw.script_exists(&sha).await.unwrap();
    assert_eq!(exists, vec![1]);
    script_flush(&raw).await;
    let exists: Vec<i64> = raw.script_exists(&sha).await.unwrap();
    assert_eq!(exists, vec![0]);
}

/// A child of every kind holds its lock; killed, it leaves the lock to expire
/// within the watchdog timeout.
#[tokio::test]
async fn a_killed_child_holder_leaves_its_lock_to_expire() {
    let server = Server::private();
    let raw = server.raw().await;
    let watchdog_ms = 1_000;
    let mut children = Vec::new();
    for kind in common::fault::KINDS {
        let name = unique(kind);
        let child = ChildProcess::spawn(Job::Hold {
            url: server.url.clone(),
            kind: kind.into(),
            name: name.clone(),
            watchdog_ms,
        });
        children.push((name, child));
    }
    for (name, child) in &mut children {
        let line = child.wait_line("HELD ", Duration::from_secs(20)).await;
        let field = line.strip_prefix("HELD ").unwrap();
        assert!(
            raw.hexists::<bool, _, _>(name.as_str(), field)
                .await
                .unwrap(),
            "{name}: no field {field}"
        );
        let ttl: i64 = raw.pttl(name.as_str()).await.unwrap();
        assert!(ttl > 0 && ttl <= watchdog_ms as i64, "{name}: PTTL {ttl}");
    }
    let started = Instant::now();
    for (_, child) in &mut children {
        child.kill();
    }
    for (name, _) in &children {
        let deadline = started + Duration::from_millis(watchdog_ms + 2_000);
        loop {
            if raw.exists::<i64, _>(name.as_str()).await.unwrap() == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "{name} outlived its holder");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Three processes, 200 increments each under one RLock: none is lost.
#[tokio::test]
async fn children_exclude_each_other() {
    let server = Server::private();
    let raw = server.raw().await;
    let name = unique("counted");
    let counter_key = unique("counter");
    let mut children: Vec<ChildProcess> = (0..3)
        .map(|_| {
            ChildProcess::spawn(Job::Increment {
                url: server.url.clone(),
                kind: "lock".into(),
                name: name.clone(),
                counter_key: counter_key.clone(),
                rounds: 200,
            })
        })
        .collect();
    for child in &mut children {
        child.wait_done(Duration::from_secs(30)).await;
    }
    let count: i64 = raw.get(&counter_key).await.unwrap();
    assert_eq!(count, 600);
    assert_eq!(raw.exists::<i64, _>(name.as_str()).await.unwrap(), 0);
}
