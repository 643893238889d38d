//! The wheel's memory: draining, compacting, clearing and shrinking it.

use slab::Slab;

use super::entry::{Entry, Key, List, NIL, PARKED};
use super::level::split;
use super::persist::Persistence;
use super::Wheel;

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// Removes every entry, returning the values, and resets the wheel (its time is kept).
    pub(crate) fn drain_all(&mut self) -> Vec<T> {
        let entries = std::mem::take(&mut self.entries);
        self.filings += 1;
        self.last_filed = None;
        self.unlink_all();
        entries.into_iter().map(|(_, e)| e.value).collect()
    }

    /// Moves the entries into a new slab exactly as large as needed, returning the old and
    /// new key of each entry that moved, and gives back what the bucket heap and the imminent
    /// queues hold beyond the entries' needs (a burst handed out long ago included). An entry
    /// whose slot lies inside the new slab keeps it, and its key; only those beyond it move,
    /// into the vacant slots, keeping their generation (unique to the wheel, so the new key
    /// was never handed out before and a key handed out before never names a moved entry by
    /// accident). Deadlines and the wheel's time are kept. Every entry is filed anew by its
    /// deadline; parked entries stay parked: an unreachable one (see
    /// [`insert_unreachable`](Self::insert_unreachable)) is not filed into a top-level bucket,
    /// and a persistent one that fired is not filed again.
    pub(crate) fn compact(&mut self) -> Vec<(Key, Key)> {
        let (head, promise) = (self.new_head.take(), self.promise);
        let mut old = std::mem::replace(&mut self.entries, Slab::with_capacity(0));
        self.unlink_all();
        let len = old.len();
        // The slots beyond the new slab, in the order they fill its vacancies.
        let beyond: Vec<usize> = old
            .iter()
            .map(|(idx, _)| idx)
            .filter(|&i| i >= len)
            .collect();
        let mut beyond = beyond.into_iter();
        let mut moved = Vec::new();
        self.entries = Slab::with_capacity(len);
        for slot in 0..len {
            let from = if old.contains(slot) {
                slot
            } else {
                beyond
                    .next()
                    .expect("a vacancy below len for each entry beyond it")
            };
            let e = old.remove(from);
            if from != slot {
                let generation = e.generation;
                moved.push((
                    Key {
                        index: from as u32,
                        generation,
                    },
                    Key {
                        index: slot as u32,
                        generation,
                    },
                ));
            }
            let parked = e.bucket == PARKED;
            let stage = !parked && self.before_filing(e.deadline, e.persistent);
            let idx = self.entries.insert(Entry {
                prev: NIL,
                next: NIL,
                bucket: NIL,
                ..e
            });
            debug_assert_eq!(idx, slot, "a dense slab fills in index order");
            if parked {
                self.park_filed(idx as u32);
            } else {
                self.after_filing(idx as u32, stage);
            }
        }
        // Work linked here was linked before too, and the owner's wake covers it, except
        // where an entry relinked by its deadline joins a bucket that expires before that
        // wake (before it, the entry waited lazily in a later one, or staged): that the owner
        // must hear of, or it would miss the bucket.
        let relinked = std::mem::replace(&mut self.new_head, head);
        if let Some(at) = relinked.filter(|&at| at < promise) {
            self.report(at);
        }
        self.heap.shrink_to_fit();
        self.imminent.shrink_to_fit();
        // Filed anew, every one: no single filing a cache could be told of.
        self.filings += 1;
        self.last_filed = None;
        moved
    }

    /// Removes (and drops) every entry, keeping the slab's memory and the wheel's time. Keys
    /// handed out before stay stale for good: generations keep counting.
    pub(crate) fn clear(&mut self) {
        self.filings += 1;
        self.last_filed = None;
        self.entries.clear();
        self.unlink_all();
    }

    /// Empties every list, level and heap (the entries themselves are the caller's business).
    fn unlink_all(&mut self) {
        self.levels.clear();
        self.heap.clear();
        self.due = List::EMPTY;
        self.imminent.clear();
        self.parked = List::EMPTY;
        self.parked_len = 0;
        self.staged = List::EMPTY;
        self.staged_len = 0;
        self.flushing = None;
    }

    /// Gives back memory held beyond what the pending entries need: the slab when empty, the
    /// bucket heap's and the imminent queues' spare capacity (which otherwise keep room for
    /// the largest burst of a few thousand entries due in one tick), and empty top levels
    /// even while the bucket heap still holds items of their (emptied) buckets.
    pub(crate) fn shrink_to_fit(&mut self) {
        if self.entries.is_empty() {
            self.entries = Slab::new();
        } else {
            self.entries.shrink_to_fit();
        }
        // A flush cut short by its budget whose bucket removals have emptied since is over
        // (its next step would find nothing): end it, so releasing that bucket's level below
        // cannot leave the wheel flushing a bucket that no longer exists. A bucket that still
        // holds entries keeps its level, which is then not empty.
        if let Some(bucket) = self.flushing {
            let (level, slot) = split(bucket);
            if self.levels[level].buckets[slot].list.is_empty() {
                self.flushing = None;
            }
        }
        // Release every empty top level now, with the heap items of its buckets.
        while self.levels.last().is_some_and(|l| l.len == 0) {
            self.levels.pop();
        }
        let kept = self.levels.len();
        self.heap.retain(|bucket| split(bucket).0 < kept);
        self.heap.shrink_to_fit();
        self.imminent.shrink_to_fit();
        self.levels.shrink_to_fit();
    }
}
