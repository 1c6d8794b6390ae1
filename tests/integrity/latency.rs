//! How long `lost()` takes to fire after a hold is removed, per kind ×
//! cause × how the client listens (RELIABILITY.md, *Hearing a loss*). A
//! measurement, not a check: it prints a table.
//!
//! `cargo test --release --test integrity -- --ignored loss_latency_table --nocapture`

use std::time::Duration;

use fred::prelude::*;
use redisson_lock::{AnyKind, Client, Lock};
use tokio::time::Instant;

use crate::common::java::{Peer, Steps, Topology};
use crate::common::{numsub, unique, Server};
use crate::every_kind;
use crate::hearing::{keyspace, NOTIFYING};

/// The watchdog of the clients measured: renewals every second, so that
/// "at the next renewal" is measured in seconds, not tens of seconds.
const WATCHDOG: Duration = Duration::from_secs(3);
/// The hold check's interval.
const CHECK: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, PartialEq)]
enum Listening {
    Plain,
    Keyspace,
    HoldCheck,
}

#[derive(Clone, Copy, PartialEq)]
enum Cause {
    Del,
    Flushall,
    RustForceUnlock,
    JavaForceUnlock,
}

impl Cause {
    fn label(self) -> &'static str {
        match self {
            Cause::Del => "DEL",
            Cause::Flushall => "FLUSHALL",
            Cause::RustForceUnlock => "force-unlock (Rust)",
            Cause::JavaForceUnlock => "force-unlock (Java 4.7)",
        }
    }
}

/// The Java object name of a kind, for the peer.
fn java_kind(kind: &str) -> &str {
    if kind == "lock" {
        "lock"
    } else {
        kind
    }
}

/// Remove the hold of `lock` (held by `guard`) by `cause`, with `lost()`
/// awaited; how long until it fired.
async fn measure(
    client_other: &Client,
    raw: &fred::clients::Client,
    java: Option<&mut Peer>,
    kind: &str,
    lock: &Lock<AnyKind>,
    listening: Listening,
    cause: Cause,
) -> Option<Duration> {
    let key = lock.name().to_owned();
    let guard = lock.lock().await.unwrap();
    let lost = tokio::spawn(guard.lost());
    // Let the watchers settle: the release-channel watcher (kinds with one)
    // and the keyspace watcher.
    if listening == Listening::Keyspace {
        while numsub(raw, &keyspace(&key)).await < 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = Instant::now();
    match cause {
        Cause::Del => {
            let _: i64 = raw.del(&key).await.unwrap();
        }
        Cause::Flushall => {
            let _: () = raw.flushall(false).await.unwrap();
        }
        Cause::RustForceUnlock => {
            let theirs = every_kind(client_other, &key_base(&key, kind))
                .into_iter()
                .find(|(k, _)| *k == kind)
                .unwrap()
                .1;
            theirs.force_unlock().await.unwrap();
        }
        Cause::JavaForceUnlock => {
            let java = java?;
            let obj = format!("{}:{key}", java_kind(kind));
            java.ok("t1", &format!("forceunlock {obj}")).await;
        }
    }
    let within = WATCHDOG * 2;
    let fired = tokio::time::timeout(within, lost).await.ok();
    drop(guard);
    fired.map(|_| start.elapsed())
}

/// The base name `every_kind` suffixed to make `key`.
fn key_base(key: &str, kind: &str) -> String {
    key.strip_suffix(&format!("-{kind}"))
        .unwrap_or(key)
        .to_owned()
}

#[tokio::test]
#[ignore = "a measurement: cargo test --release --test integrity -- --ignored loss_latency_table --nocapture"]
async fn loss_latency_table() {
    let server = Server::private_with(&NOTIFYING);
    let raw = server.raw().await;
    let other = server.client().await;
    let steps = Steps::new("loss latency");
    let mut java = match crate::common::java::redisson("4.7.0") {
        Some(redisson) => Some(
            Peer::start(
                &redisson,
                &Topology::Single(server.url.clone()),
                &[],
                &steps,
            )
            .await,
        ),
        None => None,
    };
    let modes = [
        (Listening::Plain, "plain"),
        (Listening::Keyspace, "keyspace notifications"),
        (Listening::HoldCheck, "hold check 100 ms"),
    ];
    let causes = [
        Cause::Del,
        Cause::Flushall,
        Cause::RustForceUnlock,
        Cause::JavaForceUnlock,
    ];
    println!("| kind | removal | {} |", modes.map(|(_, m)| m).join(" | "));
    println!("|---|---|{}", "---:|".repeat(modes.len()));
    let mut clients = Vec::new();
    for (mode, _) in modes {
        let client = server
            .client_with(|c| {
                let c = c.lock_watchdog_timeout(WATCHDOG);
                match mode {
                    Listening::Plain => c,
                    Listening::Keyspace => c.keyspace_notifications(true),
                    Listening::HoldCheck => c.hold_check_interval(CHECK),
                }
            })
            .await;
        clients.push((mode, client));
    }
    for kind in ["lock", "fair", "read", "write", "spin", "fenced"] {
        for cause in causes {
            let mut cells = Vec::new();
            for (mode, client) in &clients {
                let name = unique("latency");
                let lock = every_kind(client, &name)
                    .into_iter()
                    .find(|(k, _)| *k == kind)
                    .unwrap()
                    .1;
                let took = measure(&other, &raw, java.as_mut(), kind, &lock, *mode, cause).await;
                cells.push(match took {
                    Some(d) if d < Duration::from_millis(10) => {
                        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
                    }
                    Some(d) => format!("{} ms", d.as_millis()),
                    None if cause == Cause::JavaForceUnlock && java.is_none() => {
                        "(no Java)".to_owned()
                    }
                    None => format!("> {} s", (WATCHDOG * 2).as_secs()),
                });
            }
            println!("| {kind} | {} | {} |", cause.label(), cells.join(" | "));
        }
    }
}

/// What the hold check costs the server for 10 000 holds: the script calls
/// and server time (`INFO commandstats`, `cmdstat_evalsha`) of one check of
/// all of them, averaged over several.
///
/// `cargo test --release --test integrity -- --ignored hold_check_cost --nocapture`
#[tokio::test]
#[ignore = "a measurement: cargo test --release --test integrity -- --ignored hold_check_cost --nocapture"]
async fn hold_check_cost() {
    const HOLDS: usize = 10_000;
    let every = Duration::from_secs(1);
    let server = Server::private();
    let raw = server.raw().await;
    let client = server
        .client_with(|c| {
            c.lock_watchdog_timeout(Duration::from_secs(3600))
                .hold_check_interval(every)
        })
        .await;
    let name = unique("check-cost");
    let mut guards = Vec::with_capacity(HOLDS);
    for i in 0..HOLDS {
        let lock = client.lock(&format!("{name}-{i}")).unwrap();
        guards.push(lock.lock().await.unwrap());
    }
    let stats = || async {
        let line = redisson_lock_testkit::info_field(&raw, "commandstats", "cmdstat_evalsha")
            .await
            .unwrap_or_default();
        let field = |f: &str| -> u64 {
            line.split(',')
                .find_map(|p| p.strip_prefix(&format!("{f}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("calls"), field("usec"))
    };
    // Start at a check's end: nothing else runs (no renewal within an hour).
    tokio::time::sleep(every + Duration::from_millis(500)).await;
    let (calls0, usec0) = stats().await;
    tokio::time::sleep(every * 5).await;
    let (calls1, usec1) = stats().await;
    // One check is one script call per batch of 100 (the default batch size).
    let per_check = (HOLDS as u64).div_ceil(100);
    let checks = ((calls1 - calls0) / per_check).max(1);
    println!(
        "hold check of {HOLDS} holds: {per_check} script calls and {} µs of server time per check ({checks} checks measured)",
        (usec1 - usec0) / checks
    );
    drop(guards);
}
