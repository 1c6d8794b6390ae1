//! A fair lock serves its waiters in the order they queued, across clients:
//! four workers on two clients (two "services") queue one after another
//! behind a holder and get the lock in that order. Uses `REDIS_URL`, or
//! starts a private `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example fair_lock
//! ```

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, services, name) = support::two_services("payouts").await?;
    let holder = services[0].fair_lock(&name)?.lock().await?;

    let start = Instant::now();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for worker in 0..4 {
        let lock = services[worker % 2].fair_lock(&name)?;
        let served = served.clone();
        workers.push(tokio::spawn(async move {
            let guard = lock.lock().await?;
            println!(
                "{:>5} ms  worker {worker} (service {}) holds {}",
                start.elapsed().as_millis(),
                worker % 2,
                lock.name()
            );
            served.lock().map_err(|_| "poisoned")?.push(worker);
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.unlock().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
        // Queue them one after the other.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    holder.unlock().await?;
    for worker in workers {
        worker.await?.map_err(|e| e.to_string())?;
    }
    let order = served.lock().map_err(|_| "poisoned")?.clone();
    println!("served in the order they queued: {order:?}");
    assert_eq!(order, [0, 1, 2, 3]);
    for service in &services {
        service.shutdown().await;
    }
    Ok(())
}
