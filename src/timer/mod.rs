//! `Timer`: a cheap handle to one timing wheel and its driver.

pub(crate) mod builder;
pub(crate) mod default;
pub(crate) mod metrics;

use std::fmt;
use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use self::builder::Builder;
use self::default::{current_timer, NO_RUNTIME};
use self::metrics::TimerMetrics;
use crate::clock::deadline_after;
use crate::delayed_task::DelayedTask;
use crate::driver::shard::{this_thread_shard, Shard};
use crate::driver::Driver;
use crate::error::TimerError;
use crate::sleep::Sleep;
use crate::timeout::Timeout;

/// A hierarchical timing wheel, fired from inside Tokio's own timer processing.
///
/// `Timer` is a cheap handle (`Clone + Send + Sync`); clones share the wheel. Most programs do
/// not need one: the free functions ([`sleep_wheel`](crate::sleep_wheel),
/// [`timeout`](crate::timeout), [`spawn_after`](crate::spawn_after), ...) use a default timer
/// (1 ms tick, 64 buckets per level, no limit) created lazily for each Tokio runtime. Build
/// your own to choose the tick, the wheel size or a limit on pending timers.
///
/// # Lifetime
///
/// The timer is bound to the runtime that built it: that runtime's time driver fires it, and
/// delayed tasks spawn onto it. The timer lives until it is [shut down](Timer::shutdown), its
/// runtime shuts down, or every `Timer` handle, every future it made and every pending delayed
/// task is gone. Dropping the handles alone does not stop pending sleeps, timeouts or delayed
/// tasks: they keep the timer alive. A timer costs its runtime one task that never wakes (it
/// notices the runtime's shutdown) and, while something is pending, one Tokio sleep.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::Timer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = Timer::builder()
///     .tick(Duration::from_millis(10))
///     .wheel_size(128)
///     .max_pending(100_000)
///     .build()
///     .expect("valid settings, inside a runtime");
///
/// timer.sleep(Duration::from_millis(50)).await;
/// let r = timer.timeout(Duration::from_secs(1), async { 42 }).await;
/// assert_eq!(r, Ok(42));
/// # }
/// ```
#[derive(Clone)]
pub struct Timer {
    /// The timer's shards; each refers to the driver.
    shards: Arc<[Arc<Shard>]>,
}

impl fmt::Debug for Timer {
    /// Bounded and lock-free: the settings and state, never the wheels' contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("tick", &self.tick())
            .field("shards", &self.shards.len())
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}

impl Timer {
    /// A builder with the defaults: 1 ms tick, 64 buckets per level, no limit.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The default timer of the current Tokio runtime, the one the free functions use
    /// (created on first use: 1 ms tick, 64 buckets per level, no limit).
    ///
    /// Shutting it down resolves the futures already registered on it (see
    /// [`Timer::shutdown`]); the next free-function call on that runtime then creates a new
    /// default timer, so later `sleep_wheel`/`timeout` calls keep working.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or if the runtime has no time driver.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{sleep_wheel, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut s = tokio_test::task::spawn(sleep_wheel(Duration::from_secs(5)));
    /// assert!(s.poll().is_pending()); // registered on first poll
    /// assert_eq!(Timer::current().pending(), 1);
    /// drop(s); // cancelled
    /// assert_eq!(Timer::current().pending(), 0);
    /// # }
    /// ```
    #[track_caller]
    pub fn current() -> Timer {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => current_timer(h),
            Err(_) => panic!("{}", NO_RUNTIME),
        }
    }

    pub(crate) fn from_shards(shards: Box<[Arc<Shard>]>) -> Timer {
        Timer {
            shards: shards.into(),
        }
    }

    /// The shard the calling thread registers into.
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shards[this_thread_shard(self.shards.len())]
    }

    pub(crate) fn driver(&self) -> &Arc<Driver> {
        &self.shards[0].driver
    }

    /// A future that completes once `duration` has elapsed (see [`sleep_wheel`](crate::sleep_wheel)).
    ///
    /// # Panics
    ///
    /// When polled, if the timer was built with [`max_pending`](Builder::max_pending) and is
    /// full. Use [`try_sleep`](Timer::try_sleep) to get an error instead.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep::after(self.shard().clone(), duration)
    }

    /// A future that completes at `deadline` (see [`sleep_wheel_until`](crate::sleep_wheel_until)).
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
    /// [`TimerError::Full`] if the timer was built with [`max_pending`](Builder::max_pending)
    /// and that many timers are pending (without a limit: if the calling thread's shard holds
    /// the most a wheel can index, about four billion); [`TimerError::Shutdown`] if the timer
    /// has been shut down. A deadline already passed is not an error: the `Sleep` is ready on
    /// its first poll and takes no slot.
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
        self.try_sleep_until(deadline_after(self.driver().now(), duration))
    }

    /// Like [`sleep_until`](Timer::sleep_until), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`].
    pub fn try_sleep_until(&self, deadline: Instant) -> Result<Sleep, TimerError> {
        Sleep::new_registered(self.shard().clone(), deadline)
    }

    /// Requires `future` to complete within `duration` (see [`timeout`](crate::timeout)).
    ///
    /// # Panics
    ///
    /// When polled, if the timer is full (see [`sleep`](Timer::sleep)).
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep(duration))
    }

    /// Requires `future` to complete before `deadline` (see [`timeout_at`](crate::timeout_at)).
    ///
    /// # Panics
    ///
    /// When polled, if the timer is full (see [`sleep`](Timer::sleep)).
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep_until(deadline))
    }

    /// Like [`timeout`](Timer::timeout), but takes the timer slot now (so even a future that
    /// is ready at once uses one) and returns an error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`];
    /// `future` is dropped.
    pub fn try_timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, TimerError> {
        self.try_timeout_at(deadline_after(self.driver().now(), duration), future)
    }

    /// Like [`timeout_at`](Timer::timeout_at), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`];
    /// `future` is dropped.
    pub fn try_timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, TimerError> {
        let sleep = self.try_sleep_until(deadline)?;
        Ok(Timeout::new(future.into_future(), sleep))
    }

    /// Runs `future` as a Tokio task once `duration` has elapsed (see
    /// [`spawn_after`](crate::spawn_after)).
    ///
    /// # Panics
    ///
    /// If the timer is full. Use [`try_spawn_after`](Timer::try_spawn_after) to get an error
    /// instead. A shut-down timer does not panic: the task resolves with the shutdown error.
    #[track_caller]
    pub fn spawn_after<F>(&self, duration: Duration, future: F) -> DelayedTask<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_after(duration, future) {
            Ok(task) => task,
            Err(e) => panic!(
                "tokio-timing-wheel: cannot schedule a delayed task: {e}; \
                 use Timer::try_spawn_after to handle this"
            ),
        }
    }

    /// Runs `future` as a Tokio task at `deadline` (see [`spawn_at`](crate::spawn_at)).
    ///
    /// # Panics
    ///
    /// As [`spawn_after`](Timer::spawn_after).
    #[track_caller]
    pub fn spawn_at<F>(&self, deadline: Instant, future: F) -> DelayedTask<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_at(deadline, future) {
            Ok(task) => task,
            Err(e) => panic!(
                "tokio-timing-wheel: cannot schedule a delayed task: {e}; \
                 use Timer::try_spawn_at to handle this"
            ),
        }
    }

    /// Like [`spawn_after`](Timer::spawn_after), but returns an error when the timer is full.
    /// On a shut-down timer it returns a task that has already resolved with the shutdown
    /// error, as [`spawn_after`](Timer::spawn_after) does.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] if the timer was built with [`max_pending`](Builder::max_pending)
    /// and that many timers are pending (without a limit: if the calling thread's shard holds
    /// the most a wheel can index); `future` is dropped without running. Never
    /// [`TimerError::Shutdown`]: see above.
    pub fn try_spawn_after<F>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(
            deadline_after(self.driver().now(), duration),
            duration.is_zero(),
            future,
        )
    }

    /// Like [`spawn_at`](Timer::spawn_at), but returns an error when the timer is full.
    /// On a shut-down timer it returns a task that has already resolved with the shutdown
    /// error, as [`spawn_at`](Timer::spawn_at) does.
    ///
    /// # Errors
    ///
    /// As [`try_spawn_after`](Timer::try_spawn_after): [`TimerError::Full`] only.
    pub fn try_spawn_at<F>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(deadline, true, future)
    }

    fn try_spawn<F>(
        &self,
        deadline: Instant,
        check_clock: bool,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shard = self.shard().clone();
        match DelayedTask::new(shard, deadline, check_clock, future) {
            Err(TimerError::Shutdown) => Ok(DelayedTask::shut_down()),
            other => other,
        }
    }

    /// Number of timers currently registered in the wheel (sleeps and timeouts that have been
    /// polled and not yet fired or dropped, and delayed tasks not yet started or cancelled).
    pub fn pending(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    /// A snapshot of the timer's counters (takes each shard's lock briefly).
    pub fn metrics(&self) -> TimerMetrics {
        let mut m = TimerMetrics {
            driver_wakeups: self.driver().passes(),
            ..TimerMetrics::default()
        };
        for shard in self.shards.iter() {
            let wheel = shard.lock();
            let s = wheel.stats();
            m.pending += wheel.len();
            m.cascades += s.cascades;
            m.bucket_flushes += s.flushes;
            m.heap_pushes += s.heap_pushes;
            m.levels = m.levels.max(wheel.levels());
        }
        m
    }

    /// Gives memory back now: each shard's slab of entries if it is empty (a shard also does
    /// this by itself when it empties while holding more than a few thousand slots), spare
    /// bucket-heap capacity, and empty top levels of its wheel. Pending timers are unaffected.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().build().unwrap();
    /// let burst: Vec<_> = (0..1000).map(|_| timer.try_sleep(Duration::from_secs(3600)).unwrap()).collect();
    /// drop(burst);
    /// timer.shrink_to_fit();
    /// assert_eq!(timer.pending(), 0);
    /// # }
    /// ```
    pub fn shrink_to_fit(&self) {
        for shard in self.shards.iter() {
            shard.lock().shrink_to_fit();
        }
    }

    /// The tick this timer was built with.
    pub fn tick(&self) -> Duration {
        self.driver().clock.tick()
    }

    /// Shuts the timer down: every pending sleep completes, every pending timeout resolves to
    /// an [`Elapsed`](crate::Elapsed) error whose [`is_shutdown`](crate::Elapsed::is_shutdown)
    /// is true, every pending delayed task resolves with a
    /// [shutdown error](crate::DelayedError::is_shutdown) without running, and the timer's
    /// Tokio sleep and task go. Futures created afterwards resolve the same way at once; `try_*`
    /// methods return [`TimerError::Shutdown`]. Calling it again does nothing.
    ///
    /// A sleep or timeout whose deadline had already passed when the timer shut down counts
    /// as elapsed, not as shut down ([`Sleep::is_shutdown`](crate::Sleep::is_shutdown) is
    /// false), even if it is first polled afterwards.
    ///
    /// The same happens when the timer's runtime shuts down.
    pub fn shutdown(&self) {
        self.driver().shutdown();
    }

    /// Whether the timer has been shut down.
    pub fn is_shutdown(&self) -> bool {
        self.driver().is_shutdown()
    }
}
