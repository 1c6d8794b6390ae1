//! One Redis server: `REDIS_URL`, or a private `redis-server` (or another
//! server binary) on a free loopback port, with no persistence, killed on
//! drop.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Config};

use crate::process::{wait_serving, Process, Serving};

/// How to start a private server: which binary, with which extra
/// arguments. [`Server::private`] and [`Server::private_with`] are the
/// usual shortcuts.
#[derive(Clone, Debug)]
pub struct Options {
    program: OsString,
    args: Vec<String>,
    watchdog: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            program: "redis-server".into(),
            args: Vec::new(),
            watchdog: false,
        }
    }
}

impl Options {
    /// The first `redis-server` on `PATH`, no extra arguments.
    pub fn new() -> Options {
        Options::default()
    }

    /// Start this server binary instead (a path, or a name looked up on
    /// `PATH`): another Redis version, Valkey, ...
    pub fn program(mut self, program: impl Into<OsString>) -> Options {
        self.program = program.into();
        self
    }

    /// Extra server arguments (e.g. `["--maxclients", "50"]`), given again on
    /// every (re)start; later ones win over the kit's own.
    pub fn args(mut self, args: &[&str]) -> Options {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Also kill the server if this process dies without dropping it (see
    /// [`Process::with_watchdog`]).
    pub fn watchdog(mut self) -> Options {
        self.watchdog = true;
        self
    }

    /// Start the server on a free loopback port (trying up to 10 ports) and
    /// return once it answers. Panics if it cannot.
    pub fn start(self) -> Server {
        for _ in 0..10 {
            let port = crate::free_port();
            if let Some(child) = spawn(&self, port, Duration::from_secs(5)) {
                return Server {
                    child: Some(child),
                    private: true,
                    options: self,
                    url: format!("redis://127.0.0.1:{port}"),
                    host: "127.0.0.1".to_owned(),
                    port,
                };
            }
        }
        panic!(
            "could not start {} on a free port",
            self.program.to_string_lossy()
        );
    }
}

/// A Redis server for a test: `REDIS_URL`, or a private one killed on drop.
pub struct Server {
    child: Option<Process>,
    /// Whether the kit started the server (and so may stop and restart it).
    private: bool,
    options: Options,
    /// `redis://host:port` (or `REDIS_URL` as given).
    pub url: String,
    /// The host (`127.0.0.1` for a private server).
    pub host: String,
    /// The port (for `REDIS_URL`, the one in it, 6379 if none).
    pub port: u16,
}

impl Server {
    /// `REDIS_URL` if set, else a private server.
    pub fn start() -> Server {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => {
                let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
                let hostport = rest.rsplit('@').next().unwrap_or(rest);
                let hostport = hostport.split(['/', '?']).next().unwrap_or(hostport);
                let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
                Server {
                    child: None,
                    private: false,
                    options: Options::new(),
                    host: host.to_owned(),
                    port: port.parse().expect("REDIS_URL port"),
                    url,
                }
            }
            _ => Server::private(),
        }
    }

    /// Always a private server (for tests that stop it).
    pub fn private() -> Server {
        Options::new().start()
    }

    /// A private server started with extra `redis-server` arguments (e.g.
    /// `["--maxclients", "50"]`), which [`restart`](Self::restart) keeps.
    pub fn private_with(args: &[&str]) -> Server {
        Options::new().args(args).start()
    }

    /// Whether the kit started the server (true even while it is killed).
    pub fn is_private(&self) -> bool {
        self.private
    }

    /// Whether our server process is running (false for `REDIS_URL`).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The server's process id, while it runs (`None` for `REDIS_URL`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Process::id)
    }

    /// Kill the server process (to simulate an outage): SIGKILL, no
    /// shutdown, no goodbye to clients. A no-op for a `REDIS_URL` server or
    /// one already killed.
    pub fn kill(&mut self) {
        self.child = None;
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
            if let Some(child) = spawn(&self.options, self.port, left) {
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

    /// A `redisson-lock` client with the default settings.
    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    /// A `redisson-lock` client with its settings changed by `f`.
    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect_with(f(Config::from_url(&self.url).unwrap()))
            .await
            .expect("connect to test redis")
    }

    /// A plain fred client to inspect and poke at Redis state.
    pub async fn raw(&self) -> fred::clients::Client {
        crate::raw_client(&self.url).await
    }
}

/// Start the server on `port` and wait (at most `wait`, at least 1 s)
/// until it answers as itself; `None` if it exited (port taken) or another
/// server answers there.
fn spawn(options: &Options, port: u16, wait: Duration) -> Option<Process> {
    let mut args = base_args(port);
    args.extend(options.args.iter().cloned());
    let child = match Process::spawn(&options.program, &args) {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let program = options.program.to_string_lossy();
            if program == "redis-server" {
                panic!(
                    "redis-server not found on PATH: install it (e.g. `apt-get install -y redis-server`) or set REDIS_URL"
                )
            }
            panic!("{program} not found")
        }
        Err(e) => panic!("cannot start {}: {e}", options.program.to_string_lossy()),
    };
    let mut child = if options.watchdog {
        child.with_watchdog()
    } else {
        child
    };
    let password = options
        .args
        .iter()
        .position(|a| a == "--requirepass")
        .and_then(|i| options.args.get(i + 1));
    let within = wait.max(Duration::from_secs(1));
    match wait_serving(&mut child, port, password.map(String::as_str), within) {
        Serving::Ours => Some(child),
        Serving::Taken => None,
    }
}

/// The arguments every private server of the kit gets: loopback only, on
/// `port`, no RDB snapshots, no append-only file.
pub(crate) fn base_args(port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(String::from)
    .to_vec()
}
