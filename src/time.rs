//! A mirror of `tokio::time` on the wheel: change `use tokio::time::{...}` into
//! `use tokio_timing_wheel::time::{...}` and the code keeps compiling and behaving the same,
//! but for the differences listed below.
//!
//! Every name here is the crate's own type or function under Tokio's name: [`sleep`] is
//! [`sleep_wheel`](crate::sleep_wheel), [`Sleep`], [`Timeout`], [`Interval`] and
//! [`MissedTickBehavior`] are the crate's. [`Instant`] and [`Duration`] are Tokio's and std's
//! (so paused Tokio time drives the wheel). [`error::Elapsed`] is the crate's
//! [`Elapsed`](crate::Elapsed): it is not Tokio's type, but converts where Tokio's does;
//! [`error::Error`] is Tokio's, which nothing here returns.
//!
//! Testing helpers (`pause`, `resume`, `advance`) are not mirrored: they belong to Tokio's
//! clock, which the wheel follows; keep calling them from `tokio::time`.
//!
//! # Migration
//!
//! | tokio / tokio-util / hyper-util / tower | here | difference |
//! |---|---|---|
//! | `tokio::time::sleep`, `sleep_until` | [`time::sleep`](sleep), [`time::sleep_until`](sleep_until) (also [`sleep_wheel`](crate::sleep_wheel)) | deadlines exact to the nanosecond; Tokio rounds them up to its 1 ms tick |
//! | `tokio::time::Sleep` | [`time::Sleep`](Sleep) | `Unpin` (no `Box::pin` needed); a later [`reset`](Sleep::reset) costs one comparison and is re-filed lazily, on the first poll after the old deadline wakes the task (one extra wakeup; a task that then does not poll it is not woken at the new deadline, where Tokio's would be); completes early with [`is_shutdown`](Sleep::is_shutdown) if its timer shuts down |
//! | `tokio::time::timeout`, `timeout_at`, `Timeout` | [`time::timeout`](timeout), [`time::timeout_at`](timeout_at), [`time::Timeout`](Timeout) | inner future polled first, timer registered on the first `Pending` (as Tokio) |
//! | `tokio::time::error::Elapsed` | [`time::error::Elapsed`](error::Elapsed) | another type: `Into<std::io::Error>` (`TimedOut`), `Error + Send + Sync`, [`is_shutdown`](crate::Elapsed::is_shutdown); the `io::Error` wraps the `Elapsed` (its message is the `Elapsed`'s, "deadline has elapsed", and `get_ref` is `Some`) where Tokio's has no inner error and reads "timed out" |
//! | `tokio::time::interval`, `interval_at`, `Interval`, `MissedTickBehavior` | same names here | one wheel entry for the interval's life; [`Interval::set_period`] added; a `Stream` (and `FusedStream`) itself: drop tokio-stream's `IntervalStream` wrapper, which, like `StreamExt::timeout_repeating`, takes Tokio's `Interval` only |
//! | `tokio::time::Instant`, `Duration` | re-exported | the same types |
//! | `tokio_util::time::DelayQueue`, `compact` | [`DelayQueue`](crate::DelayQueue), [`compact`](crate::DelayQueue::compact) | exact deadlines (tokio-util rounds to 1 ms); no panic past 2^36 ms; no allocation per expiry; every past deadline counts as due, and due items come out in deadline order; moving the item the task waits for later, or removing it, moves the queue's timer on its next poll, not at once (a queue not polled before the old deadline wakes its task once then, where tokio-util's does not); each item handed out spends a unit of the task's cooperative budget, as a completed Tokio `Sleep` does (tokio-util's spends one, through its sleep, for an item that comes out of its wheel, and none for one inserted already due) |
//! | `tokio::spawn` after `tokio::time::sleep` | [`spawn_after`](crate::spawn_after), [`spawn_at`](crate::spawn_at) | the future waits in the wheel, not as a task; cancellable exactly once; [`DelayedTask::reset`](crate::DelayedTask::reset) moves it; no `abort`: [`cancel`](crate::DelayedTask::cancel) stops it only before it starts, and says whether it did; a shutdown of the runtime (or of the timer, before the task starts) resolves the handle with [`is_shutdown`](crate::DelayedError::is_shutdown) where a `JoinError` is `is_cancelled`; on a [`Timer`](crate::Timer) of another runtime, the task runs on the timer's runtime |
//! | `hyper_util::rt::TokioTimer` | `tokio_timing_wheel::hyper::HyperTimer` (feature `hyper`) | sleeps on the wheel, reset in place |
//! | `tower::timeout::{TimeoutLayer, Timeout}` | `tokio_timing_wheel::tower::{TimeoutLayer, Timeout}` (feature `tower`) | its error is tower's own `Elapsed`, boxed |
//! | `tower_http::timeout::{TimeoutLayer, RequestBodyTimeoutLayer, ResponseBodyTimeoutLayer}` | `tokio_timing_wheel::http::{...}` (feature `http`) | 408 with an empty body, no `HandleErrorLayer`; a body's timer is moved in place per frame; the response (frame) is polled before the timer, so one ready at the limit, or under a zero limit, goes through where tower-http answers the timeout; `Clone`, not `Copy` |
//! | `axum::serve` | `tokio_timing_wheel::server::serve` (feature `server`) | adds header-read, keep-alive, idle and age limits and a shutdown timeout |
//! | tonic's `grpc-timeout` handling (`transport::Server`) | `tokio_timing_wheel::grpc::GrpcTimeoutLayer` under `serve` (feature `grpc`) | DEADLINE_EXCEEDED where tonic's server answers Cancelled; `PropagateDeadlineLayer` for outgoing calls |
//!
//! Costs: registering and cancelling take a per-thread shard's lock, not one lock for the
//! whole runtime; a timer cancelled (dropped) on another thread than the one that registered
//! it takes that thread's shard lock, a cache-line transfer Tokio's per-worker timer avoids.
//!
//! **Behavioural difference: exact deadlines.** Tokio rounds every deadline up to its
//! 1 ms tick; the wheel keeps it to the nanosecond. So where a deadline falls between two of
//! Tokio's ticks (Tokio's own tests meet this when `tokio::time::pause()` is called in the
//! middle of a millisecond), a timer here may complete up to one tick earlier than Tokio's
//! would. It never completes before its deadline. In paused time, a deadline off Tokio's 1 ms
//! grid fires at the grid's next millisecond, not exactly at it: the wheel's alarm is a Tokio
//! sleep, and paused time advances to where Tokio wakes it. Tokio's auto-advance moves the
//! clock by whole milliseconds from where it stands, so once a sub-millisecond `advance` has
//! left the clock off the grid, a timer fires up to 1 ms later still, as Tokio's own do.
//!
//! **Behavioural difference: a cancelled timer's alarm.** A timer dropped before its deadline
//! (a timeout answered in time) leaves the wheel at once, but the alarm set for it stays set
//! until then, and its firing pass finds nothing. On a running clock that is one wakeup; in
//! paused time, a runtime that then waits on something other than a timer (a thread, real
//! I/O) has its clock auto-advanced to that deadline, where Tokio's cancelled timer leaves
//! nothing to advance to. A test that waits so after its timeouts were answered should not
//! count on the paused clock standing still (Tokio's own auto-advance already moves it to
//! any timer still pending then).
//!
//! **Behavioural difference: a first poll after the deadline.** A [`sleep`] or [`timeout`]
//! first polled only after its deadline has passed reads no clock: unless the timer's last
//! firing pass already went past the deadline, it returns `Pending` with its task already
//! woken, and completes on the next poll, with no time passing in between; Tokio's completes
//! on that first poll. So do the timers of the tower, tower-http and hyper integrations. An
//! `.await` does not see the difference; a test that polls by hand (tokio-test's
//! `assert_ready!` right after `advance`) needs a second poll. [`sleep_until`] and
//! [`timeout_at`] check the clock and complete on the first poll, as Tokio's, and so does an
//! [`Interval`]'s tick due when polled (the loop body took longer than a period).
//!
//! **Smaller differences.** [`Timeout`] is `Unpin` whenever its future is (it holds an `Unpin`
//! [`Sleep`]). [`error::Elapsed`]'s `Debug` output is not Tokio's `Elapsed(())`; its `Display`
//! is the same for a deadline that passed (one cut short by a timer's shutdown says so). The
//! panics of a timer made outside a runtime, or on one without a time driver, carry this
//! crate's messages, not Tokio's (a `#[should_panic(expected = ...)]` written for
//! Tokio's text needs its own); a zero interval period's message contains Tokio's. A
//! [`DelayQueue`](crate::DelayQueue)'s panics for a key that names no item carry this crate's
//! messages too (tokio-util's say "invalid key" or "Invalid index"). A
//! [`timeout`] of a duration too large to add (`Duration::MAX`) still takes its timer, so it
//! panics outside a runtime, or on one without a time driver, where Tokio's sets none and
//! needs neither; in exchange the timer's shutdown resolves it. An
//! [`Interval`] reads the clock of its timer's runtime, while that lives, wherever it is polled
//! or reset (Tokio's reads the current one): the same clock, unless runtimes keep paused
//! clocks of their own (Tokio's `test-util`). `Debug` output is this crate's. The timers make
//! none of the `tracing` spans that Tokio's make with `tokio_unstable` for tokio-console
//! (`runtime.resource`): the console lists only each timer's alarm, one Tokio sleep.
//!
//! # Examples
//!
//! ```
//! // Was: use tokio::time::{sleep, timeout, Duration, Instant};
//! use tokio_timing_wheel::time::{sleep, timeout, Duration, Instant};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let start = Instant::now();
//! sleep(Duration::from_millis(10)).await;
//! assert_eq!(start.elapsed(), Duration::from_millis(10));
//! let r = timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
//! let err: tokio_timing_wheel::time::error::Elapsed = r.unwrap_err();
//! assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::TimedOut);
//! # }
//! ```

pub use std::time::Duration;
pub use tokio::time::Instant;

pub use crate::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use crate::sleep::{sleep_wheel as sleep, sleep_wheel_until as sleep_until, Sleep};
pub use crate::timeout::{timeout, timeout_at, Timeout};

/// The error of a timeout, as `tokio::time::error`.
pub mod error {
    pub use crate::error::Elapsed;
    /// Tokio's own timer error, re-exported so that imports of `tokio::time::error` keep
    /// compiling: the wheel never returns one (its errors are [`TimerError`](crate::TimerError)).
    pub use tokio::time::error::Error;
}
