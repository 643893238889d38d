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
    /// Whether the delay queue holds a live item `(expiration, this bucket)`.
    pub(crate) queued: bool,
}

/// One level of the wheel.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) buckets: Box<[Bucket]>,
    /// Entries linked into this level's buckets.
    pub(crate) len: usize,
    /// Buckets with a live item in the delay queue (possibly emptied since). A level is
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

/// log2 of a level's tick: `level * shift`, or `None` once it no longer fits in a `u64`.
pub(crate) fn tick_shift(level: usize, shift: u32) -> Option<u32> {
    let s = (level as u64) * u64::from(shift);
    (s < 64).then_some(s as u32)
}

/// The lowest level whose window, seen from `now`, holds `deadline` (which must be `> now`).
///
/// Level `k` (tick `t = size^k`) holds deadlines whose slot number `deadline / t` is less than
/// `size` slots ahead of the slot of `now`; that keeps every bucket of a level to one expiration.
/// `by_bit[b]` is `b / shift`: the level whose span first exceeds a delta whose highest set bit
/// is `b`. The answer is that level or the next one (when the delta straddles a slot boundary).
pub(crate) fn level_for(now: u64, deadline: u64, shift: u32, by_bit: &[u8; 64]) -> usize {
    debug_assert!(deadline > now);
    let delta = deadline - now;
    let level = usize::from(by_bit[(63 - delta.leading_zeros()) as usize]);
    let s = level as u32 * shift;
    if (deadline >> s) - (now >> s) < (1u64 << shift) {
        level
    } else {
        // Only reachable below the top level: the top level's window covers every u64.
        level + 1
    }
}

/// The table `level_for` uses: `by_bit[b] = b / shift`.
pub(crate) fn level_table(shift: u32) -> [u8; 64] {
    std::array::from_fn(|b| (b as u32 / shift) as u8)
}

/// The slot of `deadline` at a level with tick `1 << s`, and that slot's expiration.
pub(crate) fn slot_for(deadline: u64, s: u32, mask: u64) -> (usize, u64) {
    let slot = ((deadline >> s) & mask) as usize;
    let expiration = (deadline >> s) << s;
    (slot, expiration)
}

/// How many levels a wheel of `1 << shift` buckets can have before a tick passes `u64::MAX`.
pub(crate) fn max_levels(shift: u32) -> usize {
    (63 / shift as usize) + 1
}
