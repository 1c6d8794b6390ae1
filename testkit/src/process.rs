//! Child processes the kit starts: killed (SIGKILL) and reaped on drop,
//! frozen and thawed with SIGSTOP / SIGCONT, and, on request, killed by a
//! small shell watchdog if this process dies without dropping them.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running child process, killed (SIGKILL) and reaped on drop.
pub struct Process {
    child: Child,
    watchdog: Option<Child>,
}

impl Process {
    /// Start `program` with `args`, its stdin, stdout and stderr closed.
    /// `Err` if it cannot be started (e.g. not found on `PATH`).
    pub fn spawn<S: AsRef<OsStr>>(
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> std::io::Result<Process> {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Process {
            child,
            watchdog: None,
        })
    }

    /// Also kill the process if this one dies without dropping it (killed
    /// outright, say): a `sh` loop watches this process and then sends
    /// SIGKILL. For long runs such as the bench.
    pub fn with_watchdog(mut self) -> Process {
        self.watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {} 2>/dev/null; do sleep 0.5; done; kill -9 {} 2>/dev/null",
                std::process::id(),
                self.child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        self
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (without reaping it for good: it stays dropped
    /// cleanly).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Freeze it (SIGSTOP): it neither answers nor works until
    /// [`resume`](Self::resume).
    pub fn pause(&self) {
        signal(self.id(), "-STOP");
    }

    /// Thaw a [`pause`](Self::pause)d process (SIGCONT).
    pub fn resume(&self) {
        signal(self.id(), "-CONT");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        for child in [Some(&mut self.child), self.watchdog.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Send `signal` (`-STOP`, `-CONT`, ...) to `pid` with `kill`; panics if it
/// fails.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Who answers on the port a server process was started on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    /// The process itself: its `INFO server` names its process id.
    Ours,
    /// It exited (the port was taken), another process answers there, or
    /// nothing answered in time.
    Taken,
}

/// Wait (at most `within`) until the Redis-protocol server on
/// `127.0.0.1:port` is `child`: a port picked free may be bound by another
/// test's server before `child` binds it, and then something else answers
/// there while `child` exits. Asked with `AUTH password` first if given.
/// Works for `redis-server`, `redis-sentinel` and Valkey alike.
pub fn wait_serving(
    child: &mut Process,
    port: u16,
    password: Option<&str>,
    within: Duration,
) -> Serving {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if child.has_exited() {
            return Serving::Taken;
        }
        match serving_pid(port, password) {
            Some(pid) if pid == child.id() => return Serving::Ours,
            Some(_) => return Serving::Taken,
            None => {} // not listening yet, loading, or not an INFO answer
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Serving::Taken
}

/// The `process_id` in the `INFO server` answer of the server on `port`;
/// `None` if nothing listens or the answer is not an INFO reply.
fn serving_pid(port: u16, password: Option<&str>) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    if let Some(pass) = password {
        s.write_all(format!("AUTH {pass}\r\n").as_bytes()).ok()?;
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    }
    s.write_all(b"INFO server\r\n").ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while answer.len() < 16 * 1024 {
        let n = s.read(&mut buf).ok().filter(|&n| n > 0)?;
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if text.starts_with('-') && text.ends_with("\r\n") {
            return None; // -LOADING, -NOAUTH, ...
        }
        if let Some(rest) = text.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
    }
    None
}
