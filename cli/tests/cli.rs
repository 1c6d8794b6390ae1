//! The `redisson-lock` binary against a real, private `redis-server`: state
//! written by hand the way Java Redisson writes it, read back by `status`,
//! `list` and `watch`; `force-unlock` removing it and publishing what the
//! kind's waiters expect; `run` holding a lock around a command, passing its
//! status through, giving up with 75, and signalling the command with 76
//! when the lock is lost. Exit statuses are those of `redisson-lock --help`.

mod common;

#[path = "cli/errors.rs"]
mod errors;
#[path = "cli/force_unlock.rs"]
mod force_unlock;
#[path = "cli/inspect.rs"]
mod inspect;
#[path = "cli/run.rs"]
mod run;

use common::*;

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

/// A Java-shaped fair-lock waiter: its `field` (`<uuid>:<threadId>`) pushed
/// onto the queue of fair lock `name`, and its deadline (epoch ms) set in
/// the lock's timeout set.
fn java_queue(raw: &mut Resp, name: &str, field: &str, deadline_ms: i64) {
    raw.cmd(&["RPUSH", &format!("redisson_lock_queue:{{{name}}}"), field]);
    raw.cmd(&[
        "ZADD",
        &format!("redisson_lock_timeout:{{{name}}}"),
        &deadline_ms.to_string(),
        field,
    ]);
}
