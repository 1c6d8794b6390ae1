//! The give-backs of semaphore permits that keep trying in the background
//! until they reach Redis (docs/PROTOCOL.md §9.2): one small record each
//! while pending, counted ([`Client::pending_releases`](crate::Client::pending_releases),
//! the `redisson_lock_pending_releases` gauge), and abandoned by a shutdown,
//! which reports them per semaphore.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::base::telemetry::{self, GaveUp};

/// A client's pending give-backs of permits.
pub(crate) struct PendingReleases {
    /// The id of the next record.
    next: AtomicU64,
    records: Mutex<HashMap<u64, Record>>,
    /// Set once, by a shutdown: every give-back stops trying.
    abandoned: watch::Sender<bool>,
}

/// What one pending give-back gives back.
struct Record {
    kind: &'static str,
    /// The semaphore (its Redis key).
    name: String,
    permits: u32,
}

impl PendingReleases {
    /// No give-back pending.
    pub(crate) fn new() -> Arc<PendingReleases> {
        Arc::new(PendingReleases {
            next: AtomicU64::new(0),
            records: Mutex::new(HashMap::new()),
            abandoned: watch::Sender::new(false),
        })
    }

    /// Register a give-back of `permits` permits of the semaphore `name` (of
    /// `kind`), pending until the returned record is told how it ended (or
    /// dropped, which abandons it).
    pub(crate) fn enter(self: &Arc<Self>, kind: &'static str, name: &str, permits: u32) -> Pending {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let record = Record {
            kind,
            name: name.to_owned(),
            permits,
        };
        self.records.lock().insert(id, record);
        telemetry::pending_release(kind, true);
        Pending {
            releases: self.clone(),
            id,
        }
    }

    /// How many give-backs are pending.
    pub(crate) fn count(&self) -> usize {
        self.records.lock().len()
    }

    /// Whether a shutdown abandoned the give-backs.
    pub(crate) fn is_abandoned(&self) -> bool {
        *self.abandoned.borrow()
    }

    /// Resolves once a shutdown has abandoned the give-backs.
    pub(crate) async fn abandoning(&self) {
        let mut abandoned = self.abandoned.subscribe();
        let _ = abandoned.wait_for(|abandoned| *abandoned).await;
    }

    /// At shutdown: stop every give-back still pending (and every later
    /// one), and report them: counted, and one WARN per semaphore with how
    /// many give-backs and permits.
    pub(crate) fn abandon_all(&self) {
        self.abandoned.send_replace(true);
        let records: Vec<Record> = self.records.lock().drain().map(|(_, r)| r).collect();
        let mut per_semaphore: BTreeMap<(&'static str, String), (u64, u64)> = BTreeMap::new();
        for record in records {
            telemetry::pending_release(record.kind, false);
            let (releases, permits) = per_semaphore.entry((record.kind, record.name)).or_default();
            *releases += 1;
            *permits += u64::from(record.permits);
        }
        for ((kind, name), (releases, permits)) in per_semaphore {
            telemetry::abandoned_releases(kind, GaveUp::Shutdown, releases);
            tracing::warn!(
                lock = %name,
                kind,
                releases,
                permits,
                "shutdown abandoned give-backs of permits that could not reach Redis; \
                 those permits stay taken (a permit-expirable semaphore's until their lease ends)"
            );
        }
    }

    /// Take record `id` off the pending ones, if it still is.
    fn remove(&self, id: u64) -> Option<Record> {
        let record = self.records.lock().remove(&id);
        if let Some(record) = &record {
            telemetry::pending_release(record.kind, false);
        }
        record
    }
}

/// One pending give-back of permits. Dropped before it is told how it ended
/// (its task dropped with its runtime), it was abandoned, and is reported
/// as by a shutdown.
pub(crate) struct Pending {
    releases: Arc<PendingReleases>,
    id: u64,
}

impl Pending {
    /// It reached Redis, or became unnecessary: no longer pending.
    pub(crate) fn landed(self) {
        self.releases.remove(self.id);
    }

    /// It ended without its permits known to be back, for `reason`
    /// (counted; the caller logs why). A shutdown's abandonment is reported
    /// once, by whichever sees it first.
    pub(crate) fn gave_up(self, reason: GaveUp) {
        if reason == GaveUp::Shutdown {
            return; // dropped: reported below, unless a shutdown already did
        }
        if let Some(record) = self.releases.remove(self.id) {
            telemetry::abandoned_releases(record.kind, reason, 1);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(record) = self.releases.remove(self.id) {
            telemetry::abandoned_releases(record.kind, GaveUp::Shutdown, 1);
            tracing::warn!(
                lock = %record.name,
                kind = record.kind,
                releases = 1,
                permits = record.permits,
                "shutdown abandoned give-backs of permits that could not reach Redis; \
                 those permits stay taken (a permit-expirable semaphore's until their lease ends)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_give_back_ends_once() {
        let releases = PendingReleases::new();
        let landed = releases.enter("semaphore", "a", 2);
        let expired = releases.enter("semaphore", "a", 1);
        let abandoned = releases.enter("permit_expirable_semaphore", "b", 1);
        assert_eq!(releases.count(), 3);
        landed.landed();
        expired.gave_up(GaveUp::LatchExpired);
        assert_eq!(releases.count(), 1);
        assert!(!releases.is_abandoned());
        releases.abandon_all();
        assert!(releases.is_abandoned());
        assert_eq!(releases.count(), 0);
        drop(abandoned); // already reported by the shutdown
        let late = releases.enter("semaphore", "a", 1);
        assert_eq!(releases.count(), 1);
        drop(late);
        assert_eq!(releases.count(), 0);
    }
}
