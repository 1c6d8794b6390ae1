//! [`BlockingCountDownLatch`].

use std::sync::Arc;
use std::time::Duration;

use super::client::BlockingClient;
use super::driver::Driver;
use crate::base::error::Result;

impl BlockingClient {
    /// A handle to the count-down latch `name` (Redisson's
    /// `getCountDownLatch`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty name.
    pub fn count_down_latch(&self, name: &str) -> Result<BlockingCountDownLatch> {
        Ok(BlockingCountDownLatch {
            latch: self.client.count_down_latch(name)?,
            runtime: self.runtime.clone(),
        })
    }
}

/// The blocking twin of a [`CountDownLatch`](crate::CountDownLatch).
#[derive(Clone, Debug)]
pub struct BlockingCountDownLatch {
    latch: crate::synchronizers::count_down_latch::CountDownLatch,
    runtime: Arc<Driver>,
}

impl BlockingCountDownLatch {
    /// The async handle underneath.
    pub fn as_async(&self) -> &crate::synchronizers::count_down_latch::CountDownLatch {
        &self.latch
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        self.latch.name()
    }

    /// Set the count if the latch does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::try_set_count`](crate::CountDownLatch::try_set_count).
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.runtime.run(self.latch.try_set_count(count))?
    }

    /// Count down by one.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::count_down`](crate::CountDownLatch::count_down).
    pub fn count_down(&self) -> Result<()> {
        self.runtime.run(self.latch.count_down())?
    }

    /// The count now.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`CountDownLatch::count`](crate::CountDownLatch::count).
    pub fn count(&self) -> Result<i64> {
        self.runtime.run(self.latch.count())?
    }

    /// Delete the latch; returns whether it existed.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::delete`](crate::CountDownLatch::delete).
    pub fn delete(&self) -> Result<bool> {
        self.runtime.run(self.latch.delete())?
    }

    /// Whether the latch exists.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime
    /// (nothing is sent); else as
    /// [`CountDownLatch::exists`](crate::CountDownLatch::exists).
    pub fn exists(&self) -> Result<bool> {
        self.runtime.run(self.latch.exists())?
    }

    /// Wait until the count is zero, or the latch is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as
    /// [`CountDownLatch::await_zero`](crate::CountDownLatch::await_zero).
    pub fn await_zero(&self) -> Result<crate::synchronizers::count_down_latch::LatchOpened> {
        self.runtime.run(self.latch.await_zero())?
    }

    /// Wait at most `wait`; `None` if the time ran out.
    ///
    /// # Errors
    ///
    /// [`Error::BlockingInAsync`](crate::Error::BlockingInAsync) when called from inside an async runtime;
    /// else as [`CountDownLatch::await_for`](crate::CountDownLatch::await_for).
    pub fn await_for(
        &self,
        wait: Duration,
    ) -> Result<Option<crate::synchronizers::count_down_latch::LatchOpened>> {
        self.runtime.run(self.latch.await_for(wait))?
    }
}
