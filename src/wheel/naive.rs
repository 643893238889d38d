//! A naive reference model of the wheel (a sorted map), for differential tests.

use std::collections::{BTreeMap, HashMap};

/// The obvious implementation: a `BTreeMap` keyed by `(deadline, id)`.
#[derive(Debug, Default)]
pub(crate) struct Naive {
    by_deadline: BTreeMap<(u64, u64), ()>,
    deadline_of: HashMap<u64, u64>,
    now: u64,
}

impl Naive {
    pub(crate) fn insert(&mut self, id: u64, deadline: u64) {
        self.by_deadline.insert((deadline, id), ());
        self.deadline_of.insert(id, deadline);
    }

    pub(crate) fn remove(&mut self, id: u64) -> bool {
        match self.deadline_of.remove(&id) {
            Some(d) => self.by_deadline.remove(&(d, id)).is_some(),
            None => false,
        }
    }

    pub(crate) fn reschedule(&mut self, id: u64, deadline: u64) -> bool {
        if self.remove(id) {
            self.insert(id, deadline);
            true
        } else {
            false
        }
    }

    /// Everything with a deadline at or before `max(now, time so far)`, as sorted `(deadline, id)`.
    pub(crate) fn advance(&mut self, now: u64) -> Vec<(u64, u64)> {
        self.now = self.now.max(now);
        let mut out = Vec::new();
        while let Some((&(d, id), _)) = self.by_deadline.first_key_value() {
            if d > self.now {
                break;
            }
            self.by_deadline.pop_first();
            self.deadline_of.remove(&id);
            out.push((d, id));
        }
        out
    }

    pub(crate) fn len(&self) -> usize {
        self.deadline_of.len()
    }
}
