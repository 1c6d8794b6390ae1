//! Test harness: the test kit (`redisson-lock-testkit`: private servers and
//! topologies, the fault proxy, child processes, the Java peer) under the
//! names the tests use, and what is about this crate's own clients and
//! locks: [`Fixture`] is the usual start of a test (a server, a client, a
//! raw client and a unique lock name); [`fault`] adds the child jobs that
//! hold locks; [`make`] one constructor per lock kind.
#![allow(dead_code, unused_imports)]

pub mod fault;
pub mod make;
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
pub mod tls;
pub mod topology;

pub use redisson_lock_testkit::java;
pub use redisson_lock_testkit::{
    command_calls, describe_keys, eventually, free_port, numsub, supports_sharded_pubsub, unique,
    wait_numsub, Server,
};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fred::prelude::*;
use redisson_lock::{Client, Config, Kind, Lock, LockGuard};
use tokio::task::JoinHandle;

/// The usual start of a test: a server ([`Server::start`]), a client of it,
/// a raw fred client to look at and poke Redis state, and a unique lock name.
/// Fields drop in order, so the server goes last, as with the locals it
/// replaces.
pub struct Fixture {
    pub client: Client,
    pub raw: fred::clients::Client,
    pub name: String,
    pub server: Server,
}

impl Fixture {
    /// A server, a client with the default settings, a raw client, and a
    /// name `unique(prefix)`.
    pub async fn new(prefix: &str) -> Fixture {
        Fixture::with(prefix, |c| c).await
    }

    /// The same, with the client's settings changed by `config`.
    pub async fn with(prefix: &str, config: impl FnOnce(Config) -> Config) -> Fixture {
        let server = Server::start();
        Fixture {
            client: server.client_with(config).await,
            raw: server.raw().await,
            name: unique(prefix),
            server,
        }
    }

    /// A server and clients whose lock watchdog timeout is `watchdog`.
    pub async fn with_watchdog(prefix: &str, watchdog: Duration) -> Fixture {
        Fixture::with(prefix, |c| c.lock_watchdog_timeout(watchdog)).await
    }

    /// Another client of the same server (another client id).
    pub async fn client(&self) -> Client {
        self.server.client().await
    }

    /// Another client of the same server, with changed settings.
    pub async fn client_with(&self, config: impl FnOnce(Config) -> Config) -> Client {
        self.server.client_with(config).await
    }

    /// Another raw client (its own connection, e.g. for a task of its own).
    pub async fn raw(&self) -> fred::clients::Client {
        self.server.raw().await
    }

    /// Whether `key` exists.
    pub async fn exists(&self, key: &str) -> bool {
        self.raw.exists::<i64, _>(key).await.unwrap() == 1
    }

    /// `PTTL key` in ms (-2: no key, -1: no expiry).
    pub async fn pttl(&self, key: &str) -> i64 {
        self.raw.pttl(key).await.unwrap()
    }

    /// `HGETALL key`.
    pub async fn hgetall(&self, key: &str) -> HashMap<String, String> {
        self.raw.hgetall(key).await.unwrap()
    }

    /// `KEYS pattern`.
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        self.raw
            .custom(fred::cmd!("KEYS"), vec![pattern])
            .await
            .unwrap()
    }

    /// Waits until no key matches `pattern` (`what`: e.g. latches deleted).
    pub async fn until_no_keys(&self, what: &str, pattern: &str) {
        eventually(what, || async { self.keys(pattern).await.is_empty() }).await;
    }

    /// A Java-like listener: a connection of its own subscribed to `channel`.
    pub async fn listen(&self, channel: &str) -> Listener {
        let client = self.raw.clone_new();
        client.init().await.unwrap();
        let messages = client.message_rx();
        client.subscribe(channel).await.unwrap();
        // fred returns from SUBSCRIBE once it is written; the PING's reply
        // comes after the server ran it.
        let _: Value = client.ping(None).await.unwrap();
        Listener { client, messages }
    }

    /// `PUBSUB CHANNELS pattern`: the channels anyone subscribes to, but
    /// the one each client's tracking listener keeps for its whole life
    /// (`__redis__:invalidate`, docs/PROTOCOL.md §2.10).
    pub async fn channels(&self, pattern: &str) -> Vec<String> {
        let channels: Vec<String> = self
            .raw
            .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", pattern])
            .await
            .unwrap();
        channels
            .into_iter()
            .filter(|c| c != "__redis__:invalidate")
            .collect()
    }
}

/// A subscribed connection and the messages it received ([`Fixture::listen`]).
pub struct Listener {
    pub client: fred::clients::Client,
    pub messages: tokio::sync::broadcast::Receiver<fred::types::Message>,
}

impl Listener {
    /// The next message, 5 s at most.
    pub async fn next(&mut self) -> fred::types::Message {
        tokio::time::timeout(Duration::from_secs(5), self.messages.recv())
            .await
            .expect("a message within 5 s")
            .unwrap()
    }

    /// Every message published so far, in order. A PING on the listener's
    /// connection is answered after every message queued for it before, so
    /// once it returns every message of a command that already returned is
    /// here.
    pub async fn drain(&mut self) -> Vec<String> {
        let _: Value = self.client.ping(None).await.unwrap();
        let mut out = Vec::new();
        while let Ok(m) = self.messages.try_recv() {
            out.push(m.value.as_string().unwrap_or_default());
        }
        out
    }
}

/// `ACL SETUSER user` with `password`, on, every command, and the keys and
/// channels of the locks named `lk:*`.
pub async fn acl_locker(raw: &fred::clients::Client, user: &str, password: &str) {
    let password = format!(">{password}");
    let rules = [
        "SETUSER",
        user,
        "on",
        &password,
        "resetkeys",
        "~lk:*",
        "~redisson_*",
        "~{lk:*",
        "resetchannels",
        "&redisson_*",
        "+@all",
    ];
    let _: Value = raw.custom(fred::cmd!("ACL"), rules.to_vec()).await.unwrap();
}

/// Wait for every task, 60 s at most each ("no task stuck"), and add up what
/// they return (e.g. how many acquisitions each made).
pub async fn sum_of<T: std::ops::AddAssign + Default>(tasks: Vec<tokio::task::JoinHandle<T>>) -> T {
    let mut sum = T::default();
    for n in all_within(60, tasks).await {
        sum += n;
    }
    sum
}

/// `tests_of!(check: test(args)…)`: one `#[tokio::test] async fn test()`
/// per entry, running `check(args).await`.
#[macro_export]
macro_rules! tests_of {
    ($check:ident: $($test:ident($($arg:expr),*))*) => {
        $(
            #[tokio::test]
            async fn $test() {
                $check($($arg),*).await;
            }
        )*
    };
}

/// A task waiting up to `wait` for `lock` (watchdog lease): its guard, if it got one.
pub fn spawn_waiter<K: Kind>(lock: &Lock<K>, wait: Duration) -> JoinHandle<Option<LockGuard<K>>> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.try_lock_for(wait).await.unwrap() })
}

/// As [`spawn_waiter`], with the instant the waiter got the lock.
pub fn spawn_timed_waiter<K: Kind>(
    lock: &Lock<K>,
    wait: Duration,
) -> JoinHandle<Option<(Instant, LockGuard<K>)>> {
    let lock = lock.clone();
    tokio::spawn(async move {
        let got = lock.try_lock_for(wait).await.unwrap();
        got.map(|g| (Instant::now(), g))
    })
}

/// Waits `secs` s at most for `guard`'s `lost()` (else panics with `what`).
pub async fn lost_within<K: Kind>(guard: &LockGuard<K>, secs: u64, what: &str) {
    tokio::time::timeout(Duration::from_secs(secs), guard.lost())
        .await
        .expect(what);
}

/// Asserts that `r` failed with a transient error (a reply lost or late,
/// a connection cut): one the caller may retry.
#[track_caller]
pub fn assert_transient<T: std::fmt::Debug>(r: &redisson_lock::Result<T>) {
    assert!(matches!(r, Err(e) if e.is_transient()), "{r:?}");
}

/// Whether `r` is the typed refusal of a bad argument.
pub fn invalid<T>(r: &redisson_lock::Result<T>) -> bool {
    matches!(r, Err(redisson_lock::Error::InvalidArgument(_)))
}

/// `CONFIG SET parameter value` on the server `raw` is connected to.
pub async fn config_set(raw: &fred::clients::Client, parameter: &str, value: &str) {
    let _: Value = raw
        .custom(fred::cmd!("CONFIG"), vec!["SET", parameter, value])
        .await
        .unwrap_or_else(|e| panic!("CONFIG SET {parameter}: {e}"));
}

/// What `task` returns, awaited `wait` at most (else panics with `what`).
pub async fn within<T>(wait: Duration, what: &str, task: JoinHandle<T>) -> T {
    tokio::time::timeout(wait, task).await.expect(what).unwrap()
}

/// What every task returns, each awaited `secs` s at most ("no task stuck").
pub async fn all_within<T>(secs: u64, tasks: Vec<JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(within(Duration::from_secs(secs), "no task stuck", task).await);
    }
    out
}

/// A server, a blocking client of it, a name `unique(prefix)` and the
/// handle `make` makes for that name (tests of the blocking API).
#[cfg(feature = "blocking")]
pub fn blocking_handle<T>(
    prefix: &str,
    make: impl FnOnce(&redisson_lock::blocking::BlockingClient, &str) -> redisson_lock::Result<T>,
) -> (Server, redisson_lock::blocking::BlockingClient, String, T) {
    let server = Server::start();
    let client = redisson_lock::blocking::BlockingClient::connect(&server.url).unwrap();
    let name = unique(prefix);
    let handle = make(&client, &name).unwrap();
    (server, client, name, handle)
}

/// The handle `make` makes for `name`, once `make` refused the empty name
/// with `InvalidName`.
pub fn named<T>(make: impl Fn(&str) -> redisson_lock::Result<T>, name: &str) -> T {
    let refused = matches!(make(""), Err(redisson_lock::Error::InvalidName { .. }));
    assert!(refused, "the empty name is InvalidName");
    make(name).unwrap()
}

/// From a thread outside any runtime (a test of the blocking API): wait until
/// `channel` has `n` subscribers, e.g. until a waiter on another thread waits.
pub fn wait_numsub_blocking(server: &Server, channel: &str, n: i64) {
    let probe = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    probe.block_on(async {
        let raw = server.raw().await;
        wait_numsub(&raw, channel, n).await;
    });
}

/// Permits (or holds) in use on the tests' side, and the most at once: never
/// above `limit`.
pub struct InUse {
    now: std::sync::atomic::AtomicI64,
    max: std::sync::atomic::AtomicI64,
    limit: i64,
}

impl InUse {
    pub fn new(limit: i64) -> InUse {
        InUse {
            now: 0.into(),
            max: 0.into(),
            limit,
        }
    }

    /// `n` more in use; panics if that is more than the limit.
    pub fn enter(&self, n: i64) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(n, SeqCst) + n;
        self.max.fetch_max(now, SeqCst);
        assert!(
            now <= self.limit,
            "{now} permits in use, limit {}",
            self.limit
        );
    }

    pub fn leave(&self, n: i64) {
        self.now.fetch_sub(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// The most in use at once so far.
    pub fn max(&self) -> i64 {
        self.max.load(std::sync::atomic::Ordering::SeqCst)
    }
}
