//! One level of the hierarchy: `wheel_size` buckets, each `size^level` ticks wide.

use super::entry::List;

/// Bits of a bucket id that hold the slot; the level sits above them.
pub(crate) const LEVEL_SHIFT: u32 = 16;

/// The largest supported wheel size (the slot must fit below [`LEVEL_SHIFT`]).
pub(crate) const MAX_WHEEL_SIZE: usize = 1 << LEVEL_SHIFT;

/// A bucket: a list of entries that share one expiration.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub(crate) list: List,
    /// Start of the bucket's slot in ticks; meaningful while the bucket is non-empty or queued.
    pub(crate) expiration: u64,
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
                    queued: false,
                })
                .collect(),
            len: 0,
            queued: 0,
        }
    }
}

/// The shape of a wheel: level 0's buckets are `1 << base` time units wide, every level has
/// `1 << shift` buckets, and level `k + 1`'s bucket width is level `k`'s whole span.
///
/// With `base == 0` a bucket is one unit wide and time is counted in buckets (ticks). With
/// `base > 0` time is finer than the buckets: entries keep their exact deadline, and the wheel
/// hands them out when time reaches it (the current bucket's entries wait on a short list).
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    pub(crate) base: u32,
    pub(crate) shift: u32,
    pub(crate) mask: u64,
    pub(crate) max_levels: usize,
    /// Level by the highest set bit of a deadline's distance from now (see `level_for`).
    by_bit: [u8; 64],
}

impl Geometry {
    pub(crate) fn new(wheel_size: usize, base: u32) -> Geometry {
        let shift = wheel_size.trailing_zeros();
        assert!(
            shift >= 1 && base < 48,
            "checked by Wheel::with_bucket_width"
        );
        let max_levels = ((63 - base) / shift) as usize + 1;
        Geometry {
            base,
            shift,
            mask: wheel_size as u64 - 1,
            max_levels,
            by_bit: std::array::from_fn(|b| {
                let level = (b as u32).saturating_sub(base) / shift;
                level.min(max_levels as u32 - 1) as u8
            }),
        }
    }

    /// log2 of the bucket width of `level`.
    pub(crate) fn width_shift(&self, level: usize) -> u32 {
        debug_assert!(level < self.max_levels);
        self.base + level as u32 * self.shift
    }

    /// Whether `deadline` falls in the level-0 bucket that `now` is in (the current bucket).
    pub(crate) fn same_bucket(&self, now: u64, deadline: u64) -> bool {
        deadline >> self.base == now >> self.base
    }

    /// The lowest level whose window, seen from `now`, holds `deadline`, which must be after
    /// `now` and outside the current bucket.
    ///
    /// Level `k` holds deadlines whose bucket number `deadline >> width_shift(k)` is less than
    /// `size` buckets ahead of the bucket of `now`; that keeps every bucket of a level to one
    /// expiration. The table gives the level whose span first exceeds the distance; the answer
    /// is that level or the next one (when the distance straddles a bucket boundary).
    pub(crate) fn level_for(&self, now: u64, deadline: u64) -> usize {
        debug_assert!(deadline > now && !self.same_bucket(now, deadline));
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

    /// The bucket of `deadline` at `level`, and that bucket's expiration (its start).
    pub(crate) fn slot_for(&self, deadline: u64, level: usize) -> (usize, u64) {
        let s = self.width_shift(level);
        let slot = ((deadline >> s) & self.mask) as usize;
        let expiration = (deadline >> s) << s;
        (slot, expiration)
    }
}
