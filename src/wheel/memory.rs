//! The wheel's memory: draining, compacting, clearing and shrinking it.

use slab::Slab;

use super::entry::{Key, List, PARKED};
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

    /// Moves every entry into a new slab exactly as large as needed, returning each entry's
    /// old and new key, and gives back what the bucket heap and the imminent queues hold beyond
    /// the moved entries' needs (a burst handed out long ago included). Deadlines, the wheel's
    /// time and the generation count are kept, so a key handed out before never names a moved
    /// entry by accident. Parked entries stay parked: an unreachable one (see
    /// [`insert_unreachable`](Self::insert_unreachable)) is not filed into a top-level bucket,
    /// and a persistent one that fired is not filed again.
    pub(crate) fn compact(&mut self) -> Vec<(Key, Key)> {
        let (head, promise) = (self.new_head.take(), self.promise);
        let old = std::mem::replace(&mut self.entries, Slab::with_capacity(0));
        self.unlink_all();
        self.entries = Slab::with_capacity(old.len());
        let mut moved = Vec::with_capacity(old.len());
        for (idx, e) in old {
            let from = Key {
                index: idx as u32,
                generation: e.generation,
            };
            let to = if e.bucket == PARKED {
                self.insert_parked(e.deadline, e.value, e.persistent, e.timeout)
            } else {
                self.insert_entry(e.deadline, e.value, e.persistent, e.timeout)
            };
            if let Ok(to) = to {
                moved.push((from, to));
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
        // Filed anew, every one (one filing each): no single filing a cache could be told of.
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
