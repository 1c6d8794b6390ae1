//! What the storm counts and the exclusion it checks while it runs.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Counts {
    pub cancelled_acquire: AtomicU64,
    pub cancelled_reenter: AtomicU64,
    pub cancelled_unlock: AtomicU64,
    /// Of the cancellations: dropped after a single poll.
    pub cancelled_at_once: AtomicU64,
    pub acquired: AtomicU64,
    pub not_acquired: AtomicU64,
    pub reentered: AtomicU64,
    pub unlocked: AtomicU64,
    pub dropped: AtomicU64,
    pub held_a_while: AtomicU64,
    pub transient: AtomicU64,
    pub not_held: AtomicU64,
    pub not_reentrant: AtomicU64,
    /// Guards already lost when acquired, or lost by the time they left.
    pub lost: AtomicU64,
    pub kill_normal: AtomicU64,
    pub kill_pubsub: AtomicU64,
    pub killed_connections: AtomicU64,
    pub script_flush: AtomicU64,
}

pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counts {
    pub fn cancellations(&self) -> u64 {
        self.cancelled_acquire.load(Ordering::Relaxed)
            + self.cancelled_reenter.load(Ordering::Relaxed)
            + self.cancelled_unlock.load(Ordering::Relaxed)
    }

    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "cancelled {} (acquire {}, reenter {}, unlock {}; {} after one poll) | \
             acquired {}, not acquired {}, reentered {}, unlocked {}, dropped {}, held a while {} | \
             transient errors {}, NotHeld {}, NotReentrant {}, lost {} | \
             chaos: kill normal {}, kill pubsub {} ({} connections), script flush {}",
            self.cancellations(),
            n(&self.cancelled_acquire),
            n(&self.cancelled_reenter),
            n(&self.cancelled_unlock),
            n(&self.cancelled_at_once),
            n(&self.acquired),
            n(&self.not_acquired),
            n(&self.reentered),
            n(&self.unlocked),
            n(&self.dropped),
            n(&self.held_a_while),
            n(&self.transient),
            n(&self.not_held),
            n(&self.not_reentrant),
            n(&self.lost),
            n(&self.kill_normal),
            n(&self.kill_pubsub),
            n(&self.killed_connections),
            n(&self.script_flush),
        )
    }
}

/// Who is inside the critical section. A conflict (an exclusive holder
/// entering beside anyone, or a reader beside a writer) is real unless every
/// holder it met had lost its hold (per `is_lost`) by the time it left: a
/// lease running out under a holder is not a breach of exclusion.
#[derive(Default)]
pub struct Exclusion {
    pub state: Mutex<ExclusionState>,
}

#[derive(Default)]
pub struct ExclusionState {
    pub next: u64,
    pub inside: HashMap<u64, bool>,
    pub conflicts: Vec<(u64, bool, Vec<u64>)>,
    pub lost_when_left: HashSet<u64>,
}

impl Exclusion {
    pub fn enter(&self, exclusive: bool) -> u64 {
        let mut s = self.state.lock().unwrap();
        let id = s.next;
        s.next += 1;
        let met: Vec<u64> = s
            .inside
            .iter()
            .filter(|(_, other_exclusive)| exclusive || **other_exclusive)
            .map(|(id, _)| *id)
            .collect();
        if !met.is_empty() {
            s.conflicts.push((id, exclusive, met));
        }
        s.inside.insert(id, exclusive);
        id
    }

    pub fn leave(&self, id: u64, lost: bool) {
        let mut s = self.state.lock().unwrap();
        s.inside.remove(&id);
        if lost {
            s.lost_when_left.insert(id);
        }
    }

    /// Conflicts with a holder whose hold was still certain when it left.
    pub fn breaches(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.conflicts
            .iter()
            .filter(|(_, _, met)| met.iter().any(|m| !s.lost_when_left.contains(m)))
            .map(|(id, exclusive, met)| {
                format!("holder #{id} (exclusive: {exclusive}) entered beside {met:?}")
            })
            .collect()
    }
}
