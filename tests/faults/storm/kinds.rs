//! The lock kinds of the storm and the handles its tasks hold.

use std::time::Duration;

use redisson_lock::{AnyKind, Client, Lock, LockGuard};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    RLock,
    Fair,
    NonReentrantFair,
    Read,
    Write,
    Spin,
    Fenced,
    /// Readers and writers of one read-write lock.
    Mixed,
}

pub const ALL_KINDS: [Kind; 8] = [
    Kind::RLock,
    Kind::Fair,
    Kind::NonReentrantFair,
    Kind::Read,
    Kind::Write,
    Kind::Spin,
    Kind::Fenced,
    Kind::Mixed,
];

impl Kind {
    /// The handles a storm task picks from.
    pub fn handles(self, client: &Client, name: &str) -> Vec<Handle> {
        let rw = || client.read_write_lock(name).unwrap();
        match self {
            Kind::RLock => vec![Handle::exclusive(client.lock(name).unwrap())],
            Kind::Fair => vec![Handle::exclusive(client.fair_lock(name).unwrap())],
            Kind::NonReentrantFair => {
                vec![Handle::exclusive(
                    client.non_reentrant_fair_lock(name).unwrap(),
                )]
            }
            Kind::Read => vec![Handle::shared(rw().read())],
            Kind::Write => vec![Handle::exclusive(rw().write())],
            Kind::Spin => vec![Handle::exclusive(client.spin_lock(name).unwrap())],
            Kind::Fenced => vec![Handle::exclusive(client.fenced_lock(name).unwrap())],
            Kind::Mixed => vec![Handle::shared(rw().read()), Handle::exclusive(rw().write())],
        }
    }

    /// The exclusive lock a fresh client takes at the end: for a
    /// read-write lock, the write half (free only if no reader is left).
    pub fn final_handle(self, client: &Client, name: &str) -> Handle {
        match self {
            Kind::Read | Kind::Mixed => {
                Handle::exclusive(client.read_write_lock(name).unwrap().write())
            }
            other => other.handles(client, name).remove(0),
        }
    }
}

/// A lock of any kind (its kind erased, so guards re-enter through the
/// run-time checked `LockGuard<AnyKind>::reenter`), and whether a holder
/// excludes every other holder (all but a reader).
#[derive(Clone)]
pub struct Handle {
    pub lock: Lock<AnyKind>,
    pub exclusive: bool,
}

impl Handle {
    pub fn exclusive<K: redisson_lock::Kind>(lock: Lock<K>) -> Handle {
        Handle {
            lock: lock.into_erased(),
            exclusive: true,
        }
    }

    pub fn shared<K: redisson_lock::Kind>(lock: Lock<K>) -> Handle {
        Handle {
            lock: lock.into_erased(),
            exclusive: false,
        }
    }
}

/// How to acquire.
#[derive(Clone, Copy, Debug)]
pub enum How {
    Lock,
    TryFor {
        wait: Duration,
        lease: Option<Duration>,
    },
    Lease(Duration),
}

impl Handle {
    pub async fn acquire(&self, how: How) -> redisson_lock::Result<Option<LockGuard<AnyKind>>> {
        let lock = &self.lock;
        match how {
            How::Lock => lock.lock().await.map(Some),
            How::TryFor { wait, lease: None } => lock.try_lock_for(wait).await,
            How::TryFor {
                wait,
                lease: Some(lease),
            } => lock.try_lock_for_with_lease(wait, lease).await,
            How::Lease(lease) => lock.lock_with_lease(lease).await.map(Some),
        }
    }

    pub async fn try_lock(&self) -> redisson_lock::Result<Option<LockGuard<AnyKind>>> {
        self.lock.try_lock().await
    }
}
