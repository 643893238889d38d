//! `Deadline`: the instant a gRPC call must be answered by, as the server layer hands it on.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::deadline_after;

tokio::task_local! {
    static CURRENT: Deadline;
}

/// When a gRPC call must be answered by: set by [`GrpcTimeoutLayer`](super::GrpcTimeoutLayer)
/// from `grpc-timeout` (capped by its maximum), put into the request's extensions, and current
/// ([`Deadline::current`]) while the handler runs; read by
/// [`PropagateDeadlineLayer`](super::PropagateDeadlineLayer) to pass it on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::grpc::Deadline;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Deadline::after(Duration::from_secs(2));
/// tokio::time::sleep(Duration::from_millis(500)).await;
/// assert_eq!(deadline.remaining(), Duration::from_millis(1500));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// A deadline at `instant`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::grpc::Deadline;
    ///
    /// let now = Instant::now();
    /// assert_eq!(Deadline::at(now).instant(), now);
    /// ```
    pub fn at(instant: Instant) -> Deadline {
        Deadline(instant)
    }

    /// A deadline `timeout` from now (saturating: a huge timeout gives a far deadline).
    ///
    /// # Examples
    ///
    /// See [`Deadline`].
    pub fn after(timeout: Duration) -> Deadline {
        Deadline(deadline_after(Instant::now(), timeout))
    }

    /// The instant.
    ///
    /// # Examples
    ///
    /// See [`Deadline::at`].
    pub fn instant(&self) -> Instant {
        self.0
    }

    /// The time left (zero once past).
    ///
    /// # Examples
    ///
    /// See [`Deadline`].
    pub fn remaining(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::grpc::Deadline;
    ///
    /// assert!(Deadline::after(Duration::ZERO).is_expired());
    /// ```
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.0
    }

    /// The deadline of the gRPC call being served by this task, if
    /// [`GrpcTimeoutLayer`](super::GrpcTimeoutLayer) gave it one (inside the handler's future;
    /// not in tasks it spawns).
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::grpc::Deadline;
    ///
    /// // Outside a call with a deadline: none.
    /// assert_eq!(Deadline::current(), None);
    /// ```
    pub fn current() -> Option<Deadline> {
        CURRENT.try_with(|d| *d).ok()
    }

    pub(crate) fn scope<F: std::future::Future>(
        self,
        future: F,
    ) -> tokio::task::futures::TaskLocalFuture<Deadline, F> {
        CURRENT.scope(self, future)
    }

    pub(crate) fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self, f)
    }
}
