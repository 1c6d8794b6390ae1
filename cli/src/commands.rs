//! `status`, `watch`, `list` and `force-unlock`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use futures::StreamExt;
use redisson_lock::Client;
use serde_json::{json, Value as Json};

use crate::args::{
    format_duration_ms, ForceUnlockArgs, ListArgs, LockKind, StatusArgs, StatusKind, WatchArgs,
};
use crate::exit::{self, CliError, CliResult};
use crate::inspect::{self, Found, Raw};
use redisson_lock::layout::Layout;

fn print(text: &str) -> CliResult<()> {
    write_stdout(text.as_bytes())
}

/// Write to standard output and flush.
pub fn write_stdout(bytes: &[u8]) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| CliError::Other(exit::SOFTWARE, format!("cannot write output: {e}")))
}

/// The name Redis sees for `name`: through the client's name mapper
/// (`--prefix`), as the library maps every name it is given.
fn mapped(client: &Client, name: &str) -> String {
    match &client.config().name_mapper {
        Some(mapper) => mapper.map(name),
        None => name.to_owned(),
    }
}

/// A name Redis shows, as the user names it (the mapper undone).
fn unmapped(client: &Client, name: &str) -> String {
    match &client.config().name_mapper {
        Some(mapper) => mapper.unmap(name),
        None => name.to_owned(),
    }
}

/// `inspect`, of the name as Redis sees it, shown by the name as given.
async fn inspect_named(
    client: &Client,
    name: &str,
    kind: Option<StatusKind>,
) -> CliResult<inspect::Status> {
    let mut status = inspect::inspect(client, &mapped(client, name), kind).await?;
    status.name = name.to_owned();
    Ok(status)
}

/// `status NAME`: 0 if anything exists under the name, 1 if nothing does.
pub async fn status(client: &Client, args: &StatusArgs, as_json: bool) -> CliResult<u8> {
    let status = inspect_named(client, &args.name, args.kind).await?;
    if as_json {
        print(&format!("{}\n", status.json()))?;
    } else {
        print(&status.text())?;
    }
    Ok(if status.exists {
        exit::OK
    } else {
        exit::NOT_FOUND
    })
}

/// `watch NAME`: redraw until Ctrl-C (or `--count` frames); 0.
pub async fn watch(client: &Client, args: &WatchArgs, as_json: bool) -> CliResult<u8> {
    let tty = std::io::stdout().is_terminal() && !as_json;
    let mut frames = 0u64;
    let mut ticker = tokio::time::interval(args.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Registered now, before the first frame, so Ctrl-C never kills us mid-line.
    let mut ctrl_c = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| CliError::Other(exit::SOFTWARE, format!("cannot handle Ctrl-C: {e}")))?;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = ctrl_c.recv() => break,
        }
        let frame = match inspect_named(client, &args.status.name, args.status.kind).await {
            Ok(status) if as_json => format!("{}\n", status.json()),
            Ok(status) => status.text(),
            // A live view keeps going through a Redis outage.
            Err(e) if as_json => {
                format!(
                    "{}\n",
                    json!({ "name": args.status.name, "error": e.to_string() })
                )
            }
            Err(e) => format!("error: {e}\n"),
        };
        let frame = if tty {
            // Home, clear the screen, then the frame with a header.
            format!(
                "\x1b[H\x1b[2J{} every {}  (Ctrl-C to quit)\n\n{frame}",
                "redisson-lock watch",
                format_duration_ms(i64::try_from(args.interval.as_millis()).unwrap_or(i64::MAX))
            )
        } else if as_json {
            frame
        } else {
            format!("{frame}\n")
        };
        print(&frame)?;
        frames += 1;
        if args.frames.is_some_and(|n| frames >= n) {
            break;
        }
    }
    Ok(exit::OK)
}

/// A name a scanned key may belong to; `only_if_key`: count it only if
/// a key of that very name exists (the second reading of an ambiguous
/// derived name).
type Base = (String, bool);

/// `tag(P, N)` read backwards: the names `key` can be derived from.
fn untag(rest: &str) -> Vec<Base> {
    match rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        // `P:{N}` comes from N (no brace in N), or from `{N}` itself.
        Some(inner) if !inner.contains('{') && !inner.contains('}') => {
            vec![(inner.to_owned(), false), (rest.to_owned(), true)]
        }
        _ => vec![(rest.to_owned(), false)],
    }
}

/// The lock names a scanned key may belong to, or none for keys that are
/// parts of a lock shown under its own name (unlock latches, reader timeouts)
/// and for client registry entries (docs/PROTOCOL.md §9.6).
fn bases(key: &str) -> Vec<Base> {
    for prefix in [
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
    ] {
        if let Some(rest) = key.strip_prefix(prefix) {
            return untag(rest);
        }
    }
    if key.starts_with("redisson_unlock_latch:")
        || key.contains(":rwlock_timeout:")
        || key.starts_with("redisson_lock_client:")
    {
        return Vec::new();
    }
    let mut out = vec![(key.to_owned(), false)];
    // `sfx(N, "timeout")`: a permit-expirable semaphore's sorted set.
    if let Some(base) = key.strip_suffix(":timeout") {
        match base.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
            Some(inner) if !inner.contains('{') && !inner.contains('}') => {
                out.push((inner.to_owned(), false))
            }
            _ if base.contains('{') => out.push((base.to_owned(), false)),
            _ => {}
        }
    }
    out
}

/// `list [PATTERN]`: SCAN, derive lock names, classify each.
pub async fn list(client: &Client, args: &ListArgs, as_json: bool) -> CliResult<u8> {
    let fred = client.redis();
    let clustered = client.config().redis.server.is_clustered();
    let pattern = mapped(client, &args.pattern);
    let mut keys = if clustered {
        fred.scan_cluster_buffered(pattern.as_str(), Some(1000), None)
            .boxed()
    } else {
        fred.scan_buffered(pattern.as_str(), Some(1000), None)
            .boxed()
    };
    let mut candidates: BTreeMap<String, bool> = BTreeMap::new();
    while let Some(key) = keys.next().await {
        let key = key?;
        let Some(key) = key.as_str() else { continue };
        for (base, only_if_key) in bases(key) {
            let entry = candidates.entry(base).or_insert(only_if_key);
            *entry &= only_if_key;
        }
    }
    drop(keys);

    let raw = Raw::new(client);
    let mut rows: Vec<Json> = Vec::new();
    for (name, only_if_key) in candidates {
        let names = Layout::of(&name);
        let t = raw.key_type(&name).await?;
        if only_if_key && t == "none" {
            continue;
        }
        let found = match t.as_str() {
            "hash" | "none" => inspect::detect(&raw, &names).await?.0,
            "string" | "zset" => {
                if raw.key_type(&names.permit_timeouts).await? == "zset" {
                    Found::Kind(StatusKind::PermitSemaphore)
                } else if t == "string" && args.counters {
                    inspect::detect(&raw, &names).await?.0
                } else {
                    Found::None
                }
            }
            _ => Found::None,
        };
        let Found::Kind(kind) = found else { continue };
        let ttl_ms = raw.pttl(&name).await?;
        let hlen = if t == "hash" {
            raw.key("HLEN", vec![name.as_str().into()])
                .await?
                .as_i64()
                .unwrap_or(0)
        } else {
            0
        };
        let holders = match kind {
            StatusKind::ReadWrite => hlen.saturating_sub(1),
            StatusKind::Rlock | StatusKind::Fair | StatusKind::Fenced => hlen,
            _ => 0,
        };
        // Only a fair lock's waiters are in Redis (its queue); any other
        // kind's are only subscribers of its channel, among holders
        // watching it, one per client: not counted (`null`, shown `-`).
        let waiting = if kind == StatusKind::Fair {
            Some(
                raw.key("LLEN", vec![names.fair_queue.as_str().into()])
                    .await?
                    .as_i64()
                    .unwrap_or(0),
            )
        } else {
            None
        };
        rows.push(json!({
            "name": unmapped(client, &name),
            "kind": kind.as_str(),
            "candidates": found.candidates(),
            "redis_type": t,
            "ttl_ms": inspect::ttl_json(ttl_ms),
            "no_expiry": ttl_ms == -1,
            "holders": holders,
            "waiting": waiting,
        }));
    }
    if as_json {
        print(&format!("{}\n", Json::Array(rows)))?;
        return Ok(exit::OK);
    }
    let mut out = format!(
        "{:<17} {:<10} {:>7} {:>7}  NAME\n",
        "KIND", "TTL", "HOLDERS", "WAITING"
    );
    for row in &rows {
        let ttl = match row["ttl_ms"].as_i64() {
            Some(ms) => format_duration_ms(ms),
            None if row["no_expiry"] == true => "none".to_owned(),
            None => "-".to_owned(),
        };
        out.push_str(&format!(
            "{:<17} {:<10} {:>7} {:>7}  {}\n",
            row["kind"].as_str().unwrap_or("?"),
            ttl,
            row["holders"].as_i64().unwrap_or(0),
            row["waiting"]
                .as_i64()
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            row["name"].as_str().unwrap_or("?"),
        ));
    }
    if rows.iter().any(|r| r["waiting"].is_null()) {
        out.push_str(
            "WAITING: only a fair lock's queue is in Redis; other kinds' waiters are only \
             subscribers of the lock's channel (`status NAME` shows them)\n",
        );
    }
    if rows.iter().any(|r| r["kind"] == StatusKind::Rlock.as_str()) {
        out.push_str(
            "rlock: also a non-reentrant or spin lock, or a held fair lock with nobody queued \
             (same layout; `status NAME --kind K` reads it as K)\n",
        );
    }
    print(&out)?;
    Ok(exit::OK)
}

/// `force-unlock NAME`: 0 if a hold was removed, 1 if none was there.
pub async fn force_unlock(client: &Client, args: &ForceUnlockArgs, as_json: bool) -> CliResult<u8> {
    let raw = Raw::new(client);
    let key = mapped(client, &args.name);
    let names = Layout::of(&key);
    let kind = match args.kind {
        Some(kind) => Some(kind),
        None => match inspect::detect(&raw, &names).await?.0 {
            Found::None => None,
            Found::Kind(StatusKind::Rlock) => Some(LockKind::Rlock),
            Found::Kind(StatusKind::Fair) => Some(LockKind::Fair),
            Found::Kind(StatusKind::Fenced) => Some(LockKind::Fenced),
            Found::Kind(StatusKind::ReadWrite) => {
                let mode = raw
                    .key("HGET", vec![key.as_str().into(), "mode".into()])
                    .await?
                    .as_string();
                Some(if mode.as_deref() == Some("write") {
                    LockKind::Write
                } else {
                    LockKind::Read
                })
            }
            other => {
                return Err(CliError::Other(
                    exit::USAGE,
                    format!(
                        "{:?} is a {}, not a lock: force-unlock only removes lock holds",
                        args.name,
                        other.as_str()
                    ),
                ))
            }
        },
    };
    let unlocked = match kind {
        None => false,
        Some(kind) => {
            let name = args.name.as_str();
            match kind {
                LockKind::Rlock => client.lock(name)?.force_unlock().await?,
                LockKind::NonReentrant => client.non_reentrant_lock(name)?.force_unlock().await?,
                LockKind::Fair => client.fair_lock(name)?.force_unlock().await?,
                LockKind::NonReentrantFair => {
                    client.non_reentrant_fair_lock(name)?.force_unlock().await?
                }
                LockKind::Read => client.read_write_lock(name)?.read().force_unlock().await?,
                LockKind::Write => client.read_write_lock(name)?.write().force_unlock().await?,
                LockKind::Spin => client.spin_lock(name)?.force_unlock().await?,
                LockKind::Fenced => client.fenced_lock(name)?.force_unlock().await?,
            }
        }
    };
    let kind_text = kind.map_or("none", LockKind::as_str);
    if as_json {
        print(&format!(
            "{}\n",
            json!({ "name": args.name, "kind": kind_text, "unlocked": unlocked })
        ))?;
    } else if unlocked {
        print(&format!("force-unlocked {:?} ({kind_text})\n", args.name))?;
    } else {
        print(&format!("{:?} was not held ({kind_text})\n", args.name))?;
    }
    Ok(if unlocked { exit::OK } else { exit::NOT_FOUND })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_lead_to_their_lock() {
        let b = |key: &str| -> Vec<(String, bool)> { bases(key) };
        let v = |items: &[(&str, bool)]| -> Vec<(String, bool)> {
            items.iter().map(|(n, o)| (n.to_string(), *o)).collect()
        };
        assert_eq!(b("orders"), v(&[("orders", false)]));
        assert_eq!(
            b("redisson_lock_queue:{orders}"),
            v(&[("orders", false), ("{orders}", true)])
        );
        assert_eq!(
            b("redisson_lock_token:{shop}:orders"),
            v(&[("{shop}:orders", false)])
        );
        assert_eq!(
            b("{sem}:timeout"),
            v(&[("{sem}:timeout", false), ("sem", false)])
        );
        assert_eq!(
            b("{shop}:sem:timeout"),
            v(&[("{shop}:sem:timeout", false), ("{shop}:sem", false)])
        );
        assert!(bases("redisson_unlock_latch:{orders}:0123").is_empty());
        assert!(bases("{orders}:u:1:rwlock_timeout:1").is_empty());
    }
}
