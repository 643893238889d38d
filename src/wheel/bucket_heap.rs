//! The bucket heap (Kafka's "delay queue"): a min-heap of `(expiration, bucket)` for every
//! non-empty bucket.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A min-heap of bucket expirations. Items may go stale (their bucket was emptied and reset);
/// the wheel recognises and skips those when they are popped rather than searching for them.
#[derive(Debug, Default)]
pub(crate) struct BucketHeap {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl BucketHeap {
    pub(crate) fn push(&mut self, expiration: u64, bucket: u32) {
        self.heap.push(Reverse((expiration, bucket)));
    }

    /// The earliest item, if any.
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.heap.peek().map(|r| r.0)
    }

    /// Pops the earliest item.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        self.heap.pop().map(|r| r.0)
    }

    /// Pops the earliest item if it expires at or before `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u32)> {
        match self.heap.peek() {
            Some(Reverse((exp, _))) if *exp <= now => self.heap.pop().map(|r| r.0),
            _ => None,
        }
    }

    /// Items in the heap, stale ones included (for the invariant checks).
    #[cfg(any(test, debug_assertions))]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Every `(expiration, bucket)` item, in no particular order (for the invariant checks).
    #[cfg(any(test, debug_assertions))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.heap.iter().map(|r| r.0)
    }

    /// Keeps only the items whose bucket satisfies `keep`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.heap.retain(|r| keep(r.0 .1));
    }

    /// Drops every item, keeping the allocation.
    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.heap.shrink_to_fit();
    }
}
