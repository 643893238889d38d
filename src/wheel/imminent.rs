//! The entries due later within the current tick, and the min-heap that hands them out in
//! deadline order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slab::Slab;

use super::entry::{Entry, List, IMMINENT};

/// Entries due after the wheel's `now` within its current tick (empty when a tick is one
/// unit), and a min-heap of `(deadline, index, generation)` over them. Removed or moved
/// entries leave stale heap items behind, recognised (and dropped) when popped.
#[derive(Debug)]
pub(super) struct Imminent {
    pub(super) list: List,
    heap: BinaryHeap<Reverse<(u64, u32, u64)>>,
}

impl Imminent {
    pub(super) fn new() -> Imminent {
        Imminent {
            list: List::EMPTY,
            heap: BinaryHeap::new(),
        }
    }

    /// The earliest deadline on the list, or earlier (a stale item): a lower bound.
    pub(super) fn min(&self) -> Option<u64> {
        if self.list.is_empty() {
            return None;
        }
        self.heap.peek().map(|r| r.0 .0)
    }

    /// The earliest deadline on the list, exactly: stale items at the heap's top (entries
    /// removed or moved since) are dropped first.
    pub(super) fn live_min<T>(&mut self, entries: &Slab<Entry<T>>) -> Option<u64> {
        if self.list.is_empty() {
            return None;
        }
        while let Some(&Reverse((deadline, idx, generation))) = self.heap.peek() {
            let live = entries.get(idx as usize).is_some_and(|e| {
                e.generation == generation && e.bucket == IMMINENT && e.deadline == deadline
            });
            if live {
                return Some(deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// Links entry `idx` (due at `deadline`); whether it is the new earliest (or `first`).
    pub(super) fn push<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32, first: bool) -> bool {
        if self.list.is_empty() {
            self.heap.clear(); // only stale items can be left
        }
        let (deadline, generation) = {
            let e = &entries[idx as usize];
            (e.deadline, e.generation)
        };
        let earliest = first || self.min().map_or(true, |m| deadline < m);
        self.list.push_back(entries, idx, IMMINENT);
        self.heap.push(Reverse((deadline, idx, generation)));
        earliest
    }

    /// Unlinks entry `idx`.
    pub(super) fn unlink<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32) {
        self.list.unlink(entries, idx);
    }

    /// Pops the heap's top item if it is due at `now`, unlinking its entry: the entry's index
    /// if live, `None` if it was stale (removed or moved since).
    pub(super) fn pop_due<T>(&mut self, entries: &mut Slab<Entry<T>>, now: u64) -> Option<u32> {
        let &Reverse((deadline, idx, generation)) = self.heap.peek()?;
        if deadline > now {
            return None;
        }
        self.heap.pop();
        let live = entries.get(idx as usize).is_some_and(|e| {
            e.generation == generation && e.bucket == IMMINENT && e.deadline == deadline
        });
        if !live {
            return None;
        }
        self.list.unlink(entries, idx);
        if self.list.is_empty() {
            self.heap.clear(); // only stale items can be left
        }
        Some(idx)
    }

    /// Forgets every entry (the entries themselves are the caller's business).
    pub(super) fn clear(&mut self) {
        self.list = List::EMPTY;
        self.heap.clear();
    }

    /// The `(deadline, index, generation)` items of the heap, stale ones included.
    #[cfg(any(test, debug_assertions))]
    pub(super) fn heap_items(&self) -> impl Iterator<Item = (u64, u32, u64)> + '_ {
        self.heap.iter().map(|r| r.0)
    }
}
