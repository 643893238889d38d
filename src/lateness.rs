//! `Lateness`: how late a timer's entries fired, as a histogram of power-of-two buckets.

use std::fmt;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Duration;

use crate::loom::AtomicU64;

/// Buckets: under 1 µs, then `[2^(i-1), 2^i)` µs for `i` in `1..31`, then 2^30 µs (about
/// 18 minutes) and more.
const BUCKETS: usize = 32;

/// How late the entries a [`Timer`](crate::Timer) fired were: the time from each entry's
/// deadline to the start of the firing pass that woke it (how late Tokio woke the timer; the
/// pass reads the clock once, as it starts, so the time it then spends waking the entries
/// before an entry is not counted: in a pass that wakes very many, the last are woken that
/// much later than their figure says), counted in a histogram of power-of-two buckets (under 1 µs, 1-2 µs, 2-4 µs, ...,
/// 2^30 µs and more), with the largest lateness seen.
///
/// Part of [`TimerMetrics`](crate::TimerMetrics), counted since the timer was built. For
/// figures over a window (since the last scrape), keep the previous snapshot and take
/// [`since`](Lateness::since). Quantiles are bucket upper bounds: "p99 at most 2 ms".
///
/// Cost: the pass reads the clock once, as it always does, and adds each fired entry to a
/// histogram of its own (a subtraction and a few instructions per entry), folded into the
/// timer's counters once per pass. Registering and cancelling pay nothing.
///
/// What counts: every firing of a wheel entry (a sleep, timeout, delayed task, an interval's
/// tick, a delay queue's registration). A `Sleep` reset to a later deadline is re-filed when
/// its first entry fires, and that firing counts too (it was on time for the old deadline).
/// A sleep, timeout or delayed task whose deadline has passed when it is first polled (a
/// delayed task: created) completes without entering the wheel, and is not counted, if its
/// deadline was given as an instant (`sleep_until`, `timeout_at`, `spawn_at`) or its
/// duration is zero. One made with a non-zero duration reads no clock on its first poll: if
/// that poll comes after its deadline, it is filed, fires on the timer's next pass and
/// counts as late from its deadline (unless the wheel's time has already passed it). A
/// delayed task [reset](crate::DelayedTask::reset) to an earlier instant already in the past is
/// due at once and counts as late from the reset, not from that instant (a reset to a later
/// instant reads no clock: if that instant has passed too, the timer was late for the old
/// deadline already, and the entry counts as late from the new one). An
/// [`Interval`](crate::Interval)'s tick already due when polled (the loop body took longer
/// than a period) completes on that poll without firing, and is not counted either: a slow
/// consumer does not show as lateness.
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
/// let before = timer.metrics().lateness;
/// let slow = tokio::spawn(timer.sleep(Duration::from_millis(10)));
/// tokio::task::yield_now().await; // the sleep registers
/// // The runtime is held up: the clock jumps 50 ms before anything fires.
/// tokio::time::advance(Duration::from_millis(50)).await;
/// slow.await.unwrap();
///
/// let window = timer.metrics().lateness.since(&before);
/// assert_eq!(window.count(), 1);
/// assert!(window.max() >= Duration::from_millis(40));
/// assert_eq!(window.later_than(Duration::from_millis(10)), 1);
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Lateness {
    buckets: [u64; BUCKETS],
    max: Duration,
}

impl Lateness {
    /// Entries fired.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The largest lateness (exact for a snapshot; for a [`since`](Lateness::since) window,
    /// the upper bound of its highest non-empty bucket, or the all-time largest if smaller).
    /// Never below an entry the snapshot counts, even one taken while a pass adds its
    /// figures (which may already include in `max` an entry it does not count yet).
    pub fn max(&self) -> Duration {
        self.max
    }

    /// At most how late the fraction `q` (0.0 to 1.0) of the entries were: the upper bound of
    /// the bucket holding the `q`-quantile (never above [`max`](Lateness::max)); zero if
    /// nothing fired.
    ///
    /// # Panics
    ///
    /// If `q` is not within `0.0..=1.0`.
    pub fn quantile(&self, q: f64) -> Duration {
        assert!((0.0..=1.0).contains(&q), "quantile {q} outside 0.0..=1.0");
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper_bound(i).min(self.max);
            }
        }
        self.max
    }

    /// [`quantile(0.5)`](Lateness::quantile).
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// [`quantile(0.99)`](Lateness::quantile).
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// How many entries fired at least `threshold` late, to bucket precision: `threshold` is
    /// rounded up to a bucket boundary (a power of two microseconds), so this counts the
    /// entries at least that late (10 ms counts those 16.384 ms late or more). Past 2^30 µs
    /// (about 18 minutes) there is no boundary left: a larger threshold counts nothing, however
    /// late the entries were (see [`max`](Lateness::max)).
    pub fn later_than(&self, threshold: Duration) -> u64 {
        let first = (0..BUCKETS)
            .find(|&i| lower_bound(i) >= threshold)
            .unwrap_or(BUCKETS);
        self.buckets[first..].iter().sum()
    }

    /// The entries counted in `self` but not in `earlier`, an older snapshot of the same
    /// timer: the window between two reads.
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let mut buckets = [0; BUCKETS];
        for (i, b) in buckets.iter_mut().enumerate() {
            *b = self.buckets[i].saturating_sub(earlier.buckets[i]);
        }
        let top = buckets.iter().rposition(|&n| n > 0);
        Lateness {
            buckets,
            max: top.map_or(Duration::ZERO, |i| upper_bound(i).min(self.max)),
        }
    }

    /// The histogram: for each non-empty bucket, its lower and upper bound and its count.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, Duration, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (lower_bound(i), upper_bound(i), n))
    }
}

impl fmt::Debug for Lateness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lateness")
            .field("count", &self.count())
            .field("p50", &self.p50())
            .field("p99", &self.p99())
            .field("max", &self.max)
            .finish()
    }
}

/// The bucket of a lateness of `ns` nanoseconds.
fn bucket_of(ns: u64) -> usize {
    let us = ns / 1000;
    if us == 0 {
        0
    } else {
        ((64 - us.leading_zeros()) as usize).min(BUCKETS - 1)
    }
}

fn lower_bound(i: usize) -> Duration {
    if i == 0 {
        Duration::ZERO
    } else {
        Duration::from_micros(1 << (i - 1))
    }
}

fn upper_bound(i: usize) -> Duration {
    if i == BUCKETS - 1 {
        Duration::MAX
    } else {
        Duration::from_micros(1 << i)
    }
}

/// One pass's lateness figures, kept on the stack of the pass.
#[derive(Debug, Default)]
pub(crate) struct PassLateness {
    buckets: [u64; BUCKETS],
    max_ns: u64,
}

impl PassLateness {
    /// An entry due at `deadline` fired at `now` (wheel time, nanoseconds).
    #[inline]
    pub(crate) fn record(&mut self, deadline: u64, now: u64) {
        let late = now.saturating_sub(deadline);
        self.buckets[bucket_of(late)] += 1;
        self.max_ns = self.max_ns.max(late);
    }
}

/// A timer's lateness counters, added to once per pass.
#[derive(Debug, Default)]
pub(crate) struct LatenessCounters {
    buckets: [AtomicU64; BUCKETS],
    max_ns: AtomicU64,
}

impl LatenessCounters {
    /// Folds a pass's figures in (one atomic add per non-empty bucket).
    ///
    /// The max first, then the counts, released: a [`snapshot`](Self::snapshot) that reads
    /// an entry's count reads a max that covers it. (It may read a max whose entry it does
    /// not count yet, which no figure of [`Lateness`] contradicts.)
    pub(crate) fn add(&self, pass: &PassLateness) {
        self.max_ns.fetch_max(pass.max_ns, Relaxed);
        for (counter, &n) in self.buckets.iter().zip(&pass.buckets) {
            if n > 0 {
                counter.fetch_add(n, Release);
            }
        }
    }

    /// The counts, acquired, then the max (see [`add`](Self::add)).
    pub(crate) fn snapshot(&self) -> Lateness {
        let mut buckets = [0; BUCKETS];
        for (b, counter) in buckets.iter_mut().zip(&self.buckets) {
            *b = counter.load(Acquire);
        }
        Lateness {
            buckets,
            max: Duration::from_nanos(self.max_ns.load(Relaxed)),
        }
    }
}

#[cfg(test)]
mod loom_tests {
    use std::sync::Arc;

    #[cfg(loom)]
    use loom::thread;
    #[cfg(not(loom))]
    use std::thread;

    use super::{lower_bound, LatenessCounters, PassLateness};
    use crate::loom::model;

    /// A snapshot taken while a pass folds its figures in never counts an entry later than
    /// the snapshot's `max`: its quantiles and `later_than` never contradict `max`.
    #[test]
    fn loom_lateness_snapshot_max_covers_every_counted_entry() {
        model(|| {
            let counters = Arc::new(LatenessCounters::default());
            let c = counters.clone();
            let pass = thread::spawn(move || {
                let mut pass = PassLateness::default();
                pass.record(0, 40_000_000); // 40 ms late
                c.add(&pass);
            });
            let snap = counters.snapshot();
            if let Some(top) = snap.buckets.iter().rposition(|&n| n > 0) {
                assert!(
                    lower_bound(top) <= snap.max(),
                    "counted an entry at least {:?} late, but max is {:?}",
                    lower_bound(top),
                    snap.max()
                );
                assert!(snap.quantile(1.0) >= lower_bound(top));
            }
            pass.join().unwrap();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lateness(ns: &[u64]) -> Lateness {
        let counters = LatenessCounters::default();
        let mut pass = PassLateness::default();
        for &n in ns {
            pass.record(1_000_000, 1_000_000 + n);
        }
        counters.add(&pass);
        counters.snapshot()
    }

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(1_000), 1);
        assert_eq!(bucket_of(1_999), 1);
        assert_eq!(bucket_of(2_000), 2);
        assert_eq!(bucket_of(1_000_000), 10); // 1 ms: [512 µs, 1024 µs)
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for i in 0..BUCKETS - 1 {
            assert_eq!(upper_bound(i), lower_bound(i + 1));
            assert_eq!(bucket_of(lower_bound(i).as_nanos() as u64), i);
        }
    }

    #[test]
    fn quantiles_max_and_threshold_counts() {
        // 98 on time, one 3 ms late, one 40 ms late.
        let mut ns = vec![0; 98];
        ns.extend([3_000_000, 40_000_000]);
        let l = lateness(&ns);
        assert_eq!(l.count(), 100);
        assert_eq!(l.p50(), Duration::from_micros(1));
        assert_eq!(l.quantile(0.99), Duration::from_micros(4096)); // the 3 ms one's bucket
        assert_eq!(
            l.quantile(1.0),
            Duration::from_millis(40),
            "capped by the max"
        );
        assert_eq!(l.max(), Duration::from_millis(40));
        assert_eq!(l.later_than(Duration::from_millis(2)), 2);
        assert_eq!(l.later_than(Duration::from_millis(10)), 1);
        assert_eq!(l.later_than(Duration::from_secs(3600)), 0);
        let hours = lateness(&[7_200_000_000_000]); // two hours late
        assert_eq!(hours.later_than(Duration::from_secs(60)), 1);
        assert_eq!(
            hours.later_than(Duration::from_secs(3600)),
            0,
            "no boundary left"
        );
        assert_eq!(hours.max(), Duration::from_secs(7200));
        assert_eq!(Lateness::default().p99(), Duration::ZERO);
    }

    #[test]
    fn a_window_is_the_difference_of_two_snapshots() {
        let counters = LatenessCounters::default();
        let mut pass = PassLateness::default();
        pass.record(0, 50_000_000);
        counters.add(&pass);
        let before = counters.snapshot();
        let mut pass = PassLateness::default();
        pass.record(0, 1_500);
        pass.record(0, 1_700);
        counters.add(&pass);
        let window = counters.snapshot().since(&before);
        assert_eq!(window.count(), 2);
        assert_eq!(
            window.max(),
            Duration::from_micros(2),
            "its top bucket's bound"
        );
        assert_eq!(window.later_than(Duration::from_millis(1)), 0);
        let b: Vec<_> = window.buckets().collect();
        assert_eq!(b, [(Duration::from_micros(1), Duration::from_micros(2), 2)]);
    }
}
