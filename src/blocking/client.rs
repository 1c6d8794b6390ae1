//! [`BlockingClient`], and [`Client::blocking`] to get one.

use std::sync::Arc;

use tokio::runtime::{Handle, RuntimeFlavor};

use super::driver::Driver;
use crate::base::error::{Error, Result};
use crate::client::Client;
use crate::connection::config::Config;

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
///
/// Call [`shutdown`](Self::shutdown) before the end: when the last handle,
/// lock handle and guard of a client made by [`connect`](Self::connect) or
/// [`connect_with`](Self::connect_with) is dropped, its runtime shuts down in
/// the background, and releases still
/// under way then may not reach Redis (their locks stay held until their
/// TTLs).
#[derive(Clone, Debug)]
pub struct BlockingClient {
    pub(super) client: Client,
    pub(super) runtime: Arc<Driver>,
}

impl BlockingClient {
    /// Connect with a full [`Config`], on a small runtime of its own (one
    /// worker thread).
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is started); [`Error::Runtime`] if its runtime cannot be
    /// started;
    /// else as [`Client::connect_with`].
    pub fn connect_with(config: Config) -> Result<BlockingClient> {
        if Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?;
        let client = runtime.block_on(Client::connect_with(config))?;
        Ok(BlockingClient {
            runtime: Arc::new(Driver::new(
                runtime.handle().clone(),
                Some(runtime),
                client.inner.config.timeout,
            )),
            client,
        })
    }

    /// Connect to a URL with default settings
    /// ([`connect_with`](Self::connect_with) takes a [`Config`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a URL that cannot be parsed; else as
    /// [`connect_with`](Self::connect_with).
    pub fn connect(url: &str) -> Result<BlockingClient> {
        BlockingClient::connect_with(Config::from_url(url)?)
    }

    pub(crate) fn from_async(client: Client) -> Result<BlockingClient> {
        let handle = client.inner.runtime.clone();
        if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
            return Err(Error::Config(
                "the blocking API needs a multi-threaded runtime to drive the client".into(),
            ));
        }
        Ok(BlockingClient {
            runtime: Arc::new(Driver::new(handle, None, client.inner.config.timeout)),
            client,
        })
    }

    /// The async client underneath (the same name as
    /// [`BlockingLock::as_async`](super::BlockingLock::as_async) and
    /// [`BlockingGuard::as_async`](super::BlockingGuard::as_async)).
    pub fn as_async(&self) -> &Client {
        &self.client
    }

    /// Shut the client down as [`Client::shutdown`] does, waiting for it on
    /// this thread: the releases under way finish (within the retry budget)
    /// and the connections close; later calls fail with
    /// [`Error::Closed`](crate::Error::Closed). Idempotent; every clone
    /// shares it.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`] when called from inside an async runtime
    /// (nothing is done: use [`Client::shutdown`] there).
    pub fn shutdown(&self) -> Result<()> {
        self.runtime.run(self.client.shutdown())
    }
}
