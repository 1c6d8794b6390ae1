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
