//! `Timeout`, the future behind `timeout` and `timeout_at`, and its `Elapsed` error.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Instant;

use crate::clock::deadline_after_or_never;
use crate::error::{Elapsed, TimerError};
use crate::sleep::Sleep;
use crate::timer::Timer;

/// Requires `future` to complete within `duration`, on the current runtime's default timer.
///
/// The future is polled first on every poll, so a future that is ready at once returns
/// `Ok` even with a zero `duration`, and never touches the wheel. The timer is registered only
/// when the future first returns `Pending`, and removed when it completes or the `Timeout` is
/// dropped: the common case of an RPC that answers in time costs one insert and one O(1)
/// removal. A `duration` too large to add (such as `Duration::MAX`) never elapses, as in
/// Tokio, but still takes a timer (a shutdown of the timer resolves it; Tokio's sets none). As with
/// [`sleep_wheel`](crate::sleep_wheel), a first poll that comes only after the deadline has
/// passed reads no clock, and the timeout elapses on the driver's next pass; [`timeout_at`]
/// checks the clock on first poll.
///
/// # Cancellation
///
/// Dropping the `Timeout` drops the inner future and removes the timer from the wheel.
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::timeout;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let answer = timeout(Duration::from_millis(10), async { 42 }).await;
/// assert_eq!(answer, Ok(42));
///
/// let never = std::future::pending::<()>();
/// let err = timeout(Duration::from_millis(10), never).await.unwrap_err();
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # }
/// ```
#[track_caller]
// Inlined into the caller, so the `Timeout` is written straight into the awaiting future's
// state: returned through a temporary, its copy read words just stored with other widths (a
// failed store-to-load forward on every timeout, sampled at ~4% of an RPC timeout's cost).
#[inline]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let shard = crate::timer::default::current_shard_of_task();
    Timeout::new(future.into_future(), Sleep::for_timeout(shard, duration))
}

/// Requires `future` to complete before `deadline`, on the current runtime's default timer.
///
/// See [`timeout`]; a deadline already passed still lets a ready future return `Ok`.
///
/// # Cancellation
///
/// Dropping the `Timeout` drops the inner future and removes the timer from the wheel.
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver (`enable_time()`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::timeout_at;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Instant::now() + Duration::from_millis(50);
/// let r = timeout_at(deadline, tokio::time::sleep(Duration::from_secs(1))).await;
/// assert!(r.is_err());
/// assert!(Instant::now() >= deadline);
/// # }
/// ```
#[track_caller]
#[inline]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let shard = crate::timer::default::current_shard_of_task();
    Timeout::new(future.into_future(), Sleep::new(shard, deadline))
}

pin_project! {
    /// A future with a deadline, created by [`timeout`], [`timeout_at`] or
    /// [`Timer::timeout`](crate::Timer::timeout).
    ///
    /// Resolves to `Ok` with the inner future's output if it completes first, or to
    /// `Err(Elapsed)` once the deadline passes (or the timer shuts down).
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct Timeout<T> {
        #[pin]
        value: T,
        delay: Sleep,
    }
}

impl<T> Timeout<T> {
    #[inline]
    pub(crate) fn new(value: T, mut delay: Sleep) -> Timeout<T> {
        delay.mark_timeout();
        Timeout { value, delay }
    }

    /// A reference to the inner future.
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// A mutable reference to the inner future.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// A pinned mutable reference to the inner future.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut T> {
        self.project().value
    }

    /// The inner future; its timer is removed from the wheel.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The deadline. For a duration too large to add (see [`timeout`]), an instant past what
    /// the timer's clock reaches (about 600 years ahead), which is never reached.
    pub fn deadline(&self) -> Instant {
        self.delay.deadline()
    }
}

impl<T: Future> Future for Timeout<T> {
    type Output = Result<T::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.project();
        // A re-poll by the task the registered timer will wake (the common one: a request
        // timeout at every wake of its handler) answers `Pending` if the future does, whatever
        // the budget: checked first, lock-free, so it needs no look at the budget. Should the
        // timer fire while the future is polled, its wake polls this again.
        let waiting = me.delay.is_waiting_for(cx.waker());
        let had_budget = waiting || tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(v) = me.value.poll(cx) {
            // Done in time: the timer is not needed any more, even if the Timeout is kept.
            me.delay.disarm();
            return Poll::Ready(Ok(v));
        }
        if waiting {
            return Poll::Pending;
        }
        // Registered, or still waiting: no budget needed (see `Sleep`'s `poll`).
        ready!(me.delay.poll_unbudgeted(cx));
        // As Tokio's `Timeout`: if the inner future spent the last of the task's budget, the
        // deadline is still checked (unconstrained), or a busy future could never time out.
        let delay = if had_budget && !tokio::task::coop::has_budget_remaining() {
            Pin::new(&mut tokio::task::unconstrained(&mut *me.delay)).poll(cx)
        } else {
            Pin::new(&mut *me.delay).poll(cx)
        };
        match delay {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new(me.delay.is_shutdown()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The timeouts of a [`Timer`]; they live here, beside the future they build, so that `Timer`
/// knows nothing of the futures built on it.
impl Timer {
    /// Requires `future` to complete within `duration` (see [`timeout`](fn@crate::timeout)).
    ///
    /// # Panics
    ///
    /// When polled, if the timer is full (see [`sleep`](Timer::sleep)).
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        Timeout::new(
            future.into_future(),
            Sleep::for_timeout(self.shard().clone(), duration),
        )
    }

    /// Requires `future` to complete before `deadline` (see [`timeout_at`]).
    ///
    /// # Panics
    ///
    /// When polled, if the timer is full (see [`sleep`](Timer::sleep)).
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep_until(deadline))
    }

    /// Like [`timeout`](Timer::timeout), but takes the timer slot now (so even a future that
    /// is ready at once uses one) and returns an error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`];
    /// `future` is dropped.
    pub fn try_timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, TimerError> {
        self.try_timeout_at(deadline_after_or_never(self.now(), duration), future)
    }

    /// Like [`timeout_at`](Timer::timeout_at), but takes the timer slot now and returns an
    /// error when the timer is full or shut down.
    ///
    /// # Errors
    ///
    /// As [`try_sleep`](Timer::try_sleep): [`TimerError::Full`] or [`TimerError::Shutdown`];
    /// `future` is dropped.
    pub fn try_timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, TimerError> {
        let delay = self.try_timeout_delay_until(deadline)?;
        Ok(Timeout::new(future.into_future(), delay))
    }
}
