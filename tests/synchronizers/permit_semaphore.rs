//! `PermitExpirableSemaphore` (Redisson's RPermitExpirableSemaphore,
//! docs/PROTOCOL.md §7.2): permit ids as Java writes and shows them, the timeout
//! zset's scores and sentinel, the reclaim of expired permits (which wakes a
//! waiter), the exact state after every operation, Java-shaped scripts
//! written here by hand, lost replies, bad input. The limit under random
//! steps, dropped waiters and outages: `alike.rs`; the blocking form:
//! `blocking.rs`.
#[path = "permit_semaphore/failures.rs"]
mod failures;
#[path = "permit_semaphore/java.rs"]
mod java;
#[path = "permit_semaphore/renewed.rs"]
mod renewed;
#[path = "permit_semaphore/state.rs"]
mod state;

use crate::common::Fixture;
use crate::semaphore_channel as channel;
use fred::prelude::*;

const NEVER: &str = "922337203685477";

fn timeouts(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn get(fx: &Fixture, key: &str) -> Option<String> {
    fx.raw.get(key).await.unwrap()
}

/// `ZADD key score member`.
async fn zadd(fx: &Fixture, key: &str, score: f64, member: &str) {
    let _: i64 = fx
        .raw
        .zadd(key, None, None, false, false, vec![(score, member)])
        .await
        .unwrap();
}

/// The zset's members (raw bytes) and scores (as Redis prints them).
async fn zset(fx: &Fixture, key: &str) -> Vec<(Vec<u8>, String)> {
    let reply: Value = fx
        .raw
        .custom(
            fred::cmd!("ZRANGE"),
            vec![
                key.to_string(),
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
        )
        .await
        .unwrap();
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    items
        .chunks(2)
        .map(|pair| {
            let member = match &pair[0] {
                Value::Bytes(b) => b.to_vec(),
                Value::String(s) => s.as_bytes().to_vec(),
                other => panic!("{other:?}"),
            };
            (member, pair[1].as_string().unwrap())
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
