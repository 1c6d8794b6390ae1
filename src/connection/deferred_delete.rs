//! Keys to delete soon without a round trip of their own: the unlock
//! latches (docs/PROTOCOL.md §2.4: the client deletes its latch once it has
//! the unlock's reply).
//!
//! When the client is used one call at a time, the next script it sends to
//! the key's node carries the key, as a `DEL` in the same write (see
//! `Redis::eval`), which saves a write and a read on both sides. If no
//! script comes within [`WINDOW`], the background task deletes it.
//!
//! Under contention that would cost more than it saves: holding keys back
//! for the window delays the scripts of other callers. A key queued while
//! the client has waiters (of any kind) or other scripts in flight goes to
//! the background task at once, which deletes whatever is queued with one
//! `DEL` (per hash slot on a cluster, where a `DEL` spans one slot); keys
//! queued meanwhile go with its next `DEL`. So a key outlives its unlock by
//! at most about [`WINDOW`] plus one round trip, never by its TTL, unless
//! Redis cannot be reached.

use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// How long a key queued with no waiter and no script in flight waits for
/// a script to carry it before the background task deletes it. One timer per
/// window while keys come, not one per key.
pub(crate) const WINDOW: Duration = Duration::from_millis(2);

/// The keys of a client waiting to be deleted.
#[derive(Default)]
pub(crate) struct DeferredDeletes {
    pending: Mutex<Vec<String>>,
    /// Scripts sent and not yet answered (or dropped).
    in_flight: AtomicUsize,
    /// Wakes the background task when the first latch comes.
    added: Notify,
    /// Ends the window at once: a latch came while the client had waiters or
    /// scripts in flight.
    now: Notify,
    /// On a cluster a command can carry only the latches of its own slot.
    by_slot: bool,
}

impl DeferredDeletes {
    pub(crate) fn new(by_slot: bool) -> DeferredDeletes {
        DeferredDeletes {
            by_slot,
            ..DeferredDeletes::default()
        }
    }

    /// Queue `key` for deletion: for the next script to carry, or for the
    /// background task at once if the client is `contended` (it has
    /// waiters) or other scripts are in flight.
    pub(crate) fn add(&self, key: String, contended: bool) {
        let mut pending = self.pending.lock();
        let first = pending.is_empty();
        pending.push(key);
        drop(pending);
        if first {
            self.added.notify_one();
        }
        if contended || self.in_flight.load(Ordering::Relaxed) > 0 {
            self.now.notify_one();
        }
    }

    /// Queue keys again that a command was to delete but may not have.
    pub(crate) fn restore(&self, keys: Vec<String>) {
        for key in keys {
            self.add(key, false);
        }
    }

    /// A script on `key` starts: counted in flight until the returned guard
    /// drops, with the latches it is to delete in the same write (none if
    /// another script is in flight: those go in the background batch).
    pub(crate) fn script(&self, key: Option<&str>) -> (InFlight<'_>, Vec<String>) {
        let others = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let carried = match key {
            Some(key) if others == 0 => self.take_for(key),
            _ => Vec::new(),
        };
        (InFlight(self), carried)
    }

    /// The latches a command on `key` can delete in the same write: all of
    /// them off a cluster, those in `key`'s hash slot on one.
    fn take_for(&self, key: &str) -> Vec<String> {
        let mut pending = self.pending.lock();
        if pending.is_empty() {
            return Vec::new();
        }
        if !self.by_slot {
            return std::mem::take(&mut *pending);
        }
        let slot = fred::util::redis_keyslot(key.as_bytes());
        let (same, other) = pending
            .drain(..)
            .partition(|latch| fred::util::redis_keyslot(latch.as_bytes()) == slot);
        *pending = other;
        same
    }

    /// Every latch queued, grouped by hash slot on a cluster.
    pub(crate) fn take_all(&self) -> Vec<Vec<String>> {
        let keys = std::mem::take(&mut *self.pending.lock());
        if keys.is_empty() {
            return Vec::new();
        }
        if !self.by_slot {
            return vec![keys];
        }
        let mut by_slot: std::collections::HashMap<u16, Vec<String>> = Default::default();
        for key in keys {
            by_slot
                .entry(fred::util::redis_keyslot(key.as_bytes()))
                .or_default()
                .push(key);
        }
        by_slot.into_values().collect()
    }

    /// Until latches are queued, then [`WINDOW`] more for a command to carry
    /// them, cut short by a latch queued while the client has waiters or
    /// scripts in flight. (A permit left from an earlier window may cut one
    /// short as well: one `DEL` more, no harm.)
    pub(crate) async fn wait(&self) {
        self.added.notified().await;
        tokio::select! {
            () = tokio::time::sleep(WINDOW) => {}
            () = self.now.notified() => {}
        }
    }
}

/// A script in flight, counted until dropped.
pub(crate) struct InFlight<'a>(&'a DeferredDeletes);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
