//! The entries due later within the current tick, and the queues that hand them out in
//! deadline order: a sorted run for entries that arrive in deadline order, a min-heap for the
//! others.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use slab::Slab;

use super::entry::{Entry, List, IMMINENT};

/// An item of the queues: `(deadline, index, generation)`.
type Item = (u64, u32, u64);

/// The queues keep their memory up to this many items when they empty; beyond, they give it
/// back (a burst of a million entries in one tick must not hold its queue for good).
const KEEP_ITEMS: usize = 4096;

/// Entries due after the wheel's `now` within its current tick (empty when a tick is one
/// unit), and two queues of `(deadline, index, generation)` items over them.
///
/// An entry whose deadline is at or after the last one queued joins the back of `run`, a
/// FIFO that stays sorted: a bucket's entries usually arrive that way (they are filed in
/// registration order, and timers of one duration registered in turn have rising deadlines;
/// a burst of timers for the same instant all tie), so a tick of a million entries costs a
/// push and a pop at the ends of a ring buffer each, not a million heap operations. The
/// others go to `heap`. Popping takes the smaller of the two heads. Removed or moved entries
/// leave stale items behind, recognised (and dropped) when popped; should they come to
/// outnumber the entries waiting (an entry moved again and again within the tick between
/// polls), a push sweeps them out, so the queues stay within a constant factor of the list.
#[derive(Debug)]
pub(super) struct Imminent {
    pub(super) list: List,
    /// Entries on `list`.
    len: usize,
    run: VecDeque<Item>,
    heap: BinaryHeap<Reverse<Item>>,
}

/// Stale items the queues may hold beyond as many as there are live ones before a push sweeps
/// them out: a sweep (a sort of what is left) is paid for by the pushes whose items went
/// stale, O(log n) amortised per push.
const SLACK_ITEMS: usize = 64;

impl Imminent {
    pub(super) fn new() -> Imminent {
        Imminent {
            list: List::EMPTY,
            len: 0,
            run: VecDeque::new(),
            heap: BinaryHeap::new(),
        }
    }

    /// The earliest item of either queue, and whether it heads the run.
    fn head(&self) -> Option<(Item, bool)> {
        let run = self.run.front().copied();
        let heap = self.heap.peek().map(|r| r.0);
        match (run, heap) {
            (Some(r), Some(h)) if h < r => Some((h, false)),
            (Some(r), _) => Some((r, true)),
            (None, Some(h)) => Some((h, false)),
            (None, None) => None,
        }
    }

    /// The earliest deadline on the list, or earlier (a stale item): a lower bound.
    pub(super) fn min(&self) -> Option<u64> {
        if self.list.is_empty() {
            return None;
        }
        self.head().map(|(item, _)| item.0)
    }

    /// The earliest deadline on the list, exactly: stale items at the head of either queue
    /// (entries removed or moved since) are dropped first.
    pub(super) fn live_min<T>(&mut self, entries: &Slab<Entry<T>>) -> Option<u64> {
        if self.list.is_empty() {
            return None;
        }
        let live = |&(deadline, idx, generation): &Item| {
            entries.get(idx as usize).is_some_and(|e| {
                e.generation == generation && e.bucket == IMMINENT && e.deadline == deadline
            })
        };
        while self.heap.peek().is_some_and(|r| !live(&r.0)) {
            self.heap.pop();
        }
        while self.run.front().is_some_and(|item| !live(item)) {
            self.run.pop_front();
        }
        self.head().map(|(item, _)| item.0)
    }

    /// Links entry `idx` (due at `deadline`); whether it is the new earliest (or `first`).
    pub(super) fn push<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32, first: bool) -> bool {
        if self.list.is_empty() {
            self.forget_items(); // only stale items can be left
        }
        let (deadline, generation) = {
            let e = &entries[idx as usize];
            (e.deadline, e.generation)
        };
        let earliest = first || self.min().map_or(true, |m| deadline < m);
        self.list.push_back(entries, idx, IMMINENT);
        self.len += 1;
        let item = (deadline, idx, generation);
        if self
            .run
            .back()
            .map_or(true, |&(last, _, _)| deadline >= last)
        {
            self.run.push_back(item);
        } else {
            self.heap.push(Reverse(item));
        }
        if self.run.len() + self.heap.len() > 2 * self.len + SLACK_ITEMS {
            self.sweep(entries);
        }
        earliest
    }

    /// Drops the stale items, and the duplicates of live ones (an entry moved away and back
    /// to the same deadline), leaving one item per entry, all on the run.
    #[cold]
    fn sweep<T>(&mut self, entries: &Slab<Entry<T>>) {
        let live = |&(deadline, idx, generation): &Item| {
            entries.get(idx as usize).is_some_and(|e| {
                e.generation == generation && e.bucket == IMMINENT && e.deadline == deadline
            })
        };
        let mut items: Vec<Item> = self
            .run
            .drain(..)
            .chain(self.heap.drain().map(|r| r.0))
            .filter(live)
            .collect();
        items.sort_unstable();
        items.dedup();
        debug_assert_eq!(items.len(), self.len, "one item per imminent entry");
        self.run.extend(items);
    }

    /// Unlinks entry `idx`; the last one out takes the (now all stale) items with it, so a
    /// cancelled burst gives its memory back at once.
    pub(super) fn unlink<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32) {
        self.list.unlink(entries, idx);
        self.len -= 1;
        if self.list.is_empty() {
            self.forget_items();
        }
    }

    /// Pops the earliest item if it is due at `now`, unlinking its entry: the entry's index
    /// if live, `None` if it was stale (removed or moved since).
    pub(super) fn pop_due<T>(&mut self, entries: &mut Slab<Entry<T>>, now: u64) -> Option<u32> {
        let ((deadline, idx, generation), from_run) = self.head()?;
        if deadline > now {
            return None;
        }
        if from_run {
            self.run.pop_front();
        } else {
            self.heap.pop();
        }
        let live = entries.get(idx as usize).is_some_and(|e| {
            e.generation == generation && e.bucket == IMMINENT && e.deadline == deadline
        });
        if !live {
            return None;
        }
        self.list.unlink(entries, idx);
        self.len -= 1;
        if self.list.is_empty() {
            self.forget_items(); // only stale items can be left
        }
        Some(idx)
    }

    /// Forgets every entry (the entries themselves are the caller's business).
    pub(super) fn clear(&mut self) {
        self.list = List::EMPTY;
        self.len = 0;
        self.forget_items();
    }

    /// Gives back the queues' memory beyond the items they hold (all of it when no entry is
    /// imminent: the items left then are stale).
    pub(super) fn shrink_to_fit(&mut self) {
        if self.list.is_empty() {
            self.run = VecDeque::new();
            self.heap = BinaryHeap::new();
        } else {
            self.run.shrink_to_fit();
            self.heap.shrink_to_fit();
        }
    }

    /// Drops every item, giving back the memory of a large burst.
    fn forget_items(&mut self) {
        if self.run.capacity() > KEEP_ITEMS {
            self.run = VecDeque::new();
        } else {
            self.run.clear();
        }
        if self.heap.capacity() > KEEP_ITEMS {
            self.heap = BinaryHeap::new();
        } else {
            self.heap.clear();
        }
    }

    /// The `(deadline, index, generation)` items of both queues, stale ones included.
    #[cfg(any(test, debug_assertions))]
    pub(super) fn items(&self) -> impl Iterator<Item = Item> + '_ {
        self.run
            .iter()
            .copied()
            .chain(self.heap.iter().map(|r| r.0))
    }

    /// Entries on the list (for the invariant checks).
    #[cfg(any(test, debug_assertions))]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Items in the run and in the heap, and the capacity the two hold (for tests).
    #[cfg(test)]
    pub(super) fn sizes(&self) -> (usize, usize, usize) {
        (
            self.run.len(),
            self.heap.len(),
            self.run.capacity() + self.heap.capacity(),
        )
    }

    /// Whether the run is sorted (for the invariant checks).
    #[cfg(any(test, debug_assertions))]
    pub(super) fn run_is_sorted(&self) -> bool {
        self.run
            .iter()
            .zip(self.run.iter().skip(1))
            .all(|(a, b)| a.0 <= b.0)
    }
}
