//! Cross-process mutual-exclusion soak, not part of the normal run:
//!
//! ```text
//! cargo test --release --test faults soak:: -- --ignored --nocapture
//! ```
//!
//! `SOAK_PROCESSES` child processes (default 4) each take an RLock
//! `SOAK_ROUNDS` times (default 250000: 1 000 000 acquisitions in all),
//! incrementing a shared counter by GET + SET while holding it; the counter
//! must end at processes × rounds. About 6 minutes on 2 cores in release
//! (~2 800 contended acquisitions/s); a debug build is about 3 times slower. `SOAK_KIND` picks another exclusive kind
//! (`fair`, `write`, `spin`, `fenced`). Runs against a private server, or
//! `REDIS_URL`. Fails if a child goes `SOAK_STALL_SECS` (default 120) without
//! progress.
use std::time::{Duration, Instant};

use crate::common::fault::{ChildProcess, Job, PROGRESS_EVERY};
use crate::common::{unique, Server};
use fred::prelude::*;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v.parse().unwrap_or_else(|e| panic!("{name}={v:?}: {e}")),
        _ => default,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: cargo test --release --test faults soak:: -- --ignored --nocapture"]
async fn cross_process_mutual_exclusion_soak() {
    let processes = env_number("SOAK_PROCESSES", 4);
    let rounds = env_number("SOAK_ROUNDS", 250_000);
    let stall = Duration::from_secs(env_number("SOAK_STALL_SECS", 120));
    let kind = std::env::var("SOAK_KIND").unwrap_or_else(|_| "lock".into());
    assert!(kind != "read", "read locks are shared: nothing to exclude");
    let server = Server::start();
    let raw = server.raw().await;
    let name = unique("soak");
    let counter_key = unique("soak-counter");
    println!("soak: {processes} processes x {rounds} rounds on a {kind:?} lock");

    let started = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|i| {
            let mut child = ChildProcess::spawn(Job::Increment {
                url: server.url.clone(),
                kind: kind.clone(),
                name: name.clone(),
                counter_key: counter_key.clone(),
                rounds,
            });
            tokio::spawn(async move {
                // Each line must come within `stall`: progress every
                // PROGRESS_EVERY rounds, then DONE.
                loop {
                    match child.next_line(stall).await {
                        Some(line) if line == "DONE" => break,
                        Some(line) => println!("soak: child {i}: {line}"),
                        None => panic!("soak: child {i} exited before DONE\n{}", child.output()),
                    }
                }
                child.wait_exit(stall).await;
            })
        })
        .collect();
    for child in children {
        child.await.expect("a soak child failed");
    }
    let elapsed = started.elapsed();
    let count: u64 = raw.get(&counter_key).await.unwrap();
    let total = processes * rounds;
    println!(
        "soak: {total} acquisitions in {elapsed:?} ({:.0}/s; progress every {PROGRESS_EVERY})",
        total as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(count, total, "lost increments: mutual exclusion broken");
    let _: i64 = raw.del(&counter_key).await.unwrap();
}
