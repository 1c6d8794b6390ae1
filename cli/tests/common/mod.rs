//! Test harness for the command-line tool: a private `redis-server` per
//! test from the test kit (free loopback port, no persistence, killed on
//! drop; `REDIS_URL` overrides), a minimal synchronous RESP client to write
//! Java-shaped state by hand and to subscribe, and helpers to run the built
//! binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use redisson_lock_testkit::{free_port, unique};

pub const BIN: &str = env!("CARGO_BIN_EXE_redisson-lock");

/// The kit's server ([`redisson_lock_testkit::Server`]: `REDIS_URL`, or a
/// private `redis-server`), with what these tests do with it: a RESP
/// connection, and the tool run against it.
pub struct Server(redisson_lock_testkit::Server);

impl std::ops::Deref for Server {
    type Target = redisson_lock_testkit::Server;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Server {
    /// `REDIS_URL` if set, else a private server.
    pub fn start() -> Server {
        Server(redisson_lock_testkit::Server::start())
    }

    /// Always a private server, with extra `redis-server` arguments.
    pub fn private(args: &[&str]) -> Server {
        Server(redisson_lock_testkit::Server::private_with(args))
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

    /// The tool started with no input and its standard output dropped; its
    /// standard error is piped, to read once it has exited.
    pub fn cli_spawn(&self, args: &[&str]) -> Child {
        self.cli_spawn_with_stderr(args, Stdio::piped())
    }

    /// The tool started with no input and its output dropped.
    pub fn cli_spawn_quiet(&self, args: &[&str]) -> Child {
        self.cli_spawn_with_stderr(args, Stdio::null())
    }

    fn cli_spawn_with_stderr(&self, args: &[&str], stderr: Stdio) -> Child {
        self.cli_command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start redisson-lock")
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

/// How most tests begin: the server ([`Server::start`]: `REDIS_URL`, or a
/// private one), a raw connection to it, and a fresh key name starting with
/// `prefix`.
pub fn setup(prefix: &str) -> (Server, Resp, String) {
    let server = Server::start();
    let raw = server.raw();
    (server, raw, unique(prefix))
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
