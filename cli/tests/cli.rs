//! The `redisson-lock` binary against a real, private `redis-server`: state
//! written by hand the way Java Redisson writes it, read back by `status`,
//! `list` and `watch`; `force-unlock` removing it and publishing what the
//! kind's waiters expect; `run` holding a lock around a command, passing its
//! status through, giving up with 75, and signalling the command with 76
//! when the lock is lost. Exit statuses are those of `redisson-lock --help`.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A Java-shaped RLock hold: `HSET N <uuid>:<threadId> count`, `PEXPIRE N ttl`.
fn java_hold(raw: &mut Resp, name: &str, client: &str, thread: i64, count: i64, ttl_ms: i64) {
    raw.cmd(&[
        "HSET",
        name,
        &format!("{client}:{thread}"),
        &count.to_string(),
    ]);
    raw.cmd(&["PEXPIRE", name, &ttl_ms.to_string()]);
}

#[test]
fn status_shows_a_java_hold_and_json_parses() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("java");
    let client = java_client_id();
    java_hold(&mut raw, &name, &client, 57, 2, 30_000);

    let out = server.cli(&["status", &name]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("rlock"), "{text}");
    assert!(
        text.contains(&format!("client {client}  owner 57  count 2")),
        "{text}"
    );
    assert!(text.contains("held, expires in"), "{text}");

    let (rc, json) = server.json(&["inspect", &name, "--json"]);
    assert_eq!(rc, 0);
    assert_eq!(json["kind"], "rlock");
    assert_eq!(json["locked"], true);
    let holders = json["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0]["client_id"], client.as_str());
    assert_eq!(holders[0]["owner_id"], 57);
    assert_eq!(holders[0]["count"], 2);
    let ttl = json["ttl_ms"].as_i64().unwrap();
    assert!((20_000..=30_000).contains(&ttl), "{ttl}");
    assert_eq!(
        json["channels"][0]["channel"],
        format!("redisson_lock__channel:{{{name}}}")
    );
    assert_eq!(json["channels"][0]["numsub"], 0);

    // Someone waiting on the channel is counted.
    let _sub = server
        .raw()
        .subscribe(&format!("redisson_lock__channel:{{{name}}}"));
    let (_, json) = server.json(&["status", &name, "--json"]);
    assert_eq!(json["channels"][0]["numsub"], 1);

    assert_eq!(json["no_expiry"], false);

    // Nothing there: status 1, kind none, no TTL (not PTTL's -2).
    let (rc, json) = server.json(&["status", &unique("absent"), "--json"]);
    assert_eq!(rc, 1);
    assert_eq!(json["kind"], "none");
    assert_eq!(json["exists"], false);
    assert_eq!(json["ttl_ms"], Value::Null);
    assert_eq!(json["no_expiry"], false);

    // A hold without expiry: no TTL either (not -1), and `no_expiry` says so.
    raw.cmd(&["PERSIST", &name]);
    let (_, json) = server.json(&["--json", "status", &name]);
    assert_eq!(json["ttl_ms"], Value::Null);
    assert_eq!(json["no_expiry"], true);
    let (_, json) = server.json(&["list", &name, "--json"]);
    assert_eq!(json[0]["ttl_ms"], Value::Null, "{json}");
    assert_eq!(json[0]["no_expiry"], true, "{json}");
}

#[test]
fn status_shows_the_fair_queue_with_deadlines() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("fair");
    let (holder, w1, w2) = (
        format!("{}:1", java_client_id()),
        format!("{}:2", java_client_id()),
        format!("{}:3", java_client_id()),
    );
    raw.cmd(&["HSET", &name, &holder, "1"]);
    raw.cmd(&["PEXPIRE", &name, "30000"]);
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    raw.cmd(&["RPUSH", &queue, &w1, &w2]);
    let now = now_ms();
    let (d1, d2) = (now + 330_000, now + 630_000);
    raw.cmd(&[
        "ZADD",
        &timeouts,
        &d1.to_string(),
        &w1,
        &d2.to_string(),
        &w2,
    ]);
    let _sub = server
        .raw()
        .subscribe(&format!("redisson_lock__channel:{{{name}}}:{w1}"));

    let (rc, json) = server.json(&["status", &name, "--json"]);
    assert_eq!(rc, 0);
    assert_eq!(json["kind"], "fair");
    assert_eq!(json["holders"][0]["field"], holder.as_str());
    assert_eq!(json["queue_length"], 2);
    let q = json["queue"].as_array().unwrap();
    assert_eq!(q[0]["field"], w1.as_str());
    assert_eq!(q[0]["position"], 1);
    assert_eq!(q[0]["deadline_ms"], d1);
    assert_eq!(q[0]["subscribers"]["numsub"], 1);
    assert_eq!(q[1]["field"], w2.as_str());
    assert_eq!(q[1]["owner_id"], 3);
    assert_eq!(q[1]["subscribers"]["numsub"], 0);
    let left = q[1]["deadline_in_ms"].as_i64().unwrap();
    assert!((620_000..=630_000).contains(&left), "{left}");

    let text = stdout(&server.cli(&["status", &name]));
    assert!(text.contains("queue       2 waiting"), "{text}");
    assert!(text.contains("1. client"), "{text}");
    assert!(text.contains("deadline in 5m"), "{text}");
}

#[test]
fn status_shows_readers_with_timeouts_and_writers() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("rw");
    let (r1, r2) = (
        format!("{}:1", java_client_id()),
        format!("{}:7", java_client_id()),
    );
    raw.cmd(&["HSET", &name, "mode", "read", &r1, "2", &r2, "1"]);
    raw.cmd(&["PEXPIRE", &name, "25000"]);
    for (field, k, ttl) in [(&r1, 1, "20000"), (&r1, 2, "25000"), (&r2, 1, "10000")] {
        let key = format!("{{{name}}}:{field}:rwlock_timeout:{k}");
        raw.cmd(&["SET", &key, "1", "PX", ttl]);
    }

    let (rc, json) = server.json(&["status", &name, "--json"]);
    assert_eq!(rc, 0);
    assert_eq!(json["kind"], "rwlock");
    assert_eq!(json["mode"], "read");
    let holders = json["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 2);
    let h1 = holders.iter().find(|h| h["field"] == r1.as_str()).unwrap();
    assert_eq!(h1["mode"], "read");
    assert_eq!(h1["count"], 2);
    let t = h1["timeouts_ms"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    assert!(t[0].as_i64().unwrap() > 15_000 && t[1].as_i64().unwrap() > 20_000);
    let h2 = holders.iter().find(|h| h["field"] == r2.as_str()).unwrap();
    assert_eq!(h2["timeouts_ms"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["channels"][0]["channel"],
        format!("redisson_rwlock:{{{name}}}")
    );
    let text = stdout(&server.cli(&["status", &name]));
    assert!(text.contains("held for reading"), "{text}");
    assert!(text.contains("reader  client"), "{text}");

    // A writer.
    let wname = unique("rw");
    let writer = format!("{}:4:write", java_client_id());
    raw.cmd(&["HSET", &wname, "mode", "write", &writer, "1"]);
    raw.cmd(&["PEXPIRE", &wname, "30000"]);
    let (_, json) = server.json(&["status", &wname, "--json"]);
    let text = stdout(&server.cli(&["status", &wname]));
    assert!(text.contains("held for writing"), "{text}");
    assert_eq!(json["mode"], "write");
    assert_eq!(json["holders"][0]["mode"], "write");
    assert_eq!(json["holders"][0]["owner_id"], 4);
}

#[test]
fn status_of_fenced_semaphores_and_latches() {
    let server = Server::start();
    let mut raw = server.raw();

    let fenced = unique("fenced");
    java_hold(&mut raw, &fenced, &java_client_id(), 9, 1, 30_000);
    raw.cmd(&["SET", &format!("redisson_lock_token:{{{fenced}}}"), "17"]);
    let (_, json) = server.json(&["status", &fenced, "--json"]);
    assert_eq!(json["kind"], "fenced");
    assert_eq!(json["token"], 17);

    let sem = unique("sem");
    raw.cmd(&["SET", &sem, "3"]);
    let (rc, json) = server.json(&["status", &sem, "--json"]);
    assert_eq!(rc, 0);
    assert_eq!(json["kind"], "semaphore");
    assert_eq!(json["available_permits"], 3);
    assert_eq!(json["locked"], Value::Null);

    let psem = unique("psem");
    raw.cmd(&["SET", &psem, "1"]);
    let expiry = now_ms() + 60_000;
    raw.cmd(&[
        "ZADD",
        &format!("{{{psem}}}:timeout"),
        &expiry.to_string(),
        "0123456789abcdef0123456789abcdef",
        "922337203685477",
        "fedcba9876543210fedcba9876543210",
    ]);
    let (_, json) = server.json(&["status", &psem, "--json"]);
    assert_eq!(json["kind"], "permit-semaphore");
    assert_eq!(json["available_permits"], 1);
    assert_eq!(json["permits_acquired"], 2);
    let permits = json["permits"].as_array().unwrap();
    assert_eq!(permits[0]["expires_ms"], expiry);
    assert_eq!(permits[1]["expires_ms"], Value::Null);

    let latch = unique("latch");
    raw.cmd(&["SET", &latch, "2"]);
    let (_, json) = server.json(&["status", &latch, "--kind", "latch", "--json"]);
    assert_eq!(json["kind"], "latch");
    assert_eq!(json["kind_forced"], true);
    assert_eq!(json["count"], 2);
    assert_eq!(
        json["channels"][0]["channel"],
        format!("redisson_countdownlatch__channel__{{{latch}}}")
    );
    // Someone awaiting the latch tells it apart from a semaphore.
    let _sub = server
        .raw()
        .subscribe(&format!("redisson_countdownlatch__channel__{{{latch}}}"));
    let (_, json) = server.json(&["status", &latch, "--json"]);
    assert_eq!(json["kind"], "latch");
}

#[test]
fn list_finds_lock_like_keys_with_their_kind() {
    let server = Server::start();
    let mut raw = server.raw();
    let p = unique("ls");
    let plain = format!("{p}-plain");
    let fair = format!("{p}-fair");
    let rw = format!("{p}-rw");
    let sem = format!("{p}-sem");
    java_hold(&mut raw, &plain, &java_client_id(), 1, 1, 30_000);
    java_hold(&mut raw, &fair, &java_client_id(), 1, 1, 30_000);
    let waiter = format!("{}:2", java_client_id());
    raw.cmd(&["RPUSH", &format!("redisson_lock_queue:{{{fair}}}"), &waiter]);
    raw.cmd(&[
        "ZADD",
        &format!("redisson_lock_timeout:{{{fair}}}"),
        &(now_ms() + 300_000).to_string(),
        &waiter,
    ]);
    let reader = format!("{}:3", java_client_id());
    raw.cmd(&["HSET", &rw, "mode", "read", &reader, "1"]);
    raw.cmd(&[
        "SET",
        &format!("{{{rw}}}:{reader}:rwlock_timeout:1"),
        "1",
        "PX",
        "30000",
    ]);
    raw.cmd(&["SET", &sem, "5"]);
    raw.cmd(&[
        "SET",
        &format!("redisson_unlock_latch:{{{plain}}}:00ff"),
        "1",
    ]);
    raw.cmd(&["HSET", &format!("{p}-not-a-lock"), "colour", "blue"]);

    let (rc, json) = server.json(&["list", "--json"]);
    assert_eq!(rc, 0);
    let rows = json.as_array().unwrap();
    let kind_of = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .map(|r| r["kind"].as_str().unwrap().to_owned())
    };
    assert_eq!(kind_of(&plain).as_deref(), Some("rlock"), "{json}");
    assert_eq!(kind_of(&fair).as_deref(), Some("fair"), "{json}");
    assert_eq!(kind_of(&rw).as_deref(), Some("rwlock"), "{json}");
    assert_eq!(kind_of(&sem), None, "counters only with --counters: {json}");
    assert_eq!(rows.len(), 3, "only the locks, each once: {json}");
    let fair_row = rows.iter().find(|r| r["name"] == fair.as_str()).unwrap();
    assert_eq!(fair_row["waiting"], 1);

    let (_, json) = server.json(&["list", "--counters", "--json"]);
    assert_eq!(json.as_array().unwrap().len(), 4, "{json}");

    // A pattern narrows the scan; the fair lock is found from its name.
    let (_, json) = server.json(&["list", &format!("{p}-f*"), "--json"]);
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["name"], fair.as_str());

    let text = stdout(&server.cli(&["list"]));
    assert!(text.starts_with("KIND"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("fair") && l.ends_with(&fair)),
        "{text}"
    );
}

#[test]
fn force_unlock_removes_each_kind_and_publishes_what_its_waiters_expect() {
    let server = Server::start();
    let mut raw = server.raw();

    // RLock: `0` on redisson_lock__channel:{N}.
    let name = unique("fu");
    java_hold(&mut raw, &name, &java_client_id(), 1, 3, 30_000);
    let mut sub = server
        .raw()
        .subscribe(&format!("redisson_lock__channel:{{{name}}}"));
    let out = server.cli(&["force-unlock", &name]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("force-unlocked"));
    assert!(!raw.exists(&name));
    assert_eq!(sub.message(Duration::from_secs(5)).as_deref(), Some("0"));
    // Nothing left: status 1.
    let (rc, json) = server.json(&["force-unlock", &name, "--json"]);
    assert_eq!(rc, 1);
    assert_eq!(json["unlocked"], false);

    // Fair lock: `0` to the head waiter's own channel; the queue stays.
    let fair = unique("fu-fair");
    java_hold(&mut raw, &fair, &java_client_id(), 1, 1, 30_000);
    let head = format!("{}:8", java_client_id());
    raw.cmd(&["RPUSH", &format!("redisson_lock_queue:{{{fair}}}"), &head]);
    raw.cmd(&[
        "ZADD",
        &format!("redisson_lock_timeout:{{{fair}}}"),
        &(now_ms() + 300_000).to_string(),
        &head,
    ]);
    let mut sub = server
        .raw()
        .subscribe(&format!("redisson_lock__channel:{{{fair}}}:{head}"));
    let (rc, json) = server.json(&["force-unlock", &fair, "--json"]);
    assert_eq!(rc, 0);
    assert_eq!(json["kind"], "fair");
    assert!(!raw.exists(&fair));
    assert_eq!(sub.message(Duration::from_secs(5)).as_deref(), Some("0"));

    // Write lock: `1` on redisson_rwlock:{N}; read lock: `0`.
    for (mode, field_suffix, message) in [("write", ":write", "1"), ("read", "", "0")] {
        let rw = unique("fu-rw");
        let field = format!("{}:5{field_suffix}", java_client_id());
        raw.cmd(&["HSET", &rw, "mode", mode, &field, "1"]);
        raw.cmd(&["PEXPIRE", &rw, "30000"]);
        let mut sub = server.raw().subscribe(&format!("redisson_rwlock:{{{rw}}}"));
        let (rc, json) = server.json(&["force-unlock", &rw, "--json"]);
        assert_eq!(rc, 0, "{mode}");
        assert_eq!(json["kind"], mode);
        assert!(!raw.exists(&rw));
        assert_eq!(
            sub.message(Duration::from_secs(5)).as_deref(),
            Some(message)
        );
    }

    // An explicit kind that does not match what is held removes nothing.
    let rw = unique("fu-rw");
    raw.cmd(&[
        "HSET",
        &rw,
        "mode",
        "read",
        &format!("{}:5", java_client_id()),
        "1",
    ]);
    let out = server.cli(&["force-unlock", &rw, "--kind", "write"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(raw.exists(&rw));

    // Not a lock: refused.
    let sem = unique("fu-sem");
    raw.cmd(&["SET", &sem, "2"]);
    let out = server.cli(&["force-unlock", &sem]);
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(raw.exists(&sem));
}

#[test]
fn run_holds_the_lock_while_the_command_runs_and_returns_its_status() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("run");
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

    std::fs::write(&go.0, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(!raw.exists(&name), "released when the command ended");
}

#[test]
fn run_returns_75_when_the_lock_stays_busy() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("busy");
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
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("lost");
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
    let child = server
        .cli_command(&[
            "run", &name, "--check", "100ms", "--signal", "INT", "--grace", "300ms", "--", "sh",
            "-c", &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the command started", || started.read().is_some());
    let t = Instant::now();
    assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    // A lease is a time limit: when it runs out, the command is signalled.
    let name = unique("lease");
    let t = Instant::now();
    let status = server
        .cli_command(&["run", &name, "--lease", "500ms", "--", "sleep", "5"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(76));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn run_passes_the_fencing_token_and_handles_missing_commands() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("token");
    raw.cmd(&["SET", &format!("redisson_lock_token:{{{name}}}"), "41"]);
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
    assert_eq!(stdout(&out).trim(), format!("42 fenced {name}"));

    let out = server.cli(&["run", &name, "--", "/nonexistent/command"]);
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    assert!(!raw.exists(&name), "released after the failed start");

    // Killed by a signal: 128 + N, as a shell reports.
    let out = server.cli(&["run", &name, "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(code(&out), 137);
}

#[test]
fn run_releases_the_lock_on_sigterm_and_while_waiting() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("term");
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
    // The holder may listen on the channel too (to hear a forced unlock).
    let holder_subs = numsub();
    let waiter = server
        .cli_command(&["run", &name, "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the waiter subscribed", || numsub() == holder_subs + 1);
    // SIGINT while waiting: gives up with 130, nothing left behind.
    send(waiter.id(), "INT");
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    // A fair waiter interrupted leaves the queue.
    let fair_waiter = server
        .cli_command(&["run", &name, "--kind", "fair", "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
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
fn running(pid: u32) -> bool {
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
fn grandchild_pid(file: &TempPath) -> u32 {
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
fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
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
struct KillOnDrop(u32);

impl KillOnDrop {
    fn disarm(self) {
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

#[test]
fn run_kills_the_whole_process_group_when_the_lock_is_lost() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("lost-group");
    let pid_file = TempPath::new("lost-group-pid");
    // `sh` passes nothing on to its background job: before process groups,
    // TERM reached `sh` only and `sleep` ran on after the lock was lost.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {}; wait",
        pid_file.str()
    );
    let child = server.cli_spawn(&["run", &name, "--check", "100ms", "--", "sh", "-c", &script]);
    let cli = KillOnDrop(child.id());
    let grandchild = grandchild_pid(&pid_file);
    let guard = KillOnDrop(grandchild);
    assert!(raw.exists(&name));

    assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    let (status, err) = finish(child);
    cli.disarm();
    assert_eq!(status, Some(76), "{err}");
    eventually("the grandchild is gone", || !running(grandchild));
    guard.disarm();
    assert!(err.contains("process group"), "{err}");

    // A grandchild that ignores the signal is killed after --grace, though
    // the command itself ended at once.
    let name = unique("lost-group-kill");
    let pid_file = TempPath::new("lost-group-pid");
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {}; while :; do sleep 0.05; done' \
         </dev/null >/dev/null 2>&1 & wait",
        pid_file.str()
    );
    let child = server.cli_spawn(&[
        "run", &name, "--check", "100ms", "--grace", "500ms", "--", "sh", "-c", &script,
    ]);
    let cli = KillOnDrop(child.id());
    let grandchild = grandchild_pid(&pid_file);
    let guard = KillOnDrop(grandchild);
    assert_eq!(code(&server.cli(&["force-unlock", &name])), 0);
    let (status, err) = finish(child);
    cli.disarm();
    assert_eq!(status, Some(76), "{err}");
    assert!(err.contains("SIGKILL"), "{err}");
    eventually("the grandchild is gone", || !running(grandchild));
    guard.disarm();
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
        let child = server.cli_spawn(&["run", &name, "--", "sh", "-c", &script]);
        let cli = KillOnDrop(child.id());
        let grandchild = grandchild_pid(&pid_file);
        let guard = KillOnDrop(grandchild);
        send(child.id(), sig);
        let (code, err) = finish(child);
        cli.disarm();
        assert_eq!(code, Some(status), "{sig}: {err}");
        assert_eq!(marker.read(), Some(format!("{sig}\n")), "{sig}");
        eventually("the grandchild is gone", || !running(grandchild));
        guard.disarm();
        assert!(!raw.exists(&name), "{sig}: released");
    }
}

fn send(pid: u32, sig: &str) {
    redisson_lock_testkit::process::signal(pid, &format!("-{sig}"));
}

#[test]
fn watch_redraws_until_told_to_stop() {
    let server = Server::start();
    let mut raw = server.raw();
    let name = unique("watch");
    java_hold(&mut raw, &name, &java_client_id(), 3, 1, 30_000);
    let out = server.cli(&[
        "watch",
        &name,
        "--interval",
        "100ms",
        "--count",
        "3",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let frames: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 3);
    assert!(frames.iter().all(|f| f["kind"] == "rlock"));

    // Without --count it runs until Ctrl-C, then exits 0.
    let mut child = server
        .cli_command(&["watch", &name, "--interval", "100ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut frames = 0;
    while frames < 2 {
        let line = lines.next().expect("a frame").unwrap();
        if line.starts_with("name ") {
            frames += 1;
        }
    }
    send(child.id(), "INT");
    for line in lines {
        line.unwrap();
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn usage_connection_and_credential_errors_have_their_statuses_and_hide_passwords() {
    for bad in [
        &["frobnicate"][..],
        &[],
        &["status"],
        &["run", "x", "--wait", "soon", "--", "true"],
        &["run", "x", "-n", "--wait", "1s", "--", "true"],
        &["run", "x", "--json", "--", "true"],
        &["run", "x"],
    ] {
        let out = std::process::Command::new(BIN).args(bad).output().unwrap();
        assert_eq!(code(&out), 64, "{bad:?}");
        assert!(!stderr(&out).is_empty(), "{bad:?}");
    }
    let out = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("EXIT STATUS"));
    // Each command has its own help.
    for (command, option) in [
        ("run", "--nonblock"),
        ("status", "--kind"),
        ("watch", "--interval"),
        ("list", "--counters"),
        ("force-unlock", "--kind"),
    ] {
        let out = std::process::Command::new(BIN)
            .args([command, "--help"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{command}");
        assert!(stdout(&out).contains(option), "{command}: {}", stdout(&out));
    }
    let out = std::process::Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("force-unlock"));
    let out = std::process::Command::new(BIN)
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).starts_with("redisson-lock "));

    // Nobody listens: 69, and the password is not printed.
    let port = free_port();
    let url = format!("redis://:hunter2secret@127.0.0.1:{port}");
    let out = std::process::Command::new(BIN)
        .args(["--url", &url, "--timeout", "500ms", "status", "x"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(!stderr(&out).contains("hunter2secret"));
    assert!(!stdout(&out).contains("hunter2secret"));

    // REDIS_URL is used when --url is not given.
    let server = Server::private(&["--requirepass", "right-pass"]);
    let out = std::process::Command::new(BIN)
        .env(
            "REDIS_URL",
            format!("redis://:wrong-pass@127.0.0.1:{}", server.port),
        )
        .args(["status", "x"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 77, "{}", stderr(&out));
    assert!(!stderr(&out).contains("wrong-pass"));
    let out = std::process::Command::new(BIN)
        .env(
            "REDIS_URL",
            format!("redis://:right-pass@127.0.0.1:{}", server.port),
        )
        .args(["status", "x"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    // A URL that is not one: 78, not echoed.
    let out = std::process::Command::new(BIN)
        .args(["--url", "http://user:pw-xyz@host", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(!stderr(&out).contains("pw-xyz"));
}

/// `rediss://` with the tool's TLS feature (on by default) is tried for
/// real; without one it is refused with 78, naming the tool's own feature.
#[test]
fn rediss_urls_follow_the_tools_tls_features() {
    let port = free_port();
    let url = format!("rediss://:tls-secret@127.0.0.1:{port}");
    let out = std::process::Command::new(BIN)
        .env_remove("REDIS_URL")
        .args(["--url", &url, "--timeout", "500ms", "status", "x"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("tls-secret"), "{err}");
    if cfg!(any(feature = "tls-rustls", feature = "tls-native-tls")) {
        // Nobody listens there: unreachable, not a configuration error.
        assert_eq!(code(&out), 69, "{err}");
    } else {
        assert_eq!(code(&out), 78, "{err}");
        assert!(
            err.contains("tls-rustls") && err.contains("redisson-lock-cli"),
            "{err}"
        );
    }
}
