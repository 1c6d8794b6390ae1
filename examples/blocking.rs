//! The blocking API, for code without an async runtime: a lock is
//! reentrant per OS thread, as in Java, and a dropped guard unlocks
//! synchronously. Two threads take turns; each re-enters the lock it holds.
//! Uses `REDIS_URL`, or starts a private `redis-server` from PATH when it
//! is unset.
//!
//! ```text
//! cargo run --example blocking
//! ```

mod support;

use std::time::{Duration, Instant};

use redisson_lock::blocking::BlockingClient;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis()?;
    // A private server may need a moment to listen.
    let deadline = Instant::now() + Duration::from_secs(5);
    let client = loop {
        match BlockingClient::connect(&url) {
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => break other?,
        }
    };
    let name = format!("orders-{}", std::process::id());
    let start = Instant::now();

    let threads: Vec<_> = (0..2)
        .map(|t| {
            let lock = client.lock(&name);
            std::thread::spawn(move || -> redisson_lock::Result<()> {
                let lock = lock?;
                for round in 0..2 {
                    let guard = lock.lock()?;
                    let again = lock.lock()?; // same thread: re-enters
                    println!(
                        "{:>5} ms  thread {t} holds {} {} times, round {round}",
                        start.elapsed().as_millis(),
                        lock.name(),
                        lock.hold_count()?
                    );
                    std::thread::sleep(Duration::from_millis(30));
                    drop(again); // unlocks one hold, synchronously
                    guard.unlock()?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a thread panicked")??;
    }
    assert!(!client.lock(&name)?.is_locked()?);
    println!("4 turns, each thread re-entering, like Java");
    Ok(())
}
