//! A spin lock: Redisson's lock without pub/sub, for Redis set-ups where
//! subscriptions are a problem. Waiters sleep per a back-off and try again.
//! Three workers on two clients take turns. Uses `REDIS_URL`, or starts a
//! private `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example spin_lock
//! ```

mod support;

use std::time::{Duration, Instant};

use redisson_lock::BackOff;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis()?;
    let services = [support::connect(&url).await?, support::connect(&url).await?];
    let name = format!("cache-fill-{}", std::process::id());
    // Redisson's default back-off is exponential, 1 ms to 128 ms; here
    // from 2 ms to 32 ms.
    let backoff = BackOff::Exponential {
        initial: Duration::from_millis(2),
        max: Duration::from_millis(32),
        multiplier: 2,
    };

    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..3 {
        let lock = services[worker % 2].spin_lock_with(&name, backoff)?;
        workers.push(tokio::spawn(async move {
            for round in 0..2 {
                let guard = lock.lock().await?;
                println!(
                    "{:>5} ms  worker {worker} fills the cache, round {round}",
                    start.elapsed().as_millis()
                );
                tokio::time::sleep(Duration::from_millis(30)).await;
                guard.unlock().await?;
            }
            Ok::<_, redisson_lock::Error>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    println!(
        "6 turns, no subscription, {} ms",
        start.elapsed().as_millis()
    );
    for service in &services {
        service.shutdown().await;
    }
    Ok(())
}
