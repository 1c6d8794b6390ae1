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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use fred::interfaces::LuaInterface;
use fred::types::{Key, Value};

use crate::ceiling_pubsub::PubSub;

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
    pubsub: PubSub,
    id: String,
    next_owner: AtomicU64,
    lock_sha: String,
    unlock_sha: String,
}

/// One hold.
pub struct CeilingGuard {
    client: Ceiling,
    name: String,
    field: String,
}

impl Ceiling {
    pub async fn connect(url: &str) -> Result<Ceiling> {
        // One waiter woken per message.
        let pubsub = PubSub::connect(url, |_| 1).await?;
        let lock_sha: String = pubsub.cmd.script_load(LOCK_LUA).await?;
        let unlock_sha: String = pubsub.cmd.script_load(UNLOCK_LUA).await?;
        Ok(Ceiling {
            inner: Arc::new(Inner {
                pubsub,
                id: uuid::Uuid::new_v4().hyphenated().to_string(),
                next_owner: AtomicU64::new(1),
                lock_sha,
                unlock_sha,
            }),
        })
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
        let held = &guard;
        let channel = format!("redisson_lock__channel:{{{name}}}");
        self.inner
            .pubsub
            .wait(channel, || async move {
                Ok(match self.attempt(held).await? {
                    None => Ok(()),
                    Some(ttl) => Err(Duration::from_millis(
                        u64::try_from(ttl).unwrap_or(LEASE_MS as u64),
                    )),
                })
            })
            .await?;
        Ok(guard)
    }

    /// One run of the acquire script: None if acquired, else the holder's PTTL.
    async fn attempt(&self, guard: &CeilingGuard) -> Result<Option<i64>> {
        let reply: Value = self
            .inner
            .pubsub
            .cmd
            .evalsha(
                &self.inner.lock_sha,
                vec![Key::from(guard.name.as_str())],
                vec![Value::Integer(LEASE_MS), Value::from(guard.field.as_str())],
            )
            .await?;
        // lua/lock.lua replies {count} when it took or re-entered the lock.
        match reply {
            Value::Array(_) => Ok(None),
            Value::Integer(ttl) => Ok(Some(ttl)),
            other => bail!("lock script replied {other:?}"),
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
            .pubsub
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
                    Value::from(self.field.as_str()),
                    Value::from("PUBLISH"),
                    Value::Integer(LATCH_TTL_MS),
                ],
            )
            .await?;
        inner.pubsub.delete_latch(latch);
        match reply {
            Value::Integer(0 | 1) => Ok(()),
            other => Err(anyhow!("unlock script replied {other:?} for {}", self.name)),
        }
    }
}
