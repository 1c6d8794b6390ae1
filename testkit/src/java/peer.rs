//! The `RedissonPeer` JVM and its line protocol.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::{Redisson, Steps};

/// How long any single Java command may take before the test fails (a
/// blocked `lock()` that should have been woken, a dead JVM).
const REPLY_TIMEOUT: Duration = Duration::from_secs(40);

/// Where the Java client connects.
pub enum Topology {
    /// One server: `redis://host:port`.
    Single(String),
    /// Cluster nodes (`redis://host:port` each) and the sharded
    /// subscription mode to ask for (`on`, `off`, `auto`).
    Cluster {
        /// The nodes, `redis://host:port` each.
        nodes: Vec<String>,
        /// `on`, `off` or `auto`.
        sharded: &'static str,
    },
    /// A Sentinel master name and the sentinels' `redis://host:port`.
    Sentinel {
        /// The master's name (`mymaster`).
        master: String,
        /// The sentinels, `redis://host:port` each.
        sentinels: Vec<String>,
    },
}

/// How a Java command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// It returned; [`Reply::value`] is its value.
    Ok,
    /// An exception; [`Reply::value`] starts with its class name.
    Err,
    /// The kind or call does not exist in this Redisson version.
    Unsupported,
}

/// One reply line of the peer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// How it ended.
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
    /// The log its commands and replies go to.
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
    /// The reply, failing the test after 40 s (`REPLY_TIMEOUT`).
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
