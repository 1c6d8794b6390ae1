//! Test harness for the command-line tool: a private `redis-server` per
//! test (free loopback port, no persistence, killed on drop; `REDIS_URL`
//! overrides), a minimal synchronous RESP client to write Java-shaped state
//! by hand and to subscribe, and helpers to run the built binary.
//! The server start is the main crate's `tests/common/mod.rs`, copied.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_redisson-lock");

pub struct Server {
    child: Option<Child>,
    pub url: String,
    pub host: String,
    pub port: u16,
}

impl Server {
    /// `REDIS_URL` if set, else a private server.
    pub fn start() -> Server {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => {
                let rest = url.trim_start_matches("redis://");
                let hostport = rest.rsplit('@').next().unwrap_or(rest);
                let hostport = hostport.split('/').next().unwrap_or(hostport);
                let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
                Server {
                    child: None,
                    host: host.to_owned(),
                    port: port.parse().expect("REDIS_URL port"),
                    url,
                }
            }
            _ => Server::private(&[]),
        }
    }

    /// Always a private server, with extra `redis-server` arguments.
    pub fn private(args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        for _ in 0..10 {
            let port = free_port();
            if let Some(child) = spawn(port, &args, Duration::from_secs(5)) {
                return Server {
                    child: Some(child),
                    url: format!("redis://127.0.0.1:{port}"),
                    host: "127.0.0.1".to_owned(),
                    port,
                };
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// A raw connection.
    pub fn raw(&self) -> Resp {
        Resp::connect(&self.host, self.port)
    }

    /// Run the tool against this server (`--url` given), capturing output.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.cli_command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run redisson-lock")
    }

    /// The tool as a `Command`, with `--url` set.
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("REDIS_URL")
            .arg("--url")
            .arg(&self.url)
            .args(args);
        cmd
    }

    /// Run the tool and parse its standard output as JSON.
    pub fn json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let out = self.cli(args);
        let text = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Start `redis-server` on `port` and wait until it answers with our token.
fn spawn(port: u16, args: &[String], wait: Duration) -> Option<Child> {
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
            return None;
        }
        match probe(port, &token, args) {
            Probe::Ours => return Some(child),
            Probe::Other => break,
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
fn probe(port: u16, token: &str, args: &[String]) -> Probe {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Probe::NotYet;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    // A server started with a password answers NOAUTH: ask with it.
    if let Some(i) = args.iter().position(|a| a == "--requirepass") {
        let pass = &args[i + 1];
        let _ = s.write_all(format!("AUTH {pass}\r\n").as_bytes());
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    }
    if s.write_all(b"CONFIG GET dbfilename\r\n").is_err() {
        return Probe::NotYet;
    }
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(n) if n > 0 && String::from_utf8_lossy(&buf[..n]).contains(token) => Probe::Ours,
        Ok(n) if n > 0 && buf[0] == b'*' => Probe::Other,
        _ => Probe::NotYet,
    }
}

/// A unique name for this test run.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// A Java-shaped client id.
pub fn java_client_id() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// Epoch milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A RESP reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    pub fn text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// A minimal synchronous Redis connection.
pub struct Resp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Resp {
    pub fn connect(host: &str, port: u16) -> Resp {
        let stream = TcpStream::connect((host, port)).expect("connect to test redis");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Resp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a.as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&buf).expect("send to redis");
    }

    /// Send a command and read its reply; panics on an error reply.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        match self.read().expect("a reply") {
            Reply::Error(e) => panic!("{args:?}: {e}"),
            reply => reply,
        }
    }

    /// Read one reply (`None` on timeout).
    pub fn read(&mut self) -> Option<Reply> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let line = line.trim_end_matches("\r\n");
        let (tag, rest) = line.split_at(1);
        Some(match tag {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut buf = vec![0u8; n as usize + 2];
                    self.reader.read_exact(&mut buf).unwrap();
                    buf.truncate(n as usize);
                    Reply::Bulk(Some(buf))
                }
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    Reply::Array(None)
                } else {
                    Reply::Array(Some((0..n).map(|_| self.read().unwrap()).collect()))
                }
            }
            other => panic!("unexpected RESP type {other:?}"),
        })
    }

    pub fn exists(&mut self, key: &str) -> bool {
        self.cmd(&["EXISTS", key]).int() == 1
    }

    /// Subscribe to `channel` (this connection is then for messages only).
    pub fn subscribe(mut self, channel: &str) -> Subscriber {
        self.send(&["SUBSCRIBE", channel]);
        let confirm = self.read().expect("subscribe confirmation");
        assert!(matches!(confirm, Reply::Array(Some(_))), "{confirm:?}");
        Subscriber { conn: self }
    }
}

pub struct Subscriber {
    conn: Resp,
}

impl Subscriber {
    /// The next message's payload, waiting at most `wait`.
    pub fn message(&mut self, wait: Duration) -> Option<String> {
        self.conn.writer.set_read_timeout(Some(wait)).unwrap();
        match self.conn.read()? {
            Reply::Array(Some(items)) if items.len() == 3 => items[2].text(),
            other => panic!("not a message: {other:?}"),
        }
    }
}

/// Wait (bounded) until `check` holds.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for: {what}");
}

/// A temporary file path unique to this run (removed on drop).
pub struct TempPath(pub std::path::PathBuf);

impl TempPath {
    pub fn new(prefix: &str) -> TempPath {
        TempPath(std::env::temp_dir().join(unique(prefix)))
    }

    pub fn str(&self) -> &str {
        self.0.to_str().unwrap()
    }

    pub fn read(&self) -> Option<String> {
        std::fs::read_to_string(&self.0).ok()
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
