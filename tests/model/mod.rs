//! The shared machinery of the model-based tests: one private `redis-server`
//! and two clients per test (and, for the Java families, one JVM running
//! the real Redisson), a tokio runtime the cases share, expiry windows, the
//! transcript a failing case prints, the counters the runs report, and the
//! proptest runner that turns a shrunk failure into a readable script.
//!
//! Time: every TTL the model predicts is a window `[lo, hi]` of real
//! instants (the send and reply times of the command that set it, plus the
//! lease), and so is the moment a guard's certainty ends (§2.9). Before
//! each step, [`Step::settle`] waits until no window is open or about to
//! open (so no lease can end while the step runs); a step that still
//! overlaps a window (a stalled machine) is recorded as skipped, its
//! comparison not made, and the rest of its case dropped, never compared
//! loosely.

pub mod guards;
pub mod java;
pub mod keys;
pub mod lock_waits;
pub mod locks;
pub mod pes;
pub mod rw;
pub mod sync;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config as PtConfig, TestCaseError, TestError, TestRunner};
use redisson_lock::{Client, Config, Owner};

use crate::common::Server;

/// A short explicit lease: long enough for a few steps, short enough that a
/// `sleep` outlives it.
pub const LEASE: Duration = Duration::from_millis(100);
/// A longer explicit lease, above the watchdog's: re-entries and `extend`
/// mix it with the others (`max(PTTL, lease)` keeps the longest).
pub const LONG_LEASE: Duration = Duration::from_millis(800);
/// A short wait deadline (busy acquisitions and latch waits).
pub const WAIT: Duration = Duration::from_millis(15);
/// No step starts while a window begins within this much time.
pub const GUARD: Duration = Duration::from_millis(60);
/// Slack added to a window's end before it counts as certainly over, and to
/// PTTL comparisons (Redis rounds to whole milliseconds).
pub const MARGIN: Duration = Duration::from_millis(5);
/// `lock_watchdog_timeout` of the clients under test: short, so that
/// renewals (every third of it) run within a case and a `sleep` outlives
/// it. A hold the watchdog renews must survive any sleep; a renewal run
/// late by more than two thirds of this (a stalled machine) makes the hold
/// lost (`NotRenewed`), which the model counts as a skipped step.
pub const WATCHDOG: Duration = Duration::from_millis(500);
/// A renewal run picked before a step stopped the renewal may still land
/// after it: a key whose renewal stopped at `t` lives at most until
/// `t + WATCHDOG + RENEW_SLACK`.
pub const RENEW_SLACK: Duration = Duration::from_millis(40);
/// How long a guard may take to hear of a loss that it hears by an event
/// (its lock's release channel, keyspace notifications) or by a renewal
/// (then plus a renewal period): generous for a busy machine. Awaited as
/// an event, so it costs time only when the crate fails.
pub const HEAR: Duration = Duration::from_secs(2);
/// The drift margin of the longest lease in use (docs/PROTOCOL.md §2.6:
/// 1 % of the lease + 2 ms), plus 1 ms of rounding: a guard's certainty
/// ends at most this long before its `expires_at()`.
pub const DRIFT: Duration = Duration::from_millis(8 + 2 + 1);
/// `lockWatchdogTimeout` of the Java peer: long, so that no Java renewal
/// runs within a test (Redisson 3.17–4.4's read renewal resets every
/// reader's timeout keys, §11.3), and a Java hold without a lease outlives
/// every case.
pub const JAVA_WATCHDOG: Duration = Duration::from_secs(600);
/// The Rust owners of a case: owner `i` lives on client `i % 2` (client 0
/// listens to keyspace notifications, client 1 does not).
pub const OWNERS: usize = 3;
/// Java owners of a case with the Java peer: owner `OWNERS + j` is the
/// peer's thread `t{j + 1}`.
pub const JAVA_OWNERS: usize = 2;

/// `lock.try_lock_for(wait)`, or `try_lock_for_with_lease(wait, lease)`
/// with a lease: the step's acquisition, either way.
pub async fn try_lock<K: redisson_lock::Kind>(
    lock: &redisson_lock::Lock<K>,
    wait: Duration,
    lease: Option<Duration>,
) -> redisson_lock::Result<Option<redisson_lock::LockGuard<K>>> {
    match lease {
        Some(lease) => lock.try_lock_for_with_lease(wait, lease).await,
        None => lock.try_lock_for(wait).await,
    }
}

/// Cases per test in plain `cargo test`, or `MODEL_CASES` for the long run.
pub fn cases(default: u32) -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The server, the clients under test, a raw client to read state, and,
/// for the Java families, the Java peer.
pub struct Env {
    pub rt: tokio::runtime::Runtime,
    pub clients: Vec<Client>,
    pub raw: fred::clients::Client,
    pub stats: Stats,
    /// The real Java Redisson, one JVM for the whole test.
    pub java: Option<java::Java>,
    // Last: the server outlives the clients and the JVM.
    _server: Server,
}

impl Env {
    /// A server with keyspace notifications on (`Kgxe`) and two clients
    /// with a [`WATCHDOG`] lease: client 0 listens to keyspace
    /// notifications, client 1 does not (the default).
    pub fn new() -> Env {
        Env::start(None)
    }

    /// [`Env::new`] with the Java peer of Redisson `version`, or `None`
    /// (after printing why) when that version is not to be tested here
    /// (`tests/java.rs`'s policy: skipped without Java or the jars, unless
    /// `CI=true` or `REDISSON_VERSIONS` asks for it).
    pub fn with_java(version: &str) -> Option<Env> {
        let redisson = crate::common::java::redisson(version)?;
        Some(Env::start(Some(redisson)))
    }

    fn start(redisson: Option<crate::common::java::Redisson>) -> Env {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let server = Server::start();
        let (clients, raw, java) = rt.block_on(async {
            let raw = server.raw().await;
            crate::common::config_set(&raw, "notify-keyspace-events", "Kgxe").await;
            let mut clients = Vec::new();
            for keyspace in [true, false] {
                clients.push(
                    server
                        .client_with(|c: Config| {
                            c.lock_watchdog_timeout(WATCHDOG)
                                .keyspace_notifications(keyspace)
                        })
                        .await,
                );
            }
            let java = match redisson {
                Some(r) => Some(java::Java::start(&r, &server.url).await),
                None => None,
            };
            (clients, raw, java)
        });
        Env {
            rt,
            clients,
            raw,
            stats: Stats::default(),
            java,
            _server: server,
        }
    }

    /// One handle per client, made by `make` (`what` names it on an error).
    pub fn per_client<T>(
        &self,
        what: &str,
        make: impl Fn(&Client) -> redisson_lock::Result<T>,
    ) -> Vec<T> {
        self.clients.iter().map(|c| make(c).expect(what)).collect()
    }

    /// The client of Rust owner `i`.
    pub fn client(&self, owner: usize) -> &Client {
        &self.clients[owner % self.clients.len()]
    }

    /// Which client Rust owner `i` is on.
    pub fn client_of(owner: usize) -> usize {
        owner % 2
    }

    /// Rust owner `i`'s explicit id (small, like a Java thread id).
    pub fn owner(owner: usize) -> Owner {
        Owner::new(owner as i64 + 1)
    }

    /// The owners of a case: the Rust ones, and the Java ones if the peer
    /// runs.
    pub fn owners(&self) -> usize {
        OWNERS + if self.java.is_some() { JAVA_OWNERS } else { 0 }
    }

    /// Owner `i`'s field: `<clientId>:<ownerId>` for a Rust owner,
    /// `<javaClientId>:<threadId>` for a Java one.
    pub fn field(&self, owner: usize) -> String {
        match java::slot(owner) {
            Some(j) => self.java.as_ref().expect("the Java peer").fields[j].clone(),
            None => format!("{}:{}", self.client(owner).id(), owner + 1),
        }
    }
}

/// What the runs did, for RELIABILITY.md.
#[derive(Default)]
pub struct Stats {
    pub cases: AtomicU64,
    pub steps: AtomicU64,
    pub skipped: AtomicU64,
    pub settle_waits: AtomicU64,
    /// Guard observations compared (`is_lost`, `lost_reason`, `expires_at`,
    /// `lease`, whether `lost()` fired), one per live guard per step.
    pub guards: AtomicU64,
    /// Of those, guards the model had lost (and the crate too).
    pub lost: AtomicU64,
    /// Per kind: sequences, steps compared, steps skipped.
    pub per_kind: std::sync::Mutex<std::collections::BTreeMap<String, [u64; 3]>>,
}

impl Stats {
    pub fn report(&self, what: &str, took: Duration) {
        eprintln!(
            "model {what}: {} sequences, {} steps compared, {} steps skipped (timing), {} settles, {} guard observations ({} lost), {:.1} s",
            self.cases.load(Ordering::Relaxed),
            self.steps.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
            self.settle_waits.load(Ordering::Relaxed),
            self.guards.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
            took.as_secs_f64()
        );
        if let Ok(per_kind) = self.per_kind.lock() {
            for (kind, [cases, steps, skipped]) in per_kind.iter() {
                eprintln!("  {kind}: {cases} sequences, {steps} steps compared, {skipped} skipped");
            }
        }
    }

    fn count(&self, kind: &str, slot: usize) {
        if let Ok(mut per_kind) = self.per_kind.lock() {
            per_kind.entry(kind.to_owned()).or_default()[slot] += 1;
        }
    }
}

/// When a key set with a lease expires: never within a case (watchdog), or
/// somewhere in `[lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Exp {
    Long,
    At { lo: Instant, hi: Instant },
}

impl Exp {
    /// `PEXPIRE lease` sent at `t0`, answered at `t1`.
    pub fn lease(lease: Option<Duration>, t0: Instant, t1: Instant) -> Exp {
        match lease {
            None => Exp::Long,
            Some(l) => Exp::At {
                lo: t0 + l,
                hi: t1 + l,
            },
        }
    }

    /// Certainly over at `now`.
    pub fn over(self, now: Instant) -> bool {
        matches!(self, Exp::At { hi, .. } if hi + MARGIN <= now)
    }

    /// Whether a real `PTTL` read between `r0` and `r1` fits.
    pub fn fits(self, pttl: i64, r0: Instant, r1: Instant) -> bool {
        match self {
            Exp::Long => pttl > 1_000,
            Exp::At { lo, hi } => {
                let low = lo.saturating_duration_since(r1).as_millis() as i64 - 3;
                let high = hi.saturating_duration_since(r0).as_millis() as i64 + 3;
                pttl >= low && pttl <= high && pttl >= 0
            }
        }
    }
}

/// The transcript of one case and the timing bookkeeping of its steps.
pub struct Step<'a> {
    pub env: &'a Env,
    kind: String,
    pub log: String,
    /// Windows the model had when the running step started.
    open: Vec<Exp>,
    /// When the running step's windows were settled.
    settled: Instant,
    /// When the case started (transcript times are from then).
    start: Instant,
}

/// A case stopped early: a mismatch (a failure) or a step made uncertain
/// by a stall (skipped, not a failure).
pub enum Stop {
    Mismatch(String),
    Stalled,
}

pub type StepResult<T> = Result<T, Stop>;

impl<'a> Step<'a> {
    /// A case of `kind`; `header` starts its transcript.
    pub fn new(env: &'a Env, kind: &str, header: String) -> Step<'a> {
        env.stats.cases.fetch_add(1, Ordering::Relaxed);
        env.stats.count(kind, 0);
        Step {
            env,
            kind: kind.to_owned(),
            log: header,
            open: Vec::new(),
            settled: Instant::now(),
            start: Instant::now(),
        }
    }

    /// Before a step: wait until none of `windows` is open or opens within
    /// [`GUARD`]; returns the instant from which the model may expire what
    /// is over (all windows that began are certainly over).
    pub async fn settle(&mut self, windows: &[Exp]) -> Instant {
        let mut now = Instant::now();
        // Until no window is open or opens within GUARD: after waiting for
        // one, the next may have come within GUARD.
        loop {
            let until = windows
                .iter()
                .filter_map(|w| match *w {
                    Exp::At { lo, hi } if hi + MARGIN > now && lo <= now + GUARD => {
                        Some(hi + MARGIN)
                    }
                    _ => None,
                })
                .max();
            let Some(until) = until else { break };
            // Letting a lease run out is the subject here, not a stand-in
            // for an event.
            self.env.stats.settle_waits.fetch_add(1, Ordering::Relaxed);
            let _ = write!(
                self.log,
                "\n    (waited {} ms for a lease to end)",
                until.saturating_duration_since(now).as_millis()
            );
            tokio::time::sleep(until.saturating_duration_since(now)).await;
            now = Instant::now();
        }
        self.settled = now;
        self.open = windows.iter().copied().filter(|w| !w.over(now)).collect();
        now
    }

    /// After the step and its state read: fails with `Stalled` if a window
    /// the model had before the step, or has after it (`after`: leases the
    /// step set), may have begun meanwhile.
    pub fn check_time(&mut self, after: &[Exp]) -> StepResult<()> {
        let now = Instant::now();
        if self
            .open
            .iter()
            .chain(after.iter().filter(|w| !w.over(self.settled)))
            .any(|w| matches!(w, Exp::At { lo, .. } if *lo <= now))
        {
            self.env.stats.skipped.fetch_add(1, Ordering::Relaxed);
            self.env.stats.count(&self.kind, 2);
            self.log
                .push_str("  [SKIPPED: a lease may have ended during the step; case stopped]");
            return Err(Stop::Stalled);
        }
        Ok(())
    }

    /// Sleeps `ms` and records `op` (a sleep has no reply).
    pub async fn slept(&mut self, op: &dyn std::fmt::Debug, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.record(op, "");
    }

    /// Records `op -> real`, reads the state by `read`, then
    /// [`check_time`](Self::check_time)s against `after`.
    pub async fn observed<T>(
        &mut self,
        op: &dyn std::fmt::Debug,
        real: &dyn std::fmt::Debug,
        read: impl std::future::Future<Output = T>,
        after: &[Exp],
    ) -> StepResult<T> {
        self.record(op, &format!("{real:?}"));
        let state = read.await;
        self.check_time(after)?;
        Ok(state)
    }

    /// Record `op -> result`.
    pub fn record(&mut self, op: &dyn std::fmt::Debug, result: &str) {
        let at = self.start.elapsed().as_millis();
        let _ = write!(self.log, "\n  {at:>5}ms  {op:?} -> {result}");
    }

    /// Compare one observed value with the model's.
    pub fn expect<T: PartialEq + std::fmt::Debug>(
        &mut self,
        what: &str,
        real: T,
        model: T,
    ) -> StepResult<()> {
        if real == model {
            return Ok(());
        }
        self.mismatch(format!("{what}: real {real:?}, model {model:?}"))
    }

    pub fn mismatch(&mut self, why: String) -> StepResult<()> {
        let _ = write!(self.log, "\n  MISMATCH {why}");
        Err(Stop::Mismatch(std::mem::take(&mut self.log)))
    }

    /// A step compared in full.
    pub fn compared(&self) {
        self.env.stats.steps.fetch_add(1, Ordering::Relaxed);
        self.env.stats.count(&self.kind, 1);
    }
}

/// Run `cases` sequences from `strategy` through `case`; on failure, panic
/// with the shrunk sequence's transcript.
pub fn run<S>(
    env: &Env,
    what: &str,
    cases: u32,
    strategy: S,
    case: impl Fn(&Env, &S::Value) -> Result<(), String>,
) where
    S: proptest::strategy::Strategy,
    S::Value: std::fmt::Debug,
{
    let started = Instant::now();
    let mut runner = TestRunner::new(PtConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 400,
        ..PtConfig::default()
    });
    let outcome = runner.run(&strategy, |input| {
        case(env, &input).map_err(TestCaseError::fail)
    });
    env.stats.report(what, started.elapsed());
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(reason, _)) => {
            panic!("model {what}: the real crate differs from the model; shrunk script:\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("model {what}: aborted: {reason}"),
    }
}

/// One case of `kind` on a fresh name `name(prefix)`, driven by `run`: a
/// stalled case passes, a mismatch fails with its transcript.
pub fn one_case<'e>(
    env: &'e Env,
    prefix: &str,
    kind: &str,
    run: impl AsyncFnOnce(&mut Step<'e>, &str) -> StepResult<()>,
) -> Result<(), String> {
    env.rt.block_on(async {
        let name = name(prefix);
        let mut step = Step::new(env, kind, format!("{kind} {name:?}:"));
        let outcome = run(&mut step, &name).await;
        if std::env::var_os("MODEL_VERBOSE").is_some() {
            eprintln!("{}\n", step.log);
        }
        match outcome {
            Ok(()) | Err(Stop::Stalled) => Ok(()),
            Err(Stop::Mismatch(log)) => Err(log),
        }
    })
}

/// A unique name per case.
pub fn name(prefix: &str) -> String {
    crate::common::unique(prefix)
}

/// `ms` for a transcript.
pub fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// A window `[lo, hi]` as offsets from `at`, for a transcript.
pub fn window_str(w: keys::Ttl, at: Instant) -> String {
    let off = |t: Instant| {
        if t >= at {
            format!("+{}ms", (t - at).as_millis())
        } else {
            format!("-{}ms", (at - t).as_millis())
        }
    };
    format!("[{}, {}]", off(w.lo), off(w.hi))
}

/// A lease for a transcript.
pub fn lease_str(l: Option<Duration>) -> String {
    l.map_or_else(|| "watchdog".to_owned(), ms)
}
