//! A private redis-server per bench run (the test kit's), and the server
//! statistics we read.

use std::collections::HashMap;

use anyhow::Result;
use redisson_lock_testkit::{Options, Server};

/// Start `redis-server` on a free loopback port, with no persistence, room
/// for 10 000 clients, killed when dropped (also on error or panic) and by
/// the kit's watchdog if this process dies without dropping it.
pub fn start() -> Server {
    Options::new()
        .args(&["--maxclients", "10000", "--loglevel", "warning"])
        .watchdog()
        .start()
}

/// An admin connection for INFO, FLUSHALL and test data (redis-rs). Its
/// replies may wait behind a flood of other clients' commands (100 000
/// waiters starting at once): 60 s for a reply, not redis-rs's 500 ms.
pub async fn admin(url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(60)));
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

async fn info(con: &mut redis::aio::MultiplexedConnection, section: &str) -> Result<String> {
    Ok(redis::cmd("INFO").arg(section).query_async(con).await?)
}

/// `INFO commandstats`: calls per command name (lowercase).
pub async fn commandstats(
    con: &mut redis::aio::MultiplexedConnection,
) -> Result<HashMap<String, u64>> {
    let text = info(con, "commandstats").await?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        let calls = fields
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        out.insert(name.to_lowercase(), calls);
    }
    Ok(out)
}

/// CPU time of the redis-server process so far (`used_cpu_sys + used_cpu_user`), µs.
pub async fn server_cpu_us(con: &mut redis::aio::MultiplexedConnection) -> Result<f64> {
    let text = info(con, "cpu").await?;
    let field = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6)
}

/// The server's `used_memory` (bytes, from `INFO memory`).
pub async fn used_memory(con: &mut redis::aio::MultiplexedConnection) -> Result<f64> {
    let text = info(con, "memory").await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN))
}

/// Wait until the number of connected clients has stood still for 150 ms
/// (at most `limit`): the connections of a worker or JVM that just exited
/// close asynchronously, and their buffers count in `used_memory`.
pub async fn settle_clients(
    con: &mut redis::aio::MultiplexedConnection,
    limit: std::time::Duration,
) -> Result<()> {
    let started = std::time::Instant::now();
    let (mut last, mut still) = (u64::MAX, 0);
    while still < 3 && started.elapsed() < limit {
        let text = info(con, "clients").await?;
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if n == last {
            still += 1;
        } else {
            (last, still) = (n, 0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}

/// `after - before` per command.
pub fn diff(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> HashMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Empty the database between measurements.
pub async fn flushall(con: &mut redis::aio::MultiplexedConnection) -> Result<()> {
    let _: () = redis::cmd("FLUSHALL").query_async(con).await?;
    Ok(())
}
