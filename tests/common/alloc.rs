//! A global allocator that counts the allocations each thread makes, for tests that check a
//! path allocates nothing, and the bytes it holds, for tests that check memory is given back. A test binary opts in with
//! `#[global_allocator] static ALLOC: common::alloc::Counting = common::alloc::Counting;`;
//! a `current_thread` runtime keeps the timer's driver on the test's thread, so its
//! allocations count too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated less bytes freed on this thread (a block freed on another thread than
    /// its own counts there).
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

/// Wraps the system allocator, counting allocations (and reallocations) per thread.
pub(crate) struct Counting;

fn count() {
    // `try_with`: the thread may be tearing its locals down.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn held(bytes: i64) {
    let _ = LIVE.try_with(|c| c.set(c.get() + bytes));
}

// SAFETY: every call is forwarded to `System` unchanged; only thread-local counters are
// updated on the side, and they are const-initialised without a destructor, so touching them
// never allocates (no re-entry into the allocator).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        held(layout.size() as i64);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        held(layout.size() as i64);
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        held(-(layout.size() as i64));
        System.dealloc(ptr, layout);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        held(new_size as i64 - layout.size() as i64);
        System.realloc(ptr, layout, new_size)
    }
}

/// Allocations this thread has made so far.
pub(crate) fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Bytes this thread has allocated and not freed (see `LIVE`).
pub(crate) fn live_bytes() -> i64 {
    LIVE.with(Cell::get)
}
