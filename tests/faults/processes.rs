//! A holder in another process is SIGKILLed while a waiter here waits: the
//! waiter gets the lock once the dead holder's lease (its 1 s watchdog
//! timeout, no longer renewed) runs out, well before 10 s, and nothing of the
//! dead holder is left behind (hash field, fair queue entry or deadline, read
//! timeout key, subscription).
use crate::common;

use std::time::Duration;

use crate::common::fault::{acquire, ChildProcess, Job};
use crate::common::{eventually, unique, wait_numsub, Server};
use fred::prelude::*;
use redisson_lock::{AnyKind, Client, LockGuard};
use tokio::time::Instant;

/// The child's `lock_watchdog_timeout`: its lock expires at most this long
/// after its last renewal.
const CHILD_WATCHDOG: Duration = Duration::from_millis(1_000);
/// Slack on top of the lease for the waiter to notice and take the lock.
const MARGIN: Duration = Duration::from_millis(1_500);

/// What the waiter takes for a child holding `kind`: the same kind, except
/// a reader, which a writer waits for (another reader would not wait).
async fn wait_for(
    client: &Client,
    kind: &str,
    name: &str,
) -> redisson_lock::Result<LockGuard<AnyKind>> {
    let kind = if kind == "read" { "write" } else { kind };
    acquire(client, kind, name).await
}

/// `KEYS *` with each key's contents (hash fields and values, list or
/// sorted-set members), as text to search for the dead holder's client id.
/// Every key but the client registry's (docs/PROTOCOL.md §9.6): a killed
/// process's entry stays until its TTL, as its holds would without a
/// waiter; it names no lock.
async fn state(raw: &fred::clients::Client) -> Vec<String> {
    common::describe_keys(raw, |key| !key.starts_with("redisson_lock_client:")).await
}

async fn killed_holder(kind: &str) {
    let server = Server::private();
    let raw = server.raw().await;
    let name = unique(&format!("killed-{kind}"));
    let mut child = ChildProcess::spawn(Job::Hold {
        url: server.url.clone(),
        kind: kind.into(),
        name: name.clone(),
        watchdog_ms: CHILD_WATCHDOG.as_millis() as u64,
    });
    let held = child.wait_line("HELD ", Duration::from_secs(20)).await;
    let child_field = held["HELD ".len()..].to_owned();
    // `<clientId>:<ownerId>[:write]`: everything the child writes names its client id.
    let child_id = child_field[..36].to_owned();
    let count: Option<String> = raw.hget(&name, &child_field).await.unwrap();
    assert_eq!(
        count.as_deref(),
        Some("1"),
        "{kind}: the child holds the lock"
    );
    // Its watchdog renews it: the TTL goes up again at least once.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last: i64 = raw.pttl(&name).await.unwrap();
    loop {
        let now: i64 = raw.pttl(&name).await.unwrap();
        if now > last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{kind}: the child never renewed its lock"
        );
        last = now;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The child's `guard.lost()` watches its hold through the lock's
    // channel: one subscriber before the waiter comes, two once it waits.
    let channel = |prefix: &str| format!("{prefix}:{{{name}}}");
    let shared = match kind {
        "lock" | "fenced" => Some(channel("redisson_lock__channel")),
        "read" | "write" => Some(channel("redisson_rwlock")),
        _ => None,
    };
    if let Some(shared) = &shared {
        wait_numsub(&raw, shared, 1).await;
    }

    let client = server.client().await;
    let waiter = tokio::spawn({
        let (client, kind, name) = (client.clone(), kind.to_owned(), name.clone());
        async move {
            let guard = wait_for(&client, &kind, &name).await;
            (Instant::now(), guard)
        }
    });
    // Wait until the waiter waits (subscribed; for a fair lock, queued too).
    // A spin lock's waiter has nothing to observe: it polls with back-off.
    match (kind, &shared) {
        (_, Some(shared)) => wait_numsub(&raw, shared, 2).await,
        ("fair", _) => {
            let queue = channel("redisson_lock_queue");
            eventually("the waiter queued", || {
                let (raw, queue) = (raw.clone(), queue.clone());
                async move { raw.llen::<i64, _>(&queue).await.unwrap() == 1 }
            })
            .await;
            let queued: Vec<String> = raw.lrange(&queue, 0, -1).await.unwrap();
            let waiter_channel = format!("{}:{}", channel("redisson_lock__channel"), queued[0]);
            wait_numsub(&raw, &waiter_channel, 1).await;
        }
        _ => {}
    }
    assert!(
        !waiter.is_finished(),
        "{kind}: the waiter got the lock while the child held it"
    );

    let killed = Instant::now();
    child.kill();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap_or_else(|_| panic!("{kind}: the waiter had no lock 10 s after the kill"))
        .expect("waiter task");
    let guard = guard.expect("the waiter takes the lock");
    let after = acquired - killed;
    println!("{kind}: lock taken {after:?} after the holder was killed");
    assert!(
        after < CHILD_WATCHDOG + MARGIN,
        "{kind}: took {after:?} after the kill (lease {CHILD_WATCHDOG:?})"
    );

    // Nothing of the child is left: no field, queue entry, deadline, read
    // timeout key (they carry its client id), nor subscription.
    let left = state(&raw).await;
    let of_child: Vec<&String> = left.iter().filter(|s| s.contains(&child_id)).collect();
    assert!(
        of_child.is_empty(),
        "{kind}: the dead holder's state is left: {of_child:#?}"
    );
    let fields: Vec<String> = raw.hkeys(&name).await.unwrap();
    let expected: Vec<&str> = match kind {
        "read" | "write" => vec!["mode", guard.field()],
        _ => vec![guard.field()],
    };
    let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    fields.sort_unstable();
    let mut expected = expected;
    expected.sort_unstable();
    assert_eq!(fields, expected, "{kind}: only the waiter holds: {left:#?}");
    let channels: Vec<String> = raw
        .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", "*"])
        .await
        .unwrap();
    assert!(
        channels.iter().all(|c| !c.contains(&child_id)),
        "{kind}: the dead holder is still subscribed: {channels:?}"
    );

    guard.unlock().await.unwrap();
    eventually("nothing left after the waiter's unlock", || {
        let raw = raw.clone();
        async move {
            let keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
            // The tokens outlive every hold; the live clients' registry
            // entries are theirs (docs/PROTOCOL.md §9.6).
            keys.iter().all(|k| {
                k.starts_with("redisson_lock_token:") || k.starts_with("redisson_lock_client:")
            })
        }
    })
    .await;
}

macro_rules! killed_holder_tests {
    ($($test:ident: $kind:literal;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                killed_holder($kind).await;
            }
        )*
    };
}

killed_holder_tests! {
    killed_rlock_holder: "lock";
    killed_fair_holder: "fair";
    killed_reader: "read";
    killed_writer: "write";
    killed_spin_holder: "spin";
    killed_fenced_holder: "fenced";
}
