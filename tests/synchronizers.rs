//! The synchronizers against a real `redis-server`: [`semaphore`]
//! (RSemaphore), [`permit_semaphore`] (RPermitExpirableSemaphore) and
//! [`latch`] (RCountDownLatch): exact Redis state, limits under contention,
//! waking by publish, Java-shaped commands, bad input.
mod common;

#[path = "synchronizers/alike.rs"]
mod alike;
#[path = "synchronizers/latch.rs"]
mod latch;
#[path = "synchronizers/permit_semaphore.rs"]
mod permit_semaphore;
#[path = "synchronizers/semaphore.rs"]
mod semaphore;
