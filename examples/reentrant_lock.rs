//! `RLock` and `NonReentrantLock`: re-entry through the guard (the hold count
//! goes to 2), an explicit owner that re-enters like a Java thread, and a
//! non-reentrant lock that refuses re-entry. Uses `REDIS_URL`, or starts a
//! private `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example reentrant_lock
//! ```

mod support;

use redisson_lock::{Error, Owner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis()?;
    let client = support::connect(&url).await?;
    let name = format!("orders-{}", std::process::id());
    let lock = client.lock(&name)?;

    // Default: a fresh owner per acquisition; re-enter through the guard.
    let outer = lock.lock().await?;
    let inner = outer.reenter().await?;
    println!(
        "{} held by owner {}, hold count {}",
        lock.name(),
        outer.owner(),
        outer.hold_count().await?
    );
    inner.unlock().await?;
    outer.unlock().await?;

    // An explicit owner re-enters by acquiring again, like a Java thread.
    let worker = lock.with_owner(Owner::new(7));
    let first = worker.lock().await?;
    let second = worker.lock().await?;
    println!(
        "owner 7 holds it {} times",
        lock.hold_count(Owner::new(7)).await?
    );
    second.unlock().await?;
    first.unlock().await?;

    // A non-reentrant lock refuses its own holder.
    let once = client
        .non_reentrant_lock(&format!("{name}-once"))?
        .with_owner(Owner::new(8));
    let held = once.lock().await?;
    match once.try_lock().await {
        Err(Error::NotReentrant { name }) => println!("{name}: re-entry refused, as it should be"),
        other => return Err(format!("expected NotReentrant, got {other:?}").into()),
    }
    held.unlock().await?;
    assert!(!lock.is_locked().await? && !once.is_locked().await?);
    client.shutdown().await;
    Ok(())
}
