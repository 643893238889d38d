//! `Timer`: a handle to one wheel and its driver task, and the `Builder` that makes one.

use std::future::{Future, IntoFuture};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::time::Instant;

use crate::clock::{deadline_after, Clock};
use crate::driver::{wake_all, Driver};
use crate::error::{BuildError, TimerError};
use crate::loom::{Arc, AtomicBool, AtomicUsize};
use crate::metrics::TimerMetrics;
use crate::shard::{this_thread_shard, Common, Shard};
use crate::signal::Signal;
use crate::sleep::Sleep;
use crate::task::DelayedTask;
use crate::timeout::Timeout;
use crate::wheel::MAX_WHEEL_SIZE;

/// The state behind every handle of one timer: its shards and what they share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) shards: Box<[Arc<Shard>]>,
    pub(crate) common: Arc<Common>,
}

impl Inner {
    /// The shard the calling thread registers into.
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shards[this_thread_shard(self.shards.len())]
    }

    /// Shuts the timer down: refuses new registrations, then removes every pending entry and
    /// wakes it (sleeps and timeouts resolve; delayed tasks resolve with the shutdown error).
    pub(crate) fn shutdown(&self) {
        if self
            .common
            .shutdown
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let mut drained = 0;
        for shard in self.shards.iter() {
            let mut wakers = {
                let mut wheel = shard.lock();
                let w = wheel.drain_all();
                wheel.shrink_to_fit();
                w
            };
            drained += wakers.len();
            self.common.release(wakers.len());
            wake_all(&mut wakers);
        }
        tracing::debug!(drained, "timer shut down");
        self.common.signal.notify();
    }

    /// No handle, no future and no entry refers to this timer any more.
    pub(crate) fn is_unused(&self) -> bool {
        self.common
            .detached
            .load(std::sync::atomic::Ordering::SeqCst)
            && self
                .shards
                .iter()
                .all(|s| Arc::strong_count(s) == 1 && s.len() == 0)
    }

    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }
}

/// Keeps the driver alive while any [`Timer`] handle exists; the last one dropped tells it.
#[derive(Debug)]
struct HandleRef {
    inner: Arc<Inner>,
}

impl Drop for HandleRef {
    fn drop(&mut self) {
        self.inner
            .common
            .detached
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.common.signal.notify();
    }
}

/// A hierarchical timing wheel driven by one Tokio task.
///
/// `Timer` is a cheap handle (`Clone + Send + Sync`); clones share the wheel. Most programs do
/// not need one: the free functions ([`sleep_wheel`](crate::sleep_wheel),
/// [`timeout`](crate::timeout), [`spawn_after`](crate::spawn_after), ...) use a default timer
/// (1 ms tick, 64 buckets per level, no limit) created lazily for each Tokio runtime. Build
/// your own to choose the tick, the wheel size or a limit on pending timers.
///
/// # Lifetime
///
/// The driver task runs on the runtime that built the timer. It ends when the timer is
/// [shut down](Timer::shutdown), when the runtime shuts down, or once every `Timer` handle,
/// every future it made and every pending delayed task is gone. Dropping the handles alone
/// does not stop pending sleeps, timeouts or delayed tasks: they keep the timer alive.
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
#[derive(Debug, Clone)]
pub struct Timer {
    handle: Arc<HandleRef>,
}

impl Timer {
    /// A builder with the defaults: 1 ms tick, 64 buckets per level, no limit.
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.handle.inner
    }

    /// A future that completes once `duration` has elapsed (see [`sleep_wheel`](crate::sleep_wheel)).
    ///
    /// # Panics
    ///
    /// When polled, if the timer was built with [`max_pending`](Builder::max_pending) and is
    /// full. Use [`try_sleep`](Timer::try_sleep) to get an error instead.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep::after(self.inner().shard().clone(), duration)
    }

    /// A future that completes at `deadline` (see [`sleep_wheel_until`](crate::sleep_wheel_until)).
    ///
    /// # Panics
    ///
    /// As [`sleep`](Timer::sleep).
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(self.inner().shard().clone(), deadline)
    }

    /// Like [`sleep`](Timer::sleep), but takes the timer slot now and returns an error when
    /// the timer is full or shut down.
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
        self.try_sleep_until(deadline_after(duration))
    }

    /// Like [`sleep_until`](Timer::sleep_until), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
    pub fn try_sleep_until(&self, deadline: Instant) -> Result<Sleep, TimerError> {
        Sleep::new_registered(self.inner().shard().clone(), deadline)
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
    pub fn try_timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, TimerError> {
        self.try_timeout_at(deadline_after(duration), future)
    }

    /// Like [`timeout_at`](Timer::timeout_at), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
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
    pub fn try_spawn_after<F>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(deadline_after(duration), duration.is_zero(), future)
    }

    /// Like [`spawn_at`](Timer::spawn_at), but returns an error when the timer is full.
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
        let shard = self.inner().shard().clone();
        match DelayedTask::new(shard, deadline, check_clock, future) {
            Err(TimerError::Shutdown) => Ok(DelayedTask::shut_down()),
            other => other,
        }
    }

    /// Number of timers currently registered in the wheel (sleeps and timeouts that have been
    /// polled and not yet fired or dropped, and delayed tasks not yet started or cancelled).
    pub fn pending(&self) -> usize {
        self.inner().pending()
    }

    /// A snapshot of the timer's counters (takes each shard's lock briefly).
    pub fn metrics(&self) -> TimerMetrics {
        let inner = self.inner();
        let mut m = TimerMetrics {
            driver_wakeups: inner.common.wakeups.load(Relaxed),
            ..TimerMetrics::default()
        };
        for shard in inner.shards.iter() {
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
    /// delay-queue capacity, and empty top levels of its wheel. Pending timers are unaffected.
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
        for shard in self.inner().shards.iter() {
            shard.lock().shrink_to_fit();
        }
    }

    /// The tick this timer was built with.
    pub fn tick(&self) -> Duration {
        self.inner().common.clock.tick()
    }

    /// Shuts the timer down: every pending sleep completes, every pending timeout resolves to
    /// an [`Elapsed`](crate::Elapsed) error whose [`is_shutdown`](crate::Elapsed::is_shutdown)
    /// is true, every pending delayed task resolves with a
    /// [shutdown error](crate::DelayedError::is_shutdown) without running, and the driver task
    /// ends. Futures created afterwards resolve the same way at once; `try_*` methods return
    /// [`TimerError::Shutdown`]. Calling it again does nothing.
    ///
    /// The same happens when the runtime that runs the driver shuts down.
    pub fn shutdown(&self) {
        self.inner().shutdown();
    }

    /// Whether the timer has been shut down.
    pub fn is_shutdown(&self) -> bool {
        self.inner().common.is_shutdown()
    }
}

/// Builds a [`Timer`] with a chosen tick, wheel size and limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::{BuildError, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let err = Timer::builder().wheel_size(100).build().unwrap_err();
/// assert_eq!(err, BuildError::InvalidWheelSize(100));
/// let timer = Timer::builder().tick(Duration::from_micros(500)).build().unwrap();
/// assert_eq!(timer.tick(), Duration::from_micros(500));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    tick: Duration,
    wheel_size: usize,
    max_pending: Option<usize>,
    shards: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            tick: Duration::from_millis(1),
            wheel_size: 64,
            max_pending: None,
            shards: None,
        }
    }
}

impl Builder {
    /// The width of one bucket of the lowest level (default 1 ms). Timers keep their deadline
    /// to 1/1024 of a tick (never finer than 1 ns) and fire when the clock reaches it, so the
    /// tick does not limit precision: a coarser tick means fewer levels and less cascading, a
    /// finer one fewer timers per bucket. Tokio's own timer, which wakes the driver, has a 1 ms
    /// resolution: on a real clock timers fire within about that of their deadline, plus
    /// scheduling delay.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Buckets per level (default 64): a power of two between 2 and 65536.
    pub fn wheel_size(mut self, size: usize) -> Self {
        self.wheel_size = size;
        self
    }

    /// The most timers that may be pending at once (default: no limit). Once reached,
    /// `try_*` methods return [`TimerError::Full`] and the other methods panic, until a timer
    /// fires or is cancelled.
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// Number of shards (independent wheels, each behind its own lock); default: four per
    /// available CPU rounded up to a power of two, at most 64. More shards mean less
    /// contention between threads and a little more work per driver wakeup.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards.clamp(1, 1024));
        self
    }

    /// Builds the timer and spawns its driver task on the current Tokio runtime.
    pub fn build(self) -> Result<Timer, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        self.build_on(runtime)
    }

    pub(crate) fn build_on(self, runtime: tokio::runtime::Handle) -> Result<Timer, BuildError> {
        if self.tick.is_zero() {
            return Err(BuildError::ZeroTick);
        }
        if u64::try_from(self.tick.as_nanos()).is_err() {
            return Err(BuildError::TickTooLarge);
        }
        if !self.wheel_size.is_power_of_two() || !(2..=MAX_WHEEL_SIZE).contains(&self.wheel_size) {
            return Err(BuildError::InvalidWheelSize(self.wheel_size));
        }
        if self.max_pending == Some(0) {
            return Err(BuildError::ZeroMaxPending);
        }
        // The driver sleeps on Tokio's timer; without a time driver that would panic later.
        if std::panic::catch_unwind(|| {
            let _guard = runtime.enter();
            drop(tokio::time::sleep(Duration::ZERO));
        })
        .is_err()
        {
            return Err(BuildError::NoTimeDriver);
        }
        let _guard = runtime.enter();
        let common = Arc::new(Common {
            clock: Clock::new(self.tick),
            signal: Signal::new(),
            shutdown: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            max_pending: self.max_pending.unwrap_or(usize::MAX),
            reserved: AtomicUsize::new(0),
            runtime: runtime.clone(),
            wakeups: std::sync::atomic::AtomicU64::new(0),
        });
        let shards = self.shards.unwrap_or_else(default_shards);
        let inner = Arc::new(Inner {
            shards: (0..shards)
                .map(|_| Arc::new(Shard::new(self.wheel_size, common.clone())))
                .collect(),
            common,
        });
        runtime.spawn(Driver::new(inner.clone()));
        Ok(Timer {
            handle: Arc::new(HandleRef { inner }),
        })
    }
}

fn default_shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 4).next_power_of_two().min(64)
}
