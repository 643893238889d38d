//! A naive reference model of the wheel (a sorted map), for differential tests.

use std::collections::{BTreeMap, HashMap, HashSet};

/// The obvious implementation: a `BTreeMap` keyed by `(deadline, id)`, plus the set of
/// persistent entries and those of them that fired and are parked, and the entries filed at
/// `u64::MAX` in no bucket (which time never reaches, and `peek` does not name).
#[derive(Debug, Default)]
pub(crate) struct Naive {
    by_deadline: BTreeMap<(u64, u64), ()>,
    deadline_of: HashMap<u64, u64>,
    persistent: HashSet<u64>,
    parked: HashSet<u64>,
    unreachable: HashSet<u64>,
    now: u64,
}

impl Naive {
    /// Drops every entry; the time stays.
    pub(crate) fn clear(&mut self) {
        *self = Naive {
            now: self.now,
            ..Naive::default()
        };
    }

    pub(crate) fn insert(&mut self, id: u64, deadline: u64) {
        self.by_deadline.insert((deadline, id), ());
        self.deadline_of.insert(id, deadline);
    }

    pub(crate) fn insert_persistent(&mut self, id: u64, deadline: u64) {
        self.insert(id, deadline);
        self.persistent.insert(id);
    }

    /// As `Wheel::insert_unreachable`: a one-shot entry at `u64::MAX`, in no bucket.
    pub(crate) fn insert_unreachable(&mut self, id: u64) {
        self.insert(id, u64::MAX);
        self.unreachable.insert(id);
    }

    /// As `Wheel::insert_persistent_unreachable`: a persistent entry at `u64::MAX`, in no
    /// bucket, waiting (not parked).
    pub(crate) fn insert_persistent_unreachable(&mut self, id: u64) {
        self.insert_unreachable(id);
        self.persistent.insert(id);
    }

    /// As `Wheel::reschedule_unreachable`: an entry moves to `u64::MAX`, in no bucket (a
    /// parked persistent one waits again).
    pub(crate) fn reschedule_unreachable(&mut self, id: u64) -> bool {
        let moved = self.reschedule(id, u64::MAX);
        if moved {
            self.unreachable.insert(id);
        }
        moved
    }

    pub(crate) fn remove(&mut self, id: u64) -> bool {
        self.unreachable.remove(&id);
        if self.parked.remove(&id) {
            self.persistent.remove(&id);
            return true;
        }
        match self.deadline_of.remove(&id) {
            Some(d) => {
                self.persistent.remove(&id);
                self.by_deadline.remove(&(d, id)).is_some()
            }
            None => false,
        }
    }

    /// Moves an entry to `deadline` (an unreachable one stays unreachable if that is
    /// `u64::MAX`).
    pub(crate) fn reschedule(&mut self, id: u64, deadline: u64) -> bool {
        let persistent = self.persistent.contains(&id);
        let unreachable = self.unreachable.contains(&id);
        if self.remove(id) {
            if unreachable && deadline == u64::MAX {
                self.insert_unreachable(id);
                if persistent {
                    self.persistent.insert(id);
                }
            } else if persistent {
                self.insert_persistent(id, deadline);
            } else {
                self.insert(id, deadline);
            }
            true
        } else {
            false
        }
    }

    /// Takes out one entry that fired (a persistent one parks).
    pub(crate) fn fire(&mut self, id: u64) -> Option<u64> {
        let d = self.deadline_of.remove(&id)?;
        self.by_deadline.remove(&(d, id));
        if self.persistent.contains(&id) {
            self.parked.insert(id);
        }
        Some(d)
    }

    /// Everything with a deadline at or before `max(now, time so far)`, as sorted `(deadline, id)`.
    pub(crate) fn advance(&mut self, now: u64) -> Vec<(u64, u64)> {
        self.now = self.now.max(now);
        let due: Vec<(u64, u64)> = self
            .by_deadline
            .range(..=(self.now, u64::MAX))
            .map(|(&k, _)| k)
            .collect();
        for &(_, id) in &due {
            self.fire(id);
        }
        due
    }

    /// Whether entry `id` is pending (waiting, or parked after firing).
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.deadline_of.contains_key(&id) || self.parked.contains(&id)
    }

    /// Every pending entry's id, sorted.
    pub(crate) fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .deadline_of
            .keys()
            .chain(&self.parked)
            .copied()
            .collect();
        ids.sort_unstable();
        ids
    }

    pub(crate) fn len(&self) -> usize {
        self.deadline_of.len() + self.parked.len()
    }

    /// The earliest deadline of an entry that waits in a bucket (parked and unreachable ones
    /// do not).
    pub(crate) fn earliest(&self) -> Option<u64> {
        self.by_deadline
            .keys()
            .find(|(_, id)| !self.unreachable.contains(id))
            .map(|&(d, _)| d)
    }

    pub(crate) fn is_persistent(&self, id: u64) -> bool {
        self.persistent.contains(&id)
    }

    pub(crate) fn is_parked(&self, id: u64) -> bool {
        self.parked.contains(&id)
    }
}
