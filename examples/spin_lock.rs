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
    let (_server, services, name) = support::two_services("cache-fill").await?;
    // Redisson's default back-off is exponential, 1 ms to 128 ms; here
    // from 2 ms to 32 ms.
    let backoff = BackOff::Exponential {
        initial: Duration::from_millis(2),
        max: Duration::from_millis(32),
        multiplier: 2,
    };

    let start = Instant::now();
    let locks = (0..3)
        .map(|worker| services[worker % 2].spin_lock_with(&name, backoff))
        .collect::<Result<Vec<_>, _>>()?;
    support::take_turns(
        locks,
        2,
        Duration::from_millis(30),
        move |worker, round, _| {
            println!(
                "{:>5} ms  worker {worker} fills the cache, round {round}",
                start.elapsed().as_millis()
            );
        },
    )
    .await?;
    println!(
        "6 turns, no subscription, {} ms",
        start.elapsed().as_millis()
    );
    for service in &services {
        service.shutdown().await;
    }
    Ok(())
}
