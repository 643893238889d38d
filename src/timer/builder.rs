//! `Builder`: the settings of a [`Timer`], checked when it is built.

use std::time::Duration;

use super::Timer;
use crate::driver::Driver;
use crate::error::BuildError;
use crate::wheel::MAX_WHEEL_SIZE;

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
/// assert_eq!(err, BuildError::InvalidWheelSize { size: 100, max: 65536 });
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
    /// A multi-thread runtime's default timer's: other threads drop its futures' references
    /// to their shards in batches (see [`ShardRef`](crate::driver::shard_ref::ShardRef)).
    batch_drops: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            tick: Duration::from_millis(1),
            wheel_size: 64,
            max_pending: None,
            shards: None,
            batch_drops: false,
        }
    }
}

/// The most shards a timer may have (see [`Builder::shards`]).
pub(crate) const MAX_SHARDS: usize = 1024;

impl Builder {
    /// The width of one bucket of the lowest level (default 1 ms). Timers keep their deadline
    /// to the nanosecond and fire when the clock reaches it, so the tick does not limit
    /// precision: a coarser tick means fewer levels and less cascading, a
    /// finer one fewer timers per bucket. Tokio's own timer, which wakes the driver, has a 1 ms
    /// resolution: on a real clock timers fire within about that of their deadline, plus
    /// scheduling delay.
    ///
    /// A coarser tick costs no wakeups of its own: the driver wakes when the first timer of
    /// its earliest bucket is due, not at the bucket's start, and queues the tick's later
    /// timers by deadline then; a timer alone in its tick (or alone far away, several levels
    /// up) costs one firing pass, and the runtime as many wakeups as Tokio's own sleep. (A
    /// bucket keeps its earliest deadline as a lower bound: a timer cancelled, or moved later,
    /// beside others in its bucket may leave one pass at its old deadline.)
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
    /// `try_*` methods return [`TimerError::Full`](crate::TimerError::Full) and the other
    /// methods panic, until a timer fires or is cancelled.
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// Number of shards (independent wheels, each behind its own lock), between 1 and 1024;
    /// default: four per available CPU rounded up to a power of two, at most 64. More shards
    /// mean less contention between threads and a little more work per firing pass. A count
    /// out of range makes [`build`](Builder::build) fail with [`BuildError::ZeroShards`] or
    /// [`BuildError::TooManyShards`].
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Builds the timer on the current Tokio runtime, whose time driver will fire it.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] saying which setting is invalid ([`ZeroTick`](BuildError::ZeroTick),
    /// [`TickTooLarge`](BuildError::TickTooLarge),
    /// [`InvalidWheelSize`](BuildError::InvalidWheelSize),
    /// [`ZeroMaxPending`](BuildError::ZeroMaxPending), [`ZeroShards`](BuildError::ZeroShards),
    /// [`TooManyShards`](BuildError::TooManyShards)), or that there is no runtime to build
    /// on: [`NoRuntime`](BuildError::NoRuntime) outside a Tokio runtime,
    /// [`NoTimeDriver`](BuildError::NoTimeDriver) on one built without `enable_time()`.
    ///
    /// # Panics
    ///
    /// Never on its own account, with one caveat. Tokio (as of 1.54) has no way to ask whether
    /// a runtime has a time driver, so `build` finds out by creating a Tokio sleep and catching
    /// the panic Tokio raises without one. The panic hook still prints that panic before
    /// `NoTimeDriver` is returned, and in a program built with `panic = "abort"` the process
    /// aborts instead.
    pub fn build(self) -> Result<Timer, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        self.build_on(runtime)
    }

    /// `runtime`'s default timer, shut down with it. On a multi-thread runtime, threads
    /// running tasks may hold back references to the timer's shards, to drop them in
    /// batches (see [`ShardRef`](crate::driver::shard_ref::ShardRef)); a current-thread
    /// runtime's sleeps are made and dropped on the thread that blocks on it.
    pub(crate) fn for_runtime(mut self, runtime: &tokio::runtime::Handle) -> Builder {
        self.batch_drops = runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread;
        self
    }

    pub(crate) fn build_on(self, runtime: tokio::runtime::Handle) -> Result<Timer, BuildError> {
        if self.tick.is_zero() {
            return Err(BuildError::ZeroTick);
        }
        if u64::try_from(self.tick.as_nanos()).is_err() {
            return Err(BuildError::TickTooLarge);
        }
        if !self.wheel_size.is_power_of_two() || !(2..=MAX_WHEEL_SIZE).contains(&self.wheel_size) {
            return Err(BuildError::InvalidWheelSize {
                size: self.wheel_size,
                max: MAX_WHEEL_SIZE,
            });
        }
        if self.max_pending == Some(0) {
            return Err(BuildError::ZeroMaxPending);
        }
        match self.shards {
            Some(0) => return Err(BuildError::ZeroShards),
            Some(n) if n > MAX_SHARDS => {
                return Err(BuildError::TooManyShards {
                    shards: n,
                    max: MAX_SHARDS,
                })
            }
            _ => {}
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
        let (driver, shards) = Driver::new(
            self.tick,
            self.wheel_size,
            self.shards.unwrap_or_else(default_shards),
            self.max_pending.unwrap_or(usize::MAX),
            self.batch_drops,
            runtime,
        );
        driver.start();
        Ok(Timer::from_shards(shards))
    }
}

fn default_shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 4).next_power_of_two().min(64)
}
