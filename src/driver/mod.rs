//! The driver: one Tokio task per timer that sleeps until the earliest bucket of any shard,
//! fires what is due and goes back to sleep. With nothing pending it waits on a notification
//! only, so an idle timer costs no wakeups.
//!
//! Each pass locks one shard at a time, takes at most [`BATCH`] due entries, releases the lock
//! and only then wakes them (collect under the lock, wake after it, as async-io does), so a
//! waker never runs under a lock and a registration never waits for a whole flush. A waker that
//! panics is caught and logged: it cannot take the driver down.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use crate::loom::Arc;
use crate::wheel::Step;

pub(crate) mod clock;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod registry;
pub(crate) mod shard;
pub(crate) mod signal;

use self::shard::{this_thread_shard, Common, Shard};

/// The state behind every handle of one timer: its shards and what they share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) shards: Box<[Arc<Shard>]>,
    pub(crate) common: Arc<Common>,
}

impl Inner {
    /// The shard the calling thread registers into.
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shards[this_thread_shard(self.shards.len())]
    }

    /// Shuts the timer down: refuses new registrations, then removes every pending entry and
    /// wakes it (sleeps and timeouts resolve; delayed tasks resolve with the shutdown error).
    pub(crate) fn shutdown(&self) {
        if self
            .common
            .shutdown
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let mut drained = 0;
        for shard in self.shards.iter() {
            let mut wakers = {
                let mut wheel = shard.lock();
                let w = wheel.drain_all();
                wheel.shrink_to_fit();
                w
            };
            drained += wakers.len();
            self.common.release(wakers.len());
            wake_all(&mut wakers);
        }
        tracing::debug!(drained, "timer shut down");
        self.common.signal.notify();
    }

    /// No handle, no future and no entry refers to this timer any more.
    pub(crate) fn is_unused(&self) -> bool {
        self.common
            .detached
            .load(std::sync::atomic::Ordering::SeqCst)
            && self
                .shards
                .iter()
                .all(|s| Arc::strong_count(s) == 1 && s.len() == 0)
    }

    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }
}

/// Units of work (entries handed out or cascaded, heap items popped) per shard lock hold.
const BATCH: usize = 1024;

/// How often a driver whose handles are all gone re-checks whether its futures are too.
const DETACHED_RECHECK: Duration = Duration::from_secs(1);

/// The driver task's future.
pub(crate) struct Driver {
    inner: Arc<Inner>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The wheel time `sleep` is set for, if armed.
    sleeping_until: Option<u64>,
    /// `sleep` completed: make a pass even if the wheel's time has not reached
    /// `sleeping_until` (a deadline past the far-future cap, or an early wake), so the sleep
    /// is always re-armed and never polled again once ready.
    sleep_fired: bool,
    wakers: Vec<Waker>,
    /// Whether the driver finished normally (shutdown or detach), so drop has nothing to do.
    done: bool,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("sleeping_until", &self.sleeping_until)
            .finish_non_exhaustive()
    }
}

impl Driver {
    pub(crate) fn new(inner: Arc<Inner>) -> Driver {
        Driver {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(crate::driver::clock::far_future())),
            sleeping_until: None,
            sleep_fired: false,
            wakers: Vec::new(),
            done: false,
        }
    }

    /// Fires everything due at `now` in every shard; returns the earliest pending expiration.
    fn pass(&mut self, now: u64) -> Option<u64> {
        let common = &self.inner.common;
        common
            .wakeups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        common.signal.begin_pass();
        let mut next: Option<u64> = None;
        let mut fired = 0usize;
        let mut cascades = 0u64;
        for shard in self.inner.shards.iter() {
            loop {
                let mut wheel = shard.lock();
                let cascades_before = wheel.stats().cascades;
                // Bounds the work done under the lock: due entries handed out, entries
                // cascaded, heap items popped.
                let mut budget = BATCH;
                let mut slots = 0;
                let more = loop {
                    match wheel.poll_within(now, &mut budget) {
                        Step::Fired(e) => {
                            slots += usize::from(!e.parked);
                            self.wakers.push(e.value);
                        }
                        Step::Done => break false,
                        Step::Yield => break true,
                    }
                };
                cascades += wheel.stats().cascades - cascades_before;
                if !more {
                    if let Some(h) = wheel.next_expiration() {
                        next = Some(next.map_or(h, |n| n.min(h)));
                    }
                    #[cfg(debug_assertions)]
                    if wheel.len() <= 4096 {
                        wheel.assert_invariants();
                    }
                }
                drop(wheel);
                fired += self.wakers.len();
                // A parked (persistent) entry keeps its slot.
                common.release(slots);
                wake_all(&mut self.wakers);
                if !more {
                    break;
                }
            }
        }
        if fired > 0 || cascades > 0 {
            tracing::trace!(fired, cascades, now, "timer driver pass");
        }
        common.signal.commit(next)
    }
}

/// Wakes and drops every waker, containing panics.
pub(crate) fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        if catch_unwind(AssertUnwindSafe(|| w.wake())).is_err() {
            tracing::error!("a waker panicked while the timer fired it; the driver carries on");
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            let notified = this.inner.common.signal.poll_notified(cx.waker());
            if this.inner.common.is_shutdown() {
                this.done = true;
                return Poll::Ready(());
            }
            if this.inner.is_unused() {
                tracing::debug!("every timer handle and future is gone: driver exits");
                this.inner.shutdown();
                this.done = true;
                return Poll::Ready(());
            }
            let clock = &this.inner.common.clock;
            let now = clock.now_to_units(Instant::now());
            let due = this.sleeping_until.is_some_and(|t| t <= now);
            if notified || due || this.sleep_fired || this.sleeping_until.is_none() {
                tracing::trace!(now, notified, "timer driver wakes");
                this.sleep_fired = false;
                this.sleeping_until = this.pass(now);
                // The pass may have fired the last thing keeping an unused timer alive (a
                // fire-and-forget delayed task): nothing else would wake us to notice.
                if this.inner.is_unused() {
                    this.inner.shutdown();
                    this.done = true;
                    return Poll::Ready(());
                }
                if this.inner.common.detached.load(SeqCst) {
                    // Every handle is gone but futures remain: look again within a second
                    // even without a notification, in case the last one was dropped just
                    // as the handles went (its notification can race with our check).
                    let recheck = this
                        .inner
                        .common
                        .clock
                        .deadline_to_units(Instant::now() + DETACHED_RECHECK);
                    this.sleeping_until =
                        Some(this.sleeping_until.map_or(recheck, |t| t.min(recheck)));
                }
                if let Some(t) = this.sleeping_until {
                    let at = this.inner.common.clock.units_to_instant(t);
                    this.sleep.as_mut().reset(at);
                }
            }
            match this.sleeping_until {
                // Unarmed: only a notification can wake us (registered above).
                None => {
                    if this.inner.common.signal.poll_notified(cx.waker()) {
                        continue;
                    }
                    return Poll::Pending;
                }
                Some(_) => {
                    if this.sleep.as_mut().poll(cx).is_ready() {
                        this.sleep_fired = true;
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.done {
            // The runtime is shutting down (or the driver task was aborted): resolve everything.
            tracing::debug!("timer driver dropped: shutting the timer down");
            self.inner.shutdown();
        }
    }
}
