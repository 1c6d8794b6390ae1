//! `status`, `list` and `watch` reading state written the way Java does.

use std::process::Stdio;

use crate::common::*;
use crate::run::send;
use crate::{code, java_hold, java_queue, stderr, stdout};
use serde_json::Value;

#[test]
fn status_shows_a_java_hold_and_json_parses() {
    let (server, mut raw, name) = setup("java");
    let client = java_client_id();
    java_hold(&mut raw, &name, &client, 57, 2, 30_000);

    let out = server.cli(&["status", &name]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("rlock"), "{text}");
    assert!(
        text.contains(&format!(
            "client {client}  thread 57  (not registered: a Java Redisson client, or one that ended)  count 2"
        )),
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
    assert_eq!(
        holders[0]["client"],
        Value::Null,
        "a Java client registers nothing"
    );
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
    let (server, mut raw, name) = setup("fair");
    let (holder, w1, w2) = (
        format!("{}:1", java_client_id()),
        format!("{}:2", java_client_id()),
        format!("{}:3", java_client_id()),
    );
    raw.cmd(&["HSET", &name, &holder, "1"]);
    raw.cmd(&["PEXPIRE", &name, "30000"]);
    let now = now_ms();
    let (d1, d2) = (now + 330_000, now + 630_000);
    java_queue(&mut raw, &name, &w1, d1);
    java_queue(&mut raw, &name, &w2, d2);
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
    assert_eq!(json["free_with_head"], Value::Null, "held: nothing to note");
    assert!(!text.contains("note "), "{text}");

    // The holder gone (as after a crash, once its TTL ran out) and the head
    // still queued: the shape a hung Java 3.12-3.23 waiter leaves (issue
    // 29). `status` says so and gives the command that would wake it.
    raw.cmd(&["DEL", &name]);
    let channel = format!("redisson_lock__channel:{{{name}}}:{w1}");
    let (_, json) = server.json(&["status", &name, "--json"]);
    assert_eq!(json["free_with_head"]["field"], w1.as_str(), "{json}");
    assert_eq!(json["free_with_head"]["channel"], channel.as_str());
    let wake = format!("redis-cli PUBLISH '{channel}' 0");
    assert_eq!(json["free_with_head"]["wake"], wake.as_str());
    let text = stdout(&server.cli(&["status", &name]));
    assert!(
        text.contains("the lock is free but waiter 1 heads the queue"),
        "{text}"
    );
    assert!(text.contains(&wake), "{text}");
}

#[test]
fn status_shows_readers_with_timeouts_and_writers() {
    let (server, mut raw, name) = setup("rw");
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
    let (server, mut raw, fenced) = setup("fenced");
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
    let (server, mut raw, p) = setup("ls");
    let plain = format!("{p}-plain");
    let fair = format!("{p}-fair");
    let rw = format!("{p}-rw");
    let sem = format!("{p}-sem");
    java_hold(&mut raw, &plain, &java_client_id(), 1, 1, 30_000);
    java_hold(&mut raw, &fair, &java_client_id(), 1, 1, 30_000);
    let waiter = format!("{}:2", java_client_id());
    java_queue(&mut raw, &fair, &waiter, now_ms() + 300_000);
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
    // Other kinds' waiters are not in Redis: not counted, not shown as 0.
    let rw_row = rows.iter().find(|r| r["name"] == rw.as_str()).unwrap();
    assert_eq!(rw_row["waiting"], Value::Null, "{json}");

    let (_, json) = server.json(&["list", "--counters", "--json"]);
    assert_eq!(json.as_array().unwrap().len(), 4, "{json}");

    // A pattern narrows the scan; the fair lock is found from its name.
    let (_, json) = server.json(&["list", &format!("{p}-f*"), "--json"]);
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["name"], fair.as_str());

    // A held fair lock with nobody queued looks like an RLock: both forms
    // say so (issue 29).
    let plain_row = rows_of(&server, &plain);
    let candidates = plain_row["candidates"].as_array().unwrap();
    assert!(candidates.iter().any(|c| c == "fair"), "{plain_row}");
    let text = stdout(&server.cli(&["list"]));
    assert!(text.starts_with("KIND"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("rlock:") && l.contains("held fair lock with nobody queued")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("fair") && l.ends_with(&fair)),
        "{text}"
    );
    let text = stdout(&server.cli(&["status", &plain]));
    assert!(text.contains("held fair lock with nobody queued"), "{text}");
}

#[test]
fn watch_redraws_until_told_to_stop() {
    let (server, mut raw, name) = setup("watch");
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

/// The `list --json` row of `name`.
fn rows_of(server: &Server, name: &str) -> serde_json::Value {
    let (_, json) = server.json(&["list", "--json"]);
    json.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no row for {name}: {json}"))
}

/// `--prefix P`: every command reads and writes `P` + NAME, as a Java
/// service with a prefixing `NameMapper` does, and shows NAME.
#[test]
fn prefix_maps_every_name_as_a_java_name_mapper_does() {
    let (server, mut raw, name) = setup("prefix");
    let prefix = "staging:";
    let key = format!("{prefix}{name}");
    java_hold(&mut raw, &key, &java_client_id(), 1, 1, 30_000);

    let (rc, json) = server.json(&["--prefix", prefix, "status", &name, "--json"]);
    assert_eq!(rc, 0, "{json}");
    assert_eq!(json["name"], name.as_str());
    assert_eq!(json["holders"].as_array().unwrap().len(), 1, "{json}");
    let (rc, _) = server.json(&["status", &name, "--json"]);
    assert_eq!(rc, 1, "nothing under the bare name");

    let (_, json) = server.json(&["--prefix", prefix, "list", "--json"]);
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["name"], name.as_str());
    assert_eq!(rows[0]["kind"], "rlock");

    let out = server.cli(&["--prefix", prefix, "force-unlock", &name]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!raw.exists(&key));

    // `run` takes the lock under the prefixed key.
    let script = "test -n \"$REDISSON_LOCK_OWNER\"";
    let marker = TempPath::new("prefix-held");
    let script = format!("{script} && echo held > {}", marker.str());
    let out = server.cli(&["--prefix", prefix, "run", &name, "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(marker.read().is_some());
    let go = TempPath::new("prefix-go");
    let file = TempPath::new("prefix-owner");
    let script = format!(
        "echo \"$REDISSON_LOCK_OWNER\" > {}; while [ ! -e {} ]; do sleep 0.02; done",
        file.str(),
        go.str()
    );
    let mut child = server
        .cli_command(&["--prefix", prefix, "run", &name, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the command started", || {
        file.read().is_some_and(|s| s.ends_with('\n'))
    });
    let owner = file.read().unwrap().trim().to_owned();
    assert_eq!(
        raw.cmd(&["HGET", &key, &owner]).text().as_deref(),
        Some("1"),
        "held under {key}"
    );
    assert!(!raw.exists(&name));
    std::fs::write(&go.0, "").unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!raw.exists(&key), "released when the command ended");
}
