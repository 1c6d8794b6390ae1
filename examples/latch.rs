//! A count-down latch: wait until three shards have finished. The shards
//! run on another client (another "service") and count down as they finish;
//! the waiter is woken by the last count-down's message. A latch deleted
//! while awaited ends the wait too. Uses `REDIS_URL`, or starts a private
//! `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example latch
//! ```

mod support;

use std::time::{Duration, Instant};

use redisson_lock::LatchOpened;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, [coordinator, workers], name) = support::two_services("import").await?;
    let done = coordinator.count_down_latch(&name)?;
    done.try_set_count(3).await?;

    let start = Instant::now();
    for shard in 0..3u64 {
        let latch = workers.count_down_latch(&name)?;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100 * (shard + 1))).await;
            println!(
                "{:>5} ms  shard {shard} finished",
                start.elapsed().as_millis()
            );
            latch.count_down().await
        });
    }
    println!(
        "{:>5} ms  waiting for {} shards",
        start.elapsed().as_millis(),
        done.count().await?
    );
    match done.await_zero().await? {
        LatchOpened::Zero => println!(
            "{:>5} ms  every shard finished",
            start.elapsed().as_millis()
        ),
        LatchOpened::Deleted => println!("the import was called off"),
        // `LatchOpened` is `#[non_exhaustive]`: a later version may add ways.
        other => println!("the wait ended: {other:?}"),
    }

    // Deleting a latch ends every wait on it (Redisson's own await() would hang).
    done.try_set_count(1).await?;
    let waiter = tokio::spawn({
        let latch = workers.count_down_latch(&name)?;
        async move { latch.await_zero().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    done.delete().await?;
    println!("after delete, the waiter returned {:?}", waiter.await??);
    Ok(())
}
