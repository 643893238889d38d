//! What the wheel hands out: expired entries, the outcome of a bounded step, a full wheel's
//! refusal, and the counters of its work.

use super::Key;

/// Counters of the wheel's internal work, for metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Entries re-filed into a lower level when their bucket expired (including lazily
    /// rescheduled entries re-filed at their old bucket's expiration).
    pub(crate) cascades: u64,
    /// Buckets flushed (live heap items popped).
    pub(crate) flushes: u64,
    /// Items pushed into the bucket heap.
    pub(crate) heap_pushes: u64,
    /// Items popped from the bucket heap, live or stale (emptied buckets pruned included;
    /// `next_expiration`'s look-ahead, which pushes what it pops back, aside).
    pub(crate) heap_pops: u64,
    /// Entries put on the staging list rather than in a bucket when inserted.
    pub(crate) staged: u64,
}

/// An entry handed out by [`Wheel::poll`](super::Wheel::poll).
#[derive(Debug)]
pub(crate) struct Expired<T> {
    /// The entry's key, and its deadline (for lateness figures, and tests).
    pub(crate) key: Key,
    pub(crate) deadline: u64,
    pub(crate) value: T,
    /// A persistent entry: `value` is a clone, and the entry stays in the wheel, parked.
    pub(crate) parked: bool,
    /// The entry waited in a level above the first (see `Entry::long`): the driver wakes such
    /// timers as it takes them, ahead of the short ones (timeouts aside: see `timeout`).
    pub(crate) long: bool,
    /// The owner inserted it as a timeout (see `Entry::timeout`): the driver wakes such timers
    /// last in a pass.
    pub(crate) timeout: bool,
}

/// What one step of [`Wheel::poll_within`](super::Wheel::poll_within) found.
#[derive(Debug)]
pub(crate) enum Step<T> {
    /// An entry whose deadline has been reached.
    Fired(Expired<T>),
    /// Nothing more is due: the wheel's time is now the time polled for.
    Done,
    /// The work budget ran out before the poll finished; call again to go on.
    Yield,
}

/// The wheel holds as many entries as a slab index can name; the value is handed back.
#[derive(Debug)]
pub(crate) struct Full<T>(pub(crate) T);
