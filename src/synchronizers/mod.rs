//! The synchronizers: Redisson's semaphore, permit-expirable semaphore and
//! count-down latch, on the engine's wait loop.

pub(crate) mod count;
pub(crate) mod count_down_latch;
mod handle;
mod object;
pub(crate) mod permit_id;
pub(crate) mod permit_semaphore;
mod permit_semaphore_admin;
pub(crate) mod semaphore;
mod semaphore_admin;
mod semaphore_release;
