//! Every removal heard by default, with no server setting: client tracking
//! (issue 34 item 3, docs/PROTOCOL.md §2.10). The clients here have the
//! default `Config` (no keyspace notifications, no hold check), so without
//! tracking a removal nobody publishes is heard only at the next renewal,
//! 10 s after the acquisition.

use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::Value;
use redisson_lock::LostReason;

use crate::common::{eventually, unique, Server};
use crate::{every_kind, told_after};

/// Far below the first renewal (10 s with the default 30 s watchdog): only
/// tracking can tell this fast.
const HEARD: Duration = Duration::from_millis(1500);

/// A field of `INFO stats`.
async fn stat(raw: &fred::clients::Client, field: &str) -> i64 {
    let info: String = raw.custom(fred::cmd!("INFO"), vec!["stats"]).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO stats without {field}"))
}

/// Wait until the server tracks more keys than `before`.
async fn tracked_beyond(raw: &fred::clients::Client, before: i64) {
    eventually("the held key is tracked", || async {
        stat(raw, "tracking_total_keys").await > before
    })
    .await;
}

/// Wait until the holder's watch has read its key, so that from now on only
/// an invalidation can tell it of a change: until the server tracks more
/// keys than right after the acquisition (which itself leaves tracked the
/// keys it reads and does not write afterwards, a number that differs
/// between kinds and servers). If the watch read the key before that count
/// was taken, the count never grows: after a second, the key has long been
/// read (the watch starts 10 ms after the acquisition), so go on. Either way
/// a change made after this is heard only by tracking within [`HEARD`].
async fn watched(raw: &fred::clients::Client, after_acquisition: i64) {
    let start = Instant::now();
    while stat(raw, "tracking_total_keys").await <= after_acquisition
        && start.elapsed() < Duration::from_secs(1)
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The client ids of the connections that track, with where they redirect
/// (`CLIENT LIST`: flag `t`, field `redir`).
async fn trackers(raw: &fred::clients::Client) -> Vec<(i64, i64)> {
    let list: String = raw
        .custom(fred::cmd!("CLIENT"), vec!["LIST"])
        .await
        .unwrap();
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                    .map(str::to_owned)
            };
            let flags = field("flags")?;
            flags.contains('t').then_some(())?;
            Some((field("id")?.parse().ok()?, field("redir")?.parse().ok()?))
        })
        .collect()
}

/// Every kind hears each way a key can be removed or replaced by someone
/// else, none of which publishes on a lock channel: `DEL`, `UNLINK`, an
/// expiry, `RENAME` away, `MOVE` to another database, `FLUSHDB` and
/// `FLUSHALL`, each well before the renewal.
#[tokio::test]
async fn every_kind_hears_every_removal_by_default() {
    let server = Server::private();
    let client = server.client().await;
    let raw = server.raw().await;
    let removals: [(&str, &[&str]); 7] = [
        ("DEL", &[]),
        ("UNLINK", &[]),
        ("PEXPIRE", &["100"]),
        ("RENAME", &["elsewhere"]),
        ("MOVE", &["1"]),
        ("FLUSHDB", &[]),
        ("FLUSHALL", &[]),
    ];
    for (command, args) in removals {
        let name = unique(&format!("tracking-{command}"));
        for (kind, lock) in every_kind(&client, &name) {
            let key = lock.name().to_owned();
            let guard = lock.lock().await.unwrap();
            watched(&raw, stat(&raw, "tracking_total_keys").await).await;
            let mut argv: Vec<Value> = Vec::new();
            if !command.starts_with("FLUSH") {
                argv.push(key.clone().into());
            }
            argv.extend(args.iter().map(|a| Value::from(*a)));
            let _: Value = raw
                .custom(
                    fred::types::CustomCommand::new_static(
                        command,
                        fred::types::ClusterHash::FirstKey,
                        false,
                    ),
                    argv,
                )
                .await
                .unwrap();
            let (after, reason) = told_after(&guard, HEARD, &format!("{kind} {command}")).await;
            assert_eq!(reason, LostReason::Gone, "{kind} {command}");
            println!("{kind}: {command} heard after {after:?}");
            let _: Value = raw
                .custom(fred::cmd!("FLUSHALL"), Vec::<Value>::new())
                .await
                .unwrap();
        }
    }
}

/// Our own writes do not blind the watch: a re-entry, a partial release and
/// a renewal each write the key (which makes the server forget it for this
/// client), and a `DEL` after each is still heard at once.
#[tokio::test]
async fn our_own_writes_keep_the_key_tracked() {
    let server = Server::private();
    // Renewed every 2 s: the DEL below comes after the first renewal and
    // long before the second.
    let client = server
        .client_with(|c| c.lock_watchdog_timeout(Duration::from_secs(6)))
        .await;
    let raw = server.raw().await;
    for step in ["re-entry", "partial release", "renewal"] {
        let name = unique(&format!("tracking-own-{step}"));
        for (kind, lock) in every_kind(&client, &name) {
            let key = lock.name().to_owned();
            let guard = lock.lock().await.unwrap();
            watched(&raw, stat(&raw, "tracking_total_keys").await).await;
            let mut extra = None;
            match step {
                "re-entry" => extra = Some(guard.reenter().await.unwrap()),
                "partial release" => {
                    let second = guard.reenter().await.unwrap();
                    second.unlock().await.unwrap();
                }
                _ => {
                    // Renewed once the key lives longer than it would have
                    // without (well past rounding).
                    let (first, at) = (raw.pttl::<i64, _>(&key).await.unwrap(), Instant::now());
                    eventually("the watchdog renewed the hold", || async {
                        let left = raw.pttl::<i64, _>(&key).await.unwrap();
                        left > first - at.elapsed().as_millis() as i64 + 500
                    })
                    .await;
                }
            }
            let _: i64 = raw.del(&key).await.unwrap();
            let (after, reason) = told_after(&guard, HEARD, &format!("{kind} after {step}")).await;
            assert_eq!(reason, LostReason::Gone, "{kind} after {step}");
            println!("{kind}: DEL after {step} heard after {after:?}");
            drop(extra);
            drop(guard);
            let _: Value = raw
                .custom(fred::cmd!("FLUSHALL"), Vec::<Value>::new())
                .await
                .unwrap();
        }
    }
}

/// Tracking is per connection: after `CLIENT KILL` of the command
/// connection, then of the listener, it is turned on again with the new
/// connections and every held key read again, so a `DEL` is still heard at
/// once.
#[tokio::test]
async fn tracking_comes_back_after_either_connection_is_killed() {
    let server = Server::private();
    let client = server.client().await;
    let raw = server.raw().await;
    let lock = client.lock(&unique("tracking-kill")).unwrap();
    for victim in ["command connection", "listener"] {
        let guard = lock.lock().await.unwrap();
        tracked_beyond(&raw, 0).await;
        let [(command, listener)] = trackers(&raw).await[..] else {
            panic!("one tracking connection expected");
        };
        let killed = if victim == "listener" {
            listener
        } else {
            command
        };
        let _: Value = raw
            .custom(
                fred::cmd!("CLIENT"),
                vec![Value::from("KILL"), "ID".into(), killed.into()],
            )
            .await
            .unwrap();
        eventually(
            "tracking is on again, redirected to a live listener",
            || async { matches!(trackers(&raw).await[..], [(c, l)] if c != killed && l != killed) },
        )
        .await;
        // Every held key is read again once tracking is back.
        tracked_beyond(&raw, 0).await;
        let _: i64 = raw.del(lock.name()).await.unwrap();
        let (after, reason) = told_after(&guard, HEARD, victim).await;
        assert_eq!(reason, LostReason::Gone, "{victim}");
        println!("after a kill of the {victim}: DEL heard after {after:?}");
        let _: Value = raw
            .custom(fred::cmd!("FLUSHALL"), Vec::<Value>::new())
            .await
            .unwrap();
    }
}
