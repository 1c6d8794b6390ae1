//! Which processes are alive, read from `/proc` on Linux (no `unsafe`, no
//! library): the members of a process group, the descendants of a process.
//!
//! Why not `kill(pid, 0)` alone: it succeeds for a zombie, and a process
//! whose parent died is reaped by whoever adopts it, which in a container
//! (a PID 1 that is not an init) may be never. A zombie has run its course:
//! it holds no file, no socket, nothing of the lock's work. Elsewhere than
//! on Linux these fall back to `kill(pid, 0)` and know no descendants.

use nix::unistd::Pid;

/// One process, told apart from a later one given the same PID by its
/// start time (in clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: Pid,
    start: u64,
}

/// What `/proc/PID/stat` says of a process.
#[cfg(target_os = "linux")]
struct Stat {
    /// Dead: a zombie (`Z`) or on its way out (`X`).
    dead: bool,
    ppid: i32,
    pgrp: i32,
    start: u64,
}

#[cfg(target_os = "linux")]
fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`: comm may hold spaces and
    // parentheses, so the fields are counted from the last `)`.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        dead: matches!(fields.first()?.chars().next()?, 'Z' | 'X'),
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        // Field 22 of the file, the 20th after the state.
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process of `/proc` with its `stat`; `None` if `/proc` cannot be
/// read.
#[cfg(target_os = "linux")]
fn all() -> Option<Vec<(i32, Stat)>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(
        dir.filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            Some((pid, stat(pid)?))
        })
        .collect(),
    )
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn alive(pid: Pid) -> bool {
    #[cfg(target_os = "linux")]
    if std::path::Path::new("/proc/self/stat").exists() {
        return stat(pid.as_raw()).is_some_and(|s| !s.dead);
    }
    probe(nix::sys::signal::kill(pid, None))
}

/// Whether `proc` still runs: the same process (same start time), not a
/// zombie.
pub fn still(proc: Proc) -> bool {
    #[cfg(target_os = "linux")]
    if std::path::Path::new("/proc/self/stat").exists() {
        return stat(proc.pid.as_raw()).is_some_and(|s| !s.dead && s.start == proc.start);
    }
    probe(nix::sys::signal::kill(proc.pid, None))
}

/// Whether any process of group `pgrp` runs (zombies do not count).
pub fn group_alive(pgrp: Pid) -> bool {
    #[cfg(target_os = "linux")]
    if let Some(all) = all() {
        return all.iter().any(|(_, s)| s.pgrp == pgrp.as_raw() && !s.dead);
    }
    probe(nix::sys::signal::killpg(pgrp, None))
}

/// The running descendants of `pid` (children, theirs, ...), as they are
/// now: a process whose parent has died is adopted by another and is no
/// longer found here. None where `/proc` is not there.
pub fn descendants(pid: Pid) -> Vec<Proc> {
    #[cfg(target_os = "linux")]
    if let Some(all) = all() {
        let mut found: Vec<Proc> = Vec::new();
        // Each once: PIDs read at slightly different moments need not make
        // a tree.
        let mut seen = std::collections::HashSet::from([pid.as_raw()]);
        let mut parents = vec![pid.as_raw()];
        while let Some(parent) = parents.pop() {
            for (child, s) in &all {
                if s.ppid == parent && seen.insert(*child) {
                    parents.push(*child);
                    if !s.dead {
                        found.push(Proc {
                            pid: Pid::from_raw(*child),
                            start: s.start,
                        });
                    }
                }
            }
        }
        return found;
    }
    let _ = pid;
    Vec::new()
}

/// `kill(…, 0)`'s answer: only "no such process" means gone.
fn probe(result: nix::Result<()>) -> bool {
    result != Err(nix::errno::Errno::ESRCH)
}
