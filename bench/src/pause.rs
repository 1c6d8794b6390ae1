//! A precise pause for the Rust subjects (scenario 3b, issue 30 §1),
//! independent of tokio's timer (whose 1 ms tick turns `sleep(1 ms)` into
//! ~2.09 ms): the paused task waits for a thread of tokio's blocking pool
//! that sleeps (the kernel's high-resolution timer) until `SPIN` before the
//! deadline, then spins on the monotonic clock until the deadline itself.
//! Each paused task has a thread of its own, as each Java task does: the
//! Java subject pauses the same way on its own thread
//! (`RedissonBench.pause`: `parkNanos` to `SPIN` before, then
//! `Thread.onSpinWait` until the deadline). What each subject actually
//! paused is measured from its events and printed (pause p50/p90).

use std::time::{Duration, Instant};

/// How long before a deadline the pausing thread stops sleeping and spins.
pub const SPIN: Duration = Duration::from_micros(100);

/// Block the calling thread until `deadline`: sleep to `SPIN` before it,
/// then spin.
pub fn until(deadline: Instant) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left <= SPIN {
            break;
        }
        std::thread::sleep(left - SPIN);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Pause the calling task for `d`, measured on the monotonic clock, without
/// tokio's timer: returns at the deadline plus the wake-up's latency.
pub async fn pause(d: Duration) {
    let deadline = Instant::now() + d;
    let _ = tokio::task::spawn_blocking(move || until(deadline)).await;
}
