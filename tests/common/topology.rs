//! Deployments beyond one server, as real local processes: a Redis Cluster
//! (3 masters, 3 replicas), a Sentinel set-up (1 master, 1 replica, 3
//! sentinels) and a replicated master (1 master, 1 replica). Each starts on
//! free loopback ports with no persistence, in a temporary directory of its
//! own, and is killed (and its directory removed) on drop.
//! `REDIS_CLUSTER_URL` / `REDIS_SENTINEL_URL` point the same tests at a
//! user's own deployment instead (tests that kill nodes are then skipped).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::config::Config as FredConfig;
use redisson_lock::{Client, Config};

/// One `redis-server` (or `redis-sentinel`) process of a topology.
pub struct Node {
    pub port: u16,
    child: std::sync::Mutex<Option<Child>>,
    args: Vec<String>,
    program: &'static str,
}

impl Node {
    fn spawn(program: &'static str, port: u16, args: Vec<String>) -> Node {
        let node = Node {
            port,
            child: std::sync::Mutex::new(None),
            args,
            program,
        };
        node.start_again();
        node
    }

    /// Kill with SIGKILL: no goodbye to clients or to the other nodes.
    pub fn kill(&self) {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freeze the process (SIGSTOP): it neither answers nor replicates
    /// until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaw a [`pause`](Self::pause)d process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Child::id);
        if let Some(pid) = pid {
            let status = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success(), "kill {signal} {pid}");
        }
    }

    pub fn is_running(&self) -> bool {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Start the process again with the same arguments (and, for a cluster
    /// node, its node config file: it rejoins as who it was).
    pub fn start_again(&self) {
        assert!(!self.is_running(), "node {} still runs", self.port);
        let child = Command::new(self.program)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e} (install redis-server and redis-sentinel, or set REDIS_CLUSTER_URL / REDIS_SENTINEL_URL)",
                    self.program
                )
            });
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{} on port {} did not start listening",
                self.program,
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A plain fred client of this node alone.
    pub async fn raw(&self) -> fred::clients::Client {
        raw_client(&format!("redis://{}", self.addr())).await
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("{what}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Distinct free loopback ports (`free_port` may hand out one twice).
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports: Vec<u16> = Vec::new();
    while ports.len() < n {
        let port = super::free_port();
        // Cluster nodes also bind port + 10000 for the cluster bus.
        if !ports.contains(&port) && port < 55_000 {
            ports.push(port);
        }
    }
    ports
}

fn server_args(port: u16, dir: &TempDir, extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir.0.to_string_lossy(),
        "--dbfilename",
        &format!("dump-{port}.rdb"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    args
}

pub async fn raw_client(url: &str) -> fred::clients::Client {
    let client = fred::clients::Client::new(
        FredConfig::from_url(url).expect("a valid URL"),
        None,
        None,
        None,
    );
    client.init().await.expect("raw client connects");
    client
}

/// Run `op` until it returns `Some`, at most `within`.
pub async fn until<T, F, Fut>(what: &str, within: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = op().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn info_field(raw: &fred::clients::Client, section: &str, field: &str) -> Option<String> {
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec![section.to_string()])
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

// ---------------------------------------------------------------- cluster

/// A Redis Cluster: 3 masters and 3 replicas (or `REDIS_CLUSTER_URL`).
pub struct Cluster {
    pub url: String,
    /// Our processes, in creation order (empty for `REDIS_CLUSTER_URL`).
    pub nodes: Vec<Node>,
    _dir: Option<TempDir>,
}

impl Cluster {
    pub fn private(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// `REDIS_CLUSTER_URL` if set, else a private cluster, ready (every node
    /// reports `cluster_state:ok` and knows all six nodes).
    pub async fn start() -> Cluster {
        if let Ok(url) = std::env::var("REDIS_CLUSTER_URL") {
            if !url.is_empty() {
                return Cluster {
                    url,
                    nodes: Vec::new(),
                    _dir: None,
                };
            }
        }
        let dir = TempDir::new("redis-cluster");
        let ports = free_ports(6);
        let nodes: Vec<Node> = ports
            .iter()
            .map(|&port| {
                let extra = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &format!("nodes-{port}.conf"),
                    "--cluster-node-timeout",
                    "1000",
                    // A replica takes over at once, however stale its data.
                    "--cluster-replica-validity-factor",
                    "0",
                    "--cluster-require-full-coverage",
                    "no",
                    "--cluster-allow-reads-when-down",
                    "no",
                ]
                .map(String::from);
                Node::spawn("redis-server", port, server_args(port, &dir, &extra))
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs (apt-get install -y redis-tools)");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Cluster {
            url: format!(
                "redis-cluster://{}?{}",
                addrs[0],
                addrs[1..]
                    .iter()
                    .map(|a| format!("node={a}"))
                    .collect::<Vec<_>>()
                    .join("&")
            ),
            nodes,
            _dir: Some(dir),
        };
        cluster.wait_ok().await;
        cluster
    }

    /// Wait until every running node reports `cluster_state:ok` and agrees
    /// on three masters with a replica each.
    pub async fn wait_ok(&self) {
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            let raw = node.raw().await;
            until(
                &format!("cluster ok on {}", node.addr()),
                Duration::from_secs(30),
                || async {
                    let ok = info_cluster(&raw, "cluster_state").await.as_deref() == Some("ok")
                        && info_cluster(&raw, "cluster_known_nodes").await.as_deref() == Some("6")
                        && info_cluster(&raw, "cluster_slots_ok").await.as_deref() == Some("16384");
                    ok.then_some(())
                },
            )
            .await;
            let _ = raw.quit().await;
        }
    }

    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect(f(Config::from_url(&self.url).expect("cluster URL")))
            .await
            .expect("connect to the test cluster")
    }

    /// A plain fred cluster client, following MOVED like ours.
    pub async fn raw(&self) -> fred::clients::Client {
        raw_client(&self.url).await
    }

    /// The index in `nodes` of the master serving `slot` now (as the first
    /// running node that answers sees it).
    pub async fn master_of(&self, slot: u16) -> usize {
        let port = self.master_port_of(slot).await;
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .expect("the master is one of ours")
    }

    async fn master_port_of(&self, slot: u16) -> u16 {
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            let raw = node.raw().await;
            let slots: Value = match raw.custom(fred::cmd!("CLUSTER"), vec!["SLOTS"]).await {
                Ok(v) => v,
                Err(_) => continue,
            };
            let _ = raw.quit().await;
            let Value::Array(ranges) = slots else {
                continue;
            };
            for range in ranges {
                let Value::Array(parts) = range else { continue };
                let (Some(lo), Some(hi)) = (
                    parts.first().and_then(Value::as_i64),
                    parts.get(1).and_then(Value::as_i64),
                ) else {
                    continue;
                };
                if (lo..=hi).contains(&(slot as i64)) {
                    if let Some(Value::Array(master)) = parts.get(2) {
                        if let Some(port) = master.get(1).and_then(Value::as_i64) {
                            return port as u16;
                        }
                    }
                }
            }
        }
        panic!("no node knows the master of slot {slot}");
    }

    /// The index of a replica of the master at `master` (waiting, up to
    /// 30 s, for one to be attached: after a failover the old master rejoins
    /// as a replica a little later).
    pub async fn replica_of(&self, master: usize) -> usize {
        until("a replica attached", Duration::from_secs(30), || {
            self.attached_replica(master)
        })
        .await
    }

    /// The index of a replica attached to the master at `master` now, if any
    /// (a master whose replica was killed and promoted has none).
    pub async fn attached_replica(&self, master: usize) -> Option<usize> {
        let master_port = self.nodes[master].port.to_string();
        for (i, node) in self.nodes.iter().enumerate() {
            if i == master || !node.is_running() {
                continue;
            }
            let raw = node.raw().await;
            let role = info_field(&raw, "replication", "role").await;
            let of = info_field(&raw, "replication", "master_port").await;
            let up = info_field(&raw, "replication", "master_link_status").await;
            let _ = raw.quit().await;
            if role.as_deref() == Some("slave")
                && of.as_deref() == Some(master_port.as_str())
                && up.as_deref() == Some("up")
            {
                return Some(i);
            }
        }
        None
    }

    /// A plain client of every node: ours that run, or, for
    /// `REDIS_CLUSTER_URL`, every node the cluster lists (with the URL's
    /// credentials).
    pub async fn node_clients(&self) -> Vec<fred::clients::Client> {
        let mut clients = Vec::new();
        if self.private() {
            for node in self.nodes.iter().filter(|n| n.is_running()) {
                clients.push(node.raw().await);
            }
            return clients;
        }
        let raw = self.raw().await;
        let listing: String = raw
            .custom(fred::cmd!("CLUSTER"), vec!["NODES"])
            .await
            .expect("CLUSTER NODES");
        let _ = raw.quit().await;
        let template = FredConfig::from_url(&self.url).expect("cluster URL");
        for line in listing.lines().filter(|l| !l.contains("fail")) {
            let Some(addr) = line.split(' ').nth(1) else {
                continue;
            };
            let addr = addr.split('@').next().unwrap_or_default();
            let Some((host, port)) = addr.rsplit_once(':') else {
                continue;
            };
            let mut config = template.clone();
            config.server = fred::types::config::ServerConfig::new_centralized(
                host,
                port.parse().expect("a port"),
            );
            let client = fred::clients::Client::new(config, None, None, None);
            client.init().await.expect("node client connects");
            clients.push(client);
        }
        clients
    }

    /// `PUBSUB <sub> channel` (`NUMSUB` or `SHARDNUMSUB`) summed over every
    /// node.
    pub async fn count(&self, sub: &str, channel: &str) -> i64 {
        let mut total = 0;
        for raw in self.node_clients().await {
            let reply: Vec<Value> = raw
                .custom(fred::cmd!("PUBSUB"), vec![sub, channel])
                .await
                .unwrap_or_default();
            total += reply.get(1).and_then(Value::as_i64).unwrap_or(0);
            let _ = raw.quit().await;
        }
        total
    }

    /// How many subscriptions to `channel`, classic and sharded, exist
    /// anywhere in the cluster.
    pub async fn subscriptions(&self, channel: &str) -> i64 {
        self.count("NUMSUB", channel).await + self.count("SHARDNUMSUB", channel).await
    }
}

async fn info_cluster(raw: &fred::clients::Client, field: &str) -> Option<String> {
    let info: String = raw.custom(fred::cmd!("CLUSTER"), vec!["INFO"]).await.ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

// ---------------------------------------------------------------- sentinel

/// One master, one replica and three sentinels watching them as `mymaster`
/// (or `REDIS_SENTINEL_URL`).
pub struct Sentinels {
    pub url: String,
    /// `[master, replica]` at start (roles change on failover).
    pub servers: Vec<Node>,
    pub sentinels: Vec<Node>,
    _dir: Option<TempDir>,
}

pub const SERVICE: &str = "mymaster";

impl Sentinels {
    pub fn private(&self) -> bool {
        !self.servers.is_empty()
    }

    pub async fn start() -> Sentinels {
        if let Ok(url) = std::env::var("REDIS_SENTINEL_URL") {
            if !url.is_empty() {
                return Sentinels {
                    url,
                    servers: Vec::new(),
                    sentinels: Vec::new(),
                    _dir: None,
                };
            }
        }
        let dir = TempDir::new("redis-sentinel");
        let ports = free_ports(5);
        let master = Node::spawn("redis-server", ports[0], server_args(ports[0], &dir, &[]));
        let replica_extra = ["--replicaof", "127.0.0.1", &ports[0].to_string()].map(String::from);
        let replica = Node::spawn(
            "redis-server",
            ports[1],
            server_args(ports[1], &dir, &replica_extra),
        );
        wait_replicas(&master, 1).await;
        let sentinels = ports[2..]
            .iter()
            .map(|&port| {
                let conf = dir.0.join(format!("sentinel-{port}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                         sentinel monitor {SERVICE} 127.0.0.1 {master} 2\n\
                         sentinel down-after-milliseconds {SERVICE} 1000\n\
                         sentinel failover-timeout {SERVICE} 5000\n\
                         sentinel parallel-syncs {SERVICE} 1\n",
                        dir = dir.0.display(),
                        master = ports[0],
                    ),
                )
                .expect("write a sentinel config");
                Node::spawn(
                    "redis-sentinel",
                    port,
                    vec![conf.to_string_lossy().into_owned()],
                )
            })
            .collect::<Vec<_>>();
        let s = Sentinels {
            url: format!(
                "redis-sentinel://{}?sentinelServiceName={SERVICE}&{}",
                sentinels[0].addr(),
                sentinels[1..]
                    .iter()
                    .map(|n| format!("node={}", n.addr()))
                    .collect::<Vec<_>>()
                    .join("&")
            ),
            servers: vec![master, replica],
            sentinels,
            _dir: Some(dir),
        };
        s.wait_ready().await;
        s
    }

    /// Wait until every sentinel knows the replica and the other sentinels
    /// (so a failover can be agreed).
    pub async fn wait_ready(&self) {
        for sentinel in &self.sentinels {
            let raw = sentinel.raw().await;
            until("sentinels ready", Duration::from_secs(30), || async {
                let reply: Value = raw
                    .custom(fred::cmd!("SENTINEL"), vec!["MASTER", SERVICE])
                    .await
                    .ok()?;
                let fields: Vec<String> = match reply {
                    Value::Array(v) => v.iter().filter_map(|v| v.as_string()).collect(),
                    _ => return None,
                };
                let get = |k: &str| {
                    fields
                        .iter()
                        .position(|f| f == k)
                        .and_then(|i| fields.get(i + 1))
                        .cloned()
                };
                (get("num-slaves").as_deref() == Some("1")
                    && get("num-other-sentinels").as_deref() == Some("2"))
                .then_some(())
            })
            .await;
            let _ = raw.quit().await;
        }
    }

    /// The port of the master as the first sentinel reports it.
    pub async fn master_port(&self) -> u16 {
        let raw = self.sentinels[0].raw().await;
        let addr: Vec<String> = raw
            .custom(
                fred::cmd!("SENTINEL"),
                vec!["GET-MASTER-ADDR-BY-NAME", SERVICE],
            )
            .await
            .expect("sentinel answers");
        let _ = raw.quit().await;
        addr[1].parse().expect("a port")
    }

    /// The index in `servers` of the master now.
    pub async fn master(&self) -> usize {
        let port = self.master_port().await;
        self.servers
            .iter()
            .position(|n| n.port == port)
            .expect("the master is one of ours")
    }

    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect(f(Config::from_url(&self.url).expect("sentinel URL")))
            .await
            .expect("connect through the sentinels")
    }
}

/// Wait until `master` reports `n` connected replicas in sync.
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

// ------------------------------------------------------------ replicated

/// One master with one replica: for the replica-sync (WAIT) setting.
pub struct Replicated {
    pub url: String,
    pub master: Node,
    pub replica: Node,
    _dir: TempDir,
}

impl Replicated {
    pub async fn start() -> Replicated {
        let dir = TempDir::new("redis-replicated");
        let ports = free_ports(2);
        let master = Node::spawn("redis-server", ports[0], server_args(ports[0], &dir, &[]));
        let extra = ["--replicaof", "127.0.0.1", &ports[0].to_string()].map(String::from);
        let replica = Node::spawn(
            "redis-server",
            ports[1],
            server_args(ports[1], &dir, &extra),
        );
        wait_replicas(&master, 1).await;
        Replicated {
            url: format!("redis://{}", master.addr()),
            master,
            replica,
            _dir: dir,
        }
    }
}

// ------------------------------------------------------------ standoff

/// A lock held by one client and awaited by another, across a fault: the
/// common shape of the failover tests.
pub struct Standoff {
    pub holder: Client,
    pub waiting: Client,
    pub name: String,
    pub channel: String,
    pub guard: redisson_lock::LockGuard<redisson_lock::Reentrant>,
    waiter: tokio::task::JoinHandle<
        redisson_lock::Result<Option<redisson_lock::LockGuard<redisson_lock::Reentrant>>>,
    >,
}

impl Standoff {
    /// `holder` takes `name`; a task of `waiting` waits for it (60 s at
    /// most) and has subscribed once `subscribed(channel)` says so.
    pub async fn start<F, Fut>(
        holder: Client,
        waiting: Client,
        name: String,
        subscribed: F,
    ) -> Standoff
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let guard = holder.lock(&name).unwrap().lock().await.unwrap();
        let lock = waiting.lock(&name).unwrap();
        let channel = lock.channel().to_string();
        let waiter =
            tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60), None).await });
        until("the waiter subscribed", Duration::from_secs(5), || {
            let check = subscribed(channel.clone());
            async move { check.await.then_some(()) }
        })
        .await;
        Standoff {
            holder,
            waiting,
            name,
            channel,
            guard,
            waiter,
        }
    }

    /// After the fault (and a lease, so the holder knows where it stands):
    /// either the holder was told it lost the lock and the waiter gets it,
    /// or the holder still holds it (checked in Redis), the waiter does not
    /// hold it too, and the unlock wakes it (by publish: within 5 s, long
    /// before the 30 s lease). Then both clients shut down.
    pub async fn settle(self, what: &str) {
        let held = self.guard.is_held().await;
        eprintln!(
            "   {what}: holder lost={} held={held:?}",
            self.guard.is_lost()
        );
        if self.guard.is_lost() {
            let got = self
                .waiter
                .await
                .unwrap()
                .unwrap()
                .expect("the waiter gets it");
            got.unlock().await.unwrap();
        } else {
            assert!(matches!(held, Ok(true)), "not lost means held: {held:?}");
            assert!(!self.waiter.is_finished(), "the waiter must not hold too");
            let unlocked = Instant::now();
            self.guard.unlock().await.unwrap();
            let got = self
                .waiter
                .await
                .unwrap()
                .unwrap()
                .expect("woken after the fault");
            let woke = unlocked.elapsed();
            eprintln!("   {what}: waiter woken {woke:?} after the unlock");
            assert!(woke < Duration::from_secs(5), "woken by publish: {woke:?}");
            got.unlock().await.unwrap();
        }
        self.holder.shutdown().await;
        self.waiting.shutdown().await;
    }
}
