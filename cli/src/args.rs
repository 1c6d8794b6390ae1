//! The command line, with clap's derive: every subcommand has its own
//! `--help`; a usage error exits with 64 (`main` maps clap's errors).

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use clap::{value_parser, Args, Parser, Subcommand, ValueEnum};
use nix::sys::signal::Signal;
use redisson_lock::PubSubMode;

pub use crate::values::format_duration_ms;
use crate::values::{
    parse_check, parse_duration, parse_interval, parse_lease, parse_name, parse_signal,
    parse_timeout, parse_watchdog,
};

/// The default server when neither `--url` nor `REDIS_URL` is given.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

const AFTER_HELP: &str = "\
DURATIONS: 500ms, 10s, 2m, 1h, 1.5s, 1h 30m (a bare number is seconds).

EXIT STATUS:
    0      success (run: COMMAND's own status is passed through)
    1      status: nothing under NAME; force-unlock: nothing was held
    64     usage error
    69     Redis unreachable (connection refused, timeout, server unavailable)
    70     other error
    75     run: the lock could not be had within --wait (see --conflict-exit-code)
    76     run: the lock was lost while COMMAND ran (COMMAND was signalled)
    77     Redis refused the credentials or an ACL rule
    78     invalid configuration (e.g. a bad URL)
    126    run: COMMAND could not be executed
    127    run: COMMAND was not found
    128+N  run: COMMAND was killed by signal N, or the tool by signal N while waiting

'redisson-lock help COMMAND' or 'redisson-lock COMMAND --help' shows a command's options.";

/// Run commands under Redisson-compatible Redis locks, and inspect them.
#[derive(Debug, Parser)]
#[command(
    name = "redisson-lock",
    version,
    after_help = AFTER_HELP,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes, before or after its name.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// The server (`--help` shows the forms).
    #[arg(
        short = 'u',
        long,
        global = true,
        value_name = "URL",
        help = "redis://[user:password@]host[:port][/db], rediss://, redis-cluster://, \
                redis-sentinel:// (default: $REDIS_URL, else redis://127.0.0.1:6379)"
    )]
    pub url: Option<String>,
    /// Reply timeout per Redis command (default 3s)
    #[arg(long, global = true, value_name = "D", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Pub/sub mode (default: auto)
    #[arg(
        long,
        global = true,
        value_name = "MODE",
        value_enum,
        ignore_case = true
    )]
    pub pubsub: Option<PubSub>,
    /// Machine-readable output (status, watch, list, force-unlock)
    #[arg(long, global = true)]
    pub json: bool,
    /// Prefix every NAME (and list's PATTERN) with P in Redis, as a Java
    /// service's Redisson `NameMapper` does (e.g. `staging:`); names are
    /// shown without it
    #[arg(long, global = true, value_name = "P", value_parser = parse_name)]
    pub prefix: Option<String>,
}

/// What the user asked for.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND while holding the lock NAME (flock-style)
    #[command(
        long_about = "Take the lock, run COMMAND while holding it, release it when COMMAND ends, \
and exit with COMMAND's status.

COMMAND runs in a process group of its own. If the lock is lost while it runs (renewal found it \
gone, Redis stayed unreachable until the lease could have run out, someone force-unlocked it, or \
the lease ended), the whole group is sent --signal (default TERM), then KILL after --grace \
(default 10s), and the exit status is 76. SIGINT (Ctrl-C), SIGTERM and SIGHUP are passed on to \
the group; the lock is released once the group has ended (what is left of it is killed --grace \
after COMMAND itself ended). If this tool dies while COMMAND runs (even by SIGKILL), a guardian \
process sends the group --signal, then KILL after --grace, and then releases the lock. Not being \
the terminal's foreground \
job, COMMAND cannot read from the terminal: give it its input from a file or a pipe, or use \
--foreground.

With --foreground, COMMAND runs in this tool's own process group, as with timeout --foreground: \
it can read from the terminal and gets Ctrl-C (and the terminal's other signals) directly, and \
Ctrl-C is not passed on a second time. What is given up: a lost lock, TERM or HUP passed on, and \
the guardian cannot signal a process group: on Linux they reach COMMAND and the processes it \
started that are still its descendants then (found in /proc), elsewhere COMMAND alone; what it \
started is not waited for.

COMMAND gets REDISSON_LOCK_NAME, REDISSON_LOCK_KIND, REDISSON_LOCK_OWNER and, for a fenced \
lock, REDISSON_LOCK_TOKEN in its environment."
    )]
    Run(RunArgs),
    /// Show what is in Redis under NAME
    #[command(
        visible_alias = "inspect",
        long_about = "Show what is in Redis under NAME: the kind, holders (client id, owner id, \
hold count), TTL, the fair queue with each waiter's deadline, readers with their timeouts, the \
last fencing token, permits, the latch count, and the subscribers of the channel.

Exit status 0 if anything exists under NAME, 1 if nothing does."
    )]
    Status(StatusArgs),
    /// Redraw the status of NAME every --interval until Ctrl-C
    #[command(
        long_about = "Redraw the status of NAME every --interval (default 1s) until \
Ctrl-C, or --count frames. With --json, one JSON object per line."
    )]
    Watch(WatchArgs),
    /// Find lock-like keys with SCAN (never KEYS) and show their kind
    #[command(
        visible_alias = "ls",
        long_about = "Find lock-like keys with SCAN (never KEYS) and show their kind. \
Semaphores and latches are plain counters, like any integer key: --counters lists those too."
    )]
    List(ListArgs),
    /// Delete whoever holds NAME, with the publish its waiters expect
    #[command(
        visible_alias = "unlock",
        long_about = "Delete whoever holds NAME, with the publish its waiters expect (the kind \
is detected from Redis unless given).

Exit status 0 if a hold was removed, 1 if there was none."
    )]
    ForceUnlock(ForceUnlockArgs),
    /// Print a shell completion script (e.g. redisson-lock completions bash)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the version
    #[command(hide = true)]
    Version,
}

/// `run NAME [options] -- COMMAND...`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock's name (its Redis key)
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// Lock kind
    #[arg(
        short,
        long,
        value_name = "K",
        value_enum,
        ignore_case = true,
        default_value_t = LockKind::Rlock
    )]
    pub kind: LockKind,
    /// Give up after D, with status 75 (default: wait as long as it takes; 0: try once)
    #[arg(short, long, value_name = "D", value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// Try once, do not wait (the same as --wait 0)
    #[arg(short, long, alias = "nb", conflicts_with = "wait")]
    pub nonblock: bool,
    /// The lock expires D after it is taken, and COMMAND is signalled then
    /// (default: renewed while COMMAND runs)
    #[arg(short, long, value_name = "D", value_parser = parse_lease)]
    pub lease: Option<Duration>,
    /// Signal for a lost lock: TERM, INT, HUP, KILL, USR1, 9, ...
    #[arg(short, long, value_name = "SIG", value_parser = parse_signal, default_value = "TERM")]
    pub signal: Signal,
    /// Time between that signal and KILL
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "10s")]
    pub grace: Duration,
    /// How often the hold is checked in Redis, besides the watchdog
    #[arg(long, value_name = "D", value_parser = parse_check, default_value = "1s")]
    pub check: Duration,
    /// Lease of a renewed lock, renewed every third of it (default 30s)
    #[arg(long, value_name = "D", value_parser = parse_watchdog)]
    pub watchdog: Option<Duration>,
    /// Exit status when the lock is busy
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = crate::exit::BUSY)]
    pub conflict_exit: u8,
    /// Run COMMAND in this tool's process group, so that it can read from
    /// the terminal and gets Ctrl-C from it (as timeout --foreground); a
    /// lost lock, a signal or this tool's death then reach COMMAND and,
    /// on Linux, its descendants still alive then (elsewhere COMMAND alone)
    #[arg(long)]
    pub foreground: bool,
    /// The command and its arguments, after --
    #[arg(
        last = true,
        required = true,
        value_name = "COMMAND",
        value_parser = value_parser!(OsString)
    )]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// `--wait`, or zero for `--nonblock`; `None`: as long as it takes.
    pub fn wait(&self) -> Option<Duration> {
        if self.nonblock {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }
}

/// `status NAME` / `inspect NAME`
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's (or semaphore's, latch's) name
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// Read what is there as this layout instead of guessing
    #[arg(short, long, value_name = "K", value_enum, ignore_case = true)]
    pub kind: Option<StatusKind>,
}

/// `watch NAME`
#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub status: StatusArgs,
    /// Time between frames
    #[arg(short = 'n', long, value_name = "D", value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Stop after N frames
    #[arg(long = "count", value_name = "N", value_parser = value_parser!(u64).range(1..))]
    pub frames: Option<u64>,
}

/// `list [PATTERN]`
#[derive(Debug, Args)]
pub struct ListArgs {
    /// A SCAN MATCH pattern
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Also list integer strings (semaphores and latches look like any counter)
    #[arg(long)]
    pub counters: bool,
}

/// `force-unlock NAME`
#[derive(Debug, Args)]
pub struct ForceUnlockArgs {
    /// The lock's name
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// Lock kind (default: detected from what is in Redis)
    #[arg(short, long, value_name = "K", value_enum, ignore_case = true)]
    pub kind: Option<LockKind>,
}

/// `--pubsub`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PubSub {
    Auto,
    Classic,
    Sharded,
    Both,
}

impl From<PubSub> for PubSubMode {
    fn from(mode: PubSub) -> PubSubMode {
        match mode {
            PubSub::Auto => PubSubMode::Auto,
            PubSub::Classic => PubSubMode::Classic,
            PubSub::Sharded => PubSubMode::Sharded,
            PubSub::Both => PubSubMode::Both,
        }
    }
}

/// The lock kinds `run` and `force-unlock` can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LockKind {
    #[value(alias = "lock", alias = "reentrant")]
    Rlock,
    #[value(alias = "nonreentrant")]
    NonReentrant,
    #[value(alias = "fair-lock")]
    Fair,
    #[value(alias = "nonreentrant-fair", alias = "non-reentrant-fair-lock")]
    NonReentrantFair,
    Read,
    Write,
    #[value(alias = "spin-lock")]
    Spin,
    #[value(alias = "fenced-lock")]
    Fenced,
}

impl LockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Rlock => "rlock",
            LockKind::NonReentrant => "non-reentrant",
            LockKind::Fair => "fair",
            LockKind::NonReentrantFair => "non-reentrant-fair",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Spin => "spin",
            LockKind::Fenced => "fenced",
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How `status --kind` reads a name: the layouts, not the Java types (a
/// spin lock and a non-reentrant lock are RLock's layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusKind {
    #[value(
        alias = "lock",
        alias = "reentrant",
        alias = "non-reentrant",
        alias = "spin"
    )]
    Rlock,
    #[value(alias = "non-reentrant-fair")]
    Fair,
    #[value(
        name = "rwlock",
        alias = "read",
        alias = "write",
        alias = "read-write",
        alias = "readwrite"
    )]
    ReadWrite,
    Fenced,
    Semaphore,
    #[value(alias = "permit-expirable-semaphore")]
    PermitSemaphore,
    #[value(alias = "count-down-latch", alias = "countdownlatch")]
    Latch,
}

impl StatusKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusKind::Rlock => "rlock",
            StatusKind::Fair => "fair",
            StatusKind::ReadWrite => "rwlock",
            StatusKind::Fenced => "fenced",
            StatusKind::Semaphore => "semaphore",
            StatusKind::PermitSemaphore => "permit-semaphore",
            StatusKind::Latch => "latch",
        }
    }
}

/// Parse the command line (with the program name first). `--json` is
/// refused for `run`, which prints nothing of its own.
pub fn parse<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv)?;
    if cli.global.json && matches!(cli.command, Command::Run(_)) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "run does not take --json\n",
        ));
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse_args(s: &[&str]) -> Result<Cli, clap::Error> {
        parse(std::iter::once("redisson-lock").chain(s.iter().copied()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_line() {
        let cli = parse_args(&[
            "--url",
            "redis://x",
            "run",
            "jobs",
            "--kind=fair",
            "-w",
            "2s",
            "--signal",
            "SIGINT",
            "--",
            "sh",
            "-c",
            "echo --wait",
        ])
        .unwrap();
        assert_eq!(cli.global.url.as_deref(), Some("redis://x"));
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.name, "jobs");
        assert_eq!(run.kind, LockKind::Fair);
        assert_eq!(run.wait(), Some(Duration::from_secs(2)));
        assert_eq!(run.signal, Signal::SIGINT);
        assert_eq!(run.grace, Duration::from_secs(10));
        assert_eq!(run.check, Duration::from_secs(1));
        assert_eq!(run.command, ["sh", "-c", "echo --wait"]);
        assert_eq!(run.conflict_exit, 75);
    }

    #[test]
    fn flock_habits() {
        let wait = |args: &[&str]| match parse_args(args).unwrap().command {
            Command::Run(run) => run.wait(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            wait(&["run", "x", "-n", "--", "true"]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            wait(&["run", "x", "--nonblock", "--", "true"]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            wait(&["run", "x", "-w2s", "--", "true"]),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            wait(&["run", "-w", "500ms", "x", "--", "true"]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(wait(&["run", "x", "--", "true"]), None);
        // Options before the subcommand, the kind in any case.
        let cli = parse_args(&["--json", "status", "x", "-k", "READ"]).unwrap();
        assert!(cli.global.json);
        assert!(matches!(
            cli.command,
            Command::Status(StatusArgs {
                kind: Some(StatusKind::ReadWrite),
                ..
            })
        ));
    }

    #[test]
    fn refusals() {
        for bad in [
            &["run", "x"][..],
            &["run", "--", "true"],
            &["run", "x", "--json", "--", "true"],
            &["run", "x", "-n", "-w", "1s", "--", "true"],
            &["run", "x", "--check", "1ms", "--", "true"],
            &["run", "", "--", "true"],
            &["status"],
            &["status", "a", "b"],
            &["status", "a", "--wait", "1s"],
            &["status", "a", "--", "true"],
            &["list", "--kind", "fair"],
            &["list", "a", "b"],
            &["watch", "x", "--count", "0"],
            &["frobnicate"],
            &["status", "x", "--json=yes"],
            &["run", "x", "--kind", "mutex", "--", "true"],
            &["run", "x", "--signal", "TERM;rm", "--", "true"],
            &["run", "x", "-E", "256", "--", "true"],
            &[],
        ] {
            assert!(parse_args(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn others() {
        let Command::List(list) = parse_args(&["ls"]).unwrap().command else {
            panic!()
        };
        assert_eq!(list.pattern, "*");
        let cli = parse_args(&["inspect", "x", "--kind", "read", "--json"]).unwrap();
        assert!(cli.global.json);
        let Command::Status(s) = cli.command else {
            panic!()
        };
        assert_eq!(s.kind, Some(StatusKind::ReadWrite));
        let Command::Watch(w) = parse_args(&["watch", "x", "-n", "200ms"]).unwrap().command else {
            panic!()
        };
        assert_eq!(w.interval, Duration::from_millis(200));
        assert_eq!(
            parse_args(&["-h"]).unwrap_err().kind(),
            clap::error::ErrorKind::DisplayHelp
        );
        assert_eq!(
            parse_args(&["run", "--help"]).unwrap_err().kind(),
            clap::error::ErrorKind::DisplayHelp
        );
        for (line, kind) in [
            (["unlock", "x", "--kind", "write"], LockKind::Write),
            (["force-unlock", "x", "-k", "Spin-Lock"], LockKind::Spin),
        ] {
            let Command::ForceUnlock(args) = parse_args(&line).unwrap().command else {
                panic!("{line:?}")
            };
            assert_eq!(args.kind, Some(kind), "{line:?}");
        }
    }
}
