//! `serve` and `Serve`: the accept loop, its builder methods and its graceful shutdown.

use std::error::Error as StdError;
use std::fmt;
use std::future::{poll_fn, Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::Body;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use super::conn::{self, ConnCtx, Limits, Phase, CUT, DRAINING};
use super::metrics::ServeMetrics;
use crate::clock::{deadline_after, far_future};
use crate::hyper::HyperTimer;
use crate::Timer;

type BoxError = Box<dyn StdError + Send + Sync>;
type Signal = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Serves `service` on every connection `listener` accepts, HTTP/1 and HTTP/2 (auto-detected),
/// every timer on the wheel; shaped like `axum::serve`.
///
/// `service` is any `tower::Service` of `http::Request<hyper::body::Incoming>` that is
/// `Clone + Send + 'static` with an `http_body::Body` response; an `axum::Router` qualifies as
/// is. Unlike `axum::serve` it takes no make-service: `into_make_service_with_connect_info`
/// does not fit, and a handler that extracts `ConnectInfo` gets axum's rejection (500, a
/// missing request extension), as the peer's address is not handed to the service.
///
/// Set limits with [`Serve`]'s builder methods, then `.await` it (or spawn it: it is
/// `Send + 'static`). No limit is on by default: set those your service needs. As with
/// `axum::serve`, upgrades (HTTP/1) and HTTP/2's extended CONNECT (RFC 8441, WebSockets over
/// HTTP/2) are on.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
///
/// use tokio_timing_wheel::server::serve;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
///     Ok::<_, Infallible>(http::Response::new(String::from("hello\n")))
/// });
/// # let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// # drop(stop);
/// serve(listener, app)
///     .header_read_timeout(Duration::from_secs(10))
///     .keep_alive_timeout(Duration::from_secs(60))
///     .idle_timeout(Duration::from_secs(120))
///     .max_connection_age(Duration::from_secs(3600))
///     .with_graceful_shutdown(async move { let _ = stopped.await; })
///     .shutdown_timeout(Duration::from_secs(30))
///     .await?;
/// # Ok(())
/// # }
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    Serve {
        listener,
        service,
        limits: Limits::default(),
        http2_keep_alive_interval: None,
        timer: None,
        signal: None,
        metrics: ServeMetrics::default(),
    }
}

/// A server being configured; `.await` it to run it. Made by [`serve`].
///
/// The header-read limit is the total time for one HTTP/1 request head (bytes trickled in do
/// not extend it) and does not apply to HTTP/2; the keep-alive, idle and age limits govern
/// both (the keep-alive limit closes an HTTP/1 connection, and drains an HTTP/2 one with
/// GOAWAY).
///
/// # Zero durations
///
/// Every limit takes a non-zero [`Duration`]; a zero one panics (a zero limit would close
/// every connection at once). Leave a limit unset to have none; one too large for a deadline
/// (`Duration::MAX`) is taken as never.
#[must_use = "a server does nothing unless you `.await` it"]
pub struct Serve<S> {
    listener: TcpListener,
    service: S,
    limits: Limits,
    http2_keep_alive_interval: Option<Duration>,
    timer: Option<Timer>,
    signal: Option<Signal>,
    metrics: ServeMetrics,
}

#[track_caller]
fn non_zero(limit: Duration, what: &str) -> Duration {
    assert!(
        !limit.is_zero(),
        "`Serve::{what}` takes a non-zero duration"
    );
    limit
}

impl<S> Serve<S> {
    /// An HTTP/1 request head must arrive in full within `limit` of its first byte (of the
    /// accept, for a connection's first request), else the connection is closed
    /// ([`CloseReason::HeaderRead`](super::CloseReason::HeaderRead)). Slowloris protection:
    /// trickled bytes do not extend it. It does not run while a keep-alive connection waits
    /// for its next request (that is [`keep_alive_timeout`](Serve::keep_alive_timeout)), and
    /// not at all on HTTP/2 (from the end of its preface: a connection that has sent only part
    /// of it is bounded as a first request head). A new connection that has sent nothing yet
    /// has no request in flight either: until its first byte, a shorter keep-alive limit
    /// closes it first ([`CloseReason::KeepAlive`](super::CloseReason::KeepAlive)).
    ///
    /// The limit starts on bytes read with no request in flight, empty lines (CRLF) aside:
    /// hyper skips those before a request line (RFC 9112 §2.2), and a client that sends them
    /// between requests is still waiting for its next one, bounded by the keep-alive limit.
    /// It does not run while a response still goes out (the client has yet to read it): a
    /// head that arrives meanwhile waits for hyper to finish writing, and its limit starts
    /// from the last time the response's write stopped waiting; unless hyper reads on its own
    /// meanwhile (its request ended, body and all, with the response still going out), when
    /// this limit and the keep-alive limit run on: a client that does not read cannot
    /// trickle a head, or empty lines, past them.
    /// A head pipelined behind a
    /// request (sent before that request's response) is read with it and sits in hyper's
    /// buffer when it ends, where it cannot be told from an idle wait: the keep-alive limit
    /// (or the idle limit) bounds it, so set one of them with this one. The same goes the other
    /// way for a request body read after its response has ended (a handler that answers at
    /// once and reads its body later, from another task), even one the client sent whole:
    /// its bytes cannot be told from a next head either, so they start this limit, which may
    /// then close the connection (as [`HeaderRead`](super::CloseReason::HeaderRead)) during
    /// that upload, or in the keep-alive wait after it; and hyper, reading that body on its
    /// own (more than one read: over about 8 KiB) while the response still goes out, lets
    /// the limit run under the response too, restarted only each time the response's write
    /// stops waiting: a client that drains the socket's send buffer (megabytes) more slowly
    /// than the limit may see its response cut. Read a request's body before its response
    /// ends where it may be large or outlast this limit.
    ///
    /// It still runs while the connection drains (graceful shutdown, maximum age): hyper
    /// waits for a connection's first request head begun before the drain, and this limit is
    /// what ends that wait. A later head (after a keep-alive response) is not waited for: the
    /// drain closes the connection at once, partial head and all.
    ///
    /// # Panics
    ///
    /// If `limit` is zero.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    #[track_caller]
    pub fn header_read_timeout(mut self, limit: Duration) -> Self {
        self.limits.header_read = Some(non_zero(limit, "header_read_timeout"));
        self
    }

    /// A connection with no request in flight (HTTP/2: no open stream) for `limit` is closed
    /// ([`CloseReason::KeepAlive`](super::CloseReason::KeepAlive); HTTP/2 with a GOAWAY),
    /// whatever the header-read limit: with 60 s here and 10 s header-read, an idle keep-alive
    /// connection is closed at 60 s, a partial request head at 10 s; with 5 s here and 60 s
    /// header-read, a new connection that sends nothing is closed at 5 s (once a head has
    /// begun, only the header-read limit bounds it). A request is in flight
    /// from its head's arrival (also while it waits for the service to be ready) until its
    /// response's last byte is written: a client that stops reading a response is bounded by
    /// [`idle_timeout`](Serve::idle_timeout), not by this. On HTTP/2, where hyper hands a
    /// response to the connection whole and the client's flow-control window lets it out, a
    /// connection is not idle while response frames are written: the limit counts from the
    /// last one, so a client that reads a response slowly keeps it, while one that stops
    /// granting window is drained (GOAWAY) `limit` after the last frame went out, and closed
    /// `limit` later if it still sends nothing. A request body still arriving after its
    /// response has been written (a handler that answers first and reads on) is not in
    /// flight: on HTTP/2 the limit may drain such a connection and close it a `limit` later.
    /// A CONNECT answered with success
    /// opens a tunnel (on HTTP/2 a stream that goes on after its response, such as a
    /// WebSocket over extended CONNECT) whose end the server cannot see: it stays in flight
    /// for the rest of its connection's life, which this limit then never closes, nor ends
    /// the drain of. The idle limit bounds such a connection only while nothing is exchanged:
    /// HTTP/2 keep-alive pings ([`http2_keep_alive_interval`](Serve::http2_keep_alive_interval))
    /// that the client answers are reads and writes. Set
    /// [`max_connection_age`](Serve::max_connection_age) and
    /// [`shutdown_timeout`](Serve::shutdown_timeout) to bound it then.
    ///
    /// It still runs while the connection drains (graceful shutdown, maximum age, or its own
    /// HTTP/2 GOAWAY), counted from the drain's start at the earliest: a draining connection
    /// with nothing in flight for `limit` since then is closed (also
    /// [`CloseReason::KeepAlive`](super::CloseReason::KeepAlive)), such as an HTTP/2 client
    /// that never acknowledges the GOAWAY.
    ///
    /// On HTTP/2 the drain this limit begins (its GOAWAY) is, like the drain at
    /// [`max_connection_age`](Serve::max_connection_age), cut
    /// [`shutdown_timeout`](Serve::shutdown_timeout) after it began, if that is set and the
    /// drain has not ended by then: such a connection is counted
    /// [`CloseReason::ShutdownTimeout`](super::CloseReason::ShutdownTimeout), not `KeepAlive`.
    ///
    /// # Panics
    ///
    /// If `limit` is zero.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    #[track_caller]
    pub fn keep_alive_timeout(mut self, limit: Duration) -> Self {
        self.limits.keep_alive = Some(non_zero(limit, "keep_alive_timeout"));
        self
    }

    /// A connection with no read and no write for `limit` is closed
    /// ([`CloseReason::Idle`](super::CloseReason::Idle)), with a request in flight or not,
    /// through [`IdleTimeout`](crate::IdleTimeout): a client that stops reading its response
    /// cannot hold the connection past it.
    ///
    /// The limit acts on the reads and writes that wait. A handler that runs long, with bytes
    /// of a next request already in hyper's buffer (pipelined behind its request), has none:
    /// hyper reads nothing then, not even to notice the client closing. Such a connection is
    /// closed only when the handler answers (its answer, past the limit, fails as timed out
    /// and is not sent): bound handlers with a request timeout (this crate's
    /// `http::TimeoutLayer` or `tower::TimeoutLayer`, features `http` and `tower`).
    ///
    /// It stays on the I/O of an HTTP/1 upgrade (a `101 Switching Protocols`, such as a
    /// WebSocket, or a CONNECT answered with success), which hyper hands to
    /// `hyper::upgrade::on`: once the upgraded connection has been quiet for `limit`, its
    /// reads and writes fail with [`io::ErrorKind::TimedOut`] in the application (which
    /// should then drop it). Keep such a connection busy (WebSocket pings) or set a limit it can live
    /// with. That close is not counted: the connection was counted at the upgrade (see
    /// [`CloseReason::Completed`](super::CloseReason::Completed)).
    ///
    /// # Panics
    ///
    /// If `limit` is zero.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    #[track_caller]
    pub fn idle_timeout(mut self, limit: Duration) -> Self {
        self.limits.idle = Some(non_zero(limit, "idle_timeout"));
        self
    }

    /// A connection `limit` old is drained gracefully
    /// ([`CloseReason::MaxAge`](super::CloseReason::MaxAge)): HTTP/1 answers its request in
    /// flight with `Connection: close`, HTTP/2 sends GOAWAY and finishes its open streams. The
    /// drain is cut after [`shutdown_timeout`](Serve::shutdown_timeout), if set; the other
    /// limits still apply while it lasts (see "Draining" under
    /// [`with_graceful_shutdown`](Serve::with_graceful_shutdown)).
    ///
    /// # Panics
    ///
    /// If `limit` is zero.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    #[track_caller]
    pub fn max_connection_age(mut self, limit: Duration) -> Self {
        self.limits.max_age = Some(non_zero(limit, "max_connection_age"));
        self
    }

    /// Sends HTTP/2 keep-alive pings every `interval` (hyper's, on the wheel); a connection
    /// whose ping is not answered within 20 s is closed, counted as
    /// [`CloseReason::Error`](super::CloseReason::Error): hyper reports it as a connection
    /// error, so it is not one of [`is_timeout`](super::CloseReason::is_timeout)'s reasons,
    /// nor in [`ServeMetrics::timed_out`](super::ServeMetrics::timed_out). An interval too
    /// large for a deadline (30 years or more, such as `Duration::MAX`) sends no pings.
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tokio_timing_wheel::server::serve;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
    /// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// # });
    /// serve(listener, app)
    ///     .http2_keep_alive_interval(Duration::from_secs(30))
    ///     .with_graceful_shutdown(async {})
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn http2_keep_alive_interval(mut self, interval: Duration) -> Self {
        self.http2_keep_alive_interval = Some(non_zero(interval, "http2_keep_alive_interval"));
        self
    }

    /// Puts every timer of the server on `timer` instead of the runtime's default wheel.
    ///
    /// If `timer` was built with [`max_pending`](crate::Builder::max_pending) and is full, a
    /// connection whose limits need a timer it cannot get is closed (counted as
    /// [`CloseReason::Error`](super::CloseReason::Error)) rather than served without them or
    /// killed by a panic; the server's own timers (the pause before accepting again after an
    /// accept error, and the [`shutdown_timeout`](Serve::shutdown_timeout)) go on the
    /// runtime's default timer instead. hyper's own timers (the HTTP/1 header-read limit and
    /// HTTP/2 keep-alive pings, through [`HyperTimer`]) have no way
    /// to report an error: on a full timer they wait on Tokio's timer. If `timer` is shut down, a
    /// connection waiting on one of its limits is closed the same way (its limits can no
    /// longer be timed), and the server's own timers go on the runtime's default timer; with
    /// the default timer, connections and the server go on waiting on the runtime's new
    /// default timer.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tokio_timing_wheel::{server::serve, Timer};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
    /// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// # });
    /// let timer = Timer::builder().build().unwrap();
    /// serve(listener, app).timer(timer).with_graceful_shutdown(async {}).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timer(mut self, timer: Timer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Stops on `signal`: stop accepting (the listener is closed, so a new connection is
    /// refused), drain every connection (in-flight requests finish, idle connections close,
    /// HTTP/2 gets GOAWAY), and resolve once all are gone, or once
    /// [`shutdown_timeout`](Serve::shutdown_timeout) has run out.
    ///
    /// # Draining
    ///
    /// A draining HTTP/1 connection closes once its request in flight is answered, and at once
    /// if there is none, a partial head of a later request included; a partial head of its
    /// first request is waited for, until one of the limits below ends the wait. So are first
    /// bytes too few to tell HTTP/1 from HTTP/2 (a lone `P`, part of the HTTP/2 preface): the
    /// drain begins once the protocol is known. A connection that has sent nothing yet is
    /// closed at once. An HTTP/2
    /// one sends GOAWAY, finishes its open streams, and closes once the client acknowledges
    /// the GOAWAY. What else ends a drain (the same for the drain at
    /// [`max_connection_age`](Serve::max_connection_age), and for an HTTP/2 connection's drain
    /// at [`keep_alive_timeout`](Serve::keep_alive_timeout)), each counted under its own
    /// [`CloseReason`](super::CloseReason):
    ///
    /// - [`shutdown_timeout`](Serve::shutdown_timeout): the whole drain (counted from the
    ///   signal, or from the start of a drain the connection began on its own);
    /// - [`header_read_timeout`](Serve::header_read_timeout): a request head still arriving;
    /// - [`keep_alive_timeout`](Serve::keep_alive_timeout): nothing in flight for that long
    ///   since the drain began (an HTTP/2 client that never acknowledges the GOAWAY);
    /// - [`idle_timeout`](Serve::idle_timeout): nothing read or written for that long.
    ///
    /// Without a shutdown timeout, nothing else ends a drain: a request in flight whose
    /// handler never answers, or a client that keeps the connection busy, holds it open.
    ///
    /// An HTTP/1 connection upgraded before (a WebSocket, a CONNECT tunnel) is the
    /// application's since its upgrade: as with `axum::serve`, the shutdown neither waits for
    /// it nor cuts it, the shutdown timeout included, and the server may resolve while it
    /// runs on. Only the idle limit still bounds it; end it from the application.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    pub fn with_graceful_shutdown<F>(mut self, signal: F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.signal = Some(Box::pin(signal));
        self
    }

    /// Cuts the connections still open `limit` after the shutdown signal (counted from the
    /// signal), and a drain a connection began on its own `limit` after it began: the drain at
    /// [`max_connection_age`](Serve::max_connection_age), and an HTTP/2 connection's drain
    /// (GOAWAY) at [`keep_alive_timeout`](Serve::keep_alive_timeout). Each is counted
    /// [`CloseReason::ShutdownTimeout`](super::CloseReason::ShutdownTimeout).
    ///
    /// # Panics
    ///
    /// If `limit` is zero.
    ///
    /// # Examples
    ///
    /// See [`serve`].
    #[track_caller]
    pub fn shutdown_timeout(mut self, limit: Duration) -> Self {
        self.limits.shutdown_timeout = Some(non_zero(limit, "shutdown_timeout"));
        self
    }

    /// The server's counters, readable while it runs and after: get the handle before
    /// awaiting.
    ///
    /// # Examples
    ///
    /// See [`ServeMetrics`].
    pub fn metrics(&self) -> ServeMetrics {
        self.metrics.clone()
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    ///
    /// As [`TcpListener::local_addr`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use tokio_timing_wheel::server::serve;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
    /// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// # });
    /// let server = serve(listener, app);
    /// assert!(server.local_addr()?.ip().is_loopback());
    /// # Ok(())
    /// # }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl<S> fmt::Debug for Serve<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("limits", &self.limits)
            .field("graceful_shutdown", &self.signal.is_some())
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

/// The running server: what `.await` on a [`Serve`] polls.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct ServeFuture(Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>>);

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeFuture").finish_non_exhaustive()
    }
}

impl Future for ServeFuture {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.as_mut().poll(cx)
    }
}

impl<S, B> IntoFuture for Serve<S>
where
    S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        ServeFuture(Box::pin(self.run()))
    }
}

impl<S> Serve<S> {
    async fn run<B>(self) -> io::Result<()>
    where
        S: tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        let Serve {
            listener,
            service,
            limits,
            http2_keep_alive_interval,
            timer,
            mut signal,
            metrics,
        } = self;
        let hyper_timer = timer.clone().map(HyperTimer::from).unwrap_or_default();
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // hyper's own header-read timer would also run between keep-alive requests: the
        // connection task runs that limit instead.
        builder
            .http1()
            .timer(hyper_timer.clone())
            .header_read_timeout(None);
        // hyper adds the interval to a `std` instant, which panics on overflow: an interval
        // that reaches the far future (`Duration::MAX`) means no pings, as the docs promise.
        let now = Instant::now();
        let http2_keep_alive_interval = http2_keep_alive_interval
            .filter(|&i| now.checked_add(i).is_some_and(|at| at < far_future(now)));
        // Extended CONNECT (RFC 8441: WebSockets over HTTP/2), on as in `axum::serve`.
        builder
            .http2()
            .timer(hyper_timer)
            .keep_alive_interval(http2_keep_alive_interval)
            .enable_connect_protocol();
        let ctx = Arc::new(ConnCtx {
            builder,
            limits,
            timer: timer.clone(),
            phase: Phase::default(),
        });
        // Every connection task holds a receiver: `closed()` resolves when all have ended.
        let (live, _) = watch::channel(());
        let mut pause: Option<(crate::Sleep, Instant)> = None;
        loop {
            let accepted = poll_fn(|cx| {
                if let Some(signal) = &mut signal {
                    if signal.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                }
                if let Some((p, at)) = &mut pause {
                    std::task::ready!(poll_server_sleep(p, *at, cx));
                    pause = None;
                }
                listener.poll_accept(cx).map(Some)
            })
            .await;
            match accepted {
                None => break,
                Some(Ok((tcp, peer))) => {
                    let _ = tcp.set_nodelay(true);
                    let open = metrics.on_accept();
                    let alive = live.subscribe();
                    let ctx = ctx.clone();
                    let service = service.clone();
                    tokio::spawn(async move {
                        conn::run(tcp, peer, service, ctx, open).await;
                        drop(alive);
                    });
                }
                Some(Err(e)) if is_connection_error(&e) => {}
                Some(Err(e)) => {
                    // Out of file descriptors or the like: wait a second (what hyper's
                    // examples and axum do), then accept again.
                    tracing::error!(error = %e, "accept failed; retrying in 1 s");
                    let at = Instant::now() + Duration::from_secs(1);
                    pause = Some((server_sleep(timer.as_ref(), at), at));
                }
            }
        }
        let signalled = Instant::now();
        drop(listener); // nothing listens from here on: new connections are refused
        tracing::debug!(
            connections = live.receiver_count(),
            "graceful shutdown: draining"
        );
        ctx.phase.set(DRAINING);
        if let Some(limit) = limits.shutdown_timeout {
            let at = deadline_after(signalled, limit);
            let mut cut = server_sleep(timer.as_ref(), at);
            let mut closed = std::pin::pin!(live.closed());
            let all_gone = poll_fn(|cx| {
                if closed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(true);
                }
                poll_server_sleep(&mut cut, at, cx).map(|()| false)
            })
            .await;
            if !all_gone {
                tracing::debug!(
                    connections = live.receiver_count(),
                    "shutdown timeout: cutting the connections left"
                );
                ctx.phase.set(CUT);
            }
        }
        live.closed().await;
        Ok(())
    }
}

/// The server's own timer (the accept retry's pause, the shutdown's cut) for `at`, on `timer`;
/// if that is an explicit timer with `max_pending` that is full, on the runtime's default
/// timer instead: the server does not panic, nor give up the limit.
fn server_sleep(timer: Option<&Timer>, at: Instant) -> crate::Sleep {
    match timer {
        Some(t) if t.shard().is_bounded() => match t.try_sleep_until(at) {
            Ok(sleep) => sleep,
            Err(crate::TimerError::Shutdown) => t.sleep_until(at),
            Err(e) => {
                tracing::warn!(error = %e, "server timer on the runtime's default timer");
                crate::sleep_wheel_until(at)
            }
        },
        Some(t) => t.sleep_until(at),
        None => crate::sleep_wheel_until(at),
    }
}

/// Polls a server's own timer (see [`server_sleep`]) for `at`. One whose timer shut down
/// before `at` (which resolves it) is replaced by one on the runtime's default timer (with the
/// default timer, its new one), so the server acts at `at`, not at the shutdown; if no timer
/// is left to wait on (the runtime is going), it completes.
fn poll_server_sleep(sleep: &mut crate::Sleep, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
    std::task::ready!(Pin::new(&mut *sleep).poll(cx));
    if !sleep.is_shutdown() {
        return Poll::Ready(());
    }
    let new = crate::sleep_wheel_until(at);
    if new.shard().is_shutdown() {
        return Poll::Ready(());
    }
    *sleep = new;
    Pin::new(sleep).poll(cx)
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
