//! Test harness: a private `redis-server` per test (free loopback port, no
//! persistence, killed on drop), or the server named by `REDIS_URL`.
//! [`fault`] holds the fault-injection tools (proxy, Redis-side faults,
//! child processes that hold locks). [`Fixture`] is the usual start of a
//! test: a server, a client, a raw client and a unique lock name.
#![allow(dead_code)]

pub mod fault;
pub mod java;
pub mod make;
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
pub mod tls;
pub mod topology;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fred::prelude::*;
use redisson_lock::{Client, Config};

pub struct Server {
    child: Option<Child>,
    /// Whether this harness started the server (and so may stop and restart it).
    private: bool,
    /// Extra `redis-server` arguments, given again on every (re)start.
    args: Vec<String>,
    pub url: String,
    pub port: u16,
}

impl Server {
    /// `REDIS_URL` if set, else a private server.
    pub fn start() -> Server {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Server {
                child: None,
                private: false,
                args: Vec::new(),
                url,
                port: 0,
            },
            _ => Server::private(),
        }
    }

    /// Always a private server (for tests that stop it).
    pub fn private() -> Server {
        Server::private_with(&[])
    }

    /// A private server started with extra `redis-server` arguments (e.g.
    /// `["--maxclients", "50"]`), which [`restart`](Self::restart) keeps.
    pub fn private_with(args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        for _ in 0..10 {
            let port = free_port();
            if let Some(child) = spawn(port, &args, Duration::from_secs(5)) {
                return Server {
                    child: Some(child),
                    private: true,
                    args,
                    url: format!("redis://127.0.0.1:{port}"),
                    port,
                };
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// Whether this harness started the server (true even while it is killed).
    pub fn is_private(&self) -> bool {
        self.private
    }

    /// Whether our server process is running (false for `REDIS_URL`).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kill the server process (to simulate an outage). `Child::kill` is
    /// SIGKILL on Unix: no shutdown, no goodbye to clients. A no-op for a
    /// `REDIS_URL` server or one already killed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill the server (if running) and start a fresh, empty one on the same
    /// port with the same settings; returns once it answers (within 10 s).
    /// Panics for a `REDIS_URL` server: use [`Server::private`].
    pub fn restart(&mut self) {
        self.require_private("restart");
        self.kill();
        self.start_again();
    }

    /// Start the server again on its port after [`kill`](Self::kill), empty
    /// (no persistence); returns once it answers. Retries for up to 10 s while
    /// the port cannot be bound yet. Panics if it is running, if the port
    /// stays taken, or for a `REDIS_URL` server.
    pub fn start_again(&mut self) {
        self.require_private("start_again");
        assert!(
            self.child.is_none(),
            "Server::start_again: the server on port {} is still running; kill() it first or use restart()",
            self.port
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(child) = spawn(self.port, &self.args, left) {
                self.child = Some(child);
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "Server::start_again: could not start redis-server on port {} within 10 s (port taken by another process?)",
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn require_private(&self, what: &str) {
        assert!(
            self.private,
            "Server::{what} needs a private server (Server::private()), not REDIS_URL={}",
            self.url
        );
    }

    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect(f(Config::from_url(&self.url).unwrap()))
            .await
            .expect("connect to test redis")
    }

    /// A plain fred client to inspect and poke at Redis state.
    pub async fn raw(&self) -> fred::clients::Client {
        let client = fred::clients::Client::new(
            fred::types::config::Config::from_url(&self.url).unwrap(),
            None,
            None,
            None,
        );
        client.init().await.expect("raw client connects");
        client
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The usual start of a test: a server ([`Server::start`]), a client of it,
/// a raw fred client to look at and poke Redis state, and a unique lock name.
/// Fields drop in order, so the server goes last, as with the locals it
/// replaces.
pub struct Fixture {
    pub client: Client,
    pub raw: fred::clients::Client,
    pub name: String,
    pub server: Server,
}

impl Fixture {
    /// A server, a client with the default settings, a raw client, and a
    /// name `unique(prefix)`.
    pub async fn new(prefix: &str) -> Fixture {
        Fixture::with(prefix, |c| c).await
    }

    /// The same, with the client's settings changed by `config`.
    pub async fn with(prefix: &str, config: impl FnOnce(Config) -> Config) -> Fixture {
        let server = Server::start();
        Fixture {
            client: server.client_with(config).await,
            raw: server.raw().await,
            name: unique(prefix),
            server,
        }
    }

    /// Another client of the same server (another client id).
    pub async fn client(&self) -> Client {
        self.server.client().await
    }

    /// Another client of the same server, with changed settings.
    pub async fn client_with(&self, config: impl FnOnce(Config) -> Config) -> Client {
        self.server.client_with(config).await
    }

    /// Another raw client (its own connection, e.g. for a task of its own).
    pub async fn raw(&self) -> fred::clients::Client {
        self.server.raw().await
    }

    /// Whether `key` exists.
    pub async fn exists(&self, key: &str) -> bool {
        self.raw.exists::<i64, _>(key).await.unwrap() == 1
    }

    /// `PTTL key` in ms (-2: no key, -1: no expiry).
    pub async fn pttl(&self, key: &str) -> i64 {
        self.raw.pttl(key).await.unwrap()
    }

    /// `HGETALL key`.
    pub async fn hgetall(&self, key: &str) -> HashMap<String, String> {
        self.raw.hgetall(key).await.unwrap()
    }

    /// `KEYS pattern`.
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        self.raw
            .custom(fred::cmd!("KEYS"), vec![pattern])
            .await
            .unwrap()
    }

    /// A Java-like listener: a connection of its own subscribed to `channel`.
    pub async fn listen(&self, channel: &str) -> Listener {
        let client = self.raw.clone_new();
        client.init().await.unwrap();
        let messages = client.message_rx();
        client.subscribe(channel).await.unwrap();
        // fred returns from SUBSCRIBE once it is written; the PING's reply
        // comes after the server ran it.
        let _: Value = client.ping(None).await.unwrap();
        Listener { client, messages }
    }

    /// `PUBSUB CHANNELS pattern`: the channels anyone subscribes to.
    pub async fn channels(&self, pattern: &str) -> Vec<String> {
        self.raw
            .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", pattern])
            .await
            .unwrap()
    }
}

/// A subscribed connection and the messages it received ([`Fixture::listen`]).
pub struct Listener {
    pub client: fred::clients::Client,
    pub messages: tokio::sync::broadcast::Receiver<fred::types::Message>,
}

impl Listener {
    /// Every message published so far, in order. A PING on the listener's
    /// connection is answered after every message queued for it before, so
    /// once it returns every message of a command that already returned is
    /// here.
    pub async fn drain(&mut self) -> Vec<String> {
        let _: Value = self.client.ping(None).await.unwrap();
        let mut out = Vec::new();
        while let Ok(m) = self.messages.try_recv() {
            out.push(m.value.as_string().unwrap_or_default());
        }
        out
    }
}

/// A loopback port that was free a moment ago (another process may take it
/// before you bind it: check what answers there).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Start `redis-server` on `port` and wait (at most `wait`, at least 1 s)
/// until it answers with our token; `None` if it exited (port taken) or
/// another server answers there.
fn spawn(port: u16, args: &[String], wait: Duration) -> Option<Child> {
    // A unique setting tells our server apart from one that another test
    // started on the same port between picking the port and binding it.
    let token = format!("harness-{}.rdb", uuid::Uuid::new_v4().simple());
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dbfilename",
            &token,
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "redis-server not found on PATH: install it (e.g. `apt-get install -y redis-server`) or set REDIS_URL"
        ),
        Err(e) => panic!("cannot start redis-server: {e}"),
    };
    let deadline = Instant::now() + wait.max(Duration::from_secs(1));
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None; // exited: port taken, try another
        }
        match probe(port, &token) {
            Probe::Ours => return Some(child),
            Probe::Other => break, // the port belongs to another server
            Probe::NotYet => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

enum Probe {
    Ours,
    Other,
    NotYet,
}

/// Ask the server on `port` for its dbfilename: ours carries `token`.
fn probe(port: u16, token: &str) -> Probe {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Probe::NotYet;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"CONFIG GET dbfilename\r\n").is_err() {
        return Probe::NotYet;
    }
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(n) if n > 0 && String::from_utf8_lossy(&buf[..n]).contains(token) => Probe::Ours,
        Ok(n) if n > 0 && buf[0] == b'*' => Probe::Other,
        _ => Probe::NotYet, // not listening yet, or -LOADING
    }
}

/// A lock name unique to this test run.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Subscribers of `channel`, per PUBSUB NUMSUB.
pub async fn numsub(raw: &fred::clients::Client, channel: &str) -> i64 {
    let reply: Vec<Value> = raw
        .custom(
            fred::cmd!("PUBSUB"),
            vec!["NUMSUB".to_string(), channel.to_string()],
        )
        .await
        .unwrap();
    reply.get(1).and_then(|v| v.as_i64()).unwrap_or(-1)
}

/// Wait (bounded) until `check` holds; for effects that happen in background
/// tasks with no event to observe (a fire-and-forget DEL, an UNSUBSCRIBE).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Wait (bounded) until `channel` has exactly `n` subscribers: how a test
/// knows a waiter is waiting (it subscribes first) or has left.
pub async fn wait_numsub(raw: &fred::clients::Client, channel: &str, n: i64) {
    eventually(&format!("{n} subscriber(s) on {channel}"), || async move {
        numsub(raw, channel).await == n
    })
    .await;
}

/// Every key matching `matches`: `key (type, pttl): contents`.
pub async fn describe_keys(
    raw: &fred::clients::Client,
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    let keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
    let mut out = Vec::new();
    for key in keys.into_iter().filter(|k| matches(k)) {
        let kind: String = raw
            .custom(fred::cmd!("TYPE"), vec![key.clone()])
            .await
            .unwrap();
        let pttl: i64 = raw.pttl(&key).await.unwrap();
        let contents: Value = match kind.as_str() {
            "hash" => raw.custom(fred::cmd!("HGETALL"), vec![key.clone()]).await,
            "list" => {
                raw.custom(
                    fred::cmd!("LRANGE"),
                    vec![key.clone(), "0".into(), "-1".into()],
                )
                .await
            }
            "zset" => {
                raw.custom(
                    fred::cmd!("ZRANGE"),
                    vec![key.clone(), "0".into(), "-1".into(), "WITHSCORES".into()],
                )
                .await
            }
            "string" => raw.custom(fred::cmd!("GET"), vec![key.clone()]).await,
            _ => Ok(Value::Null),
        }
        .unwrap_or(Value::Null);
        out.push(format!("{key} ({kind}, pttl {pttl} ms): {contents:?}"));
    }
    out
}

/// Whether the server behind `raw` has sharded pub/sub (Redis 7+, Valkey):
/// it knows `PUBSUB SHARDNUMSUB`. Tests of sharded pub/sub ask this rather
/// than assume a version; without it they check the typed refusal instead.
pub async fn supports_sharded_pubsub(raw: &fred::clients::Client) -> bool {
    raw.custom::<Value, _>(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB"])
        .await
        .is_ok()
}

/// How many times the server has run `command` (`INFO commandstats`): how a
/// test sees a command it cannot otherwise observe (a `WAIT`, a watcher's
/// `HEXISTS`).
pub async fn command_calls(raw: &fred::clients::Client, command: &str) -> u64 {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
