//! A counting global allocator for the bench binary (scenario 5a): the live
//! and peak heap the program asked for, in bytes, next to RSS.
//!
//! It forwards every call to `System` unchanged. Counting is off until
//! [`start`] (the worker process of scenario 5a turns it on at its baseline),
//! so everywhere else it costs one relaxed load per call. Once on, [`live`]
//! is the net change of requested bytes since [`start`] (frees of earlier
//! allocations count too, so it can go below 0) and [`peak`] the highest
//! `live` since. Sizes are the requested `Layout` sizes: the allocator's own
//! rounding and fragmentation show in RSS, not here.
//!
//! The library forbids `unsafe`; the bench binary needs it for this one
//! `GlobalAlloc` impl (and for `getrusage` in `util.rs`), nowhere else.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(bytes: usize) {
    if ON.load(Relaxed) {
        let now = LIVE.fetch_add(bytes as isize, Relaxed) + bytes as isize;
        PEAK.fetch_max(now, Relaxed);
    }
}

fn shrank(bytes: usize) {
    if ON.load(Relaxed) {
        LIVE.fetch_sub(bytes as isize, Relaxed);
    }
}

// SAFETY: every method passes its arguments to `System` unchanged and
// returns its result; the bookkeeping only touches atomics (it never
// allocates, so it cannot re-enter the allocator).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// Start counting from zero (live = peak = 0).
pub fn start() {
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    ON.store(true, Relaxed);
}

/// Net bytes allocated since [`start`].
pub fn live() -> isize {
    LIVE.load(Relaxed)
}

/// The highest [`live`] since [`start`].
pub fn peak() -> isize {
    PEAK.load(Relaxed)
}
