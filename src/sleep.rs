//! `Sleep`, the future behind `sleep_wheel` and `sleep_wheel_until`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use futures::task::noop_waker_ref;
use tokio::time::Instant;

use crate::clock::{deadline_after_or_never, sleep_deadline};
use crate::driver::entry::{Outcome, Reset, TimerEntry};
use crate::driver::shard::Shard;
use crate::error::TimerError;
use crate::timer::Timer;

/// Waits until `duration` has elapsed, on the current runtime's default timer.
///
/// Equivalent to `sleep_wheel_until(Instant::now() + duration)`, with `duration` capped at
/// about 30 years (so `Duration::MAX` too), as in Tokio (since 1.54; an earlier Tokio caps
/// only a duration too large to add). A zero duration completes on the
/// first poll without touching the wheel. The timer fires at or after the deadline, never
/// before: in paused time exactly at it if it falls on Tokio's 1 ms grid, else at the grid's
/// next millisecond (paused time advances to where Tokio's timer wakes the driver: a
/// 1.5 ms sleep completes after 2 ms; once a sub-millisecond `advance` has left the clock off
/// the grid, Tokio steps whole milliseconds from where it stands, up to 1 ms later, as for its
/// own sleeps), and on a real clock as soon as Tokio's timer (1 ms
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
#[inline]
pub fn sleep_wheel(duration: Duration) -> Sleep {
    Sleep::after(crate::timer::default::current_shard_of_task(), duration)
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
/// sleep_wheel_until(deadline).await; // an hour of virtual time: one firing pass
/// assert!(Instant::now() >= deadline);
/// # }
/// ```
#[track_caller]
#[inline]
pub fn sleep_wheel_until(deadline: Instant) -> Sleep {
    Sleep::new(crate::timer::default::current_shard_of_task(), deadline)
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
    /// In the wheel. `moved`: a lazy reset moved `deadline` later than the entry's (which
    /// otherwise is `deadline`).
    Registered {
        moved: bool,
    },
    Elapsed,
    /// The timer shut down before the deadline.
    Shutdown,
}

/// A future that completes at a deadline, created by [`sleep_wheel`], [`sleep_wheel_until`]
/// or [`Timer::sleep`](crate::Timer::sleep).
///
/// The timer is registered on the first poll, not at creation, and removed from the wheel when
/// the `Sleep` is dropped. A `Sleep` is smaller than Tokio's and `Unpin`. Polled again by the
/// same task while it waits, it takes no lock and touches no reference count.
///
/// If the timer shuts down (see [`Timer::shutdown`](crate::Timer::shutdown)) before the
/// deadline, the `Sleep` completes early rather than never; [`is_shutdown`](Sleep::is_shutdown)
/// then returns true. A deadline reached before the shutdown counts as elapsed.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    /// The registration, and this sleep's [`State`] as its `owner` (where it costs no space).
    entry: TimerEntry<State>,
    deadline: Instant,
}

impl fmt::Debug for Sleep {
    /// Bounded and lock-free: the deadline and the state, never the timer's contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.entry.owner {
            State::Idle { .. } => "idle",
            State::Registered { .. } => "registered",
            State::Elapsed => "elapsed",
            State::Shutdown => "shutdown",
        };
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("state", &state)
            .finish()
    }
}

impl Sleep {
    /// A sleep until `deadline`, which may already have passed.
    #[inline]
    pub(crate) fn new(shard: Arc<Shard>, deadline: Instant) -> Sleep {
        Sleep {
            entry: TimerEntry::new(shard, State::Idle { check_clock: true }),
            deadline,
        }
    }

    /// A sleep of `duration` from now: a zero duration has elapsed already.
    #[inline]
    pub(crate) fn after(shard: Arc<Shard>, duration: Duration) -> Sleep {
        Sleep::after_with(shard, duration, sleep_deadline)
    }

    /// A timeout's delay of `duration` from now: as [`after`](Self::after), but a duration too
    /// large to add never elapses (Tokio's `timeout` then has no delay at all).
    #[inline]
    pub(crate) fn for_timeout(shard: Arc<Shard>, duration: Duration) -> Sleep {
        Sleep::after_with(shard, duration, deadline_after_or_never)
    }

    /// A sleep of `duration` from now, its deadline computed by `deadline`.
    #[inline(always)]
    fn after_with(
        shard: Arc<Shard>,
        duration: Duration,
        deadline: fn(Instant, Duration) -> Instant,
    ) -> Sleep {
        // A zero duration checks the clock on first poll, where it completes: until then it
        // has not elapsed (as in Tokio, `is_elapsed` answers for a polled sleep).
        let state = State::Idle {
            check_clock: duration.is_zero(),
        };
        let deadline = deadline(shard.now(), duration);
        Sleep {
            entry: TimerEntry::new(shard, state),
            deadline,
        }
    }

    /// Registers now (taking a slot of a limited timer), with a waker set on first poll; as a
    /// `Timeout`'s delay with `timeout` (see [`mark_timeout`](Self::mark_timeout)).
    pub(crate) fn new_registered(
        shard: Arc<Shard>,
        deadline: Instant,
        timeout: bool,
    ) -> Result<Sleep, TimerError> {
        if shard.is_shutdown() {
            return Err(TimerError::Shutdown);
        }
        let mut sleep = Sleep::new(shard, deadline);
        if timeout {
            sleep.mark_timeout();
        }
        sleep.entry.owner = sleep.register_now()?;
        Ok(sleep)
    }

    /// Registers for the deadline with a placeholder waker (replaced on the next poll), unless
    /// it has passed: the state to be in.
    fn register_now(&mut self) -> Result<State, TimerError> {
        // A deadline passed takes no slot: the first poll completes it, reading the clock (and
        // on a shut-down timer telling elapsed from cut short). Until then it is not elapsed,
        // as a `Sleep` not polled since made or reset never is.
        if self.deadline <= self.shard().now() {
            return Ok(State::Idle { check_clock: true });
        }
        Ok(
            match self
                .entry
                .register(self.deadline, false, noop_waker_ref())?
            {
                Outcome::Pending => State::Registered { moved: false },
                // Due by a later look at the clock or the wheel's time (the deadline passed
                // since the check above): not elapsed until polled either.
                Outcome::Due | Outcome::Moved => State::Idle { check_clock: true },
                Outcome::Shutdown => return Err(TimerError::Shutdown),
            },
        )
    }

    /// Makes this the delay of a `Timeout`: its timer is filed as a timeout, which a firing
    /// pass wakes after the other timers due with it (see `driver::Wakers`). Before it is
    /// first registered, or when [`new_registered`](Self::new_registered) made it one.
    #[inline]
    pub(crate) fn mark_timeout(&mut self) {
        self.entry.set_timeout();
    }

    /// This sleep, [marked](Self::mark_timeout) as a timeout's delay (the integrations' limits
    /// on connections and bodies, which are timeouts without a `Timeout`).
    pub(crate) fn into_timeout_delay(mut self) -> Sleep {
        self.mark_timeout();
        self
    }

    /// The shard of this `Sleep`'s timer.
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        self.entry.shard()
    }

    /// The instant at which this `Sleep` completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the `Sleep` has elapsed, as Tokio's `Sleep::is_elapsed`: it completed, or its
    /// timer fired (whether or not it has been polled since; after a [reset](Sleep::reset) to a
    /// later deadline, once the clock has reached it), or the timer shut down while it was
    /// registered. A `Sleep` not registered answers `false`, even with a deadline already
    /// passed: one never polled, or reset since it completed (on a timer with
    /// [`max_pending`](crate::Builder::max_pending), reset to a deadline already passed), or
    /// made by [`try_sleep_until`](crate::Timer::try_sleep_until) for one, on a running timer
    /// or a shut-down one alike; it is checked on its next poll. (A `Sleep` waiting in the wheel
    /// and reset to an earlier deadline already passed on a running timer completes at once, as
    /// Tokio's does: `true`. Reset to a later one, passed already but not yet reached by a
    /// firing pass, on a timer without `max_pending`, it stays filed at its old deadline and
    /// answers `false` until the pass due by then completes it, as Tokio's extends lazily; with
    /// `max_pending` it completes at once: `true`.) A poll that
    /// finds it due but the task out of its cooperative budget answers `Pending` (the task is
    /// woken to poll again), yet leaves it elapsed: `is_elapsed` is then `true`, and the next
    /// poll completes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::sleep_wheel_until;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut sleep = sleep_wheel_until(Instant::now());
    /// assert!(!sleep.is_elapsed()); // not polled yet
    /// (&mut sleep).await;
    /// assert!(sleep.is_elapsed());
    /// # }
    /// ```
    pub fn is_elapsed(&self) -> bool {
        let shard = self.shard();
        match self.entry.owner {
            State::Elapsed | State::Shutdown => true,
            State::Idle { .. } => false,
            State::Registered { moved } => {
                if self.entry.is_pending() {
                    return false;
                }
                // After a lazy reset, the entry's firing only means the old deadline came: the
                // new one counts once the clock reaches it (re-filing waits for a poll).
                shard.is_shutdown()
                    || !(moved && self.entry.filed_before(self.deadline))
                    || self.deadline <= shard.now()
            }
        }
    }

    /// Removes the timer from the wheel, if registered (the owner no longer needs it).
    #[inline]
    pub(crate) fn disarm(&mut self) {
        if let State::Registered { .. } = self.entry.owner {
            self.entry.cancel();
            self.entry.owner = State::Idle { check_clock: true };
        }
    }

    /// Whether this `Sleep` completed because its timer shut down before the deadline (not
    /// because the deadline was reached, even if it was first polled after the shutdown).
    pub fn is_shutdown(&self) -> bool {
        self.entry.owner == State::Shutdown
    }

    /// Moves the deadline, whether or not the `Sleep` has completed; it then waits again. On a
    /// timer that has shut down it does not wait: its next poll completes, as elapsed if the new
    /// deadline had passed when the timer shut down, else as cut short
    /// ([`is_shutdown`](Sleep::is_shutdown)), whatever ended it before.
    ///
    /// Moving the deadline later costs no access to the wheel: the timer stays where it is
    /// and, when it fires, wakes the task (one extra wakeup); the `Sleep`'s next poll re-files
    /// it for the new deadline. That wakeup takes the place of the waker the `Sleep` held: a
    /// task that is woken then but does not poll the `Sleep` again is not woken at the new
    /// deadline, where Tokio's (which moves its registration, waker and all) would wake it.
    /// An `.await`, `select!` or `poll_fn` polling the `Sleep` on every wake never sees this.
    /// Moving it earlier relinks the timer at once; to a deadline already passed, the next
    /// poll completes, and the task that polled it last is woken (as by Tokio's).
    ///
    /// On a timer built with [`max_pending`](crate::Builder::max_pending) the `Sleep` keeps its
    /// slot instead: a later deadline moves its entry in the wheel (O(1), one brief lock; a
    /// relink only past the time its wheel slot covers), and a `Sleep` not registered (never
    /// polled, or completed) takes a slot at once for a deadline not yet passed. If the timer
    /// is full then, the next poll panics as a new sleep's first poll would;
    /// [`try_reset`](Sleep::try_reset) returns the error instead.
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
        let _ = self.get_mut().reset_inner(deadline);
    }

    /// Like [`reset`](Sleep::reset), but on a timer built with
    /// [`max_pending`](crate::Builder::max_pending) that is full, returns
    /// [`TimerError::Full`] (and the `Sleep` stays as if reset,
    /// without a slot: its next poll tries again, and panics if the timer is still full). On a
    /// timer without a limit it never fails.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] as above. A shut-down timer is not an
    /// error: the `Sleep` completes on its next poll, as after [`reset`](Sleep::reset).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::{Timer, TimerError};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(1).build().unwrap();
    /// let mut a = Box::pin(timer.try_sleep(Duration::from_millis(10)).unwrap());
    /// (&mut a).await; // completed: its slot is free again
    /// let _b = timer.try_sleep(Duration::from_secs(3600)).unwrap(); // takes the slot
    /// let again = a.as_mut().try_reset(Instant::now() + Duration::from_secs(1));
    /// assert_eq!(again, Err(TimerError::Full { max_pending: 1 }));
    /// # }
    /// ```
    pub fn try_reset(self: Pin<&mut Self>, deadline: Instant) -> Result<(), TimerError> {
        self.get_mut().reset_inner(deadline)
    }

    fn reset_inner(&mut self, deadline: Instant) -> Result<(), TimerError> {
        let old = std::mem::replace(&mut self.deadline, deadline);
        let bounded = self.shard().is_bounded();
        match self.entry.owner {
            State::Registered { moved } => {
                // Later, without a limit: nothing to do now (one comparison, as the entry is
                // filed at or before the old deadline); re-filed when the entry fires.
                if !bounded && (deadline >= old || moved && self.entry.filed_at_or_before(deadline))
                {
                    self.entry.owner = State::Registered {
                        moved: moved || deadline > old,
                    };
                    return Ok(());
                }
                let fired = if deadline <= self.shard().now() {
                    // Wakes the task that polled last, as Tokio's does: it may not be this one.
                    self.entry.fire_now();
                    true
                } else {
                    // Due too if a pass has reached the deadline since the clock was read:
                    // then woken as above.
                    match self.entry.reschedule(deadline) {
                        Reset::Filed => {
                            self.entry.owner = State::Registered { moved: false };
                            return Ok(());
                        }
                        Reset::Due => true,
                        Reset::Gone => false,
                    }
                };
                if fired {
                    // After a shutdown the next poll tells, by the new deadline, whether it
                    // elapsed before the shutdown or was cut short (as after any other reset).
                    self.entry.owner = if self.shard().is_shutdown() {
                        State::Idle { check_clock: true }
                    } else {
                        State::Elapsed
                    };
                    return Ok(());
                }
                // Fired meanwhile (its slot went with it).
                self.entry.owner = State::Idle { check_clock: true };
                self.rearm_bounded()
            }
            // Cut short by a shutdown: the next poll finds the timer shut down and tells, by
            // the new deadline, whether it elapsed before the shutdown or was cut short.
            State::Elapsed | State::Idle { .. } | State::Shutdown => {
                self.entry.owner = State::Idle { check_clock: true };
                self.rearm_bounded()
            }
        }
    }

    /// On a bounded timer, takes a slot for an idle `Sleep` now, so a reset never turns into a
    /// panic later because the slot was taken meanwhile.
    fn rearm_bounded(&mut self) -> Result<(), TimerError> {
        if !self.shard().is_bounded() {
            return Ok(());
        }
        match self.register_now() {
            Ok(state) => {
                self.entry.owner = state;
                Ok(())
            }
            Err(TimerError::Shutdown) => Ok(()), // resolved on the next poll
            Err(e) => Err(e),
        }
    }

    /// The timer is shut down and this `Sleep` is not in the wheel: it elapsed if its deadline
    /// had been reached when the timer shut down, else the shutdown cut it short.
    fn finish_after_shutdown(&mut self) -> Poll<()> {
        self.entry.owner = if self.shard().elapsed_before_shutdown(self.deadline) {
            State::Elapsed
        } else {
            State::Shutdown
        };
        Poll::Ready(())
    }

    /// Registers (or re-registers) for `self.deadline`; `Ready` if there is nothing to wait for.
    fn register(&mut self, cx: &mut Context<'_>, check_clock: bool) -> Poll<()> {
        match self.entry.register(self.deadline, check_clock, cx.waker()) {
            Ok(Outcome::Pending) => {
                self.entry.owner = State::Registered { moved: false };
                Poll::Pending
            }
            // Due already (by the clock, or the wheel's time is past the deadline).
            Ok(Outcome::Due | Outcome::Moved) => {
                self.entry.owner = State::Elapsed;
                Poll::Ready(())
            }
            Ok(Outcome::Shutdown) => self.finish_after_shutdown(),
            Err(e) => panic!(
                "tokio-timing-wheel: {e}; use the Timer's try_* methods to handle a full timer"
            ),
        }
    }
}

impl Future for Sleep {
    type Output = ();

    /// Spends one unit of the task's cooperative budget when it completes, as Tokio's `Sleep`
    /// does: a task whose budget is spent is made to yield (`Pending`, woken when it yields,
    /// and `Ready` on the next poll), so a loop of sleeps already due cannot starve the other
    /// tasks of its worker.
    ///
    /// The budget is consulted only for that answer: a poll that answers `Pending` (it
    /// registers, or finds the sleep still waiting) would give its unit back anyway. Out of
    /// budget, Tokio's `Sleep` answers `Pending` without registering and wakes the task for a
    /// poll that will find it waiting; this one registers, or keeps waiting, without the wake.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        ready!(self.get_mut().poll_unbudgeted(cx));
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        Poll::Ready(())
    }
}

impl Sleep {
    /// Whether the sleep is registered, not yet due, and polled by the task its timer will
    /// wake (two atomic loads, no lock): then every poll answers `Pending`, budget or not.
    #[inline(always)]
    pub(crate) fn is_waiting_for(&self, waker: &Waker) -> bool {
        self.entry.waiting_for(waker)
    }

    /// Polls without the cooperative budget: `Ready` leaves the sleep elapsed or shut down,
    /// where every later poll answers `Ready` again (so the budget can still defer it).
    #[inline]
    pub(crate) fn poll_unbudgeted(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // The common re-poll first, inlined: the rest out of line.
        if self.is_waiting_for(cx.waker()) {
            return Poll::Pending;
        }
        self.poll_unbudgeted_slow(cx)
    }

    /// [`poll_unbudgeted`](Self::poll_unbudgeted) past its first check.
    fn poll_unbudgeted_slow(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.entry.owner {
            State::Elapsed | State::Shutdown => Poll::Ready(()),
            State::Idle { check_clock } => self.register(cx, check_clock),
            State::Registered { moved } => {
                let moved_to = moved.then_some(self.deadline);
                match self.entry.poll(cx.waker(), moved_to) {
                    Outcome::Pending => Poll::Pending,
                    Outcome::Shutdown => self.finish_after_shutdown(),
                    // The deadline moved later after registration: wait again.
                    Outcome::Moved => self.register(cx, true),
                    Outcome::Due => {
                        self.entry.owner = State::Elapsed;
                        Poll::Ready(())
                    }
                }
            }
        }
    }
}

/// The sleeps of a [`Timer`]; they live here, beside the future they build, so that `Timer`
/// knows nothing of the futures built on it.
impl Timer {
    /// A future that completes once `duration` has elapsed (see [`sleep_wheel`]).
    ///
    /// # Panics
    ///
    /// When polled, if the timer was built with [`max_pending`](crate::Builder::max_pending) and is
    /// full, unless the deadline has passed (a `Sleep` due needs no slot, and completes). Use
    /// [`try_sleep`](Timer::try_sleep) to get an error instead.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep::after(self.shard().clone(), duration)
    }

    /// A future that completes at `deadline` (see [`sleep_wheel_until`]).
    ///
    /// # Panics
    ///
    /// As [`sleep`](Timer::sleep).
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(self.shard().clone(), deadline)
    }

    /// Like [`sleep`](Timer::sleep), but takes the timer slot now and returns an error when
    /// the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] if the timer was built with [`max_pending`](crate::Builder::max_pending)
    /// and that many timers are pending (without a limit: if the calling thread's shard holds
    /// the most a wheel can index, about four billion); [`TimerError::Shutdown`] if the timer
    /// has been shut down, whatever the deadline. On a running timer a deadline already passed
    /// is not an error: the `Sleep` is ready on its first poll and takes no slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{Timer, TimerError};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(1).build().unwrap();
    /// let first = timer.try_sleep(Duration::from_secs(1)).unwrap();
    /// let second = timer.try_sleep(Duration::from_secs(1));
    /// assert_eq!(second.unwrap_err(), TimerError::Full { max_pending: 1 });
    /// drop(first); // frees the slot
    /// assert!(timer.try_sleep(Duration::from_secs(1)).is_ok());
    /// # }
    /// ```
    pub fn try_sleep(&self, duration: Duration) -> Result<Sleep, TimerError> {
        self.try_sleep_until(sleep_deadline(self.now(), duration))
    }

    /// Like [`sleep_until`](Timer::sleep_until), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`].
    pub fn try_sleep_until(&self, deadline: Instant) -> Result<Sleep, TimerError> {
        Sleep::new_registered(self.shard().clone(), deadline, false)
    }

    /// [`try_sleep_until`](Timer::try_sleep_until) for the delay of a `Timeout` (see
    /// [`Sleep::mark_timeout`]).
    pub(crate) fn try_timeout_delay_until(&self, deadline: Instant) -> Result<Sleep, TimerError> {
        Sleep::new_registered(self.shard().clone(), deadline, true)
    }
}
