//! `run`: holding a lock around a command, its statuses and signals.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::{code, java_hold, stderr, stdout};

#[test]
fn run_holds_the_lock_while_the_command_runs_and_returns_its_status() {
    let (server, mut raw, name) = setup("run");
    let file = TempPath::new("run-owner");
    let go = TempPath::new("run-go");
    let script = format!(
        "echo \"$REDISSON_LOCK_OWNER\" > {}; while [ ! -e {} ]; do sleep 0.02; done; exit 7",
        file.str(),
        go.str()
    );
    let mut child = server
        .cli_command(&["run", &name, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the command started", || {
        file.read().is_some_and(|s| s.ends_with('\n'))
    });
    let owner = file.read().unwrap().trim().to_owned();
    // While the command runs, the lock is held by the owner it was told.
    let count = raw.cmd(&["HGET", &name, &owner]);
    assert_eq!(count.text().as_deref(), Some("1"), "{owner}");
    let (_, json) = server.json(&["status", &name, "--json"]);
    assert_eq!(json["holders"][0]["field"], owner.as_str());
    assert!(json["ttl_ms"].as_i64().unwrap() > 20_000);
    // Who holds it: the tool's own process, as its client registered
    // itself (docs/PROTOCOL.md §9.6).
    let who = &json["holders"][0]["client"];
    assert_eq!(who["pid"], child.id(), "{json}");
    assert_eq!(who["name"], "redisson-lock", "{json}");
    assert!(
        who["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{json}"
    );
    let text = stdout(&server.cli(&["status", &name]));
    assert!(text.contains(&format!("pid {}", child.id())), "{text}");

    std::fs::write(&go.0, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(!raw.exists(&name), "released when the command ended");
}

#[test]
fn run_returns_75_when_the_lock_stays_busy() {
    let (server, mut raw, name) = setup("busy");
    java_hold(&mut raw, &name, &java_client_id(), 1, 1, 30_000);
    let started = Instant::now();
    let out = server.cli(&["run", &name, "--wait", "300ms", "--", "echo", "ran"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(!stdout(&out).contains("ran"));
    assert!(stderr(&out).contains("busy"));
    assert!(started.elapsed() < Duration::from_secs(5));
    let out = server.cli(&["run", &name, "-w", "0", "-E", "9", "--", "true"]);
    assert_eq!(code(&out), 9);
    // flock(1)'s spellings: -n (--nonblock) tries once, -w2s waits 2s.
    for flags in [&["-n"][..], &["--nonblock"], &["-w200ms"], &["-w", "0.2"]] {
        let mut args = vec!["run", &name];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "echo", "ran"]);
        let out = server.cli(&args);
        assert_eq!(code(&out), 75, "{flags:?}: {}", stderr(&out));
        assert!(!stdout(&out).contains("ran"));
    }
    // Every kind waits for the Java holder (the fair and spin kinds too).
    for kind in ["fair", "spin", "fenced", "non-reentrant"] {
        let out = server.cli(&[
            "run", &name, "--kind", kind, "--wait", "100ms", "--", "true",
        ]);
        assert_eq!(code(&out), 75, "{kind}: {}", stderr(&out));
    }
    // A free lock of each kind runs the command.
    for kind in [
        "rlock",
        "fair",
        "read",
        "write",
        "spin",
        "fenced",
        "non-reentrant-fair",
    ] {
        let free = unique("free");
        let out = server.cli(&["run", &free, "--kind", kind, "--", "sh", "-c", "exit 3"]);
        assert_eq!(code(&out), 3, "{kind}: {}", stderr(&out));
        assert!(!raw.exists(&free), "{kind}: released");
    }
}

#[test]
fn run_signals_the_command_when_the_lock_is_lost() {
    let (server, mut raw, name) = setup("lost");
    let marker = TempPath::new("lost-term");
    let started = TempPath::new("lost-started");
    let script = format!(
        "trap 'echo term > {}; kill $!; exit 0' TERM; touch {}; sleep 5 >/dev/null 2>&1 & wait",
        marker.str(),
        started.str()
    );
    // --grace: a TERM that lands between `sleep`'s fork and its exec is
    // lost (the shell's trap handler is still installed there), and the tool
    // then waits for the whole group, `sleep` included.
    let child = server.cli_spawn(&[
        "run", &name, "--check", "100ms", "--grace", "1s", "--", "sh", "-c", &script,
    ]);
    eventually("the command started", || started.read().is_some());
    assert!(raw.exists(&name));
    let out = server.cli(&["force-unlock", &name]);
    assert_eq!(code(&out), 0);
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(76), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(4));
    assert_eq!(marker.read().as_deref(), Some("term\n"));
    assert!(stderr(&out).contains("lost"), "{}", stderr(&out));

    // A command that ignores the signal is killed after the grace period.
    let name = unique("lost-kill");
    let started = TempPath::new("lost-started");
    let script = format!("trap '' INT; touch {}; sleep 4", started.str());
    let child = server.cli_spawn_quiet(&[
        "run", &name, "--check", "100ms", "--signal", "INT", "--grace", "300ms", "--", "sh", "-c",
        &script,
    ]);
    eventually("the command started", || started.read().is_some());
    let t = Instant::now();
    assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    // A lease is a time limit: when it runs out, the command is signalled.
    let name = unique("lease");
    let t = Instant::now();
    let out = server.cli(&["run", &name, "--lease", "500ms", "--", "sleep", "5"]);
    assert_eq!(out.status.code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(
        stderr(&out).contains("its --lease ran out"),
        "{}",
        stderr(&out)
    );
}

/// The tool killed by SIGKILL (no handler of its own runs) still ends the
/// command's process group: its guardian sees the pipe close (issue 29).
#[test]
fn run_ends_the_command_group_when_the_tool_is_killed() {
    let server = Server::start();
    let name = unique("orphan");
    let pid_file = TempPath::new("orphan-pid");
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {}; wait",
        pid_file.str()
    );
    let mut child =
        server.cli_spawn_quiet(&["run", &name, "--grace", "1s", "--", "sh", "-c", &script]);
    let grandchild = grandchild_pid(&pid_file);
    let guard = KillOnDrop(grandchild);
    send(child.id(), "KILL");
    let _ = child.wait();
    eventually(
        "the command's group is gone after the tool's SIGKILL",
        || !running(grandchild),
    );
    guard.disarm();

    // A tool that ends normally stands its guardian down: nothing is
    // signalled, nothing said.
    let name = unique("orphan-normal");
    let out = server.cli(&["run", &name, "--", "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("guardian") && !stderr(&out).contains("tool ended"));
}

/// The tool killed by SIGKILL while its command runs: its guardian ends the
/// command's group, then releases the tool's hold at once (issue 34: it
/// stayed until the watchdog's 30 s TTL, and a waiting `run` got the lock
/// after 23.6 s), with the unlock message the kind's waiters expect. The
/// URL is given to the guardian on its pipe, never on its command line.
#[test]
fn run_killed_tool_has_its_hold_released_by_the_guardian() {
    let (server, mut raw, name) = setup("orphan-release");
    let pid_file = TempPath::new("orphan-release-pid");
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {}; wait",
        pid_file.str()
    );
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut messages = server.raw().subscribe(&channel);
    let child = server.cli_spawn(&["run", &name, "--", "sh", "-c", &script]);
    let cli = KillOnDrop(child.id());
    let grandchild = grandchild_pid(&pid_file);
    let guard = KillOnDrop(grandchild);
    // One hold of one field, on the watchdog's 30 s lease.
    let Reply::Array(Some(hash)) = raw.cmd(&["HGETALL", &name]) else {
        panic!("no hash");
    };
    assert_eq!(hash.len(), 2, "{hash:?}");
    assert_eq!(hash[1].text().as_deref(), Some("1"));
    assert!(raw.cmd(&["PTTL", &name]).int() > 20_000);
    let guardian = guardian_of(child.id());
    let cmdline = std::fs::read(format!("/proc/{guardian}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        !cmdline.contains(&server.url) && !cmdline.contains("redis://"),
        "{cmdline}"
    );

    let killed = Instant::now();
    send(child.id(), "KILL");
    // The unlock message of an RLock's full release, from the guardian.
    assert_eq!(
        messages.message(Duration::from_secs(10)).as_deref(),
        Some("0")
    );
    let released = killed.elapsed();
    eprintln!("released {released:?} after the tool's SIGKILL");
    // Far below the 30 s lease: the guardian, not the TTL.
    assert!(released < Duration::from_secs(3), "{released:?}");
    // The work was dead first, and nothing is left under the name.
    assert!(!running(grandchild), "the group ended before the release");
    guard.disarm();
    assert!(!raw.exists(&name), "no hash left");
    let (status, err) = finish(child);
    cli.disarm();
    assert_eq!(status, None, "killed: {err}");
    assert!(err.contains("the command's process group"), "{err}");
    assert!(err.contains(&format!("released lock {name:?}")), "{err}");
    let out = server.cli(&["run", &name, "-n", "--", "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // A waiting `run` is woken by what the kind's unlock publishes: a fair
    // waiter on its own channel, a writer on the read-write channel.
    for kind in ["fair", "write"] {
        let name = unique("orphan-waiter");
        let started = TempPath::new("orphan-waiter-started");
        let script = format!("touch {}; exec sleep 300", started.str());
        let child =
            server.cli_spawn_quiet(&["run", &name, "--kind", kind, "--", "sh", "-c", &script]);
        let cli = KillOnDrop(child.id());
        eventually("the command started", || started.read().is_some());
        let waiter = server.cli_spawn_quiet(&["run", &name, "--kind", kind, "--", "true"]);
        let waiting = KillOnDrop(waiter.id());
        if kind == "fair" {
            let queue = format!("redisson_lock_queue:{{{name}}}");
            eventually("the fair waiter queued", || {
                raw.cmd(&["LLEN", &queue]).int() == 1
            });
        } else {
            // The holder watches the channel too.
            let channel = format!("redisson_rwlock:{{{name}}}");
            eventually("the writer waits on the channel", || {
                match raw.cmd(&["PUBSUB", "NUMSUB", &channel]) {
                    Reply::Array(Some(v)) => v[1].int() == 2,
                    other => panic!("{other:?}"),
                }
            });
        }
        let killed = Instant::now();
        send(child.id(), "KILL");
        let (status, _) = finish(child);
        cli.disarm();
        assert_eq!(status, None);
        let (status, err) = finish(waiter);
        waiting.disarm();
        let waited = killed.elapsed();
        eprintln!("{kind}: the waiter had the lock {waited:?} after the tool's SIGKILL");
        assert_eq!(status, Some(0), "{kind}: {err}");
        assert!(waited < Duration::from_secs(3), "{kind}: {waited:?}");
        assert!(!raw.exists(&name), "{kind}: no hash left");
        for key in [
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
        ] {
            assert!(!raw.exists(&key), "{kind}: {key}");
        }
    }
}

/// The guardian the tool `pid` started (a child running in its hidden mode).
fn guardian_of(pid: u32) -> u32 {
    let mut found = None;
    eventually("the guardian runs", || {
        found = std::fs::read_dir("/proc").unwrap().find_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let ppid: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).ok()?;
            (ppid == pid && String::from_utf8_lossy(&cmdline).contains("__guard-command"))
                .then_some(child)
        });
        found.is_some()
    });
    found.unwrap()
}

/// `--foreground` runs the command in the tool's own process group (it can
/// read from the terminal and gets its signals); without it, in a group of
/// its own.
#[test]
fn run_foreground_keeps_the_command_in_the_tools_group() {
    let server = Server::start();
    // Field 5 of /proc/PID/stat is the process group (comm `sh` has no space).
    let script = "cut -d' ' -f5 /proc/$$/stat; echo $$";
    for foreground in [false, true] {
        let name = unique("fg");
        let mut args = vec!["run", &name];
        if foreground {
            args.push("--foreground");
        }
        args.extend(["--", "sh", "-c", script]);
        let child = server
            .cli_command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let tool_pid = child.id();
        let tool_group = std::fs::read_to_string(format!("/proc/{tool_pid}/stat"))
            .unwrap()
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_owned();
        let out = child.wait_with_output().unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        let mut lines = text.lines();
        let (group, pid) = (lines.next().unwrap(), lines.next().unwrap());
        if foreground {
            assert_eq!(group, tool_group, "--foreground: the tool's group");
        } else {
            assert_eq!(group, pid, "a group of its own, led by the command");
        }
    }
}

#[test]
fn run_passes_the_fencing_token_and_handles_missing_commands() {
    let (server, mut raw, name) = setup("token");
    // Tokens are max(counter + 1, server clock in µs): a counter above the
    // clock (2^52) shows the counter is used.
    raw.cmd(&[
        "SET",
        &format!("redisson_lock_token:{{{name}}}"),
        "4503599627370496",
    ]);
    let out = server.cli(&[
        "run",
        &name,
        "--kind",
        "fenced",
        "--",
        "sh",
        "-c",
        "echo $REDISSON_LOCK_TOKEN $REDISSON_LOCK_KIND $REDISSON_LOCK_NAME",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        format!("4503599627370497 fenced {name}")
    );

    let out = server.cli(&["run", &name, "--", "/nonexistent/command"]);
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    assert!(!raw.exists(&name), "released after the failed start");

    // Killed by a signal: 128 + N, as a shell reports.
    let out = server.cli(&["run", &name, "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(code(&out), 137);
}

#[test]
fn run_releases_the_lock_on_sigterm_and_while_waiting() {
    let (server, mut raw, name) = setup("term");
    let started = TempPath::new("term-started");
    let script = format!("touch {}; exec sleep 5", started.str());
    let child = server
        .cli_command(&["run", &name, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the command started", || started.read().is_some());
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut numsub = || match raw.cmd(&["PUBSUB", "NUMSUB", &channel]) {
        Reply::Array(Some(v)) => v[1].int(),
        other => panic!("{other:?}"),
    };
    // The holder listens on the channel too (its `lost()` hears a forced
    // unlock there), from a moment after its command started: wait for
    // that, or the waiter's subscription could be mistaken for it.
    eventually("the holder watches its channel", || numsub() == 1);
    let holder_subs = 1;
    let waiter = server.cli_spawn_quiet(&["run", &name, "--", "true"]);
    eventually("the waiter subscribed", || numsub() == holder_subs + 1);
    // SIGINT while waiting: gives up with 130, nothing left behind.
    send(waiter.id(), "INT");
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    // A fair waiter interrupted leaves the queue.
    let fair_waiter = server.cli_spawn_quiet(&["run", &name, "--kind", "fair", "--", "true"]);
    let queue = format!("redisson_lock_queue:{{{name}}}");
    eventually("the fair waiter queued", || {
        raw.cmd(&["LLEN", &queue]).int() == 1
    });
    send(fair_waiter.id(), "INT");
    assert_eq!(
        fair_waiter.wait_with_output().unwrap().status.code(),
        Some(130)
    );
    assert_eq!(raw.cmd(&["LLEN", &queue]).int(), 0, "left the queue");
    // SIGTERM while running: passed to the command, lock released after it.
    send(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 15));
    assert!(!raw.exists(&name));
}

/// Whether process `pid` is still running: gone, or a zombie (dead, not
/// yet reaped), is not.
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last parenthesis.
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next()),
            Some(Some('Z' | 'X'))
        ),
        Err(_) => false,
    }
}

/// Wait (bounded) for the PID the command's background process wrote.
pub fn grandchild_pid(file: &TempPath) -> u32 {
    eventually("the grandchild wrote its PID", || {
        file.read().is_some_and(|s| s.ends_with('\n'))
    });
    let pid: u32 = file.read().unwrap().trim().parse().unwrap();
    assert!(running(pid), "the grandchild {pid} runs");
    pid
}

/// Wait (bounded) for the tool to exit: its status code and standard error.
/// Whatever the command starts must not hold the pipe (redirect it), or
/// the read would wait for that too.
pub fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the tool did not exit within 20s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
    }
    (status.code(), err)
}

/// Kills a process on drop, so that a failed test leaves no `sleep 300`;
/// disarmed once the process is known to be gone (its PID may be reused).
pub struct KillOnDrop(u32);

impl KillOnDrop {
    pub fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-s", "KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs the tool on `args`, whose command leaves a process of its own (the
/// grandchild) that writes its PID to `pid_file`; once that runs, `act` is
/// done to the tool's PID (a forced unlock, a signal). Waits (bounded) for
/// the tool to exit, then for the grandchild to be gone: the tool's status
/// and standard error. A test that fails before then kills both.
fn run_with_grandchild(
    server: &Server,
    args: &[&str],
    pid_file: &TempPath,
    act: impl FnOnce(u32),
) -> (Option<i32>, String) {
    let child = server.cli_spawn(args);
    let cli = KillOnDrop(child.id());
    let grandchild = grandchild_pid(pid_file);
    let guard = KillOnDrop(grandchild);
    act(child.id());
    let (status, err) = finish(child);
    cli.disarm();
    eventually(
        &format!("the grandchild is gone (the tool exited with {status:?}: {err})"),
        || !running(grandchild),
    );
    guard.disarm();
    (status, err)
}

#[test]
fn run_kills_the_whole_process_group_when_the_lock_is_lost() {
    let (server, mut raw, name) = setup("lost-group");
    let pid_file = TempPath::new("lost-group-pid");
    // `sh` passes nothing on to its background job: before process groups,
    // TERM reached `sh` only and `sleep` ran on after the lock was lost.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {}; wait",
        pid_file.str()
    );
    let args = ["run", &name, "--check", "100ms", "--", "sh", "-c", &script];
    let (status, err) = run_with_grandchild(&server, &args, &pid_file, |_| {
        assert!(raw.exists(&name));
        assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    });
    assert_eq!(status, Some(76), "{err}");
    assert!(err.contains("process group"), "{err}");
    // The real reason (issue 29: a hard-coded "could no longer be renewed"
    // was printed after a forced unlock).
    assert!(
        err.contains("found gone from Redis (force-unlocked by another client"),
        "{err}"
    );

    // A grandchild that ignores the signal is killed after --grace, though
    // the command itself ended at once.
    let name = unique("lost-group-kill");
    let pid_file = TempPath::new("lost-group-pid");
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {}; while :; do sleep 0.05; done' \
         </dev/null >/dev/null 2>&1 & wait",
        pid_file.str()
    );
    let args = [
        "run", &name, "--check", "100ms", "--grace", "500ms", "--", "sh", "-c", &script,
    ];
    let (status, err) = run_with_grandchild(&server, &args, &pid_file, |_| {
        assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    });
    assert_eq!(status, Some(76), "{err}");
    assert!(err.contains("SIGKILL"), "{err}");
}

#[test]
fn run_passes_term_and_int_on_to_the_whole_process_group() {
    let server = Server::start();
    let mut raw = server.raw();
    // A script's background job ignores INT (as from a terminal), so the
    // INT case runs the grandchild in the foreground.
    for (sig, status, then) in [("TERM", 128 + 15, "& wait"), ("INT", 128 + 2, "; exit 1")] {
        let name = unique("term-group");
        let pid_file = TempPath::new("term-group-pid");
        // The grandchild traps the signal to say it got it; `sh` ends on it.
        let marker = TempPath::new("term-group-got");
        let script = format!(
            "trap 'exit {status}' {sig}; \
             sh -c 'trap \"echo {sig} > {marker}; exit 0\" {sig}; echo $$ > {pid}; \
             while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 {then}",
            marker = marker.str(),
            pid = pid_file.str()
        );
        let args = ["run", &name, "--", "sh", "-c", &script];
        let (code, err) = run_with_grandchild(&server, &args, &pid_file, |tool| send(tool, sig));
        assert_eq!(code, Some(status), "{sig}: {err}");
        assert_eq!(marker.read(), Some(format!("{sig}\n")), "{sig}");
        assert!(!raw.exists(&name), "{sig}: released");
    }
}

pub fn send(pid: u32, sig: &str) {
    redisson_lock_testkit::process::signal(pid, &format!("-{sig}"));
}
