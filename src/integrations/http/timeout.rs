//! `TimeoutLayer` and `Timeout`: answer 408 (or another status) when a response is late.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::integrations::timer_ref::TimerRef;
use crate::Timer;

/// Applies [`Timeout`] to a service: tower-http's `TimeoutLayer`, on the wheel.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// use http::StatusCode;
/// use tokio_timing_wheel::http::TimeoutLayer;
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let slow = tower::service_fn(|_req: http::Request<()>| async {
///     tokio::time::sleep(Duration::from_secs(60)).await;
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("late")))
/// });
/// let mut svc = ServiceBuilder::new()
///     .layer(TimeoutLayer::new(Duration::from_secs(1)))
///     .service(slow);
/// let res = svc.ready().await.unwrap().call(http::Request::new(())).await.unwrap();
/// assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
/// assert!(res.body().is_empty());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
    status: StatusCode,
    timer: TimerRef,
}

impl TimeoutLayer {
    /// Answers `408 Request Timeout` when the inner service takes longer than `timeout`.
    ///
    /// A zero `timeout` answers 408 to every request whose response is not ready on its first
    /// poll.
    ///
    /// # Examples
    ///
    /// See [`TimeoutLayer`].
    pub fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout)
    }

    /// Answers `status` (with an empty body) when the inner service takes longer than
    /// `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use tokio_timing_wheel::http::TimeoutLayer;
    ///
    /// let layer = TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, Duration::from_secs(5));
    /// # let _ = layer;
    /// ```
    pub fn with_status_code(status: StatusCode, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            status,
            timer: TimerRef::default(),
        }
    }

    /// Runs the timeouts on `timer` instead of the default wheel of the runtime each request
    /// is served on.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tokio_timing_wheel::{http::TimeoutLayer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().build().unwrap();
    /// let layer = TimeoutLayer::new(Duration::from_secs(5)).timer(timer);
    /// # let _ = layer;
    /// # }
    /// ```
    pub fn timer(mut self, timer: Timer) -> TimeoutLayer {
        self.timer = TimerRef::from(timer);
        self
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            status: self.status,
            timer: self.timer.clone(),
        }
    }
}

/// A service whose responses that take longer than a limit are replaced by an empty
/// `408 Request Timeout` (or another status): tower-http's `Timeout`, on the wheel. At the
/// limit the inner service's future is dropped, with all it holds, as the 408 is answered
/// (not later, when the response future is dropped).
///
/// Each poll asks the inner future first and the timer second, as tower's `Timeout` and
/// Tokio's `timeout` do: a response ready at the poll that finds the limit passed is
/// delivered, where tower-http's `Timeout`, which asks its timer first, would answer 408.
///
/// On an explicit timer built with [`max_pending`](crate::Builder::max_pending) that is full,
/// a request is refused with an empty `503 Service Unavailable`, without calling the inner
/// service (see [`call`](Timeout::call)). A request still waiting when its timer shuts down
/// (see [`Timer::shutdown`](crate::Timer::shutdown)) is answered `503` too, at the shutdown:
/// it was not slow, and it can no longer be timed.
///
/// # Examples
///
/// See [`TimeoutLayer`]; `Timeout::new(service, limit)` is the same as
/// `TimeoutLayer::new(limit).layer(service)`.
#[derive(Clone, Debug)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    status: StatusCode,
    timer: TimerRef,
}

impl<S> Timeout<S> {
    /// Wraps `inner`, answering 408 after `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tokio_timing_wheel::http::Timeout;
    ///
    /// let svc = tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// });
    /// let svc = Timeout::new(svc, Duration::from_secs(5));
    /// # let _ = svc;
    /// ```
    pub fn new(inner: S, timeout: Duration) -> Timeout<S> {
        TimeoutLayer::new(timeout).layer(inner)
    }

    /// Wraps `inner`, answering `status` after `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use tokio_timing_wheel::http::Timeout;
    ///
    /// let svc = tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// });
    /// let svc = Timeout::with_status_code(svc, StatusCode::GATEWAY_TIMEOUT, Duration::from_secs(5));
    /// # let _ = svc;
    /// ```
    pub fn with_status_code(inner: S, status: StatusCode, timeout: Duration) -> Timeout<S> {
        TimeoutLayer::with_status_code(status, timeout).layer(inner)
    }

    /// A [`TimeoutLayer`] answering 408 after `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tokio_timing_wheel::http::Timeout;
    ///
    /// let layer = Timeout::<()>::layer(Duration::from_secs(5));
    /// # let _ = layer;
    /// ```
    pub fn layer(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer::new(timeout)
    }

    /// A [`TimeoutLayer`] answering `status` after `timeout` (tower-http's name for
    /// [`TimeoutLayer::with_status_code`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use tokio_timing_wheel::http::Timeout;
    ///
    /// let layer = Timeout::<()>::layer_with_status_code(StatusCode::GATEWAY_TIMEOUT, Duration::from_secs(5));
    /// # let _ = layer;
    /// ```
    pub fn layer_with_status_code(status: StatusCode, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer::with_status_code(status, timeout)
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Timeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    /// Calls the inner service; the limit counts from before the inner service's `call` runs,
    /// as tower-http's (time that `call` spends before returning its future comes out of the
    /// limit), and the timer is registered in the wheel only if the response is not ready on
    /// its first poll.
    ///
    /// On a timer built with [`max_pending`](crate::Builder::max_pending) the call takes its
    /// slot now instead (even a response ready at once holds one until then); if the timer is
    /// full, the inner service is not called and the returned future answers an empty
    /// `503 Service Unavailable` at once (the server is out of timers, as a load-shedding
    /// layer would answer), rather than panicking when polled.
    fn call(&mut self, request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let inner = &mut self.inner;
        match self
            .timer
            .try_timeout(self.timeout, true, || inner.call(request))
        {
            Ok(inner) => ResponseFuture {
                inner: Some(inner),
                status: self.status,
                refused: false,
            },
            Err(_full) => ResponseFuture {
                inner: None,
                status: self.status,
                refused: true,
            },
        }
    }
}

pin_project! {
    /// The response future of [`Timeout`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F> {
        // `None` once resolved: at the limit, the inner future (and all it holds) is dropped
        // then, not when the response future is. `None` from the start for a call its full
        // timer refused: it answers 503 on its first poll.
        #[pin]
        inner: Option<crate::Timeout<F>>,
        status: StatusCode,
        // A call its full timer refused, not answered yet.
        refused: bool,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field(
                "deadline",
                &self.inner.as_ref().map(crate::Timeout::deadline),
            )
            .field("status", &self.status)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut me = self.project();
        let Some(inner) = me.inner.as_mut().as_pin_mut() else {
            // A call its full timer refused answers once; any other poll is a misuse.
            assert!(
                std::mem::take(me.refused),
                "`ResponseFuture` polled after completion"
            );
            return Poll::Ready(Ok(empty(StatusCode::SERVICE_UNAVAILABLE)));
        };
        let result = ready!(inner.poll(cx));
        me.inner.set(None);
        Poll::Ready(match result {
            Ok(response) => response,
            // The timer shut down before the limit: the request was not slow, but it cannot
            // be timed any more (the server is going away), and answering beats hanging.
            Err(elapsed) if elapsed.is_shutdown() => Ok(empty(StatusCode::SERVICE_UNAVAILABLE)),
            Err(_) => Ok(empty(*me.status)),
        })
    }
}

/// An answer with `status` and an empty body.
fn empty<B: Default>(status: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = status;
    response
}
