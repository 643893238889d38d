//! A counting global allocator: bytes allocated and their peak, while a [`Meter`] is running.
//!
//! It forwards everything to [`System`]. While no meter runs it adds one relaxed load of a
//! flag per allocation and per free (a read-shared cache line, no contention), so workloads that
//! do not measure memory pay next to nothing for it. While a meter runs, every allocation and
//! free also updates a shared counter and its peak (relaxed atomics): only in the phases
//! that measure memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicIsize;
use std::sync::atomic::Ordering::Relaxed;

/// `System`, counting while [`COUNTING`] is set.
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed since the meter started (as requested by the layouts;
/// negative when more was freed than allocated meanwhile).
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);
/// The largest value `ALLOCATED` reached since the meter started.
static PEAK: AtomicIsize = AtomicIsize::new(0);

impl CountingAlloc {
    #[inline]
    fn added(size: usize) {
        if COUNTING.load(Relaxed) {
            let now = ALLOCATED.fetch_add(size as isize, Relaxed) + size as isize;
            PEAK.fetch_max(now, Relaxed);
        }
    }

    #[inline]
    fn removed(size: usize) {
        if COUNTING.load(Relaxed) {
            ALLOCATED.fetch_sub(size as isize, Relaxed);
        }
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, which implements
// `GlobalAlloc` soundly, and returns what `System` returned; the bookkeeping around the calls
// only touches atomics (it never allocates, so it cannot recurse into the allocator).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has a non-zero size, the only requirement of
        // `GlobalAlloc::alloc`, and passes it on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`: the caller's non-zero-size `layout`, passed on unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator with `layout`;
        // this allocator got every block from `System` with that same layout (or, after a
        // `realloc`, with the layout the caller now passes), so `System` may free it.
        unsafe { System.dealloc(ptr, layout) };
        Self::removed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout` (so from
        // `System`, see `dealloc`) and that `new_size` is non-zero and does not overflow when
        // rounded to `layout.align()`: exactly `System.realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                Self::added(new_size - layout.size());
            } else {
                Self::removed(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Counts allocations from its start until it is dropped. One at a time (the workloads run one
/// after the other); allocations racing with the start on other threads may or may not count.
#[derive(Debug)]
pub(crate) struct Meter(());

impl Meter {
    /// Starts counting from zero.
    pub(crate) fn start() -> Meter {
        assert!(
            !COUNTING.load(Relaxed),
            "only one allocation meter may run at a time"
        );
        ALLOCATED.store(0, Relaxed);
        PEAK.store(0, Relaxed);
        COUNTING.store(true, Relaxed);
        Meter(())
    }

    /// Bytes allocated minus bytes freed since the start.
    pub(crate) fn net(&self) -> isize {
        ALLOCATED.load(Relaxed)
    }

    /// The largest `net()` since the start.
    pub(crate) fn peak(&self) -> isize {
        PEAK.load(Relaxed)
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        COUNTING.store(false, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::Meter;
    use std::hint::black_box;

    #[test]
    fn a_meter_counts_what_is_allocated_while_it_runs() {
        let meter = Meter::start();
        let held: Vec<Vec<u8>> = (0..10).map(|_| black_box(vec![0u8; 1000])).collect();
        let net = meter.net();
        // Other test threads may allocate meanwhile: bounds, not equality.
        assert!(net >= 10_000, "{net}");
        drop(held);
        assert!(meter.peak() >= 10_000, "{}", meter.peak());
        assert!(meter.net() < net, "freeing did not count");
    }
}
