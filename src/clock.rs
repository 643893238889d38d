//! The one place that converts between `tokio::time::Instant` and wheel ticks.
//!
//! Deadlines round up and "now" rounds down, so an entry is never handed out before its
//! deadline; everything saturates instead of overflowing.

use std::time::Duration;

use tokio::time::Instant;

/// Far enough in the future to mean "never" (about 30 years), as tokio does.
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// `now + dur`, saturating at [`far_future`].
pub(crate) fn deadline_after(dur: Duration) -> Instant {
    Instant::now().checked_add(dur).unwrap_or_else(far_future)
}

/// Converts instants to ticks of a fixed width, counted from an origin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    tick_ns: u64,
    /// Ticks per second when the tick divides one second evenly (the fast path), else 0.
    per_sec: u64,
}

impl Clock {
    /// A clock starting now. `tick` must be between 1 ns and `u64::MAX` ns (the builder checks).
    pub(crate) fn new(tick: Duration) -> Clock {
        let tick_ns = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_ns > 0, "tick checked by the builder");
        let per_sec = if 1_000_000_000 % tick_ns == 0 {
            1_000_000_000 / tick_ns
        } else {
            0
        };
        Clock {
            origin: Instant::now(),
            tick_ns,
            per_sec,
        }
    }

    pub(crate) fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_ns)
    }

    /// The first tick at or after `deadline` (rounded up, saturating at `u64::MAX`).
    pub(crate) fn deadline_to_tick(&self, deadline: Instant) -> u64 {
        let d = deadline.saturating_duration_since(self.origin);
        if self.per_sec != 0 {
            let sub = u64::from(d.subsec_nanos()).div_ceil(self.tick_ns);
            d.as_secs()
                .checked_mul(self.per_sec)
                .and_then(|t| t.checked_add(sub))
                .unwrap_or(u64::MAX)
        } else {
            let ticks = d.as_nanos().div_ceil(u128::from(self.tick_ns));
            u64::try_from(ticks).unwrap_or(u64::MAX)
        }
    }

    /// The last tick at or before `now` (rounded down).
    pub(crate) fn now_to_tick(&self, now: Instant) -> u64 {
        let d = now.saturating_duration_since(self.origin);
        if self.per_sec != 0 {
            let sub = u64::from(d.subsec_nanos()) / self.tick_ns;
            d.as_secs()
                .checked_mul(self.per_sec)
                .and_then(|t| t.checked_add(sub))
                .unwrap_or(u64::MAX)
        } else {
            u64::try_from(d.as_nanos() / u128::from(self.tick_ns)).unwrap_or(u64::MAX)
        }
    }

    /// The instant at which `tick` begins, saturating at [`far_future`].
    pub(crate) fn tick_to_instant(&self, tick: u64) -> Instant {
        let ns = u128::from(tick) * u128::from(self.tick_ns);
        let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
        let dur = Duration::new(secs, (ns % 1_000_000_000) as u32);
        let far = far_future();
        match self.origin.checked_add(dur) {
            Some(t) if t < far => t,
            _ => far,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deadlines_round_up_and_now_rounds_down() {
        for tick in [Duration::from_millis(1), Duration::from_micros(300)] {
            let c = Clock::new(tick);
            let o = Instant::now();
            assert_eq!(c.deadline_to_tick(o), 0);
            assert_eq!(c.deadline_to_tick(o + Duration::from_nanos(1)), 1);
            assert_eq!(c.deadline_to_tick(o + tick), 1);
            assert_eq!(c.deadline_to_tick(o + tick + Duration::from_nanos(1)), 2);
            assert_eq!(c.now_to_tick(o + tick - Duration::from_nanos(1)), 0);
            assert_eq!(c.now_to_tick(o + tick), 1);
            assert_eq!(c.tick_to_instant(7), o + tick * 7);
            // Never early: the tick a deadline maps to starts at or after the deadline.
            for ns in [1u64, 999_999, 1_000_001, 123_456_789, 5_000_000_000] {
                let d = o + Duration::from_nanos(ns);
                assert!(c.tick_to_instant(c.deadline_to_tick(d)) >= d);
                assert!(c.tick_to_instant(c.now_to_tick(d)) <= d);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn saturates_instead_of_overflowing() {
        let c = Clock::new(Duration::from_nanos(1));
        let far = far_future();
        assert!(c.deadline_to_tick(far) > 0);
        // Before the origin counts as tick 0.
        let c = Clock::new(Duration::from_millis(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        let c2 = Clock::new(Duration::from_millis(1));
        assert_eq!(
            c2.deadline_to_tick(Instant::now() - Duration::from_millis(5)),
            0
        );
        assert_eq!(
            c.tick_to_instant(u64::MAX),
            far_future(),
            "saturates at the far future"
        );
        // A huge tick that does not divide a second takes the slow path.
        let c = Clock::new(Duration::from_secs(7));
        assert_eq!(
            c.deadline_to_tick(Instant::now() + Duration::from_secs(8)),
            2
        );
        assert_eq!(deadline_after(Duration::MAX), far_future());
    }
}
