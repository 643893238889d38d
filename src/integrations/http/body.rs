//! `TimeoutBody` and the layers that put it on request and response bodies: one wheel timer
//! per body, moved in place after each frame.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::clock::sleep_deadline;
use crate::integrations::timer_ref::TimerRef;
use crate::{Sleep, Timer};

type BoxError = Box<dyn StdError + Send + Sync>;

#[cfg(test)]
thread_local! {
    /// Timers the bodies of this thread have created (the unit test counts them).
    static TIMERS_CREATED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A new timer for a body's wait, until `deadline` (every one a body makes comes from here,
/// so the unit test can count them).
fn new_timer(timer: &TimerRef, deadline: Instant) -> Result<Sleep, crate::TimerError> {
    #[cfg(test)]
    TIMERS_CREATED.with(|n| n.set(n.get() + 1));
    timer.try_timeout_delay_until(deadline)
}

/// The error of a [`TimeoutBody`] that waited longer than its limit for a frame.
///
/// # Examples
///
/// ```
/// use tokio_timing_wheel::http::TimeoutError;
///
/// let e: Box<dyn std::error::Error + Send + Sync> = Box::new(TimeoutError::new());
/// assert!(e.is::<TimeoutError>());
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutError(());

impl TimeoutError {
    /// A new body timeout error.
    pub fn new() -> TimeoutError {
        TimeoutError(())
    }
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("body timed out: no frame within its limit")
    }
}

impl StdError for TimeoutError {}

pin_project! {
    /// A body that fails with [`TimeoutError`] when no frame arrives for its limit:
    /// tower-http's `TimeoutBody`, on the wheel.
    ///
    /// The limit counts from the moment the body is waited on (a poll that finds no frame), so
    /// a consumer that is slow to poll does not fail it. Its one wheel timer is created at the
    /// first wait and moved in place after each frame (one comparison in the wheel), never
    /// created again; it leaves the wheel when the body ends (its last frame, trailers
    /// included, an error, or the end of the stream).
    ///
    /// Between frames the timer stays filed for the last wait's deadline (moving it later
    /// costs nothing then, see [`Sleep::reset`](crate::Sleep::reset)): when that deadline
    /// comes, the task that last waited is woken once, to re-file it if it waits again.
    ///
    /// A [`TimeoutError`] does not end the body for a consumer that polls on (hyper does not):
    /// a later poll that finds a frame gets it, and the limit counts again from the next wait;
    /// one that finds none gets the error again. (tower-http's body answers the error to
    /// every poll after its limit, frame or not.)
    ///
    /// If the runtime's default timer shuts down while the body waits, the wait goes on, to
    /// the same deadline, on the runtime's new default timer, and so does a wait after a
    /// later frame (polled then outside any runtime, the wait panics, as a Tokio sleep does
    /// once its runtime is gone). An explicit timer's shutdown fails a body waiting then with
    /// [`TimeoutError`], and any later wait at once.
    ///
    /// On an explicit timer built with [`max_pending`](crate::Builder::max_pending), a wait
    /// that finds the timer full (it needs a slot: its first, or one after its timer fired)
    /// fails with [`TimerError::Full`](crate::TimerError::Full) instead of panicking in the
    /// task that reads the body; a later wait tries again.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use http_body_util::BodyExt;
    /// use tokio_timing_wheel::http::{TimeoutBody, TimeoutError};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// // A body that never sends anything.
    /// let (_tx, body) = http_body_util::channel::Channel::<bytes::Bytes, std::convert::Infallible>::new(1);
    /// let body = TimeoutBody::new(Duration::from_secs(1), body);
    /// let err = body.collect().await.unwrap_err();
    /// assert!(err.is::<TimeoutError>());
    /// # }
    /// ```
    pub struct TimeoutBody<B> {
        #[pin]
        body: B,
        timeout: Duration,
        sleep: Option<Sleep>,
        // A frame arrived since the timer was last placed: move it at the next wait.
        moved: bool,
        timer: TimerRef,
    }
}

impl<B> TimeoutBody<B> {
    /// Wraps `body` with a `timeout` between frames.
    ///
    /// A zero `timeout` fails the body the first time it has to wait for a frame; one too large
    /// for a deadline (`Duration::MAX`) means no limit.
    ///
    /// # Examples
    ///
    /// See [`TimeoutBody`].
    pub fn new(timeout: Duration, body: B) -> TimeoutBody<B> {
        TimeoutBody::with_timer(timeout, body, TimerRef::default())
    }

    fn with_timer(timeout: Duration, body: B, timer: TimerRef) -> TimeoutBody<B> {
        TimeoutBody {
            body,
            timeout,
            sleep: None,
            moved: false,
            timer,
        }
    }

    /// The wrapped body.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    /// Unwraps the body.
    pub fn into_inner(self) -> B {
        self.body
    }
}

impl<B> fmt::Debug for TimeoutBody<B> {
    /// The limit, and the deadline of the wait in progress: none between frames or once the
    /// body has ended (the timer left at an earlier wait's deadline is not one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadline = self.sleep.as_ref().filter(|_| !self.moved);
        f.debug_struct("TimeoutBody")
            .field("timeout", &self.timeout)
            .field("deadline", &deadline.map(Sleep::deadline))
            .finish_non_exhaustive()
    }
}

impl<B> Body for TimeoutBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let mut me = self.project();
        if let Poll::Ready(frame) = me.body.as_mut().poll_frame(cx) {
            *me.moved = true;
            // The body is over (its end, an error, trailers, or a frame that says it was the
            // last): nothing waits on it again, so its timer leaves the wheel now instead of
            // firing, and waking the task for nothing, at the deadline of the last wait.
            // Trailers end a body even when its `is_end_stream` does not say so (the default
            // answer, `http_body_util`'s `Channel` and `StreamBody`): hyper stops there.
            let over = match &frame {
                Some(Ok(frame)) => frame.is_trailers() || me.body.is_end_stream(),
                None | Some(Err(_)) => true,
            };
            if over {
                if let Some(sleep) = me.sleep.as_mut() {
                    sleep.disarm();
                }
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        // On a full timer (one built with `max_pending`) the wait fails the body with the
        // timer's error; the next wait tries again.
        let full = |e: crate::TimerError| Poll::Ready(Some(Err(BoxError::from(e))));
        let sleep = match me.sleep {
            Some(sleep) => {
                if *me.moved {
                    let deadline = sleep_deadline(Instant::now(), *me.timeout);
                    if sleep.shard().is_shutdown() {
                        // Its timer shut down since the last wait: a new timer, as at the
                        // first wait (with the default timer, the runtime's new one), rather
                        // than one that fails the body at once.
                        match new_timer(me.timer, deadline) {
                            Ok(new) => *sleep = new,
                            Err(e) => return full(e),
                        }
                    } else if let Err(e) = Pin::new(&mut *sleep).try_reset(deadline) {
                        // Its slot went when it fired, and was taken since: still `moved`.
                        return full(e);
                    }
                }
                sleep
            }
            None => {
                let deadline = sleep_deadline(Instant::now(), *me.timeout);
                let new = match new_timer(me.timer, deadline) {
                    Ok(new) => new,
                    Err(e) => return full(e),
                };
                me.sleep.insert(new)
            }
        };
        *me.moved = false;
        ready!(Pin::new(&mut *sleep).poll(cx));
        if sleep.is_shutdown() && me.timer.is_default() {
            // The runtime's default timer shut down before the deadline: the rest is waited on
            // the runtime's new default timer, as `IdleTimeout` does, not reported as a timeout.
            #[cfg(test)]
            TIMERS_CREATED.with(|n| n.set(n.get() + 1));
            *sleep = crate::sleep_wheel_until(sleep.deadline()).into_timeout_delay();
            ready!(Pin::new(&mut *sleep).poll(cx));
        }
        Poll::Ready(Some(Err(Box::new(TimeoutError::new()))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

macro_rules! body_layer {
    ($layer:ident, $service:ident, $what:literal, $example:literal) => {
        #[doc = concat!("Wraps the ", $what, " body of every request in a [`TimeoutBody`].")]
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        #[doc = concat!("use tokio_timing_wheel::http::", stringify!($layer), ";")]
        /// use tower::ServiceBuilder;
        ///
        /// let svc = ServiceBuilder::new()
        #[doc = concat!("    .layer(", stringify!($layer), "::new(Duration::from_secs(30)))")]
        #[doc = $example]
        /// # let _ = svc;
        /// ```
        #[derive(Clone, Debug)]
        pub struct $layer {
            timeout: Duration,
            timer: TimerRef,
        }

        impl $layer {
            /// Fails a body that waits longer than `timeout` for a frame.
            ///
            /// # Examples
            ///
            #[doc = concat!("See [`", stringify!($layer), "`].")]
            pub fn new(timeout: Duration) -> $layer {
                $layer {
                    timeout,
                    timer: TimerRef::default(),
                }
            }

            /// Runs the body timers on `timer` instead of the runtime's default wheel.
            ///
            /// # Examples
            ///
            /// ```
            /// # use std::time::Duration;
            #[doc = concat!("use tokio_timing_wheel::{http::", stringify!($layer), ", Timer};")]
            ///
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() {
            /// let timer = Timer::builder().build().unwrap();
            #[doc = concat!("let layer = ", stringify!($layer), "::new(Duration::from_secs(30)).timer(timer);")]
            /// # let _ = layer;
            /// # }
            /// ```
            pub fn timer(mut self, timer: Timer) -> $layer {
                self.timer = TimerRef::from(timer);
                self
            }
        }

        impl<S> Layer<S> for $layer {
            type Service = $service<S>;

            fn layer(&self, inner: S) -> $service<S> {
                $service {
                    inner,
                    timeout: self.timeout,
                    timer: self.timer.clone(),
                }
            }
        }

        #[doc = concat!("The service [`", stringify!($layer), "`] makes.")]
        ///
        /// # Examples
        ///
        #[doc = concat!("See [`", stringify!($layer), "`].")]
        #[derive(Clone, Debug)]
        pub struct $service<S> {
            inner: S,
            timeout: Duration,
            timer: TimerRef,
        }

        impl<S> $service<S> {
            /// Wraps `inner`.
            ///
            /// # Examples
            ///
            #[doc = concat!("See [`", stringify!($layer), "`].")]
            pub fn new(inner: S, timeout: Duration) -> $service<S> {
                $layer::new(timeout).layer(inner)
            }

            #[doc = concat!("A [`", stringify!($layer), "`] with this `timeout` (as `", stringify!($layer), "::new`).")]
            ///
            /// # Examples
            ///
            #[doc = concat!("See [`", stringify!($layer), "`].")]
            pub fn layer(timeout: Duration) -> $layer {
                $layer::new(timeout)
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
    };
}

body_layer!(
    RequestBodyTimeoutLayer,
    RequestBodyTimeout,
    "request",
    "    .service_fn(|_req: http::Request<tokio_timing_wheel::http::TimeoutBody<String>>| async {\n        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))\n    });"
);
body_layer!(
    ResponseBodyTimeoutLayer,
    ResponseBodyTimeout,
    "response",
    "    .service_fn(|_req: http::Request<String>| async {\n        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))\n    });"
);

impl<S, ReqBody> Service<Request<ReqBody>> for RequestBodyTimeout<S>
where
    S: Service<Request<TimeoutBody<ReqBody>>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> S::Future {
        let (timeout, timer) = (self.timeout, self.timer.clone());
        self.inner
            .call(request.map(|body| TimeoutBody::with_timer(timeout, body, timer)))
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ResponseBodyTimeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<TimeoutBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseBodyTimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        ResponseBodyTimeoutFuture {
            inner: self.inner.call(request),
            timeout: self.timeout,
            timer: self.timer.clone(),
        }
    }
}

pin_project! {
    /// The response future of [`ResponseBodyTimeout`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseBodyTimeoutFuture<F> {
        #[pin]
        inner: F,
        timeout: Duration,
        timer: TimerRef,
    }
}

impl<F> fmt::Debug for ResponseBodyTimeoutFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBodyTimeoutFuture")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseBodyTimeoutFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TimeoutBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.project();
        let response = ready!(me.inner.poll(cx))?;
        let (timeout, timer) = (*me.timeout, me.timer.clone());
        Poll::Ready(Ok(
            response.map(|body| TimeoutBody::with_timer(timeout, body, timer))
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tokio::sync::mpsc;

    use super::*;

    /// A body fed by a channel: a frame per message, pending in between.
    struct Fed(mpsc::Receiver<&'static str>);

    impl Body for Fed {
        type Data = &'static [u8];
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<&'static [u8]>, Infallible>>> {
            self.0
                .poll_recv(cx)
                .map(|m| m.map(|s| Ok(Frame::data(s.as_bytes()))))
        }
    }

    async fn next(
        body: &mut Pin<&mut TimeoutBody<Fed>>,
    ) -> Option<Result<Frame<&'static [u8]>, BoxError>> {
        std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
    }

    /// A thousand frames, each after a wait: one wheel timer for the whole body, moved in
    /// place; then a wait past the limit fails it.
    #[tokio::test(start_paused = true)]
    async fn one_timer_per_body_moved_in_place() {
        let before = TIMERS_CREATED.with(|n| n.get());
        let (tx, rx) = mpsc::channel(1);
        let body = TimeoutBody::new(Duration::from_millis(100), Fed(rx));
        let mut body = std::pin::pin!(body);
        let feeder = tokio::spawn(async move {
            for _ in 0..1000 {
                tokio::time::sleep(Duration::from_millis(60)).await;
                tx.send("x").await.unwrap();
            }
            // Then silence, past the limit.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(tx);
        });
        for _ in 0..1000 {
            let frame = next(&mut body).await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), b"x");
        }
        // 60 s in total, 600 times the limit: no timeout, one timer.
        assert_eq!(TIMERS_CREATED.with(|n| n.get()) - before, 1);
        let started = Instant::now();
        let err = next(&mut body).await.unwrap().unwrap_err();
        assert!(err.is::<TimeoutError>());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited <= Duration::from_millis(102),
            "{waited:?}"
        );
        assert_eq!(TIMERS_CREATED.with(|n| n.get()) - before, 1);
        feeder.abort();
    }

    /// A consumer that polls on after the timeout: the error again while no frame comes, a
    /// frame that comes is delivered, and the limit then counts again from the next wait.
    #[tokio::test(start_paused = true)]
    async fn after_a_timeout_a_later_frame_is_delivered_and_the_limit_starts_over() {
        let (tx, rx) = mpsc::channel(1);
        let body = TimeoutBody::new(Duration::from_millis(100), Fed(rx));
        let mut body = tokio_test::task::spawn(body);
        let poll = |body: &mut tokio_test::task::Spawn<TimeoutBody<Fed>>| {
            body.enter(|cx, b| b.poll_frame(cx))
        };
        assert!(poll(&mut body).is_pending());
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(body.is_woken());
        let err = poll(&mut body).map(|f| f.unwrap().unwrap_err());
        assert!(tokio_test::assert_ready!(err).is::<TimeoutError>());
        // No frame yet: the error again.
        let err = poll(&mut body).map(|f| f.unwrap().unwrap_err());
        assert!(tokio_test::assert_ready!(err).is::<TimeoutError>());
        tx.send("late").await.unwrap();
        let frame = poll(&mut body).map(|f| f.unwrap().unwrap());
        assert_eq!(
            tokio_test::assert_ready!(frame).into_data().unwrap(),
            b"late"
        );
        // The next wait has the whole limit again: pending just before it, failed at it.
        assert!(poll(&mut body).is_pending());
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(poll(&mut body).is_pending());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(body.is_woken());
        let err = poll(&mut body).map(|f| f.unwrap().unwrap_err());
        assert!(tokio_test::assert_ready!(err).is::<TimeoutError>());
    }
}
