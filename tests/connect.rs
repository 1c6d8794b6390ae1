//! `Client::connect`: both connections at once, within `config.timeout`.
//!
//! * It never fails against a healthy server (connect + drop in a loop).
//! * Against a port that accepts and never answers it fails with
//!   `Error::Connection` within the timeout, not twice it.
//! * Against a port nobody listens on it fails fast, with a typed error.
//! * Against a proxy that refuses connections it fails within the timeout,
//!   and connects again once the proxy lets connections through.
//!
//! The long variant: `cargo test --test connect -- --ignored connect_and_drop_soak --nocapture`.
mod common;

#[path = "connect/auth.rs"]
mod auth;
#[path = "connect/permissions.rs"]
mod permissions;

use std::time::{Duration, Instant};

use common::fault::Proxy;
use common::{free_port, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config, Error};

/// Connect and drop `rounds` clients one after the other (default settings);
/// every connect must succeed. Returns how long it took.
async fn connect_and_drop(rounds: usize) -> Duration {
    let server = Server::private();
    let started = Instant::now();
    let mut failures = Vec::new();
    for round in 0..rounds {
        match Client::connect_with(Config::from_url(&server.url).unwrap()).await {
            Ok(client) => drop(client),
            Err(e) => failures.push(format!("round {round}: {e:?}")),
        }
    }
    let took = started.elapsed();
    println!(
        "connect + drop x{rounds}: {took:?}, {} failure(s)",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {rounds} connects to a healthy server failed: {failures:#?}",
        failures.len()
    );
    // Every dropped client closes both of its connections (in the
    // background): only the inspecting connection is left.
    let raw = server.raw().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let clients = connected_clients(&raw).await;
        if clients == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{clients} connections still open 20 s after dropping every client"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_drop_never_fails_against_a_healthy_server() {
    connect_and_drop(2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: 5 000 connects; run by hand"]
async fn connect_and_drop_soak() {
    connect_and_drop(5_000).await;
}

/// `connected_clients` of `INFO clients`.
async fn connected_clients(raw: &fred::clients::Client) -> u64 {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["clients"])
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("connected_clients in INFO clients")
}

/// A port that accepts connections and never answers (nor closes them).
async fn silent_listener() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream); // kept open, never read, never written
        }
    });
    (port, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_within_the_timeout() {
    let (port, listener) = silent_listener().await;
    let timeout = Duration::from_millis(500);
    for _ in 0..3 {
        let config = Config::from_url(&format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .timeout(timeout);
        let started = Instant::now();
        // The outer bound only keeps a hang from hanging the test.
        let outcome = tokio::time::timeout(Duration::from_secs(10), Client::connect_with(config))
            .await
            .expect("connect returned within 10 s");
        let took = started.elapsed();
        println!("silent server: failed after {took:?}");
        match outcome {
            Err(Error::Connection(_)) => {}
            Err(other) => panic!("expected Error::Connection, got {other:?}"),
            Ok(_) => panic!("connected to a server that never answers"),
        }
        assert!(
            took < timeout + Duration::from_millis(400),
            "failed after {took:?}, timeout {timeout:?}"
        );
    }
    listener.abort();
}

/// `Client::connect_with(config)` returns within 10 s, with a transient
/// `Error::Connection` (else the test fails with `connected` if it connected):
/// how long it took. Printed as `what`.
async fn connect_fails(what: &str, config: Config, connected: &str) -> Duration {
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(10), Client::connect_with(config))
        .await
        .expect("connect returned within 10 s");
    let took = started.elapsed();
    println!(
        "{what}: failed after {took:?}: {:?}",
        outcome.as_ref().err()
    );
    match outcome {
        Err(e @ Error::Connection(_)) => assert!(e.is_transient()),
        Err(other) => panic!("expected Error::Connection, got {other:?}"),
        Ok(_) => panic!("{connected}"),
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_listening_fails_fast_with_a_typed_error() {
    // A port that was free a moment ago; check nothing answers there.
    let port = free_port();
    let timeout = Duration::from_secs(3);
    let config = Config::from_url(&format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .timeout(timeout);
    let connected = format!("connected to port {port}, where nobody should listen");
    let took = connect_fails("nobody listening", config, &connected).await;
    assert!(
        took < Duration::from_secs(1),
        "a refused connection took {took:?} to report (timeout {timeout:?})"
    );
}

/// A refused connection names the server it tried, `host:port`, in its
/// text and through `Error::server` (issue 29: "Connection refused" alone
/// did not say where).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_names_the_server() {
    let port = free_port();
    let config = Config::from_url(&format!("redis://127.0.0.1:{port}")).unwrap();
    let error = match tokio::time::timeout(Duration::from_secs(10), Client::connect_with(config))
        .await
        .expect("connect returned within 10 s")
    {
        Err(e) => e,
        Ok(_) => panic!("connected to port {port}, where nobody should listen"),
    };
    let address = format!("127.0.0.1:{port}");
    let text = error.to_string();
    println!("{text}");
    assert!(
        text.starts_with(&format!("Redis connection error at {address}: ")),
        "{text:?} does not name {address}"
    );
    assert_eq!(error.server(), Some(address.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_proxy_fails_within_the_timeout_then_connects_again() {
    let server = Server::private();
    let proxy = Proxy::start(server.port).await;
    let timeout = Duration::from_millis(500);
    let config = || Config::from_url(&proxy.url()).unwrap().timeout(timeout);

    proxy.refuse(true);
    let connected = "connected through a proxy that refuses every connection";
    let took = connect_fails("refusing proxy", config(), connected).await;
    assert!(
        took < timeout + Duration::from_millis(400),
        "failed after {took:?}, timeout {timeout:?}"
    );

    proxy.refuse(false);
    let client = tokio::time::timeout(Duration::from_secs(10), Client::connect_with(config()))
        .await
        .expect("connect returned within 10 s")
        .expect("connects once the proxy lets connections through");
    let guard = client.lock("after-refusal").unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
}

/// A connect dropped while the server does not answer (the proxy stalls):
/// its connections are closed, not left reconnecting for the life of the
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connect_closes_its_connections() {
    let server = Server::private();
    let proxy = Proxy::start(server.port).await;
    proxy.stall();
    let config = Config::from_url(&proxy.url())
        .unwrap()
        .timeout(Duration::from_secs(30));
    let connecting = tokio::spawn(Client::connect_with(config));
    // Both connections reached the proxy, whose server never answers.
    proxy.wait_connections(2, Duration::from_secs(5)).await;
    connecting.abort();
    let _ = connecting.await;
    proxy.resume();
    proxy.wait_connections(0, Duration::from_secs(5)).await;
}
