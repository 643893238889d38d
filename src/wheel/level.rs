//! One level of the hierarchy, and the geometry that places a deadline in a level and bucket.

use super::entry::List;

/// Bits of a bucket id that hold the slot; the level sits above them.
pub(crate) const LEVEL_SHIFT: u32 = 16;

/// The largest supported wheel size (the slot must fit below [`LEVEL_SHIFT`]).
pub(crate) const MAX_WHEEL_SIZE: usize = 1 << LEVEL_SHIFT;

/// The id of the bucket in `slot` of `level`, as entries and heap items record it.
pub(crate) fn bucket_id(level: usize, slot: usize) -> u32 {
    ((level as u32) << LEVEL_SHIFT) | slot as u32
}

/// The level and slot of a bucket id.
pub(crate) fn split(bucket: u32) -> (usize, usize) {
    (
        (bucket >> LEVEL_SHIFT) as usize,
        (bucket & ((1 << LEVEL_SHIFT) - 1)) as usize,
    )
}

/// A bucket: a list of entries that share one expiration.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub(crate) list: List,
    /// Start of the bucket's slot in time units; meaningful while the bucket is non-empty,
    /// queued or being flushed.
    pub(crate) expiration: u64,
    /// No later than the earliest deadline of its entries: the earliest linked since it was
    /// last empty (an entry removed, or moved later while not alone in the bucket, leaves it
    /// behind, lower than needed but never later). Meaningful while the bucket is non-empty.
    pub(crate) first: u64,
    /// Whether the bucket heap holds a live item `(expiration, this bucket)`.
    pub(crate) queued: bool,
}

/// One level of the wheel.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) buckets: Box<[Bucket]>,
    /// Entries linked into this level's buckets.
    pub(crate) len: usize,
    /// Buckets with a live item in the bucket heap (possibly emptied since). A level is
    /// released only when this is zero too, so no heap item can outlive its bucket's record.
    pub(crate) queued: usize,
}

impl Level {
    pub(crate) fn new(size: usize) -> Level {
        Level {
            buckets: (0..size)
                .map(|_| Bucket {
                    list: List::EMPTY,
                    expiration: 0,
                    first: u64::MAX,
                    queued: false,
                })
                .collect(),
            len: 0,
            queued: 0,
        }
    }
}

/// Division of time units by a constant tick width: a shift for powers of two, otherwise a
/// multiplication by a reciprocal (a hardware division is most of a link's cost).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Divider {
    divisor: u64,
    /// `log2(divisor)` when the divisor is a power of two.
    shift: u32,
    /// `floor((2^64 - 1) / divisor)`, or 0 for a power of two.
    recip: u64,
}

impl Divider {
    /// # Panics
    ///
    /// If `divisor` is zero.
    pub(crate) fn new(divisor: u64) -> Divider {
        assert!(divisor > 0, "the tick must be at least one time unit");
        if divisor.is_power_of_two() {
            Divider {
                divisor,
                shift: divisor.trailing_zeros(),
                recip: 0,
            }
        } else {
            Divider {
                divisor,
                shift: 0,
                recip: u64::MAX / divisor,
            }
        }
    }

    pub(crate) fn divisor(&self) -> u64 {
        self.divisor
    }

    /// `floor(x / divisor)`, exact for every `x`.
    ///
    /// With `r = floor((2^64 - 1) / d) >= (2^64 - d) / d`, the estimate `q = x * r / 2^64` is
    /// above `x / d - x / 2^64 > x / d - 1`, and never above `x / d`: it is the quotient or one
    /// less, and one comparison of the remainder corrects it.
    pub(crate) fn div(&self, x: u64) -> u64 {
        if self.recip == 0 {
            return x >> self.shift;
        }
        let q = ((u128::from(x) * u128::from(self.recip)) >> 64) as u64;
        if x - q * self.divisor >= self.divisor {
            q + 1
        } else {
            q
        }
    }
}

/// The shape of a wheel: level-0 buckets are one tick (`tick.divisor()` time units) wide,
/// every level has `1 << shift` buckets, and level `k + 1`'s bucket width is level `k`'s span.
///
/// Placement works on tick numbers (`units / tick`); entries keep their exact deadline in
/// units, and the wheel hands them out when time reaches it (the current tick's entries wait
/// on a short list), so a tick wider than one unit costs no precision.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    pub(crate) tick: Divider,
    pub(crate) shift: u32,
    pub(crate) mask: u64,
    pub(crate) max_levels: usize,
    /// Level by the highest set bit of a deadline's distance from now, in ticks.
    by_bit: [u8; 64],
}

impl Geometry {
    /// # Panics
    ///
    /// If `wheel_size` is not a power of two of at least 2, or `tick` is zero.
    pub(crate) fn new(wheel_size: usize, tick: u64) -> Geometry {
        assert!(
            wheel_size.is_power_of_two() && wheel_size >= 2,
            "checked by Wheel::with_tick"
        );
        let shift = wheel_size.trailing_zeros();
        // Enough levels for any distance in u64 ticks.
        let max_levels = (63 / shift) as usize + 1;
        Geometry {
            tick: Divider::new(tick),
            shift,
            mask: wheel_size as u64 - 1,
            max_levels,
            by_bit: std::array::from_fn(|b| ((b as u32) / shift).min(max_levels as u32 - 1) as u8),
        }
    }

    /// The tick that time `units` falls in.
    pub(crate) fn tick_of(&self, units: u64) -> u64 {
        self.tick.div(units)
    }

    /// log2 of the bucket width of `level`, in ticks.
    fn width_shift(&self, level: usize) -> u32 {
        debug_assert!(level < self.max_levels);
        level as u32 * self.shift
    }

    /// The lowest level whose window, seen from tick `now`, holds tick `deadline` (which must
    /// be later).
    ///
    /// Level `k` holds deadlines whose bucket number `deadline >> width_shift(k)` is less than
    /// `size` buckets ahead of the bucket of `now`; that keeps every bucket of a level to one
    /// expiration. The table gives the level whose span first exceeds the distance; the answer
    /// is that level or the next one (when the distance straddles a bucket boundary).
    pub(crate) fn level_for(&self, now: u64, deadline: u64) -> usize {
        debug_assert!(deadline > now);
        let delta = deadline - now;
        let level = usize::from(self.by_bit[(63 - delta.leading_zeros()) as usize]);
        let s = self.width_shift(level);
        if (deadline >> s) - (now >> s) < (1u64 << self.shift) {
            level
        } else {
            // Only reachable below the top level: the top level's window covers every u64.
            level + 1
        }
    }

    /// The slot of tick `deadline` at `level`, and that bucket's expiration (the first time
    /// unit of its slot).
    pub(crate) fn slot_for(&self, deadline: u64, level: usize) -> (usize, u64) {
        let s = self.width_shift(level);
        let slot = ((deadline >> s) & self.mask) as usize;
        // At most `deadline * tick`, itself at most the deadline in units: no overflow.
        let expiration = ((deadline >> s) << s) * self.tick.divisor();
        (slot, expiration)
    }
}
