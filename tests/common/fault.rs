//! Fault injection for tests.
//!
//! * [`Proxy`]: a TCP proxy in front of a Redis server that can stall,
//!   delay, cut or refuse connections, one direction or both.
//! * Redis-side faults on a "raw" fred client ([`Server::raw`](super::Server::raw)):
//!   [`client_kill`], [`client_pause`] / [`client_unpause`], [`script_flush`].
//! * [`ChildProcess`]: lock code in another OS process (this test binary run
//!   again), to kill a holder for real or to check exclusion across processes.
//!   A test file that uses it calls [`child_entry!`](crate::child_entry) once,
//!   at its top level.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle as ThreadHandle;
use std::time::{Duration, Instant};

use fred::prelude::*;
use redisson_lock::{AnyKind, LockGuard};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

// ---------------------------------------------------------------------------
// Proxy
// ---------------------------------------------------------------------------

/// What every connection of a [`Proxy`] obeys; connections watch it, so a
/// change applies at once to open and new connections alike.
#[derive(Clone, Copy, Debug, Default)]
struct Control {
    stall_to_server: bool,
    stall_to_client: bool,
    delay: Duration,
    refuse: bool,
    /// Bumped by [`Proxy::cut`]: connections of an older generation close.
    generation: u64,
}

#[derive(Clone, Copy, Debug)]
enum Direction {
    ToServer,
    ToClient,
}

impl Control {
    fn stalled(&self, direction: Direction) -> bool {
        match direction {
            Direction::ToServer => self.stall_to_server,
            Direction::ToClient => self.stall_to_client,
        }
    }
}

/// A TCP proxy on 127.0.0.1 in front of `127.0.0.1:<upstream port>`, for
/// network faults between a client and Redis.
///
/// Every accepted connection gets its own upstream connection, made at once
/// (even while stalled), and two pumps, one per direction. A pump reads a
/// chunk, waits out the delay, waits while its direction is stalled, then
/// writes the chunk: stalled bytes are held, in order, never dropped (beyond
/// the chunk in hand, the rest waits in the kernel's socket buffers). End of
/// stream is passed on (half-close) like data, so it is held by a stall too.
///
/// All controls take `&self` (share the proxy with `Arc` to drive it from
/// another task) and apply at once to open and new connections. Dropping the
/// proxy stops its listener and closes every connection; its tasks end
/// with it. The proxy never panics once started.
pub struct Proxy {
    port: u16,
    control: watch::Sender<Control>,
    live: Arc<watch::Sender<usize>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to `127.0.0.1:upstream_port`.
    /// Must be called within a tokio runtime.
    pub async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("proxy: bind a loopback port");
        let port = listener
            .local_addr()
            .expect("proxy: its local address")
            .port();
        let (control, watching) = watch::channel(Control::default());
        let live = Arc::new(watch::channel(0usize).0);
        let accept = tokio::spawn(accept_loop(listener, upstream_port, watching, live.clone()));
        Proxy {
            port,
            control,
            live,
            accept,
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`: the server, through this proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stop forwarding in both directions. Connections stay open; what they
    /// send is held and delivered by [`resume`](Self::resume). New connections
    /// are accepted and connected upstream, but forward nothing either.
    pub fn stall(&self) {
        self.control.send_modify(|c| {
            c.stall_to_server = true;
            c.stall_to_client = true;
        });
    }

    /// Stop forwarding client → server only (requests are held).
    pub fn stall_to_server(&self) {
        self.control.send_modify(|c| c.stall_to_server = true);
    }

    /// Stop forwarding server → client only (replies are held; the server
    /// still runs the commands).
    pub fn stall_to_client(&self) {
        self.control.send_modify(|c| c.stall_to_client = true);
    }

    /// Forward again in both directions, held bytes first, in order.
    pub fn resume(&self) {
        self.control.send_modify(|c| {
            c.stall_to_server = false;
            c.stall_to_client = false;
        });
    }

    /// Wait this long before forwarding each chunk, in both directions
    /// (`Duration::ZERO`: no delay). Chunks of one direction stay in order, so
    /// the delay adds up under a stream of small writes.
    pub fn set_delay(&self, delay: Duration) {
        self.control.send_modify(|c| c.delay = delay);
    }

    /// Close every open connection, both sides, at once (a FIN to each; bytes
    /// held by a stall are dropped). New connections are accepted as before.
    /// The closing happens in the connections' tasks: [`connections`](Self::connections)
    /// drops a moment later (see [`wait_connections`](Self::wait_connections)).
    pub fn cut(&self) {
        self.control.send_modify(|c| c.generation += 1);
    }

    /// While `true`, close each new connection right after accepting it (the
    /// client connects, then reads end of stream). Open connections are kept.
    pub fn refuse(&self, on: bool) {
        self.control.send_modify(|c| c.refuse = on);
    }

    /// Connections open right now (accepted and not yet closed).
    pub fn connections(&self) -> usize {
        *self.live.borrow()
    }

    /// Wait until exactly `n` connections are open; panics after `timeout`.
    pub async fn wait_connections(&self, n: usize, timeout: Duration) {
        let mut live = self.live.subscribe();
        if tokio::time::timeout(timeout, live.wait_for(|&open| open == n))
            .await
            .is_err()
        {
            panic!(
                "proxy: {} connection(s) open after {timeout:?}, expected {n}",
                self.connections()
            );
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns every connection task (a JoinSet, which aborts
        // them when dropped); dropping `control` also tells them to stop.
        self.accept.abort();
    }
}

/// Counts a connection as open for as long as it lives.
struct Live(Arc<watch::Sender<usize>>);

impl Live {
    fn enter(live: &Arc<watch::Sender<usize>>) -> Live {
        live.send_modify(|n| *n += 1);
        Live(live.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: u16,
    control: watch::Receiver<Control>,
    live: Arc<watch::Sender<usize>>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let now = *control.borrow();
                    if now.refuse {
                        drop(client);
                        continue;
                    }
                    connections.spawn(relay(
                        client,
                        upstream,
                        control.clone(),
                        now.generation,
                        Live::enter(&live),
                    ));
                }
                // e.g. out of file descriptors: back off rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// One proxied connection, until either side closes, it is cut, or the proxy
/// is dropped.
async fn relay(
    client: TcpStream,
    upstream: u16,
    control: watch::Receiver<Control>,
    generation: u64,
    _live: Live,
) {
    let mut cut = control.clone();
    let forward = async move {
        let server = TcpStream::connect(("127.0.0.1", upstream)).await?;
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::try_join!(
            pump(
                client_read,
                server_write,
                Direction::ToServer,
                control.clone()
            ),
            pump(server_read, client_write, Direction::ToClient, control),
        )?;
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        _ = forward => {}
        // Also ends when the proxy (the sender) is dropped.
        _ = cut.wait_for(|c| c.generation != generation) => {}
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    direction: Direction,
    mut control: watch::Receiver<Control>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        let delay = control.borrow().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if control.wait_for(|c| !c.stalled(direction)).await.is_err() {
            return Err(std::io::ErrorKind::ConnectionAborted.into()); // proxy dropped
        }
        if n == 0 {
            let _ = to.shutdown().await; // pass the end of stream on
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}

// ---------------------------------------------------------------------------
// Redis-side faults
// ---------------------------------------------------------------------------

/// A plain fred client for `url` (a proxy's, say). With `reconnect`, it
/// reconnects every 50 ms, forever, after losing its connection (commands
/// wait for it); without, a lost connection stays lost. Panics if it cannot
/// connect within 5 s.
pub async fn raw_client(url: &str, reconnect: bool) -> fred::clients::Client {
    let config = fred::types::config::Config::from_url(url).expect("a redis:// URL");
    let mut builder = fred::types::Builder::from_config(config);
    if reconnect {
        builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    }
    let client = builder.build().expect("a fred client");
    let _task = client.connect();
    match tokio::time::timeout(Duration::from_secs(5), client.wait_for_connect()).await {
        Ok(Ok(())) => client,
        Ok(Err(e)) => panic!("raw client cannot connect to {url}: {e}"),
        Err(_) => panic!("raw client did not connect to {url} within 5 s"),
    }
}

/// Try to connect a plain, non-reconnecting fred client to `url` (within 5 s),
/// for tests that expect connecting to fail.
pub async fn try_raw_client(url: &str) -> Result<fred::clients::Client, String> {
    let config = fred::types::config::Config::from_url(url).map_err(|e| e.to_string())?;
    let client = fred::clients::Client::new(config, None, None, None);
    match tokio::time::timeout(Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            let _ = client.quit().await;
            Err("no connection within 5 s".into())
        }
    }
}

/// Which connections [`client_kill`] closes (`CLIENT KILL TYPE ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    /// Command connections (`TYPE normal`).
    Normal,
    /// Connections in RESP2 subscriber mode (`TYPE pubsub`).
    Pubsub,
}

/// `CLIENT KILL TYPE normal|pubsub SKIPME yes`: close every such connection
/// but `raw`'s own; returns how many were closed.
pub async fn client_kill(raw: &fred::clients::Client, kind: ClientType) -> usize {
    let kind = match kind {
        ClientType::Normal => "normal",
        ClientType::Pubsub => "pubsub",
    };
    let killed: i64 = raw
        .custom(
            fred::cmd!("CLIENT"),
            vec!["KILL", "TYPE", kind, "SKIPME", "yes"],
        )
        .await
        .expect("CLIENT KILL");
    usize::try_from(killed).unwrap_or(0)
}

/// What [`client_pause`] holds back (`CLIENT PAUSE ... ALL|WRITE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseMode {
    /// Every command of every client (`ALL`), `raw`'s own included: a
    /// [`client_unpause`] waits for the pause to end, so pick a short one.
    All,
    /// Commands that may write (`WRITE`), including `EVALSHA`/`EVAL` and
    /// `PUBLISH`; reads and [`client_unpause`] still run.
    Write,
}

/// `CLIENT PAUSE <ms> ALL|WRITE`: the server holds back (does not refuse)
/// matching commands of every client for `duration`; they run after it.
pub async fn client_pause(raw: &fred::clients::Client, duration: Duration, mode: PauseMode) {
    let mode = match mode {
        PauseMode::All => "ALL",
        PauseMode::Write => "WRITE",
    };
    let ms = duration.as_millis().max(1).to_string();
    let _: Value = raw
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", ms.as_str(), mode])
        .await
        .expect("CLIENT PAUSE");
}

/// `CLIENT UNPAUSE`: end a pause early (a [`PauseMode::Write`] one; under
/// [`PauseMode::All`] this command itself waits for the pause to end).
pub async fn client_unpause(raw: &fred::clients::Client) {
    let _: Value = raw
        .custom(fred::cmd!("CLIENT"), vec!["UNPAUSE"])
        .await
        .expect("CLIENT UNPAUSE");
}

/// `SCRIPT FLUSH`: empty the server's script cache, so the next `EVALSHA`
/// of every script fails with `NOSCRIPT`.
pub async fn script_flush(raw: &fred::clients::Client) {
    let _: Value = raw
        .custom(fred::cmd!("SCRIPT"), vec!["FLUSH"])
        .await
        .expect("SCRIPT FLUSH");
}

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------

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

/// The name of the test [`child_entry!`](crate::child_entry) defines.
pub const CHILD_ENTRY: &str = "child_process_entry";

/// The lock kinds a [`Job`] can take.
pub const KINDS: [&str; 6] = ["lock", "fair", "read", "write", "spin", "fenced"];

/// Marks the child's progress lines among whatever else the test harness
/// prints on stdout (libtest may print `test child_process_entry ... ` just
/// before the first one, on the same line).
const MARK: &str = "@@fault-child@@ ";
const VAR_JOB: &str = "REDISSON_LOCK_FAULT_JOB";
const VAR_URL: &str = "REDISSON_LOCK_FAULT_URL";
const VAR_KIND: &str = "REDISSON_LOCK_FAULT_KIND";
const VAR_NAME: &str = "REDISSON_LOCK_FAULT_NAME";
const VAR_WATCHDOG_MS: &str = "REDISSON_LOCK_FAULT_WATCHDOG_MS";
const VAR_COUNTER_KEY: &str = "REDISSON_LOCK_FAULT_COUNTER_KEY";
const VAR_ROUNDS: &str = "REDISSON_LOCK_FAULT_ROUNDS";

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

impl Job {
    fn kind(&self) -> &str {
        match self {
            Job::Hold { kind, .. } | Job::Increment { kind, .. } => kind,
        }
    }

    fn to_env(&self) -> Vec<(&'static str, String)> {
        match self {
            Job::Hold {
                url,
                kind,
                name,
                watchdog_ms,
            } => vec![
                (VAR_JOB, "hold".into()),
                (VAR_URL, url.clone()),
                (VAR_KIND, kind.clone()),
                (VAR_NAME, name.clone()),
                (VAR_WATCHDOG_MS, watchdog_ms.to_string()),
            ],
            Job::Increment {
                url,
                kind,
                name,
                counter_key,
                rounds,
            } => vec![
                (VAR_JOB, "increment".into()),
                (VAR_URL, url.clone()),
                (VAR_KIND, kind.clone()),
                (VAR_NAME, name.clone()),
                (VAR_COUNTER_KEY, counter_key.clone()),
                (VAR_ROUNDS, rounds.to_string()),
            ],
        }
    }

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
    std::thread::spawn(|| {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 64];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        std::process::exit(0);
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("child runtime")
        .block_on(run_job(job));
}

/// Print a progress line for the parent.
fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n{MARK}{line}");
    let _ = out.flush();
}

async fn acquire(
    client: &redisson_lock::Client,
    kind: &str,
    name: &str,
) -> redisson_lock::Result<LockGuard<AnyKind>> {
    match kind {
        "lock" => client.lock(name)?.erase().lock().await,
        "fair" => client.fair_lock(name)?.erase().lock().await,
        "read" => client.read_write_lock(name)?.read().erase().lock().await,
        "write" => client.read_write_lock(name)?.write().erase().lock().await,
        "spin" => client.spin_lock(name)?.erase().lock().await,
        "fenced" => client.fenced_lock(name)?.erase().lock().await,
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
            let client = redisson_lock::Client::connect(config)
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
            let client = redisson_lock::Client::from_url(&url)
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

/// A child process running a [`Job`]: this test binary started again with
/// `--exact child_process_entry --ignored`. Its progress lines are read as
/// they come; it is killed (SIGKILL) on drop, and exits by itself if this
/// process dies (its stdin closes).
pub struct ChildProcess {
    job: Job,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<ThreadHandle<()>>,
    status: Option<ExitStatus>,
}

impl ChildProcess {
    /// Start a child for `job`. The test file must call
    /// [`child_entry!`](crate::child_entry).
    pub fn spawn(job: Job) -> ChildProcess {
        assert!(
            KINDS.contains(&job.kind()),
            "unknown lock kind {:?} (expected one of {KINDS:?})",
            job.kind()
        );
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                CHILD_ENTRY,
                "--nocapture",
                "--ignored",
                "--test-threads",
                "1",
            ])
            .envs(job.to_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a child process");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        let (sender, lines) = mpsc::unbounded_channel();
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            std::thread::spawn({
                let stdout = stdout.clone();
                move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if let Some(at) = line.find(MARK) {
                            let _ = sender.send(line[at + MARK.len()..].to_string());
                        }
                        if let Ok(mut all) = stdout.lock() {
                            all.push_str(&line);
                            all.push('\n');
                        }
                    }
                }
            }),
            std::thread::spawn({
                let stderr = stderr.clone();
                move || {
                    let mut err = err;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = err.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut all) = stderr.lock() {
                            all.push_str(&String::from_utf8_lossy(&buf[..n]));
                        }
                    }
                }
            }),
        ];
        ChildProcess {
            job,
            child,
            stdin,
            lines,
            stdout,
            stderr,
            readers,
            status: None,
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next progress line, without its marker (e.g. `HELD <field>`);
    /// `None` once the child's stdout is closed (it exited). Panics after
    /// `timeout`.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(line) => line,
            Err(_) => self.fail(&format!("no line from the child within {timeout:?}")),
        }
    }

    /// Wait for a progress line starting with `prefix` (skipping others) and
    /// return it whole. Panics, with the child's output, after `timeout` or if
    /// the child exits first.
    pub async fn wait_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if line.starts_with(prefix) => return line,
                Ok(Some(_)) => {}
                Ok(None) => self.fail(&format!(
                    "the child exited before printing {prefix:?} (does the test file call child_entry!()?)"
                )),
                Err(_) => self.fail(&format!("no {prefix:?} line within {timeout:?}")),
            }
        }
    }

    /// Wait for `DONE`, then for the child to exit successfully; panics after
    /// `timeout` (for both) or on failure.
    pub async fn wait_done(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.wait_line("DONE", timeout).await;
        self.wait_exit(deadline.saturating_duration_since(Instant::now()))
            .await;
    }

    /// Wait for the child to exit by itself (skipping any further lines), and
    /// panic unless it succeeded or within `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let drained = tokio::time::timeout(timeout, async {
            while self.lines.recv().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.fail(&format!("the child did not exit within {timeout:?}"));
        }
        // Its stdout is closed: the process is exiting. Wait (bounded) for it.
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    if !status.success() {
                        self.fail(&format!("the child exited with {status}"));
                    }
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Ok(None) => self.fail(&format!("the child did not exit within {timeout:?}")),
                Err(e) => self.fail(&format!("cannot wait for the child: {e}")),
            }
        }
    }

    /// Kill the child (SIGKILL: no unlock, no goodbye) and reap it.
    pub fn kill(&mut self) {
        self.stdin = None;
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Everything the child printed on stdout and stderr so far.
    pub fn output(&self) -> String {
        let out = self.stdout.lock().map(|s| s.clone()).unwrap_or_default();
        let err = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        format!("--- stdout ---\n{out}--- stderr ---\n{err}")
    }

    fn fail(&mut self, what: &str) -> ! {
        self.kill();
        // The child is gone, so its pipes are closed and the readers finish.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        panic!("child process {:?}: {what}\n{}", self.job, self.output());
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
