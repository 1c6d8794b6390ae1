//! The protocol's ceiling: the smallest client that speaks the same RLock
//! wire protocol as `redisson-lock` (docs/PROTOCOL.md §2.2, §2.3, §2.8, §3.2, §3.3).
//!
//! Same Lua files, EVALSHA, one connection for commands and one for pub/sub,
//! one SUBSCRIBE per channel shared by the local waiters, one waiter woken per
//! `0` message (the subscription confirmed by a PING on the pub/sub
//! connection before the waiter re-tries), the same unlock script with a
//! fresh latch key, and a fire-and-forget `DEL` of the latch afterwards
//! (batched: latches queued while a DEL is in flight share the next one).
//! Nothing else: no watchdog (a 30 s lease like the library's watchdog
//! default), no retries, no cancellation safety, no reconnect handling.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use fred::interfaces::{ClientLike, EventInterface, KeysInterface, LuaInterface, PubsubInterface};
use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot, Notify, OnceCell};

/// The library's scripts, as it sends them: its argument checks first.
pub const LOCK_LUA: &str = concat!(
    include_str!("../../lua/args.lua"),
    include_str!("../../lua/lock.lua")
);
pub const UNLOCK_LUA: &str = concat!(
    include_str!("../../lua/args.lua"),
    include_str!("../../lua/unlock.lua")
);
/// The library's default watchdog timeout, used as the lease.
pub const LEASE_MS: i64 = 30_000;
/// The library's default latch TTL: (timeout 3 s + retry delay 1 s) × 4 attempts.
pub const LATCH_TTL_MS: i64 = 16_000;

/// A ceiling client. Cheap to clone.
#[derive(Clone)]
pub struct Ceiling {
    inner: Arc<Inner>,
}

struct Inner {
    cmd: fred::clients::Client,
    sub: fred::clients::Client,
    id: String,
    next_owner: AtomicU64,
    channels: Mutex<HashMap<String, (usize, Arc<Channel>)>>,
    ops: mpsc::UnboundedSender<Op>,
    latches: mpsc::UnboundedSender<String>,
    lock_sha: String,
    unlock_sha: String,
}

struct Channel {
    subscribed: OnceCell<()>,
    notify: Notify,
}

enum Op {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

/// One hold.
pub struct CeilingGuard {
    client: Ceiling,
    name: String,
    field: String,
}

struct Joined {
    client: Ceiling,
    channel: String,
    entry: Arc<Channel>,
}

impl Ceiling {
    pub async fn connect(url: &str) -> Result<Ceiling> {
        let config = fred::types::config::Config::from_url(url)?;
        // fred's default pub/sub broadcast capacity (32) drops messages in
        // bursts; the library uses 4096 and so does this client.
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
        let lock_sha: String = cmd.script_load(LOCK_LUA).await?;
        let unlock_sha: String = cmd.script_load(UNLOCK_LUA).await?;
        let (ops, mut rx) = mpsc::unbounded_channel::<Op>();
        let (latches, mut latch_rx) = mpsc::unbounded_channel::<String>();
        // Latch DELs: one task; whatever queued while a DEL was in flight
        // goes out in the next one (what the library does since 6c30a64).
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
            id: uuid::Uuid::new_v4().hyphenated().to_string(),
            next_owner: AtomicU64::new(1),
            channels: Mutex::new(HashMap::new()),
            ops,
            latches,
            lock_sha,
            unlock_sha,
        });
        // Subscribe and unsubscribe in the order they were asked for.
        let ops_sub = sub.clone();
        tokio::spawn(async move {
            while let Some(op) = rx.recv().await {
                match op {
                    Op::Subscribe(channel, done) => {
                        let _ = ops_sub.subscribe(channel).await;
                        // fred 10 resolves SUBSCRIBE once it is written, not
                        // once the server has run it. A PING on the same
                        // connection is answered only after the SUBSCRIBE
                        // ran, so the re-try that follows cannot miss an
                        // unlock message (docs/PROTOCOL.md §2.8 step 3).
                        let _: std::result::Result<Value, _> = ops_sub.ping(None).await;
                        let _ = done.send(());
                    }
                    Op::Unsubscribe(channel) => {
                        let _ = ops_sub.unsubscribe(channel).await;
                    }
                }
            }
        });
        // Wake one local waiter per message.
        let weak = Arc::downgrade(&inner);
        let mut messages = sub.message_rx();
        tokio::spawn(async move {
            loop {
                let received = messages.recv().await;
                let Some(inner) = weak.upgrade() else { return };
                match received {
                    Ok(message) => {
                        let entry = inner
                            .channels
                            .lock()
                            .get(&*message.channel)
                            .map(|(_, e)| e.clone());
                        if let Some(entry) = entry {
                            entry.notify.notify_one();
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        // Messages were dropped: wake every waiter to re-check.
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
        Ok(Ceiling { inner })
    }

    /// Wait as long as it takes (docs/PROTOCOL.md §2.8).
    pub async fn lock(&self, name: &str) -> Result<CeilingGuard> {
        let owner = self.inner.next_owner.fetch_add(1, Ordering::Relaxed);
        let field = format!("{}:{owner}", self.inner.id);
        let guard = CeilingGuard {
            client: self.clone(),
            name: name.to_owned(),
            field,
        };
        if self.attempt(&guard).await?.is_none() {
            return Ok(guard);
        }
        let joined = self
            .join(format!("redisson_lock__channel:{{{name}}}"))
            .await;
        loop {
            let notified = joined.entry.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let ttl = match self.attempt(&guard).await? {
                None => return Ok(guard),
                Some(ttl) => ttl,
            };
            let pause = Duration::from_millis(u64::try_from(ttl).unwrap_or(LEASE_MS as u64));
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One run of the acquire script: None if acquired, else the holder's PTTL.
    async fn attempt(&self, guard: &CeilingGuard) -> Result<Option<i64>> {
        let reply: Value = self
            .inner
            .cmd
            .evalsha(
                &self.inner.lock_sha,
                vec![Key::from(guard.name.as_str())],
                vec![Value::Integer(LEASE_MS), Value::from(guard.field.as_str())],
            )
            .await?;
        match reply {
            Value::Null => Ok(None),
            Value::Integer(ttl) => Ok(Some(ttl)),
            other => bail!("lock script replied {other:?}"),
        }
    }

    /// Share the channel's subscription, subscribing if first.
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

impl CeilingGuard {
    /// The unlock script with a fresh latch, then DEL of the latch in the background.
    pub async fn unlock(self) -> Result<()> {
        let inner = &self.client.inner;
        let channel = format!("redisson_lock__channel:{{{}}}", self.name);
        let latch = format!(
            "redisson_unlock_latch:{{{}}}:{}",
            self.name,
            uuid::Uuid::new_v4().simple()
        );
        let reply: Value = inner
            .cmd
            .evalsha(
                &inner.unlock_sha,
                vec![
                    Key::from(self.name.as_str()),
                    Key::from(channel.as_str()),
                    Key::from(latch.as_str()),
                ],
                vec![
                    Value::from("0"),
                    Value::Integer(LEASE_MS),
                    Value::from(self.field.as_str()),
                    Value::from("PUBLISH"),
                    Value::Integer(LATCH_TTL_MS),
                ],
            )
            .await?;
        let _ = inner.latches.send(latch);
        match reply {
            Value::Integer(0 | 1) => Ok(()),
            other => Err(anyhow!("unlock script replied {other:?} for {}", self.name)),
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
