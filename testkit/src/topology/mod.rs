//! Deployments beyond one server, as real local processes: a Redis Cluster
//! ([`Cluster`]: 3 masters, 3 replicas), a Sentinel set-up ([`Sentinels`]:
//! 1 master, 1 replica, 3 sentinels) and a replicated master
//! ([`Replicated`]: 1 master, 1 replica). Each starts on free loopback ports
//! with no persistence, in a temporary directory of its own, and is killed
//! (and its directory removed) on drop. `REDIS_CLUSTER_URL` /
//! `REDIS_SENTINEL_URL` point the same tests at a user's own deployment
//! instead (tests that kill nodes then skip). The servers are the
//! `redis-server`, `redis-sentinel` and `redis-cli` first on `PATH`.

mod cluster;
mod sentinel;

use std::path::PathBuf;
use std::time::Duration;

use fred::prelude::*;

pub use crate::inspect::{raw_client, until};
pub use cluster::Cluster;
pub use sentinel::{Sentinels, SERVICE};

use crate::process::{wait_serving, Process, Serving};

/// One `redis-server` (or `redis-sentinel`) process of a topology, on a
/// fixed port: it can be killed, frozen and started again as who it was.
pub struct Node {
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: std::sync::Mutex<Option<Process>>,
    args: Vec<String>,
    program: &'static str,
}

impl Node {
    /// Start `program` on `port`; `None` if the port turned out taken
    /// (another process answers there), so the caller picks other ports.
    fn spawn(program: &'static str, port: u16, args: Vec<String>) -> Option<Node> {
        let node = Node {
            port,
            child: std::sync::Mutex::new(None),
            args,
            program,
        };
        node.launch().then_some(node)
    }

    /// Start the process; whether it serves its port (within 10 s).
    fn launch(&self) -> bool {
        assert!(!self.is_running(), "node {} still runs", self.port);
        let mut child = Process::spawn(self.program, &self.args).unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (install redis-server and redis-sentinel, or set REDIS_CLUSTER_URL / REDIS_SENTINEL_URL)",
                self.program
            )
        });
        let serving = wait_serving(&mut child, self.port, None, Duration::from_secs(10));
        if serving == Serving::Ours {
            *self.child() = Some(child);
        }
        serving == Serving::Ours
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Option<Process>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kill with SIGKILL: no goodbye to clients or to the other nodes.
    pub fn kill(&self) {
        let child = self.child().take();
        drop(child);
    }

    /// Freeze the process (SIGSTOP): it neither answers nor replicates
    /// until [`resume`](Self::resume).
    pub fn pause(&self) {
        if let Some(child) = self.child().as_ref() {
            child.pause();
        }
    }

    /// Thaw a [`pause`](Self::pause)d process (SIGCONT).
    pub fn resume(&self) {
        if let Some(child) = self.child().as_ref() {
            child.resume();
        }
    }

    /// Whether the process runs (it was not [`kill`](Self::kill)ed).
    pub fn is_running(&self) -> bool {
        self.child().is_some()
    }

    /// Start the process again with the same arguments (and, for a cluster
    /// node, its node config file: it rejoins as who it was); returns once
    /// it serves its port. Panics if another process took the port.
    pub fn start_again(&self) {
        assert!(
            self.launch(),
            "{} on port {} did not start (port taken?)",
            self.program,
            self.port
        );
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// A plain fred client of this node alone.
    pub async fn raw(&self) -> fred::clients::Client {
        raw_client(&self.url()).await
    }
}

/// The user's own deployment named by the environment variable `var`, if
/// set and not empty.
fn user_url(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|url| !url.is_empty())
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(crate::unique(what));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run `start` on `n` distinct free loopback ports below 55 000 (cluster
/// nodes also bind port + 10000 for the cluster bus), with fresh ports
/// while it answers `None`: a port picked free can be taken by another
/// test's server before ours binds it.
async fn on_free_ports<T, F, Fut>(n: usize, mut start: F) -> T
where
    F: FnMut(Vec<u16>) -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..5 {
        if let Some(started) = start(free_ports(n)).await {
            return started;
        }
    }
    panic!("could not start {n} servers on free ports (5 tries, each port taken)")
}

/// Distinct free loopback ports ([`free_port`](crate::free_port) may hand
/// out one twice), below 55 000, each with port + 10000 free too.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports: Vec<u16> = Vec::new();
    while ports.len() < n {
        let port = crate::free_port();
        // A cluster node also binds port + 10000 (its cluster bus), which
        // lies in the kernel's ephemeral range: take the port only if that
        // one is free too, or the node cannot start.
        let bus_free =
            port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok();
        if !ports.contains(&port) && bus_free {
            ports.push(port);
        }
    }
    ports
}

/// A node's `redis-server` arguments: the kit's usual ones, its files in
/// `dir`, then `extra`.
fn server_args(port: u16, dir: &TempDir, extra: &[String]) -> Vec<String> {
    let mut args = crate::server::base_args(port);
    args.extend([
        "--dir".to_string(),
        dir.0.to_string_lossy().into_owned(),
        "--dbfilename".to_string(),
        format!("dump-{port}.rdb"),
    ]);
    args.extend(extra.iter().cloned());
    args
}

/// A master on `ports[0]` and a replica of it on `ports[1]`, in `dir`,
/// once the replica is in sync; `None` if a port was taken.
async fn master_and_replica(ports: &[u16], dir: &TempDir) -> Option<(Node, Node)> {
    let master = Node::spawn("redis-server", ports[0], server_args(ports[0], dir, &[]))?;
    let extra = ["--replicaof", "127.0.0.1", &ports[0].to_string()].map(String::from);
    let replica = Node::spawn("redis-server", ports[1], server_args(ports[1], dir, &extra))?;
    wait_replicas(&master, 1).await;
    Some((master, replica))
}

/// Wait (up to 30 s) until `master` reports `n` connected replicas in sync.
pub async fn wait_replicas(master: &Node, n: usize) {
    let raw = master.raw().await;
    until("replicas connected", Duration::from_secs(30), || async {
        let info: String = raw
            .custom(fred::cmd!("INFO"), vec!["replication"])
            .await
            .ok()?;
        let online = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .count();
        (online >= n).then_some(())
    })
    .await;
    let _ = raw.quit().await;
}

/// One master with one replica: for the replica-sync (WAIT) setting.
pub struct Replicated {
    /// `redis://` URL of the master.
    pub url: String,
    /// The master.
    pub master: Node,
    /// Its replica.
    pub replica: Node,
    _dir: TempDir,
}

impl Replicated {
    /// Start both and wait until the replica is in sync.
    pub async fn start() -> Replicated {
        let dir = TempDir::new("redis-replicated");
        let dir_path = &dir;
        let (master, replica) = on_free_ports(2, |ports| async move {
            master_and_replica(&ports, dir_path).await
        })
        .await;
        Replicated {
            url: master.url(),
            master,
            replica,
            _dir: dir,
        }
    }
}
