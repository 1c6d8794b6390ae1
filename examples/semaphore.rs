//! A semaphore caps concurrent calls to a partner API across services:
//! six workers on two clients (two "services") share 2 permits, and never
//! more than 2 calls are in flight. Uses `REDIS_URL`, or starts a private
//! `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example semaphore
//! ```

mod support;

use redisson_lock::fred::interfaces::KeysInterface;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, services, name) = support::two_services("partner-api").await?;
    // Once, by whoever comes first (Java's trySetPermits): false if set.
    services[0].semaphore(&name)?.try_set_permits(2).await?;

    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..6 {
        let semaphore = services[worker % 2].semaphore(&name)?;
        let (in_flight, most) = (in_flight.clone(), most.clone());
        workers.push(tokio::spawn(async move {
            for call in 0..2 {
                let permit = semaphore.acquire(1).await?;
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                println!(
                    "{:>5} ms  worker {worker} (service {}) calls the partner, call {call}, {now} in flight",
                    start.elapsed().as_millis(),
                    worker % 2
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                permit.release().await?; // or drop it: released in the background
            }
            Ok::<_, redisson_lock::Error>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let semaphore = services[0].semaphore(&name)?;
    println!(
        "12 calls in {} ms, at most {} in flight, {} permits available again",
        start.elapsed().as_millis(),
        most.load(Ordering::SeqCst),
        semaphore.available_permits().await?
    );
    services[0].redis().del::<i64, _>(name.as_str()).await?;
    Ok(())
}
