//! The synchronizers: Redisson's semaphore, permit-expirable semaphore and
//! count-down latch, on the engine's wait loop.

pub(crate) mod count_down_latch;
pub(crate) mod permit_semaphore;
pub(crate) mod semaphore;
