//! Hidden, unstable access to the pure wheel for benchmarks (`--features internals`).
//!
//! Nothing here is covered by semver; the wheel itself stays `pub(crate)`.

use crate::wheel;

/// A handle to an entry of a [`Wheel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(wheel::Key);

/// The crate's internal hierarchical timing wheel over `u64` values. Time is a `u64` count
/// of units, and a level-0 bucket is one unit wide (a timer's wheels count nanoseconds, with
/// buckets one tick wide).
#[derive(Debug)]
pub struct Wheel(wheel::Wheel<u64>);

impl Wheel {
    /// A wheel with `wheel_size` buckets per level (a power of two).
    pub fn new(wheel_size: usize) -> Self {
        Wheel(wheel::Wheel::new(wheel_size))
    }

    /// Inserts `value` to expire at time `deadline`.
    pub fn insert(&mut self, deadline: u64, value: u64) -> Key {
        Key(self.0.insert(deadline, value).expect("wheel full"))
    }

    /// Removes a pending entry.
    pub fn remove(&mut self, key: Key) -> Option<u64> {
        self.0.remove(key.0)
    }

    /// Moves a pending entry to a new deadline.
    pub fn reschedule(&mut self, key: Key, deadline: u64) -> bool {
        self.0.reschedule(key.0, deadline)
    }

    /// Hands out every entry due at `now`, calling `f` with each value; returns how many.
    pub fn advance(&mut self, now: u64, mut f: impl FnMut(u64)) -> usize {
        self.0.advance(now).map(|e| f(e.value)).count()
    }

    /// The next time at which [`advance`](Self::advance) has work.
    pub fn next_expiration(&mut self) -> Option<u64> {
        self.0.next_expiration()
    }

    /// Pending entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no entry is pending.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(cascades, flushes, heap pushes, heap pops, levels)` so far.
    pub fn counters(&self) -> (u64, u64, u64, u64, usize) {
        let s = self.0.stats();
        (
            s.cascades,
            s.flushes,
            s.heap_pushes,
            s.heap_pops,
            self.0.levels(),
        )
    }
}
