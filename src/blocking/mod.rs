//! The blocking API, for code without an async runtime, with Java-like
//! semantics: a lock is reentrant per OS thread.
//!
//! ```no_run
//! use redisson_lock::blocking::BlockingClient;
//!
//! let client = BlockingClient::from_url("redis://127.0.0.1:6379")?;
//! let lock = client.lock("orders")?;
//! let guard = lock.lock()?;         // waits; watchdog-renewed
//! let again = lock.lock()?;         // same thread: re-enters, hold count 2
//! assert_eq!(lock.hold_count()?, 2);
//! drop(again);                      // unlocks one hold, synchronously
//! guard.unlock()?;
//! # Ok::<(), redisson_lock::Error>(())
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::base::error::{Error, Result};
use crate::client::Client;
use crate::connection::config::Config;

mod count_down_latch;
mod lock;
mod permit_semaphore;
mod semaphore;

pub use count_down_latch::BlockingCountDownLatch;
pub use lock::{BlockingGuard, BlockingLock, BlockingMultiGuard, BlockingMultiLock};
pub use permit_semaphore::{BlockingPermitExpirableSemaphore, BlockingPermitGuard};
pub use semaphore::{BlockingSemaphore, BlockingSemaphorePermit};

impl Client {
    /// The blocking twin of this client, for threads outside any async
    /// runtime. Its calls run on this client's runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if that runtime is not multi-threaded.
    pub fn blocking(&self) -> Result<BlockingClient> {
        BlockingClient::from_async(self.clone())
    }
}

/// A [`Client`] driven from blocking code. Cheap to clone.
#[derive(Clone, Debug)]
pub struct BlockingClient {
    client: Client,
    runtime: Arc<Driver>,
}

/// The runtime the blocking calls run on: owned, or the async client's.
#[derive(Debug)]
struct Driver {
    handle: Handle,
    owned: Option<Runtime>,
    /// How long a dropped guard blocks its thread for its release: one
    /// command timeout; the release then finishes in the background.
    drop_wait: Duration,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(runtime) = self.owned.take() {
            runtime.shutdown_background();
        }
    }
}

impl Driver {
    fn run<F: Future>(&self, fut: F) -> Result<F::Output> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        Ok(self.handle.block_on(fut))
    }

    /// Release a dropped guard by `unlock`: wait at most `drop_wait`, then
    /// leave it to finish in the background (the release is finish-on-drop,
    /// as an async guard's).
    fn release_on_drop<T, F: Future<Output = Result<T>>>(&self, what: &str, unlock: F) {
        // The timer is made inside the runtime (outside, tokio panics).
        let wait = self.drop_wait;
        match self.run(async move { tokio::time::timeout(wait, unlock).await }) {
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "release of a dropped blocking {what} failed")
            }
            Ok(Err(_)) => tracing::debug!(
                wait_ms = u64::try_from(self.drop_wait.as_millis()).unwrap_or(u64::MAX),
                "release of a dropped blocking {what} goes on in the background"
            ),
            Ok(Ok(Ok(_))) | Err(_) => {}
        }
    }
}

impl BlockingClient {
    /// Connect with its own small runtime (one worker thread).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is started); [`Error::Config`] if a runtime cannot be started;
    /// else as [`Client::connect`].
    pub fn connect(config: Config) -> Result<BlockingClient> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("cannot start a runtime: {e}")))?;
        let client = runtime.block_on(Client::connect(config))?;
        Ok(BlockingClient {
            runtime: Arc::new(Driver {
                handle: runtime.handle().clone(),
                drop_wait: client.inner.config.timeout,
                owned: Some(runtime),
            }),
            client,
        })
    }

    /// Connect to a URL with default settings.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a URL that cannot be parsed; else as
    /// [`connect`](Self::connect).
    pub fn from_url(url: &str) -> Result<BlockingClient> {
        BlockingClient::connect(Config::from_url(url)?)
    }

    pub(crate) fn from_async(client: Client) -> Result<BlockingClient> {
        let handle = client.inner.runtime.clone();
        if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
            return Err(Error::Config(
                "the blocking API needs a multi-threaded runtime to drive the client".into(),
            ));
        }
        Ok(BlockingClient {
            runtime: Arc::new(Driver {
                handle,
                owned: None,
                drop_wait: client.inner.config.timeout,
            }),
            client,
        })
    }

    /// The async client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// An async guard, as its blocking twin releases it.
trait Release: Sized {
    /// What its release reports.
    type Output;
    /// What it is called in the log line of a failed release on drop.
    const WHAT: &'static str;

    fn release(self) -> impl Future<Output = Result<Self::Output>>;
}

/// An async guard driven from a thread: released there, synchronously, when
/// dropped (at most `drop_wait`, then in the background); every blocking
/// guard is one.
#[derive(Debug)]
struct Bridged<G: Release> {
    guard: Option<G>,
    runtime: Arc<Driver>,
}

impl<G: Release> Bridged<G> {
    fn new(guard: G, runtime: Arc<Driver>) -> Bridged<G> {
        Bridged {
            guard: Some(guard),
            runtime,
        }
    }

    fn get(&self) -> Option<&G> {
        self.guard.as_ref()
    }

    fn get_mut(&mut self) -> Option<&mut G> {
        self.guard.as_mut()
    }

    /// Release it on this thread; `None` if it was gone already.
    fn release(mut self) -> Result<Option<G::Output>> {
        match self.guard.take() {
            Some(guard) => self.runtime.run(guard.release())?.map(Some),
            None => Ok(None),
        }
    }

    /// The guard, no longer released on drop.
    fn take(mut self) -> Option<G> {
        self.guard.take()
    }
}

impl<G: Release> Drop for Bridged<G> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            // Inside a runtime this falls back to the guard's own background release.
            self.runtime.release_on_drop(G::WHAT, guard.release());
        }
    }
}
