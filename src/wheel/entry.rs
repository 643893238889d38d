//! Timer entries, their keys, and the intrusive doubly linked lists that chain them into buckets.

use slab::Slab;

/// Slab index meaning "no entry" at the end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a wheel holds: every index below [`NIL`].
pub(crate) const CAPACITY: usize = NIL as usize;

/// Bucket id of the list of entries that are already due but not yet handed out.
pub(crate) const DUE: u32 = u32::MAX;

/// Bucket id of the list of entries due later within the current tick (only when a tick is
/// wider than one time unit).
pub(crate) const IMMINENT: u32 = u32::MAX - 1;

/// Bucket id of the list of persistent entries that fired and wait, out of the wheel, to be
/// rescheduled or removed.
pub(crate) const PARKED: u32 = u32::MAX - 2;

/// Bucket id of the list of entries not yet placed in a bucket: inserted for a time the wheel's
/// owner has already promised to poll by (see `stage.rs`).
pub(crate) const STAGED: u32 = u32::MAX - 3;

/// A handle to an entry in a [`Wheel`](super::Wheel).
///
/// The generation makes keys unique for the lifetime of the wheel: once an entry is removed or
/// expires its key never matches again, even after the slab slot is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u64,
}

/// One pending timer: its deadline, its place in a list, and the caller's value.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// The time (in units) at or after which the entry may expire. May be later than the bucket it sits
    /// in (a lazy reschedule), never earlier than that bucket's expiration.
    pub(crate) deadline: u64,
    pub(crate) generation: u64,
    pub(crate) prev: u32,
    pub(crate) next: u32,
    /// `level << LEVEL_SHIFT | slot`, [`DUE`], [`IMMINENT`], [`PARKED`] or [`STAGED`].
    pub(crate) bucket: u32,
    /// A persistent entry is parked when it fires, not removed (see `Wheel::insert_persistent`).
    pub(crate) persistent: bool,
    /// Filed, at some point, in a level above the first: due further ahead than level 0's span
    /// from the wheel's time then (a long sleep, a lease; not a sleep of a few ticks). Reported
    /// when it fires ([`Expired::long`](super::step::Expired::long)).
    pub(crate) long: bool,
    /// Set by the owner when it inserted the entry ([`Wheel::insert_as`]): a timer that
    /// bounds other work. Reported when it fires
    /// ([`Expired::timeout`](super::step::Expired::timeout)).
    ///
    /// [`Wheel::insert_as`]: super::Wheel::insert_as
    pub(crate) timeout: bool,
    pub(crate) value: T,
}

/// The head (and tail, for the due list) of a list of entries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl List {
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// Appends `idx` at the tail (FIFO order).
    pub(crate) fn push_back<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32, bucket: u32) {
        let e = &mut entries[idx as usize];
        e.bucket = bucket;
        e.next = NIL;
        e.prev = self.tail;
        if self.tail == NIL {
            self.head = idx;
        } else {
            entries[self.tail as usize].next = idx;
        }
        self.tail = idx;
    }

    /// Unlinks `idx`, which must be on this list.
    pub(crate) fn unlink<T>(&mut self, entries: &mut Slab<Entry<T>>, idx: u32) {
        let (prev, next) = {
            let e = &entries[idx as usize];
            (e.prev, e.next)
        };
        if prev == NIL {
            debug_assert_eq!(self.head, idx);
            self.head = next;
        } else {
            entries[prev as usize].next = next;
        }
        if next == NIL {
            debug_assert_eq!(self.tail, idx);
            self.tail = prev;
        } else {
            entries[next as usize].prev = prev;
        }
    }
}
