//! Several workers on two clients (two "services") contend for one lock and
//! print who held it when. Uses `REDIS_URL`, or starts a private
//! `redis-server` from PATH on a free loopback port when it is unset.
//!
//! ```text
//! cargo run --example demo
//! ```

mod support;

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis()?;
    let services = [support::connect(&url).await?, support::connect(&url).await?];
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
