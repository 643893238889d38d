//! `GrpcTimeoutLayer`: honours `grpc-timeout`, answering DEADLINE_EXCEEDED when it passes.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tower::{Layer, Service};

use super::{parse_grpc_timeout, Deadline};
use crate::integrations::timer_ref::TimerRef;
use crate::Timer;

/// The `grpc-status` of DEADLINE_EXCEEDED.
const DEADLINE_EXCEEDED: &str = "4";
/// The `grpc-status` of UNAVAILABLE.
const UNAVAILABLE: &str = "14";

/// The `grpc-status` of RESOURCE_EXHAUSTED (what tonic answers for an overloaded server).
const RESOURCE_EXHAUSTED: &str = "8";

/// Applies [`GrpcTimeout`]: a gRPC server's deadline, from the client's `grpc-timeout` header
/// and the server's own maximum.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// use tokio_timing_wheel::grpc::GrpcTimeoutLayer;
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let slow = tower::service_fn(|_req: http::Request<()>| async {
///     tokio::time::sleep(Duration::from_secs(60)).await;
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// });
/// let mut svc = ServiceBuilder::new().layer(GrpcTimeoutLayer::new()).service(slow);
/// let req = http::Request::builder().header("grpc-timeout", "100m").body(()).unwrap();
/// let res = svc.ready().await.unwrap().call(req).await.unwrap();
/// assert_eq!(res.status(), 200);
/// assert_eq!(res.headers()["content-type"], "application/grpc");
/// assert_eq!(res.headers()["grpc-status"], "4"); // DEADLINE_EXCEEDED
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct GrpcTimeoutLayer {
    max: Option<Duration>,
    timer: TimerRef,
}

impl GrpcTimeoutLayer {
    /// Honours each request's `grpc-timeout`; requests without one (or with a malformed one)
    /// get no deadline.
    ///
    /// # Examples
    ///
    /// See [`GrpcTimeoutLayer`].
    pub fn new() -> GrpcTimeoutLayer {
        GrpcTimeoutLayer::default()
    }

    /// Caps every deadline at `max`, and gives requests without `grpc-timeout` that deadline.
    /// A zero `max` answers DEADLINE_EXCEEDED to every call not answered on its first poll (as
    /// a `grpc-timeout` of `0n` does).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tokio_timing_wheel::grpc::GrpcTimeoutLayer;
    ///
    /// let layer = GrpcTimeoutLayer::new().max(Duration::from_secs(30));
    /// # let _ = layer;
    /// ```
    pub fn max(mut self, max: Duration) -> GrpcTimeoutLayer {
        self.max = Some(max);
        self
    }

    /// Runs the deadlines on `timer` instead of the runtime's default wheel.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::{grpc::GrpcTimeoutLayer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = GrpcTimeoutLayer::new().timer(Timer::builder().build().unwrap());
    /// # let _ = layer;
    /// # }
    /// ```
    pub fn timer(mut self, timer: Timer) -> GrpcTimeoutLayer {
        self.timer = TimerRef::from(timer);
        self
    }
}

impl<S> Layer<S> for GrpcTimeoutLayer {
    type Service = GrpcTimeout<S>;

    fn layer(&self, inner: S) -> GrpcTimeout<S> {
        GrpcTimeout {
            inner,
            max: self.max,
            timer: self.timer.clone(),
        }
    }
}

/// A gRPC service with a deadline: the sooner of the request's `grpc-timeout` and the
/// layer's maximum (and of the [`Deadline`] an outer `GrpcTimeout` gave the request, if any:
/// nested layers hand the handler the deadline that cuts it). The handler sees it as a [`Deadline`] request extension and as
/// [`Deadline::current`]; when it passes, the handler's future is dropped and the client gets
/// a trailers-only `DEADLINE_EXCEEDED`: HTTP 200, `content-type: application/grpc`,
/// `grpc-status: 4`, `grpc-message: Deadline exceeded`. A response that is ready in time goes
/// out as it is (its body is not timed). The deadline counts from the request's arrival at
/// this layer, before the inner service's `call` runs (the handler and the calls it makes
/// need it then); tonic's own server timeout counts from that `call`'s return.
///
/// On an explicit timer built with [`max_pending`](crate::Builder::max_pending) that is full,
/// a call with a deadline takes no timer: the handler is not called, and the client gets a
/// trailers-only `RESOURCE_EXHAUSTED` (`grpc-status: 8`, as tonic answers an overloaded
/// server) at once, rather than the request's task panicking. A call without a deadline needs
/// no timer and is served as usual. A call still waiting when its timer shuts down (see
/// [`Timer::shutdown`](crate::Timer::shutdown)) gets a trailers-only `UNAVAILABLE`
/// (`grpc-status: 14`) at the shutdown: its deadline had not passed, and a client may retry it.
///
/// # Examples
///
/// See [`GrpcTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct GrpcTimeout<S> {
    inner: S,
    max: Option<Duration>,
    timer: TimerRef,
}

impl<S> GrpcTimeout<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for GrpcTimeout<S>
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

    fn call(&mut self, mut request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let asked = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        let limit = match (asked, self.max) {
            (Some(asked), Some(max)) => Some(asked.min(max)),
            (asked, max) => asked.or(max),
        };
        let Some(limit) = limit else {
            return ResponseFuture {
                state: State::Plain {
                    future: self.inner.call(request),
                },
            };
        };
        // Under another `GrpcTimeoutLayer` (a server-wide cap outside a per-method layer), the
        // outer deadline may be the sooner: the one that cuts the call is the handler's.
        let mut deadline = Deadline::after(limit);
        if let Some(&outer) = request.extensions().get::<Deadline>() {
            deadline = deadline.min(outer);
        }
        request.extensions_mut().insert(deadline);
        let inner = &mut self.inner;
        let timed = self.timer.try_timeout_at(deadline.instant(), || {
            deadline.scope(deadline.sync_scope(|| inner.call(request)))
        });
        ResponseFuture {
            state: match timed {
                Ok(future) => State::Timed { future },
                Err(_full) => State::Refused,
            },
        }
    }
}

pin_project! {
    /// The response future of [`GrpcTimeout`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Plain { #[pin] future: F },
        Timed { #[pin] future: crate::Timeout<TaskLocalFuture<Deadline, F>> },
        // A call with a deadline that its full timer refused: RESOURCE_EXHAUSTED on the
        // first poll.
        Refused,
        // A timed call has resolved: its future, the handler's, is dropped (at the deadline,
        // not when the response future is).
        Done,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadline = match &self.state {
            State::Plain { .. } | State::Refused | State::Done => None,
            State::Timed { future } => Some(future.deadline()),
        };
        f.debug_struct("ResponseFuture")
            .field("deadline", &deadline)
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
        let mut state = self.project().state;
        let timed = match state.as_mut().project() {
            StateProj::Plain { future } => return future.poll(cx),
            StateProj::Timed { future } => ready!(future.poll(cx)),
            StateProj::Refused => {
                state.set(State::Done);
                return Poll::Ready(Ok(trailers_only(
                    RESOURCE_EXHAUSTED,
                    "Too many pending timers",
                )));
            }
            StateProj::Done => panic!("`ResponseFuture` polled after completion"),
        };
        state.set(State::Done);
        Poll::Ready(match timed {
            Ok(response) => response,
            // The timer shut down before the deadline: the server is going away; a client may
            // retry an UNAVAILABLE call elsewhere, where DEADLINE_EXCEEDED would tell it not to.
            Err(elapsed) if elapsed.is_shutdown() => {
                Ok(trailers_only(UNAVAILABLE, "Server shutting down"))
            }
            Err(_) => Ok(trailers_only(DEADLINE_EXCEEDED, "Deadline exceeded")),
        })
    }
}

/// A trailers-only gRPC response: the status in the headers, an empty body.
fn trailers_only<B: Default>(status: &'static str, message: &'static str) -> Response<B> {
    let mut response = Response::new(B::default());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from_static(status));
    headers.insert("grpc-message", HeaderValue::from_static(message));
    response
}
