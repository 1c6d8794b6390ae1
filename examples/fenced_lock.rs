//! A fenced lock: every acquisition carries a larger token, and the storage
//! the lock protects refuses writes with a token lower than one it has seen.
//! Worker A takes the lock with a short lease and stalls past it; worker B
//! takes the lock and writes; A wakes up and tries to write: refused,
//! although A still believes it holds the lock. Uses `REDIS_URL`, or starts
//! a private `redis-server` from PATH when it is unset.
//!
//! ```text
//! cargo run --example fenced_lock
//! ```

mod support;

use std::sync::Mutex;
use std::time::Duration;

/// The protected storage: remembers the highest token it has accepted.
#[derive(Default)]
struct Ledger {
    fence: Mutex<(i64, Vec<String>)>,
}

impl Ledger {
    fn write(&self, token: i64, entry: &str) -> Result<(), String> {
        let mut state = self.fence.lock().map_err(|_| "poisoned")?;
        if token < state.0 {
            return Err(format!("refused {entry:?}: token {token} < {}", state.0));
        }
        state.0 = token;
        state.1.push(entry.to_owned());
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, [a, b], name) = support::two_services("ledger").await?;
    let ledger = Ledger::default();

    let held_by_a = a
        .fenced_lock(&name)?
        .lock_with_lease(Duration::from_millis(200))
        .await?;
    let token_a = held_by_a.fencing_token();
    println!("A holds {name} with token {token_a}, then stalls past its lease");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let held_by_b = b.fenced_lock(&name)?.lock().await?;
    let token_b = held_by_b.fencing_token();
    ledger.write(token_b, "B's entry")?;
    println!("B holds it with token {token_b} and writes");

    match ledger.write(token_a, "A's late entry") {
        Err(refused) => println!("A wakes up and writes: {refused}"),
        Ok(()) => return Err("a stale token was accepted".into()),
    }
    held_by_b.unlock().await?;
    assert!(held_by_a.unlock().await.is_err(), "A's lease had run out");
    println!(
        "last token handed out: {:?}",
        b.fenced_lock(&name)?.token().await?
    );
    a.shutdown().await;
    b.shutdown().await;
    Ok(())
}
