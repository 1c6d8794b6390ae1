//! The command does not outlive the tool: a small guardian process (this
//! binary again, in the hidden mode [`MODE`]) watches a pipe whose only
//! writer is the tool. When the tool ends without standing the guardian
//! down (it was killed, even by SIGKILL, or it crashed), the pipe reads as
//! closed and the guardian ends the command's process group as a lost lock
//! would: `--signal`, then KILL after `--grace`. Once that work is dead it
//! releases the tool's hold (issue 34), which would otherwise stay until its
//! lease ran out (the watchdog's 30 s): the tool writes, as the first line
//! on the pipe, where Redis is (the URL, with its password: never on a
//! command line, where `ps` shows it) and which hold is its (kind, name,
//! client id, owner id); the guardian connects as that client id and
//! unlocks that owner's one hold with the kind's own unlock script, which
//! publishes what the kind's waiters expect, and does nothing when the
//! field no longer holds.
//!
//! Why not `PR_SET_PDEATHSIG`: it must be set in the child between fork and
//! exec (`pre_exec`), which takes `unsafe`, and the tool forbids `unsafe`
//! code. Why a process: no signal handler of the tool runs on SIGKILL, so
//! something outside it has to notice. The guardian runs in a process group
//! of its own, so the terminal's Ctrl-C and a kill of the tool's group do
//! not reach it; it reads nothing but its standard input.

use std::ffi::OsString;
use std::io::{PipeWriter, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use redisson_lock::{Client, Error, Owner, Uuid};

use crate::args::{Global, LockKind, PubSub};
use crate::exit::CliError;
use crate::procs::{self, Proc};

/// The hidden first argument that runs this binary as a guardian.
pub const MODE: &str = "__guard-command";

/// What to end: the command's process group, or (with `--foreground`,
/// where the command shares the tool's group) the command and, on Linux,
/// the processes it started that are still its descendants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The process group whose id this is.
    Group(Pid),
    /// The one process, and its descendants found in `/proc`.
    Process(Pid),
}

/// Send `sig` to what `send` reaches; a `CONT` follows, as timeout(1) does,
/// so that a stopped process acts on it. False if nothing was there.
fn send_with_cont(sig: Signal, send: impl Fn(Signal) -> nix::Result<()>) -> bool {
    let sent = send(sig).is_ok();
    if sent && sig != Signal::SIGKILL && sig != Signal::SIGCONT {
        let _ = send(Signal::SIGCONT);
    }
    sent
}

impl Target {
    /// Send `sig` (then `CONT`); false if nothing was there. For
    /// [`Target::Process`], the descendants are looked up first (once the
    /// command is gone they are another's children and out of reach).
    pub fn signal(self, sig: Signal) -> bool {
        match self {
            Target::Group(pid) => send_with_cont(sig, |s| killpg(pid, s)),
            Target::Process(pid) => {
                let descendants = procs::descendants(pid);
                let mut sent = send_with_cont(sig, |s| kill(pid, s));
                for p in descendants {
                    sent |= send_with_cont(sig, |s| kill(p.pid, s));
                }
                sent
            }
        }
    }

    /// What [`signal`](Self::signal) reaches, for messages: "sending TERM
    /// to …".
    pub fn describe(self) -> &'static str {
        match self {
            Target::Group(_) => "the command's process group",
            Target::Process(_) if cfg!(target_os = "linux") => {
                "the command and the processes it started that are still its descendants \
                 (--foreground: they share this tool's process group)"
            }
            Target::Process(_) => {
                "the command alone, not what it started (--foreground: they share this tool's \
                 process group)"
            }
        }
    }
}

/// Where the tool's hold is and whose it is: what the guardian needs to
/// release it. No `Debug`: the URL may carry a password.
pub struct Release {
    /// The Redis URL, resolved (`--url`, `$REDIS_URL` or the default).
    pub url: String,
    pub timeout: Option<Duration>,
    pub pubsub: Option<PubSub>,
    pub watchdog: Option<Duration>,
    pub kind: LockKind,
    pub name: String,
    /// `--prefix`: the name mapper the hold was taken through.
    pub prefix: Option<String>,
    /// The tool's client id and the hold's owner id: its field.
    pub client_id: Uuid,
    pub owner: Owner,
}

impl Release {
    fn to_line(&self) -> String {
        let ms = |d: Option<Duration>| d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let value = serde_json::json!({
            "url": self.url,
            "timeout_ms": ms(self.timeout),
            "pubsub": self.pubsub.and_then(|p| p.to_possible_value()).map(|v| v.get_name().to_owned()),
            "watchdog_ms": ms(self.watchdog),
            "kind": self.kind.as_str(),
            "name": self.name,
            "prefix": self.prefix,
            "client_id": self.client_id.hyphenated().to_string(),
            "owner": self.owner.id(),
        });
        format!("{value}\n")
    }

    fn from_line(line: &[u8]) -> Option<Release> {
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        let text = |key: &str| value.get(key).and_then(|v| v.as_str());
        let ms = |key: &str| {
            value
                .get(key)
                .and_then(|v| v.as_u64())
                .map(Duration::from_millis)
        };
        Some(Release {
            url: text("url")?.to_owned(),
            timeout: ms("timeout_ms"),
            pubsub: match text("pubsub") {
                Some(p) => Some(PubSub::from_str(p, true).ok()?),
                None => None,
            },
            watchdog: ms("watchdog_ms"),
            kind: LockKind::from_str(text("kind")?, true).ok()?,
            name: text("name")?.to_owned(),
            prefix: text("prefix").map(str::to_owned),
            client_id: Uuid::parse_str(text("client_id")?).ok()?,
            owner: Owner::new(value.get("owner")?.as_i64()?),
        })
    }
}

/// The tool's end of the pipe, and the guardian process.
pub struct Guardian {
    writer: PipeWriter,
    child: Child,
}

impl Guardian {
    /// Start a guardian over `target` that sends `signal`, then KILL after
    /// `grace`, if this process ends without [`stand_down`](Self::stand_down),
    /// and then gives back the hold `release` describes.
    pub fn start(
        target: Target,
        signal: Signal,
        grace: Duration,
        release: Option<&Release>,
    ) -> std::io::Result<Guardian> {
        let (reader, mut writer) = std::io::pipe()?;
        let (kind, pid) = match target {
            Target::Group(pid) => ("group", pid),
            Target::Process(pid) => ("process", pid),
        };
        let child = Command::new(std::env::current_exe()?)
            .arg(MODE)
            .arg(kind)
            .arg(pid.as_raw().to_string())
            .arg((signal as i32).to_string())
            .arg(grace.as_millis().to_string())
            .stdin(reader)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        // A line, far below the pipe's buffer: written at once, whether or
        // not the guardian reads yet.
        let line = release.map_or_else(|| "\n".to_owned(), Release::to_line);
        writer.write_all(line.as_bytes())?;
        Ok(Guardian { writer, child })
    }

    /// The command's group has ended (or is left alone on purpose) and the
    /// hold is released: the guardian exits without doing anything.
    pub fn stand_down(mut self) {
        let _ = self.writer.write_all(b"d");
        drop(self.writer);
        // It exits at once; reaped here when it already has, else when this
        // process ends (soon: the tool is finishing).
        let _ = self.child.try_wait();
    }
}

/// What the guardian ends and waits for: the target, and for a
/// [`Target::Process`] the descendants it has seen (which, once the
/// command is gone, are no longer found under it).
struct Work {
    target: Target,
    seen: Vec<Proc>,
}

impl Work {
    /// Note the command's descendants as they are now.
    fn look(&mut self) {
        if let Target::Process(pid) = self.target {
            for p in procs::descendants(pid) {
                if !self.seen.contains(&p) {
                    self.seen.push(p);
                }
            }
        }
    }

    /// Whether anything of it still runs (a zombie does not: nobody may
    /// reap it, see [`procs`]).
    fn alive(&self) -> bool {
        match self.target {
            Target::Group(pgrp) => procs::group_alive(pgrp),
            Target::Process(pid) => procs::alive(pid) || self.seen.iter().any(|p| procs::still(*p)),
        }
    }

    /// Send `sig` to all of it; false if nothing was there.
    fn signal(&mut self, sig: Signal) -> bool {
        let Target::Process(pid) = self.target else {
            return self.target.signal(sig);
        };
        self.look();
        let mut sent = send_with_cont(sig, |s| kill(pid, s));
        for p in self.seen.iter().filter(|p| procs::still(**p)) {
            sent |= send_with_cont(sig, |s| kill(p.pid, s));
        }
        sent
    }

    /// Wait until nothing of it runs, or `until`; whether nothing does.
    fn gone_by(&mut self, until: Instant) -> bool {
        loop {
            self.look();
            if !self.alive() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            // Nothing tells a process outside the group when its last
            // member ends: look.
            std::thread::sleep(POLL);
        }
    }
}

/// How often the guardian looks whether the work has ended.
const POLL: Duration = Duration::from_millis(20);

/// How long the work may take to go after SIGKILL (D state) before the
/// hold is released anyway, as the tool itself does.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// The guardian's main: `MODE group|process PID SIGNAL GRACE_MS`, the
/// release line then the stand-down on standard input.
pub fn main(args: &[OsString]) -> ExitCode {
    let Some((target, signal, grace)) = parse(args) else {
        eprintln!("redisson-lock: {MODE} is internal to `run`");
        return ExitCode::from(crate::exit::USAGE);
    };
    let (release, stood_down) = listen();
    if stood_down {
        return ExitCode::SUCCESS;
    }
    let mut work = Work {
        target,
        seen: Vec::new(),
    };
    work.look();
    if work.alive() {
        eprintln!(
            "redisson-lock: the tool ended while the command ran; sending {} to {}",
            signal.as_str(),
            target.describe()
        );
        end(&mut work, signal, grace);
    }
    if let Some(release) = release {
        release_hold(&release);
    }
    ExitCode::SUCCESS
}

/// Read standard input: the release line (empty: nothing to release), then
/// until the stand-down byte (true) or the end of the pipe (false: the
/// tool is gone).
fn listen() -> (Option<Release>, bool) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 512];
    let mut line: Vec<u8> = Vec::new();
    let mut release: Option<Option<Release>> = None;
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => return (release.flatten(), false),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return (release.flatten(), false),
        };
        let mut rest = &buf[..n];
        if release.is_none() {
            match rest.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    line.extend_from_slice(&rest[..end]);
                    rest = &rest[end + 1..];
                    release = Some(Release::from_line(&line));
                }
                None => {
                    line.extend_from_slice(rest);
                    continue;
                }
            }
        }
        if rest.contains(&b'd') {
            return (release.flatten(), true);
        }
    }
}

/// `signal`, then KILL after `grace`; waits (bounded) for the work to go.
fn end(work: &mut Work, signal: Signal, grace: Duration) {
    if signal != Signal::SIGKILL {
        work.signal(signal);
        if work.gone_by(Instant::now() + grace) {
            return;
        }
        eprintln!(
            "redisson-lock: grace period over; sending SIGKILL to {}",
            work.target.describe()
        );
    }
    work.signal(Signal::SIGKILL);
    if !work.gone_by(Instant::now() + KILL_WAIT) {
        eprintln!("redisson-lock: processes of the command are still there after SIGKILL");
    }
}

/// Release the tool's hold: connect as its client id, unlock one hold of
/// its owner with the kind's unlock script. Says what it did; silent when
/// the hold was already gone (the tool released it, or it was lost).
fn release_hold(release: &Release) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!(
                "redisson-lock: cannot release lock {:?} for the tool: {e}",
                release.name
            );
            return;
        }
    };
    let outcome = runtime.block_on(async {
        let global = Global {
            url: Some(release.url.clone()),
            timeout: release.timeout,
            pubsub: release.pubsub,
            json: false,
            prefix: release.prefix.clone(),
        };
        let config = crate::config(&global, release.watchdog)?.client_id(release.client_id);
        let client = Client::connect_with(config).await?;
        let unlocked = match crate::run::handle(&client, release.kind, &release.name) {
            Ok(lock) => lock
                .with_owner(release.owner)
                .unlock()
                .await
                .map_err(CliError::from),
            Err(e) => Err(e),
        };
        client.shutdown().await;
        unlocked
    });
    match outcome {
        Ok(()) => eprintln!(
            "redisson-lock: released lock {:?}, which the tool held",
            release.name
        ),
        Err(CliError::Lock(Error::NotHeld { .. })) => {}
        Err(e) => eprintln!(
            "redisson-lock: could not release lock {:?} for the tool ({e}); it expires by its \
             lease",
            release.name
        ),
    }
}

fn parse(args: &[OsString]) -> Option<(Target, Signal, Duration)> {
    let [kind, pid, signal, grace] = args else {
        return None;
    };
    let pid = Pid::from_raw(pid.to_str()?.parse().ok().filter(|p: &i32| *p > 1)?);
    let target = match kind.to_str()? {
        "group" => Target::Group(pid),
        "process" => Target::Process(pid),
        _ => return None,
    };
    let signal = Signal::try_from(signal.to_str()?.parse::<i32>().ok()?).ok()?;
    let grace = Duration::from_millis(grace.to_str()?.parse().ok()?);
    Some((target, signal, grace))
}
