//! Command-line parsing, by hand: a handful of subcommands with a few
//! options each do not need a parser crate.

use std::fmt;
use std::time::Duration;

use redisson_lock::PubSubMode;

/// The default server when neither `--url` nor `REDIS_URL` is given.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// What the user asked for.
#[derive(Debug)]
pub enum Command {
    Help,
    Version,
    Run(RunArgs),
    Status(StatusArgs),
    Watch(WatchArgs),
    List(ListArgs),
    ForceUnlock(ForceUnlockArgs),
}

/// Options every subcommand takes.
#[derive(Debug, Clone)]
pub struct Global {
    /// `--url`; `None`: `REDIS_URL`, else [`DEFAULT_URL`].
    pub url: Option<String>,
    /// `--timeout`: per Redis command.
    pub timeout: Option<Duration>,
    /// `--pubsub`.
    pub pubsub: Option<PubSubMode>,
    /// `--json`.
    pub json: bool,
}

/// `run NAME [options] -- COMMAND...`
#[derive(Debug)]
pub struct RunArgs {
    pub global: Global,
    pub name: String,
    pub kind: LockKind,
    /// `None`: wait as long as it takes.
    pub wait: Option<Duration>,
    /// `None`: watchdog-renewed.
    pub lease: Option<Duration>,
    /// Signal sent to the command when the lock is lost (name without
    /// `SIG`, or a number).
    pub signal: String,
    /// Time between that signal and SIGKILL.
    pub grace: Duration,
    /// How often the hold is checked in Redis (besides the watchdog).
    pub check: Duration,
    /// `lock_watchdog_timeout`.
    pub watchdog: Option<Duration>,
    /// Exit status when the lock could not be had.
    pub conflict_exit: u8,
    pub command: Vec<String>,
}

/// `status NAME` / `inspect NAME`
#[derive(Debug)]
pub struct StatusArgs {
    pub global: Global,
    pub name: String,
    /// `--kind`: read what is there as this kind instead of guessing.
    pub kind: Option<StatusKind>,
}

/// `watch NAME`
#[derive(Debug)]
pub struct WatchArgs {
    pub status: StatusArgs,
    pub interval: Duration,
    /// `--count N`: stop after N frames (for scripts and tests).
    pub frames: Option<u64>,
}

/// `list [PATTERN]`
#[derive(Debug)]
pub struct ListArgs {
    pub global: Global,
    pub pattern: String,
    /// Also list integer strings (semaphores and latches look like any counter).
    pub counters: bool,
}

/// `force-unlock NAME`
#[derive(Debug)]
pub struct ForceUnlockArgs {
    pub global: Global,
    pub name: String,
    pub kind: Option<LockKind>,
}

/// The lock kinds `run` and `force-unlock` can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Rlock,
    NonReentrant,
    Fair,
    NonReentrantFair,
    Read,
    Write,
    Spin,
    Fenced,
}

impl LockKind {
    pub const ALL: &'static [LockKind] = &[
        LockKind::Rlock,
        LockKind::NonReentrant,
        LockKind::Fair,
        LockKind::NonReentrantFair,
        LockKind::Read,
        LockKind::Write,
        LockKind::Spin,
        LockKind::Fenced,
    ];

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

    fn parse(text: &str) -> Result<LockKind, UsageError> {
        let wanted = text.to_ascii_lowercase();
        let alias = match wanted.as_str() {
            "lock" | "reentrant" => "rlock",
            "nonreentrant" => "non-reentrant",
            "fair-lock" => "fair",
            "nonreentrant-fair" | "non-reentrant-fair-lock" => "non-reentrant-fair",
            "spin-lock" => "spin",
            "fenced-lock" => "fenced",
            other => other,
        };
        LockKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == alias)
            .ok_or_else(|| {
                UsageError(format!(
                    "unknown lock kind {text:?}; expected one of: {}",
                    LockKind::ALL
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How `status --kind` reads a name: the layouts, not the Java types (a
/// spin lock and a non-reentrant lock are RLock's layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    Rlock,
    Fair,
    ReadWrite,
    Fenced,
    Semaphore,
    PermitSemaphore,
    Latch,
}

impl StatusKind {
    pub const ALL: &'static [StatusKind] = &[
        StatusKind::Rlock,
        StatusKind::Fair,
        StatusKind::ReadWrite,
        StatusKind::Fenced,
        StatusKind::Semaphore,
        StatusKind::PermitSemaphore,
        StatusKind::Latch,
    ];

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

    fn parse(text: &str) -> Result<StatusKind, UsageError> {
        let wanted = text.to_ascii_lowercase();
        let alias = match wanted.as_str() {
            "lock" | "reentrant" | "non-reentrant" | "spin" => "rlock",
            "non-reentrant-fair" => "fair",
            "read" | "write" | "read-write" | "readwrite" => "rwlock",
            "permit-expirable-semaphore" => "permit-semaphore",
            "count-down-latch" | "countdownlatch" => "latch",
            other => other,
        };
        StatusKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == alias)
            .ok_or_else(|| {
                UsageError(format!(
                    "unknown kind {text:?}; expected one of: {}",
                    StatusKind::ALL
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

/// A command line that makes no sense; exit status 64.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<UsageError> for crate::exit::CliError {
    fn from(e: UsageError) -> Self {
        crate::exit::CliError::Usage(e.0)
    }
}

/// Parse a duration: `500ms`, `10s`, `2m`, `1h`, `1.5s`; a bare number is
/// seconds (`0` is zero).
pub fn parse_duration(text: &str) -> Result<Duration, UsageError> {
    let bad = || {
        UsageError(format!(
            "invalid duration {text:?}: expected a number with a unit, like 500ms, 10s, 2m or 1h"
        ))
    };
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds_per_unit = match unit.trim() {
        "ms" => 0.001,
        "" | "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(bad()),
    };
    let seconds = value * seconds_per_unit;
    if !seconds.is_finite() || seconds > 3_155_760_000.0 {
        return Err(UsageError(format!(
            "duration {text:?} is too long (at most 100 years)"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A duration for humans: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn format_duration_ms(ms: i64) -> String {
    let negative = ms < 0;
    let ms = ms.unsigned_abs();
    let text = if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else if ms < 86_400_000 {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    } else {
        format!("{}d{:02}h", ms / 86_400_000, (ms % 86_400_000) / 3_600_000)
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}

fn parse_pubsub(text: &str) -> Result<PubSubMode, UsageError> {
    match text.to_ascii_lowercase().as_str() {
        "auto" => Ok(PubSubMode::Auto),
        "classic" => Ok(PubSubMode::Classic),
        "sharded" => Ok(PubSubMode::Sharded),
        "both" => Ok(PubSubMode::Both),
        _ => Err(UsageError(format!(
            "invalid --pubsub {text:?}: expected auto, classic, sharded or both"
        ))),
    }
}

/// A signal for `--signal`: `TERM`, `SIGTERM`, `term` or `15`; returned
/// as the name (without `SIG`) or the number.
fn parse_signal(text: &str) -> Result<String, UsageError> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let valid = if name.chars().all(|c| c.is_ascii_digit()) {
        matches!(name.parse::<u32>(), Ok(1..=64))
    } else {
        !name.is_empty()
            && name.len() <= 10
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '+' || c == '-')
    };
    if valid {
        Ok(name.to_owned())
    } else {
        Err(UsageError(format!(
            "invalid --signal {text:?}: expected a name like TERM, INT, HUP, KILL, or a number"
        )))
    }
}

/// Arguments left to read, with `--opt=value` split.
struct Cursor {
    args: std::vec::IntoIter<String>,
    /// The value glued to the option just read (`--wait=5s`).
    glued: Option<String>,
}

impl Cursor {
    fn next(&mut self) -> Option<String> {
        self.args.next()
    }

    /// The value of option `opt`: glued, else the next argument.
    fn value(&mut self, opt: &str) -> Result<String, UsageError> {
        if let Some(v) = self.glued.take() {
            return Ok(v);
        }
        self.args
            .next()
            .ok_or_else(|| UsageError(format!("option {opt} needs a value")))
    }

    fn rest(&mut self) -> Vec<String> {
        self.args.by_ref().collect()
    }
}

/// Options as read, before we know which subcommand accepts which.
#[derive(Default)]
struct Raw {
    url: Option<String>,
    timeout: Option<Duration>,
    pubsub: Option<PubSubMode>,
    json: bool,
    kind: Option<String>,
    wait: Option<Duration>,
    lease: Option<Duration>,
    signal: Option<String>,
    grace: Option<Duration>,
    check: Option<Duration>,
    watchdog: Option<Duration>,
    conflict_exit: Option<u8>,
    interval: Option<Duration>,
    frames: Option<u64>,
    counters: bool,
    help: bool,
    version: bool,
    /// Options given, for "not accepted by this subcommand" errors.
    seen: Vec<&'static str>,
    positionals: Vec<String>,
    command: Option<Vec<String>>,
}

/// Parse the arguments after the program name.
pub fn parse(args: Vec<String>) -> Result<Command, UsageError> {
    let mut cur = Cursor {
        args: args.into_iter(),
        glued: None,
    };
    let mut raw = Raw::default();
    while let Some(arg) = cur.next() {
        if arg == "--" {
            raw.command = Some(cur.rest());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            raw.positionals.push(arg);
            continue;
        }
        let (opt, glued) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        cur.glued = glued;
        let name: &'static str = match opt.as_str() {
            "-h" | "--help" => {
                raw.help = true;
                "--help"
            }
            "-V" | "--version" => {
                raw.version = true;
                "--version"
            }
            "-u" | "--url" => {
                raw.url = Some(cur.value(&opt)?);
                "--url"
            }
            "--timeout" => {
                raw.timeout = Some(parse_duration(&cur.value(&opt)?)?);
                "--timeout"
            }
            "--pubsub" => {
                raw.pubsub = Some(parse_pubsub(&cur.value(&opt)?)?);
                "--pubsub"
            }
            "--json" => "--json",
            "-k" | "--kind" => {
                raw.kind = Some(cur.value(&opt)?);
                "--kind"
            }
            "-w" | "--wait" => {
                raw.wait = Some(parse_duration(&cur.value(&opt)?)?);
                "--wait"
            }
            "-l" | "--lease" => {
                raw.lease = Some(parse_duration(&cur.value(&opt)?)?);
                "--lease"
            }
            "-s" | "--signal" => {
                raw.signal = Some(parse_signal(&cur.value(&opt)?)?);
                "--signal"
            }
            "--grace" => {
                raw.grace = Some(parse_duration(&cur.value(&opt)?)?);
                "--grace"
            }
            "--check" => {
                raw.check = Some(parse_duration(&cur.value(&opt)?)?);
                "--check"
            }
            "--watchdog" => {
                raw.watchdog = Some(parse_duration(&cur.value(&opt)?)?);
                "--watchdog"
            }
            "-E" | "--conflict-exit-code" => {
                let v = cur.value(&opt)?;
                raw.conflict_exit =
                    Some(v.parse::<u8>().map_err(|_| {
                        UsageError(format!("invalid {opt} {v:?}: expected 0 to 255"))
                    })?);
                "--conflict-exit-code"
            }
            "-n" | "--interval" => {
                raw.interval = Some(parse_duration(&cur.value(&opt)?)?);
                "--interval"
            }
            "--count" => {
                let v = cur.value(&opt)?;
                let n = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| UsageError(format!("invalid --count {v:?}")))?;
                raw.frames = Some(n);
                "--count"
            }
            "--counters" => {
                raw.counters = true;
                "--counters"
            }
            _ => return Err(UsageError(format!("unknown option {opt}"))),
        };
        if name == "--json" {
            raw.json = true;
        }
        if let Some(v) = cur.glued.take() {
            return Err(UsageError(format!(
                "option {name} takes no value (got {v:?})"
            )));
        }
        raw.seen.push(name);
    }
    build(raw)
}

fn build(mut raw: Raw) -> Result<Command, UsageError> {
    if raw.help {
        return Ok(Command::Help);
    }
    if raw.version {
        return Ok(Command::Version);
    }
    if raw.positionals.is_empty() {
        return Err(UsageError("no command given".into()));
    }
    let sub = raw.positionals.remove(0);
    let global = Global {
        url: raw.url.take(),
        timeout: raw.timeout,
        pubsub: raw.pubsub,
        json: raw.json,
    };
    const GLOBAL: &[&str] = &["--url", "--timeout", "--pubsub", "--json"];
    let allow = |extra: &[&str], raw: &Raw, sub: &str| -> Result<(), UsageError> {
        for seen in &raw.seen {
            if !GLOBAL.contains(seen) && !extra.contains(seen) {
                return Err(UsageError(format!("{sub} does not take {seen}")));
            }
        }
        Ok(())
    };
    let one_name = |raw: &mut Raw, sub: &str| -> Result<String, UsageError> {
        match raw.positionals.len() {
            0 => Err(UsageError(format!("{sub} needs a lock NAME"))),
            1 => {
                let name = raw.positionals.remove(0);
                if name.is_empty() {
                    Err(UsageError("the lock name must not be empty".into()))
                } else {
                    Ok(name)
                }
            }
            _ => Err(UsageError(format!(
                "{sub} takes one NAME, got {:?}",
                raw.positionals
            ))),
        }
    };
    let no_command = |raw: &Raw, sub: &str| -> Result<(), UsageError> {
        match &raw.command {
            Some(_) => Err(UsageError(format!("{sub} takes no command after --"))),
            None => Ok(()),
        }
    };
    match sub.as_str() {
        "help" => Ok(Command::Help),
        "version" => Ok(Command::Version),
        "run" => {
            allow(
                &[
                    "--kind",
                    "--wait",
                    "--lease",
                    "--signal",
                    "--grace",
                    "--check",
                    "--watchdog",
                    "--conflict-exit-code",
                ],
                &raw,
                "run",
            )?;
            if global.json {
                return Err(UsageError("run does not take --json".into()));
            }
            let name = one_name(&mut raw, "run")?;
            let command = raw.command.take().unwrap_or_default();
            if command.is_empty() {
                return Err(UsageError(
                    "run needs a command after --: run NAME [options] -- COMMAND [ARGS...]".into(),
                ));
            }
            let kind = match raw.kind.as_deref() {
                Some(k) => LockKind::parse(k)?,
                None => LockKind::Rlock,
            };
            if let Some(lease) = raw.lease {
                if lease < Duration::from_millis(1) {
                    return Err(UsageError("--lease must be at least 1ms".into()));
                }
            }
            let check = raw.check.unwrap_or(Duration::from_secs(1));
            if check < Duration::from_millis(10) {
                return Err(UsageError("--check must be at least 10ms".into()));
            }
            Ok(Command::Run(RunArgs {
                global,
                name,
                kind,
                wait: raw.wait,
                lease: raw.lease,
                signal: raw.signal.take().unwrap_or_else(|| "TERM".to_owned()),
                grace: raw.grace.unwrap_or(Duration::from_secs(10)),
                check,
                watchdog: raw.watchdog,
                conflict_exit: raw.conflict_exit.unwrap_or(crate::exit::BUSY),
                command,
            }))
        }
        "status" | "inspect" | "watch" => {
            let watch = sub == "watch";
            if watch {
                allow(&["--kind", "--interval", "--count"], &raw, &sub)?;
            } else {
                allow(&["--kind"], &raw, &sub)?;
            }
            no_command(&raw, &sub)?;
            let name = one_name(&mut raw, &sub)?;
            let kind = raw.kind.as_deref().map(StatusKind::parse).transpose()?;
            let status = StatusArgs { global, name, kind };
            if watch {
                let interval = raw.interval.unwrap_or(Duration::from_secs(1));
                if interval < Duration::from_millis(50) {
                    return Err(UsageError("--interval must be at least 50ms".into()));
                }
                Ok(Command::Watch(WatchArgs {
                    status,
                    interval,
                    frames: raw.frames,
                }))
            } else {
                Ok(Command::Status(status))
            }
        }
        "list" | "ls" => {
            allow(&["--counters"], &raw, "list")?;
            no_command(&raw, "list")?;
            let pattern = match raw.positionals.len() {
                0 => "*".to_owned(),
                1 => raw.positionals.remove(0),
                _ => {
                    return Err(UsageError(format!(
                        "list takes at most one PATTERN, got {:?}",
                        raw.positionals
                    )))
                }
            };
            Ok(Command::List(ListArgs {
                global,
                pattern,
                counters: raw.counters,
            }))
        }
        "force-unlock" | "unlock" => {
            allow(&["--kind"], &raw, "force-unlock")?;
            no_command(&raw, "force-unlock")?;
            let name = one_name(&mut raw, "force-unlock")?;
            let kind = raw.kind.as_deref().map(LockKind::parse).transpose()?;
            Ok(Command::ForceUnlock(ForceUnlockArgs { global, name, kind }))
        }
        other => Err(UsageError(format!("unknown command {other:?}"))),
    }
}

pub const USAGE: &str = "\
redisson-lock: run commands under Redisson-compatible Redis locks, and inspect them

USAGE:
    redisson-lock [GLOBAL OPTIONS] COMMAND [OPTIONS]

COMMANDS:
    run NAME [--kind K] [--wait D] [--lease D] [--signal SIG] [--grace D] -- COMMAND [ARGS...]
        Take the lock, run COMMAND while holding it, release it when COMMAND
        ends, and exit with COMMAND's status. If the lock is lost while COMMAND
        runs, COMMAND is sent SIG (default TERM), then KILL after the grace
        period (default 10s), and the exit status is 76.
          -k, --kind K        rlock (default), non-reentrant, fair,
                              non-reentrant-fair, read, write, spin, fenced
          -w, --wait D        give up after D (default: wait as long as it takes;
                              0: try once); then exit with status 75
          -l, --lease D       the lock expires D after it is taken, and COMMAND is
                              signalled then (default: renewed while COMMAND runs)
          -s, --signal SIG    signal for a lost lock (TERM, INT, HUP, KILL, 9, ...)
              --grace D       time between SIG and KILL (default 10s)
              --check D       how often the hold is checked in Redis (default 1s)
              --watchdog D    lease of a renewed lock, renewed every third (default 30s)
          -E, --conflict-exit-code N   exit status when the lock is busy (default 75)
        COMMAND gets REDISSON_LOCK_NAME, REDISSON_LOCK_KIND, REDISSON_LOCK_OWNER
        and, for a fenced lock, REDISSON_LOCK_TOKEN in its environment.

    status NAME [--kind K] [--json]          (alias: inspect)
        Show what is in Redis under NAME: the kind, holders (client id, owner
        id, hold count), TTL, the fair queue with each waiter's deadline,
        readers with their timeouts, the last fencing token, permits, the
        latch count, and the subscribers of the channel. K forces a layout:
        rlock, fair, rwlock, fenced, semaphore, permit-semaphore, latch.
        Exit status 0 if anything exists under NAME, 1 if nothing does.

    watch NAME [--interval D] [--kind K] [--json] [--count N]
        Redraw the status every D (default 1s) until Ctrl-C (or N frames).
        With --json, one JSON object per line.

    list [PATTERN] [--counters] [--json]     (alias: ls)
        Find lock-like keys with SCAN (never KEYS) and show their kind.
        PATTERN is a SCAN MATCH pattern (default *). Semaphores and latches
        are plain counters, like any integer key: --counters lists those too.

    force-unlock NAME [--kind K] [--json]    (alias: unlock)
        Delete whoever holds NAME, with the publish its waiters expect (the
        kind is detected from Redis unless given). Exit status 0 if a hold
        was removed, 1 if there was none.

GLOBAL OPTIONS:
    -u, --url URL       redis://[user:password@]host[:port][/db], rediss://,
                        redis-cluster://, redis-sentinel://
                        (default: $REDIS_URL, else redis://127.0.0.1:6379)
        --timeout D     reply timeout per Redis command (default 3s)
        --pubsub MODE   auto (default), classic, sharded, both
        --json          machine-readable output (status, watch, list, force-unlock)
    -h, --help          this text
    -V, --version       the version

DURATIONS: 500ms, 10s, 2m, 1h, 1.5s (a bare number is seconds).

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
";

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "s", "ms", "5x", "-1s", ".5s", "5.s", "1e3s", "10 years"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("200y").is_err());
        assert!(parse_duration("999999999d").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_duration_ms(850), "850ms");
        assert_eq!(format_duration_ms(12_340), "12.3s");
        assert_eq!(format_duration_ms(245_000), "4m05s");
        assert_eq!(format_duration_ms(7_380_000), "2h03m");
        assert_eq!(format_duration_ms(-1500), "-1.5s");
    }

    #[test]
    fn run_line() {
        let Command::Run(run) = parse(args(&[
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
        ]))
        .unwrap() else {
            panic!("not run")
        };
        assert_eq!(run.name, "jobs");
        assert_eq!(run.kind, LockKind::Fair);
        assert_eq!(run.wait, Some(Duration::from_secs(2)));
        assert_eq!(run.signal, "INT");
        assert_eq!(run.command, args(&["sh", "-c", "echo --wait"]));
        assert_eq!(run.global.url.as_deref(), Some("redis://x"));
        assert_eq!(run.conflict_exit, 75);
    }

    #[test]
    fn refusals() {
        for bad in [
            &["run", "x"][..],
            &["run", "--", "true"],
            &["run", "x", "--json", "--", "true"],
            &["status"],
            &["status", "a", "b"],
            &["status", "a", "--wait", "1s"],
            &["list", "--kind", "fair"],
            &["frobnicate"],
            &["status", "x", "--json=yes"],
            &["run", "x", "--kind", "mutex", "--", "true"],
            &["run", "x", "--signal", "TERM;rm", "--", "true"],
            &[],
        ] {
            assert!(parse(args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn others() {
        let Command::List(list) = parse(args(&["ls"])).unwrap() else {
            panic!()
        };
        assert_eq!(list.pattern, "*");
        let Command::Status(s) =
            parse(args(&["inspect", "x", "--kind", "read", "--json"])).unwrap()
        else {
            panic!()
        };
        assert_eq!(s.kind, Some(StatusKind::ReadWrite));
        assert!(s.global.json);
        let Command::Watch(w) = parse(args(&["watch", "x", "-n", "200ms"])).unwrap() else {
            panic!()
        };
        assert_eq!(w.interval, Duration::from_millis(200));
        assert!(matches!(parse(args(&["-h"])).unwrap(), Command::Help));
        assert!(matches!(
            parse(args(&["force-unlock", "x", "--kind", "write"])).unwrap(),
            Command::ForceUnlock(ForceUnlockArgs {
                kind: Some(LockKind::Write),
                ..
            })
        ));
    }
}
