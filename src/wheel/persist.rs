//! Persistent entries, which park when they fire instead of leaving the wheel: what they hand
//! out is chosen once per wheel, by its type.

use super::{Full, Key, Wheel};

/// What a wheel hands out when a persistent entry fires, the parked entry keeping the rest.
/// A wheel's second type parameter; the default, [`OneShot`], has no persistent entries.
pub(crate) trait Persistence<T> {
    /// The value handed out for a persistent entry that fired (a copy, or the value itself
    /// with a placeholder left behind).
    fn take(value: &mut T) -> T;
}

/// Wheels whose persistence can make persistent entries ([`Wheel::insert_persistent`]).
pub(crate) trait Persistent<T>: Persistence<T> {}

/// The default: a wheel without persistent entries (`insert_persistent` does not exist for
/// it, so `take` is never called).
#[derive(Debug)]
pub(crate) enum OneShot {}

impl<T> Persistence<T> for OneShot {
    fn take(_: &mut T) -> T {
        unreachable!("a OneShot wheel has no insert_persistent, so no persistent entry")
    }
}

/// Persistent entries hand out a copy of their value (tests and models).
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum Copied {}

#[cfg(test)]
impl<T: Copy> Persistence<T> for Copied {
    fn take(value: &mut T) -> T {
        *value
    }
}

#[cfg(test)]
impl<T: Copy> Persistent<T> for Copied {}

impl<T, P: Persistent<T>> Wheel<T, P> {
    /// A wheel as [`with_tick`](Wheel::with_tick) makes, that can hold persistent entries.
    pub(crate) fn persistent(wheel_size: usize, tick: u64) -> Self {
        Wheel::build(wheel_size, tick)
    }

    /// Inserts a persistent entry: when it fires, [`poll`](Self::poll) hands out
    /// `P::take(&mut value)` and parks the entry (it keeps its key and slot, and no longer
    /// counts for [`next_expiration`](Self::next_expiration)) until
    /// [`reschedule`](Self::reschedule) files it again or [`remove`](Self::remove) takes it
    /// out. One entry then serves a periodic timer for its whole life.
    pub(crate) fn insert_persistent(&mut self, deadline: u64, value: T) -> Result<Key, Full<T>> {
        self.insert_entry(deadline, value, true, false)
    }

    /// [`insert_persistent`](Self::insert_persistent) for the deadline time never reaches,
    /// `u64::MAX`, in no bucket, as [`insert_unreachable`](Self::insert_unreachable) files a
    /// one-shot entry: it waits (it is not [parked](Self::is_parked)) until rescheduled.
    pub(crate) fn insert_persistent_unreachable(&mut self, value: T) -> Result<Key, Full<T>> {
        self.insert_unreachable_entry(value, true)
    }
}
