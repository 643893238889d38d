//! The driver as the futures see it: deadlines as `tokio::time::Instant`s, read on the timer's
//! own clock, and one registration path (shut down? already due? file it) for every future.
//!
//! The futures (`Sleep`, `DelayedTask`, `Interval`, `DelayQueue`'s sleep) keep their own
//! state and call these methods on the shard they registered into; nothing outside `driver/`
//! touches the clock, the runtime or the wheel's units.

use std::task::Waker;

use tokio::runtime::Handle;
use tokio::time::Instant;

use super::shard::Shard;
use crate::error::TimerError;
use crate::wheel::Key;

impl Shard {
    /// The current instant on the clock of the timer's runtime.
    pub(crate) fn now(&self) -> Instant {
        self.driver.now()
    }

    /// Whether the timer has shut down.
    pub(crate) fn is_shutdown(&self) -> bool {
        self.driver.is_shutdown()
    }

    /// Whether the timer's runtime has shut down (not just the timer): Tokio's timer there
    /// refuses sleeps.
    pub(crate) fn runtime_gone(&self) -> bool {
        self.driver.runtime_gone()
    }

    /// Whether the timer has a `max_pending` limit.
    pub(crate) fn is_bounded(&self) -> bool {
        self.driver.is_bounded()
    }

    /// The runtime whose time driver fires this timer and onto which delayed tasks spawn.
    pub(crate) fn runtime(&self) -> &Handle {
        &self.driver.runtime
    }

    /// Whether `later` falls after `earlier` in wheel time too (deadlines are exact to the
    /// nanosecond, but saturate at the horizon): a registration for `earlier` firing does
    /// not mean `later` has come.
    pub(crate) fn later_in_wheel_time(&self, later: Instant, earlier: Instant) -> bool {
        let clock = &self.driver.clock;
        later > earlier && clock.deadline_to_units(later) > clock.deadline_to_units(earlier)
    }

    /// After shutdown: whether `deadline` had been reached when the timer shut down (so a
    /// future drained by the shutdown had in fact elapsed).
    pub(crate) fn elapsed_before_shutdown(&self, deadline: Instant) -> bool {
        let driver = &self.driver;
        driver.elapsed_before_shutdown(driver.clock.deadline_to_units(deadline))
    }

    /// Files a one-shot entry that wakes `waker()` at `deadline`: the registration of every
    /// one-shot future. `Ok(Some(key))`: pending. `Ok(None)`: due already (with
    /// `check_clock`, a deadline at or before now never reaches the wheel; without it, one
    /// the wheel's time has passed). `Err(Shutdown)`: the timer shut down; `Err(Full)`: no
    /// slot. `waker` is called only when the entry is filed.
    ///
    /// `check_clock` reads the clock first: needed when the deadline was given as an
    /// `Instant`, skipped for one computed as now + a non-zero duration (the hot path of
    /// `timeout`).
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
        self.register(driver.clock.deadline_to_units(deadline), waker())
    }

    /// Files a persistent entry (see [`Shard::register_persistent`]) for `deadline`.
    pub(crate) fn register_persistent_at(
        &self,
        deadline: Instant,
        waker: Waker,
    ) -> Result<Key, TimerError> {
        let units = self.driver.clock.deadline_to_units(deadline);
        self.register_persistent(units, waker)
    }

    /// Moves a pending entry to `deadline` (see [`Shard::reschedule`]); `false` if it fired.
    pub(crate) fn reschedule_at(&self, key: Key, deadline: Instant) -> bool {
        self.reschedule(key, self.driver.clock.deadline_to_units(deadline))
    }

    /// Files a persistent entry again for `deadline`, waking `waker` (see
    /// [`Shard::reschedule_persistent`]); `false` if a shutdown took it.
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
