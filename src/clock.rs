//! The one place that converts between `tokio::time::Instant` and wheel time.
//!
//! Wheel time counts nanoseconds since the timer was built, in a `u64`: exact for any tick,
//! and good for 584 years. Deadlines and "now" convert exactly; everything saturates instead
//! of overflowing, and "now" stops one short of `u64::MAX`, so a deadline beyond the horizon
//! (which saturates to `u64::MAX`) waits forever rather than firing early. A `DelayQueue`'s
//! clock starts years before its first reading ([`Clock::reaching_back`]).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::Builder;
use tokio::time::Instant;

/// Whether this build's Tokio can pause its clocks (its `test-util` feature is compiled in).
///
/// Without it every runtime reads the one monotonic clock, so `Instant::now()` means the same
/// on any thread; with it, each runtime may keep its own paused clock, and a timer must read
/// the clock of its own runtime. Found once, at run time, by method resolution:
/// `Builder::start_paused` exists only with `test-util`, and an inherent method is preferred
/// over this module's stand-in trait method of the same name; their return types differ.
pub(crate) fn clocks_can_pause() -> bool {
    static PAUSABLE: OnceLock<bool> = OnceLock::new();
    *PAUSABLE.get_or_init(|| {
        let mut builder = Builder::new_current_thread();
        builder.start_paused(false).has_start_paused()
    })
}

/// The answer when Tokio has no `start_paused` (never constructed with `test-util`).
#[allow(dead_code)]
struct Absent;

/// Reached by `builder.start_paused(..)` only when Tokio has no inherent method of that name.
#[allow(dead_code)]
trait StandIn {
    fn start_paused(&mut self, _: bool) -> Absent;
}

impl StandIn for Builder {
    fn start_paused(&mut self, _: bool) -> Absent {
        Absent
    }
}

/// Which `start_paused` answered.
trait Answer {
    fn has_start_paused(&self) -> bool;
}

impl Answer for Absent {
    fn has_start_paused(&self) -> bool {
        false
    }
}

impl Answer for &mut Builder {
    fn has_start_paused(&self) -> bool {
        true
    }
}

/// The longest a sleep waits, about 30 years: Tokio's `sleep` caps its duration there, and
/// its far future lies there.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Far enough from `now` to mean "never" (about 30 years), as tokio does.
pub(crate) fn far_future(now: Instant) -> Instant {
    now + MAX_DELAY
}

/// A sleep's deadline, as Tokio's `sleep` sets it: `now + dur`, `dur` capped at
/// [`MAX_DELAY`].
#[inline]
pub(crate) fn sleep_deadline(now: Instant, dur: Duration) -> Instant {
    deadline_after(now, dur.min(MAX_DELAY))
}

/// `now + dur`, saturating at [`far_future`].
#[inline]
pub(crate) fn deadline_after(now: Instant, dur: Duration) -> Instant {
    now.checked_add(dur).unwrap_or_else(|| far_future(now))
}

/// Farther than wheel time reaches from any origin at or before now (2^64 ns is about 584.5
/// years): a deadline this far converts to `u64::MAX`, which time never reaches.
const BEYOND_HORIZON: Duration = Duration::from_secs(600 * 365 * 86_400);

/// A timeout's deadline: `now + dur`, or for a duration too large to add, a deadline never
/// reached (past the horizon; [`far_future`] where instants do not reach that far), as
/// Tokio's `timeout` then sets no deadline at all.
#[inline]
pub(crate) fn deadline_after_or_never(now: Instant, dur: Duration) -> Instant {
    now.checked_add(dur).unwrap_or_else(|| never_after(now))
}

/// A deadline past the horizon of every clock started at or before `now`.
#[cold]
fn never_after(now: Instant) -> Instant {
    now.checked_add(BEYOND_HORIZON)
        .unwrap_or_else(|| far_future(now))
}

/// Converts instants to wheel time (nanoseconds since an origin) and back.
#[derive(Debug)]
pub(crate) struct Clock {
    origin: Instant,
    tick: Duration,
}

impl Clock {
    /// A clock starting now, for a wheel whose level-0 buckets are `tick` wide.
    pub(crate) fn new(tick: Duration) -> Clock {
        Clock {
            origin: Instant::now(),
            tick,
        }
    }

    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }

    /// The width of a level-0 bucket in wheel time (nanoseconds, at least 1, saturating).
    pub(crate) fn tick_units(&self) -> u64 {
        u64::try_from(self.tick.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Nanoseconds from the origin to `t` (0 before it), saturating at `u64::MAX`.
    fn units(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.origin);
        d.as_secs()
            .checked_mul(1_000_000_000)
            .and_then(|ns| ns.checked_add(u64::from(d.subsec_nanos())))
            .unwrap_or(u64::MAX)
    }

    /// The wheel time of `deadline`, exact, saturating at `u64::MAX` (which never fires).
    pub(crate) fn deadline_to_units(&self, deadline: Instant) -> u64 {
        self.units(deadline)
    }

    /// The wheel time of `now`, exact, saturating at `u64::MAX - 1`: time never reaches a
    /// deadline that saturated, so nothing fires early past the horizon.
    pub(crate) fn now_to_units(&self, now: Instant) -> u64 {
        self.units(now).min(u64::MAX - 1)
    }

    /// The instant of wheel time `units`, for a time already reached (it needs no clock
    /// reading to clamp): the origin if the platform's instants do not reach it.
    pub(crate) fn at_units(&self, units: u64) -> Instant {
        self.origin
            .checked_add(Duration::from_nanos(units))
            .unwrap_or(self.origin)
    }

    /// The instant of wheel time `units`, saturating at [`far_future`] of `now`.
    pub(crate) fn units_to_instant(&self, units: u64, now: Instant) -> Instant {
        let far = far_future(now);
        match self.origin.checked_add(Duration::from_nanos(units)) {
            Some(t) if t < far => t,
            _ => far,
        }
    }
}

/// How far before now [`Clock::reaching_back`] starts (about 146 years): deadlines already
/// past by up to this much keep their order (a caller's "long ago", such as now less a decade,
/// is among them); wheel time then reaches about 438 years ahead.
const REACH_BACK: Duration = Duration::from_nanos(1 << 62);

impl Clock {
    /// A clock whose origin lies [`REACH_BACK`] before now (or as far back as this
    /// platform's instants go), for a `DelayQueue`: deadlines that had already passed when it
    /// started convert to distinct wheel times, and keep their order.
    pub(crate) fn reaching_back(tick: Duration) -> Clock {
        let now = Instant::now();
        let mut back = REACH_BACK;
        let origin = loop {
            match now.checked_sub(back) {
                Some(origin) => break origin,
                None if back > Duration::from_secs(1) => back /= 2,
                None => break now,
            }
        };
        Clock { origin, tick }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn conversions_are_exact_in_both_directions() {
        for tick in [
            Duration::from_millis(1),
            Duration::from_millis(10),
            Duration::from_micros(300),
            Duration::from_nanos(1),
        ] {
            let c = Clock::new(tick);
            let o = Instant::now();
            assert_eq!(c.deadline_to_units(o), 0);
            for ns in [
                1u64,
                999_999,
                1_000_000,
                1_000_001,
                123_456_789,
                5_000_000_000,
            ] {
                let t = o + Duration::from_nanos(ns);
                assert_eq!(c.deadline_to_units(t), ns);
                assert_eq!(c.now_to_units(t), ns);
                assert_eq!(c.units_to_instant(ns, o), t);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn tick_units_is_the_tick_in_nanoseconds() {
        assert_eq!(
            Clock::new(Duration::from_millis(10)).tick_units(),
            10_000_000
        );
        assert_eq!(Clock::new(Duration::from_nanos(1)).tick_units(), 1);
        assert_eq!(Clock::new(Duration::MAX).tick_units(), u64::MAX);
    }

    const YEAR_MS: Duration = Duration::from_millis(365 * 86_400_000);

    #[tokio::test(start_paused = true)]
    async fn saturates_instead_of_overflowing_and_never_fires_past_the_horizon() {
        let c = Clock::new(Duration::from_nanos(1));
        let far = far_future(Instant::now());
        assert!(c.deadline_to_units(far) > 0);
        assert!(
            c.deadline_to_units(far) < u64::MAX,
            "30 years fit in u64 nanoseconds"
        );
        // Before the origin counts as 0.
        tokio::time::advance(Duration::from_secs(1)).await;
        let c2 = Clock::new(Duration::from_millis(1));
        assert_eq!(
            c2.deadline_to_units(Instant::now() - Duration::from_millis(5)),
            0
        );
        let now = Instant::now();
        assert_eq!(
            c.units_to_instant(u64::MAX, now),
            far_future(now),
            "saturates at the far future"
        );
        // Past 2^64 ns a deadline saturates to u64::MAX and "now" stops one short of it.
        let beyond = Instant::now() + Duration::from_secs(600 * 365 * 86_400);
        assert_eq!(c.deadline_to_units(beyond), u64::MAX);
        assert_eq!(c.now_to_units(beyond), u64::MAX - 1);
        assert_eq!(deadline_after(now, Duration::MAX), far_future(now));
        // A sleep waits 30 years at most, as Tokio's: not a century, though that adds.
        let century = Duration::from_secs(100 * 365 * 86_400);
        assert_eq!(deadline_after(now, century), now + century);
        assert_eq!(sleep_deadline(now, century), far_future(now));
        assert_eq!(sleep_deadline(now, Duration::MAX), far_future(now));
        assert_eq!(sleep_deadline(now, YEAR_MS), now + YEAR_MS);
        // A timeout's overflowing deadline is past the horizon: never reached.
        let never = deadline_after_or_never(now, Duration::MAX);
        assert_eq!(c.deadline_to_units(never), u64::MAX);
        assert_eq!(deadline_after_or_never(now, YEAR_MS), now + YEAR_MS);
    }
}
