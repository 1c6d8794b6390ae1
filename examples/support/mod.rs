//! What the examples share: `REDIS_URL`, or a private `redis-server` from
//! PATH on a free loopback port when it is unset (started by the test kit,
//! killed when the example ends).
#![allow(dead_code)] // each example uses a part

use std::time::{Duration, Instant};

use redisson_lock::{Client, Config, Kind, Lock, LockGuard};
/// A private redis-server (the test kit's), killed on drop.
pub use redisson_lock_testkit::Server as PrivateRedis;

/// The URL of the Redis to use, and the private server behind it, if any.
pub fn redis() -> Result<(String, Option<PrivateRedis>), Box<dyn std::error::Error>> {
    let server = PrivateRedis::start(); // REDIS_URL, or a private one
    if !server.is_private() {
        return Ok((server.url.clone(), None));
    }
    println!("started a private redis-server at {}", server.url);
    Ok((server.url.clone(), Some(server)))
}

/// `n` independent servers (for RedLock): `n` private ones, or `REDIS_URL`
/// `n` times when it is set (then the example says so: one server is no
/// RedLock).
pub fn servers(n: usize) -> Result<(Vec<String>, Vec<PrivateRedis>), Box<dyn std::error::Error>> {
    let mut urls = Vec::new();
    let mut private = Vec::new();
    for _ in 0..n {
        let (url, server) = redis()?;
        urls.push(url);
        private.extend(server);
    }
    Ok((urls, private))
}

/// Connect (retrying transient errors for up to 5 s).
pub async fn connect(url: &str) -> redisson_lock::Result<Client> {
    connect_with(url, |config| config).await
}

/// [`connect`] with settings changed by `settings`.
pub async fn connect_with(
    url: &str,
    settings: impl Fn(Config) -> Config,
) -> redisson_lock::Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let config = settings(Config::from_url(url)?.timeout(Duration::from_millis(500)));
        match Client::connect_with(config).await {
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other,
        }
    }
}

/// What most examples start with: the Redis to use ([`redis`]; the private
/// server, if any, runs while the first value lives), two clients of it (two
/// "services"), and a name of this run, `<what>-<process id>`.
pub async fn two_services(
    what: &str,
) -> Result<(Option<PrivateRedis>, [Client; 2], String), Box<dyn std::error::Error>> {
    let (url, server) = redis()?;
    let services = [connect(&url).await?, connect(&url).await?];
    Ok((server, services, format!("{what}-{}", std::process::id())))
}

/// One worker per lock of `locks` (handles to one lock), each taking it
/// `rounds` times in turn and holding it for `hold`, `say(worker, round,
/// guard)` printing what it does; returns once they have all finished.
pub async fn take_turns<K: Kind>(
    locks: Vec<Lock<K>>,
    rounds: usize,
    hold: Duration,
    say: impl Fn(usize, usize, &LockGuard<K>) + Send + Sync + 'static,
) -> Result<(), Box<dyn std::error::Error>> {
    let say = std::sync::Arc::new(say);
    let mut workers = Vec::new();
    for (worker, lock) in locks.into_iter().enumerate() {
        let say = say.clone();
        workers.push(tokio::spawn(async move {
            for round in 0..rounds {
                let guard = lock.lock().await?;
                say(worker, round, &guard);
                tokio::time::sleep(hold).await;
                guard.unlock().await?;
            }
            Ok::<_, redisson_lock::Error>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok(())
}
