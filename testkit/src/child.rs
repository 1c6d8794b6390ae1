//! Code in another OS process: this test binary started again to run one
//! test, [`CHILD_ENTRY`], which reads what to do from its environment (a
//! [`ChildJob`]) and reports progress lines with [`report`]. The parent
//! reads those lines as they come ([`ChildProcess`]); the child exits when
//! the parent goes ([`exit_with_parent`]). What the jobs are is the test's
//! business: this is the process plumbing.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle as ThreadHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

/// The name of the test a [`ChildProcess`] runs in its child.
pub const CHILD_ENTRY: &str = "child_process_entry";

/// Marks the child's progress lines among whatever else the test harness
/// prints on stdout (libtest may print `test child_process_entry ... ` just
/// before the first one, on the same line).
const MARK: &str = "@@fault-child@@ ";

/// What a child process is to do, told to it through environment variables.
pub trait ChildJob: std::fmt::Debug {
    /// The variables that describe the job (read back in the child).
    fn to_env(&self) -> Vec<(&'static str, String)>;
}

/// In the child: print a progress line for the parent
/// ([`ChildProcess::wait_line`]).
pub fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n{MARK}{line}");
    let _ = out.flush();
}

/// In the child: exit the process when its stdin closes (the parent is
/// gone), so a child never outlives the test that started it.
pub fn exit_with_parent() {
    std::thread::spawn(|| {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 64];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        std::process::exit(0);
    });
}

/// A child process running a [`ChildJob`]: this test binary started again
/// with `--exact child_process_entry --ignored`. Its progress lines are read as
/// they come; it is killed (SIGKILL) on drop, and exits by itself if this
/// process dies (its stdin closes).
pub struct ChildProcess {
    /// The job, for failure messages.
    job: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<ThreadHandle<()>>,
    status: Option<ExitStatus>,
}

impl ChildProcess {
    /// Start a child for `job`. The test binary must have a test named
    /// [`CHILD_ENTRY`] that runs the job (and does nothing without one).
    pub fn spawn(job: impl ChildJob) -> ChildProcess {
        let env = job.to_env();
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                CHILD_ENTRY,
                "--nocapture",
                "--ignored",
                "--test-threads",
                "1",
            ])
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a child process");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        let (sender, lines) = mpsc::unbounded_channel();
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            std::thread::spawn({
                let stdout = stdout.clone();
                move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if let Some(at) = line.find(MARK) {
                            let _ = sender.send(line[at + MARK.len()..].to_string());
                        }
                        if let Ok(mut all) = stdout.lock() {
                            all.push_str(&line);
                            all.push('\n');
                        }
                    }
                }
            }),
            std::thread::spawn({
                let stderr = stderr.clone();
                move || {
                    let mut err = err;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = err.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut all) = stderr.lock() {
                            all.push_str(&String::from_utf8_lossy(&buf[..n]));
                        }
                    }
                }
            }),
        ];
        ChildProcess {
            job: format!("{job:?}"),
            child,
            stdin,
            lines,
            stdout,
            stderr,
            readers,
            status: None,
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next progress line, without its marker (e.g. `HELD <field>`);
    /// `None` once the child's stdout is closed (it exited). Panics after
    /// `timeout`.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(line) => line,
            Err(_) => self.fail(&format!("no line from the child within {timeout:?}")),
        }
    }

    /// Wait for a progress line starting with `prefix` (skipping others) and
    /// return it whole. Panics, with the child's output, after `timeout` or if
    /// the child exits first.
    pub async fn wait_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if line.starts_with(prefix) => return line,
                Ok(Some(_)) => {}
                Ok(None) => self.fail(&format!(
                    "the child exited before printing {prefix:?} (does the test binary have its child entry?)"
                )),
                Err(_) => self.fail(&format!("no {prefix:?} line within {timeout:?}")),
            }
        }
    }

    /// Wait for `DONE`, then for the child to exit successfully; panics after
    /// `timeout` (for both) or on failure.
    pub async fn wait_done(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.wait_line("DONE", timeout).await;
        self.wait_exit(deadline.saturating_duration_since(Instant::now()))
            .await;
    }

    /// Wait for the child to exit by itself (skipping any further lines), and
    /// panic unless it succeeded or within `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let drained = tokio::time::timeout(timeout, async {
            while self.lines.recv().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.fail(&format!("the child did not exit within {timeout:?}"));
        }
        // Its stdout is closed: the process is exiting. Wait (bounded) for it.
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    if !status.success() {
                        self.fail(&format!("the child exited with {status}"));
                    }
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Ok(None) => self.fail(&format!("the child did not exit within {timeout:?}")),
                Err(e) => self.fail(&format!("cannot wait for the child: {e}")),
            }
        }
    }

    /// Kill the child (SIGKILL: no unlock, no goodbye) and reap it.
    pub fn kill(&mut self) {
        self.stdin = None;
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Everything the child printed on stdout and stderr so far.
    pub fn output(&self) -> String {
        let out = self.stdout.lock().map(|s| s.clone()).unwrap_or_default();
        let err = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        format!("--- stdout ---\n{out}--- stderr ---\n{err}")
    }

    fn fail(&mut self, what: &str) -> ! {
        self.kill();
        // The child is gone, so its pipes are closed and the readers finish.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        panic!("child process {}: {what}\n{}", self.job, self.output());
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
