//! Scenario 7: Redis Cluster. 16 tasks locking and unlocking their own
//! names, spread over the 3 masters of a local cluster (3 masters + 3
//! replicas), against the same 16 tasks on the single server, in short
//! alternating rounds; then the failover stall: how long lock/unlock pairs
//! on a slot stop succeeding when its master is killed (SIGKILL), split
//! into Redis's own failover (until the replica reports itself master) and
//! the client's catching up after that. Only this crate runs here: the
//! question is what the deployment costs and how long a failover stalls.
//!
//! All 7 server processes and the bench share the machine's cores (2 here):
//! a cluster on one small machine measures overhead, not the scaling that
//! separate hosts would give.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use redisson_lock::{Client, Config};

use crate::scenarios::Metrics;
use crate::util::median;

/// One node process, killed on drop (and by a shell watchdog if the bench
/// dies without dropping it).
struct Node {
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
    watchdog: Option<Child>,
}

impl Node {
    fn start(port: u16, dir: &std::path::Path) -> Result<Node> {
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--loglevel",
            "warning",
            "--dir",
            &dir.to_string_lossy(),
            "--dbfilename",
            &format!("dump-{port}.rdb"),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("nodes-{port}.conf"),
            "--cluster-node-timeout",
            "1000",
            "--cluster-replica-validity-factor",
            "0",
        ]
        .map(String::from)
        .to_vec();
        let mut node = Node {
            port,
            args,
            child: None,
            watchdog: None,
        };
        node.spawn()?;
        Ok(node)
    }

    fn spawn(&mut self) -> Result<()> {
        let child = Command::new("redis-server")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        self.watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {} 2>/dev/null; do sleep 0.5; done; kill -9 {} 2>/dev/null",
                std::process::id(),
                child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            ensure!(
                started.elapsed() < Duration::from_secs(10),
                "cluster node {} did not listen",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn kill(&mut self) {
        for mut child in [self.child.take(), self.watchdog.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

struct LocalCluster {
    nodes: Vec<Node>,
    dir: std::path::PathBuf,
    url: String,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn query(url: &str, args: &[&str]) -> Result<redis::Value> {
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    Ok(cmd.query_async(&mut con).await?)
}

async fn text(url: &str, args: &[&str]) -> Result<String> {
    match query(url, args).await? {
        redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        redis::Value::VerbatimString { text, .. } => Ok(text),
        redis::Value::SimpleString(s) => Ok(s),
        other => bail!("unexpected reply {other:?}"),
    }
}

fn field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

impl LocalCluster {
    async fn start() -> Result<LocalCluster> {
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-bench-cluster-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        let mut nodes = Vec::new();
        while nodes.len() < 6 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            if port < 55_000 && !nodes.iter().any(|n: &Node| n.port == port) {
                nodes.push(Node::start(port, &dir)?);
            }
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("redis-cli (Debian: redis-tools)")?;
        ensure!(status.success(), "redis-cli --cluster create failed");
        let url = format!(
            "redis-cluster://{}?{}",
            addrs[0],
            addrs[1..]
                .iter()
                .map(|a| format!("node={a}"))
                .collect::<Vec<_>>()
                .join("&")
        );
        let cluster = LocalCluster { nodes, dir, url };
        cluster.wait_ok().await?;
        Ok(cluster)
    }

    /// Every running node sees the cluster ok, with 3 masters that each
    /// have a replica in sync.
    async fn wait_ok(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut ok = true;
            let mut synced_replicas = 0;
            for node in self.nodes.iter().filter(|n| n.child.is_some()) {
                let info = text(&node.url(), &["CLUSTER", "INFO"])
                    .await
                    .unwrap_or_default();
                ok &= field(&info, "cluster_state").as_deref() == Some("ok")
                    && field(&info, "cluster_slots_ok").as_deref() == Some("16384");
                let repl = text(&node.url(), &["INFO", "replication"])
                    .await
                    .unwrap_or_default();
                if field(&repl, "role").as_deref() == Some("slave")
                    && field(&repl, "master_link_status").as_deref() == Some("up")
                {
                    synced_replicas += 1;
                }
            }
            if ok && synced_replicas == 3 {
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "cluster not ok within 60 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The index of the master of `slot`, and of its replica.
    async fn master_and_replica(&self, slot: u16) -> Result<(usize, usize)> {
        let mut master = None;
        for (i, node) in self.nodes.iter().enumerate() {
            if node.child.is_none() {
                continue;
            }
            let nodes = text(&node.url(), &["CLUSTER", "NODES"]).await?;
            let serves = nodes.lines().any(|l| {
                l.contains("myself")
                    && l.split(' ').skip(8).any(|r| match r.split_once('-') {
                        Some((lo, hi)) => {
                            lo.parse::<u16>().is_ok_and(|lo| lo <= slot)
                                && hi.parse::<u16>().is_ok_and(|hi| slot <= hi)
                        }
                        None => r.parse::<u16>().ok() == Some(slot),
                    })
            });
            if serves {
                master = Some(i);
                break;
            }
        }
        let master = master.context("no master serves the slot")?;
        let master_port = self.nodes[master].port.to_string();
        for (i, node) in self.nodes.iter().enumerate() {
            if i == master || node.child.is_none() {
                continue;
            }
            let info = text(&node.url(), &["INFO", "replication"]).await?;
            if field(&info, "master_port").as_deref() == Some(master_port.as_str()) {
                return Ok((master, i));
            }
        }
        bail!("the master of slot {slot} has no replica")
    }
}

/// 16 tasks, each locking and unlocking its own name for `secs`: pairs/s.
async fn pairs_per_s(client: &Client, names: &[String], secs: f64) -> Result<f64> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for name in names {
        let lock = client.lock(name)?;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                lock.lock().await?.unlock().await?;
                n += 1;
            }
            anyhow::Ok(n)
        }));
    }
    let mut pairs = 0;
    for t in tasks {
        pairs += t.await??;
    }
    Ok(pairs as f64 / started.elapsed().as_secs_f64())
}

/// Run scenario 7 against a fresh local cluster and the single server at
/// `single_url`; returns the metrics per subject and a text table.
pub async fn run(single_url: &str, smoke: bool) -> Result<(Vec<(String, Metrics)>, String)> {
    let (rounds, secs, failovers) = if smoke { (2, 0.1, 1) } else { (12, 0.25, 3) };
    let mut cluster = LocalCluster::start().await?;
    let single = Client::connect(Config::from_url(single_url)?).await?;
    let clustered = Client::connect(Config::from_url(&cluster.url)?).await?;
    let names: Vec<String> = (0..16).map(|i| format!("s7:{i}")).collect();
    let mut masters = std::collections::BTreeSet::new();
    for name in &names {
        let slot = redis_slot(name);
        masters.insert(cluster.master_and_replica(slot).await?.0);
    }
    // Warm up both, then alternate which goes first in every round.
    pairs_per_s(&single, &names, 0.05).await?;
    pairs_per_s(&clustered, &names, 0.05).await?;
    let (mut on_single, mut on_cluster, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (s, c) = if round % 2 == 0 {
            let s = pairs_per_s(&single, &names, secs).await?;
            (s, pairs_per_s(&clustered, &names, secs).await?)
        } else {
            let c = pairs_per_s(&clustered, &names, secs).await?;
            (pairs_per_s(&single, &names, secs).await?, c)
        };
        on_single.push(s);
        on_cluster.push(c);
        ratios.push(c / s);
    }
    single.shutdown().await;

    // Failover: a loop of lock/unlock pairs on one name; its master killed.
    let mut stalls = Vec::new();
    let mut promotions = Vec::new();
    let mut catch_up = Vec::new();
    for run in 0..failovers {
        let name = format!("s7:failover:{run}");
        let (master, replica) = cluster.master_and_replica(redis_slot(&name)).await?;
        let lock = clustered.lock(&name)?;
        let stop = Instant::now() + Duration::from_secs(60);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let looping = tokio::spawn(async move {
            while Instant::now() < stop {
                match lock.lock().await {
                    Ok(guard) => {
                        if guard.unlock().await.is_ok() && tx.send(Instant::now()).is_err() {
                            return;
                        }
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut last = None;
        while let Ok(t) = rx.try_recv() {
            last = Some(t);
        }
        let killed = Instant::now();
        let mut last = last.unwrap_or(killed);
        cluster.nodes[master].kill();
        // Redis's part: until the replica says it is master.
        let replica_url = cluster.nodes[replica].url();
        let promoted = loop {
            let info = text(&replica_url, &["INFO", "replication"])
                .await
                .unwrap_or_default();
            if field(&info, "role").as_deref() == Some("master") {
                break Instant::now();
            }
            ensure!(
                killed.elapsed() < Duration::from_secs(30),
                "no failover within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        // The stall: the longest gap between successive pairs, up to the
        // first pair that succeeded on the new master (after the promotion;
        // pairs in flight at the kill may still land just after it).
        let mut stall = Duration::ZERO;
        loop {
            let t = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .context("no lock/unlock pair succeeded within 30 s of the failover")?
                .context("the pair loop ended")?;
            stall = stall.max(t.duration_since(last));
            last = t;
            if t > promoted {
                break;
            }
        }
        let served = last;
        looping.abort();
        stalls.push(stall.as_secs_f64() * 1e3);
        promotions.push(promoted.duration_since(killed).as_secs_f64() * 1e3);
        catch_up.push(served.duration_since(promoted).as_secs_f64() * 1e3);
        // The killed node rejoins as a replica of the new master.
        cluster.nodes[master].spawn()?;
        cluster.wait_ok().await?;
    }
    clustered.shutdown().await;
    drop(cluster);

    let spread = |v: &[f64]| {
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    };
    let (rmin, rmax) = spread(&ratios);
    let (smin, smax) = spread(&stalls);
    let table = format!(
        "Scenario 7: Redis Cluster (3 masters + 3 replicas, all on this machine's {} cores)\n\
         16 tasks, own names over {} masters, {} alternating rounds of {:.2} s\n\
         \x20 single server   {:>9.0} pairs/s (median)\n\
         \x20 cluster         {:>9.0} pairs/s (median)\n\
         \x20 cluster/single  {:>9.3} (median of per-round ratios; min {:.3}, max {:.3})\n\
         Failover (master SIGKILL, {} runs): lock/unlock pairs on its slot stalled\n\
         \x20 {:.0} ms median (min {:.0}, max {:.0}): Redis's failover (kill to the replica's promotion) {:.0} ms,\n\
         \x20 then the client's catching up (promotion to the first pair on the new master) {:.0} ms (medians)\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        masters.len(),
        rounds,
        secs,
        median(&on_single),
        median(&on_cluster),
        median(&ratios),
        rmin,
        rmax,
        stalls.len(),
        median(&stalls),
        smin,
        smax,
        median(&promotions),
        median(&catch_up),
    );
    let single_m = Metrics::from([("pairs_per_s".into(), median(&on_single))]);
    let cluster_m = Metrics::from([
        ("pairs_per_s".into(), median(&on_cluster)),
        ("ratio_to_single".into(), median(&ratios)),
        ("ratio_min".into(), rmin),
        ("ratio_max".into(), rmax),
        ("failover_stall_ms".into(), median(&stalls)),
        ("failover_stall_ms_max".into(), smax),
        ("redis_failover_ms".into(), median(&promotions)),
        ("client_catch_up_ms".into(), median(&catch_up)),
    ]);
    Ok((
        vec![("single".into(), single_m), ("cluster".into(), cluster_m)],
        table,
    ))
}

fn redis_slot(name: &str) -> u16 {
    fred::util::redis_keyslot(format!("{{{name}}}").as_bytes())
}
