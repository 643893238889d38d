//! Tokio's own timer, standing in for the wheel after its timer has shut down.
//!
//! A one-shot future resolves when its timer shuts down (see `Timer::shutdown`), but an
//! [`Interval`](crate::Interval) or a [`DelayQueue`](crate::DelayQueue) lives on: rather than
//! hang (nothing would wake it) or spin (complete at once, again and again), it waits on a
//! `tokio::time::Sleep` from then on, allocated once: on the timer's runtime while that runtime
//! lives, and once it has shut down (its time driver refuses sleeps) on the runtime current
//! where it is polled. hyper's timers, which cannot report an error, wait on one while a
//! timer built with `max_pending` is full.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::driver::shard::Shard;

/// A boxed `tokio::time::Sleep`, re-armed in place.
#[derive(Debug)]
pub(crate) struct TokioSleep {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// A shard of the shut-down timer, whose runtime the sleep is on unless `elsewhere`.
    shard: Arc<Shard>,
    /// The sleep is on this runtime, current when it was made, the timer's having shut
    /// down (`None`: on the timer's runtime).
    elsewhere: Option<tokio::runtime::Id>,
}

impl TokioSleep {
    /// A sleep until `deadline` for `shard`'s timer, shut down (or full): on its runtime
    /// (entered, so this works from a thread outside any runtime too), or, if that runtime has
    /// shut down too, on the current one.
    ///
    /// # Panics
    ///
    /// If the timer's runtime has shut down and no runtime with a time driver is current, as
    /// `tokio::time::sleep_until` outside a runtime.
    #[track_caller]
    pub(crate) fn new(deadline: Instant, shard: &Arc<Shard>) -> TokioSleep {
        let (sleep, elsewhere) = make(deadline, shard);
        TokioSleep {
            sleep,
            shard: shard.clone(),
            elsewhere,
        }
    }

    /// A sleep until `deadline` on the current runtime's Tokio timer, whatever the state of
    /// `shard`'s timer: for an owner that reads the current runtime's clock and must wait by
    /// that clock (see `DelayQueue`'s poll).
    ///
    /// # Panics
    ///
    /// If no runtime with a time driver is current.
    #[track_caller]
    pub(crate) fn here(deadline: Instant, shard: &Arc<Shard>) -> TokioSleep {
        let handle = current_or_panic();
        let elsewhere = Some(handle.id());
        let _guard = handle.enter();
        TokioSleep {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            shard: shard.clone(),
            elsewhere,
        }
    }

    /// The instant the sleep waits for.
    #[cfg(feature = "hyper")]
    pub(crate) fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// A shard of the timer this sleep stands in for.
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// Waits for `deadline` (re-arming if it changed); `Ready` once it has passed. If the
    /// timer's runtime shut down since the sleep was made there, or the sleep is on another
    /// runtime than the current one, it moves to the current one.
    #[track_caller]
    pub(crate) fn poll_until(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let moved = match self.elsewhere {
            None => self.shard.runtime_gone(),
            // Which runtimes still live is not known: the current one does.
            Some(id) => Handle::try_current().map_or(true, |h| h.id() != id),
        };
        if moved {
            (self.sleep, self.elsewhere) = make(deadline, &self.shard);
        }
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        self.sleep.as_mut().poll(cx)
    }

    /// Moves the deadline now, as Tokio's `Sleep::reset`: the task waiting on the sleep is
    /// woken if `deadline` has passed, and at `deadline` otherwise (for an owner whose
    /// deadline moved between polls, possibly sooner).
    pub(crate) fn reset(&mut self, deadline: Instant) {
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// Nothing to wait for (an emptied `DelayQueue`): takes the sleep off Tokio's timer, in
    /// place (no allocation), so it wakes nobody at its old deadline, holds no waker, and
    /// gives a paused clock no instant to advance to; the next wait registers it again. A
    /// sleep on a runtime that is gone or not current is left as it is.
    pub(crate) fn disarm(&mut self) {
        let handle = match self.elsewhere {
            None if !self.shard.runtime_gone() => self.shard.runtime().clone(),
            Some(id) => match Handle::try_current() {
                Ok(current) if current.id() == id => current,
                _ => return,
            },
            None => return,
        };
        let _guard = handle.enter();
        let deadline = self.sleep.deadline();
        // A Tokio sleep registers with its timer only when first polled.
        self.sleep.set(tokio::time::sleep_until(deadline));
    }
}

/// A sleep on the timer's runtime, or on the current one if the timer's has shut down (and
/// that runtime's id).
#[track_caller]
fn make(
    deadline: Instant,
    shard: &Shard,
) -> (Pin<Box<tokio::time::Sleep>>, Option<tokio::runtime::Id>) {
    let (handle, elsewhere) = if shard.runtime_gone() {
        let handle = current_or_panic();
        let id = handle.id();
        (handle, Some(id))
    } else {
        (shard.runtime().clone(), None)
    };
    let _guard = handle.enter();
    (Box::pin(tokio::time::sleep_until(deadline)), elsewhere)
}

/// The current runtime, to stand in for the timer's.
#[track_caller]
fn current_or_panic() -> Handle {
    Handle::try_current().unwrap_or_else(|_| {
        panic!(
            "tokio-timing-wheel: the timer's runtime has shut down, and no Tokio runtime is \
             current to stand in for it: poll this Interval or DelayQueue within a runtime"
        )
    })
}
