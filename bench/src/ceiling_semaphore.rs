//! The semaphore protocol's ceiling: the smallest client that speaks the
//! same RSemaphore wire protocol as `redisson-lock` (docs/PROTOCOL.md §7.1, §3.2,
//! §3.3), as the library speaks it.
//!
//! The library's own `semaphore_acquire.lua` and `semaphore_release.lua`
//! (with their argument checks and the permit latch), EVALSHA, one
//! connection for commands and one for pub/sub, one SUBSCRIBE per channel
//! shared by the local waiters and confirmed by a PING before the waiter
//! re-tries, a count message `m` waking `min(m, waiters)`, waits capped at
//! 30 s like the library's, and the latch `DEL` afterwards, batched and
//! fire-and-forget. Nothing else: no retries, no cancellation safety (a
//! dropped acquire may leak its permits), no reconnect handling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use fred::interfaces::{ClientLike, EventInterface, KeysInterface, LuaInterface, PubsubInterface};
use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot, Notify, OnceCell};

const ACQUIRE_LUA: &str = concat!(
    include_str!("../../lua/args.lua"),
    include_str!("../../lua/count.lua"),
    include_str!("../../lua/semaphore_acquire.lua")
);
const RELEASE_LUA: &str = concat!(
    include_str!("../../lua/args.lua"),
    include_str!("../../lua/count.lua"),
    include_str!("../../lua/semaphore_release.lua")
);
/// The library's default permit latch TTL: 2 × (3 s + 1 s) × 4.
const LATCH_TTL_MS: i64 = 32_000;
/// The library's default cap on one sleep (its watchdog timeout).
const CAP: Duration = Duration::from_secs(30);

/// A ceiling semaphore client. Cheap to clone.
#[derive(Clone)]
pub struct CeilingSemaphore {
    inner: Arc<Inner>,
}

struct Inner {
    cmd: fred::clients::Client,
    sub: fred::clients::Client,
    /// Channel -> (local waiters, entry).
    channels: Mutex<HashMap<String, (usize, Arc<Channel>)>>,
    ops: mpsc::UnboundedSender<Op>,
    latches: mpsc::UnboundedSender<String>,
    acquire_sha: String,
    release_sha: String,
}

struct Channel {
    subscribed: OnceCell<()>,
    notify: Notify,
}

enum Op {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

/// Permits taken.
pub struct CeilingPermit {
    client: CeilingSemaphore,
    name: Arc<str>,
    permits: u32,
    latch: String,
}

struct Joined {
    client: CeilingSemaphore,
    channel: String,
    entry: Arc<Channel>,
}

fn channel_of(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

impl CeilingSemaphore {
    pub async fn connect(url: &str) -> Result<CeilingSemaphore> {
        let config = fred::types::config::Config::from_url(url)?;
        let perf = fred::types::config::PerformanceConfig {
            broadcast_channel_capacity: 4096,
            ..Default::default()
        };
        let cmd = fred::types::Builder::from_config(config)
            .set_performance_config(perf)
            .build()?;
        let sub = cmd.clone_new();
        cmd.init().await?;
        sub.init().await?;
        let acquire_sha: String = cmd.script_load(ACQUIRE_LUA).await?;
        let release_sha: String = cmd.script_load(RELEASE_LUA).await?;
        let (ops, mut rx) = mpsc::unbounded_channel::<Op>();
        let (latches, mut latch_rx) = mpsc::unbounded_channel::<String>();
        let del_cmd = cmd.clone();
        tokio::spawn(async move {
            let mut keys = Vec::new();
            while latch_rx.recv_many(&mut keys, 512).await > 0 {
                let _: std::result::Result<i64, _> = del_cmd.del(std::mem::take(&mut keys)).await;
            }
        });
        let inner = Arc::new(Inner {
            cmd,
            sub: sub.clone(),
            channels: Mutex::new(HashMap::new()),
            ops,
            latches,
            acquire_sha,
            release_sha,
        });
        let ops_sub = sub.clone();
        tokio::spawn(async move {
            while let Some(op) = rx.recv().await {
                match op {
                    Op::Subscribe(channel, done) => {
                        let _ = ops_sub.subscribe(channel).await;
                        // Confirmed once the server answers a PING behind it.
                        let _: std::result::Result<Value, _> = ops_sub.ping(None).await;
                        let _ = done.send(());
                    }
                    Op::Unsubscribe(channel) => {
                        let _ = ops_sub.unsubscribe(channel).await;
                    }
                }
            }
        });
        let weak = Arc::downgrade(&inner);
        let mut messages = sub.message_rx();
        tokio::spawn(async move {
            loop {
                let received = messages.recv().await;
                let Some(inner) = weak.upgrade() else { return };
                match received {
                    Ok(message) => {
                        let count = message
                            .value
                            .as_str()
                            .and_then(|s| s.parse::<i64>().ok())
                            .unwrap_or(0);
                        let slot = inner
                            .channels
                            .lock()
                            .get(&*message.channel)
                            .map(|(n, e)| (*n, e.clone()));
                        if let Some((waiters, entry)) = slot {
                            let wake = usize::try_from(count).unwrap_or(0).min(waiters);
                            for _ in 0..wake {
                                entry.notify.notify_one();
                            }
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let entries: Vec<_> = inner
                            .channels
                            .lock()
                            .values()
                            .map(|(_, e)| e.clone())
                            .collect();
                        for entry in entries {
                            entry.notify.notify_waiters();
                            entry.notify.notify_one();
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Ok(CeilingSemaphore { inner })
    }

    /// Take `permits` permits, waiting as long as it takes.
    pub async fn acquire(&self, name: &Arc<str>, permits: u32) -> Result<CeilingPermit> {
        if let Some(permit) = self.attempt(name, permits).await? {
            return Ok(permit);
        }
        let joined = self.join(channel_of(name)).await;
        loop {
            let notified = joined.entry.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(permit) = self.attempt(name, permits).await? {
                return Ok(permit);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(CAP) => {}
            }
        }
    }

    /// One run of the acquire script with a fresh permit latch.
    async fn attempt(&self, name: &Arc<str>, permits: u32) -> Result<Option<CeilingPermit>> {
        let latch = format!(
            "redisson_sc_latch:{{{name}}}:{}",
            uuid::Uuid::new_v4().simple()
        );
        let reply: Value = self
            .inner
            .cmd
            .evalsha(
                &self.inner.acquire_sha,
                vec![Key::from(&**name), Key::from(latch.as_str())],
                vec![Value::Integer(permits.into()), Value::Integer(LATCH_TTL_MS)],
            )
            .await?;
        match reply {
            Value::Integer(1) => Ok(Some(CeilingPermit {
                client: self.clone(),
                name: name.clone(),
                permits,
                latch,
            })),
            Value::Integer(0) => Ok(None),
            other => bail!("acquire script replied {other:?}"),
        }
    }

    async fn join(&self, channel: String) -> Joined {
        let entry = {
            let mut channels = self.inner.channels.lock();
            let slot = channels.entry(channel.clone()).or_insert_with(|| {
                (
                    0,
                    Arc::new(Channel {
                        subscribed: OnceCell::new(),
                        notify: Notify::new(),
                    }),
                )
            });
            slot.0 += 1;
            slot.1.clone()
        };
        let joined = Joined {
            client: self.clone(),
            channel,
            entry,
        };
        joined
            .entry
            .subscribed
            .get_or_init(|| async {
                let (tx, rx) = oneshot::channel();
                let _ = self
                    .inner
                    .ops
                    .send(Op::Subscribe(joined.channel.clone(), tx));
                let _ = rx.await;
            })
            .await;
        joined
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        let mut channels = self.client.inner.channels.lock();
        if let Some(slot) = channels.get_mut(&self.channel) {
            slot.0 -= 1;
            if slot.0 == 0 {
                channels.remove(&self.channel);
                let _ = self
                    .client
                    .inner
                    .ops
                    .send(Op::Unsubscribe(self.channel.clone()));
            }
        }
    }
}

impl CeilingPermit {
    /// The release script, then the latch DEL in the background.
    pub async fn release(self) -> Result<()> {
        let inner = &self.client.inner;
        let channel = channel_of(&self.name);
        let reply: Value = inner
            .cmd
            .evalsha(
                &inner.release_sha,
                vec![
                    Key::from(&*self.name),
                    Key::from(channel.as_str()),
                    Key::from(self.latch.as_str()),
                ],
                vec![
                    Value::Integer(self.permits.into()),
                    Value::from("PUBLISH"),
                    Value::Integer(LATCH_TTL_MS),
                    Value::from("0"),
                ],
            )
            .await?;
        let _ = inner.latches.send(self.latch);
        match reply {
            Value::Integer(_) => Ok(()),
            other => bail!("release script replied {other:?}"),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let (cmd, sub) = (self.cmd.clone(), self.sub.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = sub.quit().await;
                let _ = cmd.quit().await;
            });
        }
    }
}
