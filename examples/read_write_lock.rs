//! A read-write lock: two readers share it, a writer waits until both are
//! done, then downgrades to a read lock so that readers get in while it
//! still reads. Uses `REDIS_URL`, or starts a private `redis-server` from
//! PATH when it is unset.
//!
//! ```text
//! cargo run --example read_write_lock
//! ```

mod support;

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, [readers, writers], name) = support::two_services("catalog").await?;
    let start = Instant::now();
    let at = move || start.elapsed().as_millis();

    let rw = readers.read_write_lock(&name)?;
    let (first, second) = (rw.read().lock().await?, rw.read().lock().await?);
    println!("{:>5} ms  two readers share {name}", at());

    let writer = tokio::spawn({
        let write = writers.read_write_lock(&name)?.write();
        async move {
            let guard = write.lock().await?;
            println!("{:>5} ms  the writer holds it alone", at());
            // ... update the catalog ...
            let read = guard.downgrade().await?;
            println!("{:>5} ms  the writer downgraded to a read lock", at());
            Ok::<_, redisson_lock::Error>(read)
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.unlock().await?;
    second.unlock().await?;
    let still_reading = writer.await??;

    // Readers get in beside the downgraded writer; writers wait.
    let reader = rw.read().lock().await?;
    println!("{:>5} ms  a reader joins the downgraded writer", at());
    assert!(rw.write().try_lock().await?.is_none());
    reader.unlock().await?;
    still_reading.unlock().await?;
    assert!(!rw.read().is_locked().await?);
    readers.shutdown().await;
    writers.shutdown().await;
    Ok(())
}
