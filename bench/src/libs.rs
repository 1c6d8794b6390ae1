//! The locks under test behind one enum: ours, the protocol ceiling, and peers.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::ceiling::{Ceiling, CeilingGuard};
use crate::util::now_ns;

/// Commands in a commandstats diff, without the bench's own admin commands
/// and connection set-up.
pub fn total_commands(diff: &HashMap<String, u64>) -> u64 {
    const IGNORED: [&str; 12] = [
        "info", "config", "flushall", "flushdb", "client", "hello", "select", "command", "pubsub",
        "dbsize", "script", "hgetall",
    ];
    diff.iter()
        .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
        .map(|(_, v)| v)
        .sum()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// `redisson_lock::Client`.
    Ours,
    /// The hand-written minimal client on the same wire protocol.
    Ceiling,
    /// `rslock` 0.10 (Redlock, polls with a random 0–200 ms retry delay).
    Rslock,
    /// `async-redis-lock` 0.4 (polls every 100 ms).
    Arl,
    /// The floor (`floor.rs`): blocking sockets, hand-written RESP, free
    /// locks only; scenarios 1 and 2. Not a `Lib`.
    Floor,
    /// The floor for many tasks on one connection, in lockstep (scenario 2).
    FloorP,
    /// The real Java Redisson client in a JVM of its own (`java.rs`); not a
    /// `Lib`: every scenario that runs it drives the JVM itself. Redisson's
    /// default `Config`.
    Java,
    /// The same, tuned as a performance-minded Java team would: threads
    /// sized to the cores, the command pool opened before measuring
    /// (`RedissonBench.tuned`). Scenarios 1, 2, 3, 3b, 4 and sem.
    JavaTuned,
}

/// The async libraries, in every contended scenario.
pub const ALL: [Kind; 6] = [
    Kind::Ours,
    Kind::Ceiling,
    Kind::Rslock,
    Kind::Arl,
    Kind::Java,
    Kind::JavaTuned,
];
/// Scenario 1: the libraries and the floor.
pub const WITH_FLOOR: [Kind; 7] = [
    Kind::Ours,
    Kind::Ceiling,
    Kind::Floor,
    Kind::Rslock,
    Kind::Arl,
    Kind::Java,
    Kind::JavaTuned,
];
/// Scenario 2: the libraries and both floors.
pub const WITH_FLOORS: [Kind; 8] = [
    Kind::Ours,
    Kind::Ceiling,
    Kind::Floor,
    Kind::FloorP,
    Kind::Rslock,
    Kind::Arl,
    Kind::Java,
    Kind::JavaTuned,
];
/// The semaphore scenario.
pub const SEMAPHORES: [Kind; 4] = [Kind::Ours, Kind::Ceiling, Kind::Java, Kind::JavaTuned];
/// Scenario 5a (memory; Java with its defaults, and with a subscription
/// pool for every name).
pub const WAITERS: [Kind; 3] = [Kind::Ours, Kind::Ceiling, Kind::Java];

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ours => "redisson-lock",
            Kind::Ceiling => "ceiling",
            Kind::Rslock => "rslock",
            Kind::Arl => "async-redis-lock",
            Kind::Floor => "floor",
            Kind::FloorP => "floor, pipelined",
            Kind::Java => "Redisson (Java)",
            Kind::JavaTuned => "Redisson (Java, tuned)",
        }
    }

    /// Java Redisson, with its defaults or tuned (a JVM, not a `Lib`).
    pub fn is_java(self) -> bool {
        matches!(self, Kind::Java | Kind::JavaTuned)
    }

    pub fn key(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::Ceiling => "ceiling",
            Kind::Rslock => "rslock",
            Kind::Arl => "arl",
            Kind::Floor => "floor",
            Kind::FloorP => "floorp",
            Kind::Java => "java",
            Kind::JavaTuned => "javatuned",
        }
    }

    /// Split a commandstats diff into (client round trips, commands run
    /// inside scripts), from what each library's scripts are known to call.
    pub fn split_commands(self, diff: &HashMap<String, u64>) -> (u64, u64) {
        let get = |k: &str| diff.get(k).copied().unwrap_or(0);
        let ignored = [
            "info", "config", "flushall", "flushdb", "client", "hello", "select", "command",
            "pubsub", "dbsize", "script",
        ];
        let total: u64 = diff
            .iter()
            .filter(|(k, _)| !ignored.contains(&k.as_str()))
            .map(|(_, v)| v)
            .sum();
        let script = match self {
            // lock.lua: exists, hexists, hincrby, pexpire, pttl; unlock.lua:
            // get, hexists, hincrby, pexpire, set, del, publish. Clients send
            // DEL only for latches; scripts DEL exactly once per PUBLISH.
            // Java Redisson runs the same scripts (its own text, same calls).
            Kind::Ours
            | Kind::Ceiling
            | Kind::Floor
            | Kind::FloorP
            | Kind::Java
            | Kind::JavaTuned => {
                [
                    "exists", "hexists", "hincrby", "pexpire", "pttl", "get", "set", "publish",
                ]
                .iter()
                .map(|k| get(k))
                .sum::<u64>()
                    + get("publish").min(get("del"))
            }
            // Client: SET NX PX, EVALSHA/EVAL unlock; script: GET, DEL.
            Kind::Rslock => get("get") + get("del"),
            // Everything is a script: EXISTS+SET, GET+PEXPIRE, GET+DEL.
            Kind::Arl => get("exists") + get("set") + get("get") + get("pexpire") + get("del"),
        };
        (total.saturating_sub(script), script)
    }
}

/// Variants stay unboxed so no library pays an extra allocation per call.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Lib {
    Ours(redisson_lock::Client),
    Ceiling(Ceiling),
    Rslock(rslock::LockManager),
    Arl(async_redis_lock::Locker),
}

#[allow(clippy::large_enum_variant)]
pub enum Held {
    Ours(redisson_lock::LockGuard<redisson_lock::Reentrant>),
    Ceiling(CeilingGuard),
    Rslock(rslock::LockGuard),
    Arl(async_redis_lock::Lock),
}

/// rslock has no watchdog: a lease long enough for every scenario.
const RSLOCK_TTL: Duration = Duration::from_secs(30);

impl Lib {
    pub async fn connect(kind: Kind, url: &str) -> Result<Lib> {
        Ok(match kind {
            Kind::Ours => Lib::Ours(redisson_lock::Client::connect(url).await?),
            Kind::Ceiling => Lib::Ceiling(Ceiling::connect(url).await?),
            Kind::Rslock => {
                let manager = rslock::LockManager::new(vec![url.to_owned()]);
                // Open its connection now rather than in the first measured call.
                let guard = manager.acquire("bench-warmup-rslock", RSLOCK_TTL).await?;
                guard.release().await;
                Lib::Rslock(manager)
            }
            Kind::Arl => Lib::Arl(async_redis_lock::Locker::from_redis_url(url).await?),
            Kind::Floor | Kind::FloorP => anyhow::bail!("the floor is not an async library"),
            Kind::Java | Kind::JavaTuned => {
                anyhow::bail!("Java Redisson runs in a JVM of its own (java.rs)")
            }
        })
    }

    /// Spawn a task that locks `name`, waiting as long as it takes, then
    /// unlocks; answers the instant it acquired (`now_ns`). Each library's task holds only that library's futures (not
    /// [`lock`](Self::lock)'s, which is as large as its largest variant), so
    /// the memory a waiter costs is the library's own (scenario 5a).
    pub fn spawn_lock_unlock(&self, name: String) -> tokio::task::JoinHandle<Result<u64>> {
        match self.clone() {
            Lib::Ours(client) => tokio::spawn(async move {
                let guard = client.lock(&name)?.lock().await?;
                let acquired = now_ns();
                guard.unlock().await?;
                Ok(acquired)
            }),
            Lib::Ceiling(client) => tokio::spawn(async move {
                let guard = client.lock(&name).await?;
                let acquired = now_ns();
                guard.unlock().await?;
                Ok(acquired)
            }),
            other => tokio::spawn(async move {
                let guard = other.lock(&name).await?;
                let acquired = now_ns();
                guard.unlock().await?;
                Ok(acquired)
            }),
        }
    }

    /// Bytes of the future one waiting `lock` call keeps alive (the async
    /// state machine, before any boxing it does inside).
    pub fn lock_future_bytes(&self) -> usize {
        match self {
            Lib::Ours(client) => match client.lock("size-probe") {
                Ok(lock) => std::mem::size_of_val(&lock.lock()),
                Err(_) => 0,
            },
            Lib::Ceiling(client) => std::mem::size_of_val(&client.lock("size-probe")),
            Lib::Rslock(manager) => {
                std::mem::size_of_val(&manager.acquire("size-probe", RSLOCK_TTL))
            }
            Lib::Arl(locker) => std::mem::size_of_val(&locker.acquire("size-probe")),
        }
    }

    /// The library's natural "wait until acquired" call.
    pub async fn lock(&self, name: &str) -> Result<Held> {
        Ok(match self {
            Lib::Ours(client) => Held::Ours(client.lock(name)?.lock().await?),
            Lib::Ceiling(client) => Held::Ceiling(client.lock(name).await?),
            Lib::Rslock(manager) => Held::Rslock(manager.acquire(name, RSLOCK_TTL).await?),
            Lib::Arl(locker) => {
                // Defaults (100 ms retry, 3 s TTL auto-extended) but wait forever
                // like the others instead of the default 1 s acquire timeout.
                let opts = async_redis_lock::Options::new().timeout(None);
                Held::Arl(locker.acquire_with_options(&opts, name).await?)
            }
        })
    }
}

impl Held {
    pub async fn unlock(self) -> Result<()> {
        match self {
            Held::Ours(guard) => guard.unlock().await?,
            Held::Ceiling(guard) => guard.unlock().await?,
            Held::Rslock(guard) => guard.release().await,
            Held::Arl(lock) => lock.release().await?,
        }
        Ok(())
    }
}
