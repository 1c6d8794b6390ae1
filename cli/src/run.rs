//! `run NAME -- COMMAND...`: flock-style, on a Redis lock.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use redisson_lock::{AnyKind, Client, Error, Lock, LockGuard};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

use crate::args::{format_duration_ms, LockKind, RunArgs};
use crate::exit::{self, CliError, CliResult};

/// The signals the tool handles itself while it holds or waits for a lock,
/// so that it can release the lock before it exits.
pub struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

/// A signal the tool received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    Int,
    Term,
    Hup,
}

impl Got {
    fn number(self) -> u8 {
        match self {
            Got::Hup => 1,
            Got::Int => 2,
            Got::Term => 15,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Got::Hup => "HUP",
            Got::Int => "INT",
            Got::Term => "TERM",
        }
    }
}

impl Signals {
    /// Install the handlers (from then on these signals no longer end the
    /// process by themselves).
    pub fn install() -> CliResult<Signals> {
        let make = |kind: SignalKind| {
            signal(kind)
                .map_err(|e| CliError::Other(exit::SOFTWARE, format!("cannot handle signals: {e}")))
        };
        Ok(Signals {
            int: make(SignalKind::interrupt())?,
            term: make(SignalKind::terminate())?,
            hup: make(SignalKind::hangup())?,
        })
    }

    /// Wait for one of the signals; the status to exit with for it.
    pub async fn interrupted(&mut self) -> u8 {
        128 + self.recv().await.number()
    }

    async fn recv(&mut self) -> Got {
        tokio::select! {
            _ = self.int.recv() => Got::Int,
            _ = self.term.recv() => Got::Term,
            _ = self.hup.recv() => Got::Hup,
        }
    }
}

/// The lock handle of `kind`, erased; for a fenced lock the typed handle
/// too, for its token.
fn handle(client: &Client, kind: LockKind, name: &str) -> CliResult<Lock<AnyKind>> {
    Ok(match kind {
        LockKind::Rlock => client.lock(name)?.erase(),
        LockKind::NonReentrant => client.non_reentrant_lock(name)?.erase(),
        LockKind::Fair => client.fair_lock(name)?.erase(),
        LockKind::NonReentrantFair => client.non_reentrant_fair_lock(name)?.erase(),
        LockKind::Read => client.read_write_lock(name)?.read().erase(),
        LockKind::Write => client.read_write_lock(name)?.write().erase(),
        LockKind::Spin => client.spin_lock(name)?.erase(),
        LockKind::Fenced => client.fenced_lock(name)?.erase(),
    })
}

/// Take the lock as asked: `None` if `--wait` ran out.
async fn acquire(
    client: &Client,
    args: &RunArgs,
) -> CliResult<Option<(LockGuard<AnyKind>, Option<i64>)>> {
    if args.kind == LockKind::Fenced {
        let lock = client.fenced_lock(&args.name)?;
        let guard = match (args.wait, args.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), lease) => lock.try_lock_for(wait, lease).await?,
        };
        return Ok(guard.map(|g| {
            let token = g.fencing_token();
            (g.erase(), Some(token))
        }));
    }
    let lock = handle(client, args.kind, &args.name)?;
    let guard = match (args.wait, args.lease) {
        (None, None) => Some(lock.lock().await?),
        (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
        (Some(wait), lease) => lock.try_lock_for(wait, lease).await?,
    };
    Ok(guard.map(|g| (g, None)))
}

/// Send `sig` to `pid` with the `kill` command; false if that failed.
async fn send_signal(pid: u32, sig: &str) -> bool {
    let flag = if sig.chars().all(|c| c.is_ascii_digit()) {
        vec![format!("-{sig}")]
    } else {
        vec!["-s".to_owned(), sig.to_owned()]
    };
    tokio::process::Command::new("kill")
        .args(flag)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .status()
        .await
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The status a shell would report for the command.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(exit::SOFTWARE),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(exit::SOFTWARE),
        (None, None) => exit::SOFTWARE,
    }
}

fn say(msg: impl std::fmt::Display) {
    eprintln!("redisson-lock: {msg}");
}

/// Run the command under the lock; returns the exit status.
pub async fn run(client: &Client, args: &RunArgs, signals: &mut Signals) -> CliResult<u8> {
    let acquired = tokio::select! {
        r = acquire(client, args) => r?,
        got = signals.recv() => {
            say(format_args!("SIG{} while waiting for lock {:?}; giving up", got.name(), args.name));
            return Ok(128 + got.number());
        }
    };
    let Some((guard, token)) = acquired else {
        let waited = args
            .wait
            .map_or(0, |w| i64::try_from(w.as_millis()).unwrap_or(i64::MAX));
        say(format_args!(
            "lock {:?} is busy (gave up after {})",
            args.name,
            format_duration_ms(waited)
        ));
        return Ok(args.conflict_exit);
    };

    let mut command = tokio::process::Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("REDISSON_LOCK_NAME", &args.name)
        .env("REDISSON_LOCK_KIND", args.kind.as_str())
        .env("REDISSON_LOCK_OWNER", guard.field());
    match token {
        Some(token) => command.env("REDISSON_LOCK_TOKEN", token.to_string()),
        None => command.env_remove("REDISSON_LOCK_TOKEN"),
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let status = if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND_COMMAND
            } else {
                exit::CANNOT_EXECUTE
            };
            say(format_args!("cannot run {:?}: {e}", args.command[0]));
            if let Err(e) = guard.unlock().await {
                say(format_args!("could not release lock {:?}: {e}", args.name));
            }
            return Ok(status);
        }
    };
    let pid = child.id();

    let lost = guard.lost();
    tokio::pin!(lost);
    let mut check = tokio::time::interval(args.check);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    check.tick().await;
    let mut was_lost = false;
    let mut kill_at: Option<Instant> = None;

    let status = loop {
        let why_lost = tokio::select! {
            status = child.wait() => match status {
                Ok(status) => break Some(status),
                Err(e) => {
                    say(format_args!("lost track of the command: {e}"));
                    break None;
                }
            },
            _ = &mut lost, if !was_lost => "it could no longer be renewed or its lease ran out",
            _ = check.tick(), if !was_lost => match guard.is_held().await {
                Ok(false) => "it is no longer held in Redis (expired or force-unlocked)",
                // Unreachable Redis: the watchdog's lost() decides, at the
                // latest when the lease can have run out.
                Ok(true) | Err(_) => continue,
            },
            got = signals.recv() => {
                if got != Got::Int {
                    if let Some(pid) = pid {
                        send_signal(pid, got.name()).await;
                    }
                }
                // INT (Ctrl-C) reached the command from the terminal already;
                // the lock is released once the command ends.
                continue;
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                say("grace period over; sending SIGKILL");
                let _ = child.start_kill();
                kill_at = None;
                continue;
            }
        };
        was_lost = true;
        say(format_args!(
            "lock {:?} lost while the command ran: {why_lost}; sending SIG{} to the command",
            args.name, args.signal
        ));
        let sent = match pid {
            Some(pid) if args.signal != "KILL" && args.signal != "9" => {
                send_signal(pid, &args.signal).await
            }
            _ => false,
        };
        if sent {
            kill_at = Some(Instant::now() + args.grace);
        } else {
            let _ = child.start_kill();
        }
    };

    let code = status.map_or(exit::SOFTWARE, status_code);
    if was_lost {
        // Normally not held any more; if the lock only became uncertain and
        // is still ours, this releases it.
        let _ = guard.unlock().await;
        return Ok(exit::LOST);
    }
    match guard.unlock().await {
        Ok(()) => Ok(code),
        Err(e @ Error::NotHeld { .. }) => {
            say(format_args!(
                "lock {:?} was no longer held when the command ended ({e})",
                args.name
            ));
            Ok(exit::LOST)
        }
        Err(e) => {
            say(format_args!(
                "could not release lock {:?} ({e}); it expires by its lease",
                args.name
            ));
            Ok(code)
        }
    }
}

/// Sleep until `at` (forever for `None`).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
