//! Polling by hand: once with a no-op waker, once with the task's waker, and a future that is
//! pending exactly once.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::task::noop_waker_ref;

/// Polls `fut` once with a no-op waker.
pub(crate) fn poll_noop<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(noop_waker_ref()))
}

/// Polls `fut` once with the current task's waker (a timer registers with it, as in real use).
pub(crate) async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// Pending once (waking itself at once), then ready: an RPC answered on the next poll, so a
/// timeout around it registers its timer and then cancels it.
#[derive(Debug, Default)]
pub(crate) struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Pending `n` times (waking itself each time), then ready: a handler woken by several reads
/// before it answers, so a timeout around it is polled again `n` times while registered.
#[derive(Debug)]
pub(crate) struct PendingTimes(pub(crate) u32);

impl Future for PendingTimes {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            Poll::Ready(())
        } else {
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
