//! The wheel's structural invariants, checked in tests and, in debug builds, by the driver's
//! passes.

use super::entry::{List, DUE, IMMINENT, NIL, PARKED, STAGED};
use super::level::bucket_id;
use super::Wheel;

impl<T, P> Wheel<T, P> {
    /// Checks every structural invariant; panics on the first violation. O(entries + buckets).
    #[cfg(any(test, debug_assertions))] // tests, and the driver's passes in debug builds
    pub(crate) fn assert_invariants(&self) {
        assert!(self.levels.len() <= self.geo.max_levels, "too many levels");
        if let Some(bucket) = self.flushing {
            assert!(
                super::level::split(bucket).0 < self.levels.len(),
                "flushing a bucket of a level released"
            );
        }
        let live: std::collections::HashSet<(u64, u32)> = self.heap.iter().collect();
        let mut linked = 0;
        // Due list: consistent links, every deadline already reached.
        linked += self.check_list(&self.due, DUE, |d| {
            assert!(d <= self.now, "due entry {d} after now {}", self.now)
        });
        let imminent = self.check_list(&self.imminent.list, IMMINENT, |d| {
            if self.ordered_due {
                // Past deadlines wait here too, handed out in deadline order.
                assert!(
                    self.geo.tick_of(d) <= self.now_tick,
                    "imminent entry {d} in a later tick"
                );
                return;
            }
            assert!(
                d > self.now,
                "imminent entry {d} already due at {}",
                self.now
            );
            assert_eq!(
                self.geo.tick_of(d),
                self.now_tick,
                "imminent entry {d} in a later tick"
            );
        });
        assert_eq!(imminent, self.imminent.len(), "imminent count");
        linked += imminent;
        // Staged entries: only on a staging wheel, never due, none before the promised wake.
        let staged = self.check_list(&self.staged, STAGED, |d| {
            assert!(d > self.now, "staged entry {d} due at {}", self.now);
            assert!(
                d >= self.promise && self.promise != u64::MAX,
                "staged entry {d} without a promised wake by then ({})",
                self.promise
            );
        });
        assert_eq!(staged, self.staged_len, "staged count");
        assert!(self.staging || staged == 0, "staged without staging");
        assert!(staged <= super::stage::STAGE_MAX, "too many staged");
        linked += staged;
        let parked = self.check_list(&self.parked, PARKED, |_| {});
        assert_eq!(parked, self.parked_len, "parked count");
        linked += parked;
        let mut idx = self.parked.head;
        while idx != NIL {
            let e = &self.entries[idx as usize];
            assert!(
                e.persistent || e.deadline == u64::MAX,
                "only persistent entries, and unreachable ones, park"
            );
            idx = self.entries[idx as usize].next;
        }
        assert_eq!(
            self.now_tick,
            self.geo.tick_of(self.now),
            "cached tick of now"
        );
        assert!(!self.first_entry, "the first-entry flag outlived its link");
        // Every imminent entry is indexed by a queue item with its current deadline.
        assert!(self.imminent.run_is_sorted(), "the imminent run is sorted");
        let indexed: std::collections::HashSet<(u64, u32, u64)> = self.imminent.items().collect();
        let mut idx = self.imminent.list.head;
        while idx != NIL {
            let e = &self.entries[idx as usize];
            assert!(
                indexed.contains(&(e.deadline, idx, e.generation)),
                "imminent entry {idx} missing from its queues"
            );
            idx = e.next;
        }
        for (k, lvl) in self.levels.iter().enumerate() {
            let mut in_level = 0;
            for (slot, b) in lvl.buckets.iter().enumerate() {
                let id = bucket_id(k, slot);
                let n = self.check_list(&b.list, id, |d| {
                    assert!(
                        d >= b.expiration,
                        "entry {d} before its bucket {}",
                        b.expiration
                    );
                    assert!(
                        d >= b.first,
                        "entry {d} before its bucket's first deadline {}",
                        b.first
                    );
                    // The owner wakes for it in time (see `next_expiration` and `link`).
                    assert!(
                        d >= self.promise,
                        "entry {d} before the promised wake {}",
                        self.promise
                    );
                });
                if n > 0 && self.flushing == Some(id) {
                    assert!(!b.queued, "a flushing bucket left the heap");
                    assert_eq!(b.expiration, self.now, "time stays at a flushing bucket");
                } else if n > 0 {
                    assert!(b.queued, "non-empty bucket {k}/{slot} is not queued");
                    assert!(b.expiration >= self.now, "bucket behind the wheel's time");
                    let tick = self.geo.tick_of(b.expiration);
                    assert_eq!(self.geo.slot_for(tick, k), (slot, b.expiration));
                    // Within its level's window seen from now: otherwise a later deadline of
                    // the same slot, a cycle on, would join a bucket of another expiration.
                    let s = k as u32 * self.geo.shift;
                    assert!(
                        (tick >> s) - (self.now_tick >> s) <= self.geo.mask,
                        "bucket {k}/{slot} at {} out of its level's window",
                        b.expiration
                    );
                }
                if b.queued {
                    assert!(
                        live.contains(&(b.expiration, id)),
                        "queued bucket not in heap"
                    );
                }
                in_level += n;
            }
            assert_eq!(in_level, lvl.len, "level {k} count");
            linked += in_level;
        }
        assert_eq!(linked, self.entries.len(), "entries reachable from lists");
        let queued: usize = self.levels.iter().map(|l| l.queued).sum();
        for (k, lvl) in self.levels.iter().enumerate() {
            let n = lvl.buckets.iter().filter(|b| b.queued).count();
            assert_eq!(n, lvl.queued, "level {k} queued count");
        }
        assert_eq!(
            self.heap.len(),
            queued,
            "one heap item per queued bucket, no duplicates"
        );
    }

    /// Checks list `list` of bucket `id` (links, bucket ids, deadlines); returns its length.
    #[cfg(any(test, debug_assertions))]
    fn check_list(&self, list: &List, id: u32, check_deadline: impl Fn(u64)) -> usize {
        let (mut n, mut prev, mut idx) = (0, NIL, list.head);
        while idx != NIL {
            let e = &self.entries[idx as usize];
            assert_eq!(e.bucket, id, "entry in the wrong list");
            assert_eq!(e.prev, prev, "broken prev link");
            check_deadline(e.deadline);
            n += 1;
            prev = idx;
            idx = e.next;
        }
        assert_eq!(list.tail, prev, "broken tail");
        n
    }
}
