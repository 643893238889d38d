//! One shard of a timer: a wheel behind its own lock. Each thread registers into "its" shard,
//! so registrations and cancellations on different workers do not contend.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;
use std::task::Waker;

use super::entry::WakerId;
use super::{panicked, wake_all, Driver, FireReport, Wakers, BATCH};
use crate::error::TimerError;
use crate::loom::{lock, try_lock, AtomicU64, AtomicUsize, Mutex, MutexGuard};
use crate::wheel::{self, Key, Persistence, Persistent, Step, Wheel};

/// A wheel of wakers behind a lock, and the driver that fires it.
///
/// Aligned to 128 bytes (two cache lines, as the adjacent-line prefetcher pairs them) so that
/// shards used by different threads never share a line: without it, one shard's wheel
/// fields, written on every registration, could sit next to the reference count and lock of the
/// shard another worker uses (measured: ~20% of the multi-task rpc-timeout profile).
#[repr(align(128))]
pub(crate) struct Shard {
    /// On lines of its own: the shard's worker writes the lock and the wheel on every
    /// registration, while other threads read the fields below (to re-poll, to hand a cancel
    /// over).
    wheel: Lines<Mutex<Locked>>,
    /// The wheel time through which firing passes have handed out (or are handing out) this
    /// shard's entries: stored, under the lock, before a pass takes its first entry, so an
    /// entry whose deadline is at or before it is due, whether or not it is still in the wheel.
    /// Lets a re-poll tell "due" from "still waiting" without the lock (see
    /// [`TimerEntry::poll`](super::entry::TimerEntry::poll)). Monotone; 0 until the first pass.
    pub(super) fired_through: AtomicU64,
    /// The wheel time through which this shard's last finished step of a pass handed out every
    /// entry: stored when the step finds nothing more due at its time, after it gave their
    /// slots back. A [`TimerEntry`](super::entry::TimerEntry)'s entry filed for a time at or
    /// before it is out of the wheel, its slot free: such an entry is never filed at or before
    /// the wheel's time (see [`handed_out`](Self::handed_out); a delayed task's may be, through
    /// [`reschedule`](Self::reschedule), and its handle cancels under the lock). Monotone; 0
    /// until the first pass.
    handed_out_through: AtomicU64,
    /// How many times the wheel's lock was taken, for the tests of which paths take none.
    #[cfg(all(test, not(loom)))]
    locks_taken: std::sync::atomic::AtomicUsize,
    /// Cancellations handed over by other threads than the shard's own, or by threads that
    /// found the wheel's lock taken.
    inbox: Inbox,
    pub(super) driver: Arc<Driver>,
    /// This shard's place among its timer's `count` shards: the threads whose futures file
    /// their entries here (see [`this_thread_shard`]) are its home; a cancel from elsewhere
    /// hands over when a pass is due soon.
    index: usize,
    count: usize,
    /// A multi-thread runtime's default timer's shard: other threads drop its futures'
    /// references in batches (see [`ShardRef`](super::shard_ref::ShardRef)).
    batches_drops: bool,
}

impl Drop for Shard {
    /// The last reference may go inside a pass (which holds one while it fires the shard, in
    /// Tokio's time driver): the entries still in the wheel (cancels handed over since the
    /// pass's sweep) hold wakers, user code, dropped here inside a catch as a pass drops them.
    fn drop(&mut self) {
        let wakers = self.lock().wheel.drain_all();
        for waker in wakers {
            if panicked(move || drop(waker)) {
                tracing::error!(
                    "a waker panicked when its timer's last reference dropped it; contained"
                );
            }
        }
    }
}

/// A cancel from another thread than the shard's hands over only if the driver is armed for
/// a pass no later than this long (in wheel time: nanoseconds) after the shard's last pass:
/// that pass, or the shard's next registration if sooner, reclaims the entry.
pub(crate) const SWEEP_WITHIN: u64 = 10_000_000;

/// Keys of one-shot entries cancelled from another thread than the shard's own while a pass
/// was due within [`SWEEP_WITHIN`] of the last, or while another thread held the wheel's lock
/// (the shard's own worker registering, or a pass): removed from the wheel by the shard's
/// next registration (before it files anything), its next pass (before it fires anything), a
/// shutdown's drain or `Timer::shrink_to_fit`, so a cancel from another worker neither waits
/// behind the shard's owner nor, on a busy timer, writes the lines it is writing. See
/// [`Shard::cancel_entry`].
///
/// On lines of its own: other threads write it, the shard's owner only reads `len` on each
/// registration. A sweep swaps `keys` with a spare buffer kept under the wheel's lock (see
/// [`Locked`]): the inbox's own lock is held for the swap alone (cancelling threads wait on
/// it). The lock and `len` share a line, so a sweep and a hand-over move one line each.
#[repr(align(128))]
struct Inbox {
    keys: Mutex<Vec<Key>>,
    /// How many keys `keys` holds: read without its lock, so a registration with nothing to
    /// sweep pays one load, and `len()` leaves handed-over entries out. Written only under
    /// `keys`' lock, with a plain store of the count, not a read-modify-write: the lock
    /// already orders the writers, and a locked instruction fewer per hand-over and per sweep
    /// took the timer's cost across workers from 121 to 111 ns per timeout (suite medians).
    len: AtomicUsize,
}

impl fmt::Debug for Shard {
    /// Bounded and lock-free: never the wheel's contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard").finish_non_exhaustive()
    }
}

impl Shard {
    /// Shard `index` of a timer's `count`.
    pub(crate) fn new(
        wheel_size: usize,
        driver: Arc<Driver>,
        index: usize,
        count: usize,
        batches_drops: bool,
    ) -> Shard {
        let mut wheel = WakerWheel::persistent(wheel_size, driver.clock.tick_units());
        // Passes poll the wheel whenever its reports and answers say (see `Wheel::stage_recent`).
        wheel.stage_recent();
        // Passes wake at its next expiration: a bucket must not wait for entries moved away.
        wheel.relink_later();
        Shard {
            wheel: Lines(Mutex::new(Locked {
                wheel,
                spare: Vec::new(),
            })),
            fired_through: AtomicU64::new(0),
            handed_out_through: AtomicU64::new(0),
            #[cfg(all(test, not(loom)))]
            locks_taken: std::sync::atomic::AtomicUsize::new(0),
            inbox: Inbox {
                keys: Mutex::new(Vec::new()),
                len: AtomicUsize::new(0),
            },
            driver,
            index,
            count,
            batches_drops,
        }
    }

    /// Whether this thread is one whose futures file their entries on this shard (it created
    /// them: see [`this_thread_shard`]).
    #[inline]
    pub(super) fn is_home(&self) -> bool {
        this_thread_shard(self.count) == self.index
    }

    /// Whether other threads drop references to this shard in batches (a multi-thread
    /// runtime's default timer's).
    #[inline]
    pub(super) fn batches_drops(&self) -> bool {
        self.batches_drops
    }

    /// The driver this shard belongs to (for `Timer`'s own operations: shutdown, metrics).
    pub(crate) fn driver(&self) -> &Arc<Driver> {
        &self.driver
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked> {
        #[cfg(all(test, not(loom)))]
        self.locks_taken.fetch_add(1, Relaxed);
        lock(&self.wheel.0)
    }

    /// [`lock`](Self::lock) if no other thread holds it.
    fn try_lock(&self) -> Option<MutexGuard<'_, Locked>> {
        #[cfg(all(test, not(loom)))]
        self.locks_taken.fetch_add(1, Relaxed);
        try_lock(&self.wheel.0)
    }

    /// Whether a one-shot entry filed for wheel time `units` has been handed out by a pass
    /// that finished (see `handed_out_through`): then it is out of the wheel and its slot is
    /// free, and its owner, which saw it due, has nothing to take out (one atomic load, where
    /// taking it out would take the lock). An entry a pass may still be handing out, or one
    /// a shutdown drains, answers `false`.
    ///
    /// Sound for the entries of a [`TimerEntry`](super::entry::TimerEntry): a registration
    /// for a deadline the wheel's time has reached is refused (the entry is due at once), and
    /// a move to such a deadline removes the entry instead ([`reschedule_entry`](Self::reschedule_entry)),
    /// both checked under the lock, so no such entry is ever filed at or before a time a
    /// finished pass has handed out. (Persistent entries, filed at any time, and delayed
    /// tasks' entries never come here; an entry past the horizon, at `u64::MAX`, answers
    /// `false`, as no pass reaches that time.)
    #[inline]
    pub(super) fn handed_out(&self, units: u64) -> bool {
        units <= self.handed_out_through.load(Acquire)
    }

    /// Files `waker` to be woken at `deadline` (wheel time); arms the driver earlier if this
    /// is the shard's earliest work. `Ok(None)` when the wheel's time has already
    /// reached `deadline` (nothing is filed; it is due now).
    pub(super) fn register(&self, deadline: u64, waker: Waker) -> Result<Option<Key>, TimerError> {
        self.register_entry(deadline, waker, false, false)
    }

    /// [`register`](Self::register), for a `Timeout`'s entry (`timeout`), which its pass
    /// wakes last (see [`Wakers`]).
    #[inline]
    pub(super) fn register_as(
        &self,
        deadline: u64,
        waker: Waker,
        timeout: bool,
    ) -> Result<Option<Key>, TimerError> {
        self.register_entry(deadline, waker, false, timeout)
    }

    /// Like [`register`](Self::register), but the entry is persistent: when it fires, its
    /// waker is woken and the entry parks, keeping its key and its `max_pending` slot, until
    /// [`reschedule_persistent`](Self::reschedule_persistent) files it again or
    /// [`cancel`](Self::cancel) removes it (see [`Wheel::insert_persistent`]). For timers that
    /// fire again and again (`Interval`). Unlike `register`, a deadline already reached is
    /// filed too (it fires on the next pass).
    ///
    /// Firing moves the waker out of the entry (a no-op waker is left behind), so the pass
    /// touches no reference count under the lock; re-filing puts a waker back.
    pub(super) fn register_persistent(
        &self,
        deadline: u64,
        waker: Waker,
    ) -> Result<Key, TimerError> {
        match self.register_entry(deadline, waker, true, false)? {
            Some(key) => Ok(key),
            None => unreachable!("persistent entries are always filed"),
        }
    }

    fn register_entry(
        &self,
        deadline: u64,
        waker: Waker,
        persistent: bool,
        timeout: bool,
    ) -> Result<Option<Key>, TimerError> {
        self.driver.reserve()?;
        let mut wheel = self.lock();
        let swept = self.sweep(&mut wheel);
        if deadline <= wheel.now() && !persistent {
            drop(wheel);
            self.driver.release(1);
            return Ok(None);
        }
        // Checked under the lock: shutdown sets the flag, then drains each shard under its
        // lock, so an entry is either refused here or drained there.
        if self.driver.is_shutdown() {
            drop(wheel);
            self.driver.release(1);
            return Err(TimerError::Shutdown);
        }
        // Past the horizon (a timeout that never elapses, an interval's tick there): time
        // never reaches it, so it waits in no bucket, where its cascades would wake the driver
        // for nothing and make a paused clock jump to the horizon. A shutdown still drains it.
        let inserted = match (persistent, deadline == u64::MAX) {
            (true, false) => wheel.insert_persistent(deadline, waker),
            (true, true) => wheel.insert_persistent_unreachable(waker),
            (false, true) => wheel.insert_unreachable(waker),
            (false, false) => wheel.insert_as(deadline, waker, timeout),
        };
        let key = match inserted {
            Ok(key) => key,
            Err(_) => {
                drop(wheel);
                self.driver.release(1);
                return Err(TimerError::Full {
                    max_pending: wheel::CAPACITY,
                });
            }
        };
        self.publish_head(wheel);
        drop(swept);
        Ok(Some(key))
    }

    /// Removes a pending entry; `None` if it already fired (or was drained by shutdown). A
    /// parked entry is removed too.
    pub(crate) fn cancel(&self, key: Key) -> Option<Waker> {
        self.remove_under(self.lock(), key)
    }

    /// [`cancel`](Self::cancel) with the lock already taken: removes `key`, releases the lock,
    /// and gives the slot back if it was pending.
    fn remove_under(&self, mut wheel: MutexGuard<'_, Locked>, key: Key) -> Option<Waker> {
        let waker = wheel.remove(key);
        drop(wheel);
        if waker.is_some() {
            self.driver.release(1);
        }
        waker
    }

    /// Cancels a one-shot entry filed for wheel time `units` (a `TimerEntry`'s): `true` if it
    /// was pending. Its key must not be used again. Never runs a pass nor wakes anything.
    ///
    /// On one of the shard's own threads (see [`this_thread_shard`]: the thread that created
    /// the future), with the wheel's lock free, the entry is removed at once. From another
    /// thread (work stealing moved the future to another worker), on a timer whose driver is
    /// armed for a pass within [`SWEEP_WITHIN`] of the shard's last one (a busy timer: passes
    /// come often), the cancel is handed over instead of taking the lock and writing the
    /// wheel lines the shard's own worker is writing: the key goes to the inbox and the slot
    /// is given back now; the inbox is swept, each entry removed and its waker dropped, by
    /// the shard's next registration or that pass, whichever comes first. On a quiet timer a
    /// cancel from another thread removes the entry itself if the lock is free, as nothing
    /// may come to reclaim it before its bucket is due. A cancel that finds the lock taken
    /// (the shard's worker registering, or a pass) hands over whatever the timer's state, and
    /// waits for the lock only if a pass running now may have reached its entry, or if the
    /// entry is past the horizon (in no bucket, see `Wheel::insert_unreachable`); on a quiet
    /// timer its memory may then wait for the pass its bucket's time brings.
    ///
    /// Why a handed-over entry can never fire: a pass stores `fired_through` before it
    /// sweeps, at each lock hold, always through the inbox's lock, which orders the sweep and
    /// this hand-over. A sweep that comes first published its time before it, so this thread
    /// reads it, and hands over only if `units` is later (that pass and every earlier one stop
    /// short of the entry); a sweep that comes later finds the key and removes the entry
    /// before its pass fires anything. A shutdown sets its flag before its drain sweeps, so a
    /// hand-over after that sweep sees the flag and takes the lock instead. Why a pass comes
    /// for a hand-over from another thread: see [`hand_over`](Self::hand_over).
    pub(crate) fn cancel_entry(&self, key: Key, units: u64) -> bool {
        if self.handed_out(units) {
            return false; // a pass took it out: nothing to do, no lock to take
        }
        if !self.is_home() && self.pass_due_soon() && self.hand_over(key, units, true) {
            return true;
        }
        if let Some(wheel) = self.try_lock() {
            return self.remove_under(wheel, key).is_some(); // the waker drops after the guard
        }
        // Past the horizon, the entry waits in no bucket: no pass of its own ever comes to
        // sweep it, and on a quiet timer no other may either.
        if units != u64::MAX && self.hand_over(key, units, false) {
            return true;
        }
        // The entry may be due in a pass running now: wait for the lock, as a cancel did.
        self.cancel(key).is_some()
    }

    /// Hands the cancel of `key` (filed for `units`) over to the inbox if no pass can have
    /// reached it and the timer is not shut down, and, with `pass_due`, only if the driver is
    /// armed for a pass within [`SWEEP_WITHIN`] of the shard's last (then its slot is given
    /// back): whether it did. See [`cancel_entry`](Self::cancel_entry).
    ///
    /// Why, with `pass_due`, a pass comes by then for this key: the armed time is read under
    /// the inbox's lock, after the shard's `fired_through`. A pass sets the armed time to
    /// "none" before it sweeps the shard (through this lock) and only then arms for its next
    /// time; so a hand-over after that sweep reads "none", or a time armed since (the pass's
    /// next, or an earlier one a registration asked for), at which a pass will come, and one
    /// before that sweep is swept by it.
    pub(super) fn hand_over(&self, key: Key, units: u64, pass_due: bool) -> bool {
        let mut keys = lock(&self.inbox.keys);
        let fired = self.fired_through.load(Acquire);
        if units <= fired || self.driver.is_shutdown() {
            return false;
        }
        if pass_due && !self.pass_due_after(fired) {
            return false;
        }
        keys.push(key);
        self.inbox.len.store(keys.len(), Release);
        drop(keys);
        self.driver.release(1);
        true
    }

    /// Whether the driver looks armed for a pass within [`SWEEP_WITHIN`] of the shard's last
    /// (a lock-free first look: [`hand_over`](Self::hand_over) decides under the inbox's lock).
    #[inline]
    fn pass_due_soon(&self) -> bool {
        self.pass_due_after(self.fired_through.load(Relaxed))
    }

    /// Whether the driver is armed for a pass within [`SWEEP_WITHIN`] of wheel time `fired`.
    #[inline]
    fn pass_due_after(&self, fired: u64) -> bool {
        self.driver.armed_by(fired.saturating_add(SWEEP_WITHIN))
    }

    /// Removes the entries whose cancels were handed over (see
    /// [`cancel_entry`](Self::cancel_entry)), under the wheel's lock: their wakers, to be
    /// dropped after it (a waker's drop is user code). Nothing, without a lock, if the inbox
    /// looks empty: for a registration, which only reclaims memory, a key handed over at this
    /// very moment can wait for the next sweep. A pass or a drain, which must never fire a
    /// handed-over entry, calls [`sweep_inbox`](Self::sweep_inbox), which takes the lock.
    #[inline]
    fn sweep(&self, wheel: &mut Locked) -> Option<Swept> {
        if self.inbox.len.load(Acquire) == 0 {
            return None;
        }
        Some(self.sweep_inbox(wheel))
    }

    /// [`sweep`](Self::sweep), always through the inbox's lock.
    fn sweep_inbox(&self, locked: &mut Locked) -> Swept {
        // Swapped out, so cancelling threads wait on the inbox's lock for the swap only, and
        // both buffers keep their capacity up to `INBOX_KEPT` keys (a new one each time would
        // be allocated by a cancelling thread and freed here). Each key was handed over by its
        // entry's owner, which gave the entry up: nothing else removes it before this (a pass
        // cannot reach it, see `cancel_entry`).
        let Locked { wheel, spare: keys } = locked;
        {
            let mut inbox = lock(&self.inbox.keys);
            std::mem::swap(&mut *inbox, keys);
            debug_assert!(inbox.is_empty(), "the spare buffer was drained");
            self.inbox.len.store(0, Release);
        }
        let mut swept = Swept::default();
        for waker in keys.drain(..).filter_map(|key| wheel.remove(key)) {
            swept.push(waker);
        }
        if keys.capacity() > INBOX_KEPT {
            keys.shrink_to(INBOX_KEPT); // after a burst: the next one grows it again
        }
        swept
    }

    /// Whether `key` is still pending; if so, swaps a clone of `waker` in for the waker the
    /// entry holds, and returns the clone's identity. For an owner that polls with another
    /// waker than the one the entry holds (its [`WakerId`] told it so without the lock), so
    /// the lock is taken once, to swap; if the entry fired meanwhile, the clone is dropped.
    ///
    /// A waker's clone and drop are user code: they run outside the lock (a waker whose drop
    /// touched this timer would otherwise deadlock).
    pub(crate) fn refresh(&self, key: Key, waker: &Waker) -> Option<WakerId> {
        let new = waker.clone();
        let id = WakerId::of(&new);
        let old = match self.lock().get_mut(key) {
            None => return None, // fired meanwhile; `new` is dropped after the guard
            Some(w) => std::mem::replace(w, new),
        };
        drop(old);
        Some(id)
    }

    /// For a persistent entry: `Some(true)` if it fired and is parked, `Some(false)` if it
    /// still waits (then `waker` is the one that will be woken), `None` if it is gone (removed,
    /// or drained by shutdown).
    pub(crate) fn poll_persistent(&self, key: Key, waker: &Waker) -> Option<bool> {
        {
            let mut wheel = self.lock();
            if wheel.is_parked(key) {
                return Some(true);
            }
            match wheel.get_mut(key) {
                None => return None,
                Some(w) if w.will_wake(waker) => return Some(false),
                Some(_) => {}
            }
        }
        // The clone and the drop of the old waker run outside the lock (user code); the
        // state is checked again under it, as the entry may have fired meanwhile.
        let new = waker.clone();
        let mut wheel = self.lock();
        if wheel.is_parked(key) {
            drop(wheel);
            return Some(true);
        }
        let old = std::mem::replace(wheel.get_mut(key)?, new);
        drop(wheel);
        drop(old);
        Some(false)
    }

    /// Files a persistent entry (parked or waiting) for `deadline`, to wake `waker`: `false` if
    /// it is gone (drained by shutdown). The waker is cloned, and the one it replaces dropped,
    /// outside the lock.
    pub(super) fn reschedule_persistent(&self, key: Key, deadline: u64, waker: &Waker) -> bool {
        let new = waker.clone();
        let mut wheel = self.lock();
        if !refile(&mut wheel, key, deadline) {
            return false; // `new` is dropped after the guard
        }
        let old = wheel.get_mut(key).map(|w| std::mem::replace(w, new));
        self.publish_head(wheel);
        drop(old);
        true
    }

    /// Moves a one-shot entry (a [`TimerEntry`](super::entry::TimerEntry)'s) to `deadline`,
    /// unless the wheel's time has reached it: then, as a registration for that deadline would
    /// be, it is due now, and is removed, its slot given back and its waker returned (to
    /// wake). Checked under the lock, so no such entry is ever filed at or before a time a
    /// pass has handed out (a pass may have run since its owner read the clock): see
    /// [`handed_out`](Self::handed_out).
    pub(super) fn reschedule_entry(&self, key: Key, deadline: u64) -> Rescheduled {
        let mut wheel = self.lock();
        if deadline <= wheel.now() {
            return match self.remove_under(wheel, key) {
                Some(waker) => Rescheduled::Due(waker),
                None => Rescheduled::Gone,
            };
        }
        if !refile(&mut wheel, key, deadline) {
            return Rescheduled::Gone;
        }
        self.publish_head(wheel);
        Rescheduled::Filed
    }

    /// Moves a pending entry to a new deadline; `false` if it is no longer pending. The
    /// deadline may be at or before the wheel's time (the entry is then due on the next pass):
    /// never for a [`TimerEntry`](super::entry::TimerEntry)'s key, whose owner may skip the
    /// lock on the strength of a finished pass (see [`reschedule_entry`](Self::reschedule_entry)).
    pub(super) fn reschedule(&self, key: Key, deadline: u64) -> bool {
        let mut wheel = self.lock();
        if !refile(&mut wheel, key, deadline) {
            return false;
        }
        self.publish_head(wheel);
        true
    }

    /// After an insert or reschedule: if it made new work (a new bucket, a due entry...),
    /// tells the driver when that work needs a wake (the alarm moves only if that is earlier
    /// than planned).
    #[inline(always)]
    fn publish_head(&self, mut wheel: MutexGuard<'_, Locked>) {
        match wheel.take_new_head() {
            None => drop(wheel), // the common case: nothing new to wake for
            Some(head) => self.arm_for(wheel, head),
        }
    }

    /// [`publish_head`](Self::publish_head) with a new head: the driver is armed before the
    /// lock is released, so a registration that finds this one's report in the wheel (and
    /// stages after it) finds the driver armed for it too.
    #[inline(never)]
    fn arm_for(&self, wheel: MutexGuard<'_, Locked>, head: u64) {
        let runner = self.driver.on_new_head(head);
        drop(wheel);
        if runner {
            self.driver.run();
        }
    }

    /// The shard's step of a firing pass: hands out everything due at `now`, a bounded batch
    /// per lock hold (waking each batch after releasing the lock, short timers and timeouts
    /// aside: see [`Wakers`]), and adds what it did to `fired`, setting `fired.next` to the
    /// shard's next expiration.
    pub(crate) fn fire_due(&self, now: u64, wakers: &mut Wakers, fired: &mut FireReport) {
        // Entries past the horizon (`u64::MAX`) are never handed out: a pass at that time
        // would count them as handed out (see `handed_out_through`).
        debug_assert!(now < u64::MAX, "a pass at the horizon");
        loop {
            let mut wheel = self.lock();
            // Published before any entry due at `now` leaves the wheel (see `fired_through`).
            // Only the runner passes, and its `now` never goes back: a plain store under the
            // lock keeps the value monotone.
            if now > self.fired_through.load(Relaxed) {
                self.fired_through.store(now, Release);
            }
            // After the store, and through the inbox's lock, which orders this sweep against
            // every hand-over: see `cancel_entry`.
            let swept = self.sweep_inbox(&mut wheel);
            let cascades_before = wheel.stats().cascades;
            let mut budget = BATCH;
            let mut slots = 0;
            let more = loop {
                match wheel.poll_within(now, &mut budget) {
                    Step::Fired(e) => {
                        // A parked (persistent) entry keeps its slot.
                        slots += usize::from(!e.parked);
                        fired.lateness.record(e.deadline, now);
                        fired.entries += 1;
                        wakers.push(e.value, e.long, e.timeout);
                    }
                    Step::Done => break false,
                    Step::Yield => break true,
                }
            };
            fired.cascades += wheel.stats().cascades - cascades_before;
            if !more {
                fired.next = wheel.next_expiration();
                // Cascades linked new buckets: the pass arms for them itself.
                wheel.take_new_head();
                #[cfg(debug_assertions)]
                if wheel.len() <= 4096 {
                    wheel.assert_invariants();
                }
            }
            drop(wheel);
            drop(swept);
            self.driver.release(slots);
            if !more {
                // Every entry due at `now` is out, and its slot given back (see
                // `handed_out_through`). Only the runner passes, and its `now` never goes
                // back: a plain store keeps the value monotone.
                if now > self.handed_out_through.load(Relaxed) {
                    self.handed_out_through.store(now, Release);
                }
            }
            wake_all(&mut wakers.now);
            if !more {
                return;
            }
        }
    }

    /// Removes every entry (shutdown), returning the wakers, and gives the memory back.
    /// Handed-over cancels are swept first: those entries are not woken.
    pub(crate) fn drain(&self) -> Vec<Waker> {
        let mut wheel = self.lock();
        // Through the inbox's lock, after the shutdown flag was set: see `cancel_entry`.
        let swept = self.sweep_inbox(&mut wheel);
        let wakers = wheel.drain_all();
        self.shrink_under(&mut wheel);
        drop(wheel);
        drop(swept);
        wakers
    }

    /// Sweeps the inbox, then gives back the memory the wheel and both inbox buffers hold
    /// beyond what they use (see [`Timer::shrink_to_fit`](crate::Timer::shrink_to_fit)).
    pub(crate) fn shrink_to_fit(&self) {
        let mut wheel = self.lock();
        let swept = self.sweep_inbox(&mut wheel);
        self.shrink_under(&mut wheel);
        drop(wheel);
        drop(swept);
    }

    /// Under the wheel's lock (`locked`): gives back the memory the wheel and both inbox
    /// buffers hold beyond what they use.
    fn shrink_under(&self, locked: &mut Locked) {
        locked.wheel.shrink_to_fit();
        locked.spare.shrink_to_fit();
        lock(&self.inbox.keys).shrink_to_fit();
    }

    /// This shard's index, and how many its timer has.
    #[cfg(all(test, not(loom)))]
    pub(super) fn place(&self) -> (usize, usize) {
        (self.index, self.count)
    }

    /// How many times the wheel's lock has been taken.
    #[cfg(all(test, not(loom)))]
    pub(super) fn locks_taken(&self) -> usize {
        self.locks_taken.load(Relaxed)
    }

    /// The capacities of the inbox's buffer and of the sweep's spare one.
    #[cfg(all(test, not(loom)))]
    pub(super) fn inbox_capacity(&self) -> (usize, usize) {
        let spare = self.lock().spare.capacity();
        (lock(&self.inbox.keys).capacity(), spare)
    }

    /// Pending entries: those in the wheel, less those whose cancel was handed over.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending_in(&self.lock())
    }

    /// `len` (the pending entries), with the wheel's lock held by the caller.
    pub(crate) fn pending_in(&self, wheel: &WakerWheel) -> usize {
        // Under the wheel's lock no sweep runs, and a handed-over key stays in the wheel until
        // one does: every key counted here is one of the wheel's entries.
        let handed_over = self.inbox.len.load(Acquire);
        debug_assert!(
            handed_over <= wheel.len(),
            "handed-over keys outside the wheel"
        );
        wheel.len().saturating_sub(handed_over)
    }

    /// Whether `key` is still pending.
    pub(crate) fn contains(&self, key: Key) -> bool {
        self.lock().contains(key)
    }
}

/// What [`Shard::reschedule_entry`] did.
pub(crate) enum Rescheduled {
    /// Filed for the new deadline.
    Filed,
    /// The wheel's time had reached the new deadline: removed (its slot given back), its
    /// waker handed back.
    Due(Waker),
    /// No longer pending (it fired, or a shutdown took it).
    Gone,
}

/// How a fired persistent entry (an `Interval`'s) hands out its waker: moved out, a no-op
/// left in its place, so the pass touches no reference count under the lock.
#[derive(Debug)]
pub(crate) enum TakeWaker {}

impl Persistence<Waker> for TakeWaker {
    fn take(w: &mut Waker) -> Waker {
        std::mem::replace(w, futures::task::noop_waker())
    }
}

impl Persistent<Waker> for TakeWaker {}

/// The keys an inbox buffer keeps room for between sweeps (a burst of more gives the rest
/// back once swept).
pub(super) const INBOX_KEPT: usize = 1024;

/// The wakers of entries a sweep removed, to be dropped after the wheel's lock (a waker's drop
/// is user code). A sweep at a registration usually finds a key or two, handed over since the
/// shard's previous registration: those stay inline, so sweeping allocates nothing.
#[derive(Default)]
pub(crate) struct Swept {
    few: [Option<Waker>; 4],
    more: Vec<Waker>,
}

impl Swept {
    fn push(&mut self, waker: Waker) {
        match self.few.iter_mut().find(|w| w.is_none()) {
            Some(slot) => *slot = Some(waker),
            None => self.more.push(waker),
        }
    }
}

impl Drop for Swept {
    /// Drops each waker inside a catch: a waker's drop is user code, and a pass that sweeps
    /// runs inside Tokio's time driver, where a panic must not unwind (as with a wake, see
    /// `wake_all`).
    fn drop(&mut self) {
        let wakers = self.few.iter_mut().filter_map(Option::take);
        for waker in wakers.chain(self.more.drain(..)) {
            if panicked(move || drop(waker)) {
                tracing::error!(
                    "a waker panicked when the timer dropped it (its timer was cancelled); \
                     the timer carries on"
                );
            }
        }
    }
}

/// A value on cache lines of its own (128 bytes: the adjacent-line prefetcher pairs lines).
#[repr(align(128))]
struct Lines<T>(T);

/// A shard's wheel: wakers, persistent ones handed out by [`TakeWaker`].
type WakerWheel = Wheel<Waker, TakeWaker>;

/// What the wheel's lock guards: the wheel, and the buffer a sweep swaps with the inbox's
/// (touched only under this lock, so it needs no lock of its own; up to `INBOX_KEPT` keys,
/// neither buffer is reallocated from one burst to the next). Derefs to the wheel.
pub(crate) struct Locked {
    wheel: WakerWheel,
    spare: Vec<Key>,
}

impl std::ops::Deref for Locked {
    type Target = WakerWheel;

    #[inline]
    fn deref(&self) -> &WakerWheel {
        &self.wheel
    }
}

impl std::ops::DerefMut for Locked {
    #[inline]
    fn deref_mut(&mut self) -> &mut WakerWheel {
        &mut self.wheel
    }
}

thread_local! {
    /// This thread's shard number (modulo each timer's shard count), handed out round-robin.
    static SHARD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_SHARD_INDEX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The shard index this thread uses, out of `n` shards.
pub(crate) fn this_thread_shard(n: usize) -> usize {
    let idx = SHARD_INDEX.with(|c| {
        let mut i = c.get();
        if i == usize::MAX {
            i = NEXT_SHARD_INDEX.fetch_add(1, SeqCst);
            c.set(i);
        }
        i
    });
    // A power of two (the default) takes a mask, not a division. (`n & (n - 1)` rather than
    // `is_power_of_two`, which is a software population count on baseline x86-64; `n >= 1`.)
    if n & (n - 1) == 0 {
        idx & (n - 1)
    } else {
        idx % n
    }
}

/// Moves pending entry `key` of `wheel` to `deadline`, past the horizon in no bucket (as
/// `Shard::register_entry` files it); `false` if it is no longer pending.
fn refile(wheel: &mut WakerWheel, key: Key, deadline: u64) -> bool {
    if deadline == u64::MAX {
        wheel.reschedule_unreachable(key)
    } else {
        wheel.reschedule(key, deadline)
    }
}
