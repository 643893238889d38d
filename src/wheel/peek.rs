//! Which entry the wheel hands out next, found without advancing time.

use super::entry::{List, NIL};
use super::persist::Persistence;
use super::{Key, Wheel};

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// The entry that [`poll`](Self::poll) hands out first once time allows: the head of the
    /// due list if any entry is due, otherwise an entry with the earliest deadline (ties in
    /// any order). Parked entries are not counted. `None` when no entry waits.
    ///
    /// Costs one look at every bucket, plus a walk of the buckets that can hold the earliest
    /// deadline: an entry's deadline is never before its bucket's expiration, so only
    /// buckets expiring before the best deadline found so far need a walk (usually one).
    pub(crate) fn peek(&self) -> Option<Key> {
        if self.due.head != NIL {
            return Some(self.key_of(self.due.head));
        }
        let mut best: Option<(u64, u32)> = None;
        let consider = |best: &mut Option<(u64, u32)>, list: &List| {
            let mut idx = list.head;
            while idx != NIL {
                let d = self.entries[idx as usize].deadline;
                if best.map_or(true, |(b, _)| d < b) {
                    *best = Some((d, idx));
                }
                idx = self.entries[idx as usize].next;
            }
        };
        consider(&mut best, &self.imminent.list);
        consider(&mut best, &self.staged);
        let buckets = || {
            self.levels
                .iter()
                .flat_map(|l| l.buckets.iter())
                .filter(|b| !b.list.is_empty())
        };
        // The earliest bucket first, so that the pass below usually walks no other.
        if let Some(first) = buckets().min_by_key(|b| b.expiration) {
            if best.map_or(true, |(d, _)| first.expiration < d) {
                consider(&mut best, &first.list);
            }
        }
        for b in buckets() {
            if best.map_or(true, |(d, _)| b.expiration < d) {
                consider(&mut best, &b.list);
            }
        }
        best.map(|(_, idx)| self.key_of(idx))
    }

    /// The earliest deadline of the entries waiting (parked ones aside), exactly, or `None`
    /// if none waits; the wheel's time if an entry is due. Unlike
    /// [`next_expiration`](Self::next_expiration), which may name an earlier time (the
    /// deadline of an entry removed or moved later since, or, past four buckets, a bucket's
    /// start), this is when the first entry is due: for an owner whose
    /// every wakeup reaches a task that must not be woken for nothing. Costs a look at every
    /// bucket and a walk of those that start before the answer, every call: an owner that
    /// asks often keeps the answer while its entries do not change (as `DelayQueue` does).
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        if self.entries.len() == self.parked_len {
            return None;
        }
        if !self.due.is_empty() || self.flushing.is_some() {
            return Some(self.now);
        }
        let mut best = self.imminent.live_min(&self.entries).unwrap_or(u64::MAX);
        let mut walked = 0;
        let mut idx = self.staged.head;
        while idx != NIL {
            let e = &self.entries[idx as usize];
            best = best.min(e.deadline);
            idx = e.next;
            walked += 1;
        }
        for level in &self.levels {
            for bucket in level.buckets.iter() {
                if bucket.list.is_empty() || bucket.expiration >= best {
                    continue;
                }
                let mut idx = bucket.list.head;
                while idx != NIL {
                    let e = &self.entries[idx as usize];
                    best = best.min(e.deadline);
                    idx = e.next;
                    walked += 1;
                }
            }
        }
        self.stats.deadline_walks += walked;
        Some(best)
    }

    pub(super) fn key_of(&self, idx: u32) -> Key {
        Key {
            index: idx,
            generation: self.entries[idx as usize].generation,
        }
    }
}
