//! What the two ceilings (`ceiling.rs`, `ceiling_semaphore.rs`) share: one
//! fred connection for commands and one for pub/sub (broadcast capacity
//! 4096, as the library), one SUBSCRIBE per channel shared by the local
//! waiters and confirmed by a PING on the pub/sub connection, the wait loop
//! of a waiter (re-try once subscribed, then sleep until woken or the pause
//! ends), and the latch `DEL`s, batched and fire-and-forget.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Result;
use fred::interfaces::{ClientLike, EventInterface, KeysInterface, PubsubInterface};
use fred::types::Value;
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot, Notify, OnceCell};

/// Channel -> (local waiters, entry).
type Channels = Mutex<HashMap<String, (usize, Arc<Channel>)>>;

/// The connections of one ceiling client; quits them when dropped.
pub struct PubSub {
    pub cmd: fred::clients::Client,
    sub: fred::clients::Client,
    channels: Arc<Channels>,
    ops: mpsc::UnboundedSender<Op>,
    latches: mpsc::UnboundedSender<String>,
}

struct Channel {
    subscribed: OnceCell<()>,
    notify: Notify,
}

enum Op {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

/// One waiter's share of a channel's subscription.
struct Joined<'a> {
    pubsub: &'a PubSub,
    channel: String,
    entry: Arc<Channel>,
}

impl PubSub {
    /// Connect both clients. `wakes(message)`: how many local waiters of
    /// its channel a message wakes (at most as many as wait).
    pub async fn connect(url: &str, wakes: fn(&Value) -> usize) -> Result<PubSub> {
        let config = fred::types::config::Config::from_url(url)?;
        // fred's default pub/sub broadcast capacity (32) drops messages in
        // bursts; the library uses 4096 and so do the ceilings.
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
        let channels: Arc<Channels> = Arc::default();
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
        tokio::spawn(wake_waiters(
            sub.message_rx(),
            Arc::downgrade(&channels),
            wakes,
        ));
        Ok(PubSub {
            cmd,
            sub,
            channels,
            ops,
            latches,
        })
    }

    /// Queue the latch's `DEL`.
    pub fn delete_latch(&self, latch: String) {
        let _ = self.latches.send(latch);
    }

    /// Join `channel`, then run `attempt` until it gives `Ok(value)`: after
    /// each `Err(pause)`, sleep until a message wakes this waiter or the
    /// pause ends (docs/PROTOCOL.md §2.8).
    pub async fn wait<T, F, Fut>(&self, channel: String, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<std::result::Result<T, Duration>>>,
    {
        let joined = self.join(channel).await;
        loop {
            let notified = joined.entry.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pause = match attempt().await? {
                Ok(value) => return Ok(value),
                Err(pause) => pause,
            };
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Share the channel's subscription, subscribing if first.
    async fn join(&self, channel: String) -> Joined<'_> {
        let entry = {
            let mut channels = self.channels.lock();
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
            pubsub: self,
            channel,
            entry,
        };
        joined
            .entry
            .subscribed
            .get_or_init(|| async {
                let (tx, rx) = oneshot::channel();
                let _ = self.ops.send(Op::Subscribe(joined.channel.clone(), tx));
                let _ = rx.await;
            })
            .await;
        joined
    }
}

/// Wake the waiters of each message's channel.
async fn wake_waiters(
    mut messages: tokio::sync::broadcast::Receiver<fred::types::Message>,
    channels: Weak<Channels>,
    wakes: fn(&Value) -> usize,
) {
    loop {
        let received = messages.recv().await;
        let Some(channels) = channels.upgrade() else {
            return;
        };
        match received {
            Ok(message) => {
                let slot = channels
                    .lock()
                    .get(&*message.channel)
                    .map(|(n, e)| (*n, e.clone()));
                if let Some((waiters, entry)) = slot {
                    for _ in 0..wakes(&message.value).min(waiters) {
                        entry.notify.notify_one();
                    }
                }
            }
            Err(RecvError::Lagged(_)) => {
                // Messages were dropped: wake every waiter to re-check.
                let entries: Vec<_> = channels.lock().values().map(|(_, e)| e.clone()).collect();
                for entry in entries {
                    entry.notify.notify_waiters();
                    entry.notify.notify_one();
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        let mut channels = self.pubsub.channels.lock();
        if let Some(slot) = channels.get_mut(&self.channel) {
            slot.0 -= 1;
            if slot.0 == 0 {
                channels.remove(&self.channel);
                let _ = self.pubsub.ops.send(Op::Unsubscribe(self.channel.clone()));
            }
        }
    }
}

impl Drop for PubSub {
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
