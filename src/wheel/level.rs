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
pub(crate) fn level_for(now: u64, deadline: u64, shift: u32) -> usize {
    debug_assert!(deadline > now);
    let size = 1u64 << shift;
    let mut level = 0;
    loop {
        match tick_shift(level, shift) {
            // Past the top: this level's tick exceeds the u64 range, so its one slot holds all.
            None => return level - 1,
            Some(s) => {
                if (deadline >> s) - (now >> s) < size {
                    return level;
                }
            }
        }
        level += 1;
    }
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
