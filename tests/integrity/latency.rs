//! How long a guard takes to know it lost its hold after the hold is
//! removed, per kind × cause × how the client listens and how the guard
//! hears (`lost()` awaited, `is_lost()` polled, async or blocking)
//! (RELIABILITY.md, *Hearing a loss*). A measurement, not a check: it
//! prints a table.
//!
//! `cargo test --release --test integrity -- --ignored loss_latency_table --nocapture`

use std::time::Duration;

use std::sync::Arc;

use fred::prelude::*;
use redisson_lock::blocking::BlockingClient;
use redisson_lock::{AnyKind, Client, Lock, LockGuard};
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
    /// The default `Config`.
    Default,
    /// A 3 s watchdog.
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

/// How the guard learns of the loss.
#[derive(Clone, Copy, PartialEq)]
enum Hearing {
    /// `lost()` awaited.
    Awaited,
    /// `is_lost()` polled every millisecond, `lost()` never awaited.
    Polled,
    /// A blocking guard (`BlockingClient`, on a thread of its own) polling
    /// `is_lost()` every millisecond.
    Blocking,
}

/// Take `lock` (of `kind`, on `blocking` for [`Hearing::Blocking`]),
/// remove the hold by `cause` and return how long until the guard knew, at
/// most `within`.
#[allow(clippy::too_many_arguments)]
async fn measure(
    client_other: &Client,
    raw: &fred::clients::Client,
    java: Option<&mut Peer>,
    kind: &str,
    lock: &Lock<AnyKind>,
    blocking: Option<&Arc<BlockingClient>>,
    (listening, hearing): (Listening, Hearing),
    cause: Cause,
    within: Duration,
) -> Option<Duration> {
    let key = lock.name().to_owned();
    enum Held {
        Async(LockGuard<AnyKind>),
        Blocking(tokio::sync::oneshot::Receiver<Option<std::time::Instant>>),
    }
    let held = match (hearing, blocking) {
        (Hearing::Blocking, Some(client)) => {
            // A plain thread, as blocking code runs (not one of the
            // runtime's, where the blocking API refuses to block).
            let (client, lock) = (client.clone(), lock.clone());
            let (taken, is_taken) = tokio::sync::oneshot::channel();
            let (lost_at, polling) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let guard = client.wrap(lock).lock().unwrap();
                let _ = taken.send(());
                let deadline = std::time::Instant::now() + within + Duration::from_secs(1);
                let mut at = None;
                while std::time::Instant::now() < deadline {
                    if guard.is_lost() {
                        at = Some(std::time::Instant::now());
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                drop(guard);
                let _ = lost_at.send(at);
            });
            is_taken.await.unwrap();
            Held::Blocking(polling)
        }
        _ => Held::Async(lock.lock().await.unwrap()),
    };
    let lost = match &held {
        Held::Async(guard) if hearing == Hearing::Awaited => Some(tokio::spawn(guard.lost())),
        _ => None,
    };
    // Let the watchers settle: the hold's watch (10 ms after it starts) and
    // the keyspace watcher.
    if listening == Listening::Keyspace {
        while numsub(raw, &keyspace(&key)).await < 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = std::time::Instant::now();
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
    let at = match (held, lost) {
        (Held::Async(guard), Some(lost)) => {
            let fired = tokio::time::timeout(within, lost).await.ok();
            drop(guard);
            fired.map(|_| std::time::Instant::now())
        }
        (Held::Async(guard), None) => {
            let deadline = Instant::now() + within;
            let mut at = None;
            while Instant::now() < deadline {
                if guard.is_lost() {
                    at = Some(std::time::Instant::now());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            drop(guard);
            at
        }
        (Held::Blocking(polling), _) => polling.await.ok().flatten(),
    };
    at.map(|at| at.saturating_duration_since(start))
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
    // The default `Config` (30 s watchdog: renewals every 10 s) first, as
    // a guard hears a loss async and blocking, `lost()` awaited or
    // `is_lost()` polled; then a 3 s watchdog with `lost()` awaited, and the
    // two ways of listening for more.
    let columns = [
        (
            Listening::Default,
            Hearing::Awaited,
            "default: lost() awaited",
        ),
        (
            Listening::Default,
            Hearing::Polled,
            "default: is_lost() polled",
        ),
        (
            Listening::Default,
            Hearing::Blocking,
            "default: blocking, is_lost() polled",
        ),
        (Listening::Plain, Hearing::Awaited, "watchdog 3 s"),
        (
            Listening::Keyspace,
            Hearing::Awaited,
            "keyspace notifications",
        ),
        (Listening::HoldCheck, Hearing::Awaited, "hold check 100 ms"),
    ];
    let causes = [
        Cause::Del,
        Cause::Flushall,
        Cause::RustForceUnlock,
        Cause::JavaForceUnlock,
    ];
    println!(
        "| kind | removal | {} |",
        columns.map(|(_, _, c)| c).join(" | ")
    );
    println!("|---|---|{}", "---:|".repeat(columns.len()));
    let url = server.url.clone();
    let blocking = std::thread::spawn(move || Arc::new(BlockingClient::connect(&url).unwrap()))
        .join()
        .unwrap();
    let mut clients = Vec::new();
    for (listening, hearing, _) in columns {
        let client = match listening {
            Listening::Default if hearing == Hearing::Blocking => blocking.as_async().clone(),
            Listening::Default => server.client().await,
            _ => {
                server
                    .client_with(|c| {
                        let c = c.lock_watchdog_timeout(WATCHDOG);
                        match listening {
                            Listening::Keyspace => c.keyspace_notifications(true),
                            Listening::HoldCheck => c.hold_check_interval(CHECK),
                            _ => c,
                        }
                    })
                    .await
            }
        };
        clients.push((listening, hearing, client));
    }
    for kind in ["lock", "fair", "read", "write", "spin", "fenced"] {
        for cause in causes {
            let mut cells = Vec::new();
            for (listening, hearing, client) in &clients {
                let name = unique("latency");
                let lock = every_kind(client, &name)
                    .into_iter()
                    .find(|(k, _)| *k == kind)
                    .unwrap()
                    .1;
                // The next renewal is a third of the watchdog away.
                let within = match listening {
                    Listening::Default => Duration::from_secs(12),
                    _ => WATCHDOG * 2,
                };
                let took = measure(
                    &other,
                    &raw,
                    java.as_mut(),
                    kind,
                    &lock,
                    Some(&blocking),
                    (*listening, *hearing),
                    cause,
                    within,
                )
                .await;
                cells.push(match took {
                    Some(d) if d < Duration::from_millis(10) => {
                        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
                    }
                    Some(d) if d < Duration::from_secs(1) => format!("{} ms", d.as_millis()),
                    Some(d) => format!("{:.1} s", d.as_secs_f64()),
                    None if cause == Cause::JavaForceUnlock && java.is_none() => {
                        "(no Java)".to_owned()
                    }
                    None => format!("> {} s", within.as_secs()),
                });
            }
            println!("| {kind} | {} | {} |", cause.label(), cells.join(" | "));
        }
    }
    drop(clients);
    std::thread::spawn(move || drop(blocking)).join().unwrap();
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
