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

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use fred::interfaces::LuaInterface;
use fred::types::{Key, Value};

use crate::ceiling_pubsub::PubSub;

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
    pubsub: PubSub,
    acquire_sha: String,
    release_sha: String,
}

/// Permits taken.
pub struct CeilingPermit {
    client: CeilingSemaphore,
    name: Arc<str>,
    permits: u32,
    latch: String,
}

fn channel_of(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

impl CeilingSemaphore {
    pub async fn connect(url: &str) -> Result<CeilingSemaphore> {
        // A count message `m` wakes `min(m, waiters)`.
        let pubsub = PubSub::connect(url, |count| {
            let count = count
                .as_str()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            usize::try_from(count).unwrap_or(0)
        })
        .await?;
        let acquire_sha: String = pubsub.cmd.script_load(ACQUIRE_LUA).await?;
        let release_sha: String = pubsub.cmd.script_load(RELEASE_LUA).await?;
        Ok(CeilingSemaphore {
            inner: Arc::new(Inner {
                pubsub,
                acquire_sha,
                release_sha,
            }),
        })
    }

    /// Take `permits` permits, waiting as long as it takes.
    pub async fn acquire(&self, name: &Arc<str>, permits: u32) -> Result<CeilingPermit> {
        if let Some(permit) = self.attempt(name, permits).await? {
            return Ok(permit);
        }
        self.inner
            .pubsub
            .wait(channel_of(name), || async {
                Ok(self.attempt(name, permits).await?.ok_or(CAP))
            })
            .await
    }

    /// One run of the acquire script with a fresh permit latch.
    async fn attempt(&self, name: &Arc<str>, permits: u32) -> Result<Option<CeilingPermit>> {
        let latch = format!(
            "redisson_sc_latch:{{{name}}}:{}",
            uuid::Uuid::new_v4().simple()
        );
        let reply: Value = self
            .inner
            .pubsub
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
}

impl CeilingPermit {
    /// The release script, then the latch DEL in the background.
    pub async fn release(self) -> Result<()> {
        let inner = &self.client.inner;
        let channel = channel_of(&self.name);
        let reply: Value = inner
            .pubsub
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
        inner.pubsub.delete_latch(self.latch);
        match reply {
            Value::Integer(_) => Ok(()),
            other => bail!("release script replied {other:?}"),
        }
    }
}
