//! The blocking API, for code without an async runtime, with Java-like
//! semantics: a lock is reentrant per OS thread.
//!
//! ```no_run
//! use redisson_lock::blocking::BlockingClient;
//!
//! let client = BlockingClient::connect("redis://127.0.0.1:6379")?;
//! let lock = client.lock("orders")?;
//! let guard = lock.lock()?;         // waits; watchdog-renewed
//! let again = lock.lock()?;         // same thread: re-enters, hold count 2
//! assert_eq!(lock.hold_count()?, 2);
//! drop(again);                      // unlocks one hold, synchronously
//! guard.unlock()?;
//! # Ok::<(), redisson_lock::Error>(())
//! ```

mod client;
mod count_down_latch;
mod driver;
mod lock;
mod object;
mod permit_semaphore;
mod semaphore;

pub use client::BlockingClient;
pub use count_down_latch::BlockingCountDownLatch;
pub use lock::{
    BlockingGuard, BlockingLock, BlockingMultiGuard, BlockingMultiLock, BlockingReadWriteLock,
};
pub use permit_semaphore::{BlockingPermitExpirableSemaphore, BlockingPermitGuard};
pub use semaphore::{BlockingSemaphore, BlockingSemaphorePermit};
