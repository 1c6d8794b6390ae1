//! The core scenarios on a Redis Cluster and under Sentinel.

use std::time::Instant;

use crate::common;
use crate::common::java::{self, Peer, Status, Steps, Topology};
use crate::scenarios::locks::critical;
use crate::scenarios::{cmdstat, until, woken};
use fred::prelude::*;
use redisson_lock::{Client, PubSubMode};

/// Where to count a channel's subscribers.
pub enum Subs<'a> {
    /// One server (a Sentinel-managed master).
    Server(&'a fred::clients::Client),
    /// Summed over a cluster's nodes, `NUMSUB` or `SHARDNUMSUB`.
    Cluster(&'a common::topology::Cluster, &'static str),
}

impl Subs<'_> {
    pub async fn count(&self, channel: &str) -> i64 {
        match self {
            Subs::Server(raw) => common::numsub(raw, channel).await,
            Subs::Cluster(cluster, sub) => cluster.count(sub, channel).await,
        }
    }

    pub async fn wait(&self, steps: &Steps, channel: &str) {
        self.wait_for(steps, channel, 1).await;
    }

    /// Until `channel` has at least `n` subscribers.
    pub async fn wait_for(&self, steps: &Steps, channel: &str, n: i64) {
        until(
            steps,
            &format!("{n} subscriber(s) on {channel}"),
            || async { self.count(channel).await >= n },
        )
        .await;
        steps.note(format!("rust: sees {n} subscriber(s) on {channel}"));
    }
}

/// The core scenarios on another deployment: RLock exclusion and wake-ups
/// both ways, semaphore wake-ups both ways.
pub async fn core_on(
    steps: &Steps,
    java: &mut Peer,
    client: &Client,
    raw: &fred::clients::Client,
    subs: &Subs<'_>,
    prefix: &str,
) {
    // Exclusion: a Java thread and a Rust task on one counter.
    let name = format!("{prefix}-counter");
    let key = format!("{prefix}-counter-value");
    let rounds = 15;
    let j = java
        .send("t1", &format!("counter lock:{name} {key} {rounds}"))
        .await;
    for _ in 0..rounds {
        critical(client, raw, "lock", &name, &key).await;
    }
    j.ok().await;
    let got: Option<i64> = raw.get(&key).await.unwrap();
    steps.eq(
        got,
        Some(2 * i64::from(rounds)),
        "counter under an RLock shared by a java thread and a rust task",
    );

    // Java -> Rust.
    let name = format!("{prefix}-wake");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    java.ok("t1", &format!("lock lock:{name}")).await;
    let lock = client.lock(&name).unwrap();
    let st = steps.clone();
    let w = tokio::spawn(async move {
        let g = lock.lock().await.unwrap();
        st.note("rust: lock acquired");
        (Instant::now(), g)
    });
    subs.wait(steps, &channel).await;
    let released = java.call("t1", &format!("unlock lock:{name}")).await;
    let (at, g) = w.await.unwrap();
    woken(steps, "rust waiter after java unlock", released.at, at);
    // Rust -> Java.
    let waiting = java.send("t2", &format!("lock lock:{name}")).await;
    // Java's, and the Rust client's (its hold's watch).
    subs.wait_for(steps, &channel, 2).await;
    g.unlock().await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    steps.eq(reply.status, Status::Ok, "java lock after rust unlock");
    woken(steps, "java waiter after rust unlock", released, reply.at);
    java.ok("t2", &format!("unlock lock:{name}")).await;

    // Semaphore, both ways.
    let name = format!("{prefix}-sem");
    let channel = format!("redisson_sc:{{{name}}}");
    java.ok("t1", &format!("trysetpermits sem:{name} 0")).await;
    let sem = client.semaphore(&name).unwrap();
    let st = steps.clone();
    let s2 = sem.clone();
    let w = tokio::spawn(async move {
        let p = s2.acquire(1).await.unwrap();
        st.note("rust: permit acquired");
        (Instant::now(), p)
    });
    subs.wait(steps, &channel).await;
    let released = java.call("t1", &format!("release sem:{name}")).await;
    let (at, p) = w.await.unwrap();
    woken(
        steps,
        "rust semaphore waiter after java release",
        released.at,
        at,
    );
    p.forget();
    let waiting = java.send("t2", &format!("acquire sem:{name}")).await;
    subs.wait(steps, &channel).await;
    sem.release(1).await.unwrap();
    let released = Instant::now();
    let reply = waiting.reply().await;
    steps.eq(reply.status, Status::Ok, "java acquire after rust release");
    woken(
        steps,
        "java semaphore waiter after rust release",
        released,
        reply.at,
    );
}

/// The core scenarios on a Redis Cluster, once with classic pub/sub
/// (`PUBLISH`) on both sides and once sharded (`SPUBLISH`), where the
/// server and the Redisson version can.
pub async fn cluster(version: &str) {
    let Some(redisson) = java::redisson(version) else {
        return;
    };
    let started = Instant::now();
    let cluster = common::topology::Cluster::start().await;
    let ready_in = started.elapsed();
    let nodes: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://{}", n.addr()))
        .collect();
    let raw = cluster.raw().await;
    // Whether the servers shard pub/sub: ask, as the crate does (Redis 7+).
    let sharding = raw
        .custom::<Value, _>(fred::cmd!("PUBSUB"), vec!["SHARDNUMSUB"])
        .await
        .is_ok();
    // Redisson (3.17+) follows each lock script with a WAIT and, before 4.x,
    // fails the call when no replica acknowledges within a second: wait for
    // the replicas' first sync (Redis 7 delays diskless syncs by 5 s).
    replicas_online(&cluster).await;
    let online_in = started.elapsed();
    for (mode, java_mode, command, sub) in [
        (PubSubMode::Classic, "off", "PUBLISH", "NUMSUB"),
        (PubSubMode::Sharded, "on", "SPUBLISH", "SHARDNUMSUB"),
    ] {
        let steps = Steps::new(format!("Redisson {version}, cluster, {command}"));
        steps.note(format!(
            "rust: cluster up in {ready_in:?}, replicas in sync after {online_in:?}"
        ));
        if mode == PubSubMode::Sharded && !sharding {
            println!(
                "skipped: the Redis cluster has no sharded pub/sub (PUBSUB SHARDNUMSUB refused)"
            );
            continue;
        }
        let mut java = Peer::start(
            &redisson,
            &Topology::Cluster {
                nodes: nodes.clone(),
                sharded: java_mode,
            },
            &[],
            &steps,
        )
        .await;
        if java.publish != command {
            // 3.17 knows only PUBLISH; 3.22 and 3.23 always shard where the
            // cluster can (no ShardedSubscriptionMode before 3.24).
            steps.check(
                (version == "3.17.0" && command == "SPUBLISH")
                    || (version == "3.23.0" && command == "PUBLISH"),
                format!(
                    "Redisson {version} on a cluster, asked for {command}, publishes with {}",
                    java.publish
                ),
            );
            println!(
                "skipped: Redisson {version} cannot use {command} on a Redis 7 cluster (it uses {})",
                java.publish
            );
            continue;
        }
        let client = cluster.client_with(|c| c.pubsub_mode(mode)).await;
        let prefix = common::unique(&format!("cluster-{}", command.to_lowercase()));
        core_on(
            &steps,
            &mut java,
            &client,
            &raw,
            &Subs::Cluster(&cluster, sub),
            &prefix,
        )
        .await;
        client.shutdown().await;
    }
}

/// Wait until every master of our private cluster has its replica in sync.
pub async fn replicas_online(cluster: &common::topology::Cluster) {
    for node in &cluster.nodes {
        let raw = node.raw().await;
        let info: String = raw
            .custom(fred::cmd!("INFO"), vec!["replication"])
            .await
            .unwrap();
        let _ = raw.quit().await;
        if info.contains("role:master") {
            common::topology::wait_replicas(node, 1).await;
        }
    }
}

/// The core scenarios under Sentinel (Java and Rust find the master
/// through the sentinels).
pub async fn sentinel(version: &str) {
    let Some(redisson) = java::redisson(version) else {
        return;
    };
    let steps = Steps::new(format!("Redisson {version}, sentinel"));
    steps.note("rust: starting a master, a replica and 3 sentinels");
    let sentinels = common::topology::Sentinels::start().await;
    steps.note("rust: sentinels ready");
    let addrs: Vec<String> = sentinels
        .sentinels
        .iter()
        .map(|n| format!("redis://{}", n.addr()))
        .collect();
    let mut java = Peer::start(
        &redisson,
        &Topology::Sentinel {
            master: common::topology::SERVICE.to_string(),
            sentinels: addrs,
        },
        &[],
        &steps,
    )
    .await;
    let client = sentinels.client().await;
    steps.note("rust: client connected through the sentinels");
    let master = sentinels.master().await;
    let raw = sentinels.servers[master].raw().await;
    steps.note(format!(
        "rust: master is {}",
        sentinels.servers[master].addr()
    ));
    let prefix = common::unique("sentinel");
    // §11.1: Redisson follows a lock script with WAIT when it counts
    // replicas. The peer reads from the master (readMode MASTER, so that its
    // counter reads are not stale): 3.17 and 3.23 then count no replica and
    // send no WAIT; 3.45+ ask the master (INFO replication) and do.
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let before = cmdstat(&info, "wait");
    let name = format!("{prefix}-wait");
    java.ok("t1", &format!("lock lock:{name}")).await;
    let info: String = raw
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .unwrap();
    let after = cmdstat(&info, "wait");
    steps.note(format!(
        "rust: WAIT calls on the master {before} -> {after}"
    ));
    let expect = !matches!(version, "3.17.0" | "3.23.0");
    steps.eq(
        after > before,
        expect,
        "§11.1/§9.1: java's lock on a master with a replica is followed by WAIT (readMode MASTER)",
    );
    java.ok("t1", &format!("unlock lock:{name}")).await;
    core_on(
        &steps,
        &mut java,
        &client,
        &raw,
        &Subs::Server(&raw),
        &prefix,
    )
    .await;
    client.shutdown().await;
}
