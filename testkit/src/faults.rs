//! Redis-side faults on a "raw" fred client: [`client_kill`],
//! [`client_pause`] / [`client_unpause`], [`script_flush`]; and raw clients
//! that reconnect ([`raw_client`]) or that may fail to connect
//! ([`try_raw_client`]), for URLs behind a [`Proxy`](crate::proxy::Proxy).

use std::time::Duration;

use fred::prelude::*;

/// A plain fred client for `url` (a proxy's, say). With `reconnect`, it
/// reconnects every 50 ms, forever, after losing its connection (commands
/// wait for it); without, a lost connection stays lost. Panics if it cannot
/// connect within 5 s.
pub async fn raw_client(url: &str, reconnect: bool) -> fred::clients::Client {
    let config = fred::types::config::Config::from_url(url).expect("a redis:// URL");
    let mut builder = fred::types::Builder::from_config(config);
    if reconnect {
        builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    }
    let client = builder.build().expect("a fred client");
    let _task = client.connect();
    match tokio::time::timeout(Duration::from_secs(5), client.wait_for_connect()).await {
        Ok(Ok(())) => client,
        Ok(Err(e)) => panic!("raw client cannot connect to {url}: {e}"),
        Err(_) => panic!("raw client did not connect to {url} within 5 s"),
    }
}

/// Try to connect a plain, non-reconnecting fred client to `url` (within 5 s),
/// for tests that expect connecting to fail.
pub async fn try_raw_client(url: &str) -> Result<fred::clients::Client, String> {
    let config = fred::types::config::Config::from_url(url).map_err(|e| e.to_string())?;
    let client = fred::clients::Client::new(config, None, None, None);
    match tokio::time::timeout(Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            let _ = client.quit().await;
            Err("no connection within 5 s".into())
        }
    }
}

/// Which connections [`client_kill`] closes (`CLIENT KILL TYPE ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    /// Command connections (`TYPE normal`).
    Normal,
    /// Connections in RESP2 subscriber mode (`TYPE pubsub`).
    Pubsub,
}

/// `CLIENT KILL TYPE normal|pubsub SKIPME yes`: close every such connection
/// but `raw`'s own; returns how many were closed.
pub async fn client_kill(raw: &fred::clients::Client, kind: ClientType) -> usize {
    let kind = match kind {
        ClientType::Normal => "normal",
        ClientType::Pubsub => "pubsub",
    };
    let killed: i64 = raw
        .custom(
            fred::cmd!("CLIENT"),
            vec!["KILL", "TYPE", kind, "SKIPME", "yes"],
        )
        .await
        .expect("CLIENT KILL");
    usize::try_from(killed).unwrap_or(0)
}

/// What [`client_pause`] holds back (`CLIENT PAUSE ... ALL|WRITE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseMode {
    /// Every command of every client (`ALL`), `raw`'s own included: a
    /// [`client_unpause`] waits for the pause to end, so pick a short one.
    All,
    /// Commands that may write (`WRITE`), including `EVALSHA`/`EVAL` and
    /// `PUBLISH`; reads and [`client_unpause`] still run.
    Write,
}

/// `CLIENT PAUSE <ms> ALL|WRITE`: the server holds back (does not refuse)
/// matching commands of every client for `duration`; they run after it.
pub async fn client_pause(raw: &fred::clients::Client, duration: Duration, mode: PauseMode) {
    let mode = match mode {
        PauseMode::All => "ALL",
        PauseMode::Write => "WRITE",
    };
    let ms = duration.as_millis().max(1).to_string();
    let _: Value = raw
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", ms.as_str(), mode])
        .await
        .expect("CLIENT PAUSE");
}

/// `CLIENT UNPAUSE`: end a pause early (a [`PauseMode::Write`] one; under
/// [`PauseMode::All`] this command itself waits for the pause to end).
pub async fn client_unpause(raw: &fred::clients::Client) {
    let _: Value = raw
        .custom(fred::cmd!("CLIENT"), vec!["UNPAUSE"])
        .await
        .expect("CLIENT UNPAUSE");
}

/// `SCRIPT FLUSH`: empty the server's script cache, so the next `EVALSHA`
/// of every script fails with `NOSCRIPT`.
pub async fn script_flush(raw: &fred::clients::Client) {
    let _: Value = raw
        .custom(fred::cmd!("SCRIPT"), vec!["FLUSH"])
        .await
        .expect("SCRIPT FLUSH");
}
