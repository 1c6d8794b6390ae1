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

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use fred::interfaces::ClientLike;
use redisson_lock::{Client, Config};
use redisson_lock_testkit::inspect::info_field;
use redisson_lock_testkit::topology::Cluster;

use crate::scenario::Metrics;
use crate::util::median;

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

/// A one-master Redis Cluster (no replica): one redis-server in cluster
/// mode that owns every slot, in a directory of its own; killed on drop.
struct OneMaster {
    url: String,
    _server: redisson_lock_testkit::Server,
    dir: std::path::PathBuf,
}

impl Drop for OneMaster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn one_master() -> Result<OneMaster> {
    let dir = std::env::temp_dir().join(redisson_lock_testkit::unique("bench-cluster1"));
    std::fs::create_dir_all(&dir)?;
    let server = redisson_lock_testkit::Options::new()
        .args(&[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            // Alone, a node does not know its own address (CLUSTER SLOTS
            // would give clients an empty host).
            "--cluster-announce-ip",
            "127.0.0.1",
            "--dir",
            dir.to_str().context("temp dir path")?,
            "--loglevel",
            "warning",
        ])
        .watchdog()
        .start();
    let url = server.url.clone();
    let mut admin = crate::server::admin(&url).await?;
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query_async(&mut admin)
        .await?;
    let started = Instant::now();
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut admin)
            .await?;
        if info.contains("cluster_state:ok") {
            break;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(20),
            "the one-master cluster did not get ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    Ok(OneMaster {
        url: format!("redis-cluster://{addr}"),
        _server: server,
        dir,
    })
}

/// Run scenario 7 against a fresh local cluster and the single server at
/// `single_url`; returns the metrics per subject, a text table, and the
/// rounds of the cluster curve (scenario 2's 16 tasks on a single server,
/// a one-master and a three-master cluster, interleaved): (subject, run,
/// pairs/s).
pub async fn run(
    single_url: &str,
    smoke: bool,
) -> Result<(
    Vec<(String, Metrics)>,
    String,
    Vec<(&'static str, usize, f64)>,
)> {
    let (rounds, secs, failovers) = if smoke { (2, 0.1, 1) } else { (12, 0.25, 3) };
    let cluster = Cluster::start_private().await;
    let one = one_master().await?;
    let single = Client::connect_with(Config::from_url(single_url)?).await?;
    let clustered = Client::connect_with(Config::from_url(&cluster.url)?).await?;
    let one_client = Client::connect_with(Config::from_url(&one.url)?).await?;
    let names: Vec<String> = (0..16).map(|i| format!("s7:{i}")).collect();
    let mut masters = std::collections::BTreeSet::new();
    for name in &names {
        let slot = redis_slot(name);
        masters.insert(cluster.master_of(slot).await);
    }
    // Warm up all three, then rotate which goes first in every round.
    let subjects = [
        ("single", &single),
        ("cluster1", &one_client),
        ("cluster3", &clustered),
    ];
    for (_, client) in subjects {
        pairs_per_s(client, &names, 0.05).await?;
    }
    let (mut on_single, mut on_cluster, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut on_one, mut one_ratios, mut curve) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut got = [0.0; 3];
        for i in crate::scenario::order(3, round) {
            got[i] = pairs_per_s(subjects[i].1, &names, secs).await?;
            curve.push((subjects[i].0, round, got[i]));
        }
        let [s, o, c] = got;
        on_single.push(s);
        on_cluster.push(c);
        ratios.push(c / s);
        on_one.push(o);
        one_ratios.push(o / s);
    }
    single.shutdown().await;
    one_client.shutdown().await;
    drop(one);

    // Failover: a loop of lock/unlock pairs on one name; its master killed.
    let mut stalls = Vec::new();
    let mut promotions = Vec::new();
    let mut catch_up = Vec::new();
    for run in 0..failovers {
        let name = format!("s7:failover:{run}");
        let master = cluster.master_of(redis_slot(&name)).await;
        let replica = cluster.replica_of(master).await;
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
        let replica_raw = cluster.nodes[replica].raw().await;
        let promoted = loop {
            let role = info_field(&replica_raw, "replication", "role").await;
            if role.as_deref() == Some("master") {
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
        let _ = replica_raw.quit().await;
        stalls.push(stall.as_secs_f64() * 1e3);
        promotions.push(promoted.duration_since(killed).as_secs_f64() * 1e3);
        catch_up.push(served.duration_since(promoted).as_secs_f64() * 1e3);
        // The killed node rejoins as a replica of the new master.
        cluster.nodes[master].start_again();
        cluster.wait_ok().await;
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
         \x20 one-master cluster {:>6.0} pairs/s (median), /single {:.3} (median of per-round ratios; min {:.3}, max {:.3})\n\
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
        median(&on_one),
        median(&one_ratios),
        spread(&one_ratios).0,
        spread(&one_ratios).1,
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
    let one_m = Metrics::from([
        ("pairs_per_s".into(), median(&on_one)),
        ("ratio_to_single".into(), median(&one_ratios)),
    ]);
    Ok((
        vec![
            ("single".into(), single_m),
            ("cluster".into(), cluster_m),
            ("cluster1".into(), one_m),
        ],
        table,
        curve,
    ))
}

fn redis_slot(name: &str) -> u16 {
    fred::util::redis_keyslot(format!("{{{name}}}").as_bytes())
}
