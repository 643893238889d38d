//! The pure hierarchical timing wheel (Kafka-style): no tokio, no `std::time`; time is `u64`.
//!
//! Level 0 has `wheel_size` buckets one tick wide; level `k + 1`'s tick is level `k`'s whole span.
//! A tick is one time unit ([`Wheel::new`]) or any number of units ([`Wheel::with_tick`]); in
//! the latter case entries keep their deadline in units, and when time reaches a tick, the
//! entries of that tick not yet due wait on an "imminent" list ordered by exact deadline,
//! so every entry comes out exactly when time reaches its deadline.
//! Levels are created lazily, bottom-up, when a deadline needs them, and released again by
//! [`Wheel::poll`] once they are empty. An entry goes to the lowest level whose window (seen from
//! the wheel's current time) holds its deadline; every bucket therefore holds entries of exactly
//! one expiration (the start of its slot).
//!
//! Every non-empty bucket has an item `(expiration, bucket)` in a min-heap, the bucket heap, so
//! advancing time visits only buckets that hold something: an entry one hour away costs at most
//! one heap pop per level on its way down, however many ticks lie in between. Entries live in a
//! [`slab::Slab`] and are chained into their bucket through slab indices, so insert, remove and
//! reschedule are O(1), plus O(log B) for a bucket's first heap push.
//!
//! A wheel can stage recent entries (`stage.rs`): one inserted for a time its owner has already
//! promised to poll by waits on a short list, and is placed by that poll, before time moves.
//!
//! [`Wheel::poll_within`] bounds the work of one call (entries handed out, entries cascaded,
//! heap items popped), so a caller holding a lock can release it between calls even while a
//! bucket of a million entries cascades: a bucket being flushed is emptied a bounded number of
//! entries at a time.

mod bucket_heap;
mod entry;
mod flush;
mod imminent;
#[cfg(any(test, debug_assertions))]
mod invariants;
mod level;
mod memory;
mod peek;
mod persist;
mod stage;
mod step;

#[cfg(test)]
mod naive;
#[cfg(test)]
mod tests;

use std::marker::PhantomData;

use slab::Slab;

use self::bucket_heap::BucketHeap;
use self::entry::{Entry, List, DUE, IMMINENT, NIL, PARKED, STAGED};
pub(crate) use self::entry::{Key, CAPACITY};
use self::imminent::Imminent;
pub(crate) use self::level::MAX_WHEEL_SIZE;
use self::level::{bucket_id, split, Geometry, Level};
pub(crate) use self::peek::PeekCache;
pub(crate) use self::persist::{OneShot, Persistence, Persistent};
pub(crate) use self::step::{Expired, Full, Stats, Step};

/// The slab is shrunk when the wheel empties and holds more than this many vacant slots.
/// Levels kept, once allocated, when they empty: up to 64^3 ticks at the default geometry
/// (about 4.4 minutes at 1 ms), the span of the common heartbeats and timeouts. A level of 64
/// buckets is about 2 KB.
const KEPT_LEVELS: usize = 3;

const SHRINK_THRESHOLD: usize = 4096;

/// A hierarchical timing wheel holding values of type `T`.
#[derive(Debug)]
pub(crate) struct Wheel<T, P = OneShot> {
    entries: Slab<Entry<T>>,
    levels: Vec<Level>,
    /// One item per queued bucket: the min-heap of bucket expirations.
    heap: BucketHeap,
    /// Entries whose deadline is at or before `now`, waiting to be handed out (FIFO).
    due: List,
    /// Entries due after `now` within the current tick, in deadline order.
    imminent: Imminent,
    /// Persistent entries that fired and wait to be rescheduled or removed, and their number.
    parked: List,
    parked_len: usize,
    /// Recent entries not yet placed in a bucket, oldest first, and their number (see
    /// `stage.rs`); only with `staging`.
    staged: List,
    staged_len: usize,
    staging: bool,
    /// The owner polls no later than this: the last answer of `next_expiration` (`u64::MAX`
    /// for none), lowered by every report since.
    promise: u64,
    /// A bucket whose heap item was popped and whose entries are being moved down, a bounded
    /// number per call. Nothing else links into it meanwhile (see `flush_some`).
    flushing: Option<u32>,
    /// The wheel's current time: the latest time it was advanced to.
    now: u64,
    /// The tick `now` falls in.
    now_tick: u64,
    geo: Geometry,
    next_generation: u64,
    /// Counts the changes that file an entry at a deadline (inserts, reschedules) or move or
    /// drop entries wholesale (compaction, clearing): a [`PeekCache`] made at one count knows
    /// of every waiting entry's deadline until the next.
    filings: u64,
    /// The entry the latest filing filed (`None` after a compaction, a clearing or a drain),
    /// for the [`PeekCache`] told of one filing to check it is that one.
    last_filed: Option<Key>,
    /// The earliest time at which work linked since the last `take_new_head` needs a wake,
    /// when that work is new to anyone who last asked for the next expiration: a bucket pushed
    /// to the heap, a due entry, a new imminent minimum, anything joining an empty wheel, or
    /// an entry filed (or moved within its bucket) before the promised wake.
    new_head: Option<u64>,
    /// The next link is the first entry of an empty wheel (it reports its wake time whatever
    /// it joins).
    first_entry: bool,
    /// Since the wheel last had nothing waiting, no `next_expiration` has pruned the heap: a
    /// bucket emptied by removals may still hold its heap item from before, which no one
    /// counts any more, so the first entry linked into it reports its deadline.
    unannounced: bool,
    /// What a persistent entry hands out when it fires (see [`Persistence`]).
    persistence: PhantomData<fn() -> P>,
    /// Keep the slab's memory when the wheel empties (see [`keep_capacity`](Self::keep_capacity)).
    keep_capacity: bool,
    /// Relink an entry moved later than its bucket's slot at once (see
    /// [`relink_later`](Self::relink_later)).
    relink_later: bool,
    /// Entries linked at or before the wheel's time wait in the imminent heap, handed out in
    /// deadline order, rather than on the due list in the order they came (see
    /// [`order_due`](Self::order_due)).
    ordered_due: bool,
    stats: Stats,
}

impl<T> Wheel<T> {
    /// A wheel of `wheel_size` buckets per level, each one time unit (tick) wide at level 0,
    /// starting at time 0.
    ///
    /// # Panics
    ///
    /// If `wheel_size` is not a power of two in `2..=MAX_WHEEL_SIZE`.
    #[cfg(any(test, feature = "internals"))] // tests and `internals`
    pub(crate) fn new(wheel_size: usize) -> Self {
        Wheel::with_tick(wheel_size, 1)
    }

    /// A wheel whose level-0 buckets are `tick` time units wide: entries keep their exact
    /// deadline in units and are handed out when time reaches it.
    ///
    /// # Panics
    ///
    /// If `wheel_size` is not a power of two in `2..=MAX_WHEEL_SIZE`, or `tick` is zero.
    pub(crate) fn with_tick(wheel_size: usize, tick: u64) -> Self {
        Wheel::build(wheel_size, tick)
    }
}

impl<T, P: Persistence<T>> Wheel<T, P> {
    /// A wheel as [`with_tick`](Wheel::with_tick) describes, for any persistence.
    pub(super) fn build(wheel_size: usize, tick: u64) -> Self {
        assert!(
            wheel_size.is_power_of_two() && (2..=MAX_WHEEL_SIZE).contains(&wheel_size),
            "wheel size must be a power of two in 2..={MAX_WHEEL_SIZE}, got {wheel_size}"
        );
        Wheel {
            entries: Slab::new(),
            levels: Vec::new(),
            heap: BucketHeap::default(),
            due: List::EMPTY,
            imminent: Imminent::new(),
            parked: List::EMPTY,
            parked_len: 0,
            staged: List::EMPTY,
            staged_len: 0,
            staging: false,
            promise: u64::MAX,
            flushing: None,
            now: 0,
            now_tick: 0,
            geo: Geometry::new(wheel_size, tick),
            next_generation: 1,
            filings: 0,
            last_filed: None,
            new_head: None,
            first_entry: false,
            unannounced: false,
            persistence: PhantomData,
            keep_capacity: false,
            relink_later: false,
            ordered_due: false,
            stats: Stats::default(),
        }
    }

    /// Keeps the slab's memory when the wheel empties, instead of giving a large one back:
    /// for an owner that manages capacity itself (`reserve`, `shrink_to_fit`).
    pub(crate) fn keep_capacity(&mut self) {
        self.keep_capacity = true;
    }

    /// Relinks an entry moved later than the slot of its bucket at once, rather than when the
    /// bucket expires: for an owner that wakes at [`next_expiration`](Self::next_expiration),
    /// which a bucket left holding only entries moved away would wake for nothing. (An owner
    /// that wakes at [`next_deadline_cached`](Self::next_deadline_cached) never does, and
    /// keeps the cheaper lazy move.)
    pub(crate) fn relink_later(&mut self) {
        self.relink_later = true;
    }

    /// Hands out entries filed at or before the wheel's time (inserted or rescheduled into the
    /// past) in deadline order too, through the imminent heap (O(log n) each) rather than the
    /// due list (O(1), in the order they came): for an owner whose clock reading lags (a
    /// `DelayQueue`), so that every past deadline counts alike.
    pub(crate) fn order_due(&mut self) {
        self.ordered_due = true;
    }

    /// Makes room for at least `additional` more entries without reallocating.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Makes room for exactly `additional` more entries where the slab must grow for them
    /// (a queue made `with_capacity` holds what it was asked for, not a rounded-up amount).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.entries.reserve_exact(additional);
    }

    /// The wheel's current time.
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Number of pending entries (due ones not yet handed out and parked ones included).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of levels currently allocated.
    pub(crate) fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Slab capacity, in entries.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    pub(crate) fn stats(&self) -> Stats {
        self.stats
    }

    /// Inserts `value` to expire at `deadline`. A deadline at or before the wheel's time
    /// comes out on the next [`poll`](Self::poll); `u64::MAX` waits until time reaches it.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Result<Key, Full<T>> {
        self.insert_entry(deadline, value, false, false)
    }

    /// [`insert`](Self::insert), the entry marked as a timeout (a timer that bounds other
    /// work) if `timeout`: the mark changes nothing here, and comes back with the entry when
    /// it fires ([`Expired::timeout`]), for the owner to order its wakes by.
    #[inline]
    pub(crate) fn insert_as(
        &mut self,
        deadline: u64,
        value: T,
        timeout: bool,
    ) -> Result<Key, Full<T>> {
        self.insert_entry(deadline, value, false, timeout)
    }

    /// Inserts `value` for the one deadline an owner's time never reaches, `u64::MAX` (the
    /// driver's clock stops one short of it): the entry waits beside the parked ones, in no
    /// bucket, so it asks for no wakeup and no cascade ever moves it, yet it is pending as any
    /// other: counted, removed, rescheduled (back into the wheel) and drained alike. Only a
    /// [`poll`](Self::poll) at `u64::MAX` itself would have handed it out.
    pub(crate) fn insert_unreachable(&mut self, value: T) -> Result<Key, Full<T>> {
        self.insert_unreachable_entry(value, false)
    }

    /// [`insert_unreachable`](Self::insert_unreachable), for a one-shot or a persistent entry
    /// (which then is not [parked](Self::is_parked): it has not fired).
    fn insert_unreachable_entry(&mut self, value: T, persistent: bool) -> Result<Key, Full<T>> {
        self.insert_parked(u64::MAX, value, persistent, false)
    }

    /// Inserts an entry straight onto the parked list: an unreachable one (`u64::MAX`).
    fn insert_parked(
        &mut self,
        deadline: u64,
        value: T,
        persistent: bool,
        timeout: bool,
    ) -> Result<Key, Full<T>> {
        if self.entries.len() >= CAPACITY {
            return Err(Full(value));
        }
        let key = self.file_new(deadline, value, persistent, timeout);
        self.park_filed(key.index);
        Ok(key)
    }

    /// Puts the entry at `idx`, just filed in the slab, on the parked list.
    #[inline(always)]
    fn park_filed(&mut self, idx: u32) {
        self.parked.push_back(&mut self.entries, idx, PARKED);
        self.parked_len += 1;
    }

    /// Puts a new entry in the slab, in no list yet (room checked by the caller), under a
    /// fresh generation, and counts the filing (see `filings`).
    #[inline(always)]
    fn file_new(&mut self, deadline: u64, value: T, persistent: bool, timeout: bool) -> Key {
        self.filings += 1;
        let generation = self.next_generation;
        self.next_generation += 1;
        let index = self.entries.insert(Entry {
            deadline,
            generation,
            prev: NIL,
            next: NIL,
            bucket: NIL,
            persistent,
            long: false,
            timeout,
            value,
        }) as u32;
        let key = Key { index, generation };
        self.last_filed = Some(key);
        key
    }

    fn insert_entry(
        &mut self,
        deadline: u64,
        value: T,
        persistent: bool,
        timeout: bool,
    ) -> Result<Key, Full<T>> {
        if self.entries.len() >= CAPACITY {
            return Err(Full(value));
        }
        let stage = self.before_filing(deadline, persistent);
        let key = self.file_new(deadline, value, persistent, timeout);
        self.after_filing(key.index, stage);
        Ok(key)
    }

    /// Whether an entry about to be filed for `deadline` is to be staged rather than linked;
    /// if linked, notes whether it is the first the wheel waits for. Called before the entry
    /// joins the slab.
    #[inline(always)]
    fn before_filing(&mut self, deadline: u64, persistent: bool) -> bool {
        // Staged, it joins no bucket (and nothing is staged while no wake is promised).
        let stage = !persistent && self.may_stage(deadline);
        if !stage {
            // A wheel with nothing to wait for (empty, or only parked entries) reports no
            // next expiration, so whatever this entry joins (even a bucket whose heap item
            // survived from before) is new to anyone who asked.
            self.first_entry = self.entries.len() == self.parked_len;
            self.unannounced |= self.first_entry;
        }
        stage
    }

    /// Stages or links the entry at `idx`, just filed in the slab, as
    /// [`before_filing`](Self::before_filing) decided.
    #[inline(always)]
    fn after_filing(&mut self, idx: u32, stage: bool) {
        if stage {
            self.stage(idx);
        } else {
            self.link(idx);
        }
    }

    /// If an insert or reschedule since the last call may have moved
    /// [`next_expiration`](Self::next_expiration) earlier than it was when last asked (it
    /// created a bucket, a due entry, a new imminent minimum, or the first entry of an empty
    /// wheel), the earliest time that new work needs a wake at. Joining a bucket whose heap
    /// item was already counted (one that holds entries, or one emptied by removals while the
    /// wheel kept waiting entries or after a `next_expiration` answer) reports only a deadline
    /// before the promised wake, as does a move within a bucket. Whoever keeps a wakeup no
    /// later than every reported time (and every answer of `next_expiration`) never misses an
    /// entry. On a staging wheel the report must reach that wakeup before any other
    /// thread sees the wheel: later entries may be staged on it (see `stage.rs`).
    pub(crate) fn take_new_head(&mut self) -> Option<u64> {
        self.new_head.take()
    }

    /// Records that new work needs a wake at `at`.
    fn report(&mut self, at: u64) {
        self.new_head = Some(self.new_head.map_or(at, |h| h.min(at)));
        self.promised(at);
    }

    /// Removes the entry, returning its value; `None` if the key is stale (removed or expired).
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        self.check(key)?;
        self.unlink(key.index);
        let entry = self.entries.remove(key.index as usize);
        if self.entries.is_empty() {
            self.on_empty();
        }
        Some(entry.value)
    }

    /// Whether `key` names a pending entry (a parked one included).
    pub(crate) fn contains(&self, key: Key) -> bool {
        self.check(key).is_some()
    }

    /// Whether `key` names a persistent entry that fired and is parked.
    pub(crate) fn is_parked(&self, key: Key) -> bool {
        self.check(key).is_some() && {
            let entry = &self.entries[key.index as usize];
            // Not an unreachable entry (see `insert_unreachable`), filed there too: one that
            // fired had its deadline reached, and an owner that files entries unreachable
            // never polls at `u64::MAX`.
            entry.bucket == PARKED && entry.persistent && entry.deadline != u64::MAX
        }
    }

    /// The deadline of a pending entry.
    #[cfg(test)]
    pub(crate) fn deadline(&self, key: Key) -> Option<u64> {
        self.check(key)?;
        Some(self.entries[key.index as usize].deadline)
    }

    /// A reference to a pending entry's value.
    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        self.check(key)?;
        Some(&self.entries[key.index as usize].value)
    }

    /// A mutable reference to a pending entry's value.
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        self.check(key)?;
        Some(&mut self.entries[key.index as usize].value)
    }

    /// Moves a pending entry to the deadline time never reaches, `u64::MAX`, beside the parked
    /// ones, as [`insert_unreachable`](Self::insert_unreachable) files it; `false` if the key
    /// is stale. (Through [`reschedule`](Self::reschedule) it would wait in a top-level
    /// bucket, whose cascades wake the owner for nothing.) A persistent entry that fired and
    /// is parked stays on that list, no longer [parked](Self::is_parked) but waiting.
    pub(crate) fn reschedule_unreachable(&mut self, key: Key) -> bool {
        if self.check(key).is_none() {
            return false;
        }
        self.filings += 1;
        self.last_filed = Some(key);
        let idx = key.index;
        if self.entries[idx as usize].bucket != PARKED {
            self.unlink(idx);
            self.parked.push_back(&mut self.entries, idx, PARKED);
            self.parked_len += 1;
        }
        self.entries[idx as usize].deadline = u64::MAX;
        true
    }

    /// Moves a pending entry to `deadline`; `false` if the key is stale. A parked entry goes
    /// back into the wheel.
    ///
    /// A deadline that is still at or after the expiration of the entry's current bucket costs
    /// no relink now: the entry is re-filed when that bucket expires. An earlier one relinks,
    /// and so does one beyond the bucket's slot on a wheel that
    /// [relinks later moves](Self::relink_later).
    pub(crate) fn reschedule(&mut self, key: Key, deadline: u64) -> bool {
        if self.check(key).is_none() {
            return false;
        }
        self.filings += 1;
        self.last_filed = Some(key);
        let idx = key.index;
        let bucket = self.entries[idx as usize].bucket;
        let stays = match bucket {
            DUE => deadline <= self.now,
            STAGED => self.stays_staged(deadline),
            IMMINENT => false,
            // An unreachable entry (see `insert_unreachable`) stays out of the buckets; one
            // that fired is filed again.
            PARKED => deadline == u64::MAX && self.entries[idx as usize].deadline == u64::MAX,
            _ => {
                // Within the bucket's own slot: re-filed when it expires, as it must be then
                // anyway. Beyond it, with `relink_later`, relinked now.
                let (level, slot) = split(bucket);
                let expiration = self.levels[level].buckets[slot].expiration;
                let width = self
                    .geo
                    .tick
                    .divisor()
                    .checked_shl(level as u32 * self.geo.shift)
                    .unwrap_or(u64::MAX);
                deadline >= expiration && (!self.relink_later || deadline - expiration < width)
            }
        };
        if stays {
            self.entries[idx as usize].deadline = deadline;
            if !matches!(bucket, DUE | IMMINENT | PARKED | STAGED) {
                // Moved within its bucket: earlier than the bucket's first deadline, perhaps,
                // and than the promised wake (see `link`).
                let (level, slot) = split(bucket);
                let b = &mut self.levels[level].buckets[slot];
                // Alone in its bucket, its deadline is the bucket's first, later or not.
                b.first = if b.list.head == b.list.tail {
                    deadline
                } else {
                    b.first.min(deadline)
                };
                if deadline < self.promise {
                    self.report(deadline);
                }
            }
        } else {
            self.unlink(idx);
            // Nothing else waits (everything else parked, or nothing else): as for an insert.
            self.first_entry = self.entries.len() - 1 == self.parked_len;
            self.unannounced |= self.first_entry;
            self.entries[idx as usize].deadline = deadline;
            self.link(idx);
        }
        true
    }

    /// The time at which [`poll`](Self::poll) next has work to hand out: the earliest first
    /// deadline of the buckets that expire before it (see `bucket_wake`) or imminent
    /// deadline, or the wheel's current time when entries are due or a bucket is being
    /// flushed (on a wheel that [orders due entries](Self::order_due), those filed at or
    /// before its time wait with the imminent ones, and the answer is the earliest of their
    /// deadlines, which may lie before the wheel's time: due at once all the same).
    /// `None` when no entry waits in the wheel (parked ones do not). A poll at
    /// that time pops every bucket expired by then, cascading what it holds, so the owner
    /// wakes once for a lone entry however high its bucket, not at its bucket's start and
    /// again at its deadline.
    ///
    /// Buckets emptied by removals are dropped from the top of the heap first, and the
    /// imminent queues' items of entries removed or moved since, so the answer never names a
    /// bucket that holds nothing, nor an imminent deadline of an entry that is gone (a
    /// bucket's first deadline, though, may be that of an entry removed or moved later since:
    /// an early wake, never a late one). Staged entries are placed first, and the answer is
    /// recorded as the owner's promised wake (see `stage.rs`): it is the owner's question,
    /// asked after a poll, to arm for the answer.
    pub(crate) fn next_expiration(&mut self) -> Option<u64> {
        let next = self.next_expiration_placed();
        // The owner now keeps a wakeup at the answer (and none without one).
        self.promise = next.unwrap_or(u64::MAX);
        next
    }

    /// [`next_expiration`](Self::next_expiration), staged entries placed first.
    fn next_expiration_placed(&mut self) -> Option<u64> {
        self.place_all_staged();
        if self.entries.len() == self.parked_len {
            return None;
        }
        if !self.due.is_empty() || self.flushing.is_some() {
            return Some(self.now);
        }
        // Every bucket now holds no deadline before the answer, so whoever keeps a wakeup no
        // later than it counts them all.
        let bucket = self.bucket_wake();
        self.unannounced = false;
        // Exactly, as for the buckets: an imminent entry removed or moved later leaves its
        // queue item behind, which must not name a time with nothing to hand out.
        let imminent = self.imminent.live_min(&self.entries);
        match (bucket, imminent) {
            (Some(b), Some(i)) => Some(b.min(i)),
            (b, i) => b.or(i),
        }
    }

    /// Hands out the next entry whose deadline is at or before `now`, in deadline order, or
    /// returns `None` once there is none, leaving the wheel's time at `now` (time never goes
    /// back). Expired higher-level buckets cascade their entries down on the way. Entries
    /// filed at or before the wheel's time come first, in the order they came, unless the
    /// wheel [orders them](Self::order_due).
    pub(crate) fn poll(&mut self, now: u64) -> Option<Expired<T>> {
        let mut unlimited = usize::MAX;
        match self.poll_within(now, &mut unlimited) {
            Step::Fired(e) => Some(e),
            Step::Done | Step::Yield => None,
        }
    }

    /// Like [`poll`](Self::poll), but spends at most `budget` units of work (one per entry
    /// handed out, per entry moved down a level, per heap item popped), returning
    /// [`Step::Yield`] when it runs out. The wheel stays consistent between calls, for other
    /// operations too.
    pub(crate) fn poll_within(&mut self, now: u64, budget: &mut usize) -> Step<T> {
        // Staged entries first, before time moves: each goes where the wheel's current time
        // puts it (never on the due list: its deadline is later than that time).
        self.place_staged(budget);
        loop {
            if *budget == 0 {
                return Step::Yield;
            }
            if self.due.head != NIL {
                *budget -= 1;
                let idx = self.due.head;
                self.due.unlink(&mut self.entries, idx);
                return Step::Fired(self.hand_out(idx));
            }
            if let Some(bucket) = self.flushing {
                self.flush_some(bucket, budget);
                continue;
            }
            // Buckets expiring at the wheel's current time go first: a level-1 bucket can tie
            // with the tick just reached and hold earlier deadlines than its imminent entries.
            if let Some((expiration, bucket)) = self.heap.pop_due(self.now) {
                *budget -= 1;
                self.start_flush(expiration, bucket);
                continue;
            }
            if self.imminent.min().is_some_and(|m| m <= now) {
                // Imminent entries all precede every bucket not yet expired (those start at a
                // later tick), so they are handed out straight from their queues.
                *budget -= 1;
                if let Some(idx) = self.imminent.pop_due(&mut self.entries, now) {
                    return Step::Fired(self.hand_out(idx));
                }
                continue;
            }
            let Some((expiration, bucket)) = self.heap.pop_due(now) else {
                self.set_now(self.now.max(now));
                self.trim_levels();
                return Step::Done;
            };
            *budget -= 1;
            self.start_flush(expiration, bucket);
        }
    }

    /// Hands out every entry whose deadline is at or before `now` (see [`poll`](Self::poll)).
    #[cfg(any(test, feature = "internals"))] // tests and `internals`
    pub(crate) fn advance(&mut self, now: u64) -> Advance<'_, T, P> {
        Advance { wheel: self, now }
    }

    fn check(&self, key: Key) -> Option<()> {
        match self.entries.get(key.index as usize) {
            Some(e) if e.generation == key.generation => Some(()),
            _ => None,
        }
    }

    fn set_now(&mut self, now: u64) {
        self.now = now;
        self.now_tick = self.geo.tick_of(now);
    }

    /// Hands out entry `idx`, already unlinked from its list: removes it, or parks it and
    /// hands out a copy of its value if it is persistent.
    fn hand_out(&mut self, idx: u32) -> Expired<T> {
        let entry = &mut self.entries[idx as usize];
        let key = Key {
            index: idx,
            generation: entry.generation,
        };
        let deadline = entry.deadline;
        let (long, timeout) = (entry.long, entry.timeout);
        if entry.persistent {
            let value = P::take(&mut entry.value);
            self.parked.push_back(&mut self.entries, idx, PARKED);
            self.parked_len += 1;
            return Expired {
                key,
                deadline,
                value,
                parked: true,
                long,
                timeout,
            };
        }
        let entry = self.entries.remove(idx as usize);
        if self.entries.is_empty() {
            self.on_empty();
        }
        Expired {
            key,
            deadline,
            value: entry.value,
            parked: false,
            long,
            timeout,
        }
    }

    /// Files entry `idx` by its deadline, relative to the wheel's current time.
    fn link(&mut self, idx: u32) {
        let deadline = self.entries[idx as usize].deadline;
        let first = std::mem::take(&mut self.first_entry);
        if deadline <= self.now && !self.ordered_due {
            self.due.push_back(&mut self.entries, idx, DUE);
            self.report(self.now);
            return;
        }
        let tick = self.geo.tick_of(deadline);
        // `<`: only with `ordered_due`, for a deadline already passed.
        if tick <= self.now_tick {
            if self.imminent.push(&mut self.entries, idx, first) {
                self.report(deadline.max(self.now));
            }
            return;
        }
        let level = self.geo.level_for(self.now_tick, tick);
        self.entries[idx as usize].long |= level > 0;
        while self.levels.len() <= level {
            self.levels.push(Level::new(1 << self.geo.shift));
        }
        let (slot, expiration) = self.geo.slot_for(tick, level);
        let id = bucket_id(level, slot);
        debug_assert_ne!(
            Some(id),
            self.flushing,
            "nothing links into a flushing bucket"
        );
        let lvl = &mut self.levels[level];
        lvl.len += 1;
        let b = &mut lvl.buckets[slot];
        let new_bucket = !(b.queued && b.expiration == expiration);
        // A bucket whose heap item survived the wheel's last empty spell is news to whoever
        // asked meanwhile, for its first entry since then (the wheel's first entry among them).
        let news = new_bucket || (self.unannounced && b.list.is_empty());
        if new_bucket {
            debug_assert!(b.list.is_empty(), "a non-empty bucket has one expiration");
            if !b.queued {
                lvl.queued += 1;
            }
            b.expiration = expiration;
            b.queued = true;
        }
        b.first = if b.list.is_empty() {
            deadline
        } else {
            b.first.min(deadline)
        };
        b.list.push_back(&mut self.entries, idx, id);
        if new_bucket {
            self.heap.push(expiration, id);
            self.stats.heap_pushes += 1;
        }
        // The owner wakes for a bucket at its first deadline (see `next_expiration`), so an
        // entry due before the promised wake needs a report even in a bucket already counted.
        if news || deadline < self.promise {
            self.report(deadline);
        }
    }

    fn unlink(&mut self, idx: u32) {
        match self.entries[idx as usize].bucket {
            DUE => self.due.unlink(&mut self.entries, idx),
            IMMINENT => self.imminent.unlink(&mut self.entries, idx),
            PARKED => {
                self.parked.unlink(&mut self.entries, idx);
                self.parked_len -= 1;
            }
            STAGED => {
                self.staged.unlink(&mut self.entries, idx);
                self.staged_len -= 1;
            }
            bucket => {
                let (level, slot) = split(bucket);
                let lvl = &mut self.levels[level];
                lvl.len -= 1;
                lvl.buckets[slot].list.unlink(&mut self.entries, idx);
            }
        }
    }

    /// The wheel just became empty. Its heap items are all stale now, but they stay: the next
    /// entry for the same bucket then needs no heap push (the RPC pattern of insert, remove,
    /// insert costs no heap operation), and they are skipped when popped. A large slab is
    /// given back.
    fn on_empty(&mut self) {
        if !self.keep_capacity && self.entries.capacity() > SHRINK_THRESHOLD {
            self.entries = Slab::new();
        }
    }
}

/// Iterator returned by [`Wheel::advance`].
#[derive(Debug)]
#[cfg(any(test, feature = "internals"))] // tests and `internals`
pub(crate) struct Advance<'a, T, P = OneShot> {
    wheel: &'a mut Wheel<T, P>,
    now: u64,
}

#[cfg(any(test, feature = "internals"))]
impl<T, P: Persistence<T>> Iterator for Advance<'_, T, P> {
    type Item = Expired<T>;

    fn next(&mut self) -> Option<Expired<T>> {
        self.wheel.poll(self.now)
    }
}
