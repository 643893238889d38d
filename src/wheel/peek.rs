//! Which entry the wheel hands out next, found without advancing time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::entry::{List, NIL, PARKED};
use super::persist::Persistence;
use super::{Key, Wheel};

/// What [`Wheel::peek_cached`] keeps between calls, so that repeated peeks (a loop that peeks
/// and removes, say) do not walk a crowded bucket again each time: the waiting entries a walk
/// found, sorted by deadline, those filed since below the walk's bound, and that bound, below
/// which no other waiting entry has its deadline.
#[derive(Debug, Default)]
pub(crate) struct PeekCache {
    /// Whether the cache describes the wheel at its `filings` count `filings`.
    valid: bool,
    filings: u64,
    /// Deadlines and keys from the last walk, sorted by deadline from `pos` on (the entries
    /// before `pos` were found gone). An entry removed or moved since stays here, and is
    /// skipped: its key no longer matches, or its deadline no longer does.
    sorted: Vec<(u64, Key)>,
    pos: usize,
    /// Entries filed since the walk (inserts, reschedules the owner noted) with deadlines
    /// before `bound`: a min-heap of at most [`NOTED_MAX`], stale ones skipped as in `sorted`.
    noted: BinaryHeap<Reverse<(u64, Key)>>,
    /// Every waiting entry in neither `sorted` nor `noted` has its deadline at or after this.
    bound: u64,
    /// Entries looked at by the walks that made the cache, over its life.
    walked: u64,
}

/// Entries a walk of a crowded bucket keeps sorted, at least: more (an eighth of those
/// walked) on larger walks, so a loop that peeks and removes walks each entry a bounded number
/// of times on average rather than once per peek.
const PEEK_KEEP: usize = 1024;

/// Filings noted since a walk, at most: past that, the next peek walks again (so a queue
/// peeked once and then filled and emptied many times over holds no more than this).
const NOTED_MAX: usize = 1024;

impl PeekCache {
    /// Brings the cache up to date after the owner filed entry `key` of `wheel` (an insert or
    /// a reschedule that took) and nothing else since the cache last was: otherwise (a
    /// filing it was not told of, or a reschedule of a stale key) it is made again at the
    /// next peek.
    pub(crate) fn note_filed<T, P: Persistence<T>>(&mut self, wheel: &Wheel<T, P>, key: Key) {
        if !self.valid
            || self.filings.wrapping_add(1) != wheel.filings
            || wheel.last_filed != Some(key)
        {
            self.valid = false;
            return;
        }
        self.filings = wheel.filings;
        let deadline = match wheel.entries.get(key.index as usize) {
            Some(e) if e.generation == key.generation && e.bucket != PARKED => e.deadline,
            _ => return, // parked entries are not peeked
        };
        if deadline >= self.bound {
            return; // beyond the bound, as the entries left out are
        }
        if self.noted.len() >= NOTED_MAX {
            self.valid = false;
            return;
        }
        self.noted.push(Reverse((deadline, key)));
    }

    /// Entries the cache holds room for, kept or noted.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.sorted.capacity() + self.noted.capacity()
    }

    /// Entries looked at by the walks that made this cache.
    #[cfg(test)]
    pub(crate) fn walked(&self) -> u64 {
        self.walked
    }
}

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// The entry that [`poll`](Self::poll) hands out first once time allows: the head of the
    /// due list if any entry is due, otherwise an entry with the earliest deadline (ties in
    /// any order). Parked entries are not counted. `None` when no entry waits.
    ///
    /// Costs one look at every bucket, plus a walk of the buckets that can hold the earliest
    /// deadline: an entry's deadline is never before its bucket's expiration, so only
    /// buckets expiring before the best deadline found so far need a walk (usually one).
    /// Every call walks again: the reference [`peek_cached`](Self::peek_cached) is tested
    /// against.
    #[cfg(test)]
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

    /// The entry that [`poll`](Self::poll) hands out first once time allows: the head of the
    /// due list if any entry is due, otherwise an entry with the earliest deadline (ties in
    /// any order). Parked entries are not counted. `None` when no entry waits.
    ///
    /// What a walk for it found is kept in `cache`: a peek after removals, hand-outs, or
    /// inserts and reschedules the owner [noted](PeekCache::note_filed), walks nothing while
    /// that lasts; another walks the buckets that can hold the earliest deadline (an entry's
    /// deadline is never before its bucket's expiration), as the test-only `peek` does every
    /// time, and keeps what it found sorted.
    pub(crate) fn peek_cached(&self, cache: &mut PeekCache) -> Option<Key> {
        if self.due.head != NIL {
            return Some(self.key_of(self.due.head));
        }
        if cache.valid && cache.filings == self.filings {
            let waits = |&(deadline, key): &(u64, Key)| {
                matches!(
                    self.entries.get(key.index as usize),
                    Some(e) if e.generation == key.generation
                        && e.deadline == deadline
                        && e.bucket != PARKED
                )
            };
            while cache.sorted.get(cache.pos).is_some_and(|e| !waits(e)) {
                cache.pos += 1;
            }
            while cache.noted.peek().is_some_and(|Reverse(e)| !waits(e)) {
                cache.noted.pop();
            }
            let found = cache.sorted.get(cache.pos);
            let noted = cache.noted.peek().map(|Reverse(e)| e);
            let first = match (found, noted) {
                (Some(f), Some(n)) => Some(if n.0 < f.0 { n } else { f }),
                (f, n) => f.or(n),
            };
            // Past the bound (or with nothing left), an entry left out may come first.
            if let Some(&(_, key)) = first.filter(|&&(d, _)| d <= cache.bound) {
                return Some(key);
            }
        }
        self.fill_peek_cache(cache)
    }

    /// Walks as the test-only `peek` does, keeping every entry it looks at (the earliest
    /// [`PEEK_KEEP`], or an eighth, when there are more) sorted in `cache`, and the earliest
    /// expiration of the buckets it does not walk as the bound: what
    /// [`peek_cached`](Self::peek_cached) answers from.
    fn fill_peek_cache(&self, cache: &mut PeekCache) -> Option<Key> {
        cache.valid = false; // until it is made
        cache.noted.clear();
        let sorted = &mut cache.sorted;
        sorted.clear();
        // Pushes the entries of `list`, lowering `best` to the earliest deadline pushed.
        let collect = |sorted: &mut Vec<(u64, Key)>, best: &mut u64, list: &List| {
            let mut idx = list.head;
            while idx != NIL {
                let e = &self.entries[idx as usize];
                *best = (*best).min(e.deadline);
                let key = Key {
                    index: idx,
                    generation: e.generation,
                };
                sorted.push((e.deadline, key));
                idx = e.next;
            }
        };
        let mut best = u64::MAX;
        collect(sorted, &mut best, &self.imminent.list);
        collect(sorted, &mut best, &self.staged);
        let buckets = || {
            self.levels.iter().enumerate().flat_map(|(l, level)| {
                level
                    .buckets
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| !b.list.is_empty())
                    .map(move |(s, b)| ((l, s), b))
            })
        };
        // The earliest bucket first, so that the pass below usually walks no other. An
        // entry's deadline is never before its bucket's expiration: a bucket that expires at
        // or after the best deadline found holds nothing earlier, and bounds what it holds.
        let mut walked = None;
        if let Some((at, b)) = buckets().min_by_key(|(_, b)| b.expiration) {
            if sorted.is_empty() || b.expiration < best {
                collect(sorted, &mut best, &b.list);
                walked = Some(at);
            }
        }
        let mut bound = u64::MAX;
        for (at, b) in buckets() {
            if Some(at) == walked {
                continue;
            }
            if sorted.is_empty() || b.expiration < best {
                collect(sorted, &mut best, &b.list);
            } else {
                bound = bound.min(b.expiration);
            }
        }
        cache.walked += sorted.len() as u64;
        let keep = (sorted.len() / 8).max(PEEK_KEEP);
        if sorted.len() > keep {
            sorted.select_nth_unstable_by_key(keep, |&(d, _)| d);
            bound = bound.min(sorted[keep].0);
            sorted.truncate(keep);
        }
        sorted.sort_unstable_by_key(|&(d, _)| d);
        // A larger walk's room, given back beyond twice what this one keeps.
        let want = sorted.len().max(PEEK_KEEP);
        if sorted.capacity() > 2 * want {
            sorted.shrink_to(want);
        }
        cache.pos = 0;
        cache.bound = bound;
        cache.filings = self.filings;
        cache.valid = true;
        cache.sorted.first().map(|&(_, key)| key)
    }

    /// The earliest deadline of the entries waiting (parked ones aside), exactly, or `None`
    /// if none waits; the wheel's time if an entry is due. Unlike
    /// [`next_expiration`](Self::next_expiration), which may name an earlier time (the
    /// deadline of an entry removed or moved later since, or, past four buckets, a bucket's
    /// start), this is when the first entry is due: for an owner whose
    /// every wakeup reaches a task that must not be woken for nothing. Costs a look at every
    /// bucket and a walk of those that start before the answer, every call: the reference
    /// that [`next_deadline_cached`](Self::next_deadline_cached), which owners use, is
    /// tested against.
    #[cfg(test)]
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        if self.entries.len() == self.parked_len {
            return None;
        }
        if !self.due.is_empty() || self.flushing.is_some() {
            return Some(self.now);
        }
        let mut best = self.imminent.live_min(&self.entries).unwrap_or(u64::MAX);
        let mut idx = self.staged.head;
        while idx != NIL {
            let e = &self.entries[idx as usize];
            best = best.min(e.deadline);
            idx = e.next;
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
                }
            }
        }
        Some(best)
    }

    /// The earliest deadline of the entries waiting, as the test-only `next_deadline` finds
    /// it by a walk (exactly; the wheel's time if an entry is due), answered from `cache`
    /// (the one [`peek_cached`](Self::peek_cached) keeps) while it lasts: after hand-outs,
    /// removals, passes, and inserts and reschedules the owner
    /// [noted](PeekCache::note_filed), no walk.
    /// An owner that moves its first entry later again and again (an idle-connection queue
    /// whose connections are active in turn) walks its crowded buckets once in a while, not
    /// once per move: the walk keeps the earliest eighth of what it saw sorted.
    pub(crate) fn next_deadline_cached(&self, cache: &mut PeekCache) -> Option<u64> {
        if self.entries.len() == self.parked_len {
            return None;
        }
        if !self.due.is_empty() || self.flushing.is_some() {
            return Some(self.now);
        }
        let key = self.peek_cached(cache)?;
        Some(self.entries[key.index as usize].deadline)
    }

    pub(super) fn key_of(&self, idx: u32) -> Key {
        Key {
            index: idx,
            generation: self.entries[idx as usize].generation,
        }
    }
}
