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
    let (_server, services, name) = support::two_services("demo").await?;
    for (i, client) in services.iter().enumerate() {
        println!("service {i}: client id {}", client.id());
    }

    let start = Instant::now();
    let locks = (0..4)
        .map(|worker| services[worker % 2].lock(&name))
        .collect::<Result<Vec<_>, _>>()?;
    let said = name.clone();
    support::take_turns(locks, 3, Duration::from_millis(50), move |worker, round, guard| {
        let (at, service) = (start.elapsed().as_millis(), worker % 2);
        println!("{at:>6} ms  worker {worker} (service {service}) holds {said} as owner {}, round {round}", guard.owner());
    })
    .await?;
    println!(
        "12 turns in {} ms, one holder at a time, waiters woken by pub/sub",
        start.elapsed().as_millis()
    );
    Ok(())
}
