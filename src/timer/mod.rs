//! `Timer`: a cheap handle to one timing wheel and its driver.

pub(crate) mod builder;
pub(crate) mod default;
pub(crate) mod metrics;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use self::builder::Builder;
use self::default::{current_timer, NO_RUNTIME};
use self::metrics::TimerMetrics;
use crate::driver::shard::{this_thread_shard, Locked, Shard};
use crate::driver::Driver;
use crate::loom::MutexGuard;

/// A hierarchical timing wheel, fired from inside Tokio's own timer processing.
///
/// `Timer` is a cheap handle (`Clone + Send + Sync`); clones share the wheel. Most programs do
/// not need one: the free functions ([`sleep_wheel`](crate::sleep_wheel),
/// [`timeout`](fn@crate::timeout), [`spawn_after`](crate::spawn_after), ...) use a default timer
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
        self.shards[0].driver()
    }

    /// The current instant on the timer's clock.
    pub(crate) fn now(&self) -> tokio::time::Instant {
        self.shards[0].now()
    }

    /// Number of timers currently registered in the wheel: sleeps and timeouts that have been
    /// polled (or made by a `try_*` method, which takes the slot at once) and not yet fired
    /// or dropped, delayed tasks not yet started or cancelled, one for each
    /// [`Interval`](crate::Interval) from its first wait (or, made by
    /// [`try_interval`](Timer::try_interval), from the start) until it is dropped (between
    /// ticks too), and one for each [`DelayQueue`](crate::DelayQueue) waiting, whatever it
    /// holds, or, made by [`try_delay_queue`](Timer::try_delay_queue), from the start until
    /// it is dropped, empty or not.
    ///
    /// A count at one instant, even while other threads register and cancel: it never exceeds
    /// [`max_pending`](crate::Builder::max_pending). (Takes every shard's lock at once, briefly.)
    pub fn pending(&self) -> usize {
        let locked = self.lock_all();
        self.shards
            .iter()
            .zip(&locked)
            .map(|(shard, wheel)| shard.pending_in(wheel))
            .sum()
    }

    /// Every shard's lock, in shard order (nothing else holds two at once): a timer-wide
    /// snapshot, where one shard at a time would add counts taken at different instants (an
    /// entry cancelled on a shard already counted and one filed on a shard not yet counted
    /// would both be counted, past `max_pending`).
    fn lock_all(&self) -> Vec<MutexGuard<'_, Locked>> {
        self.shards.iter().map(|shard| shard.lock()).collect()
    }

    /// A snapshot of the timer's counters, at one instant (takes every shard's lock at once,
    /// briefly): `pending` as [`pending`](Timer::pending).
    pub fn metrics(&self) -> TimerMetrics {
        let mut m = TimerMetrics {
            passes: self.driver().passes(),
            lateness: self.driver().lateness.snapshot(),
            ..TimerMetrics::default()
        };
        let locked = self.lock_all();
        for (shard, wheel) in self.shards.iter().zip(&locked) {
            let s = wheel.stats();
            m.pending += shard.pending_in(wheel);
            m.cascades += s.cascades;
            m.bucket_flushes += s.flushes;
            m.heap_pushes += s.heap_pushes;
            m.levels = m.levels.max(wheel.levels());
        }
        m
    }

    /// Gives memory back now: each shard's slab of entries if it is empty (a shard also does
    /// this by itself when it empties while holding more than a few thousand slots), spare
    /// bucket-heap capacity, the room kept for a burst of timers due within one tick, empty
    /// top levels of its wheel, and the buffers that hold the
    /// cancels handed over from other threads (after removing those entries). Pending timers
    /// are unaffected.
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
            shard.shrink_to_fit();
        }
    }

    /// The tick this timer was built with.
    pub fn tick(&self) -> Duration {
        self.driver().tick()
    }

    /// Shuts the timer down: every pending sleep completes, every pending timeout resolves to
    /// an [`Elapsed`](crate::Elapsed) error whose [`is_shutdown`](crate::Elapsed::is_shutdown)
    /// is true, every pending delayed task resolves with a
    /// [shutdown error](crate::DelayedError::is_shutdown) without running, and the timer's
    /// Tokio sleep goes. Futures created afterwards resolve the same way at once; `try_*`
    /// methods return [`TimerError::Shutdown`](crate::TimerError::Shutdown), except
    /// [`try_spawn_after`](Timer::try_spawn_after) and [`try_spawn_at`](Timer::try_spawn_at),
    /// which, as `spawn_after` and `spawn_at` do, return a task already resolved with the
    /// shutdown error. Calling it again does nothing: a call made while another is still
    /// resolving the pending futures (from a waker that shutdown woke, or on another thread)
    /// returns at once, the futures already seeing the timer shut down, though
    /// [`pending`](Timer::pending) may count some until the first call has gone through them.
    ///
    /// An [`Interval`](crate::Interval) or [`DelayQueue`](crate::DelayQueue) of the timer goes
    /// on with Tokio's timer, on the timer's runtime while that lives and then on the runtime
    /// where it is polled: for this the timer keeps its one task on its runtime (idle: it
    /// wakes only to end) while anything refers to the timer: a handle, a future, a delayed
    /// task's handle, or, for a runtime's default timer, the crate's per-thread caches of it.
    ///
    /// A sleep or timeout whose deadline had already passed when the timer shut down counts
    /// as elapsed, not as shut down ([`Sleep::is_shutdown`](crate::Sleep::is_shutdown) is
    /// false), even if it is first polled afterwards. Not so a delayed task: one that had not
    /// started (its deadline passed, but no firing pass had spawned it yet) resolves with the
    /// shutdown error and never runs.
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

#[cfg(all(test, not(loom)))]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::mpsc;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use super::Timer;

    /// `{:?}` of every public type that reaches a timer never takes a shard's lock: each is
    /// formatted, in every state that has one, while another thread holds every shard's
    /// lock. A `Debug` that locked would wait for that thread, which lets go only after 10 s
    /// of real time, and the test then fails.
    #[test]
    fn debug_takes_no_shard_lock() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _entered = rt.enter();
        let timer = Timer::builder().shards(2).max_pending(100).build().unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let idle = timer.sleep(Duration::from_secs(10));
        let mut registered = timer.sleep(Duration::from_secs(10));
        assert!(Pin::new(&mut registered).poll(&mut cx).is_pending());
        let mut timeout = timer.timeout(Duration::from_secs(10), std::future::pending::<()>());
        assert!(Pin::new(&mut timeout).poll(&mut cx).is_pending());
        let delayed = timer.spawn_after(Duration::from_secs(10), async {});
        let mut interval = timer.try_interval(Duration::from_secs(10)).unwrap();
        assert!(interval.poll_tick(&mut cx).is_ready());
        assert!(interval.poll_tick(&mut cx).is_pending());
        let mut queue = timer.try_delay_queue::<u32>().unwrap();
        queue.insert(1, Duration::from_secs(10));
        assert!(queue.poll_expired(&mut cx).is_pending());
        let (io, _peer) = tokio::io::duplex(64);
        let idle_io = crate::IdleTimeout::builder()
            .idle(Duration::from_secs(10))
            .timer(timer.clone())
            .build(io);
        let metrics = timer.metrics();

        let (held_tx, held_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let holder = {
            let timer = timer.clone();
            std::thread::spawn(move || {
                let _locked = timer.lock_all();
                held_tx.send(()).unwrap();
                done_rx.recv_timeout(Duration::from_secs(10)).is_ok()
            })
        };
        held_rx.recv().unwrap();
        let out = [
            format!("{timer:?}"),
            format!("{idle:?}"),
            format!("{registered:?}"),
            format!("{timeout:?}"),
            format!("{delayed:?}"),
            format!("{interval:?}"),
            format!("{queue:?}"),
            format!("{idle_io:?}"),
            format!("{metrics:?}"),
            format!("{:?}", Timer::builder()),
        ];
        done_tx.send(()).unwrap();
        assert!(
            holder.join().unwrap(),
            "a Debug waited for the shard lock: {out:?}"
        );
        assert!(delayed.cancel());
    }
}
