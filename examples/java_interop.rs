//! A Rust service and a Java service sharing one Redisson lock. The Java
//! side is in the README ("Java interop"); it runs
//! `redisson.getLock("orders:42").lock()` with `lockWatchdogTimeout`
//! 30 000 ms. Without a JVM at hand, this example plays the Java service by
//! hand: it writes exactly what Redisson's `lock()` writes (the hash
//! `orders:42`, field `<client uuid>:<thread id>` → hold count, a 30 s
//! `PEXPIRE`) and does what its `unlock()` does (delete the hash and publish
//! `0` on `redisson_lock__channel:{orders:42}`). The Rust service, with the
//! same lock name and the watchdog timeout mirrored, waits for it, is woken
//! by that message, and holds the lock the way Java reads it. Uses
//! `REDIS_URL` (point it at the Redis your Java service uses to run against
//! a real one), or starts a private `redis-server` from PATH when it is
//! unset.
//!
//! ```text
//! cargo run --example java_interop
//! ```

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redisson_lock::fred::interfaces::{HashesInterface, KeysInterface, PubsubInterface};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis()?;
    // Mirror the Java side's Config: lockWatchdogTimeout (ms) and, on a
    // cluster, shardedSubscriptionMode (see README "Deployments").
    let rust = support::connect_with(&url, |config| {
        config.lock_watchdog_timeout(Duration::from_millis(30_000))
    })
    .await?;
    let name = format!("orders:42-{}", std::process::id());
    let channel = format!("redisson_lock__channel:{{{name}}}");

    // "Java" takes the lock, as `lock.lock()` on thread 1 would.
    let java = rust.redis();
    let java_owner = format!("{}:1", uuid::Uuid::new_v4()); // Redisson's client id : thread id
    let _: i64 = java.hincrby(&name, &java_owner, 1).await?;
    let _: bool = java.pexpire(&name, 30_000, None).await?;
    println!("Java holds {name} as {java_owner}");

    // The Rust service waits for the same lock.
    let lock = rust.lock(&name)?;
    let start = Instant::now();
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await?;
        Ok::<_, redisson_lock::Error>((guard, start.elapsed()))
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    // "Java" unlocks: the hash goes and `0` is published on the channel.
    let _: i64 = java.del(&name).await?;
    let woken: i64 = java.publish(&channel, "0").await?;
    println!("Java unlocked and published 0 on {channel} ({woken} subscriber(s))");

    let (guard, waited) = waiter.await??;
    println!(
        "Rust holds {name} after {} ms, woken by Java's message",
        waited.as_millis()
    );
    // What a Java client reads now: the same layout, a 30 s lease.
    let hash: HashMap<String, i64> = java.hgetall(&name).await?;
    let ttl: i64 = java.pttl(&name).await?;
    println!("Java sees {hash:?}, PTTL {ttl} ms (renewed every 10 s while held)");
    assert_eq!(hash.get(guard.field()), Some(&1));
    guard.unlock().await?;
    rust.shutdown().await;
    Ok(())
}
