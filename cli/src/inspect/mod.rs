//! Reading a lock's state from Redis: which kind it is (from the keys that
//! exist, docs/PROTOCOL.md §1.4–§7), its holders, queue, readers, token,
//! permits, and the subscribers of its channels. Read-only: nothing here
//! writes to Redis.

mod raw;
mod render;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use redisson_lock::fred::types::Value;
use redisson_lock::layout::{self, Layout};
use redisson_lock::Client;
use serde_json::{json, Value as Json};

use crate::args::StatusKind;
use crate::exit::CliResult;

pub use raw::Raw;
use raw::{hex, text};

/// At most this many queue entries, readers' timeout keys and permits are
/// read (the totals are always shown).
const SHOWN: i64 = 1000;

/// The kind found in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing under the name.
    None,
    /// A key that no kind explains.
    Unknown,
    /// One of the layouts.
    Kind(StatusKind),
}

impl Found {
    pub fn as_str(self) -> &'static str {
        match self {
            Found::None => "none",
            Found::Unknown => "unknown",
            Found::Kind(k) => k.as_str(),
        }
    }

    /// The Redisson types that share this layout.
    pub fn candidates(self) -> &'static [&'static str] {
        match self {
            // A fair lock with nobody queued has no queue keys: held, it
            // is only the hash.
            Found::Kind(StatusKind::Rlock) => &[
                "rlock",
                "non-reentrant",
                "spin",
                "fair",
                "non-reentrant-fair",
            ],
            Found::Kind(StatusKind::Fair) => &["fair", "non-reentrant-fair"],
            Found::Kind(StatusKind::ReadWrite) => &["read", "write"],
            Found::Kind(StatusKind::Fenced) => &["fenced"],
            Found::Kind(StatusKind::Semaphore) | Found::Kind(StatusKind::Latch) => {
                &["semaphore", "latch"]
            }
            Found::Kind(StatusKind::PermitSemaphore) => &["permit-semaphore"],
            Found::None | Found::Unknown => &[],
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Found::None => "nothing under this name",
            Found::Unknown => "not a lock layout this tool knows",
            Found::Kind(StatusKind::Rlock) => {
                "RLock; a non-reentrant or spin lock has the same layout, and so has a held fair \
                 lock with nobody queued (its queue keys exist only while someone waits)"
            }
            Found::Kind(StatusKind::Fair) => "fair lock, or non-reentrant fair lock",
            Found::Kind(StatusKind::ReadWrite) => "read-write lock",
            Found::Kind(StatusKind::Fenced) => "fenced lock",
            Found::Kind(StatusKind::Semaphore) => "semaphore; a count-down latch looks the same",
            Found::Kind(StatusKind::PermitSemaphore) => "permit-expirable semaphore",
            Found::Kind(StatusKind::Latch) => "count-down latch; a semaphore looks the same",
        }
    }
}

/// One owner field, split.
#[derive(Debug, Clone)]
pub struct Field {
    pub raw: String,
    pub client_id: String,
    pub owner_id: Option<i64>,
    /// The `:write` field of a read-write lock.
    pub write: bool,
}

impl Field {
    pub fn parse(raw: &str) -> Option<Field> {
        let (body, write) = match raw.strip_suffix(":write") {
            Some(body) => (body, true),
            None => (raw, false),
        };
        let (client, owner) = body.rsplit_once(':')?;
        if client.is_empty() {
            return None;
        }
        Some(Field {
            raw: raw.to_owned(),
            client_id: client.to_owned(),
            owner_id: owner.parse().ok(),
            write,
        })
    }
}

#[derive(Debug)]
pub struct Holder {
    pub field: Field,
    pub count: Option<i64>,
    /// Readers of a read-write lock: PTTL of each timeout key (`-2`: missing).
    pub timeouts_ms: Vec<i64>,
}

#[derive(Debug)]
pub struct Waiter {
    pub field: Field,
    pub deadline_ms: Option<i64>,
    /// Its own channel, `redisson_lock__channel:{N}:<field>`.
    pub channel: String,
    pub subscribers: Subscribers,
}

#[derive(Debug)]
pub struct Permit {
    pub id: String,
    /// Epoch ms; `None`: no lease.
    pub expires_ms: Option<i64>,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Subscribers {
    /// `PUBSUB NUMSUB` (summed over a cluster's masters).
    pub classic: Option<i64>,
    /// `PUBSUB SHARDNUMSUB` (on the slot's node).
    pub sharded: Option<i64>,
}

impl Subscribers {
    fn total(self) -> i64 {
        self.classic.unwrap_or(0) + self.sharded.unwrap_or(0)
    }
}

/// A PTTL reply for `--json`: the milliseconds left, or `null` when the key
/// has no expiry (-1; `no_expiry` says so) or does not exist (-2).
pub fn ttl_json(pttl_ms: i64) -> Json {
    if pttl_ms >= 0 {
        json!(pttl_ms)
    } else {
        Json::Null
    }
}

/// Everything `status` shows.
#[derive(Debug)]
pub struct Status {
    pub name: String,
    pub kind: Found,
    /// `--kind` was given.
    pub forced: bool,
    pub redis_type: String,
    /// PTTL of `N`: -2 no key, -1 no expiry.
    pub ttl_ms: i64,
    /// Whether any key of the kind exists.
    pub exists: bool,
    /// `mode` of a read-write lock.
    pub mode: Option<String>,
    pub holders: Vec<Holder>,
    pub queue: Vec<Waiter>,
    pub queue_len: i64,
    pub token: Option<i64>,
    pub available: Option<i64>,
    pub permits: Vec<Permit>,
    pub permits_len: i64,
    pub latch_count: Option<i64>,
    pub channels: Vec<(String, Subscribers)>,
    /// Epoch ms when read, for relative deadlines.
    pub now_ms: i64,
    /// The client registry entry (docs/PROTOCOL.md §9.6) of each client id
    /// among the holders and waiters: `None` for a client that has none (a
    /// Java Redisson client, or one that ended).
    pub clients: HashMap<String, Option<Registered>>,
}

/// What a redisson-lock client registered about itself: its `field=value`
/// lines (`host`, `pid`, `name`, `version`, `started_ms`), in order.
#[derive(Debug, Clone)]
pub struct Registered(pub Vec<(String, String)>);

impl Registered {
    fn parse(text: &str) -> Registered {
        Registered(
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )
    }

    pub fn get(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())
    }
}

/// Read the registry entry of every client id among `status`'s holders
/// and waiters.
async fn read_clients(raw: &Raw<'_>, status: &mut Status) -> CliResult<()> {
    let ids: Vec<String> = status
        .holders
        .iter()
        .map(|h| &h.field)
        .chain(status.queue.iter().map(|w| &w.field))
        .map(|f| f.client_id.clone())
        .collect();
    for id in ids {
        if status.clients.contains_key(&id) {
            continue;
        }
        let entry = raw
            .key("GET", vec![layout::client_key(&id).into()])
            .await?
            .as_string()
            .map(|t| Registered::parse(&t));
        status.clients.insert(id, entry);
    }
    Ok(())
}

impl Status {
    /// Whether a lock kind is held (`None` for semaphores and latches).
    /// The head of a fair queue whose lock is free: normally for a moment
    /// (the head is being woken); for good when it is a Java waiter of
    /// Redisson 3.12–3.23 that hangs after its deadline passed while the
    /// lock was held (docs/PROTOCOL.md §11.2). One message on its channel
    /// wakes it: the command that sends it.
    pub fn free_with_head(&self) -> Option<(&Waiter, String)> {
        if self.kind != Found::Kind(StatusKind::Fair) || self.locked() != Some(false) {
            return None;
        }
        let head = self.queue.first()?;
        let publish = if head.subscribers.sharded.unwrap_or(0) > 0 {
            "SPUBLISH"
        } else {
            "PUBLISH"
        };
        Some((head, format!("redis-cli {publish} '{}' 0", head.channel)))
    }

    pub fn locked(&self) -> Option<bool> {
        match self.kind {
            Found::Kind(StatusKind::ReadWrite) => Some(self.mode.is_some()),
            Found::Kind(StatusKind::Rlock | StatusKind::Fair | StatusKind::Fenced) => {
                Some(self.redis_type == "hash")
            }
            Found::None => Some(false),
            _ => None,
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Whether a hash's fields look like an RLock's: owner fields with integer counts.
fn owner_fields(fields: &[(String, Value)]) -> bool {
    !fields.is_empty()
        && fields
            .iter()
            .all(|(f, v)| Field::parse(f).is_some() && v.as_i64().is_some())
}

/// Decide the kind of `name` from what exists (no `--kind`).
pub async fn detect(raw: &Raw<'_>, names: &Layout) -> CliResult<(Found, String)> {
    let redis_type = raw.key_type(&names.name).await?;
    let found = match redis_type.as_str() {
        "hash" => {
            let has_mode = raw
                .key("HEXISTS", vec![names.name.as_str().into(), "mode".into()])
                .await?
                .as_i64()
                == Some(1);
            if has_mode {
                Found::Kind(StatusKind::ReadWrite)
            } else if raw.exists(&names.fair_queue).await?
                || raw.exists(&names.fair_timeouts).await?
            {
                Found::Kind(StatusKind::Fair)
            } else if raw.exists(&names.fence_token).await? {
                Found::Kind(StatusKind::Fenced)
            } else {
                let len = raw.int("HLEN", &names.name).await?.unwrap_or(0);
                if len <= 16 && owner_fields(&raw.hgetall(&names.name).await?) {
                    Found::Kind(StatusKind::Rlock)
                } else {
                    Found::Unknown
                }
            }
        }
        "none" => {
            if raw.exists(&names.fair_queue).await? || raw.exists(&names.fair_timeouts).await? {
                Found::Kind(StatusKind::Fair)
            } else if raw.exists(&names.fence_token).await? {
                Found::Kind(StatusKind::Fenced)
            } else if raw.key_type(&names.permit_timeouts).await? == "zset" {
                Found::Kind(StatusKind::PermitSemaphore)
            } else {
                Found::None
            }
        }
        "string" => {
            if raw.key_type(&names.permit_timeouts).await? == "zset" {
                Found::Kind(StatusKind::PermitSemaphore)
            } else {
                let value = raw.key("GET", vec![names.name.as_str().into()]).await?;
                if value
                    .as_string()
                    .and_then(|s| s.parse::<i64>().ok())
                    .is_some()
                {
                    // Same layout; whoever listens tells them apart.
                    let subs = raw
                        .subscribers(&[
                            names.latch_channel.clone(),
                            names.semaphore_channel.clone(),
                        ])
                        .await;
                    if subs[0].total() > 0 && subs[1].total() == 0 {
                        Found::Kind(StatusKind::Latch)
                    } else {
                        Found::Kind(StatusKind::Semaphore)
                    }
                } else {
                    Found::Unknown
                }
            }
        }
        _ => Found::Unknown,
    };
    Ok((found, redis_type))
}

/// Read everything `status` shows about `name`.
pub async fn inspect(client: &Client, name: &str, kind: Option<StatusKind>) -> CliResult<Status> {
    let mut status = read(client, name, kind).await?;
    read_clients(&Raw::new(client), &mut status).await?;
    Ok(status)
}

async fn read(client: &Client, name: &str, kind: Option<StatusKind>) -> CliResult<Status> {
    let raw = Raw::new(client);
    let names = Layout::of(name);
    let (found, redis_type) = match kind {
        Some(k) => (Found::Kind(k), raw.key_type(name).await?),
        None => detect(&raw, &names).await?,
    };
    let mut status = Status {
        name: name.to_owned(),
        kind: found,
        forced: kind.is_some(),
        redis_type: redis_type.clone(),
        ttl_ms: raw.pttl(name).await?,
        exists: redis_type != "none",
        mode: None,
        holders: Vec::new(),
        queue: Vec::new(),
        queue_len: 0,
        token: None,
        available: None,
        permits: Vec::new(),
        permits_len: 0,
        latch_count: None,
        channels: Vec::new(),
        now_ms: now_ms(),
        clients: HashMap::new(),
    };
    let Found::Kind(kind) = found else {
        return Ok(status);
    };
    let mut channels: Vec<String> = Vec::new();
    match kind {
        StatusKind::Rlock | StatusKind::Fair | StatusKind::Fenced | StatusKind::ReadWrite => {
            if redis_type == "hash" {
                for (field, value) in raw.hgetall(name).await? {
                    if field == "mode" {
                        status.mode = Some(text(&value));
                        continue;
                    }
                    let Some(parsed) = Field::parse(&field) else {
                        continue;
                    };
                    let count = value.as_i64();
                    let mut timeouts_ms = Vec::new();
                    if kind == StatusKind::ReadWrite && !parsed.write {
                        for k in 1..=count.unwrap_or(0).clamp(0, SHOWN) {
                            timeouts_ms.push(raw.pttl(&names.rw_reader_timeout(&field, k)).await?);
                        }
                    }
                    status.holders.push(Holder {
                        field: parsed,
                        count,
                        timeouts_ms,
                    });
                }
                // Writer first, then by field, for a stable display.
                status.holders.sort_by(|a, b| {
                    b.field
                        .write
                        .cmp(&a.field.write)
                        .then(a.field.raw.cmp(&b.field.raw))
                });
            }
            if kind == StatusKind::ReadWrite {
                channels.push(names.rw_channel.clone());
            } else {
                channels.push(names.lock_channel.clone());
            }
        }
        _ => {}
    }
    match kind {
        StatusKind::Fair => {
            status.exists |=
                raw.exists(&names.fair_queue).await? || raw.exists(&names.fair_timeouts).await?;
            status.queue_len = raw.int("LLEN", &names.fair_queue).await?.unwrap_or(0);
            let queue = raw
                .key(
                    "LRANGE",
                    vec![
                        names.fair_queue.as_str().into(),
                        0.into(),
                        (SHOWN - 1).into(),
                    ],
                )
                .await?
                .into_array();
            let deadlines: HashMap<String, i64> = raw
                .zrange_scores(&names.fair_timeouts)
                .await?
                .into_iter()
                .filter_map(|(m, s)| Some((text(&m), s? as i64)))
                .collect();
            let waiter_channels: Vec<String> = queue
                .iter()
                .map(|f| format!("{}:{}", names.lock_channel, text(f)))
                .collect();
            let subs = raw.subscribers(&waiter_channels).await;
            for ((entry, subscribers), channel) in queue.iter().zip(subs).zip(&waiter_channels) {
                let field_text = text(entry);
                let field = Field::parse(&field_text).unwrap_or(Field {
                    raw: field_text.clone(),
                    client_id: field_text.clone(),
                    owner_id: None,
                    write: false,
                });
                status.queue.push(Waiter {
                    deadline_ms: deadlines.get(&field_text).copied(),
                    field,
                    channel: channel.clone(),
                    subscribers,
                });
            }
            channels.extend(waiter_channels);
        }
        StatusKind::Fenced => {
            status.exists |= raw.exists(&names.fence_token).await?;
            status.token = raw
                .key("GET", vec![names.fence_token.as_str().into()])
                .await?
                .as_i64();
        }
        StatusKind::Semaphore | StatusKind::PermitSemaphore => {
            status.available = raw.key("GET", vec![name.into()]).await?.as_i64();
            if kind == StatusKind::PermitSemaphore {
                status.exists |= raw.exists(&names.permit_timeouts).await?;
                status.permits_len = raw.int("ZCARD", &names.permit_timeouts).await?.unwrap_or(0);
                for (member, score) in raw.zrange_scores(&names.permit_timeouts).await? {
                    let id = match &member {
                        Value::Bytes(b) if b.len() == 16 => hex(b),
                        other => text(other),
                    };
                    let expires_ms = score
                        .map(|s| s as i64)
                        .filter(|s| *s != layout::PERMIT_NEVER_EXPIRES);
                    status.permits.push(Permit { id, expires_ms });
                }
            }
            channels.push(names.semaphore_channel.clone());
        }
        StatusKind::Latch => {
            status.latch_count = Some(
                raw.key("GET", vec![name.into()])
                    .await?
                    .as_i64()
                    .unwrap_or(0),
            );
            channels.push(names.latch_channel.clone());
        }
        StatusKind::Rlock | StatusKind::ReadWrite => {}
    }
    let subs = raw.subscribers(&channels).await;
    status.channels = channels.into_iter().zip(subs).collect();
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let f = Field::parse("3f1c2a9e-8d7b-4c1e-9a55-0e4b2f6d7c11:57").unwrap();
        assert_eq!(f.client_id, "3f1c2a9e-8d7b-4c1e-9a55-0e4b2f6d7c11");
        assert_eq!(f.owner_id, Some(57));
        assert!(!f.write);
        let w = Field::parse("abc:-3:write").unwrap();
        assert_eq!(
            (w.client_id.as_str(), w.owner_id, w.write),
            ("abc", Some(-3), true)
        );
        assert!(Field::parse("mode").is_none());
        assert!(Field::parse(":5").is_none());
    }
}
