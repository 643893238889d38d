//! `TimerMetrics`: counters of a timer's internal work, for dashboards and tests.

use crate::lateness::Lateness;

/// A snapshot of a [`Timer`](crate::Timer)'s counters, summed over its shards.
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
/// timer.sleep(Duration::from_secs(3600)).await;
/// let m = timer.metrics();
/// // An hour-long sleep costs one firing pass, at its deadline, not 3.6 million ticks.
/// assert_eq!(m.passes, 1, "{m:?}");
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerMetrics {
    /// Timers currently in the wheel.
    pub pending: usize,
    /// Firing passes over the shards: one each time the timer's alarm (its Tokio sleep)
    /// fired, or work filed for a time already passed was handed out at once.
    pub passes: u64,
    /// Entries moved down a level when their bucket expired.
    pub cascades: u64,
    /// Buckets flushed.
    pub bucket_flushes: u64,
    /// Buckets pushed into the bucket heap (the min-heap of bucket expirations).
    pub heap_pushes: u64,
    /// The most levels any shard's wheel currently has.
    pub levels: usize,
    /// How late fired timers were, since the timer was built (see [`Lateness`]).
    pub lateness: Lateness,
}
