//! A tower `Timeout` middleware on the wheel: a drop-in for `tower::timeout`.
//!
//! [`TimeoutLayer`] wraps a service in [`Timeout`], which limits the time each call's response
//! future may take. It behaves as tower's own `tower::timeout::Timeout`: `poll_ready` is the
//! inner service's, and errors are `Box<dyn Error + Send + Sync>` holding either the inner
//! service's error or an elapsed error. The response future is this crate's
//! [`Timeout`](crate::Timeout) future under a thin adapter, not boxed, so a request that
//! answers in time costs one O(1) insert and removal in the wheel.
//!
//! One difference from tower's: a response future first polled only after its deadline has
//! passed may return `Pending` with its task already woken, and fail with `Elapsed` on the
//! next poll (tower's fails on that first poll); see [`time`](crate::time#migration).
//!
//! On a timer built with [`max_pending`](crate::Builder::max_pending), each call takes its
//! timer slot when it is made, and a call that a full timer cannot take is refused: the inner
//! service is not called and the response future fails at once with
//! [`TimerError::Full`], as the timer's `try_*` methods do, rather
//! than panicking when polled.
//!
//! # The elapsed error is tower's
//!
//! When the deadline passes, the error is tower's own [`tower::timeout::error::Elapsed`], so
//! error handlers written for `tower::timeout` (axum's `HandleErrorLayer` recipes test
//! `err.is::<tower::timeout::error::Elapsed>()` to answer 408) keep working unchanged. This
//! costs one small dependency: the `tower` crate with only its `timeout` feature, whose own
//! dependencies (`tower-layer`, `tower-service`, `pin-project-lite`, `tokio`) the integration
//! needs anyway (`cargo tree -e normal --features tower`).
//!
//! When the timer [shuts down](crate::Timer::shutdown) (for example with its runtime) before
//! the deadline, the error is this crate's [`Elapsed`](crate::Elapsed) instead, with
//! [`is_shutdown`](crate::Elapsed::is_shutdown) true: the request was not slow, the server
//! is going away, and a handler can tell the two apart.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
//! use tokio_timing_wheel::tower::TimeoutLayer;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let slow = service_fn(|_: ()| async {
//!     tokio::time::sleep(Duration::from_secs(5)).await;
//!     Ok::<_, BoxError>("done")
//! });
//! let service = ServiceBuilder::new()
//!     .layer(TimeoutLayer::new(Duration::from_secs(1)))
//!     .service(slow);
//! let err = service.oneshot(()).await.unwrap_err();
//! assert!(err.is::<tower::timeout::error::Elapsed>());
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower::{BoxError, Layer, Service};

use super::timer_ref::TimerRef;
use crate::{Timer, TimerError};

/// Applies a [`Timeout`] to the requests of the wrapped service (see the [module](self) docs).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
/// use tokio_timing_wheel::tower::TimeoutLayer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let echo = service_fn(|s: &'static str| async move { Ok::<_, BoxError>(s) });
/// let service = ServiceBuilder::new()
///     .layer(TimeoutLayer::new(Duration::from_millis(100)))
///     .service(echo);
/// assert_eq!(service.oneshot("hi").await.unwrap(), "hi");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
    timer: TimerRef,
}

impl TimeoutLayer {
    /// A layer whose requests time out after `timeout`, on the default timer of the runtime
    /// each request is called on. It may be built outside a runtime, and in a `const`, as
    /// tower's.
    pub const fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timer: TimerRef::runtime_default(),
        }
    }

    /// A layer whose requests time out after `timeout`, on `timer`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{tower::TimeoutLayer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build().unwrap();
    /// let layer = TimeoutLayer::with_timer(Duration::from_secs(30), timer);
    /// # drop(layer);
    /// # }
    /// ```
    pub fn with_timer(timeout: Duration, timer: Timer) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timer: TimerRef::from(timer),
        }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            timer: self.timer.clone(),
        }
    }
}

/// A service whose responses must come within a time limit, built by [`TimeoutLayer`] or
/// [`Timeout::new`]; see the [module](self) docs for its errors.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tower::{service_fn, BoxError, ServiceExt};
/// use tokio_timing_wheel::tower::Timeout;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let failing = service_fn(|_: ()| async { Err::<(), BoxError>("boom".into()) });
/// let err = Timeout::new(failing, Duration::from_secs(1)).oneshot(()).await.unwrap_err();
/// assert_eq!(err.to_string(), "boom");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    timer: TimerRef,
}

impl<S> Timeout<S> {
    /// Wraps `inner`: each request times out after `timeout`, on the default timer of the
    /// runtime it is called on (`const`, as tower's).
    pub const fn new(inner: S, timeout: Duration) -> Timeout<S> {
        Timeout {
            inner,
            timeout,
            timer: TimerRef::runtime_default(),
        }
    }

    /// A reference to the inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// A mutable reference to the inner service.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    /// The inner service's readiness: the timeout covers the response, not the wait for
    /// capacity (as in `tower::timeout`).
    ///
    /// # Errors
    ///
    /// The inner service's readiness error, boxed.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    /// Calls the inner service; the returned future's timer starts now and is registered in
    /// the wheel only if the response is not ready on its first poll.
    ///
    /// On a timer built with [`max_pending`](crate::Builder::max_pending) the call takes its
    /// slot now instead (even a response ready at once holds one until then), before the inner
    /// service's `call` runs, so the limit counts from then: time the inner `call` spends
    /// before returning its future comes out of the limit (without `max_pending`, as in
    /// tower's, the limit counts from its return); if the timer is
    /// full, the inner service is not called and the returned future fails at once with
    /// [`TimerError::Full`], rather than panicking when polled.
    ///
    /// # Panics
    ///
    /// With [`TimeoutLayer::new`], outside a Tokio runtime or on one without a time driver.
    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let inner = &mut self.inner;
        match self
            .timer
            .try_timeout(self.timeout, false, || inner.call(request))
        {
            Ok(inner) => ResponseFuture {
                kind: Kind::Timed { inner },
            },
            Err(refused) => ResponseFuture {
                kind: Kind::Refused {
                    error: Some(refused),
                },
            },
        }
    }
}

pin_project! {
    /// The response future of [`Timeout`]: the inner service's future under this crate's
    /// [`Timeout`](crate::Timeout), its result mapped to tower's error convention.
    ///
    /// # Errors
    ///
    /// Resolves to a [`BoxError`] holding the inner service's error if it failed in time,
    /// [`tower::timeout::error::Elapsed`] if the deadline passed first, this crate's
    /// [`Elapsed`](crate::Elapsed) (with [`is_shutdown`](crate::Elapsed::is_shutdown) true)
    /// if the timer shut down first, or [`TimerError::Full`] if the call was refused because
    /// its timer was full (see [`Timeout`]'s `call`).
    ///
    /// # Cancellation
    ///
    /// Dropping it drops the inner future and removes its timer from the wheel.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    /// A call under its timeout, or one its full timer refused.
    #[project = KindProj]
    enum Kind<F> {
        Timed {
            #[pin]
            inner: crate::Timeout<F>,
        },
        Refused {
            error: Option<TimerError>,
        },
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    /// Prints the deadline only (never the inner future, nor the wheel).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Timed { inner } => f
                .debug_struct("ResponseFuture")
                .field("deadline", &inner.deadline())
                .finish_non_exhaustive(),
            Kind::Refused { error } => f
                .debug_struct("ResponseFuture")
                .field("refused", error)
                .finish(),
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = match self.project().kind.project() {
            KindProj::Timed { inner } => inner,
            KindProj::Refused { error } => {
                let error = error
                    .take()
                    .expect("ResponseFuture polled after completion");
                return Poll::Ready(Err(Box::new(error)));
            }
        };
        Poll::Ready(match std::task::ready!(inner.poll(cx)) {
            Ok(response) => response.map_err(Into::into),
            Err(elapsed) if elapsed.is_shutdown() => Err(Box::new(elapsed)),
            Err(_) => Err(Box::new(tower::timeout::error::Elapsed::new())),
        })
    }
}
