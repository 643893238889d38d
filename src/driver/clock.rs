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

/// log2 of the time units per tick, at most: a 1 ms tick is counted in units of 1/1024 ms.
pub(crate) const SUBTICK_SHIFT: u32 = 10;

/// Converts instants to the wheel's time: units of `tick / 2^sub_shift`, counted from an
/// origin. The wheel's level-0 buckets are one tick (`2^sub_shift` units) wide, and entries
/// keep their deadline in units, so timers fire as precisely as the runtime's timer allows,
/// not just to the tick.
#[derive(Debug)]
pub(crate) struct Clock {
    origin: Instant,
    tick_ns: u64,
    /// log2 of units per tick: `SUBTICK_SHIFT`, or fewer for ticks under 1024 ns, so a unit is
    /// never finer than a nanosecond and `u64` units span at least 584 years.
    sub_shift: u32,
    /// Units per second when that is a whole number (the fast path), else 0.
    per_sec: u64,
    /// `floor((2^64 - 1) / tick_ns)`: divides by the tick with a multiplication (see
    /// [`div_tick`](Self::div_tick)); a hardware division is most of a conversion's cost.
    recip: u64,
}

impl Clock {
    /// A clock starting now. `tick` must be between 1 ns and `u64::MAX` ns (the builder checks).
    pub(crate) fn new(tick: Duration) -> Clock {
        let tick_ns = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_ns > 0, "tick checked by the builder");
        let sub_shift = SUBTICK_SHIFT.min(63 - tick_ns.leading_zeros());
        let units_per_sec = 1_000_000_000u128 << sub_shift;
        let per_sec = if units_per_sec % u128::from(tick_ns) == 0 {
            u64::try_from(units_per_sec / u128::from(tick_ns)).unwrap_or(0)
        } else {
            0
        };
        Clock {
            origin: Instant::now(),
            tick_ns,
            sub_shift,
            per_sec,
            recip: u64::MAX / tick_ns,
        }
    }

    /// `x / tick_ns`, rounded up or down, for `x < 2^40` (a sub-second count of units times
    /// `tick_ns`). The estimate `x * recip / 2^64` is the exact quotient or one less, since
    /// `x * recip / 2^64 > x / tick_ns - x * (tick_ns + 1) / (tick_ns * 2^64)` and that error
    /// is below `2^-23` for such `x`; one comparison corrects it.
    fn div_tick(&self, x: u64, round_up: bool) -> u64 {
        debug_assert!(x < 1 << 40);
        let mut q = ((u128::from(x) * u128::from(self.recip)) >> 64) as u64;
        let mut rem = x - q * self.tick_ns;
        if rem >= self.tick_ns {
            q += 1;
            rem -= self.tick_ns;
        }
        q + u64::from(round_up && rem != 0)
    }

    pub(crate) fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_ns)
    }

    /// log2 of units per tick: the width of the wheel's level-0 buckets.
    pub(crate) fn sub_shift(&self) -> u32 {
        self.sub_shift
    }

    /// `ns * units_per_tick / tick_ns`, rounded up or down, saturating.
    fn ns_to_units(&self, d: Duration, round_up: bool) -> u64 {
        let upt = 1u64 << self.sub_shift;
        if self.per_sec != 0 {
            // Under 10^9 * 2^10 < 2^40.
            let sub = self.div_tick(u64::from(d.subsec_nanos()) * upt, round_up);
            d.as_secs()
                .checked_mul(self.per_sec)
                .and_then(|t| t.checked_add(sub))
                .unwrap_or(u64::MAX)
        } else {
            let scaled = d.as_nanos() * u128::from(upt);
            let units = if round_up {
                scaled.div_ceil(u128::from(self.tick_ns))
            } else {
                scaled / u128::from(self.tick_ns)
            };
            u64::try_from(units).unwrap_or(u64::MAX)
        }
    }

    /// The first unit at or after `deadline` (rounded up, saturating at `u64::MAX`).
    pub(crate) fn deadline_to_units(&self, deadline: Instant) -> u64 {
        self.ns_to_units(deadline.saturating_duration_since(self.origin), true)
    }

    /// The last unit at or before `now` (rounded down).
    pub(crate) fn now_to_units(&self, now: Instant) -> u64 {
        self.ns_to_units(now.saturating_duration_since(self.origin), false)
    }

    /// The first instant at which `now_to_units` reaches `units` (rounded up), saturating at
    /// [`far_future`].
    pub(crate) fn units_to_instant(&self, units: u64) -> Instant {
        let ns = (u128::from(units) * u128::from(self.tick_ns)).div_ceil(1u128 << self.sub_shift);
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
            let upt = 1u64 << c.sub_shift();
            assert_eq!(c.deadline_to_units(o), 0);
            assert_eq!(c.deadline_to_units(o + Duration::from_nanos(1)), 1);
            assert_eq!(c.deadline_to_units(o + tick), upt);
            assert_eq!(
                c.deadline_to_units(o + tick + Duration::from_nanos(1)),
                upt + 1
            );
            assert_eq!(c.now_to_units(o + tick - Duration::from_nanos(1)), upt - 1);
            assert_eq!(c.now_to_units(o + tick), upt);
            assert_eq!(c.units_to_instant(7 * upt), o + tick * 7);
            // Never early: a deadline's unit starts at or after it, and the instant of a unit
            // maps back to at least that unit.
            for ns in [1u64, 999_999, 1_000_001, 123_456_789, 5_000_000_000] {
                let d = o + Duration::from_nanos(ns);
                let u = c.deadline_to_units(d);
                assert!(c.units_to_instant(u) >= d);
                assert!(c.now_to_units(c.units_to_instant(u)) >= u);
                assert!(c.units_to_instant(c.now_to_units(d)) <= d);
            }
        }
    }

    #[test]
    fn division_by_reciprocal_is_exact() {
        let ticks = [
            1u64, 3, 700, 999, 1_000, 1_024, 999_983, 1_000_000, 16_777_259,
        ];
        let ticks = ticks
            .into_iter()
            .chain([u64::from(u32::MAX), 1 << 40, u64::MAX / 3]);
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        for tick_ns in ticks {
            let c = Clock::new(Duration::from_nanos(tick_ns));
            let edges = [0, 1, tick_ns - 1, tick_ns, tick_ns + 1, (1 << 40) - 1];
            let random = (0..2_000).map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % (1 << 40)
            });
            let near_multiples = (1..200u64).flat_map(|k| {
                let m = k.saturating_mul(tick_ns);
                [m - 1, m, m.saturating_add(1)]
            });
            for x in edges
                .into_iter()
                .chain(random)
                .chain(near_multiples)
                .filter(|&x| x < 1 << 40)
            {
                assert_eq!(c.div_tick(x, false), x / tick_ns, "{x} / {tick_ns}");
                assert_eq!(
                    c.div_tick(x, true),
                    x.div_ceil(tick_ns),
                    "{x} / {tick_ns} up"
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sub_tick_resolution_is_never_finer_than_a_nanosecond() {
        assert_eq!(
            Clock::new(Duration::from_millis(1)).sub_shift(),
            SUBTICK_SHIFT
        );
        assert_eq!(Clock::new(Duration::from_nanos(1)).sub_shift(), 0);
        assert_eq!(Clock::new(Duration::from_nanos(700)).sub_shift(), 9);
    }

    #[tokio::test(start_paused = true)]
    async fn saturates_instead_of_overflowing() {
        let c = Clock::new(Duration::from_nanos(1));
        let far = far_future();
        assert!(c.deadline_to_units(far) > 0);
        assert!(
            c.deadline_to_units(far) < u64::MAX,
            "30 years fit even in 1 ns ticks"
        );
        // Before the origin counts as 0.
        let c = Clock::new(Duration::from_millis(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        let c2 = Clock::new(Duration::from_millis(1));
        assert_eq!(
            c2.deadline_to_units(Instant::now() - Duration::from_millis(5)),
            0
        );
        assert_eq!(
            c.units_to_instant(u64::MAX),
            far_future(),
            "saturates at the far future"
        );
        // A huge tick that does not divide a second takes the slow path.
        let c = Clock::new(Duration::from_secs(7));
        let upt = 1u64 << c.sub_shift();
        assert_eq!(
            c.deadline_to_units(Instant::now() + Duration::from_secs(14)),
            2 * upt
        );
        assert_eq!(deadline_after(Duration::MAX), far_future());
    }
}
