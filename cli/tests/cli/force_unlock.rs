//! `force-unlock` of each kind and what it publishes.

use std::time::Duration;

use crate::common::*;
use crate::{code, java_hold, java_queue, stderr, stdout};

#[test]
fn force_unlock_removes_each_kind_and_publishes_what_its_waiters_expect() {
    let (server, mut raw, name) = setup("fu");

    // RLock: `0` on redisson_lock__channel:{N}.
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
    java_queue(&mut raw, &fair, &head, now_ms() + 300_000);
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
