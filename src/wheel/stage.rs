//! The staging list: recent entries kept out of the buckets until the owner's next poll, so
//! that an entry removed before then (a timeout whose call answered) costs no placement.
//!
//! The owner of a wheel keeps a wakeup no later than every time the wheel reported
//! ([`take_new_head`](super::Wheel::take_new_head)) and every answer of
//! [`next_expiration`](super::Wheel::next_expiration), and polls (through
//! [`poll_within`](super::Wheel::poll_within), then `next_expiration`) by then: the wheel
//! knows that promise (`promise`: the last answer, lowered by every report since; `u64::MAX`,
//! none). An entry inserted for a deadline at or after it needs no wake of its own, only to be
//! in place by the time the owner polls. With staging on
//! ([`stage_recent`](super::Wheel::stage_recent)), such a one-shot entry joins the staging list
//! (a list push) instead of a bucket (level and slot arithmetic, bucket bookkeeping, a heap
//! push for a new bucket); a poll places staged entries first (one unit of its budget each)
//! and moves time only once none is left, and `next_expiration` places them all before it
//! answers. Between two answers the promise only falls, so a staged deadline stays at or after
//! it. Nothing is staged while no wake is promised, and persistent entries never are.
//!
//! The contract this adds for the owner: it must not move its wakeup later than the promise
//! other than by polling and asking `next_expiration`, and a report must reach its wakeup
//! before another thread can see the wheel (a timer's shard lowers the driver's armed time
//! under the wheel's lock); `next_expiration` is the owner's question, not a query for others,
//! as it records its answer as the promise.
//!
//! The list holds at most [`STAGE_MAX`] entries: when it is full, the oldest is placed to make
//! room, so a poll never has more than that many to place, and an entry that lives long is
//! placed about as soon as it would have been. Staged entries are placed in the order they
//! were inserted in, so entries of one deadline usually keep that order; one placed at once
//! (a persistent entry, or one moved before the promise) can join its bucket ahead of an older
//! staged entry of the same deadline.

use super::entry::{NIL, STAGED};
use super::persist::Persistence;
use super::Wheel;

/// The most entries the staging list holds.
pub(crate) const STAGE_MAX: usize = 512;

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// Stages one-shot entries inserted at or after the owner's promised wake (see the
    /// module docs). For an owner that polls when [`next_expiration`](Self::next_expiration)
    /// and the reported heads say, as a timer's driver does.
    pub(crate) fn stage_recent(&mut self) {
        self.staging = true;
    }

    /// Whether a new one-shot entry for `deadline` may wait on the staging list: only while a
    /// wake is promised (`u64::MAX` means none, even for a deadline of `u64::MAX`).
    #[inline]
    pub(super) fn may_stage(&self, deadline: u64) -> bool {
        self.staging && self.promise != u64::MAX && self.stays_staged(deadline)
    }

    /// Puts entry `idx` (not linked) on the staging list, placing the oldest staged entry
    /// first if the list is full.
    #[inline]
    pub(super) fn stage(&mut self, idx: u32) {
        if self.staged_len == STAGE_MAX {
            let oldest = self.staged.head;
            self.staged.unlink(&mut self.entries, oldest);
            self.staged_len -= 1;
            self.link(oldest);
        }
        self.staged.push_back(&mut self.entries, idx, STAGED);
        self.staged_len += 1;
        self.stats.staged += 1;
    }

    /// Whether a staged entry moved to `deadline` may stay on the list (a wake is promised,
    /// as the entry is staged).
    #[inline]
    pub(super) fn stays_staged(&self, deadline: u64) -> bool {
        deadline > self.now && deadline >= self.promise
    }

    /// Places staged entries in their buckets, oldest first, one unit of `budget` each, until
    /// none is left or the budget is spent.
    pub(super) fn place_staged(&mut self, budget: &mut usize) {
        while *budget > 0 && self.staged.head != NIL {
            *budget -= 1;
            let idx = self.staged.head;
            self.staged.unlink(&mut self.entries, idx);
            self.staged_len -= 1;
            self.link(idx);
        }
    }

    /// Places every staged entry.
    pub(super) fn place_all_staged(&mut self) {
        let mut unlimited = usize::MAX;
        self.place_staged(&mut unlimited);
    }

    /// The owner promised to poll by `at` (a report, or an answer of `next_expiration`).
    #[inline]
    pub(super) fn promised(&mut self, at: u64) {
        self.promise = self.promise.min(at);
    }
}
