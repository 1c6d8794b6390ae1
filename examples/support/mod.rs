//! What the examples share: `REDIS_URL`, or a private `redis-server` from
//! PATH on a free loopback port when it is unset (killed when the example
//! ends).
#![allow(dead_code)] // each example uses a part

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redisson_lock::{Client, Config};

/// A private redis-server, killed on drop.
pub struct PrivateRedis(Child);

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The URL of the Redis to use, and the private server behind it, if any.
pub fn redis() -> Result<(String, Option<PrivateRedis>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        if !url.is_empty() {
            return Ok((url, None));
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server ({e}); install it or set REDIS_URL"))?;
    let url = format!("redis://127.0.0.1:{port}");
    println!("started a private redis-server at {url}");
    Ok((url, Some(PrivateRedis(child))))
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

/// Connect, giving a private server a moment to listen.
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
        match Client::connect(config).await {
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other,
        }
    }
}
