//! Several workers on two clients (two "services") contend for one lock and
//! print who held it when. Uses `REDIS_URL`, or starts a private
//! `redis-server` from PATH on a free loopback port when it is unset.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redisson_lock::{Client, Config};

/// A private redis-server, killed on drop.
struct PrivateRedis(Child);

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> Result<(String, PrivateRedis), Box<dyn std::error::Error>> {
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
    Ok((format!("redis://127.0.0.1:{port}"), PrivateRedis(child)))
}

async fn connect(url: &str) -> redisson_lock::Result<Client> {
    // The private server may need a moment to listen.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Client::connect(Config::from_url(url)?.timeout(Duration::from_millis(500))).await {
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other,
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let (url, server) = start_redis()?;
            println!("started a private redis-server at {url}");
            (url, Some(server))
        }
    };
    let services = [connect(&url).await?, connect(&url).await?];
    for (i, client) in services.iter().enumerate() {
        println!("service {i}: client id {}", client.id());
    }

    let name = format!("demo-{}", std::process::id());
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..4 {
        let service = worker % 2;
        let lock = services[service].lock(&name)?;
        workers.push(tokio::spawn(async move {
            for round in 0..3 {
                let guard = lock.lock().await?;
                let at = start.elapsed().as_millis();
                println!("{at:>6} ms  worker {worker} (service {service}) holds {} as owner {}, round {round}", lock.name(), guard.owner());
                tokio::time::sleep(Duration::from_millis(50)).await;
                guard.unlock().await?;
            }
            Ok::<_, redisson_lock::Error>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    println!(
        "12 turns in {} ms, one holder at a time, waiters woken by pub/sub",
        start.elapsed().as_millis()
    );
    Ok(())
}
