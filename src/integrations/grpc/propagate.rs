//! `PropagateDeadlineLayer`: a client sets `grpc-timeout` from the deadline it serves under.

use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

use super::{format_grpc_timeout_left, parse_grpc_timeout, Deadline};

/// Applies [`PropagateDeadline`] to a gRPC client (a tonic `Channel`, a hyper client).
///
/// # Examples
///
/// ```
/// use tokio_timing_wheel::grpc::{Deadline, PropagateDeadlineLayer};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // A stand-in for a channel: it answers with the header it was sent.
/// let channel = tower::service_fn(|req: http::Request<()>| async move {
///     Ok::<_, std::convert::Infallible>(req.headers()["grpc-timeout"].clone())
/// });
/// let mut client = ServiceBuilder::new().layer(PropagateDeadlineLayer::new()).service(channel);
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(Deadline::after(std::time::Duration::from_millis(250)));
/// let sent = client.ready().await.unwrap().call(req).await.unwrap();
/// assert_eq!(sent, "250000u");
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PropagateDeadlineLayer(());

impl PropagateDeadlineLayer {
    /// A new layer.
    ///
    /// # Examples
    ///
    /// See [`PropagateDeadlineLayer`].
    pub fn new() -> PropagateDeadlineLayer {
        PropagateDeadlineLayer(())
    }
}

impl<S> Layer<S> for PropagateDeadlineLayer {
    type Service = PropagateDeadline<S>;

    fn layer(&self, inner: S) -> PropagateDeadline<S> {
        PropagateDeadline { inner }
    }
}

/// A gRPC client that sets each outgoing request's `grpc-timeout` to what is left of its
/// deadline: the sooner of the request's own [`Deadline`] extension and
/// [`Deadline::current`] (the deadline of the call this task is serving), whichever it has,
/// rounded down to the
/// unit that keeps it within 8 digits (unlike [`format_grpc_timeout`](super::format_grpc_timeout),
/// which rounds up), so the callee's deadline is never later than the caller's. A
/// `grpc-timeout` already on the request is kept if it is sooner. Without a deadline the request goes out as
/// it is. The header is computed when the request is sent (`call`), so time spent before
/// counts.
///
/// # Examples
///
/// See [`PropagateDeadlineLayer`].
#[derive(Clone, Debug)]
pub struct PropagateDeadline<S> {
    inner: S,
}

impl<S> PropagateDeadline<S> {
    /// Wraps `inner`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::grpc::PropagateDeadline;
    ///
    /// let channel = tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(())
    /// });
    /// let client = PropagateDeadline::new(channel);
    /// # let _ = client;
    /// ```
    pub fn new(inner: S) -> PropagateDeadline<S> {
        PropagateDeadline { inner }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<B>> for PropagateDeadline<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        // The sooner of the request's own and the served call's: an answer after the latter
        // is of no use to the call being served.
        let deadline = match (request.extensions().get::<Deadline>(), Deadline::current()) {
            (Some(&own), Some(current)) => Some(own.min(current)),
            (own, current) => own.copied().or(current),
        };
        if let Some(deadline) = deadline {
            // Rounded down: the callee must give up no later than this call does.
            let left = format_grpc_timeout_left(deadline.remaining());
            let sooner = request
                .headers()
                .get("grpc-timeout")
                .and_then(|v| parse_grpc_timeout(v.as_bytes()))
                .map_or(true, |already| {
                    parse_grpc_timeout(left.as_bytes()).is_some_and(|left| left < already)
                });
            if sooner {
                request.headers_mut().insert("grpc-timeout", left);
            }
        }
        self.inner.call(request)
    }
}
