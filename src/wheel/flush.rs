//! Moving time forward through the bucket heap: popping expired buckets and cascading their
//! entries to the due list or down a level, a bounded number at a time.

use super::entry::{DUE, NIL};
use super::level::split;
use super::persist::Persistence;
use super::{Wheel, KEPT_LEVELS};

/// The most buckets [`Wheel::bucket_wake`] looks at: a lower level's bucket can start within
/// (or with) a higher one's slot and hold an earlier first deadline.
pub(super) const WAKE_LOOKS: usize = 4;

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// Drops heap items at the top whose bucket is stale or was emptied by removals, so the
    /// head names a bucket that holds entries.
    pub(super) fn prune_heap_head(&mut self) {
        while let Some((expiration, bucket)) = self.heap.peek() {
            let (level, slot) = split(bucket);
            let Some(lvl) = self.levels.get_mut(level) else {
                self.heap.pop();
                self.stats.heap_pops += 1;
                continue; // its level was released: stale
            };
            let b = &mut lvl.buckets[slot];
            if b.queued && b.expiration == expiration {
                if !b.list.is_empty() {
                    return;
                }
                b.queued = false;
                lvl.queued -= 1;
            }
            self.heap.pop();
            self.stats.heap_pops += 1;
        }
    }

    /// When the earliest live buckets first need a poll: the earliest first deadline of the
    /// buckets that expire before it, looked at in expiration order (up to [`WAKE_LOOKS`] of
    /// them; past that, the expiration of the next one). Every bucket not looked at expires
    /// no sooner than the answer, and none holds a deadline before its expiration. `None` for
    /// no bucket. Prunes the heap's top, down to the buckets looked at, as it looks.
    pub(super) fn bucket_wake(&mut self) -> Option<u64> {
        let mut looked = [(0, 0); WAKE_LOOKS];
        let mut n = 0;
        let mut wake = u64::MAX;
        loop {
            self.prune_heap_head();
            let Some((expiration, bucket)) = self.heap.peek() else {
                break;
            };
            if expiration >= wake {
                break; // this bucket and every later one hold nothing before `wake`
            }
            if n == WAKE_LOOKS {
                wake = expiration; // its first deadline unknown: its start bounds the wake
                break;
            }
            self.heap.pop();
            looked[n] = (expiration, bucket);
            n += 1;
            let (level, slot) = split(bucket);
            wake = wake.min(self.levels[level].buckets[slot].first);
        }
        for &(expiration, bucket) in &looked[..n] {
            self.heap.push(expiration, bucket);
        }
        (n > 0).then_some(wake)
    }

    /// Processes a popped heap item: skips it if stale, else steps time to its expiration and
    /// starts moving the bucket's entries to the due list or down a level.
    pub(super) fn start_flush(&mut self, expiration: u64, bucket: u32) {
        self.stats.heap_pops += 1;
        let (level, slot) = split(bucket);
        let Some(lvl) = self.levels.get_mut(level) else {
            return; // the level was released since: stale
        };
        let b = &mut lvl.buckets[slot];
        if !(b.queued && b.expiration == expiration) {
            return; // stale
        }
        b.queued = false;
        lvl.queued -= 1;
        let empty = b.list.is_empty();
        self.stats.flushes += 1;
        self.set_now(self.now.max(expiration));
        if !empty {
            self.flushing = Some(bucket);
        }
    }

    /// Moves entries of the flushing bucket to the due list or down a level, one unit of
    /// budget each, until the bucket is empty or the budget is spent.
    ///
    /// Nothing links into the bucket meanwhile: time stays at its expiration until it is
    /// empty, and from there every deadline in its slot belongs to a lower level, and every
    /// later deadline to another slot or level.
    pub(super) fn flush_some(&mut self, bucket: u32, budget: &mut usize) {
        let (level, slot) = split(bucket);
        while *budget > 0 {
            let idx = self.levels[level].buckets[slot].list.head;
            if idx == NIL {
                break;
            }
            *budget -= 1;
            self.levels[level].buckets[slot]
                .list
                .unlink(&mut self.entries, idx);
            self.levels[level].len -= 1;
            let due = self.entries[idx as usize].deadline <= self.now;
            if due && !self.ordered_due {
                self.due.push_back(&mut self.entries, idx, DUE);
            } else {
                // With `ordered_due`, a due entry joins the imminent queues, which hand
                // every past deadline out in deadline order (the due list is first come).
                self.stats.cascades += u64::from(!due);
                self.link(idx);
            }
        }
        if self.levels[level].buckets[slot].list.is_empty() {
            self.flushing = None;
        }
    }

    /// Releases empty levels at the top: the wheel holds no more levels than its furthest
    /// entry needs, once the bucket heap has let go of their buckets too. The lowest
    /// [`KEPT_LEVELS`] stay (until [`shrink_to_fit`](Self::shrink_to_fit)): a lone timer filed
    /// again and again (an interval of 100 ms or 1 s, which needs level 1; a sleep in a loop;
    /// a registration just after an idle spell, which lands a level up because the wheel's
    /// time is that of its last pass) would otherwise allocate its level anew each time.
    pub(super) fn trim_levels(&mut self) {
        while self.levels.len() > KEPT_LEVELS
            && self
                .levels
                .last()
                .is_some_and(|l| l.len == 0 && l.queued == 0)
        {
            self.levels.pop();
        }
    }
}
