//! `Tracked`: the user's tower service as hyper calls it, counting each request in flight from
//! the arrival of its head to the end of its response body.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::conn::Shared;

/// The user's tower service, as a hyper service: each call clones it, waits for its readiness
/// and calls it (as hyper-util's `TowerToHyperService` does, through tower's `Oneshot`), and
/// counts the request in flight from the call, that is from the arrival of its head: a request
/// waiting for a service that is not ready (a concurrency limit, a full `Buffer`) is in
/// flight, not idle, so neither the keep-alive nor the header-read limit cuts it.
pub(crate) struct Tracked<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Tracked<S> {
        Tracked { inner, shared }
    }
}

/// One request in flight; its drop ends it, unless it was [kept](InFlight::keep).
struct InFlight(Option<Arc<Shared>>);

impl InFlight {
    /// Leaves the request in flight for the rest of the connection's life: a tunnel (a
    /// CONNECT answered with success) goes on past its response, and its end cannot be seen.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(shared) = &self.0 {
            shared.request_ended();
        }
    }
}

impl<S, ReqB, B> hyper::service::Service<http::Request<ReqB>> for Tracked<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<B>> + Clone,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S, http::Request<ReqB>, S::Future>;

    fn call(&self, request: http::Request<ReqB>) -> Self::Future {
        self.shared.request_started();
        TrackedFuture {
            connect: request.method() == http::Method::CONNECT,
            call: Call::NotReady {
                service: self.inner.clone(),
                request: Some(request),
            },
            guard: Some(InFlight(Some(self.shared.clone()))),
        }
    }
}

pin_project! {
    /// Where a call stands: waiting for the service's readiness, or called.
    #[project = CallProj]
    enum Call<S, R, F> {
        NotReady { service: S, request: Option<R> },
        Called { #[pin] future: F },
    }
}

pin_project! {
    /// A call of [`Tracked`]: in flight until its response body ends, or until it fails or is
    /// dropped.
    pub(crate) struct TrackedFuture<S, R, F> {
        #[pin]
        call: Call<S, R, F>,
        guard: Option<InFlight>,
        // A CONNECT: answered with success, it opens a tunnel (HTTP/2: a stream that goes on
        // after the response), in flight for the rest of the connection.
        connect: bool,
    }
}

impl<S, R, B> Future for TrackedFuture<S, R, S::Future>
where
    S: tower::Service<R, Response = http::Response<B>>,
{
    type Output = Result<http::Response<TrackedBody<B>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut me = self.project();
        loop {
            match me.call.as_mut().project() {
                CallProj::NotReady { service, request } => {
                    ready!(service.poll_ready(cx))?;
                    let request = request
                        .take()
                        .expect("`TrackedFuture` polled after completion");
                    let future = service.call(request);
                    me.call.set(Call::Called { future });
                }
                CallProj::Called { future } => {
                    let response = ready!(future.poll(cx))?;
                    let mut guard = me.guard.take();
                    if *me.connect && response.status().is_success() {
                        if let Some(g) = guard.take() {
                            g.keep();
                        }
                    }
                    return Poll::Ready(Ok(response.map(|inner| TrackedBody {
                        inner,
                        _guard: guard,
                    })));
                }
            }
        }
    }
}

pin_project! {
    /// A response body, its request in flight until it is dropped (hyper drops it at its end).
    pub(crate) struct TrackedBody<B> {
        #[pin]
        inner: B,
        _guard: Option<InFlight>,
    }
}

impl<B: Body> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
