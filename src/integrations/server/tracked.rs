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

/// One request in flight; its drop ends it.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: tower::Service<R, Response = http::Response<B>> + Clone,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S, R, S::Future>;

    fn call(&self, request: R) -> Self::Future {
        self.shared.request_started();
        TrackedFuture {
            call: Call::NotReady {
                service: self.inner.clone(),
                request: Some(request),
            },
            guard: Some(InFlight(self.shared.clone())),
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
                    let guard = me.guard.take();
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
