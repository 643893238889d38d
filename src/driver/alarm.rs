//! The alarm: the one Tokio sleep that wakes a timer's driver for its earliest work.
//!
//! It is polled with the driver's own waker, not a task's: when Tokio's time driver fires it
//! (in a worker's park or maintenance, where Tokio fires its own timers), the wake runs the
//! driver's pass right there, with no task to schedule. Because it is a Tokio timer, paused
//! time and auto-advance see it. With nothing to wait for, the sleep is dropped, so an idle
//! timer costs Tokio no wakeup either.

#[cfg(not(loom))]
use std::future::Future;
#[cfg(not(loom))]
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(not(loom))]
use std::pin::{pin, Pin};
use std::task::Waker;
#[cfg(not(loom))]
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::time::Instant;

/// The driver's Tokio sleep and the wheel time it is set for.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Alarm {
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The wheel time the sleep was last set for (it may have fired since: a racing
    /// registration can leave the driver armed for a time a pass already handled).
    set_for: Option<u64>,
}

/// What setting the alarm found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(loom, allow(dead_code))] // the loom stand-in is never refused
pub(crate) enum Set {
    /// Armed (or disarmed, for `u64::MAX`): Tokio will wake the driver when it is due.
    Waiting,
    /// Already due (Tokio's clock has passed it): the caller must make a pass itself.
    Due,
    /// Tokio panicked instead of arming it: its runtime is shutting down (Tokio's unstable
    /// alt timer fires and refuses timers before the runtime drops its tasks). The panic was
    /// contained; the caller must shut the timer down (and log it, after the alarm's lock: a
    /// tracing subscriber is user code).
    Refused,
    /// Not set: a new sleep must be made inside the runtime's context, and this thread's is
    /// already destroyed (its thread-locals are being dropped as it exits). The caller must
    /// have it set from the runtime (a task there that wakes the driver).
    NoContext,
}

#[cfg(not(loom))]
impl Alarm {
    /// Sets the alarm for wheel time `at` (the instant `instant`), or disarms it for
    /// `u64::MAX`, and registers `waker` to be woken when it fires. `due`: the caller knows
    /// `at` has passed and wants its pass now, not when Tokio fires the sleep.
    ///
    /// Tokio may wake `waker` from inside this call (re-registering an elapsed deadline fires
    /// it at once), so the waker must not need anything the caller holds.
    pub(crate) fn set(
        &mut self,
        at: u64,
        instant: Instant,
        due: bool,
        waker: &Waker,
        rt: &Handle,
    ) -> Set {
        if at == u64::MAX {
            // Nothing to wait for: drop a sleep still registered (it would wake Tokio's
            // driver for nothing); keep a fired one for reuse (no allocation on the next arm).
            self.set_for = None;
            if self.sleep.as_ref().is_some_and(|s| !s.is_elapsed()) {
                return self.drop_sleep();
            }
            return Set::Waiting;
        }
        let armed = self.sleep.as_ref().is_some_and(|s| !s.is_elapsed());
        if self.set_for == Some(at) && armed {
            // Registered for that time, with this waker, and not fired. Due all the same (work
            // filed already due while the pass made for the same wheel time ran): Tokio fires
            // it only at its next millisecond, so the caller passes now, as below.
            return if due { Set::Due } else { Set::Waiting };
        }
        if self.sleep.is_none() && no_context_here() {
            // Entering the runtime would panic (and be taken for a refusal below).
            return Set::NoContext;
        }
        let slot = &mut self.sleep;
        // Tokio's sleep is its code, not ours: it panics when its runtime refuses timers.
        let poll = catch_unwind(AssertUnwindSafe(|| {
            let sleep = match slot {
                Some(sleep) => {
                    sleep.as_mut().reset(instant);
                    sleep
                }
                None => {
                    // Entered, so the sleep belongs to the timer's runtime whatever the thread.
                    let _guard = rt.enter();
                    slot.insert(Box::pin(tokio::time::sleep_until(instant)))
                }
            };
            // Unconstrained: when the caller is a task out of coop budget, a constrained poll
            // would return Pending without registering (and wake the waker, looping).
            let mut cx = Context::from_waker(waker);
            pin!(tokio::task::unconstrained(sleep.as_mut())).poll(&mut cx)
        }));
        match poll {
            Ok(Poll::Ready(())) => {
                self.set_for = None;
                Set::Due
            }
            // Tokio rounds a sleep up to its next millisecond: a passed instant in the current
            // one waits for the next (see `Driver::rearm`). The sleep stays set: if the pass
            // leaves the same time armed, the next set waits on it.
            Ok(Poll::Pending) if due => {
                self.set_for = Some(at);
                Set::Due
            }
            Ok(Poll::Pending) => {
                self.set_for = Some(at);
                Set::Waiting
            }
            Err(_) => {
                self.refused();
                Set::Refused
            }
        }
    }

    /// Drops the sleep (the timer shut down; the runtime may be shutting down too, after
    /// which the sleep must not be polled again).
    pub(crate) fn disarm(&mut self) {
        let _ = self.drop_sleep();
    }

    /// Drops the sleep, containing a panic of Tokio's.
    fn drop_sleep(&mut self) -> Set {
        self.set_for = None;
        let sleep = self.sleep.take();
        if catch_unwind(AssertUnwindSafe(move || drop(sleep))).is_err() {
            Set::Refused
        } else {
            Set::Waiting
        }
    }

    /// Tokio panicked in the middle of using the sleep: it is leaked, not dropped (Tokio may
    /// still hold it in its wheel, and dropping it could panic again).
    fn refused(&mut self) {
        self.set_for = None;
        if let Some(sleep) = self.sleep.take() {
            std::mem::forget(sleep);
        }
    }

    /// The wheel time the alarm is registered for, if it is set and has not fired.
    #[cfg(test)]
    pub(crate) fn set_for(&self) -> Option<u64> {
        self.set_for
            .filter(|_| self.sleep.as_ref().is_some_and(|s| !s.is_elapsed()))
    }
}

/// Whether this thread's Tokio context is destroyed (its thread-locals are being dropped as
/// it exits), so that no runtime can be entered here.
pub(super) fn no_context_here() -> bool {
    matches!(Handle::try_current(), Err(e) if e.is_thread_local_destroyed())
}

/// Under loom the alarm only records the time it is set for: the models drive "Tokio fires the
/// sleep" by calling the driver's wake themselves, and check what the protocol armed for.
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Alarm {
    set_for: Option<u64>,
    /// The model fired it (as Tokio would once its time came).
    fired: bool,
}

#[cfg(loom)]
impl Alarm {
    pub(crate) fn set(&mut self, at: u64, _: Instant, due: bool, _: &Waker, _: &Handle) -> Set {
        if at == u64::MAX {
            self.set_for = None;
        } else {
            if self.set_for != Some(at) || self.fired {
                self.set_for = Some(at);
                self.fired = false;
            }
            if due {
                return Set::Due; // as the real alarm: the caller passes at once
            }
        }
        Set::Waiting
    }

    pub(crate) fn disarm(&mut self) {
        self.set_for = None;
    }

    /// The time it is set for, if set and not fired.
    #[cfg(test)]
    pub(crate) fn set_for(&self) -> Option<u64> {
        self.set_for.filter(|_| !self.fired)
    }

    /// Fires it (the model playing Tokio's time driver).
    #[cfg(test)]
    pub(crate) fn fire(&mut self) {
        self.fired = true;
    }
}
