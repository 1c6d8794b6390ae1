//! The read-write lock (docs/PROTOCOL.md §5): exact Redis state, sharing and
//! exclusion across clients, the write → read downgrade, dead readers,
//! read renewal, and interop with a simulated Java holder. Readers beside
//! writers under random cancellation, and dropped waiters, are checked with
//! every other kind in kinds.rs.
#[path = "rwlock/java.rs"]
mod java;
#[path = "rwlock/renewal.rs"]
mod renewal;
#[path = "rwlock/sharing.rs"]
mod sharing;
#[path = "rwlock/state.rs"]
mod state;

use std::collections::HashMap;
use std::time::Duration;

use crate::common::Fixture;
use fred::prelude::*;
use redisson_lock::{Client, Owner};

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `<clientId>:<owner>`, the read field (docs/PROTOCOL.md §1.3).
fn field(client: &Client, owner: Owner) -> String {
    format!("{}:{}", client.id().hyphenated(), owner)
}

/// `sfx(N, field) ":rwlock_timeout:" k` (docs/PROTOCOL.md §5.1, §1.4).
fn timeout_key(name: &str, field: &str, k: u32) -> String {
    if name.contains('{') {
        format!("{name}:{field}:rwlock_timeout:{k}")
    } else {
        format!("{{{name}}}:{field}:rwlock_timeout:{k}")
    }
}

fn channel_of(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

fn assert_ttl(ttl: i64, range: std::ops::RangeInclusive<i64>, what: &str) {
    assert!(range.contains(&ttl), "{what}: PTTL {ttl} not in {range:?}");
}

/// A raw subscriber on one channel, as a Java waiter would listen.
struct Listener {
    _client: fred::clients::Client,
    rx: tokio::sync::broadcast::Receiver<fred::types::Message>,
    channel: String,
}

impl Listener {
    async fn new(raw: &fred::clients::Client, channel: &str) -> Listener {
        let client = raw.clone_new();
        client.init().await.unwrap();
        let rx = client.message_rx();
        client.subscribe(channel.to_string()).await.unwrap();
        Listener {
            _client: client,
            rx,
            channel: channel.to_string(),
        }
    }

    /// The next payload published on the channel.
    async fn next(&mut self) -> String {
        let message = tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
            .await
            .expect("a message within 5 s")
            .unwrap();
        assert_eq!(&*message.channel, self.channel);
        message.value.as_string().unwrap()
    }
}

async fn latches_gone(fx: &Fixture, name: &str) {
    let pattern = if name.contains('{') {
        format!("redisson_unlock_latch:{name}:*")
    } else {
        format!("redisson_unlock_latch:{{{name}}}:*")
    };
    fx.until_no_keys("unlock latches deleted", &pattern).await;
}
