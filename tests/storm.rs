//! Cancellation storm, per lock kind: many tasks on three clients of one
//! private server take, re-enter, hold, unlock and drop one lock, with every
//! acquisition, re-entry and unlock cut short at random (dropped unpolled
//! after one poll, after 0–20 ms, or let run for up to 3 s), while a chaos
//! task kills the clients' command and pub/sub connections and flushes the
//! script cache at random intervals.
//!
//! While the storm runs: no two holders of an exclusive lock (nor a writer
//! and a reader) are inside at once, unless one of them had already lost
//! its hold by the library's own account (`LockGuard::is_lost`) when it
//! left; no error other than transient ones (and the expected `NotHeld` /
//! `NotReentrant`) comes back.
//!
//! Afterwards (chaos stopped, every task, guard and handle dropped, the
//! clients kept, so their watchdogs keep running): within 20 s no lock hash,
//! fair queue or deadline, nor read timeout key is left (background releases
//! and queue leaves retry after the kills); then no unlock latch within the
//! latch TTL (2.08 s with these settings) + 2 s; nobody is subscribed to
//! anything; more than one watchdog period later still nothing (no renewal
//! brought anything back); and a fresh client takes the lock at once with
//! `try_lock()`.
//!
//! The default run cuts at least 500 operations short per kind (4 000 in
//! all). The soak, 10 000 per kind, printing the counts:
//!
//! ```text
//! cargo test --test storm -- --ignored storm_soak --nocapture
//! ```
//!
//! `STORM_SEED=<u64>` fixes the random choices (timing still varies).
mod common;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fault::{client_kill, script_flush, ClientType};
use common::{unique, Server};
use fred::prelude::*;
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redisson_lock::{AnyKind, Client, Config, Error, Lock, LockGuard};
use tokio::time::Instant;

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

const CLIENTS: usize = 3;
const TASKS: usize = 24;
/// Client settings: short, so that background retries and latch TTLs end soon.
const TIMEOUT: Duration = Duration::from_millis(500);
const RETRY_ATTEMPTS: u32 = 3;
const RETRY_DELAY: Duration = Duration::from_millis(20);
const WATCHDOG: Duration = Duration::from_millis(600);
/// How long an unlock latch can outlive its unlock: `(timeout + retry_delay)
/// × (retry_attempts + 1)`, which is more than any lease used here (800 ms at
/// most) + timeout.
const LATCH_TTL: Duration = Duration::from_millis(
    (TIMEOUT.as_millis() + RETRY_DELAY.as_millis()) as u64 * (RETRY_ATTEMPTS as u64 + 1),
);
/// A cut that lets the operation run to completion (normally).
const LONG: Duration = Duration::from_secs(3);
/// How long the state may take to settle after the storm (background
/// releases and queue leaves retry after the kills).
const SETTLE: Duration = Duration::from_secs(20);

fn config(c: Config) -> Config {
    c.timeout(TIMEOUT)
        .retry_attempts(RETRY_ATTEMPTS)
        .retry_delay(RETRY_DELAY)
        .lock_watchdog_timeout(WATCHDOG)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------------------
// Lock kinds and handles
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    RLock,
    Fair,
    NonReentrantFair,
    Read,
    Write,
    Spin,
    Fenced,
    /// Readers and writers of one read-write lock.
    Mixed,
}

const ALL_KINDS: [Kind; 8] = [
    Kind::RLock,
    Kind::Fair,
    Kind::NonReentrantFair,
    Kind::Read,
    Kind::Write,
    Kind::Spin,
    Kind::Fenced,
    Kind::Mixed,
];

impl Kind {
    /// The handles a storm task picks from.
    fn handles(self, client: &Client, name: &str) -> Vec<Handle> {
        let rw = || client.read_write_lock(name).unwrap();
        match self {
            Kind::RLock => vec![Handle::exclusive(client.lock(name).unwrap())],
            Kind::Fair => vec![Handle::exclusive(client.fair_lock(name).unwrap())],
            Kind::NonReentrantFair => {
                vec![Handle::exclusive(
                    client.non_reentrant_fair_lock(name).unwrap(),
                )]
            }
            Kind::Read => vec![Handle::shared(rw().read())],
            Kind::Write => vec![Handle::exclusive(rw().write())],
            Kind::Spin => vec![Handle::exclusive(client.spin_lock(name).unwrap())],
            Kind::Fenced => vec![Handle::exclusive(client.fenced_lock(name).unwrap())],
            Kind::Mixed => vec![Handle::shared(rw().read()), Handle::exclusive(rw().write())],
        }
    }

    /// The exclusive lock a fresh client takes at the end: for a
    /// read-write lock, the write half (free only if no reader is left).
    fn final_handle(self, client: &Client, name: &str) -> Handle {
        match self {
            Kind::Read | Kind::Mixed => {
                Handle::exclusive(client.read_write_lock(name).unwrap().write())
            }
            other => other.handles(client, name).remove(0),
        }
    }
}

/// A lock of any kind (its kind erased, so guards re-enter through the
/// run-time checked `LockGuard<AnyKind>::reenter`), and whether a holder
/// excludes every other holder (all but a reader).
#[derive(Clone)]
struct Handle {
    lock: Lock<AnyKind>,
    exclusive: bool,
}

impl Handle {
    fn exclusive<K: redisson_lock::Kind>(lock: Lock<K>) -> Handle {
        Handle {
            lock: lock.erase(),
            exclusive: true,
        }
    }

    fn shared<K: redisson_lock::Kind>(lock: Lock<K>) -> Handle {
        Handle {
            lock: lock.erase(),
            exclusive: false,
        }
    }
}

/// How to acquire.
#[derive(Clone, Copy, Debug)]
enum How {
    Lock,
    TryFor {
        wait: Duration,
        lease: Option<Duration>,
    },
    Lease(Duration),
}

impl Handle {
    async fn acquire(&self, how: How) -> redisson_lock::Result<Option<LockGuard<AnyKind>>> {
        let lock = &self.lock;
        match how {
            How::Lock => lock.lock().await.map(Some),
            How::TryFor { wait, lease } => lock.try_lock_for(wait, lease).await,
            How::Lease(lease) => lock.lock_with_lease(lease).await.map(Some),
        }
    }

    async fn try_lock(&self) -> redisson_lock::Result<Option<LockGuard<AnyKind>>> {
        self.lock.try_lock().await
    }
}

// ---------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Counts {
    cancelled_acquire: AtomicU64,
    cancelled_reenter: AtomicU64,
    cancelled_unlock: AtomicU64,
    /// Of the cancellations: dropped after a single poll.
    cancelled_at_once: AtomicU64,
    acquired: AtomicU64,
    not_acquired: AtomicU64,
    reentered: AtomicU64,
    unlocked: AtomicU64,
    dropped: AtomicU64,
    held_a_while: AtomicU64,
    transient: AtomicU64,
    not_held: AtomicU64,
    not_reentrant: AtomicU64,
    /// Guards already lost when acquired, or lost by the time they left.
    lost: AtomicU64,
    kill_normal: AtomicU64,
    kill_pubsub: AtomicU64,
    killed_connections: AtomicU64,
    script_flush: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counts {
    fn cancellations(&self) -> u64 {
        self.cancelled_acquire.load(Ordering::Relaxed)
            + self.cancelled_reenter.load(Ordering::Relaxed)
            + self.cancelled_unlock.load(Ordering::Relaxed)
    }

    fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "cancelled {} (acquire {}, reenter {}, unlock {}; {} after one poll) | \
             acquired {}, not acquired {}, reentered {}, unlocked {}, dropped {}, held a while {} | \
             transient errors {}, NotHeld {}, NotReentrant {}, lost {} | \
             chaos: kill normal {}, kill pubsub {} ({} connections), script flush {}",
            self.cancellations(),
            n(&self.cancelled_acquire),
            n(&self.cancelled_reenter),
            n(&self.cancelled_unlock),
            n(&self.cancelled_at_once),
            n(&self.acquired),
            n(&self.not_acquired),
            n(&self.reentered),
            n(&self.unlocked),
            n(&self.dropped),
            n(&self.held_a_while),
            n(&self.transient),
            n(&self.not_held),
            n(&self.not_reentrant),
            n(&self.lost),
            n(&self.kill_normal),
            n(&self.kill_pubsub),
            n(&self.killed_connections),
            n(&self.script_flush),
        )
    }
}

// ---------------------------------------------------------------------------
// Exclusion
// ---------------------------------------------------------------------------

/// Who is inside the critical section. A conflict (an exclusive holder
/// entering beside anyone, or a reader beside a writer) is real unless every
/// holder it met had lost its hold (per `is_lost`) by the time it left: a
/// lease running out under a holder is not a breach of exclusion.
#[derive(Default)]
struct Exclusion {
    state: Mutex<ExclusionState>,
}

#[derive(Default)]
struct ExclusionState {
    next: u64,
    inside: HashMap<u64, bool>,
    conflicts: Vec<(u64, bool, Vec<u64>)>,
    lost_when_left: HashSet<u64>,
}

impl Exclusion {
    fn enter(&self, exclusive: bool) -> u64 {
        let mut s = self.state.lock().unwrap();
        let id = s.next;
        s.next += 1;
        let met: Vec<u64> = s
            .inside
            .iter()
            .filter(|(_, other_exclusive)| exclusive || **other_exclusive)
            .map(|(id, _)| *id)
            .collect();
        if !met.is_empty() {
            s.conflicts.push((id, exclusive, met));
        }
        s.inside.insert(id, exclusive);
        id
    }

    fn leave(&self, id: u64, lost: bool) {
        let mut s = self.state.lock().unwrap();
        s.inside.remove(&id);
        if lost {
            s.lost_when_left.insert(id);
        }
    }

    /// Conflicts with a holder whose hold was still certain when it left.
    fn breaches(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.conflicts
            .iter()
            .filter(|(_, _, met)| met.iter().any(|m| !s.lost_when_left.contains(m)))
            .map(|(id, exclusive, met)| {
                format!("holder #{id} (exclusive: {exclusive}) entered beside {met:?}")
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The storm
// ---------------------------------------------------------------------------

struct Storm {
    kind: Kind,
    counts: Counts,
    exclusion: Exclusion,
    /// Errors that should not happen, with what was being done.
    unexpected: Mutex<Vec<String>>,
    target: u64,
    deadline: Instant,
}

impl Storm {
    fn finished(&self) -> bool {
        self.counts.cancellations() >= self.target || Instant::now() >= self.deadline
    }

    fn unexpected(&self, what: String) {
        self.unexpected.lock().unwrap().push(what);
    }

    /// Count an error; `lost`: whether the guard concerned knew its hold lost.
    fn error(&self, op: &str, e: &Error, lost: bool) {
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
enum Cut {
    /// Polled once, then dropped (unless it finished in that poll).
    AtOnce,
    /// Dropped after this long.
    After(Duration),
    /// Given [`LONG`]: normally long enough to finish.
    Long,
}

impl Cut {
    fn random(rng: &mut StdRng) -> Cut {
        match rng.random_range(0..100) {
            0..25 => Cut::AtOnce,
            25..80 => Cut::After(Duration::from_micros(rng.random_range(0..=20_000))),
            _ => Cut::Long,
        }
    }

    /// Run `fut` under this cut; `None` (counted in `cancelled`) if cut short.
    async fn run<F: Future>(
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

async fn storm_task(storm: Arc<Storm>, handles: Vec<Handle>, seed: u64) {
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
async fn chaos(raw: fred::clients::Client, storm: Arc<Storm>, stop: Arc<AtomicBool>, seed: u64) {
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

fn seed() -> u64 {
    std::env::var("STORM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

/// Run a storm of `kind` until `target` operations were cut short (or
/// `cap` passed, which fails the test), then check that nothing is left.
async fn storm(kind: Kind, target: u64, cap: Duration) -> String {
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
        |key| {
            !key.starts_with("redisson_lock_token:") && !key.starts_with("redisson_unlock_latch:")
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
    let left = common::describe_keys(&raw, |key| !key.starts_with("redisson_lock_token:")).await;
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

// ---------------------------------------------------------------------------
// Redis state
// ---------------------------------------------------------------------------

/// Wait (at most `within`) until no key matching `matches` is left; on
/// timeout, panic with every such key's type, TTL and contents.
async fn settle(
    what: &str,
    raw: &fred::clients::Client,
    within: Duration,
    matches: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        let keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
        if !keys.iter().any(|k| matches(k)) {
            return;
        }
        if Instant::now() >= deadline {
            let left = common::describe_keys(raw, &matches).await;
            panic!("{what}: after {within:?}, left:\n{}", left.join("\n"));
        }
        tokio::time::sleep(ms(20)).await;
    }
}

async fn channels(raw: &fred::clients::Client) -> Vec<String> {
    raw.custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", "*"])
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// Cancellations per kind in the default run (8 kinds: 4 000 in all).
const TARGET: u64 = 500;
/// A default storm that has not reached its target by then fails.
const CAP: Duration = Duration::from_secs(40);

macro_rules! storm_tests {
    ($($test:ident: $kind:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                println!("{}", storm($kind, TARGET, CAP).await);
            }
        )*
    };
}

storm_tests! {
    storm_rlock: Kind::RLock;
    storm_fair: Kind::Fair;
    storm_non_reentrant_fair: Kind::NonReentrantFair;
    storm_read: Kind::Read;
    storm_write: Kind::Write;
    storm_spin: Kind::Spin;
    storm_fenced: Kind::Fenced;
    storm_mixed_read_write: Kind::Mixed;
}

/// 10 000 cancellations per kind, one kind after the other; prints the counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: 10 000 cancellations per kind; run by hand (see the top of the file)"]
async fn storm_soak() {
    let mut report = Vec::new();
    for kind in ALL_KINDS {
        let line = storm(kind, 10_000, Duration::from_secs(600)).await;
        println!("{line}");
        report.push(line);
    }
    println!("\n{}", report.join("\n"));
}
