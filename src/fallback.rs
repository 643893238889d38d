//! Tokio's own timer, standing in for the wheel after its timer has shut down.
//!
//! A one-shot future resolves when its timer shuts down (see `Timer::shutdown`), but an
//! [`Interval`](crate::Interval) or a [`DelayQueue`](crate::DelayQueue) lives on: rather than
//! hang (nothing would wake it) or spin (complete at once, again and again), it waits on a
//! `tokio::time::Sleep` from then on, allocated once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::time::Instant;

/// A boxed `tokio::time::Sleep`, re-armed in place.
#[derive(Debug)]
pub(crate) struct TokioSleep(Pin<Box<tokio::time::Sleep>>);

impl TokioSleep {
    /// A sleep until `deadline` on `runtime` (the shut-down timer's; entered, so this works
    /// from a thread outside any runtime too).
    ///
    /// # Panics
    ///
    /// If `runtime` has shut down, as `tokio::time::sleep_until` there.
    pub(crate) fn new(deadline: Instant, runtime: &Handle) -> TokioSleep {
        let _guard = runtime.enter();
        TokioSleep(Box::pin(tokio::time::sleep_until(deadline)))
    }

    /// Waits for `deadline` (re-arming if it changed); `Ready` once it has passed.
    pub(crate) fn poll_until(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.deadline() != deadline {
            self.0.as_mut().reset(deadline);
        }
        self.0.as_mut().poll(cx)
    }
}
