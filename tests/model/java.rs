//! The real Java Redisson as owners of a case: one JVM per test
//! (`interop/java/RedissonPeer.java`, driven through `testkit/src/java/` as
//! `tests/java/` does), whose threads `t1`, `t2` are the case's owners
//! `OWNERS`, `OWNERS + 1`. Its lock watchdog timeout is [`JAVA_WATCHDOG`]:
//! no Java renewal runs within a test, and a Java hold without a lease
//! outlives the case. Each peer command creates a fresh Redisson lock
//! object, so an unlock that leaves holds sets `internalLockLeaseTime`,
//! which is then that watchdog timeout (docs/PROTOCOL.md §2.3).

use std::time::Duration;

use crate::common::java::{Peer, Redisson, Status, Steps, Topology};

use super::{JAVA_OWNERS, JAVA_WATCHDOG, OWNERS};

/// The Java peer of a test.
pub struct Java {
    peer: tokio::sync::Mutex<Peer>,
    /// The owner field of each Java owner: `javaClientId:threadId`.
    pub fields: Vec<String>,
    /// The Redisson version it runs.
    pub version: String,
    /// Whether it is Redisson 3.44 or later: an unlock of a read-write
    /// hash without `mode` replies nil (before: success) (§11.3).
    pub since_3_44: bool,
}

/// The Java thread of owner `o`, if it is a Java owner.
pub fn slot(o: usize) -> Option<usize> {
    o.checked_sub(OWNERS).filter(|&j| j < JAVA_OWNERS)
}

/// Owner `o` in a transcript: `owner1` or `java0`.
pub fn who(o: usize) -> String {
    match slot(o) {
        Some(j) => format!("java{j}"),
        None => format!("owner{o}"),
    }
}

/// A lease as the peer takes it: milliseconds, `-1` for the watchdog.
pub fn lease_arg(lease: Option<Duration>) -> String {
    lease.map_or_else(|| "-1".to_owned(), |d| d.as_millis().to_string())
}

impl Java {
    /// Start the JVM of `redisson` on the server at `url`.
    pub async fn start(redisson: &Redisson, url: &str) -> Java {
        let steps = Steps::new(format!("Redisson {}, model", redisson.version));
        let watchdog = JAVA_WATCHDOG.as_millis().to_string();
        let mut peer = Peer::start(
            redisson,
            &Topology::Single(url.to_owned()),
            &["--watchdog", &watchdog],
            &steps,
        )
        .await;
        let mut fields = Vec::new();
        for j in 0..JAVA_OWNERS {
            fields.push(peer.owner_field(&format!("t{}", j + 1)).await);
        }
        let v: Vec<u32> = redisson
            .version
            .split('.')
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        let since_3_44 = v >= vec![3, 44];
        Java {
            peer: tokio::sync::Mutex::new(peer),
            fields,
            version: redisson.version.clone(),
            since_3_44,
        }
    }

    /// Run `op` on owner `o`'s thread: its value, or the exception
    /// (`Class message`).
    pub async fn call(&self, o: usize, op: &str) -> Result<String, String> {
        let j = slot(o).expect("a Java owner");
        let pending = self
            .peer
            .lock()
            .await
            .send(&format!("t{}", j + 1), op)
            .await;
        let reply = pending.reply().await;
        match reply.status {
            Status::Ok => Ok(reply.value),
            Status::Err => Err(reply.value),
            Status::Unsupported => Err(format!("unsupported: {}", reply.value)),
        }
    }
}
