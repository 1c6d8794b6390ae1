//! `redisson-lock`: run a command under a Redisson-compatible Redis lock,
//! and inspect, list, force-unlock and watch such locks, Java's or Rust's.
//! `redisson-lock --help` has the usage and the exit statuses.

#![forbid(unsafe_code)]

mod args;
mod commands;
mod exit;
mod guardian;
mod inspect;
mod procs;
mod run;
mod values;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::CommandFactory;
use redisson_lock::{Client, Config};

use crate::args::{Cli, Command, Global};
use crate::exit::{CliError, CliResult};

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == guardian::MODE) {
        return guardian::main(&argv[2..]);
    }
    let cli = match args::parse(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to standard output, errors (with the
            // usage) to standard error.
            let _ = e.print();
            return ExitCode::from(match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => exit::OK,
                _ => exit::USAGE,
            });
        }
    };
    match &cli.command {
        Command::Version => {
            println!("redisson-lock {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "redisson-lock", &mut script);
            return ExitCode::from(match commands::write_stdout(&script) {
                Ok(()) => exit::OK,
                Err(e) => {
                    eprintln!("redisson-lock: {e}");
                    e.status()
                }
            });
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
    let status = runtime
        .block_on(dispatch(&cli.global, cli.command))
        .unwrap_or_else(|e| {
            eprintln!("redisson-lock: {e}");
            e.status()
        });
    ExitCode::from(status)
}

/// Whether this build speaks TLS (the features `tls-rustls`,
/// `tls-native-tls`).
const TLS: bool = cfg!(any(feature = "tls-rustls", feature = "tls-native-tls"));

/// The server's URL: `--url`, else `$REDIS_URL`, else the default. Never
/// printed: it may carry a password.
fn url(global: &Global) -> String {
    match &global.url {
        Some(url) => url.clone(),
        None => match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => args::DEFAULT_URL.to_owned(),
        },
    }
}

/// The client settings from the global options. The URL is never printed:
/// it may carry a password.
fn config(global: &Global, watchdog: Option<std::time::Duration>) -> CliResult<Config> {
    let url = url(global);
    if !TLS && url.trim_start().to_ascii_lowercase().starts_with("rediss") {
        // The library would name its own crate feature; this tool has its own.
        return Err(CliError::Other(
            exit::CONFIG,
            "a rediss:// URL needs TLS, and this redisson-lock was built without it: \
             rebuild with the feature `tls-rustls` (or `tls-native-tls`) of redisson-lock-cli, \
             e.g. `cargo install --path cli --features tls-rustls`; refusing to connect in \
             plaintext"
                .into(),
        ));
    }
    let mut config = Config::from_url(&url)?;
    if let Some(timeout) = global.timeout {
        config = config.timeout(timeout);
    }
    if let Some(mode) = global.pubsub {
        config = config.pubsub_mode(mode.into());
    }
    if let Some(watchdog) = watchdog {
        config = config.lock_watchdog_timeout(watchdog);
    }
    if let Some(prefix) = &global.prefix {
        config = config.name_mapper(redisson_lock::PrefixMapper::new(prefix.clone()));
    }
    Ok(config)
}

async fn connect(global: &Global, watchdog: Option<std::time::Duration>) -> CliResult<Client> {
    Ok(Client::connect_with(config(global, watchdog)?).await?)
}

async fn dispatch(global: &Global, command: Command) -> CliResult<u8> {
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
                client = connect(global, a.watchdog) => client?,
                status = signals.interrupted() => return Ok(status),
            };
            let r = run::run(&client, global, a, signals).await;
            (client, r)
        }
        Command::Completions { .. } | Command::Version => return Ok(exit::OK),
        command => {
            let (client, json) = (connect(global, None).await?, global.json);
            let r = match command {
                Command::Status(a) => commands::status(&client, a, json).await,
                Command::Watch(a) => commands::watch(&client, a, json).await,
                Command::List(a) => commands::list(&client, a, json).await,
                Command::ForceUnlock(a) => commands::force_unlock(&client, a, json).await,
                // Handled above.
                Command::Run(_) | Command::Completions { .. } | Command::Version => Ok(exit::OK),
            };
            (client, r)
        }
    };
    // Lets releases and queue departures under way finish, then closes.
    client.shutdown().await;
    result
}
