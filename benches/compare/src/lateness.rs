//! How late timers fire, as a user sees it: sleeping tasks that record how late they woke
//! (the probe of the firing workloads, beside `sleep_systems.rs`, the systems they sleep on).
//!
//! One spawned task per deadline registers its sleep (polls it once, with its own waker, on
//! whichever worker runs it), reports that, then awaits the sleep and records
//! `Instant::now() - deadline`: the timer's lateness plus the wait for the woken task to run,
//! which is what a user's code sees.

use std::pin::pin;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::poll::poll_once;
use crate::sleep_systems::MakeSleep;

/// `spread * i / n`, the i-th of n points spread uniformly over `spread`.
pub(crate) fn spread_at(spread: Duration, i: usize, n: usize) -> Duration {
    Duration::from_nanos((spread.as_nanos() * i as u128 / n.max(1) as u128) as u64)
}

/// `a - b` in nanoseconds, negative when `a` is earlier.
pub(crate) fn signed_ns(a: Instant, b: Instant) -> i64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_nanos() as i64,
        None => -((b - a).as_nanos() as i64),
    }
}

/// `[p50, p99, max, early wakes]` of lateness samples in ns; the first three in µs.
pub(crate) fn lateness_stats(late_ns: &[i64]) -> [f64; 4] {
    let mut late = late_ns.to_vec();
    late.sort_unstable();
    let pct = |p: f64| match late.len() {
        0 => f64::NAN,
        n => late[((n - 1) as f64 * p).round() as usize] as f64 / 1e3,
    };
    let early = late.iter().filter(|&&l| l < 0).count();
    [pct(0.50), pct(0.99), pct(1.0), early as f64]
}

/// Spawns `n` tasks that each register a one-hour sleep made by `make` and drop it, and waits
/// for them: how long registering that many sleepers takes here and now.
async fn registration_time<M: MakeSleep>(n: usize, make: M) -> Duration {
    let start = std::time::Instant::now();
    let far = Instant::now() + Duration::from_secs(3600);
    let handles: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                assert!(poll_once(pin!(make(far))).await.is_pending());
            })
        })
        .collect();
    for h in handles {
        h.await.expect("a calibration task panicked");
    }
    start.elapsed()
}

/// A lead before the first deadline long enough for `n` sleepers to register first: `base` plus
/// twice the registration time, measured on a tenth of them just before, so that even a slow or
/// busy machine registers all before the first one is due.
pub(crate) async fn lead_for<M: MakeSleep>(n: usize, make: M, base: Duration) -> Duration {
    base + registration_time(n / 10, make).await * 20
}

/// The sleepers of one run, and what they record.
#[derive(Debug)]
pub(crate) struct Sleepers {
    /// The instant the deadlines count from.
    pub(crate) start: Instant,
    /// From `start` to the first deadline.
    pub(crate) lead: Duration,
    deadlines: Vec<Instant>,
    /// Per sleeper: wake time minus deadline, in ns (negative: early).
    lateness: Vec<AtomicI64>,
    registered: AtomicUsize,
    /// When the last sleeper registered, in ns after `start`.
    registered_at: AtomicU64,
    all_registered: Notify,
    /// The latest wake, in ns after `start`.
    last_wake: AtomicU64,
    done: AtomicUsize,
    all_done: Notify,
}

impl Sleepers {
    /// Spawns `n` sleepers with deadlines spread uniformly over `spread`, the first one far
    /// enough ahead for all of them to register before it: `base_lead` plus twice the time
    /// registering them takes, measured on a tenth of them just before (the workloads check
    /// [`registered_at`](Self::registered_at) against it).
    pub(crate) async fn spread_over<M: MakeSleep>(
        n: usize,
        spread: Duration,
        base_lead: Duration,
        make: M,
    ) -> Arc<Self> {
        let lead = lead_for(n, make, base_lead).await;
        let start = Instant::now();
        let deadlines = (0..n)
            .map(|i| start + lead + spread_at(spread, i, n))
            .collect();
        Self::spawn(start, deadlines, make)
    }

    /// Spawns one task per deadline (the first thing each does is register its sleep).
    pub(crate) fn spawn<M: MakeSleep>(
        start: Instant,
        deadlines: Vec<Instant>,
        make: M,
    ) -> Arc<Self> {
        let n = deadlines.len();
        let first = deadlines.iter().min().copied().unwrap_or(start);
        let me = Arc::new(Sleepers {
            start,
            lead: first.saturating_duration_since(start),
            lateness: (0..n).map(|_| AtomicI64::new(0)).collect(),
            deadlines,
            registered: AtomicUsize::new(0),
            registered_at: AtomicU64::new(0),
            all_registered: Notify::new(),
            last_wake: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            all_done: Notify::new(),
        });
        for i in 0..n {
            let me = me.clone();
            tokio::spawn(async move {
                let deadline = me.deadlines[i];
                let mut sleep = pin!(make(deadline));
                let first = poll_once(sleep.as_mut()).await;
                if me.registered.fetch_add(1, AcqRel) + 1 == n {
                    me.registered_at
                        .store(me.since_start(Instant::now()), Relaxed);
                    me.all_registered.notify_one();
                }
                if first.is_pending() {
                    sleep.await;
                }
                let now = Instant::now();
                me.lateness[i].store(signed_ns(now, deadline), Relaxed);
                me.last_wake.fetch_max(me.since_start(now), Relaxed);
                if me.done.fetch_add(1, AcqRel) + 1 == n {
                    me.all_done.notify_one();
                }
            });
        }
        me
    }

    fn since_start(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }

    /// Waits until every sleeper has registered its sleep.
    pub(crate) async fn all_registered(&self) {
        while self.registered.load(Acquire) < self.deadlines.len() {
            self.all_registered.notified().await;
        }
    }

    /// Waits until every sleeper has woken.
    pub(crate) async fn all_woken(&self) {
        while self.done.load(Acquire) < self.deadlines.len() {
            self.all_done.notified().await;
        }
    }

    /// When the last sleeper registered, after `start`.
    pub(crate) fn registered_at(&self) -> Duration {
        Duration::from_nanos(self.registered_at.load(Relaxed))
    }

    /// When the last sleeper woke, after `start`.
    pub(crate) fn last_wake(&self) -> Duration {
        Duration::from_nanos(self.last_wake.load(Relaxed))
    }

    /// Each sleeper's deadline and lateness in ns, in the order of the deadlines given.
    pub(crate) fn lateness(&self) -> impl Iterator<Item = (Instant, i64)> + '_ {
        self.deadlines
            .iter()
            .zip(&self.lateness)
            .map(|(&d, l)| (d, l.load(Relaxed)))
    }

    /// Every sleeper's lateness in ns.
    pub(crate) fn lateness_ns(&self) -> Vec<i64> {
        self.lateness().map(|(_, l)| l).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_percentiles_and_early_wakes() {
        let late: Vec<i64> = (1..=100).map(|us| us * 1000).chain([-5]).collect();
        let [p50, p99, max, early] = lateness_stats(&late);
        assert_eq!((p50, p99, max, early), (50.0, 99.0, 100.0, 1.0));
        assert!(lateness_stats(&[])[0].is_nan());
        assert_eq!(
            spread_at(Duration::from_secs(1), 1, 4),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn sleepers_record_their_lateness() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let deadlines = vec![start + Duration::from_millis(2), start];
            let s = Sleepers::spawn(start, deadlines, tokio::time::sleep_until);
            s.all_registered().await;
            s.all_woken().await;
            let late = s.lateness_ns();
            assert!(late.iter().all(|&l| l >= 0), "{late:?}");
            assert!(s.last_wake() >= Duration::from_millis(2));
        });
    }
}
