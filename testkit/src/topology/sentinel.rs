//! One master, one replica and three sentinels, or `REDIS_SENTINEL_URL`.

use std::time::Duration;

use fred::prelude::*;
use redisson_lock::{Client, Config};

use super::{master_and_replica, on_free_ports, until, Node, TempDir};

/// One master, one replica and three sentinels watching them as `mymaster`
/// (or `REDIS_SENTINEL_URL`).
pub struct Sentinels {
    /// `redis-sentinel://` URL listing every sentinel.
    pub url: String,
    /// `[master, replica]` at start (roles change on failover).
    pub servers: Vec<Node>,
    /// The three sentinels.
    pub sentinels: Vec<Node>,
    _dir: Option<TempDir>,
}

/// The name the sentinels know the master by.
pub const SERVICE: &str = "mymaster";

impl Sentinels {
    /// Whether the kit started this set-up (not `REDIS_SENTINEL_URL`).
    pub fn private(&self) -> bool {
        !self.servers.is_empty()
    }

    /// `REDIS_SENTINEL_URL` if set, else a private set-up, ready (every
    /// sentinel knows the replica and the other sentinels).
    pub async fn start() -> Sentinels {
        if let Some(url) = super::user_url("REDIS_SENTINEL_URL") {
            return Sentinels {
                url,
                servers: Vec::new(),
                sentinels: Vec::new(),
                _dir: None,
            };
        }
        let dir = TempDir::new("redis-sentinel");
        let dir_path = &dir;
        let (servers, sentinels) = on_free_ports(5, |ports| async move {
            let (master, replica) = master_and_replica(&ports, dir_path).await?;
            let sentinels = ports[2..]
                .iter()
                .map(|&port| {
                    Node::spawn(
                        "redis-sentinel",
                        port,
                        sentinel_conf(dir_path, port, ports[0]),
                    )
                })
                .collect::<Option<Vec<_>>>()?;
            Some((vec![master, replica], sentinels))
        })
        .await;
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
            servers,
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
            let what = format!(
                "sentinel {} to know the replica and 2 other sentinels",
                sentinel.addr()
            );
            until(&what, Duration::from_secs(30), || async {
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

    /// A `redisson-lock` client, through the sentinels.
    pub async fn client(&self) -> Client {
        self.client_with(|c| c).await
    }

    /// A `redisson-lock` client with its settings changed by `f`.
    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::connect_with(f(Config::from_url(&self.url).expect("sentinel URL")))
            .await
            .expect("connect through the sentinels")
    }
}

/// The arguments of a sentinel on `port` watching the master on `master`:
/// its config file, written in `dir`.
fn sentinel_conf(dir: &TempDir, port: u16, master: u16) -> Vec<String> {
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
        ),
    )
    .expect("write a sentinel config");
    vec![conf.to_string_lossy().into_owned()]
}
