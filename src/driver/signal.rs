//! How registrations wake the driver: the time it is armed for, and a notification flag.
//!
//! The protocol keeps wakeups rare. A registration notifies only when it creates a bucket
//! earlier than the time the driver is armed for; the driver, at the start of each pass, sets
//! that time to "unarmed" (`u64::MAX`) so a registration racing with the pass always notifies,
//! then lowers it to the earliest bucket it found. `fetch_min` on both sides means neither can
//! overwrite an earlier time the other published: no registration is ever left unseen.

use std::task::Waker;

use crate::loom::{lock, AtomicBool, AtomicU64, Mutex};
use std::sync::atomic::Ordering::SeqCst;

/// Shared between the driver and every registering thread.
#[derive(Debug)]
pub(crate) struct Signal {
    /// The wheel time the driver will wake at, at the latest; `u64::MAX` when not armed.
    armed: AtomicU64,
    notified: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    pub(crate) fn new() -> Signal {
        Signal {
            armed: AtomicU64::new(u64::MAX),
            notified: AtomicBool::new(false),
            waker: Mutex::new(None),
        }
    }

    /// Called by a registration after it made `head` its shard's earliest expiration.
    /// Returns whether it woke the driver.
    pub(crate) fn on_new_head(&self, head: u64) -> bool {
        // Fast path, no write to the shared line: the driver already wakes in time.
        if head >= self.armed.load(SeqCst) {
            return false;
        }
        if self.armed.fetch_min(head, SeqCst) > head {
            self.notify();
            true
        } else {
            false
        }
    }

    /// Wakes the driver unconditionally (shutdown, detach, a new earlier deadline).
    pub(crate) fn notify(&self) {
        self.notified.store(true, SeqCst);
        let waker = lock(&self.waker).take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Driver side: registers its waker and consumes a pending notification.
    pub(crate) fn poll_notified(&self, waker: &Waker) -> bool {
        {
            let mut slot = lock(&self.waker);
            match &*slot {
                Some(w) if w.will_wake(waker) => {}
                _ => *slot = Some(waker.clone()),
            }
        }
        self.notified.swap(false, SeqCst)
    }

    /// Driver side, before looking at the shards: from now on every new bucket notifies.
    pub(crate) fn begin_pass(&self) {
        self.armed.store(u64::MAX, SeqCst);
    }

    /// Driver side, after looking at every shard: arms for `next` (or stays unarmed), and
    /// returns the time to actually sleep until, which a racing registration may have lowered.
    pub(crate) fn commit(&self, next: Option<u64>) -> Option<u64> {
        let next = next.unwrap_or(u64::MAX);
        let prev = self.armed.fetch_min(next, SeqCst);
        let at = prev.min(next);
        (at != u64::MAX).then_some(at)
    }
}
