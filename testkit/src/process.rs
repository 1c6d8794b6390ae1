//! Child processes the kit starts: killed (SIGKILL) and reaped on drop,
//! frozen and thawed with SIGSTOP / SIGCONT, and, on request, killed by a
//! small shell watchdog if this process dies without dropping them.

use std::ffi::OsStr;
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

/// Wait until something accepts connections on `127.0.0.1:port`; panics
/// after `within`, naming `what`.
pub fn wait_listening(port: u16, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} on port {port} did not start listening"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
