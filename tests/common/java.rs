//! A real Java Redisson client beside the crate: finds (or builds) a Redisson
//! class path under `target/redisson-java/VERSION/`, compiles
//! `interop/java/RedissonPeer.java` against it (once per version and source
//! hash, into `target/redisson-peer/`), starts it as a child process on the
//! same Redis and talks to it line by line (see the header of
//! `RedissonPeer.java` for the commands). The JVM is killed on drop.
//!
//! Every command and reply, and every note a test adds, goes into one
//! [`Steps`] log, which assertion messages print, so a failure says which
//! side did what, in which order, and when.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// The Redisson versions the tests know, newest first.
pub const VERSIONS: [&str; 4] = ["4.7.0", "3.45.0", "3.23.0", "3.17.0"];

/// How long any single Java command may take before the test fails (a
/// blocked `lock()` that should have been woken, a dead JVM).
const REPLY_TIMEOUT: Duration = Duration::from_secs(40);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `REDISSON_VERSIONS` as a list, if set and not empty.
pub fn required_versions() -> Option<Vec<String>> {
    let v = std::env::var("REDISSON_VERSIONS").ok()?;
    let list: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!list.is_empty()).then_some(list)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skip loudly, or fail under `CI=true`.
fn skip_or_fail(why: &str) -> Option<Redisson> {
    assert!(
        !ci(),
        "CI=true and the Java interop tests cannot run: {why}"
    );
    println!("skipped: {why} (Java Redisson interop not tested)");
    eprintln!("skipped: {why} (Java Redisson interop not tested)");
    None
}

/// Whether `java` and `javac` both run (asked once per process).
fn has_java() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| has_program("java") && has_program("javac"))
}

fn has_program(name: &str) -> bool {
    std::process::Command::new(name)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The class path file of a built version.
fn classpath_file(version: &str) -> PathBuf {
    root()
        .join("target/redisson-java")
        .join(version)
        .join("classpath")
}

/// A Redisson build and the peer compiled against it.
#[derive(Clone, Debug)]
pub struct Redisson {
    pub version: String,
    /// The whole `-cp`: Redisson's jars and the peer's classes.
    pub classpath: String,
}

/// The Redisson build of `version`, with the peer compiled against it, or
/// `None` (after printing why) when this version is not to be tested here.
///
/// * `REDISSON_VERSIONS` set: a listed version must be usable (else panic);
///   an unlisted one is skipped.
/// * Unset: without `java`/`javac` (or, when nothing is built, without
///   `../shared/redisson-java/build.sh`) print "skipped" and return `None`,
///   or panic under `CI=true`. When no version is built at all, build 4.7.0
///   once per process. Versions not built are skipped.
pub fn redisson(version: &str) -> Option<Redisson> {
    assert!(
        VERSIONS.contains(&version),
        "unknown Redisson version {version}"
    );
    let required = required_versions();
    if let Some(list) = &required {
        if !list.iter().any(|v| v == version) {
            println!("skipped: Redisson {version} is not in REDISSON_VERSIONS={list:?}");
            return None;
        }
        assert!(
            has_java(),
            "REDISSON_VERSIONS lists {version} but java/javac are not on PATH"
        );
        assert!(
            classpath_file(version).exists(),
            "REDISSON_VERSIONS lists {version} but {} does not exist: build it first \
             (bash ../shared/redisson-java/build.sh target/redisson-java/4.7.0, or \
             interop/redisson/build.sh {version} target/redisson-java/{version})",
            classpath_file(version).display()
        );
    } else {
        if !has_java() {
            return skip_or_fail("java/javac not found on PATH");
        }
        if !VERSIONS.iter().any(|v| classpath_file(v).exists()) {
            if let Err(why) = build_default() {
                return skip_or_fail(&why);
            }
        }
        if !classpath_file(version).exists() {
            println!(
                "skipped: Redisson {version} is not built ({} missing)",
                classpath_file(version).display()
            );
            return None;
        }
    }
    let jars = std::fs::read_to_string(classpath_file(version))
        .unwrap_or_else(|e| panic!("read {}: {e}", classpath_file(version).display()));
    let jars = jars.trim().to_string();
    let classes = compile_peer(version, &jars);
    Some(Redisson {
        version: version.to_string(),
        classpath: format!("{jars}:{}", classes.display()),
    })
}

/// Build Redisson 4.7.0 with `../shared/redisson-java/build.sh`, once per
/// process.
fn build_default() -> Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let script = root().join("../shared/redisson-java/build.sh");
            if !script.exists() {
                return Err(format!(
                    "no Redisson build in target/redisson-java/ and no {} to make one",
                    script.display()
                ));
            }
            let out = root().join("target/redisson-java/4.7.0");
            eprintln!("building Redisson 4.7.0 with {} ...", script.display());
            let result = std::process::Command::new("bash")
                .arg(&script)
                .arg(&out)
                .arg("4.7.0")
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if !result.status.success() || !classpath_file("4.7.0").exists() {
                return Err(format!(
                    "{} failed ({}): {}",
                    script.display(),
                    result.status,
                    String::from_utf8_lossy(&result.stderr)
                ));
            }
            Ok(())
        })
        .clone()
}

/// FNV-1a, 64 bits: a stable hash of the peer's source for its cache key.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Compile the peer against `jars` into
/// `target/redisson-peer/VERSION-HASH/` unless already there; returns that
/// directory. Safe against parallel tests and processes (compiles into a
/// temporary directory, then renames).
fn compile_peer(version: &str, jars: &str) -> PathBuf {
    static COMPILED: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = compiled.iter().find(|(v, _)| v == version) {
        return dir.clone();
    }
    let source = root().join("interop/java/RedissonPeer.java");
    let text = std::fs::read(&source).unwrap_or_else(|e| panic!("read {}: {e}", source.display()));
    let hash = fnv(&[text.as_slice(), jars.as_bytes()].concat());
    let base = root().join("target/redisson-peer");
    let dir = base.join(format!("{version}-{hash:016x}"));
    if !dir.join("RedissonPeer.class").exists() {
        let tmp = base.join(format!(
            "{version}-{hash:016x}.tmp-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&tmp).expect("create the peer's class directory");
        let out = std::process::Command::new("javac")
            .args([
                "--release",
                "17",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                jars,
                "-d",
            ])
            .arg(&tmp)
            .arg(&source)
            .output()
            .expect("javac runs");
        assert!(
            out.status.success(),
            "javac of {} against Redisson {version} failed:\n{}{}",
            source.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if std::fs::rename(&tmp, &dir).is_err() {
            // Another process got there first.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(
            dir.join("RedissonPeer.class").exists(),
            "compiled peer missing in {}",
            dir.display()
        );
    }
    compiled.push((version.to_string(), dir.clone()));
    dir
}

// ---------------------------------------------------------------- steps log

/// The logs made on each test's thread (see [`Steps::of_test`]).
static REGISTRY: Mutex<Vec<(String, Vec<Steps>)>> = Mutex::new(Vec::new());

/// The sequence of what each side did, shared by the peer and the test.
#[derive(Clone)]
pub struct Steps {
    start: Instant,
    lines: Arc<Mutex<Vec<String>>>,
    /// Printed at the top of every failure: `Redisson 4.7.0, <scenario>`.
    pub label: String,
}

impl Steps {
    pub fn new(label: impl Into<String>) -> Steps {
        let steps = Steps {
            start: Instant::now(),
            lines: Arc::new(Mutex::new(Vec::new())),
            label: label.into(),
        };
        if let Some(test) = std::thread::current().name() {
            let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            match registry.iter_mut().find(|(t, _)| t == test) {
                Some((_, list)) => list.push(steps.clone()),
                None => registry.push((test.to_string(), vec![steps.clone()])),
            }
        }
        steps
    }

    /// Every log [`new`](Self::new) made on the thread named `test` (a
    /// test's own thread), for a test that ran out of time.
    pub fn of_test(test: &str) -> String {
        let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (_, list) in registry.iter().filter(|(t, _)| t == test) {
            for steps in list {
                out.push_str(&format!("[{}]\n{}", steps.label, steps.dump()));
            }
        }
        out
    }

    /// Record one step (`rust: ...`, `java t1: ...`).
    pub fn note(&self, what: impl AsRef<str>) {
        let line = format!(
            "{:>7.1} ms  {}",
            self.start.elapsed().as_secs_f64() * 1000.0,
            what.as_ref()
        );
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    /// The log so far, one step per line.
    pub fn dump(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let skip = lines.len().saturating_sub(150);
        let mut out = String::new();
        if skip > 0 {
            out.push_str(&format!("  ... {skip} earlier steps\n"));
        }
        for l in &lines[skip..] {
            out.push_str("  ");
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// Panic with `msg`, the label and the steps.
    #[track_caller]
    pub fn fail(&self, msg: impl AsRef<str>) -> ! {
        panic!(
            "[{}] {}\nsteps (both sides, in order):\n{}",
            self.label,
            msg.as_ref(),
            self.dump()
        )
    }

    /// Assert `cond`, else [`fail`](Self::fail) with `msg`.
    #[track_caller]
    pub fn check(&self, cond: bool, msg: impl AsRef<str>) {
        if !cond {
            self.fail(msg);
        }
    }

    /// Assert equality, naming both values.
    #[track_caller]
    pub fn eq<T: PartialEq + std::fmt::Debug>(&self, got: T, want: T, what: impl AsRef<str>) {
        if got != want {
            self.fail(format!("{}: got {got:?}, expected {want:?}", what.as_ref()));
        }
    }
}

// ---------------------------------------------------------------- the peer

/// Where the Java client connects.
pub enum Topology {
    /// One server: `redis://host:port`.
    Single(String),
    /// Cluster nodes (`redis://host:port` each) and the sharded
    /// subscription mode to ask for (`on`, `off`, `auto`).
    Cluster {
        nodes: Vec<String>,
        sharded: &'static str,
    },
    /// A Sentinel master name and the sentinels' `redis://host:port`.
    Sentinel {
        master: String,
        sentinels: Vec<String>,
    },
}

/// How a Java command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// An exception; [`Reply::value`] starts with its class name.
    Err,
    /// The kind or call does not exist in this Redisson version.
    Unsupported,
}

/// One reply line of the peer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: Status,
    /// How long the call took inside the JVM.
    pub java_ms: u64,
    /// The value (`ok`), `ExceptionClass message` (`err`) or the reason.
    pub value: String,
    /// When the reply line arrived here.
    pub at: Instant,
}

impl Reply {
    /// The exception class of an `err` reply.
    pub fn exception(&self) -> &str {
        self.value.split(' ').next().unwrap_or_default()
    }
}

type Waiting = HashMap<u64, (String, oneshot::Sender<Reply>)>;

/// A running `RedissonPeer` JVM.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    waiting: Arc<Mutex<Waiting>>,
    next: AtomicU64,
    /// Redisson's client id (`redisson.getId()`), the first half of its owner fields.
    pub client_id: String,
    /// The version Redisson reports (its jar manifest).
    pub version: String,
    /// The command its scripts publish with: `PUBLISH` or `SPUBLISH`.
    pub publish: String,
    pub steps: Steps,
    stderr: Arc<Mutex<Vec<String>>>,
    /// A label for the steps log: `java` (or `java#2` for a second JVM).
    who: String,
}

/// A command sent and not yet answered.
pub struct Pending {
    rx: oneshot::Receiver<Reply>,
    got: Option<Reply>,
    what: String,
    steps: Steps,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Pending {
    /// The reply, failing the test after [`REPLY_TIMEOUT`].
    pub async fn reply(self) -> Reply {
        if let Some(reply) = self.got {
            return reply;
        }
        match tokio::time::timeout(REPLY_TIMEOUT, self.rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => self.steps.fail(format!(
                "the JVM ended before answering `{}`; its stderr:\n{}",
                self.what,
                tail(&self.stderr)
            )),
            Err(_) => self.steps.fail(format!(
                "no reply to `{}` within {REPLY_TIMEOUT:?} (blocked?); JVM stderr:\n{}",
                self.what,
                tail(&self.stderr)
            )),
        }
    }

    /// The value of an `ok` reply (failing on anything else).
    pub async fn ok(self) -> String {
        let what = self.what.clone();
        let steps = self.steps.clone();
        let reply = self.reply().await;
        if reply.status != Status::Ok {
            steps.fail(format!(
                "`{what}` failed on the Java side: {:?} {}",
                reply.status, reply.value
            ));
        }
        reply.value
    }

    /// Whether the reply is already here (the command has finished).
    pub fn is_done(&mut self) -> bool {
        if self.got.is_some() {
            return true;
        }
        match self.rx.try_recv() {
            Ok(reply) => {
                self.got = Some(reply);
                true
            }
            Err(oneshot::error::TryRecvError::Empty) => false,
            Err(oneshot::error::TryRecvError::Closed) => true,
        }
    }
}

fn tail(lines: &Arc<Mutex<Vec<String>>>) -> String {
    let lines = lines.lock().unwrap_or_else(|e| e.into_inner());
    let skip = lines.len().saturating_sub(40);
    lines[skip..].join("\n")
}

impl Peer {
    /// Start a JVM on `topology`; `extra` are more peer options (e.g.
    /// `["--watchdog", "1500"]`). Returns once it printed `ready`.
    pub async fn start(
        redisson: &Redisson,
        topology: &Topology,
        extra: &[&str],
        steps: &Steps,
    ) -> Peer {
        Peer::start_as("java", redisson, topology, extra, steps).await
    }

    /// [`start`](Self::start), naming this JVM `who` in the steps log.
    pub async fn start_as(
        who: &str,
        redisson: &Redisson,
        topology: &Topology,
        extra: &[&str],
        steps: &Steps,
    ) -> Peer {
        let mut args: Vec<String> = Vec::new();
        match topology {
            Topology::Single(url) => args.extend(["--single".into(), url.clone()]),
            Topology::Cluster { nodes, sharded } => args.extend([
                "--cluster".into(),
                nodes.join(","),
                "--sharded".into(),
                sharded.to_string(),
            ]),
            Topology::Sentinel { master, sentinels } => args.extend([
                "--sentinel".into(),
                master.clone(),
                "--nodes".into(),
                sentinels.join(","),
            ]),
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        steps.note(format!(
            "{who}: start JVM (Redisson {}) {}",
            redisson.version,
            args.join(" ")
        ));
        let mut child = Command::new("java")
            .args([
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Xss512k",
                "-Xmx256m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                &redisson.classpath,
                "RedissonPeer",
            ])
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| steps.fail(format!("cannot start java: {e}")));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        {
            let stderr = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr_pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    stderr.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            });
        }
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
        let first = match first {
            Ok(Ok(Some(line))) => line,
            other => steps.fail(format!(
                "{who} (Redisson {}) did not start: {other:?}; stderr:\n{}",
                redisson.version,
                tail(&stderr)
            )),
        };
        let parts: Vec<&str> = first.split(' ').collect();
        if parts.first() != Some(&"ready") || parts.len() < 4 {
            // Give stderr a moment to arrive for the message.
            tokio::time::sleep(Duration::from_millis(200)).await;
            steps.fail(format!(
                "{who} (Redisson {}) failed to start: {first}\nstderr:\n{}",
                redisson.version,
                tail(&stderr)
            ));
        }
        let (client_id, version, publish) = (
            parts[1].to_string(),
            parts[2].to_string(),
            parts[3].to_string(),
        );
        steps.note(format!(
            "{who}: ready, client id {client_id}, Redisson {version}, publishes with {publish}"
        ));
        if version != "unknown" && version != redisson.version {
            steps.fail(format!(
                "{who} reports Redisson {version}, but the class path is for {}",
                redisson.version
            ));
        }
        let waiting: Arc<Mutex<Waiting>> = Arc::new(Mutex::new(HashMap::new()));
        {
            let waiting = waiting.clone();
            let steps = steps.clone();
            let who = who.to_string();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    let at = Instant::now();
                    let mut it = line.splitn(4, ' ');
                    let id = it.next().and_then(|s| s.parse::<u64>().ok());
                    let status = match it.next() {
                        Some("ok") => Status::Ok,
                        Some("err") => Status::Err,
                        Some("unsupported") => Status::Unsupported,
                        _ => {
                            steps.note(format!("{who}: unexpected output: {line}"));
                            continue;
                        }
                    };
                    let java_ms = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                    let value = it.next().unwrap_or_default().to_string();
                    let Some((what, tx)) = id.and_then(|id| {
                        waiting
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&id)
                    }) else {
                        steps.note(format!("{who}: reply to nothing: {line}"));
                        continue;
                    };
                    steps.note(format!(
                        "{who} {what} -> {} {value} ({java_ms} ms in Java)",
                        match status {
                            Status::Ok => "ok",
                            Status::Err => "ERR",
                            Status::Unsupported => "unsupported",
                        }
                    ));
                    let _ = tx.send(Reply {
                        status,
                        java_ms,
                        value,
                        at,
                    });
                }
            });
        }
        Peer {
            child,
            stdin,
            waiting,
            next: AtomicU64::new(1),
            client_id,
            version,
            publish,
            steps: steps.clone(),
            stderr,
            who: who.to_string(),
        }
    }

    /// Send `op` to worker `slot` (`t1`, `t2`, ...) without waiting.
    pub async fn send(&mut self, slot: &str, op: &str) -> Pending {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let what = format!("{slot}: {op}");
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (what.clone(), tx));
        self.steps.note(format!("{} {what} (sent)", self.who));
        let line = format!("{id} {slot} {op}\n");
        if let Err(e) = self.stdin.write_all(line.as_bytes()).await {
            self.steps.fail(format!(
                "cannot write to the JVM ({e}); stderr:\n{}",
                tail(&self.stderr)
            ));
        }
        let _ = self.stdin.flush().await;
        Pending {
            rx,
            got: None,
            what: format!("{} {what}", self.who),
            steps: self.steps.clone(),
            stderr: self.stderr.clone(),
        }
    }

    /// Send and wait for the reply.
    pub async fn call(&mut self, slot: &str, op: &str) -> Reply {
        self.send(slot, op).await.reply().await
    }

    /// Send, wait, and require `ok`: its value.
    pub async fn ok(&mut self, slot: &str, op: &str) -> String {
        self.send(slot, op).await.ok().await
    }

    /// Require an `err` reply with exception class `class` (simple or full name).
    pub async fn err(&mut self, slot: &str, op: &str, class: &str) -> Reply {
        let reply = self.call(slot, op).await;
        let got = reply.exception();
        if reply.status != Status::Err || !(got == class || got.ends_with(&format!(".{class}"))) {
            self.steps.fail(format!(
                "`{slot}: {op}` should have thrown {class} on the Java side, got {:?} {}",
                reply.status, reply.value
            ));
        }
        reply
    }

    /// The owner field Redisson writes for worker `slot`:
    /// `clientId:threadId`.
    pub async fn owner_field(&mut self, slot: &str) -> String {
        let tid = self.ok(slot, "threadid").await;
        format!("{}:{tid}", self.client_id)
    }

    /// Kill the JVM with SIGKILL (no unlock, no goodbye) and wait for it.
    pub async fn kill(&mut self) {
        self.steps.note(format!("{}: kill -9", self.who));
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// The JVM's stderr so far (its last lines).
    pub fn stderr(&self) -> String {
        tail(&self.stderr)
    }
}
