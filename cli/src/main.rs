//! `redisson-lock`: run a command under a Redisson-compatible Redis lock,
//! and inspect, list, force-unlock and watch such locks, Java's or Rust's.
//! `redisson-lock --help` has the usage and the exit statuses.

#![forbid(unsafe_code)]

mod args;
mod commands;
mod exit;
mod inspect;
mod run;

use std::process::ExitCode;

use redisson_lock::{Client, Config};

use crate::args::{Command, Global};
use crate::exit::{CliError, CliResult};

fn main() -> ExitCode {
    let argv: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(argv) => argv,
        Err(bad) => {
            eprintln!("redisson-lock: argument is not valid UTF-8: {bad:?}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let command = match args::parse(argv) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("redisson-lock: {e}\nTry 'redisson-lock --help'.");
            return ExitCode::from(exit::USAGE);
        }
    };
    match command {
        Command::Help => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("redisson-lock {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redisson-lock: cannot start the async runtime: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let status = runtime.block_on(dispatch(command)).unwrap_or_else(|e| {
        eprintln!("redisson-lock: {e}");
        e.status()
    });
    ExitCode::from(status)
}

/// The client settings from the global options. The URL is never printed:
/// it may carry a password.
fn config(global: &Global, watchdog: Option<std::time::Duration>) -> CliResult<Config> {
    let url = match &global.url {
        Some(url) => url.clone(),
        None => match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => args::DEFAULT_URL.to_owned(),
        },
    };
    let mut config = Config::from_url(&url)?;
    if let Some(timeout) = global.timeout {
        config = config.timeout(timeout);
    }
    if let Some(mode) = global.pubsub {
        config = config.pubsub_mode(mode);
    }
    if let Some(watchdog) = watchdog {
        config = config.lock_watchdog_timeout(watchdog);
    }
    Ok(config)
}

async fn connect(global: &Global, watchdog: Option<std::time::Duration>) -> CliResult<Client> {
    Ok(Client::connect(config(global, watchdog)?).await?)
}

async fn dispatch(command: Command) -> CliResult<u8> {
    // Handlers first: a signal while connecting or waiting must not kill the
    // process before it can give back what it took.
    let mut signals = match &command {
        Command::Run(_) => Some(run::Signals::install()?),
        _ => None,
    };
    let (client, result) = match &command {
        Command::Run(a) => {
            let signals = signals
                .as_mut()
                .ok_or_else(|| CliError::Other(exit::SOFTWARE, "no signal handlers".into()))?;
            let client = tokio::select! {
                client = connect(&a.global, a.watchdog) => client?,
                status = signals.interrupted() => return Ok(status),
            };
            let r = run::run(&client, a, signals).await;
            (client, r)
        }
        Command::Status(a) => {
            let client = connect(&a.global, None).await?;
            let r = commands::status(&client, a).await;
            (client, r)
        }
        Command::Watch(a) => {
            let client = connect(&a.status.global, None).await?;
            let r = commands::watch(&client, a).await;
            (client, r)
        }
        Command::List(a) => {
            let client = connect(&a.global, None).await?;
            let r = commands::list(&client, a).await;
            (client, r)
        }
        Command::ForceUnlock(a) => {
            let client = connect(&a.global, None).await?;
            let r = commands::force_unlock(&client, a).await;
            (client, r)
        }
        Command::Help | Command::Version => return Ok(exit::OK),
    };
    // Lets releases and queue departures under way finish, then closes.
    client.shutdown().await;
    result
}
