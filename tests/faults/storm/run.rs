//! The storm itself: its tasks, the cuts, the chaos task, and one run per
//! kind with the checks afterwards.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::checks::{bump, Counts, Exclusion};
use super::kinds::{Handle, How, Kind};
use super::{
    channels, common, config, ms, settle, CLIENTS, LATCH_TTL, LONG, SETTLE, TASKS, WATCHDOG,
};
use crate::common::fault::{client_kill, script_flush, ClientType};
use crate::common::{unique, Server};
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redisson_lock::Error;
use tokio::time::Instant;

pub struct Storm {
    pub kind: Kind,
    pub counts: Counts,
    pub exclusion: Exclusion,
    /// Errors that should not happen, with what was being done.
    pub unexpected: Mutex<Vec<String>>,
    pub target: u64,
    pub deadline: Instant,
}

impl Storm {
    pub fn finished(&self) -> bool {
        self.counts.cancellations() >= self.target || Instant::now() >= self.deadline
    }

    pub fn unexpected(&self, what: String) {
        self.unexpected.lock().unwrap().push(what);
    }

    /// Count an error; `lost`: whether the guard concerned knew its hold lost.
    pub fn error(&self, op: &str, e: &Error, lost: bool) {
        match e {
            e if e.is_transient() => bump(&self.counts.transient),
            Error::NotHeld { .. } if op != "acquire" => {
                bump(&self.counts.not_held);
                if op == "reenter" && !lost {
                    self.unexpected(format!(
                        "{op}: {e} while the guard does not know its hold lost"
                    ));
                }
            }
            Error::NotReentrant { .. }
                if op == "reenter" && self.kind == Kind::NonReentrantFair =>
            {
                bump(&self.counts.not_reentrant)
            }
            other => self.unexpected(format!("{op}: {other:?}")),
        }
    }
}

/// How an operation is cut short.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// Polled once, then dropped (unless it finished in that poll).
    AtOnce,
    /// Dropped after this long.
    After(Duration),
    /// Given [`LONG`]: normally long enough to finish.
    Long,
}

impl Cut {
    pub fn random(rng: &mut StdRng) -> Cut {
        match rng.random_range(0..100) {
            0..25 => Cut::AtOnce,
            25..80 => Cut::After(Duration::from_micros(rng.random_range(0..=20_000))),
            _ => Cut::Long,
        }
    }

    /// Run `fut` under this cut; `None` (counted in `cancelled`) if cut short.
    pub async fn run<F: Future>(
        self,
        counts: &Counts,
        cancelled: &AtomicU64,
        fut: F,
    ) -> Option<F::Output> {
        let outcome = match self {
            Cut::AtOnce => {
                let outcome = fut.now_or_never();
                if outcome.is_none() {
                    bump(&counts.cancelled_at_once);
                }
                outcome
            }
            Cut::After(after) => tokio::time::timeout(after, fut).await.ok(),
            Cut::Long => tokio::time::timeout(LONG, fut).await.ok(),
        };
        if outcome.is_none() {
            bump(cancelled);
        }
        outcome
    }
}

pub async fn storm_task(storm: Arc<Storm>, handles: Vec<Handle>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let counts = &storm.counts;
    while !storm.finished() {
        let handle = &handles[rng.random_range(0..handles.len())];
        let how = match rng.random_range(0..3) {
            0 => How::Lock,
            1 => How::TryFor {
                wait: ms(rng.random_range(0..=30)),
                lease: rng.random_bool(0.3).then(|| ms(rng.random_range(20..=800))),
            },
            _ => How::Lease(ms(rng.random_range(20..=800))),
        };
        let cut = Cut::random(&mut rng);
        let Some(outcome) = cut
            .run(counts, &counts.cancelled_acquire, handle.acquire(how))
            .await
        else {
            continue;
        };
        let guard = match outcome {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                bump(&counts.not_acquired);
                continue;
            }
            Err(e) => {
                storm.error("acquire", &e, false);
                continue;
            }
        };
        bump(&counts.acquired);
        // Inside the critical section only while the hold is certain.
        let inside = if guard.is_lost() {
            bump(&counts.lost);
            None
        } else {
            Some(storm.exclusion.enter(handle.exclusive))
        };
        let mut guards = vec![guard];
        if rng.random_bool(0.35) {
            let cut = Cut::random(&mut rng);
            let outcome = cut
                .run(counts, &counts.cancelled_reenter, guards[0].reenter())
                .await;
            match outcome {
                Some(Ok(again)) => {
                    bump(&counts.reentered);
                    guards.push(again);
                }
                Some(Err(e)) => storm.error("reenter", &e, guards[0].is_lost()),
                None => {}
            }
        }
        if rng.random_bool(0.4) {
            bump(&counts.held_a_while);
            tokio::time::sleep(Duration::from_micros(rng.random_range(0..=10_000))).await;
        }
        if let Some(id) = inside {
            let lost = guards[0].is_lost();
            if lost {
                bump(&counts.lost);
            }
            storm.exclusion.leave(id, lost);
        }
        if guards.len() == 2 && rng.random_bool(0.5) {
            guards.swap(0, 1);
        }
        for guard in guards {
            if rng.random_bool(0.4) {
                bump(&counts.dropped);
                drop(guard); // released in the background
                continue;
            }
            let lost = guard.is_lost();
            let cut = Cut::random(&mut rng);
            match cut
                .run(counts, &counts.cancelled_unlock, guard.unlock())
                .await
            {
                Some(Ok(())) => bump(&counts.unlocked),
                Some(Err(e)) => storm.error("unlock", &e, lost),
                None => {}
            }
        }
    }
}

/// Kill connections and flush scripts at random, until `stop`.
pub async fn chaos(
    raw: fred::clients::Client,
    storm: Arc<Storm>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let counts = &storm.counts;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(ms(rng.random_range(5..=40))).await;
        match rng.random_range(0..10) {
            n @ 0..7 => {
                let (kind, count) = match n {
                    0..4 => (ClientType::Normal, &counts.kill_normal),
                    _ => (ClientType::Pubsub, &counts.kill_pubsub),
                };
                let n = client_kill(&raw, kind).await;
                bump(count);
                counts
                    .killed_connections
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
            _ => {
                script_flush(&raw).await;
                bump(&counts.script_flush);
            }
        }
    }
}

pub fn seed() -> u64 {
    std::env::var("STORM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

/// Run a storm of `kind` until `target` operations were cut short (or
/// `cap` passed, which fails the test), then check that nothing is left.
pub async fn storm(kind: Kind, target: u64, cap: Duration) -> String {
    let seed = seed();
    let server = Server::private();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(server.client_with(config).await);
    }
    let name = unique(&format!("storm-{kind:?}").to_lowercase());
    let started = Instant::now();
    let storm = Arc::new(Storm {
        kind,
        counts: Counts::default(),
        exclusion: Exclusion::default(),
        unexpected: Mutex::new(Vec::new()),
        target,
        deadline: started + cap,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let chaos = tokio::spawn(chaos(server.raw().await, storm.clone(), stop.clone(), seed));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let handles = kind.handles(&clients[t % CLIENTS], &name);
        let task_seed = seed.wrapping_add(1 + t as u64);
        tasks.push(tokio::spawn(storm_task(storm.clone(), handles, task_seed)));
    }
    // Every iteration of a task is bounded (a few cuts of at most LONG).
    let joined = tokio::time::timeout(cap + Duration::from_secs(30), async {
        for task in tasks {
            task.await.expect("a storm task panicked");
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(10), chaos)
        .await
        .expect("chaos stops")
        .expect("chaos task");
    let stormed = started.elapsed();
    let counts = storm.counts.summary();
    assert!(
        joined.is_ok(),
        "{kind:?}: storm tasks did not finish (seed {seed})"
    );
    assert!(
        storm.counts.cancellations() >= target,
        "{kind:?}: only {} of {target} cancellations within {cap:?} (seed {seed}): {counts}",
        storm.counts.cancellations()
    );
    let unexpected = storm.unexpected.lock().unwrap().clone();
    assert!(
        unexpected.is_empty(),
        "{kind:?}: unexpected errors (seed {seed}): {unexpected:#?}\n{counts}"
    );
    let breaches = storm.exclusion.breaches();
    assert!(
        breaches.is_empty(),
        "{kind:?}: mutual exclusion broken (seed {seed}): {breaches:#?}\n{counts}"
    );

    // Everything of the storm is gone but the clients (and their watchdogs).
    let settled = Instant::now();
    let raw = server.raw().await;
    settle(
        &format!("{kind:?}: no lock state left"),
        &raw,
        SETTLE,
        // The clients' registry entries are theirs while they live.
        |key| {
            !key.starts_with("redisson_lock_token:")
                && !key.starts_with("redisson_unlock_latch:")
                && !key.starts_with("redisson_lock_client:")
        },
    )
    .await;
    // Every unlock has run: its latch is deleted, or expires after LATCH_TTL
    // at the latest if deleting it failed.
    settle(
        &format!("{kind:?}: no unlock latch left"),
        &raw,
        LATCH_TTL + Duration::from_secs(2),
        |key| key.starts_with("redisson_unlock_latch:"),
    )
    .await;
    let deadline = Instant::now() + SETTLE;
    loop {
        let channels = channels(&raw).await;
        if channels.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{kind:?}: still subscribed after {SETTLE:?}: {channels:?}"
        );
        tokio::time::sleep(ms(20)).await;
    }
    let settle_time = settled.elapsed();
    // Longer than a watchdog period: no renewal brings anything back.
    tokio::time::sleep(WATCHDOG * 2).await;
    let left = common::describe_keys(&raw, |key| {
        !key.starts_with("redisson_lock_token:") && !key.starts_with("redisson_lock_client:")
    })
    .await;
    assert!(
        left.is_empty(),
        "{kind:?}: keys came back after {:?}:\n{}",
        WATCHDOG * 2,
        left.join("\n")
    );
    let channels = channels(&raw).await;
    assert!(
        channels.is_empty(),
        "{kind:?}: subscribed again: {channels:?}"
    );
    // A fresh client takes the lock at once.
    let fresh = server.client_with(config).await;
    let guard = kind
        .final_handle(&fresh, &name)
        .try_lock()
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{kind:?}: a fresh client cannot take the lock"));
    guard.unlock().await.unwrap();
    drop(clients);
    format!("{kind:?} (seed {seed}): storm {stormed:?}, settled in {settle_time:?}: {counts}")
}
