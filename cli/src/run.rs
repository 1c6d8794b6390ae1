//! `run NAME -- COMMAND...`: flock-style, on a Redis lock.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use redisson_lock::{AnyKind, Client, Error, Lock, LockGuard, LostReason};
use tokio::signal::unix::{signal, Signal as Handler, SignalKind};
use tokio::time::Instant;

use crate::args::{format_duration_ms, Global, LockKind, RunArgs};
use crate::exit::{self, CliError, CliResult};
use crate::guardian::{Guardian, Release, Target};

/// The signals the tool handles itself while it holds or waits for a lock,
/// so that it can release the lock before it exits.
pub struct Signals {
    int: Handler,
    term: Handler,
    hup: Handler,
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

    fn signal(self) -> Signal {
        match self {
            Got::Hup => Signal::SIGHUP,
            Got::Int => Signal::SIGINT,
            Got::Term => Signal::SIGTERM,
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
pub(crate) fn handle(client: &Client, kind: LockKind, name: &str) -> CliResult<Lock<AnyKind>> {
    Ok(match kind {
        LockKind::Rlock => client.lock(name)?.into_erased(),
        LockKind::NonReentrant => client.non_reentrant_lock(name)?.into_erased(),
        LockKind::Fair => client.fair_lock(name)?.into_erased(),
        LockKind::NonReentrantFair => client.non_reentrant_fair_lock(name)?.into_erased(),
        LockKind::Read => client.read_write_lock(name)?.read().into_erased(),
        LockKind::Write => client.read_write_lock(name)?.write().into_erased(),
        LockKind::Spin => client.spin_lock(name)?.into_erased(),
        LockKind::Fenced => client.fenced_lock(name)?.into_erased(),
    })
}

/// Take the lock as asked: `None` if `--wait` ran out.
async fn acquire(
    client: &Client,
    args: &RunArgs,
) -> CliResult<Option<(LockGuard<AnyKind>, Option<i64>)>> {
    if args.kind == LockKind::Fenced {
        let lock = client.fenced_lock(&args.name)?;
        let guard = match (args.wait(), args.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_for_with_lease(wait, lease).await?,
        };
        return Ok(guard.map(|g| {
            let token = g.fencing_token();
            (g.into_erased(), Some(token))
        }));
    }
    let lock = handle(client, args.kind, &args.name)?;
    let guard = match (args.wait(), args.lease) {
        (None, None) => Some(lock.lock().await?),
        (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
        (Some(wait), None) => lock.try_lock_for(wait).await?,
        (Some(wait), Some(lease)) => lock.try_lock_for_with_lease(wait, lease).await?,
    };
    Ok(guard.map(|g| (g, None)))
}

/// Whether any process of the command's group is left ([`Target::Group`]:
/// the command, and whatever it starts that does not leave the group; a
/// daemon that calls setsid does). Only once the command itself has been
/// waited for: this reaps the group's processes that are our children
/// (orphans, on Linux, come to us as their subreaper), and would otherwise
/// take the command's own status from tokio. With `--foreground`
/// ([`Target::Process`]) only the command is followed: nothing is left.
fn alive_after_leader(target: Target) -> bool {
    let Target::Group(group) = target else {
        return false;
    };
    while let Ok(status) = waitpid(Pid::from_raw(-group.as_raw()), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
    killpg(group, None::<Signal>) != Err(Errno::ESRCH)
}

/// Why the lock was lost, for people.
fn lost_text(reason: LostReason) -> String {
    match reason {
        LostReason::ForceUnlocked => "it was force-unlocked through this tool".into(),
        LostReason::Gone => "it was found gone from Redis (force-unlocked by another client, \
                             deleted, or expired)"
            .into(),
        LostReason::NotRenewed => "it could not be renewed before its lease could have run out \
                                   (Redis unreachable or stalled)"
            .into(),
        LostReason::LeaseEnded => "its --lease ran out".into(),
        other => other.to_string(),
    }
}

/// Orphans of the command's group come to this process rather than to init,
/// so that the group's end can be seen (zombies count as members until
/// reaped, and init reaps when it gets to it). Linux only; elsewhere a
/// straggler's zombie can delay the end by up to `--grace`, after which the
/// group is killed anyway.
fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
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
pub async fn run(
    client: &Client,
    global: &Global,
    args: &RunArgs,
    signals: &mut Signals,
) -> CliResult<u8> {
    let acquired = tokio::select! {
        r = acquire(client, args) => r?,
        got = signals.recv() => {
            say(format_args!("SIG{} while waiting for lock {:?}; giving up", got.name(), args.name));
            return Ok(128 + got.number());
        }
    };
    let Some((guard, token)) = acquired else {
        let waited = args
            .wait()
            .map_or(0, |w| i64::try_from(w.as_millis()).unwrap_or(i64::MAX));
        say(format_args!(
            "lock {:?} is busy (gave up after {})",
            args.name,
            format_duration_ms(waited)
        ));
        return Ok(args.conflict_exit);
    };

    let mut command = tokio::process::Command::new(&args.command[0]);
    if !args.foreground {
        // A group of its own, so that a lost lock or a signal reaches
        // everything the command started, not only the command.
        command.process_group(0);
        become_subreaper();
    }
    command
        .args(&args.command[1..])
        .env("REDISSON_LOCK_NAME", &args.name)
        .env("REDISSON_LOCK_KIND", args.kind.as_str())
        .env("REDISSON_LOCK_OWNER", guard.field());
    match token {
        Some(token) => command.env("REDISSON_LOCK_TOKEN", token.to_string()),
        None => command.env_remove("REDISSON_LOCK_TOKEN"),
    };
    let foreground = args.foreground;
    let spawned =
        command.spawn().and_then(
            |child| match child.id().and_then(|id| i32::try_from(id).ok()) {
                Some(pid) if foreground => Ok((child, Target::Process(Pid::from_raw(pid)))),
                Some(pid) => Ok((child, Target::Group(Pid::from_raw(pid)))),
                None => Err(std::io::Error::other("the command has no process id")),
            },
        );
    let (mut child, group) = match spawned {
        Ok(spawned) => spawned,
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

    // If this process dies (even by SIGKILL), the guardian ends the group,
    // then releases this hold.
    let release = Release {
        url: crate::url(global),
        timeout: global.timeout,
        pubsub: global.pubsub,
        watchdog: args.watchdog,
        kind: args.kind,
        name: args.name.clone(),
        prefix: global.prefix.clone(),
        client_id: client.id(),
        owner: guard.owner(),
    };
    let guardian = match Guardian::start(group, args.signal, args.grace, Some(&release)) {
        Ok(guardian) => Some(guardian),
        Err(e) => {
            say(format_args!(
                "cannot watch over the command ({e}): it would outlive this tool if killed"
            ));
            None
        }
    };

    let lost = guard.lost();
    tokio::pin!(lost);
    let mut check = tokio::time::interval(args.check);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    check.tick().await;
    let mut was_lost = false;
    // The command itself has ended (`None` inside: we lost track of it).
    let mut leader: Option<Option<ExitStatus>> = None;
    // A signal went to the group (lock lost, or passed on): from then on the
    // lock is kept until the whole group is gone, not only the command.
    let mut stopping = false;
    let mut kill_at: Option<Instant> = None;
    let mut killed_at: Option<Instant> = None;

    let status = loop {
        if let Some(status) = leader {
            if !stopping || !alive_after_leader(group) {
                break status;
            }
            match (kill_at, killed_at) {
                // Processes in D state, or zombies of a parent outside the
                // group, may outlive SIGKILL for a while: don't wait forever.
                (_, Some(at)) if at.elapsed() > KILL_WAIT => {
                    say(format_args!(
                        "processes of {} are still there after SIGKILL; going on",
                        group.describe()
                    ));
                    break status;
                }
                // What a passed-on signal left behind gets --grace from now.
                (None, None) => kill_at = Some(Instant::now() + args.grace),
                _ => {}
            }
        }
        let why_lost = tokio::select! {
            status = child.wait(), if leader.is_none() => {
                leader = Some(match status {
                    Ok(status) => Some(status),
                    Err(e) => {
                        say(format_args!("lost track of the command: {e}"));
                        None
                    }
                });
                continue;
            }
            reason = &mut lost, if !was_lost => lost_text(reason),
            _ = check.tick(), if !was_lost => match guard.is_held().await {
                Ok(false) => guard.lost_reason().map_or_else(
                    || "it is no longer held in Redis (force-unlocked by another client, \
                        deleted, or expired)"
                        .to_owned(),
                    lost_text,
                ),
                // Unreachable Redis: the watchdog's lost() decides, at the
                // latest when the lease can have run out.
                Ok(true) | Err(_) => continue,
            },
            got = signals.recv() => {
                // Ctrl-C reaches only this process when the command has a
                // group of its own: INT is passed on like TERM and HUP. In
                // the foreground the terminal sent INT to the command too:
                // passing it on would deliver it twice.
                if !(foreground && got == Got::Int) {
                    group.signal(got.signal());
                }
                stopping = true;
                continue;
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                say(format_args!("grace period over; sending SIGKILL to {}", group.describe()));
                if !group.signal(Signal::SIGKILL) && leader.is_none() {
                    let _ = child.start_kill();
                }
                kill_at = None;
                killed_at = Some(Instant::now());
                continue;
            }
            // Nothing tells when the last process of a group ends: look.
            _ = tokio::time::sleep(GROUP_POLL), if leader.is_some() => continue,
        };
        was_lost = true;
        stopping = true;
        say(format_args!(
            "lock {:?} lost while the command ran: {why_lost}; sending {} to {}",
            args.name,
            args.signal.as_str(),
            group.describe()
        ));
        if args.signal == Signal::SIGKILL {
            if !group.signal(Signal::SIGKILL) && leader.is_none() {
                let _ = child.start_kill();
            }
            killed_at = Some(Instant::now());
        } else if group.signal(args.signal) {
            kill_at = Some(Instant::now() + args.grace);
        } else if leader.is_none() {
            let _ = child.start_kill();
            killed_at = Some(Instant::now());
        }
    };

    let code = status.map_or(exit::SOFTWARE, status_code);
    let result = if was_lost {
        // Normally not held any more; if the lock only became uncertain and
        // is still ours, this releases it.
        let _ = guard.unlock().await;
        exit::LOST
    } else {
        match guard.unlock().await {
            Ok(()) => code,
            Err(e @ Error::NotHeld { .. }) => {
                say(format_args!(
                    "lock {:?} was no longer held when the command ended ({e})",
                    args.name
                ));
                exit::LOST
            }
            // Refused (an ACL rule) or not answered: the scripts write
            // nothing when refused, so the hold stays until its TTL. The
            // command's status would hide that: the error's status instead.
            Err(e) => {
                say(format_args!(
                    "could not release lock {:?} ({e}); it stays held until its TTL runs out",
                    args.name
                ));
                crate::exit::CliError::Lock(e).status()
            }
        }
    };
    // Only now: killed while releasing, this tool leaves the release to the
    // guardian (a second unlock of the field finds it gone and does nothing).
    if let Some(guardian) = guardian {
        guardian.stand_down();
    }
    Ok(result)
}

/// How often the group is looked at once the command itself has ended.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How long the group may take to go after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Sleep until `at` (forever for `None`).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
