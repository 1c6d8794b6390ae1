//! A permit-expirable semaphore: a worker that dies keeps no permit. One
//! permit; a worker takes it with a 1 s lease and "crashes" (keeps it, never
//! releases); another worker, on another client, waits and gets the permit
//! as soon as the lease runs out, without polling. Uses `REDIS_URL`, or
//! starts a private `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example permit_semaphore
//! ```

mod support;

use redisson_lock::fred::interfaces::KeysInterface;

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, [a, b], name) = support::two_services("render-slots").await?;
    let slots = a.permit_expirable_semaphore(&name)?;
    slots.try_set_permits(1).await?;

    let start = Instant::now();
    let crashed = slots.acquire(Some(Duration::from_secs(1))).await?;
    println!(
        "{:>5} ms  worker A holds permit {} (as Java shows it) for at most {:?}",
        start.elapsed().as_millis(),
        crashed.id(),
        crashed.lease().unwrap_or_default()
    );
    crashed.forget(); // A dies without releasing

    let other = b.permit_expirable_semaphore(&name)?;
    println!(
        "{:>5} ms  worker B waits ({} available, {} taken)",
        start.elapsed().as_millis(),
        other.available_permits().await?,
        other.acquired_permits().await?
    );
    let permit = other.acquire(Some(Duration::from_secs(30))).await?;
    println!(
        "{:>5} ms  worker B got permit {} once A's lease ran out; {:?} of its lease left",
        start.elapsed().as_millis(),
        permit.id(),
        other.lease_time(&permit.id()).await?
    );
    permit.release().await?;
    println!("{} available again", other.available_permits().await?);
    a.redis().del::<i64, _>(name.as_str()).await?;
    Ok(())
}
