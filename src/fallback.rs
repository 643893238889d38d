//! Tokio's own timer, standing in for the wheel after its timer has shut down.
//!
//! A one-shot future resolves when its timer shuts down (see `Timer::shutdown`), but an
//! [`Interval`](crate::Interval) or a [`DelayQueue`](crate::DelayQueue) lives on: rather than
//! hang (nothing would wake it) or spin (complete at once, again and again), it waits on a
//! `tokio::time::Sleep` from then on, allocated anew only when it moves: on the timer's
//! runtime while that runtime lives, and once it has shut down (its time driver refuses
//! sleeps) on the runtime current where it is polled. hyper's timers, which cannot report an
//! error, wait on one while a timer built with `max_pending` is full. A `DelayQueue` whose
//! clock (the current runtime's) lags its alarm's waits on one of the current runtime.

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
    /// A shard of the timer the sleep stands in for (shut down or full), whose runtime the
    /// sleep is on unless `elsewhere`.
    shard: Arc<Shard>,
    /// The sleep is on this runtime, current when it was made: the timer's had shut down, or
    /// the sleep was made [`here`](Self::here) (`None`: on the timer's runtime).
    elsewhere: Option<tokio::runtime::Id>,
    /// Made by [`here`](Self::here): it waits on whichever runtime is current where it is
    /// polled, never on the timer's.
    follows_current: bool,
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
            follows_current: false,
        }
    }

    /// A sleep until `deadline` on the current runtime's Tokio timer, whatever the state of
    /// `shard`'s timer: for an owner that reads the current runtime's clock and must wait by
    /// that clock (see `DelayQueue`'s poll). Polled on another runtime later, it moves to
    /// that one, the clock its owner then reads, not back to the timer's (polled outside
    /// any runtime, it does go there, as a sleep made by [`new`](Self::new) would).
    ///
    /// # Panics
    ///
    /// If no runtime with a time driver is current.
    #[track_caller]
    pub(crate) fn here(deadline: Instant, shard: &Arc<Shard>) -> TokioSleep {
        let (sleep, elsewhere) = on(&current_or_panic(), deadline);
        TokioSleep {
            sleep,
            shard: shard.clone(),
            elsewhere,
            follows_current: true,
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
            // One made here waits on the timer's runtime only while none is current.
            None => {
                self.shard.runtime_gone() || (self.follows_current && Handle::try_current().is_ok())
            }
            // Which runtimes still live is not known: the current one does.
            Some(id) => Handle::try_current().map_or(true, |h| h.id() != id),
        };
        if moved {
            (self.sleep, self.elsewhere) = match Handle::try_current() {
                Ok(current) if self.follows_current => on(&current, deadline),
                // Polled outside any runtime, a sleep made here waits on the timer's, as any.
                _ => make(deadline, &self.shard),
            };
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
    if shard.runtime_gone() {
        return on(&current_or_panic(), deadline);
    }
    let _guard = shard.runtime().enter();
    (Box::pin(tokio::time::sleep_until(deadline)), None)
}

/// A sleep on `runtime` (not the timer's), and that runtime's id.
fn on(
    runtime: &Handle,
    deadline: Instant,
) -> (Pin<Box<tokio::time::Sleep>>, Option<tokio::runtime::Id>) {
    let _guard = runtime.enter();
    (
        Box::pin(tokio::time::sleep_until(deadline)),
        Some(runtime.id()),
    )
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

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::time::Duration;

    use super::*;
    use crate::Timer;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// A sleep made to follow the current runtime's clock (a `DelayQueue` that waits by the
    /// clock it reads) moves to the runtime it is next polled on, not back to the timer's,
    /// which is alive; one made for the timer stays on the timer's runtime.
    #[test]
    fn a_sleep_made_here_follows_the_current_runtime() {
        let timers = runtime();
        let timer = timers.block_on(async { Timer::builder().build().unwrap() });
        let shard = timer.shard().clone();
        let deadline = timers.block_on(async { Instant::now() + Duration::from_secs(3600) });
        let (first, second) = (runtime(), runtime());
        let mut here = first.block_on(async { TokioSleep::here(deadline, &shard) });
        let mut for_timer = first.block_on(async { TokioSleep::new(deadline, &shard) });
        assert_eq!(here.elsewhere, Some(first.handle().id()));
        assert_eq!(for_timer.elsewhere, None);
        second.block_on(poll_fn(|cx| {
            assert!(here.poll_until(deadline, cx).is_pending());
            assert!(for_timer.poll_until(deadline, cx).is_pending());
            Poll::Ready(())
        }));
        assert_eq!(
            here.elsewhere,
            Some(second.handle().id()),
            "follows the current one"
        );
        assert_eq!(for_timer.elsewhere, None, "stays on the timer's runtime");
        // Outside any runtime (the timer's alive), no panic: it waits on the timer's.
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(here.poll_until(deadline, &mut cx).is_pending());
        assert_eq!(here.elsewhere, None, "on the timer's runtime");
        // And polled within one again, it follows that one again.
        second.block_on(poll_fn(|cx| {
            assert!(here.poll_until(deadline, cx).is_pending());
            Poll::Ready(())
        }));
        assert_eq!(here.elsewhere, Some(second.handle().id()), "follows again");
    }
}
