//! A private Redis Cluster (3 masters, 3 replicas), or `REDIS_CLUSTER_URL`.

use std::process::{Command, Stdio};
use std::time::Duration;

use fred::prelude::*;
use fred::types::config::Config as FredConfig;
use redisson_lock::{Client, Config};

use super::{on_free_ports, raw_client, server_args, until, Node, TempDir};
use crate::inspect::{field_of, info_field};

/// A Redis Cluster: 3 masters and 3 replicas (or `REDIS_CLUSTER_URL`).
pub struct Cluster {
    /// `redis-cluster://` URL listing every node.
    pub url: String,
    /// Our processes, in creation order (empty for `REDIS_CLUSTER_URL`).
    pub nodes: Vec<Node>,
    _dir: Option<TempDir>,
}

impl Cluster {
    /// Whether the kit started this cluster (not `REDIS_CLUSTER_URL`).
    pub fn private(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// `REDIS_CLUSTER_URL` if set, else a private cluster, ready (every node
    /// reports `cluster_state:ok` and knows all six nodes).
    pub async fn start() -> Cluster {
        if let Some(url) = super::user_url("REDIS_CLUSTER_URL") {
            return Cluster {
                url,
                nodes: Vec::new(),
                _dir: None,
            };
        }
        Cluster::start_private().await
    }

    /// Always a private cluster, ready (as [`start`](Self::start) waits).
    pub async fn start_private() -> Cluster {
        let dir = TempDir::new("redis-cluster");
        let dir_path = &dir;
        let nodes: Vec<Node> = on_free_ports(6, |ports| async move {
            ports
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
                    Node::spawn("redis-server", port, server_args(port, dir_path, &extra))
                })
                .collect::<Option<Vec<_>>>()
        })
        .await;
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

    /// A `redisson-lock` client of the cluster.
    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    /// A `redisson-lock` client with its settings changed by `f`.
    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect_with(f(Config::from_url(&self.url).expect("cluster URL")))
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
    field_of(&info, field)
}
