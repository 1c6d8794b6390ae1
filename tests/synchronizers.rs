//! The synchronizers against a real `redis-server`: [`semaphore`]
//! (RSemaphore), [`permit_semaphore`] (RPermitExpirableSemaphore) and
//! [`latch`] (RCountDownLatch): exact Redis state, waking by publish,
//! Java-shaped commands, bad input; what both semaphores must do alike
//! (limits under random steps, dropped waiters, outages) in [`alike`]; the
//! blocking forms in [`blocking`].
mod common;

#[path = "synchronizers/alike.rs"]
mod alike;
#[path = "synchronizers/blocking.rs"]
mod blocking;
#[path = "synchronizers/latch.rs"]
mod latch;
#[path = "synchronizers/permit_semaphore.rs"]
mod permit_semaphore;
#[path = "synchronizers/semaphore.rs"]
mod semaphore;

/// The channel of either semaphore named `name` (docs/PROTOCOL.md §7):
/// `redisson_sc:{N}`.
fn semaphore_channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}
