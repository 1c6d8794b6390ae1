//! A private redis-server per bench run, and the server statistics we read.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A redis-server child process, killed when dropped (also on error or panic),
/// and by a small shell watchdog if this process dies without dropping it.
pub struct Server {
    child: Option<Child>,
    watchdog: Option<Child>,
    dir: std::path::PathBuf,
    pub url: String,
}

impl Server {
    /// Start `redis-server` on a free loopback port, with no persistence.
    pub fn start() -> Result<Server> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir =
            std::env::temp_dir().join(format!("redisson-lock-bench-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--maxclients", "10000"])
            .args(["--loglevel", "warning"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = cmd
            .spawn()
            .context("starting redis-server (is it on PATH?)")?;
        // If the bench is killed outright (no Drop), the watchdog notices its
        // parent is gone and kills the server: no stray redis-server.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {} 2>/dev/null; do sleep 0.5; done; kill -9 {} 2>/dev/null",
                std::process::id(),
                child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let mut server = Server {
            child: Some(child),
            watchdog,
            dir,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(child) = server.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("redis-server exited at start: {status}");
                }
            }
            if started.elapsed() > Duration::from_secs(10) {
                bail!("redis-server did not listen on port {port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }
}

impl Server {
    /// The redis-server process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for mut child in [self.child.take(), self.watchdog.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An admin connection for INFO, FLUSHALL and test data (redis-rs).
pub async fn admin(url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    Ok(client.get_multiplexed_async_connection().await?)
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
