//! The driver as the futures see it: deadlines as `tokio::time::Instant`s, read on the timer's
//! own clock, one registration path (shut down? already due? file it) for every future, and
//! [`TimerEntry`], the registered state a one-shot future embeds.
//!
//! Nothing outside `driver/` touches the clock, the runtime or the wheel's units.

use std::fmt;
use std::sync::atomic::Ordering::Acquire;
use std::sync::Arc;
use std::task::{RawWakerVTable, Waker};

use tokio::runtime::Handle;
use tokio::time::Instant;

use super::shard::{Rescheduled, Shard};
use super::shard_ref::ShardRef;
use crate::error::TimerError;
use crate::wheel::Key;

/// What a waker is, as [`Waker::will_wake`] compares it: its data pointer and its vtable.
///
/// Kept by a registered [`TimerEntry`] for the waker its wheel entry holds, so that a re-poll
/// with the same waker needs neither the shard's lock nor a reference count. Only compared,
/// never turned back into a pointer.
#[derive(Clone, Copy)]
pub(crate) struct WakerId {
    data: usize,
    vtable: &'static RawWakerVTable,
}

impl WakerId {
    pub(crate) fn of(waker: &Waker) -> WakerId {
        WakerId {
            data: waker.data() as usize,
            vtable: waker.vtable(),
        }
    }

    /// Whether `waker` is the waker this identity was taken from (`will_wake`'s test).
    fn is(&self, waker: &Waker) -> bool {
        self.data == waker.data() as usize && std::ptr::eq(self.vtable, waker.vtable())
    }
}

impl fmt::Debug for WakerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WakerId").finish_non_exhaustive()
    }
}

/// What [`TimerEntry::reschedule`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// Filed for the new deadline.
    Filed,
    /// The new deadline had been reached: taken out, and its waker woken.
    Due,
    /// It was no longer pending.
    Gone,
}

/// Where a registration stands, as its owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// In the wheel, not due yet; the last waker polled with will be woken.
    Pending,
    /// The deadline has been reached (the entry fired, or it was already due when filed). The
    /// entry is out of the wheel and its slot is free.
    Due,
    /// The timer shut down: the entry was drained (or refused) and its slot is free.
    Shutdown,
    /// The entry fired, but the owner's deadline had moved later (a lazy reset): it is out of
    /// the wheel, to be registered again.
    Moved,
}

/// One registration in a shard's wheel, as Tokio's `TimerEntry`: the state a one-shot future
/// embeds (its shard; once registered, its key, the wheel time of the deadline filed, and the
/// identity of the waker the wheel holds), with registration, re-poll, reschedule, and
/// cancellation on drop. `Sleep` embeds one (and so do `Timeout`, the hyper timer's sleeps,
/// `IdleTimeout` and `DelayQueue`'s wakeup, through it). `Interval` keeps a persistent entry
/// that parks when it fires, and already re-polls without a lock by comparing its task's waker
/// with a clone it keeps; a `DelayedTask`'s entry is never re-polled, and its handle must not
/// cancel on drop: both keep their keys.
///
/// A re-poll that finds the entry not yet due and the waker unchanged takes no lock and
/// touches no reference count (see [`poll`](Self::poll)).
///
/// The registration is stored field by field rather than as an `Option<Registered>`, whose
/// key leaves four bytes of padding inside it: flat, the fields leave room at the end for the
/// owner's own state (`owner`, a `Sleep`'s state: two bytes), which would otherwise take a
/// word of its own. A `Sleep` is 64 bytes this way, 72 the other.
pub(crate) struct TimerEntry<S = ()> {
    shard: ShardRef,
    /// The waker the wheel entry holds (it may have moved out of the wheel if it fired), as
    /// its two words: `waker_vtable` is `None` when not registered, and then `waker_data` and
    /// the fields below mean nothing (they keep stale values). Two fields rather than an
    /// `Option<WakerId>`, whose `None` leaves the data word undefined: a new entry is then
    /// built in a temporary and copied with loads that straddle the stores just made, a failed
    /// store-to-load forward on every `timeout` (43% of the samples in `timeout`'s own code).
    /// With every word defined it is written in place.
    waker_data: usize,
    waker_vtable: Option<&'static RawWakerVTable>,
    /// The key's generation and index.
    generation: u64,
    index: u32,
    /// The wheel time of the deadline filed.
    units: u64,
    /// A `Timeout`'s entry: filed as one, for its pass to wake it last (see `Wakers`).
    timeout: bool,
    /// The owning future's own state.
    pub(crate) owner: S,
}

/// A registration, as [`TimerEntry`] stores it in its fields.
#[derive(Debug, Clone, Copy)]
struct Registered {
    key: Key,
    /// The wheel time of the deadline filed.
    units: u64,
    /// The waker the wheel entry holds (it may have moved out of the wheel if it fired).
    waker: WakerId,
}

impl<S> fmt::Debug for TimerEntry<S> {
    /// Bounded and lock-free: never the wheel's contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerEntry")
            .field("registered", &self.waker_vtable.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> TimerEntry<S> {
    /// An entry of `shard`, not registered, its owner's state `owner`.
    #[inline]
    pub(crate) fn new(shard: Arc<Shard>, owner: S) -> TimerEntry<S> {
        TimerEntry {
            shard: ShardRef::from(shard),
            waker_data: 0,
            waker_vtable: None,
            generation: 0,
            index: 0,
            units: 0,
            timeout: false,
            owner,
        }
    }

    /// Marks the entry as a `Timeout`'s: every registration from now on is filed as one (see
    /// `Wakers`). Before the first registration (or on one marked already).
    #[inline]
    pub(crate) fn set_timeout(&mut self) {
        debug_assert!(
            self.timeout || self.waker_vtable.is_none(),
            "marked as a timeout after registering as a sleep"
        );
        self.timeout = true;
    }

    /// The identity of the waker the wheel entry holds, if registered.
    #[inline(always)]
    fn waker(&self) -> Option<WakerId> {
        self.waker_vtable.map(|vtable| WakerId {
            data: self.waker_data,
            vtable,
        })
    }

    /// Records `id` as the waker's identity (`None`: not registered).
    #[inline(always)]
    fn set_waker(&mut self, id: Option<WakerId>) {
        match id {
            Some(id) => {
                self.waker_data = id.data;
                self.waker_vtable = Some(id.vtable);
            }
            None => self.waker_vtable = None,
        }
    }

    /// The registration, if any.
    #[inline]
    fn registered(&self) -> Option<Registered> {
        self.waker().map(|waker| Registered {
            key: Key {
                index: self.index,
                generation: self.generation,
            },
            units: self.units,
            waker,
        })
    }

    /// Records `reg` as the registration.
    #[inline]
    fn set_registered(&mut self, reg: Registered) {
        self.set_waker(Some(reg.waker));
        self.generation = reg.key.generation;
        self.index = reg.key.index;
        self.units = reg.units;
    }

    /// The registration, which the entry no longer has.
    #[inline]
    fn take_registered(&mut self) -> Option<Registered> {
        let reg = self.registered();
        self.set_waker(None);
        reg
    }

    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// Whether `deadline` is later, in wheel time, than the deadline the entry is filed for
    /// (so its firing does not mean `deadline` has come). `false` if not registered.
    pub(crate) fn filed_before(&self, deadline: Instant) -> bool {
        self.registered()
            .is_some_and(|r| self.shard.driver.clock.deadline_to_units(deadline) > r.units)
    }

    /// Whether `deadline` is at or after, in wheel time, the deadline the entry is filed for.
    /// `false` if not registered.
    pub(crate) fn filed_at_or_before(&self, deadline: Instant) -> bool {
        self.registered()
            .is_some_and(|r| self.shard.driver.clock.deadline_to_units(deadline) >= r.units)
    }

    /// Files the entry for `deadline`, to wake `waker` (a clone of it): `Pending` if filed,
    /// `Due` if the deadline has been reached already (with `check_clock`, by the clock; else
    /// by the wheel's time), `Shutdown` if the timer shut down. The entry must not be
    /// registered already.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] when no slot is free.
    // Always: on the path of every timeout, and since the shard reference became a
    // `ShardRef` the compiler stopped inlining it into `Sleep::register` (24 more
    // instructions per timeout, callgrind).
    #[inline(always)]
    pub(crate) fn register(
        &mut self,
        deadline: Instant,
        check_clock: bool,
        waker: &Waker,
    ) -> Result<Outcome, TimerError> {
        debug_assert!(self.waker_vtable.is_none(), "registered twice");
        let driver = &self.shard.driver;
        if driver.is_shutdown() {
            return Ok(Outcome::Shutdown);
        }
        if check_clock && deadline <= driver.now() {
            return Ok(Outcome::Due);
        }
        let units = driver.clock.deadline_to_units(deadline);
        let waker = waker.clone();
        let id = WakerId::of(&waker);
        match self.shard.register_as(units, waker, self.timeout) {
            Ok(Some(key)) => {
                self.set_registered(Registered {
                    key,
                    units,
                    waker: id,
                });
                Ok(Outcome::Pending)
            }
            Ok(None) => Ok(Outcome::Due),
            Err(TimerError::Shutdown) => Ok(Outcome::Shutdown),
            // Full: a deadline already passed needs no slot. A deadline computed as now + a
            // duration was not checked against the clock; it is here, on this rare path only.
            Err(TimerError::Full { .. }) if !check_clock && deadline <= driver.now() => {
                Ok(Outcome::Due)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the entry is registered, not yet due, and `waker` is the one the wheel will wake:
    /// the common re-poll, answered from two atomic loads with no lock (see
    /// [`poll`](Self::poll), which answers `Pending` without its lock exactly then, and why
    /// that loses no wakeup). A caller may act on it before doing other work (a timeout polls
    /// its future first): if the entry fires meanwhile, the pass wakes `waker`, and the next
    /// poll sees it.
    #[inline(always)]
    pub(crate) fn waiting_for(&self, waker: &Waker) -> bool {
        self.waker()
            .is_some_and(|id| self.not_due(self.units) && id.is(waker))
    }

    /// Whether an entry filed for wheel time `units` is still in the wheel, waiting: no pass
    /// has fired through `units` and the timer is not shut down (two atomic loads).
    #[inline(always)]
    fn not_due(&self, units: u64) -> bool {
        units > self.shard.fired_through.load(Acquire) && !self.shard.driver.is_shutdown()
    }

    /// Polls a registered entry with `waker`: `Pending` (and `waker` is the one that will be
    /// woken), `Due`, or `Shutdown` (then the entry is no longer registered). Not registered:
    /// `Due`. With `moved_to` (the owner's deadline after a lazy reset to a later one), an
    /// entry that fired for an earlier wheel time answers `Moved`: register again.
    ///
    /// The common re-poll, not due and the same waker, reads two atomics and takes no lock.
    #[inline]
    pub(crate) fn poll(&mut self, waker: &Waker, moved_to: Option<Instant>) -> Outcome {
        let Some(reg) = self.registered() else {
            return Outcome::Due;
        };
        // Why this is sound (no lost wakeup, never ready early, no identity reused):
        // - `fired_through` is stored (Release, under the shard's lock) before a pass takes
        //   any entry due at it out of the wheel, and only the entry's own owner (this
        //   `TimerEntry`, through `&mut self`) ever replaces its waker or removes it otherwise,
        //   except a shutdown, which sets its flag before draining. So while `units` is after
        //   the value read here and no shutdown is seen, the wheel either still holds the
        //   waker identified by `reg.waker`, or a pass (or the shutdown) took it after the
        //   values read here were published and will wake it after that.
        // - `reg.waker.is(waker)` is `will_wake` against that waker: waking it wakes the task
        //   polling now, and a wake makes the task poll again after it, when the (Acquire)
        //   loads see the pass's store (or the shutdown flag) and answer `Due`
        //   (`Shutdown`). So `Pending` never loses the wakeup.
        // - The identity cannot be a recycled one: the waker it was taken from is owned by
        //   the wheel entry until a pass or a shutdown moves it out to wake and drop it, and
        //   only after publishing `fired_through`/the flag. A different waker can get the same
        //   data pointer only once that memory is freed and reallocated, which the allocator
        //   orders after the free, after the publication: a poll with such a waker reads the
        //   new `fired_through` (or the flag) and does not take the fast path.
        // - `Due` only when a pass's time, read from the clock, reached `units`: never early.
        let waiting = self.not_due(reg.units);
        if waiting && reg.waker.is(waker) {
            return Outcome::Pending;
        }
        self.poll_locked(waiting, waker, moved_to)
    }

    /// The rest of [`poll`](Self::poll), under the shard's lock: a new waker to swap in while
    /// `waiting`, else the entry to take out.
    #[cold]
    #[inline(never)]
    fn poll_locked(&mut self, waiting: bool, waker: &Waker, moved_to: Option<Instant>) -> Outcome {
        let Some(reg) = self.registered() else {
            return Outcome::Due;
        };
        if waiting {
            // Another task (or a waker that clones differently): swap it in under the lock.
            if let Some(id) = self.shard.refresh(reg.key, waker) {
                self.set_waker(Some(id));
                return Outcome::Pending;
            }
        }
        // Due or shut down: take the entry out if the pass has not yet (a bounded batch
        // may leave it for the next lock hold), which gives its slot back.
        let moved = moved_to.is_some_and(|d| self.filed_before(d));
        let Some(reg) = self.take_registered() else {
            return Outcome::Due;
        };
        // A finished pass took it out already (the common case): no lock to take.
        if !self.shard.handed_out(reg.units) {
            self.shard.cancel(reg.key);
        }
        if self.shard.driver.is_shutdown() {
            Outcome::Shutdown
        } else if moved {
            Outcome::Moved
        } else {
            Outcome::Due
        }
    }

    /// Moves a registered entry to `deadline` in place (the waker is kept): `Filed`; `Due` if
    /// the timer's time has reached `deadline` (a pass may have run since the caller read the
    /// clock): then the entry is taken out and the waker it held woken, as
    /// [`fire_now`](Self::fire_now) does; `Gone` if it was not pending (it fired, or a
    /// shutdown took it). Unless `Filed`, it is no longer registered.
    pub(crate) fn reschedule(&mut self, deadline: Instant) -> Reset {
        let Some(reg) = self.registered() else {
            return Reset::Gone;
        };
        let units = self.shard.driver.clock.deadline_to_units(deadline);
        match self.shard.reschedule_entry(reg.key, units) {
            Rescheduled::Filed => {
                self.units = units;
                Reset::Filed
            }
            Rescheduled::Due(waker) => {
                self.set_waker(None);
                waker.wake();
                Reset::Due
            }
            Rescheduled::Gone => {
                self.set_waker(None);
                Reset::Gone
            }
        }
    }

    /// Removes the entry from the wheel, if registered, and wakes the waker it held if it was
    /// still pending, as if it had fired now (Tokio's reset to a deadline already passed does
    /// the same: the task that polled last may not be the one resetting). Takes the lock.
    pub(crate) fn fire_now(&mut self) {
        if let Some(reg) = self.take_registered() {
            if let Some(waker) = self.shard.cancel(reg.key) {
                waker.wake();
            }
        }
    }

    /// Removes the entry from the wheel, if registered: whether it was still pending.
    #[inline]
    pub(crate) fn cancel(&mut self) -> bool {
        match self.take_registered() {
            Some(reg) => self.shard.cancel_entry(reg.key, reg.units),
            None => false,
        }
    }

    /// Files the entry for wheel time `units` (the models work in wheel time).
    #[cfg(test)]
    pub(crate) fn register_units(&mut self, units: u64, waker: &Waker) {
        let waker = waker.clone();
        let id = WakerId::of(&waker);
        let key = self.shard.register(units, waker).unwrap().expect("not due");
        self.set_registered(Registered {
            key,
            units,
            waker: id,
        });
    }

    /// Whether the entry is registered and still in the wheel (takes the lock).
    pub(crate) fn is_pending(&self) -> bool {
        self.registered()
            .is_some_and(|reg| self.shard.contains(reg.key))
    }
}

impl<S> Drop for TimerEntry<S> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl Shard {
    /// The current instant on the clock of the timer's runtime.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        self.driver.now()
    }

    /// The current instant on the clock of the timer's runtime while it lives, and once it is
    /// gone on the current runtime's, where what falls back on Tokio's timer then waits (see
    /// `fallback`): for an owner that may wait there (`Interval`).
    #[inline]
    pub(crate) fn now_where_waiting(&self) -> Instant {
        self.driver.now_where_waiting()
    }

    /// Whether the timer has shut down.
    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.driver.is_shutdown()
    }

    /// Whether the timer's runtime has shut down (not just the timer): Tokio's timer there
    /// refuses sleeps.
    #[inline]
    pub(crate) fn runtime_gone(&self) -> bool {
        self.driver.runtime_gone()
    }

    /// Whether the timer has a `max_pending` limit.
    #[inline]
    pub(crate) fn is_bounded(&self) -> bool {
        self.driver.is_bounded()
    }

    /// The runtime whose time driver fires this timer and onto which delayed tasks spawn.
    #[inline]
    pub(crate) fn runtime(&self) -> &Handle {
        &self.driver.runtime
    }

    /// After shutdown: whether `deadline` had been reached when the timer shut down (so a
    /// future drained by the shutdown had in fact elapsed).
    #[inline]
    pub(crate) fn elapsed_before_shutdown(&self, deadline: Instant) -> bool {
        let driver = &self.driver;
        driver.elapsed_before_shutdown(driver.clock.deadline_to_units(deadline))
    }

    /// Files a one-shot entry that wakes `waker()` at `deadline`: the registration of a
    /// delayed task (futures register through [`TimerEntry::register`]). `Ok(Some(key))`:
    /// pending. `Ok(None)`: due already (with `check_clock`, a deadline at or before now
    /// never reaches the wheel; without it, one the wheel's time has passed, or, on a full
    /// timer, the clock). `Err(Shutdown)`: the timer shut down; `Err(Full)`: no slot (without
    /// `check_clock`, only for a deadline still ahead). `waker` is called before the entry is
    /// filed, and the waker dropped if it is not.
    ///
    /// `check_clock` reads the clock first: needed when the deadline was given as an
    /// `Instant`, skipped for one computed as now + a non-zero duration.
    #[inline]
    pub(crate) fn register_at(
        &self,
        deadline: Instant,
        check_clock: bool,
        waker: impl FnOnce() -> Waker,
    ) -> Result<Option<Key>, TimerError> {
        let driver = &self.driver;
        if driver.is_shutdown() {
            return Err(TimerError::Shutdown);
        }
        if check_clock && deadline <= driver.now() {
            return Ok(None);
        }
        match self.register(driver.clock.deadline_to_units(deadline), waker()) {
            // Full: a deadline already passed needs no slot (as for a future's registration:
            // a deadline computed as now + a duration is checked against the clock here, on
            // this rare path only).
            Err(TimerError::Full { .. }) if !check_clock && deadline <= driver.now() => Ok(None),
            filed => filed,
        }
    }

    /// Files a persistent entry (see [`Shard::register_persistent`]) for `deadline`.
    #[inline]
    pub(crate) fn register_persistent_at(
        &self,
        deadline: Instant,
        waker: Waker,
    ) -> Result<Key, TimerError> {
        let units = self.driver.clock.deadline_to_units(deadline);
        self.register_persistent(units, waker)
    }

    /// Files a persistent entry (see [`Shard::register_persistent`]) that waits for nothing
    /// yet: past the horizon, in no bucket, holding its key and its `max_pending` slot until
    /// it is filed for a deadline or cancelled.
    pub(crate) fn register_persistent_unreachable(&self, waker: Waker) -> Result<Key, TimerError> {
        self.register_persistent(u64::MAX, waker)
    }

    /// Moves a persistent entry (parked or waiting) past the horizon, where it waits for
    /// nothing and keeps its slot; `false` if a shutdown took it.
    pub(crate) fn park_persistent(&self, key: Key, waker: &Waker) -> bool {
        self.reschedule_persistent(key, u64::MAX, waker)
    }

    /// Moves a pending entry to `deadline` (see [`Shard::reschedule`]); `false` if it fired.
    #[inline]
    pub(crate) fn reschedule_at(&self, key: Key, deadline: Instant) -> bool {
        self.reschedule(key, self.driver.clock.deadline_to_units(deadline))
    }

    /// Files a persistent entry again for `deadline`, waking `waker` (see
    /// [`Shard::reschedule_persistent`]); `false` if a shutdown took it.
    #[inline]
    pub(crate) fn reschedule_persistent_at(
        &self,
        key: Key,
        deadline: Instant,
        waker: &Waker,
    ) -> bool {
        let units = self.driver.clock.deadline_to_units(deadline);
        self.reschedule_persistent(key, units, waker)
    }
}
