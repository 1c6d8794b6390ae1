//! The tenures whose watch is yet to start ([`crate::engine::watch`]), in
//! the order they are due. The client keeps it; the watch service drains
//! it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::protocol::Protocol;

/// How long after a tenure starts its watch begins. Short holds (most
/// critical sections) then cost nothing: no subscription, no check, no
/// task; a loss in a hold's first moments is heard this much later (the
/// check when the watch starts finds it), any later one within a round
/// trip.
pub(crate) const SETTLE: Duration = Duration::from_millis(10);

/// The watch service wakes at most once per this, starting every watch
/// that is due: a watch starts between [`SETTLE`] and `SETTLE + GRAIN`
/// after its tenure.
pub(crate) const GRAIN: Duration = Duration::from_millis(5);

/// One tenure to watch: `field`'s hold of the lock `name`, in tenure
/// `tenure`, taken by a command sent at `sent_at`.
pub(crate) struct TenureKey {
    pub name: String,
    pub field: Arc<str>,
    pub tenure: u64,
    pub sent_at: Instant,
}

/// Where a watch hears that a hold may be gone.
pub(crate) enum Source {
    /// Messages on a pub/sub channel (the lock's release channel, the
    /// key's keyspace channel).
    Channel(String),
    /// Client tracking's invalidations of the lock's key
    /// ([`crate::connection::tracking`]).
    Tracking,
}

/// A tenure whose watch is due at `at`: `field`'s tenure `tenure` of the
/// lock of `proto`, taken by a command sent at `sent_at`.
pub(crate) struct Due {
    pub at: Instant,
    pub proto: Arc<dyn Protocol>,
    pub field: Arc<str>,
    pub tenure: u64,
    pub sent_at: Instant,
}

/// The tenures waiting for their watch to start, oldest first (they are
/// all due [`SETTLE`] after they start), for the client's watch service.
#[derive(Default)]
pub(crate) struct Watches {
    queue: Mutex<VecDeque<Due>>,
    /// Told when the queue stops being empty.
    queued: Notify,
}

impl Watches {
    /// Queue `due` (due no earlier than everything queued before it).
    pub(crate) fn push(&self, due: Due) {
        let mut queue = self.queue.lock();
        queue.push_back(due);
        if queue.len() == 1 {
            self.queued.notify_one();
        }
    }

    /// When the oldest queued watch is due, if any is queued.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.queue.lock().front().map(|d| d.at)
    }

    /// Resolves once the queue stops being empty.
    pub(crate) async fn queued(&self) {
        self.queued.notified().await;
    }

    /// Take every watch due by `now`.
    pub(crate) fn due(&self, now: Instant) -> Vec<Due> {
        let mut queue = self.queue.lock();
        let n = queue.iter().take_while(|d| d.at <= now).count();
        queue.drain(..n).collect()
    }
}
