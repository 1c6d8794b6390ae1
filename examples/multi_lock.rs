//! A multi-lock takes several locks (of any kinds) as one, all or nothing;
//! RedLock takes a majority of locks on independent servers. Moving money
//! between two accounts locks both; a job runs once across three servers,
//! and still runs with one of them down. Uses three private `redis-server`s
//! from PATH (or `REDIS_URL` three times when it is set, which shows the
//! API but is no RedLock).
//!
//! ```text
//! cargo run --example multi_lock
//! ```

mod support;

use std::time::Duration;

use redisson_lock::MultiLock;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (urls, mut servers) = support::servers(3)?;
    let mut clients = Vec::new();
    for url in &urls {
        clients.push(support::connect(url).await?);
    }
    let id = std::process::id();

    // All or nothing, on one client; kinds mixed through erase().
    let client = &clients[0];
    let transfer = MultiLock::new([
        client.lock(&format!("account-1-{id}"))?.into_erased(),
        client.fair_lock(&format!("account-2-{id}"))?.into_erased(),
    ])?;
    let both = transfer.lock().await?;
    println!("holding {:?}", transfer.names().collect::<Vec<_>>());
    assert!(client
        .lock(&format!("account-1-{id}"))?
        .try_lock()
        .await?
        .is_none());
    both.unlock().await?;

    // RedLock: a majority (2 of 3) of independent servers.
    let job = format!("nightly-job-{id}");
    let members = clients
        .iter()
        .map(|c| c.lock(&job))
        .collect::<Result<Vec<_>, _>>()?;
    let red = MultiLock::red_lock(members)?;
    let wait = Duration::from_secs(1);
    let lease = Duration::from_secs(10);
    let guard = red
        .try_lock_for_with_lease(wait, lease)
        .await?
        .ok_or("busy")?;
    let left = guard
        .expires_at()
        .map(|at| at.saturating_duration_since(std::time::Instant::now()));
    println!(
        "RedLock held on {} of {} servers, for {:?} more at most",
        guard.guards().len(),
        urls.len(),
        left.ok_or("a lease was given")?
    );
    guard.unlock().await?;

    // With one server down, a majority is still there.
    if servers.len() == 3 {
        drop(servers.remove(2));
        let guard = red
            .try_lock_for_with_lease(wait, lease)
            .await?
            .ok_or("busy")?;
        println!(
            "with one server down: held on {} of 3",
            guard.guards().len()
        );
        guard.unlock().await?;
    }
    for client in &clients[..2] {
        client.shutdown().await;
    }
    Ok(())
}
