//! The test kit of `redisson-lock`: private Redis deployments for tests,
//! examples and the bench, and the tools to break them. Dev-only, never
//! published.
//!
//! * [`Server`]: `REDIS_URL`, or a private `redis-server` (the first on
//!   `PATH`, or any binary given through [`Options`]) on a free loopback
//!   port, no persistence, killed on drop; it can be killed and restarted.
//! * [`topology`]: a Redis Cluster, a Sentinel set-up and a replicated
//!   master, as local processes (or `REDIS_CLUSTER_URL` /
//!   `REDIS_SENTINEL_URL`).
//! * [`tls`]: test certificates and a TLS-only server (skipped, or failed
//!   under `REDIS_TLS_REQUIRED`, when `redis-server` has no TLS).
//! * [`proxy`]: a TCP proxy that stalls, delays, cuts or refuses
//!   connections; [`faults`]: Redis-side faults (`CLIENT KILL`, `CLIENT
//!   PAUSE`, `SCRIPT FLUSH`).
//! * [`child`]: code in another process (this test binary run again);
//!   [`process`]: child processes killed on drop, frozen, watched.
//! * [`java`]: the real Java Redisson client as a peer process, driven line
//!   by line.
//! * [`inspect`]: looking at Redis state, and bounded waits.
//!
//! ```no_run
//! use redisson_lock_testkit::{unique, Server};
//!
//! # async fn example() {
//! let server = Server::start(); // REDIS_URL, or a private redis-server
//! let client = server.client().await;
//! let guard = client.lock(&unique("doc")).unwrap().lock().await.unwrap();
//! guard.unlock().await.unwrap();
//! # }
//! ```
#![warn(missing_docs)]

pub mod child;
pub mod faults;
pub mod inspect;
pub mod java;
pub mod process;
pub mod proxy;
mod server;
pub mod tls;
pub mod topology;

use std::net::TcpListener;

pub use inspect::{
    command_calls, describe_keys, eventually, info_field, numsub, raw_client,
    supports_sharded_pubsub, wait_numsub,
};
pub use server::{Options, Server};

/// A loopback port that was free a moment ago (another process may take it
/// before you bind it: check what answers there).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A name unique to this test run: `prefix-<uuid>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
