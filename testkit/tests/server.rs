//! The kit's own checks: a private server from a named binary, with extra
//! arguments kept across a restart.

use fred::prelude::*;
use redisson_lock_testkit::{Options, Server};

async fn maxclients(server: &Server) -> String {
    let raw = server.raw().await;
    let reply: Vec<String> = raw
        .custom(fred::cmd!("CONFIG"), vec!["GET", "maxclients"])
        .await
        .unwrap();
    let _ = raw.quit().await;
    reply[1].clone()
}

#[tokio::test]
async fn a_named_binary_with_arguments_kept_across_a_restart() {
    let mut server = Options::new()
        .program("redis-server")
        .args(&["--maxclients", "77"])
        .start();
    assert!(server.is_private() && server.is_running());
    assert_eq!(maxclients(&server).await, "77");
    let (port, pid) = (server.port, server.pid());
    server.restart();
    assert_eq!(server.port, port);
    assert_ne!(server.pid(), pid);
    assert_eq!(maxclients(&server).await, "77");
    server.kill();
    assert!(!server.is_running() && server.pid().is_none());
}

#[test]
#[should_panic(expected = "no-such-redis-server not found")]
fn a_missing_binary_says_so() {
    Options::new().program("no-such-redis-server").start();
}

/// A port picked free can be bound by another test's server before ours
/// binds it: the kit tells its own process from the one answering there
/// (by the process id in `INFO server`).
#[test]
fn a_port_taken_by_another_server_is_told_apart() {
    use redisson_lock_testkit::process::{wait_serving, Process, Serving};
    let mut other = Options::new().start();
    let port = other.port.to_string();
    let args = ["--port", port.as_str(), "--save", "", "--appendonly", "no"];
    let mut ours = Process::spawn("redis-server", &args).unwrap();
    let within = std::time::Duration::from_secs(10);
    assert_eq!(
        wait_serving(&mut ours, other.port, None, within),
        Serving::Taken
    );
    drop(ours); // it may still bind once the other is gone
    other.kill();
    let mut ours = Process::spawn("redis-server", &args).unwrap();
    assert_eq!(
        wait_serving(&mut ours, other.port, None, within),
        Serving::Ours
    );
}
