//! The command does not outlive the tool: a small guardian process (this
//! binary again, in the hidden mode [`MODE`]) watches a pipe whose only
//! writer is the tool. When the tool ends without standing the guardian
//! down (it was killed, even by SIGKILL, or it crashed), the pipe reads as
//! closed and the guardian ends the command's process group as a lost lock
//! would: `--signal`, then KILL after `--grace`.
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

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// The hidden first argument that runs this binary as a guardian.
pub const MODE: &str = "__guard-command";

/// What to end: the command's process group, or (with `--foreground`,
/// where the command shares the tool's group) the command alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The process group whose id this is.
    Group(Pid),
    /// The one process.
    Process(Pid),
}

impl Target {
    /// Send `sig`; false if nothing was there. A `CONT` follows, as
    /// timeout(1) does, so that a stopped process acts on it.
    pub fn signal(self, sig: Signal) -> bool {
        let send = |s: Signal| match self {
            Target::Group(pid) => killpg(pid, s),
            Target::Process(pid) => kill(pid, s),
        };
        let sent = send(sig).is_ok();
        if sent && sig != Signal::SIGKILL && sig != Signal::SIGCONT {
            let _ = send(Signal::SIGCONT);
        }
        sent
    }

    /// Whether anything of it is left (zombies count until reaped).
    fn exists(self) -> bool {
        let probe = match self {
            Target::Group(pid) => killpg(pid, None::<Signal>),
            Target::Process(pid) => kill(pid, None::<Signal>),
        };
        probe != Err(Errno::ESRCH)
    }

    fn describe(self) -> &'static str {
        match self {
            Target::Group(_) => "process group",
            Target::Process(_) => "process",
        }
    }
}

/// The tool's end of the pipe, and the guardian process.
pub struct Guardian {
    writer: PipeWriter,
    child: Child,
}

impl Guardian {
    /// Start a guardian over `target` that sends `signal`, then KILL after
    /// `grace`, if this process ends without [`stand_down`](Self::stand_down).
    pub fn start(target: Target, signal: Signal, grace: Duration) -> std::io::Result<Guardian> {
        let (reader, writer) = std::io::pipe()?;
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
        Ok(Guardian { writer, child })
    }

    /// The command's group has ended (or is left alone on purpose): the
    /// guardian exits without signalling anything.
    pub fn stand_down(mut self) {
        let _ = self.writer.write_all(b"d");
        drop(self.writer);
        // It exits at once; reaped here when it already has, else when this
        // process ends (soon: the tool is finishing).
        let _ = self.child.try_wait();
    }
}

/// The guardian's main: `MODE group|process PID SIGNAL GRACE_MS`.
pub fn main(args: &[OsString]) -> ExitCode {
    let Some((target, signal, grace)) = parse(args) else {
        eprintln!("redisson-lock: {MODE} is internal to `run`");
        return ExitCode::from(crate::exit::USAGE);
    };
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 16];
    let stood_down = loop {
        match stdin.read(&mut buf) {
            Ok(0) => break false,
            Ok(n) if buf[..n].contains(&b'd') => break true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    if stood_down || !target.exists() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "redisson-lock: the tool ended while the command ran; sending {} to the command's {}",
        signal.as_str(),
        target.describe()
    );
    if signal == Signal::SIGKILL || !target.signal(signal) {
        target.signal(Signal::SIGKILL);
        return ExitCode::SUCCESS;
    }
    // Nothing tells a process outside the group when its last member ends:
    // look, until the grace period is over.
    let deadline = Instant::now() + grace;
    while target.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if target.exists() {
        eprintln!(
            "redisson-lock: grace period over; sending SIGKILL to the command's {}",
            target.describe()
        );
        target.signal(Signal::SIGKILL);
    }
    ExitCode::SUCCESS
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
