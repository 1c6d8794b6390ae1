//! Reading a lock's state from Redis: which kind it is (from the keys that
//! exist, docs/PROTOCOL.md §1.4–§7), its holders, queue, readers, token,
//! permits, and the subscribers of its channels. Read-only: nothing here
//! writes to Redis.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use redisson_lock::fred::clients::Client as Fred;
use redisson_lock::fred::interfaces::{ClientLike, ClusterInterface};
use redisson_lock::fred::types::{ClusterHash, CustomCommand, Value};
use redisson_lock::layout::{self, Layout};
use redisson_lock::Client;
use serde_json::{json, Value as Json};

use crate::args::{format_duration_ms, StatusKind};
use crate::exit::CliResult;

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
    fn candidates(self) -> &'static [&'static str] {
        match self {
            Found::Kind(StatusKind::Rlock) => &["rlock", "non-reentrant", "spin"],
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
                "RLock; a non-reentrant or spin lock has the same layout"
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

    fn json(&self) -> Json {
        json!({
            "field": self.raw,
            "client_id": self.client_id,
            "owner_id": self.owner_id,
        })
    }

    fn text(&self) -> String {
        let owner = match self.owner_id {
            Some(id) if id >= layout::GENERATED_OWNER_BASE => format!("{id} (redisson-lock async)"),
            Some(id) => format!("{id}"),
            None => "?".to_owned(),
        };
        format!("client {}  owner {owner}", self.client_id)
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
    fn json(self) -> Json {
        json!({ "numsub": self.classic, "shardnumsub": self.sharded })
    }

    fn text(self) -> String {
        let n = |v: Option<i64>| v.map_or("?".to_owned(), |v| v.to_string());
        format!(
            "{} subscribed, {} shard-subscribed",
            n(self.classic),
            n(self.sharded)
        )
    }

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
}

impl Status {
    /// Whether a lock kind is held (`None` for semaphores and latches).
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

    pub fn json(&self) -> Json {
        let holders: Vec<Json> = self
            .holders
            .iter()
            .map(|h| {
                let mut v = h.field.json();
                v["count"] = json!(h.count);
                if self.kind == Found::Kind(StatusKind::ReadWrite) {
                    v["mode"] = json!(if h.field.write { "write" } else { "read" });
                    if !h.field.write {
                        v["timeouts_ms"] = json!(h.timeouts_ms);
                    }
                }
                v
            })
            .collect();
        let queue: Vec<Json> = self
            .queue
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut v = w.field.json();
                v["position"] = json!(i + 1);
                v["deadline_ms"] = json!(w.deadline_ms);
                v["deadline_in_ms"] = json!(w.deadline_ms.map(|d| d - self.now_ms));
                v["subscribers"] = w.subscribers.json();
                v
            })
            .collect();
        let permits: Vec<Json> = self
            .permits
            .iter()
            .map(|p| {
                json!({
                    "id": p.id,
                    "expires_ms": p.expires_ms,
                    "expires_in_ms": p.expires_ms.map(|e| e - self.now_ms),
                })
            })
            .collect();
        let channels: Vec<Json> = self
            .channels
            .iter()
            .map(|(c, s)| {
                let mut v = s.json();
                v["channel"] = json!(c);
                v
            })
            .collect();
        json!({
            "name": self.name,
            "kind": self.kind.as_str(),
            "kind_forced": self.forced,
            "candidates": self.kind.candidates(),
            "exists": self.exists,
            "locked": self.locked(),
            "redis_type": self.redis_type,
            "ttl_ms": ttl_json(self.ttl_ms),
            "no_expiry": self.ttl_ms == -1,
            "mode": self.mode,
            "holders": holders,
            "queue": queue,
            "queue_length": self.queue_len,
            "token": self.token,
            "available_permits": self.available,
            "permits": permits,
            "permits_acquired": self.permits_len,
            "count": self.latch_count,
            "channels": channels,
            "now_ms": self.now_ms,
        })
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| {
            out.push_str(&format!("{k:<10}  {v}\n"));
        };
        line("name", self.name.clone());
        let forced = if self.forced { "; read as asked" } else { "" };
        line(
            "kind",
            format!("{} ({}{forced})", self.kind.as_str(), self.kind.describe()),
        );
        if self.kind == Found::Unknown {
            line("type", self.redis_type.clone());
        }
        let ttl = match self.ttl_ms {
            -2 => "no key".to_owned(),
            -1 => "no expiry".to_owned(),
            ms => format!("expires in {}", format_duration_ms(ms)),
        };
        match self.locked() {
            Some(true) => {
                let mode = self
                    .mode
                    .as_deref()
                    .map(|m| match m {
                        "read" => " for reading".to_owned(),
                        "write" => " for writing".to_owned(),
                        other => format!(" in mode {other:?}"),
                    })
                    .unwrap_or_default();
                line("state", format!("held{mode}, {ttl}"));
            }
            Some(false) => line("state", "free".to_owned()),
            None => {
                if self.redis_type != "none" {
                    line("ttl", ttl);
                }
            }
        }
        if !self.holders.is_empty() {
            let what = if self.kind == Found::Kind(StatusKind::ReadWrite) {
                "holders"
            } else {
                "holder"
            };
            line(what, format!("{}", self.holders.len()));
            for h in &self.holders {
                let role = if self.kind == Found::Kind(StatusKind::ReadWrite) {
                    if h.field.write {
                        "writer  "
                    } else {
                        "reader  "
                    }
                } else {
                    ""
                };
                let count = h.count.map_or("?".to_owned(), |c| c.to_string());
                let mut s = format!("{role}{}  count {count}", h.field.text());
                if !h.field.write && self.kind == Found::Kind(StatusKind::ReadWrite) {
                    let t: Vec<String> = h
                        .timeouts_ms
                        .iter()
                        .map(|ms| match *ms {
                            -2 => "gone".to_owned(),
                            -1 => "no expiry".to_owned(),
                            ms => format_duration_ms(ms),
                        })
                        .collect();
                    s.push_str(&format!("  timeouts [{}]", t.join(", ")));
                }
                out_push(&mut line, s);
            }
        }
        if self.kind == Found::Kind(StatusKind::Fair) {
            line("queue", format!("{} waiting", self.queue_len));
            for (i, w) in self.queue.iter().enumerate() {
                let deadline = match w.deadline_ms {
                    Some(d) if d > self.now_ms => {
                        format!("deadline in {}", format_duration_ms(d - self.now_ms))
                    }
                    Some(d) => format!(
                        "deadline passed {} ago (presumed dead)",
                        format_duration_ms(self.now_ms - d)
                    ),
                    None => "no deadline".to_owned(),
                };
                out_push(
                    &mut line,
                    format!(
                        "{}. {}  {deadline}  {} listening",
                        i + 1,
                        w.field.text(),
                        w.subscribers.total()
                    ),
                );
            }
        }
        if let Some(token) = self.token {
            line("token", format!("{token} (last fencing token handed out)"));
        } else if self.kind == Found::Kind(StatusKind::Fenced) {
            line("token", "none yet".to_owned());
        }
        if let Some(n) = self.available {
            line("permits", format!("{n} available"));
        }
        if self.kind == Found::Kind(StatusKind::PermitSemaphore) {
            line("acquired", format!("{}", self.permits_len));
            for p in &self.permits {
                let exp = match p.expires_ms {
                    None => "no lease".to_owned(),
                    Some(e) if e > self.now_ms => {
                        format!("expires in {}", format_duration_ms(e - self.now_ms))
                    }
                    Some(e) => format!(
                        "expired {} ago (reclaimed on next use)",
                        format_duration_ms(self.now_ms - e)
                    ),
                };
                out_push(&mut line, format!("{}  {exp}", p.id));
            }
        }
        if let Some(c) = self.latch_count {
            line("count", format!("{c}"));
        }
        for (c, s) in &self.channels {
            line("channel", format!("{c}  {}", s.text()));
        }
        out
    }
}

/// A continuation line under the key-value layout.
fn out_push(line: &mut impl FnMut(&str, String), s: String) {
    line("", s);
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Raw commands on the library's command connection.
pub struct Raw<'a> {
    fred: &'a Fred,
    clustered: bool,
}

impl<'a> Raw<'a> {
    pub fn new(client: &'a Client) -> Raw<'a> {
        Raw {
            fred: client.redis(),
            clustered: client.config().redis.server.is_clustered(),
        }
    }

    /// A command whose first argument is its key (routed by it on a cluster).
    pub async fn key(&self, cmd: &'static str, args: Vec<Value>) -> CliResult<Value> {
        Ok(self
            .fred
            .custom(
                CustomCommand::new_static(cmd, ClusterHash::FirstKey, false),
                args,
            )
            .await?)
    }

    pub async fn key_type(&self, key: &str) -> CliResult<String> {
        let v = self.key("TYPE", vec![key.into()]).await?;
        Ok(v.as_string().unwrap_or_else(|| "none".to_owned()))
    }

    pub async fn exists(&self, key: &str) -> CliResult<bool> {
        let v = self.key("EXISTS", vec![key.into()]).await?;
        Ok(v.as_i64() == Some(1))
    }

    pub async fn pttl(&self, key: &str) -> CliResult<i64> {
        let v = self.key("PTTL", vec![key.into()]).await?;
        Ok(v.as_i64().unwrap_or(-2))
    }

    async fn int(&self, cmd: &'static str, key: &str) -> CliResult<Option<i64>> {
        Ok(self.key(cmd, vec![key.into()]).await?.as_i64())
    }

    async fn hgetall(&self, key: &str) -> CliResult<Vec<(String, Value)>> {
        let v = self.key("HGETALL", vec![key.into()]).await?;
        Ok(pairs(v).into_iter().map(|(k, v)| (text(&k), v)).collect())
    }

    async fn zrange_scores(&self, key: &str) -> CliResult<Vec<(Value, Option<f64>)>> {
        let v = self
            .key(
                "ZRANGE",
                vec![
                    key.into(),
                    0.into(),
                    (SHOWN - 1).into(),
                    "WITHSCORES".into(),
                ],
            )
            .await?;
        Ok(pairs(v).into_iter().map(|(m, s)| (m, s.as_f64())).collect())
    }

    /// Subscribers of each channel, by both pub/sub flavours. A flavour the
    /// server does not support (SHARDNUMSUB before Redis 7) reads `None`.
    pub async fn subscribers(&self, channels: &[String]) -> Vec<Subscribers> {
        let mut out = vec![Subscribers::default(); channels.len()];
        if channels.is_empty() {
            return out;
        }
        // NUMSUB: node-local on a cluster, so summed over the masters.
        let numsub = |reply: Value, out: &mut [Subscribers]| {
            let counts: HashMap<String, i64> = pairs(reply)
                .into_iter()
                .map(|(c, n)| (text(&c), n.as_i64().unwrap_or(0)))
                .collect();
            for (slot, ch) in out.iter_mut().zip(channels) {
                let n = counts.get(ch).copied().unwrap_or(0);
                slot.classic = Some(slot.classic.unwrap_or(0) + n);
            }
        };
        let mut args: Vec<Value> = vec!["NUMSUB".into()];
        args.extend(channels.iter().map(|c| Value::from(c.as_str())));
        let numsub_cmd = || CustomCommand::new_static("PUBSUB", ClusterHash::Random, false);
        if self.clustered {
            let nodes = self
                .fred
                .cached_cluster_state()
                .map(|s| s.unique_primary_nodes())
                .unwrap_or_default();
            for node in nodes {
                let reply = self
                    .fred
                    .with_cluster_node(node)
                    .custom::<Value, Value>(numsub_cmd(), args.clone())
                    .await;
                if let Ok(reply) = reply {
                    numsub(reply, &mut out);
                }
            }
        } else if let Ok(reply) = self.fred.custom::<Value, Value>(numsub_cmd(), args).await {
            numsub(reply, &mut out);
        }
        // SHARDNUMSUB: on the node of each channel's slot.
        for (slot, ch) in out.iter_mut().zip(channels) {
            let reply = self
                .fred
                .custom::<Value, Value>(
                    // fred honours only a custom slot on custom commands
                    // (other hashers fall back to the first argument).
                    CustomCommand::new_static("PUBSUB", ClusterHash::from(ch.as_str()), false),
                    vec!["SHARDNUMSUB".into(), ch.as_str().into()],
                )
                .await;
            if let Ok(reply) = reply {
                slot.sharded = pairs(reply).first().and_then(|(_, n)| n.as_i64());
            }
        }
        out
    }
}

/// `[a, b, c, d]` → `[(a, b), (c, d)]` (RESP2 maps and WITHSCORES replies).
fn pairs(v: Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(map) => map
            .inner()
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
        other => {
            let mut items = other.into_array().into_iter();
            let mut out = Vec::new();
            while let (Some(a), Some(b)) = (items.next(), items.next()) {
                out.push((a, b));
            }
            out
        }
    }
}

/// A reply as text; bytes that are not UTF-8 as hex.
fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => hex(b),
        },
        other => other.as_string().unwrap_or_default(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
            for (entry, subscribers) in queue.iter().zip(subs) {
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
