//! `Interval`: periodic ticks on one wheel entry, filed again in place at every tick.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use tokio::time::Instant;

use crate::clock::deadline_after;
use crate::driver::shard::Shard;
use crate::error::TimerError;
use crate::fallback::TokioSleep;
use crate::timer::Timer;
use crate::wheel::Key;

/// How late a tick may be polled before it counts as missed (Tokio's rule).
const MISSED_AFTER: Duration = Duration::from_millis(5);

/// The longest period (about 30 years, as Tokio caps it); longer ones are clamped.
const MAX_PERIOD: Duration = crate::clock::MAX_DELAY;

/// Creates an [`Interval`] that ticks every `period` on the current runtime's default timer;
/// the first tick completes at once.
///
/// Equivalent to [`interval_at(Instant::now(), period)`](interval_at); a drop-in replacement
/// for `tokio::time::interval` (see [`Interval`] for what differs). The default
/// [`MissedTickBehavior`] is [`Burst`](MissedTickBehavior::Burst).
///
/// # Panics
///
/// If `period` is zero, outside a Tokio runtime, or if the runtime has no time driver
/// (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::interval;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let mut heartbeat = interval(Duration::from_millis(10));
/// assert_eq!(heartbeat.tick().await, start); // the first tick is immediate
/// assert_eq!(heartbeat.tick().await, start + Duration::from_millis(10));
/// assert_eq!(heartbeat.tick().await, start + Duration::from_millis(20));
/// # }
/// ```
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    check_period(period);
    let shard = crate::timer::default::current_shard_of_task();
    let start = shard.now_where_waiting();
    Interval::new(shard, start, period)
}

/// Creates an [`Interval`] that ticks every `period` on the current runtime's default timer,
/// the first tick completing at `start`.
///
/// A drop-in replacement for `tokio::time::interval_at`. A `start` in the past makes the
/// first tick complete at once (and, with the default [`Burst`](MissedTickBehavior::Burst),
/// the ticks missed since then follow at once too).
///
/// # Panics
///
/// If `period` is zero, outside a Tokio runtime, or if the runtime has no time driver
/// (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::interval_at;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now() + Duration::from_millis(50);
/// let mut ticks = interval_at(start, Duration::from_millis(10));
/// assert_eq!(ticks.tick().await, start); // after 50 ms
/// assert_eq!(ticks.tick().await, start + Duration::from_millis(10));
/// assert_eq!(Instant::now(), start + Duration::from_millis(10)); // never early, not late
/// # }
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    check_period(period);
    Interval::new(
        crate::timer::default::current_shard_of_task(),
        start,
        period,
    )
}

impl Timer {
    /// Creates an [`Interval`] on this timer that ticks every `period`, the first tick at once
    /// (see [`interval`](fn@crate::interval)).
    ///
    /// # Panics
    ///
    /// If `period` is zero. When polled, if the timer was built with
    /// [`max_pending`](crate::Builder::max_pending) and is full (an interval holds one slot
    /// for its whole life once it has had to wait); [`try_interval`](Timer::try_interval)
    /// takes the slot at once, or returns the error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build().unwrap();
    /// let mut every_second = timer.interval(Duration::from_secs(1));
    /// every_second.tick().await;
    /// every_second.tick().await; // one second later
    /// assert_eq!(timer.pending(), 1, "one wheel entry for the interval's whole life");
    /// # }
    /// ```
    #[track_caller]
    pub fn interval(&self, period: Duration) -> Interval {
        check_period(period);
        Interval::new(
            self.shard().clone(),
            self.shard().now_where_waiting(),
            period,
        )
    }

    /// Creates an [`Interval`] on this timer that ticks every `period`, the first tick at
    /// `start` (see [`interval_at`]).
    ///
    /// # Panics
    ///
    /// As [`Timer::interval`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().build().unwrap();
    /// let start = Instant::now() + Duration::from_secs(5);
    /// let mut ticks = timer.interval_at(start, Duration::from_secs(1));
    /// assert_eq!(ticks.tick().await, start);
    /// # }
    /// ```
    #[track_caller]
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        check_period(period);
        Interval::new(self.shard().clone(), start, period)
    }

    /// Like [`interval`](Timer::interval), but takes the interval's one timer slot now and
    /// returns an error when the timer is full or shut down: on a timer built with
    /// [`max_pending`](crate::Builder::max_pending) the interval then never panics for want of
    /// a slot, as it holds its slot for its whole life. Its entry is in the wheel from then
    /// on, as a [`try_sleep`](Timer::try_sleep)'s is: in paused time, an idle runtime's clock
    /// advances to its next tick even before it is first polled.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] if the timer has `max_pending` timers pending;
    /// [`TimerError::Shutdown`] if it has shut down.
    ///
    /// # Panics
    ///
    /// If `period` is zero.
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
    /// let mut heartbeat = timer.try_interval(Duration::from_secs(1)).unwrap();
    /// assert_eq!(timer.pending(), 1, "its slot, taken at once");
    /// let full = timer.try_interval(Duration::from_secs(1));
    /// assert_eq!(full.unwrap_err(), TimerError::Full { max_pending: 1 });
    /// heartbeat.tick().await;
    /// heartbeat.tick().await; // one second later, in the same slot
    /// # }
    /// ```
    #[track_caller]
    pub fn try_interval(&self, period: Duration) -> Result<Interval, TimerError> {
        let start = self.shard().now_where_waiting();
        self.try_interval_at(start, period)
    }

    /// Like [`interval_at`](Timer::interval_at), but takes the interval's one timer slot now
    /// and returns an error when the timer is full or shut down (see
    /// [`try_interval`](Timer::try_interval)).
    ///
    /// # Errors
    ///
    /// As [`try_interval`](Timer::try_interval).
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(8).build().unwrap();
    /// let start = Instant::now() + Duration::from_secs(5);
    /// let mut ticks = timer.try_interval_at(start, Duration::from_secs(1)).unwrap();
    /// assert_eq!(ticks.tick().await, start);
    /// # }
    /// ```
    #[track_caller]
    pub fn try_interval_at(
        &self,
        start: Instant,
        period: Duration,
    ) -> Result<Interval, TimerError> {
        check_period(period);
        let mut interval = Interval::new(self.shard().clone(), start, period);
        interval.file_now()?;
        Ok(interval)
    }
}

#[track_caller]
fn check_period(period: Duration) {
    assert!(
        !period.is_zero(),
        "tokio-timing-wheel: an interval's `period` must be non-zero."
    );
}

/// What an [`Interval`] does when a tick is missed: polled more than 5 ms after its
/// scheduled instant (Tokio's rule, kept so that switching changes nothing).
///
/// A tick is missed when too much time passes without [`Interval::tick`] being called (the
/// loop body took longer than the period, or the task was starved). Within 5 ms of its
/// instant a tick is not missed: the next one is scheduled one period after it, as usual.
/// The default is [`Burst`](MissedTickBehavior::Burst), as in Tokio.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::{interval, MissedTickBehavior};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let mut ticks = interval(Duration::from_millis(50));
/// ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
/// ticks.tick().await;
/// tokio::time::sleep(Duration::from_millis(75)).await; // misses the tick at 50 ms
/// assert_eq!(ticks.tick().await, start + Duration::from_millis(50)); // late, at once
/// // The next multiple of the period after now (with Delay: 75 + 50 = 125 ms).
/// assert_eq!(ticks.tick().await, start + Duration::from_millis(100));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MissedTickBehavior {
    /// Ticks as fast as possible until caught up: the ticks keep their schedule (multiples
    /// of the period from the start) and the missed ones complete at once, one per call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(50)); // Burst is the default
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(200)).await;
    /// for n in 1..=4 {
    ///     // 50, 100, 150 and 200 ms: each at once, 200 ms after the start.
    ///     assert_eq!(ticks.tick().await, start + Duration::from_millis(50 * n));
    /// }
    /// assert_eq!(Instant::now(), start + Duration::from_millis(200));
    /// # }
    /// ```
    #[default]
    Burst,
    /// Ticks at once for the missed tick, then one period after that late tick: the
    /// schedule shifts, and ticks are never closer than one period.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::{interval, MissedTickBehavior};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(50));
    /// ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(60)).await;
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(50)); // at 60 ms
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(110)); // 60 + 50
    /// # }
    /// ```
    Delay,
    /// Ticks at once for the missed tick, then skips the others: the next tick is the next
    /// multiple of the period (from the start) after now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::{interval, MissedTickBehavior};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(50));
    /// ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(130)).await;
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(50)); // at 130 ms
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(150)); // 100 is skipped
    /// # }
    /// ```
    Skip,
}

impl MissedTickBehavior {
    /// The instant of the tick after `tick`, which was polled (too late) at `now`.
    fn next_after_missed(self, tick: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => deadline_after(tick, period),
            MissedTickBehavior::Delay => deadline_after(now, period),
            MissedTickBehavior::Skip => {
                let late = now.saturating_duration_since(tick).as_nanos();
                // Less than the period, which is at most 30 years: fits in u64 nanoseconds.
                let into_period = (late % period.as_nanos()) as u64;
                deadline_after(now, period - Duration::from_nanos(into_period))
            }
        }
    }
}

/// How an [`Interval`] waits for its next tick.
#[derive(Debug)]
enum Wait {
    /// Not in the wheel: no poll has had to wait yet.
    Unregistered,
    /// The interval's one wheel entry. `current`: filed for `Interval::next`; false after a
    /// tick, until the next poll files it again (in place, with the same key).
    Filed { key: Key, current: bool },
    /// The timer shut down: Tokio's timer stands in (see [`Interval`], "Shutdown").
    Tokio(TokioSleep),
}

/// Ticks at a fixed period, created by [`interval`], [`interval_at`], [`Timer::interval`]
/// and [`Timer::interval_at`]: the wheel's drop-in replacement for `tokio::time::Interval`.
///
/// Await [`tick`](Interval::tick) in a loop, poll [`poll_tick`](Interval::poll_tick), or use
/// the interval directly as a [`Stream`] of tick instants, never ending (and a
/// `FusedStream`): where Tokio's code wraps its interval in tokio-stream's `IntervalStream`,
/// drop the wrapper (`IntervalStream::new` takes Tokio's `Interval` only).
///
/// # Semantics
///
/// As Tokio's: the first tick completes at the start; each tick returns its scheduled
/// instant, not the time it was polled; a tick polled more than 5 ms late counts as missed
/// and [`MissedTickBehavior`] decides the next one; the `reset*` methods move the next tick
/// and ignore the missed-tick behavior. Beyond Tokio, [`set_period`](Interval::set_period)
/// changes the period of a running interval.
///
/// # Cost
///
/// One wheel entry serves the interval for its whole life: registered by the first poll that
/// has to wait, re-filed in place at each tick (Tokio removes its timer entry at each tick
/// and registers it again under its driver's lock), removed when the interval is dropped. A
/// tick allocates nothing; each poll reads the clock once, and the poll that then waits for
/// the next tick re-files the entry in place. A tick never completes before its instant, and
/// a tick whose instant has passed when it is polled (the loop body took longer than a
/// period) completes on that poll, and so does each missed tick of a
/// [`Burst`](MissedTickBehavior::Burst) after it. Tokio's completes there only if its timer
/// driver has already seen that instant pass (as after `advance` in paused time), and
/// otherwise a task wake later, when the driver next runs.
///
/// # Shutdown
///
/// If the timer shuts down (see [`Timer::shutdown`]), an interval does not stop, hang or
/// spin: from then on it waits on Tokio's own timer (one allocation), keeping its schedule.
/// That is the timer's runtime's Tokio timer while that runtime lives; once the runtime has
/// shut down (which shuts its timers down), an interval still polled elsewhere falls back to
/// the Tokio timer of the runtime current where it is polled, and reads that runtime's clock
/// from then on (for missed ticks and the `reset*` methods; with Tokio's `test-util` each
/// runtime may have a paused clock of its own), as does an interval made on such a timer;
/// polling it outside any runtime then panics, as `tokio::time::Interval` does there. (A
/// `Sleep` resolves at a shutdown instead: it has only one completion to give.)
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::StreamExt;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::interval;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let ticks: Vec<Instant> = interval(Duration::from_secs(1)).take(3).collect().await;
/// assert_eq!(ticks, [start, start + Duration::from_secs(1), start + Duration::from_secs(2)]);
/// # }
/// ```
pub struct Interval {
    /// `None` only inside `drop`.
    shard: Option<Arc<Shard>>,
    /// The scheduled instant of the next tick.
    next: Instant,
    /// `next` is known to have passed (a clock reading already taken says so).
    due: bool,
    period: Duration,
    behavior: MissedTickBehavior,
    wait: Wait,
    /// A clone of the waker the wheel entry holds, so a poll from the same task needs no
    /// lock to know the entry will wake it.
    waker: Option<Waker>,
}

impl Interval {
    fn new(shard: Arc<Shard>, start: Instant, period: Duration) -> Interval {
        Interval {
            shard: Some(shard),
            next: start,
            due: false,
            period: period.min(MAX_PERIOD),
            behavior: MissedTickBehavior::default(),
            wait: Wait::Unregistered,
            waker: None,
        }
    }

    fn shard(&self) -> &Arc<Shard> {
        self.shard
            .as_ref()
            .expect("an Interval has its shard until dropped")
    }

    /// The clock the ticks are on: the timer's runtime's, or once that runtime is gone, the
    /// current runtime's, whose Tokio timer the interval then waits on (see "Shutdown").
    fn now(&self) -> Instant {
        self.shard().now_where_waiting()
    }

    /// Completes at the next tick, returning its scheduled instant.
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: if the future is dropped before it completes (another branch of
    /// `tokio::select!` won), no tick is consumed.
    ///
    /// # Panics
    ///
    /// If the timer was built with [`max_pending`](crate::Builder::max_pending) and is full
    /// when the interval first has to wait (never for one made by
    /// [`Timer::try_interval`], which took its slot when it was made).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{interval, sleep_wheel};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut heartbeat = interval(Duration::from_secs(1));
    /// let mut sent = 0;
    /// let shutdown = sleep_wheel(Duration::from_millis(3500));
    /// tokio::pin!(shutdown);
    /// loop {
    ///     tokio::select! {
    ///         _ = heartbeat.tick() => sent += 1, // at 0, 1, 2 and 3 s
    ///         _ = &mut shutdown => break,
    ///     }
    /// }
    /// assert_eq!(sent, 4);
    /// # }
    /// ```
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: `Ready` with its scheduled instant once it has come,
    /// `Pending` otherwise, and then the waker of `cx` (only that of the latest call) is woken
    /// when it comes.
    ///
    /// # Panics
    ///
    /// As [`tick`](Interval::tick).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut ticks = interval(Duration::from_millis(10));
    /// let first = std::future::poll_fn(|cx| ticks.poll_tick(cx)).await;
    /// let second = std::future::poll_fn(|cx| ticks.poll_tick(cx)).await;
    /// assert_eq!(second - first, Duration::from_millis(10));
    /// # }
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        // One unit of the task's cooperative budget per tick, as Tokio's interval spends
        // through its sleep: a loop of ticks owed (a burst after a stall, a body slower than
        // the period) yields to the worker's other tasks when the budget runs out.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let poll = self.poll_tick_inner(cx);
        if poll.is_ready() {
            coop.made_progress();
        }
        poll
    }

    fn poll_tick_inner(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.due {
            return Poll::Ready(self.fire(self.now()));
        }
        // Read on every poll, the one right after a tick included: the loop body may have
        // overrun the period, and then the tick completes here rather than when the timer's
        // driver next runs.
        let now = self.now();
        if self.next <= now {
            return Poll::Ready(self.fire(now));
        }
        if let Wait::Filed {
            key,
            current: false,
        } = self.wait
        {
            // Just ticked: file the entry for the next tick and wait.
            return self.file(key, cx);
        }
        match &mut self.wait {
            Wait::Unregistered => self.register(cx),
            Wait::Filed { key, .. } => {
                let key = *key;
                if self.shard().is_shutdown() {
                    return self.fall_back(cx);
                }
                self.watch(key, cx)
            }
            Wait::Tokio(sleep) => match sleep.poll_until(self.next, cx) {
                Poll::Ready(()) => Poll::Ready(self.fire(now)),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    /// Completes the tick due at `self.next`, polled at `now`, and schedules the next one.
    fn fire(&mut self, now: Instant) -> Instant {
        let tick = self.next;
        let missed = tick.checked_add(MISSED_AFTER).is_some_and(|t| now > t);
        let next = if missed {
            self.behavior.next_after_missed(tick, now, self.period)
        } else {
            deadline_after(tick, self.period)
        };
        self.next = next;
        self.due = next <= now;
        if let Wait::Filed { current, .. } = &mut self.wait {
            *current = false;
        }
        tick
    }

    /// Registers the interval's wheel entry for `self.next` now, before any poll, with a
    /// placeholder waker (the first poll that waits puts its own in): the slot is taken for
    /// the interval's life.
    fn file_now(&mut self) -> Result<(), TimerError> {
        let placeholder = futures::task::noop_waker();
        let key = self
            .shard()
            .register_persistent_at(self.next, placeholder.clone())?;
        self.wait = Wait::Filed { key, current: true };
        self.waker = Some(placeholder);
        Ok(())
    }

    /// Registers the interval's wheel entry for `self.next` (the first wait).
    fn register(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let shard = self.shard();
        match shard.register_persistent_at(self.next, cx.waker().clone()) {
            Ok(key) => {
                self.wait = Wait::Filed { key, current: true };
                self.waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Err(TimerError::Shutdown) => self.fall_back(cx),
            Err(e @ TimerError::Full { .. }) => panic!(
                "tokio-timing-wheel: {e}; an Interval needs one timer slot for its whole life"
            ),
        }
    }

    /// Files the entry for `self.next`, in place, and waits.
    fn file(&mut self, key: Key, cx: &mut Context<'_>) -> Poll<Instant> {
        let shard = self.shard();
        // Firing took the waker out of the entry: this puts the polling task's back.
        if !shard.reschedule_persistent_at(key, self.next, cx.waker()) {
            // Only a shutdown takes the entry away from its owner.
            return self.fall_back(cx);
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        self.wait = Wait::Filed { key, current: true };
        Poll::Pending
    }

    /// Makes sure the entry, filed for `self.next`, wakes this `cx` (a lock only if the task
    /// changed), and waits.
    fn watch(&mut self, key: Key, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        match self.shard().poll_persistent(key, cx.waker()) {
            Some(false) => {
                self.waker = Some(cx.waker().clone());
                Poll::Pending
            }
            // It fired (the tick is due) but woke the task that polled before: come back,
            // and the clock says the tick has come.
            Some(true) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => self.fall_back(cx),
        }
    }

    /// The timer shut down: wait on Tokio's timer from now on.
    fn fall_back(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if let Wait::Filed { key, .. } = self.wait {
            self.shard().cancel(key); // normally drained already
        }
        self.waker = None;
        let mut sleep = TokioSleep::new(self.next, self.shard());
        let ready = sleep.poll_until(self.next, cx).is_ready();
        self.wait = Wait::Tokio(sleep);
        if ready {
            Poll::Ready(self.fire(self.now()))
        } else {
            Poll::Pending
        }
    }

    /// Moves the next tick to `next` (the clock read `now`), re-filing the entry at once so
    /// the clock alone tells the next poll whether it has come, and waking a task waiting for
    /// the tick if `next` has come already (as Tokio's reset sleep fires).
    fn set_next(&mut self, next: Instant, now: Instant) {
        self.next = next;
        self.due = next <= now;
        let (key, current) = match &mut self.wait {
            Wait::Unregistered => return, // no poll waits
            // Tokio's reset: wakes the task waiting on the sleep if `next` has come, else
            // re-arms it for `next` (which may be sooner than the instant it waited for).
            Wait::Tokio(sleep) => return sleep.reset(next),
            Wait::Filed { key, current } => (*key, current),
        };
        // `current`: the last poll waited for the entry, or a reset filed it since.
        let waiting = *current;
        // A due tick completes without the entry; the poll after it files the entry.
        *current = !self.due;
        if self.due {
            // The entry would wake the waiting task only at the tick's old instant.
            if let (true, Some(waker)) = (waiting, &self.waker) {
                waker.wake_by_ref();
            }
            return;
        }
        let shard = self.shard();
        // The entry may be parked (its waker taken by the firing): file it with the waker
        // the interval last polled with. A `false` (a shutdown took the entry) is noticed by
        // the next poll.
        match &self.waker {
            Some(waker) => shard.reschedule_persistent_at(key, next, waker),
            None => shard.reschedule_at(key, next),
        };
    }

    /// Resets the interval so that the next tick comes one period from now, whatever was
    /// missed (the [`MissedTickBehavior`] does not apply).
    ///
    /// Equivalent to `reset_at(Instant::now() + period)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(100));
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(50)).await;
    /// ticks.reset();
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(150));
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(250));
    /// # }
    /// ```
    pub fn reset(&mut self) {
        let now = self.now();
        self.set_next(deadline_after(now, self.period), now);
    }

    /// Resets the interval so that the next tick completes at once.
    ///
    /// Equivalent to `reset_at(Instant::now())`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(100));
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(50)).await;
    /// ticks.reset_immediately();
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(50));
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(150));
    /// # }
    /// ```
    pub fn reset_immediately(&mut self) {
        let now = self.now();
        self.set_next(now, now);
    }

    /// Resets the interval so that the next tick comes `after` from now; a duration longer
    /// than about 30 years (such as `Duration::MAX`) means about 30 years, as in Tokio.
    ///
    /// Equivalent to `reset_at(Instant::now() + after)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(100));
    /// ticks.tick().await;
    /// tokio::time::sleep(Duration::from_millis(50)).await;
    /// ticks.reset_after(Duration::from_millis(20));
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(70));
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(170));
    /// # }
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        let now = self.now();
        self.set_next(deadline_after(now, after.min(MAX_PERIOD)), now);
    }

    /// Resets the interval so that the next tick comes at `deadline`; the ticks after it
    /// follow one period apart.
    ///
    /// A deadline in the past makes the next tick complete at once, and the
    /// [`MissedTickBehavior`] then decides the one after it. A deadline further away than
    /// the period is waited for all the same. Ticks missed before the reset are forgotten.
    /// As with Tokio's, a task waiting for the tick (an interval shared behind a lock) is
    /// woken at the new deadline, at once if it has passed; so with every `reset*` method.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut ticks = interval(Duration::from_millis(100));
    /// ticks.tick().await;
    /// ticks.reset_at(start + Duration::from_secs(1));
    /// assert_eq!(ticks.tick().await, start + Duration::from_secs(1));
    /// assert_eq!(ticks.tick().await, start + Duration::from_millis(1100));
    /// # }
    /// ```
    pub fn reset_at(&mut self, deadline: Instant) {
        self.set_next(deadline, self.now());
    }

    /// The period between ticks.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let ticks = interval(Duration::from_secs(30));
    /// assert_eq!(ticks.period(), Duration::from_secs(30));
    /// # }
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Changes the period, from the next tick on: the tick already scheduled keeps its
    /// instant, and each tick after it comes `period` after the one before. Call
    /// [`reset`](Interval::reset) after it to move the next tick to one new period from now.
    ///
    /// Tokio's `Interval` cannot do this (tokio#3701). A period longer than about 30 years is
    /// clamped to that, as at creation.
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut heartbeat = interval(Duration::from_secs(30));
    /// heartbeat.tick().await; // at 0 s; the next tick is scheduled for 30 s
    /// heartbeat.set_period(Duration::from_secs(5)); // the peer asked for a faster beat
    /// assert_eq!(heartbeat.tick().await, start + Duration::from_secs(30));
    /// assert_eq!(heartbeat.tick().await, start + Duration::from_secs(35));
    /// # }
    /// ```
    #[track_caller]
    pub fn set_period(&mut self, period: Duration) {
        check_period(period);
        self.period = period.min(MAX_PERIOD);
    }

    /// The [`MissedTickBehavior`] in use.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{interval, MissedTickBehavior};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let ticks = interval(Duration::from_secs(1));
    /// assert_eq!(ticks.missed_tick_behavior(), MissedTickBehavior::Burst);
    /// # }
    /// ```
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.behavior
    }

    /// Sets the [`MissedTickBehavior`]; it applies from the next missed tick on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{interval, MissedTickBehavior};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut ticks = interval(Duration::from_secs(1));
    /// ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    /// assert_eq!(ticks.missed_tick_behavior(), MissedTickBehavior::Delay);
    /// # }
    /// ```
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.behavior = behavior;
    }
}

impl Stream for Interval {
    type Item = Instant;

    /// Yields each tick's scheduled instant; never ends.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

/// Never terminated, as tokio-stream's `IntervalStream` (so `select!` loops that need a
/// `FusedStream` take the interval itself).
impl futures::stream::FusedStream for Interval {
    fn is_terminated(&self) -> bool {
        false
    }
}

/// Bounded: the period, the next tick and how it waits; never the timer's state.
impl std::fmt::Debug for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waits_on = match self.wait {
            Wait::Unregistered => "nothing yet",
            Wait::Filed { .. } => "the wheel",
            Wait::Tokio(_) => "tokio (the timer shut down)",
        };
        f.debug_struct("Interval")
            .field("period", &self.period)
            .field("next_tick", &self.next)
            .field("missed_tick_behavior", &self.behavior)
            .field("waits_on", &waits_on)
            .finish()
    }
}

impl Drop for Interval {
    fn drop(&mut self) {
        let Some(shard) = self.shard.take() else {
            return;
        };
        if let Wait::Filed { key, .. } = self.wait {
            shard.cancel(key);
        }
    }
}
