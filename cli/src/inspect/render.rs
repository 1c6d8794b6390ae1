//! How `status` shows what was read: `--json`, or key-value lines.

use redisson_lock::layout;
use serde_json::{json, Value as Json};

use super::{ttl_json, Field, Found, Registered, Status, Subscribers};
use crate::args::{format_duration_ms, StatusKind};

impl Registered {
    fn json(&self) -> Json {
        let mut v = serde_json::Map::new();
        for (k, val) in &self.0 {
            let val = match val.parse::<i64>() {
                Ok(n) if k == "pid" || k == "started_ms" => json!(n),
                _ => json!(val),
            };
            v.insert(k.clone(), val);
        }
        Json::Object(v)
    }

    /// `host web-1, pid 4242, orders-svc, redisson-lock 0.1.0, up 5m 2s`.
    fn text(&self, now_ms: i64) -> String {
        let mut parts = Vec::new();
        if let Some(host) = self.get("host") {
            parts.push(format!("host {host}"));
        }
        if let Some(pid) = self.get("pid") {
            parts.push(format!("pid {pid}"));
        }
        parts.extend(self.get("name").map(str::to_owned));
        parts.extend(self.get("version").map(str::to_owned));
        if let Some(started) = self.get("started_ms").and_then(|s| s.parse::<i64>().ok()) {
            parts.push(format!(
                "up {}",
                format_duration_ms((now_ms - started).max(0))
            ));
        }
        parts.join(", ")
    }
}

impl Field {
    fn json(&self) -> Json {
        json!({
            "field": self.raw,
            "client_id": self.client_id,
            "owner_id": self.owner_id,
        })
    }

    /// [`json`](Self::json), with the client's registry entry (`null`: none).
    fn json_in(&self, status: &Status) -> Json {
        let mut v = self.json();
        v["client"] = status
            .clients
            .get(&self.client_id)
            .and_then(Option::as_ref)
            .map_or(Json::Null, Registered::json);
        v
    }

    /// [`text`](Self::text), with who the client is, as it registered.
    fn text_in(&self, status: &Status) -> String {
        let who = match status.clients.get(&self.client_id) {
            Some(Some(entry)) => format!("  ({})", entry.text(status.now_ms)),
            Some(None) => {
                "  (not registered: a Java Redisson client, or one that ended)".to_owned()
            }
            None => String::new(),
        };
        format!("{}{who}", self.text())
    }

    fn text(&self) -> String {
        // Redisson's `threadId`: a Java thread, a Rust blocking thread or
        // an explicit owner; from 2^48 up, a redisson-lock async owner.
        let owner = match self.owner_id {
            Some(id) if id >= layout::GENERATED_OWNER_BASE => format!("async owner {id}"),
            Some(id) => format!("thread {id}"),
            None => "owner ?".to_owned(),
        };
        format!("client {}  {owner}", self.client_id)
    }
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
}

impl Status {
    pub fn json(&self) -> Json {
        let holders: Vec<Json> = self
            .holders
            .iter()
            .map(|h| {
                let mut v = h.field.json_in(self);
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
                let mut v = w.field.json_in(self);
                v["position"] = json!(i + 1);
                v["deadline_ms"] = json!(w.deadline_ms);
                v["deadline_in_ms"] = json!(w.deadline_ms.map(|d| d - self.now_ms));
                v["channel"] = json!(w.channel);
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
            "free_with_head": self.free_with_head().map(|(w, wake)| json!({
                "field": w.field.raw,
                "channel": w.channel,
                "wake": wake,
            })),
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
                let mut s = format!("{role}{}  count {count}", h.field.text_in(self));
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
                        w.field.text_in(self),
                        w.subscribers.total()
                    ),
                );
            }
            if let Some((_, wake)) = self.free_with_head() {
                line(
                    "note",
                    "the lock is free but waiter 1 heads the queue: normal for a moment; if it \
                     persists, it may be a Java Redisson 3.12-3.23 waiter that hangs \
                     (docs/PROTOCOL.md §11.2). Wake it with:"
                        .to_owned(),
                );
                out_push(&mut line, wake);
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
