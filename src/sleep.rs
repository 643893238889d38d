//! `Sleep`, the future behind `sleep_wheel` and `sleep_wheel_until`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::noop_waker;
use tokio::time::Instant;

use crate::driver::clock::deadline_after;
use crate::driver::shard::{Common, Shard};
use crate::error::TimerError;
use crate::loom::Arc;
use crate::wheel::Key;

/// Waits until `duration` has elapsed, on the current runtime's default timer.
///
/// Equivalent to `sleep_wheel_until(Instant::now() + duration)`; a `duration` too large to add
/// (such as `Duration::MAX`) means about 30 years, as in Tokio. A zero duration completes on the
/// first poll without touching the wheel. The timer fires at or after the deadline, never
/// before: exactly at it in paused time, and on a real clock as soon as Tokio's timer (1 ms
/// resolution) wakes the driver, plus scheduling delay.
///
/// The first poll reads no clock (that is most of a registration's cost): if it comes only
/// after the deadline has passed, the `Sleep` completes on the driver's next pass, moments
/// later, rather than on that poll. [`sleep_wheel_until`] checks the clock on first poll.
///
/// # Cancellation
///
/// Dropping the returned [`Sleep`] removes its timer from the wheel at once (O(1)).
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::sleep_wheel;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = tokio::time::Instant::now();
/// sleep_wheel(Duration::from_millis(100)).await;
/// assert!(start.elapsed() >= Duration::from_millis(100));
/// # }
/// ```
#[track_caller]
pub fn sleep_wheel(duration: Duration) -> Sleep {
    Sleep::after(crate::driver::registry::current_shard(), duration)
}

/// Waits until `deadline`, on the current runtime's default timer.
///
/// A deadline at or before now completes on the first poll.
///
/// # Cancellation
///
/// Dropping the returned [`Sleep`] removes its timer from the wheel at once.
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::sleep_wheel_until;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Instant::now() + Duration::from_secs(3600);
/// sleep_wheel_until(deadline).await; // an hour of virtual time: a handful of wakeups
/// assert!(Instant::now() >= deadline);
/// # }
/// ```
#[track_caller]
pub fn sleep_wheel_until(deadline: Instant) -> Sleep {
    Sleep::new(crate::driver::registry::current_shard(), deadline)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not in the wheel (never polled, or fired before a reset to a later deadline).
    /// `check_clock`: compare the deadline with the clock before registering. Needed when the
    /// deadline was given as an `Instant` (it may already have passed); a deadline computed as
    /// now + a non-zero duration skips the clock read (the hot path of `timeout`).
    Idle {
        check_clock: bool,
    },
    /// In the wheel for deadline `at` (earlier than `deadline` after a lazy reset).
    Registered {
        key: Key,
        at: Instant,
    },
    Elapsed,
    /// The timer shut down before the deadline.
    Shutdown,
}

/// A future that completes at a deadline, created by [`sleep_wheel`], [`sleep_wheel_until`]
/// or [`Timer::sleep`](crate::Timer::sleep).
///
/// The timer is registered on the first poll, not at creation, and removed from the wheel when
/// the `Sleep` is dropped. A `Sleep` is much smaller than Tokio's (see the README) and `Unpin`.
///
/// If the timer shuts down (see [`Timer::shutdown`](crate::Timer::shutdown)) while the `Sleep`
/// is pending, it completes early rather than never; [`is_shutdown`](Sleep::is_shutdown) then
/// returns true.
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Sleep {
    /// `None` only inside `drop`, so the driver is notified after this reference is gone.
    shard: Option<Arc<Shard>>,
    deadline: Instant,
    state: State,
}

impl Sleep {
    /// A sleep until `deadline`, which may already have passed.
    pub(crate) fn new(shard: Arc<Shard>, deadline: Instant) -> Sleep {
        Sleep::with_state(shard, deadline, State::Idle { check_clock: true })
    }

    /// A sleep of `duration` from now: a zero duration has elapsed already.
    pub(crate) fn after(shard: Arc<Shard>, duration: Duration) -> Sleep {
        let state = if duration.is_zero() {
            State::Elapsed
        } else {
            State::Idle { check_clock: false }
        };
        Sleep::with_state(shard, deadline_after(duration), state)
    }

    fn with_state(shard: Arc<Shard>, deadline: Instant, state: State) -> Sleep {
        let state = if shard.common.is_shutdown() {
            State::Shutdown
        } else {
            state
        };
        Sleep {
            shard: Some(shard),
            deadline,
            state,
        }
    }

    fn shard(&self) -> &Arc<Shard> {
        self.shard
            .as_ref()
            .expect("a Sleep has its shard until dropped")
    }

    /// Registers now (taking a slot of a limited timer), with a waker set on first poll.
    pub(crate) fn new_registered(
        shard: Arc<Shard>,
        deadline: Instant,
    ) -> Result<Sleep, TimerError> {
        if shard.common.is_shutdown() {
            return Err(TimerError::Shutdown);
        }
        let mut sleep = Sleep::new(shard, deadline);
        sleep.state = State::Elapsed;
        if deadline > Instant::now() {
            let at = sleep.shard().common.clock.deadline_to_units(deadline);
            if let Some(key) = sleep.shard().register(at, noop_waker())? {
                sleep.state = State::Registered { key, at: deadline };
            }
        }
        Ok(sleep)
    }

    /// The instant at which this `Sleep` completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached: the timer fired (whether or not this `Sleep` has
    /// been polled since), or the timer shut down.
    pub fn is_elapsed(&self) -> bool {
        let shard = self.shard();
        match self.state {
            State::Elapsed | State::Shutdown => true,
            State::Idle { .. } => shard.common.is_shutdown() || self.deadline <= Instant::now(),
            State::Registered { key, at } => {
                !shard.contains(key) && (shard.common.is_shutdown() || !self.moved_later(at))
            }
        }
    }

    /// Whether the deadline was moved past the wheel time of the registration for `at` (a lazy
    /// reset), so that registration firing does not complete this `Sleep`.
    fn moved_later(&self, at: Instant) -> bool {
        let clock = &self.shard().common.clock;
        self.deadline > at && clock.deadline_to_units(self.deadline) > clock.deadline_to_units(at)
    }

    /// Removes the timer from the wheel, if registered (the owner no longer needs it).
    pub(crate) fn disarm(&mut self) {
        if let State::Registered { key, .. } = self.state {
            self.shard().cancel(key);
            self.state = State::Idle { check_clock: true };
        }
    }

    /// Whether this `Sleep` completed because its timer shut down, not because the deadline
    /// was reached.
    pub fn is_shutdown(&self) -> bool {
        self.state == State::Shutdown
    }

    /// Moves the deadline, whether or not the `Sleep` has completed; it then waits again.
    ///
    /// Moving the deadline later costs no access to the wheel: the timer stays where it is
    /// and, when it fires, is re-filed for the new deadline (one extra wakeup of the task).
    /// Moving it earlier relinks the timer at once; to a deadline already passed, the next
    /// poll completes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::sleep_wheel;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut idle = Box::pin(sleep_wheel(Duration::from_secs(30)));
    /// // Activity: push the idle deadline back.
    /// idle.as_mut().reset(Instant::now() + Duration::from_secs(60));
    /// idle.await;
    /// assert!(start.elapsed() >= Duration::from_secs(60));
    /// # }
    /// ```
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.deadline = deadline;
        match this.state {
            // Later: nothing to do now (one comparison); re-filed when the entry fires.
            State::Registered { at, .. } if deadline >= at => {}
            State::Registered { key, .. } => {
                let shard = this.shard();
                if deadline <= Instant::now() {
                    shard.cancel(key);
                    this.state = State::Elapsed;
                } else if shard.reschedule(key, shard.common.clock.deadline_to_units(deadline)) {
                    this.state = State::Registered { key, at: deadline };
                } else {
                    this.state = State::Idle { check_clock: true };
                }
            }
            State::Elapsed | State::Idle { .. } => this.state = State::Idle { check_clock: true },
            State::Shutdown => {}
        }
    }

    /// Registers (or re-registers) for `self.deadline`; `Ready` if there is nothing to wait for.
    fn register(&mut self, cx: &mut Context<'_>, check_clock: bool) -> Poll<()> {
        if check_clock && self.deadline <= Instant::now() {
            self.state = State::Elapsed;
            return Poll::Ready(());
        }
        let at = self.shard().common.clock.deadline_to_units(self.deadline);
        match self.shard().register(at, cx.waker().clone()) {
            Ok(Some(key)) => {
                self.state = State::Registered {
                    key,
                    at: self.deadline,
                };
                Poll::Pending
            }
            // The wheel's time is already past the deadline.
            Ok(None) => {
                self.state = State::Elapsed;
                Poll::Ready(())
            }
            Err(TimerError::Shutdown) => {
                self.state = State::Shutdown;
                Poll::Ready(())
            }
            Err(e @ TimerError::Full { .. }) => panic!(
                "tokio-timing-wheel: {e}; use the Timer's try_* methods to handle a full timer"
            ),
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        match this.state {
            State::Elapsed | State::Shutdown => Poll::Ready(()),
            State::Idle { check_clock } => this.register(cx, check_clock),
            State::Registered { key, at } => {
                let shard = this.shard();
                if shard.refresh(key, cx.waker()) {
                    return Poll::Pending;
                }
                // Fired (or drained by shutdown).
                if shard.common.is_shutdown() {
                    this.state = State::Shutdown;
                    return Poll::Ready(());
                }
                if this.moved_later(at) {
                    // The deadline moved later after registration: wait again.
                    return this.register(cx, true);
                }
                this.state = State::Elapsed;
                Poll::Ready(())
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        let Some(shard) = self.shard.take() else {
            return;
        };
        if let State::Registered { key, .. } = self.state {
            shard.cancel(key);
        }
        Common::release_shard(shard);
    }
}
