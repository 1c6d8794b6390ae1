//! Fault injection for tests: the kit's tools under the names the tests
//! use ([`Proxy`]; [`client_kill`], [`client_pause`] / [`client_unpause`],
//! [`script_flush`]; [`ChildProcess`]), and the jobs a child process does
//! with this crate's locks ([`Job`]). A test file that starts children calls
//! [`child_entry!`](crate::child_entry) once, at its top level.

use std::time::Duration;

use fred::prelude::*;
use redisson_lock::{AnyKind, Client, Config, LockGuard, SemaphorePermit};
use redisson_lock_testkit::child::{exit_with_parent, report, ChildJob};

pub use redisson_lock_testkit::child::{ChildProcess, CHILD_ENTRY};
pub use redisson_lock_testkit::faults::*;
pub use redisson_lock_testkit::proxy::Proxy;

/// A client connected through `proxy`, with its settings changed by `config`.
pub async fn client_through(proxy: &Proxy, config: impl FnOnce(Config) -> Config) -> Client {
    Client::connect_with(config(Config::from_url(&proxy.url()).unwrap()))
        .await
        .unwrap()
}

/// A proxy in front of the fixture's server and a client (with `config`)
/// that connects through it.
pub async fn client_behind_proxy(
    fx: &super::Fixture,
    config: impl FnOnce(Config) -> Config,
) -> (Proxy, Client) {
    let proxy = Proxy::start(fx.server.port).await;
    let client = client_through(&proxy, config).await;
    (proxy, client)
}

/// A client's settings that find a lost reply quickly: replies time out
/// after 300 ms, retries 50 ms apart.
pub fn quick_timeouts(config: Config) -> Config {
    config
        .timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(50))
}

/// A client's settings whose retry budget, `(timeout + retry_delay) ×
/// retry_attempts`, is 2 s: replies time out after 400 ms, retries 600 ms
/// apart, two of them. An outage of [`OUTAGE`] outlasts it, but not twice it
/// (the TTL of a semaphore's permit latch, which a give-back must beat by
/// `timeout` to stay exact: docs/PROTOCOL.md §7.1).
pub fn two_second_budget(config: Config) -> Config {
    config
        .timeout(Duration::from_millis(400))
        .retry_delay(Duration::from_millis(600))
        .retry_attempts(2)
}

/// How long a test cuts a [`two_second_budget`] client off: longer than its
/// retry budget (2 s), so that a give-back which stops after one budget is
/// lost; well within its permit latches' 4 s.
pub const OUTAGE: Duration = Duration::from_millis(2_300);

/// End an outage made with [`Proxy::stall`] the way a dead connection ends:
/// the stalled connections are closed (what they held is lost, never
/// delivered), then the client may connect again.
pub async fn reset_stalled(proxy: &Proxy) {
    proxy.refuse(true);
    proxy.cut();
    proxy.wait_connections(0, Duration::from_secs(5)).await;
    proxy.resume();
    proxy.refuse(false);
}

/// A client connected through `proxy`, with a retry budget of 300 ms,
/// whose permits cannot be given back: it takes two permits of the semaphore
/// `name` (one guard each) and a never-expiring one of the permit-expirable
/// semaphore `<name>-pes`, then the proxy stalls (nothing reaches Redis) and
/// the three guards are dropped, leaving three give-backs pending. Also
/// returns a guard of a third permit of `name`, still held.
pub async fn stranded_give_backs(proxy: &Proxy, name: &str) -> (Client, SemaphorePermit) {
    let client = client_through(proxy, |c| {
        c.timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(100))
            .retry_attempts(1)
    })
    .await;
    let sem = client.semaphore(name).unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    let dropped = [sem.acquire(1).await.unwrap(), sem.acquire(1).await.unwrap()];
    let kept = sem.acquire(1).await.unwrap();
    let pes = client
        .permit_expirable_semaphore(&format!("{name}-pes"))
        .unwrap();
    assert!(pes.try_set_permits(1).await.unwrap());
    let permit = pes.acquire(None).await.unwrap();
    proxy.stall();
    drop(dropped);
    drop(permit);
    assert_eq!(client.pending_releases(), 3);
    (client, kept)
}

/// Declare the entry point [`ChildProcess`] runs in a child: an ignored test
/// `child_process_entry` that does nothing unless started by a
/// [`ChildProcess`] (so `cargo test -- --ignored` by hand is harmless). Call
/// it once, at the top level of a test file that has `mod common;`.
#[macro_export]
macro_rules! child_entry {
    () => {
        /// Entry point of the child processes of `common::fault::ChildProcess`.
        #[test]
        #[ignore = "entry point of fault-injection child processes; a no-op when run by hand"]
        fn child_process_entry() {
            $crate::common::fault::child_main()
        }
    };
}

/// The lock kinds a [`Job`] can take.
pub const KINDS: [&str; 6] = ["lock", "fair", "read", "write", "spin", "fenced"];

/// The child job's environment variable `REDISSON_LOCK_FAULT_<name>`.
macro_rules! var {
    ($name:literal) => {
        concat!("REDISSON_LOCK_FAULT_", $name)
    };
}
const VAR_JOB: &str = var!("JOB");
const VAR_URL: &str = var!("URL");
const VAR_KIND: &str = var!("KIND");
const VAR_NAME: &str = var!("NAME");
const VAR_WATCHDOG_MS: &str = var!("WATCHDOG_MS");
const VAR_COUNTER_KEY: &str = var!("COUNTER_KEY");
const VAR_ROUNDS: &str = var!("ROUNDS");

/// Rounds between two `PROGRESS <n>` lines of an [`Job::Increment`].
pub const PROGRESS_EVERY: u64 = 10_000;

/// What a child process does. `kind` is one of [`KINDS`]: `lock` (RLock),
/// `fair`, `read`, `write` (of a read-write lock), `spin`, `fenced`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    /// Connect with `lock_watchdog_timeout = watchdog_ms`, take the lock,
    /// print `HELD <field>` (the guard's hash field), then hold it until
    /// killed; prints `LOST` if the guard reports the lock lost.
    Hold {
        url: String,
        kind: String,
        name: String,
        watchdog_ms: u64,
    },
    /// `rounds` times: take the lock, GET `counter_key` (a plain fred client),
    /// SET it to that + 1, unlock. Prints `PROGRESS <n>` every
    /// [`PROGRESS_EVERY`] rounds and `DONE` at the end, then exits.
    Increment {
        url: String,
        kind: String,
        name: String,
        counter_key: String,
        rounds: u64,
    },
}

impl ChildJob for Job {
    fn to_env(&self) -> Vec<(&'static str, String)> {
        let (Job::Hold {
            url, kind, name, ..
        }
        | Job::Increment {
            url, kind, name, ..
        }) = self;
        assert!(
            KINDS.contains(&kind.as_str()),
            "unknown lock kind {kind:?} (expected one of {KINDS:?})"
        );
        let (job, own) = match self {
            Job::Hold { watchdog_ms, .. } => {
                ("hold", vec![(VAR_WATCHDOG_MS, watchdog_ms.to_string())])
            }
            Job::Increment {
                counter_key,
                rounds,
                ..
            } => (
                "increment",
                vec![
                    (VAR_COUNTER_KEY, counter_key.clone()),
                    (VAR_ROUNDS, rounds.to_string()),
                ],
            ),
        };
        let mut env = vec![
            (VAR_JOB, job.into()),
            (VAR_URL, url.clone()),
            (VAR_KIND, kind.clone()),
            (VAR_NAME, name.clone()),
        ];
        env.extend(own);
        env
    }
}

impl Job {
    /// The job this process was started for, if any.
    fn from_env() -> Option<Job> {
        let job = std::env::var(VAR_JOB).ok().filter(|j| !j.is_empty())?;
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| panic!("child job {job:?}: {name} not set"))
        };
        let number = |name: &str| -> u64 {
            var(name)
                .parse()
                .unwrap_or_else(|e| panic!("child job: {name}: {e}"))
        };
        Some(match job.as_str() {
            "hold" => Job::Hold {
                url: var(VAR_URL),
                kind: var(VAR_KIND),
                name: var(VAR_NAME),
                watchdog_ms: number(VAR_WATCHDOG_MS),
            },
            "increment" => Job::Increment {
                url: var(VAR_URL),
                kind: var(VAR_KIND),
                name: var(VAR_NAME),
                counter_key: var(VAR_COUNTER_KEY),
                rounds: number(VAR_ROUNDS),
            },
            other => panic!("unknown child job {other:?}"),
        })
    }
}

/// The body of [`child_entry!`](crate::child_entry): run the job described by
/// the environment on a runtime of its own, or return at once if there is
/// none. Exits the process when its stdin closes (the parent is gone), so a
/// holder never outlives the test that started it.
pub fn child_main() {
    let Some(job) = Job::from_env() else {
        return;
    };
    exit_with_parent();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("child runtime")
        .block_on(run_job(job));
}

/// Lock `name` as a lock of `kind` (one of [`KINDS`]), waiting as long as it
/// takes.
pub async fn acquire(
    client: &redisson_lock::Client,
    kind: &str,
    name: &str,
) -> redisson_lock::Result<LockGuard<AnyKind>> {
    match kind {
        "lock" => client.lock(name)?.into_erased().lock().await,
        "fair" => client.fair_lock(name)?.into_erased().lock().await,
        "read" => {
            client
                .read_write_lock(name)?
                .read()
                .into_erased()
                .lock()
                .await
        }
        "write" => {
            client
                .read_write_lock(name)?
                .write()
                .into_erased()
                .lock()
                .await
        }
        "spin" => client.spin_lock(name)?.into_erased().lock().await,
        "fenced" => client.fenced_lock(name)?.into_erased().lock().await,
        other => panic!("unknown lock kind {other:?} (expected one of {KINDS:?})"),
    }
}

async fn run_job(job: Job) {
    match job {
        Job::Hold {
            url,
            kind,
            name,
            watchdog_ms,
        } => {
            let config = redisson_lock::Config::from_url(&url)
                .expect("child: config")
                .lock_watchdog_timeout(Duration::from_millis(watchdog_ms));
            let client = redisson_lock::Client::connect_with(config)
                .await
                .expect("child: connect");
            let guard = acquire(&client, &kind, &name)
                .await
                .expect("child: take the lock");
            report(&format!("HELD {}", guard.field()));
            guard.lost().await;
            report("LOST");
            std::future::pending::<()>().await;
            drop(guard);
        }
        Job::Increment {
            url,
            kind,
            name,
            counter_key,
            rounds,
        } => {
            let client = redisson_lock::Client::connect(&url)
                .await
                .expect("child: connect");
            let counter = raw_client(&url, true).await;
            for round in 1..=rounds {
                let guard = acquire(&client, &kind, &name)
                    .await
                    .expect("child: take the lock");
                let value: Option<i64> = counter.get(&counter_key).await.expect("child: GET");
                let _: () = counter
                    .set(&counter_key, value.unwrap_or(0) + 1, None, None, false)
                    .await
                    .expect("child: SET");
                guard.unlock().await.expect("child: unlock");
                if round % PROGRESS_EVERY == 0 && round < rounds {
                    report(&format!("PROGRESS {round}"));
                }
            }
            report("DONE");
        }
    }
}
