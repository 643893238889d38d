//! The alarm: the one Tokio sleep that wakes a timer's driver at its earliest bucket.
//!
//! It is polled with the driver's own waker, not a task's: when Tokio's time driver fires it
//! (in a worker's park or maintenance, where Tokio fires its own timers), the wake runs the
//! driver's pass right there, with no task to schedule. Because it is a Tokio timer, paused
//! time and auto-advance see it. With nothing to wait for, the sleep is dropped, so an idle
//! timer costs Tokio no wakeup either.

#[cfg(not(loom))]
use std::future::Future;
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

#[cfg(not(loom))]
impl Alarm {
    /// Sets the alarm for wheel time `at` (the instant `instant`), or disarms it for
    /// `u64::MAX`, and registers `waker` to be woken when it fires. Returns whether it is
    /// already due (Tokio's clock has passed it): the caller must then make a pass itself.
    ///
    /// Tokio may wake `waker` from inside this call (re-registering an elapsed deadline fires
    /// it at once), so the waker must not need anything the caller holds.
    pub(crate) fn set(&mut self, at: u64, instant: Instant, waker: &Waker, rt: &Handle) -> bool {
        if at == u64::MAX {
            // Nothing to wait for: drop a sleep still registered (it would wake Tokio's
            // driver for nothing); keep a fired one for reuse (no allocation on the next arm).
            self.set_for = None;
            if self.sleep.as_ref().is_some_and(|s| !s.is_elapsed()) {
                self.sleep = None;
            }
            return false;
        }
        let armed = self.sleep.as_ref().is_some_and(|s| !s.is_elapsed());
        if self.set_for == Some(at) && armed {
            return false; // registered for that time, with this waker, and not fired
        }
        let sleep = match &mut self.sleep {
            Some(sleep) => {
                sleep.as_mut().reset(instant);
                sleep
            }
            None => {
                // Entered, so the sleep belongs to the timer's runtime whatever thread this is.
                let _guard = rt.enter();
                self.sleep
                    .insert(Box::pin(tokio::time::sleep_until(instant)))
            }
        };
        // Unconstrained: when the caller is a task out of coop budget, a constrained poll
        // would return Pending without registering (and wake the waker, looping).
        let mut cx = Context::from_waker(waker);
        match pin!(tokio::task::unconstrained(sleep.as_mut())).poll(&mut cx) {
            Poll::Ready(()) => {
                self.set_for = None;
                true
            }
            Poll::Pending => {
                self.set_for = Some(at);
                false
            }
        }
    }

    /// Drops the sleep (the timer shut down; the runtime may be shutting down too, after
    /// which the sleep must not be polled again).
    pub(crate) fn disarm(&mut self) {
        self.set_for = None;
        self.sleep = None;
    }

    /// The wheel time the alarm is registered for, if it is set and has not fired.
    #[cfg(test)]
    pub(crate) fn set_for(&self) -> Option<u64> {
        self.set_for
            .filter(|_| self.sleep.as_ref().is_some_and(|s| !s.is_elapsed()))
    }
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
    pub(crate) fn set(&mut self, at: u64, _: Instant, _: &Waker, _: &Handle) -> bool {
        if at == u64::MAX {
            self.set_for = None;
        } else if self.set_for != Some(at) || self.fired {
            self.set_for = Some(at);
            self.fired = false;
        }
        false
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
