//! One connection: the I/O wrapper that tracks its state (with the service wrapper,
//! [`Tracked`]), and the task that enforces its header-read, keep-alive and age limits on one
//! wheel timer.

use std::error::Error as StdError;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use http_body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::{CloseReason, Open};
use super::tracked::Tracked;
use crate::clock::deadline_after;
use crate::{IdleTimeout, Sleep, Timer, TimerError};

type BoxError = Box<dyn StdError + Send + Sync>;

/// The per-connection limits, as `Serve`'s builder methods set them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    pub(crate) header_read: Option<Duration>,
    pub(crate) keep_alive: Option<Duration>,
    pub(crate) idle: Option<Duration>,
    pub(crate) max_age: Option<Duration>,
    /// Also bounds the drain that follows `max_age`.
    pub(crate) shutdown_timeout: Option<Duration>,
}

/// What every connection task shares with the accept loop.
#[derive(Debug)]
pub(crate) struct ConnCtx {
    pub(crate) builder: auto::Builder<TokioExecutor>,
    pub(crate) limits: Limits,
    pub(crate) timer: Option<Timer>,
    pub(crate) phase: Phase,
}

impl ConnCtx {
    /// The connection's timer, for `at`; on an explicit timer with `max_pending` it takes its
    /// slot now, and fails if the timer is full. Marked as a timeout's delay (see
    /// [`Sleep::mark_timeout`]): it ends a connection.
    fn try_sleep_until(&self, at: Instant) -> Result<Sleep, TimerError> {
        match &self.timer {
            Some(t) if t.shard().is_bounded() => match t.try_timeout_delay_until(at) {
                Err(TimerError::Shutdown) => Ok(t.sleep_until(at).into_timeout_delay()),
                placed => placed,
            },
            Some(t) => Ok(t.sleep_until(at).into_timeout_delay()),
            None => Ok(crate::sleep_wheel_until(at).into_timeout_delay()),
        }
    }
}

/// The server's phase, broadcast to every connection task.
#[derive(Debug, Default)]
pub(crate) struct Phase {
    phase: AtomicU8,
    notify: Notify,
}

pub(crate) const RUNNING: u8 = 0;
pub(crate) const DRAINING: u8 = 1;
pub(crate) const CUT: u8 = 2;

impl Phase {
    pub(crate) fn set(&self, phase: u8) {
        self.phase.store(phase, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn get(&self) -> u8 {
        self.phase.load(Ordering::SeqCst)
    }
}

/// A connection's request state, written by its I/O (a request head begins) and its service
/// (a request starts, its response ends), read by its task to place its one timer.
#[derive(Debug)]
struct State {
    /// Requests (HTTP/2: streams) whose response has not ended yet.
    in_flight: usize,
    /// Since when no request has been in flight (`None` while one is).
    idle_since: Option<Instant>,
    /// Since when an HTTP/1 request head has been arriving (`None` between requests). A new
    /// connection waits for its first head from its accept.
    head_since: Option<Instant>,
    /// A byte of the awaited request head has been read (`head_since` of a new connection is
    /// its accept, before any byte: until one comes it is also waiting idle, under the
    /// keep-alive limit).
    head_begun: bool,
    /// Read twice with nothing in flight while a response's write waited: hyper is reading on
    /// its own (its last request ended, body and all, with the response still going out),
    /// not reading ahead once while it flushes, so the header-read and keep-alive limits run
    /// meanwhile (a client that does not read cannot trickle bytes, empty lines or a
    /// request body read late, past them). Cleared when the write stops waiting.
    reading_alone: bool,
    /// Read once with nothing in flight while a response's write waited (see
    /// `reading_alone`). Cleared when the write stops waiting.
    read_while_blocked: bool,
    /// The client sent the HTTP/2 preface: no header-read limit, and the keep-alive limit
    /// drains (GOAWAY) instead of closing.
    h2: bool,
}

#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// The connection task is polling hyper right now: it will look at the state after.
    polling: AtomicBool,
    waker: AtomicWaker,
    /// `IdleTimeout` failed the I/O.
    idle_timed_out: AtomicBool,
    /// A header-read limit is set: track where request heads begin.
    heads: bool,
    /// A keep-alive limit is set: track when the connection falls idle.
    keep_alive: bool,
    /// The last write waited for the socket: a response is still going out (hyper drops a
    /// response body once it has buffered its last frame, before writing it). Kept with
    /// either limit: neither runs under a response going out.
    write_blocked: AtomicBool,
    /// The connection has sent its first bytes, too few to tell its protocol: a drain asked
    /// now would make hyper-util drop them, so it waits until the protocol is known.
    version_pending: AtomicBool,
}

impl Shared {
    /// Whether the state is kept at all: without a header-read or keep-alive limit it is not
    /// needed, and requests cost no lock and no clock read.
    fn tracked(&self) -> bool {
        self.heads || self.keep_alive
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request's head has arrived (hyper calls the service): it is in flight.
    pub(crate) fn request_started(&self) {
        if !self.tracked() {
            return;
        }
        let mut st = self.lock();
        st.in_flight += 1;
        st.idle_since = None;
        st.head_since = None;
        st.head_begun = false;
        st.reading_alone = false;
        st.read_while_blocked = false;
    }

    /// A request's response has ended (or its call failed, or was dropped).
    pub(crate) fn request_ended(&self) {
        if !self.tracked() {
            return;
        }
        let now_idle = {
            let mut st = self.lock();
            st.in_flight -= 1;
            if st.in_flight == 0 && self.keep_alive {
                st.idle_since = Some(Instant::now());
            }
            st.in_flight == 0 && self.keep_alive
        };
        // The keep-alive clock starts: the task must place its timer, unless it is polling
        // hyper right now (then it looks at the state right after).
        if now_idle && !self.polling.load(Ordering::SeqCst) {
            self.waker.wake();
        }
    }
}

/// What the connection's timer is set for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    HeaderRead,
    KeepAlive,
    MaxAge,
    DrainCut,
}

fn next_due(
    st: &State,
    write_blocked: bool,
    limits: &Limits,
    accepted: Instant,
    drain: Option<&Drain>,
) -> Option<(Instant, Due)> {
    let mut best: Option<(Instant, Due)> = None;
    let mut consider = |at: Instant, due: Due| {
        if best.map_or(true, |(b, _)| at < b) {
            best = Some((at, due));
        }
    };
    // Both run while draining too: hyper waits for a connection's first head begun before the
    // drain (its own header-read timer is off; a later partial head it drops, closing the
    // idle keep-alive connection at once), and an HTTP/2 client may never answer the
    // GOAWAY's ping.
    // Not while a response still goes out: a next head read ahead meanwhile (hyper reads
    // once while it flushes) waits for hyper to finish the response, and its limit counts
    // from then; unless hyper is seen reading on its own (see `reading_alone`).
    let head = match (st.h2, limits.header_read, st.head_since) {
        (false, Some(limit), Some(since)) if !write_blocked || st.reading_alone => {
            Some(deadline_after(since, limit))
        }
        _ => None,
    };
    if let Some(at) = head {
        consider(at, Due::HeaderRead);
    }
    // A new connection that has sent nothing is waiting idle too: the keep-alive limit bounds
    // it whatever the header-read limit (a head begun is the header-read limit's alone).
    if head.is_none() || !st.head_begun {
        if let (0, false, Some(limit), Some(since)) = (
            st.in_flight,
            write_blocked && !st.reading_alone,
            limits.keep_alive,
            st.idle_since,
        ) {
            // A drain gets one keep-alive period of its own (an HTTP/2 GOAWAY sent at the
            // keep-alive limit must have the time to go out and be answered).
            let since = drain.map_or(since, |d| since.max(d.began));
            consider(deadline_after(since, limit), Due::KeepAlive);
        }
    }
    match drain {
        Some(Drain {
            cut_at: Some(at), ..
        }) => consider(*at, Due::DrainCut),
        Some(_) => {}
        None => {
            if let Some(age) = limits.max_age {
                consider(deadline_after(accepted, age), Due::MaxAge);
            }
        }
    }
    best
}

#[derive(Debug)]
struct Drain {
    /// Why the connection is draining (graceful shutdown asked of hyper).
    cause: CloseReason,
    /// The drain has been asked of hyper: not while the connection's first bytes are too few
    /// to tell its protocol, as hyper-util would then drop them, a request begun included.
    asked: bool,
    /// When the drain began.
    began: Instant,
    /// When the drain is cut, if ever.
    cut_at: Option<Instant>,
}

/// Serves one accepted connection to its end, then counts (through `open`, which counts it
/// even if this future is dropped or unwound before its end) and logs why it ended.
pub(crate) async fn run<S, B>(
    tcp: TcpStream,
    peer: SocketAddr,
    service: S,
    ctx: Arc<ConnCtx>,
    open: Open,
) where
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
    let accepted = Instant::now();
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            in_flight: 0,
            idle_since: Some(accepted),
            head_since: Some(accepted),
            head_begun: false,
            reading_alone: false,
            read_while_blocked: false,
            h2: false,
        }),
        polling: AtomicBool::new(false),
        waker: AtomicWaker::new(),
        idle_timed_out: AtomicBool::new(false),
        heads: ctx.limits.header_read.is_some(),
        keep_alive: ctx.limits.keep_alive.is_some(),
        write_blocked: AtomicBool::new(false),
        version_pending: AtomicBool::new(false),
    });
    let mut idle = IdleTimeout::builder();
    if let Some(limit) = ctx.limits.idle {
        idle = idle.idle(limit);
    }
    if let Some(timer) = &ctx.timer {
        idle = idle.timer(timer.clone());
    }
    let io = TokioIo::new(ConnIo {
        io: idle.build(tcp),
        shared: shared.clone(),
        sniffed: 0,
        proto: Proto::Unknown,
        frames: FrameScan::default(),
    });
    let service = Tracked::new(service, shared.clone());
    let mut conn = pin!(ctx.builder.serve_connection_with_upgrades(io, service));

    // The state of a connection whose state is not kept (see `Shared::tracked`).
    let untracked = State {
        in_flight: 0,
        idle_since: None,
        head_since: None,
        head_begun: false,
        reading_alone: false,
        read_while_blocked: false,
        h2: false,
    };
    let mut sleep: Option<Sleep> = None;
    let mut drain: Option<Drain> = None;
    let mut notified = pin!(ctx.phase.notify.notified());
    // The waker `notified` was last polled with: a re-poll of a waiting `Notified` takes its
    // `Notify`'s lock, which every connection of the server shares, so it is polled again only
    // to hand it a new waker. A phase change wakes the task through it, and is seen by reading
    // the phase.
    let mut notified_with: Option<std::task::Waker> = None;
    // Only the keep-alive clock is started from outside the task's poll of hyper (an HTTP/2
    // stream's response ending): without that limit nothing needs to wake the task.
    let wakes = shared.keep_alive;
    // The phase `notified` was made under: once the phase moves on (whichever way it is
    // noticed, here or through `notified`), a fresh `Notified` waits for the next change, or
    // a completed one, never polled again, would leave the task deaf to it.
    let mut notified_under = RUNNING;
    let reason = loop {
        if ctx.phase.get() != notified_under {
            notified.set(ctx.phase.notify.notified());
            notified_with = None;
        }
        // Read after the fresh `Notified` exists: a change after this read reaches it.
        let phase = ctx.phase.get();
        notified_under = phase;
        match phase {
            RUNNING => {}
            DRAINING if drain.is_none() => {
                let asked = !shared.version_pending.load(Ordering::SeqCst);
                if asked {
                    conn.as_mut().graceful_shutdown();
                }
                drain = Some(Drain {
                    cause: CloseReason::Shutdown,
                    asked,
                    began: Instant::now(),
                    cut_at: None, // the server cuts every connection at once
                });
            }
            DRAINING => {}
            _ => break CloseReason::ShutdownTimeout,
        }
        enum Event<T> {
            Done(T),
            Phase,
            Due,
            /// The explicit timer is full: the limits cannot be kept.
            NoTimer(TimerError),
            /// The protocol is known now: the drain waiting for it can be asked.
            VersionRead,
        }
        let event = poll_fn(|cx| {
            if wakes {
                shared.polling.store(true, Ordering::SeqCst);
            }
            let done = conn.as_mut().poll(cx);
            if wakes {
                shared.polling.store(false, Ordering::SeqCst);
            }
            if let Poll::Ready(result) = done {
                return Poll::Ready(Event::Done(result));
            }
            if drain.as_ref().is_some_and(|d| !d.asked)
                && !shared.version_pending.load(Ordering::SeqCst)
            {
                return Poll::Ready(Event::VersionRead);
            }
            if ctx.phase.get() != phase {
                return Poll::Ready(Event::Phase);
            }
            if !notified_with
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                if notified.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Phase);
                }
                notified_with = Some(cx.waker().clone());
            }
            if wakes {
                shared.waker.register(cx.waker());
            }
            let blocked = shared.write_blocked.load(Ordering::Relaxed);
            let next = if shared.tracked() {
                next_due(
                    &shared.lock(),
                    blocked,
                    &ctx.limits,
                    accepted,
                    drain.as_ref(),
                )
            } else {
                next_due(&untracked, blocked, &ctx.limits, accepted, drain.as_ref())
            };
            if let Some((at, _)) = next {
                let s = match &mut sleep {
                    Some(s) => s,
                    None => match ctx.try_sleep_until(at) {
                        Ok(s) => sleep.insert(s),
                        Err(e) => return Poll::Ready(Event::NoTimer(e)),
                    },
                };
                if s.deadline() != at {
                    if let Err(e) = Pin::new(&mut *s).try_reset(at) {
                        return Poll::Ready(Event::NoTimer(e));
                    }
                }
                // Without the cooperative budget: hyper, polled just before in this task,
                // may spend all of it at every poll (an HTTP/1 response whose body is always
                // ready, written as fast as the client reads), and a due limit that waited
                // for budget would then never be seen (as Tokio's `Timeout` polls its delay
                // unconstrained when the inner future spent the budget).
                if s.poll_unbudgeted(cx).is_ready() {
                    if !s.is_shutdown() {
                        return Poll::Ready(Event::Due);
                    }
                    // Its timer shut down before `at`: a new sleep (with the default timer,
                    // on the runtime's new one), or the loop would find the resolved one
                    // ready again at once, and spin until `at`. On an explicit timer that
                    // was shut down, the limits cannot be timed any more.
                    match ctx.try_sleep_until(at) {
                        Ok(new) if !new.shard().is_shutdown() => {
                            if sleep.insert(new).poll_unbudgeted(cx).is_ready() {
                                return Poll::Ready(Event::Due);
                            }
                        }
                        Ok(_) => return Poll::Ready(Event::NoTimer(TimerError::Shutdown)),
                        Err(e) => return Poll::Ready(Event::NoTimer(e)),
                    }
                }
            }
            Poll::Pending
        })
        .await;
        match event {
            // hyper ends an HTTP/1 connection whose read fails between requests as if the
            // client had closed it: a close the idle limit made may end `Ok` too.
            Event::Done(Ok(())) => {
                if shared.idle_timed_out.load(Ordering::Relaxed) {
                    break CloseReason::Idle;
                }
                break drain.map_or(CloseReason::Completed, |d| d.cause);
            }
            Event::Done(Err(e)) => {
                if shared.idle_timed_out.load(Ordering::Relaxed) {
                    break CloseReason::Idle;
                }
                // A drain asked of a connection that had not said its protocol yet: hyper-util
                // cancels the read of its first bytes with `Interrupted`, the end it was asked.
                if let Some(d) = &drain {
                    if is_cancelled(&*e) {
                        break d.cause;
                    }
                }
                tracing::debug!(%peer, error = %e, "connection error");
                break CloseReason::Error;
            }
            // A connection whose limits cannot be timed is not served untimed: closed.
            Event::NoTimer(e) => {
                tracing::warn!(%peer, error = %e, "no timer for the connection's limits; closing it");
                break CloseReason::Error;
            }
            // `notified` has completed: the loop's top makes a fresh one.
            Event::Phase => notified_under = u8::MAX,
            Event::VersionRead => {
                if let Some(d) = &mut drain {
                    d.asked = true;
                }
                conn.as_mut().graceful_shutdown();
            }
            Event::Due => {
                let now = Instant::now();
                let (h2, next) = {
                    let st = shared.lock();
                    let blocked = shared.write_blocked.load(Ordering::Relaxed);
                    let next = next_due(&st, blocked, &ctx.limits, accepted, drain.as_ref());
                    (st.h2, next)
                };
                match next {
                    Some((at, due)) if at <= now => match due {
                        Due::HeaderRead => break CloseReason::HeaderRead,
                        // HTTP/1 with nothing in flight and no head begun, or a drain with
                        // nothing in flight a keep-alive period on: close. HTTP/2: GOAWAY, so
                        // the client knows not to retry on it.
                        Due::KeepAlive if !h2 || drain.is_some() => break CloseReason::KeepAlive,
                        Due::KeepAlive | Due::MaxAge => {
                            let cause = if due == Due::MaxAge {
                                CloseReason::MaxAge
                            } else {
                                CloseReason::KeepAlive
                            };
                            let asked = !shared.version_pending.load(Ordering::SeqCst);
                            if asked {
                                conn.as_mut().graceful_shutdown();
                            }
                            drain = Some(Drain {
                                cause,
                                asked,
                                began: now,
                                cut_at: ctx.limits.shutdown_timeout.map(|d| deadline_after(now, d)),
                            });
                        }
                        Due::DrainCut => break CloseReason::ShutdownTimeout,
                    },
                    // The state moved the deadline since the timer was set: place it again.
                    _ => {}
                }
            }
        }
    };
    open.close(reason);
    if reason.is_timeout() {
        tracing::debug!(%peer, reason = reason.as_str(), "connection closed by a timeout");
    } else {
        tracing::trace!(%peer, reason = reason.as_str(), "connection closed");
    }
}

/// Whether `e` is hyper-util's cancellation of a connection's version read (its auto
/// builder's `graceful_shutdown` before the protocol is known), a bare `io::Error` of kind
/// `Interrupted`; hyper's own errors are `hyper::Error`s, never bare.
fn is_cancelled(e: &(dyn StdError + Send + Sync + 'static)) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::Interrupted)
}

/// What the first bytes of a connection said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Unknown,
    Http1,
    Http2,
}

/// The HTTP/2 connection preface, whole: hyper-util's auto builder serves HTTP/2 once it has
/// read all of it, HTTP/1 at the first byte that differs (or at the end of the stream).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pin_project! {
    /// The connection's I/O: `IdleTimeout` over the socket, plus the protocol (the HTTP/2
    /// preface or not) and the start of each HTTP/1 request head (the first byte read while no
    /// request is in flight).
    struct ConnIo {
        #[pin]
        io: IdleTimeout<TcpStream>,
        shared: Arc<Shared>,
        sniffed: usize,
        proto: Proto,
        // Where the HTTP/2 output stands in its frames (kept with a keep-alive limit only).
        frames: FrameScan,
    }
}

/// The server's HTTP/2 output, followed frame by frame through the bytes written: hyper hands
/// a response's body to h2 whole once it has polled its last frame, and h2 lets it out as the
/// client's flow-control window allows, so the response is still going out while its frames
/// (HEADERS, CONTINUATION, DATA: trailers included) are being written.
#[derive(Clone, Debug, Default)]
struct FrameScan {
    /// Payload bytes of the current frame still to come.
    skip: usize,
    /// The current frame carries a response.
    response: bool,
    /// The next frame's header, as far as written.
    head: [u8; 9],
    have: usize,
}

impl FrameScan {
    /// Follows `bytes`, the next bytes written: whether any of them belong to a response frame.
    fn written(&mut self, mut bytes: &[u8]) -> bool {
        let mut response = false;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                response |= self.response;
                bytes = &bytes[n..];
                continue;
            }
            let n = (self.head.len() - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == self.head.len() {
                self.have = 0;
                let [a, b, c, kind, ..] = self.head;
                self.skip = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                // DATA, HEADERS, CONTINUATION.
                self.response = matches!(kind, 0x0 | 0x1 | 0x9);
                response |= self.response;
            }
        }
        response
    }
}

impl ConnIo {
    fn on_read(self: Pin<&mut Self>, bytes: &[u8]) {
        let me = self.project();
        // The protocol matters to the drain (see `Shared::version_pending`) and to both
        // limits: HTTP/2 has no header-read limit, and its keep-alive limit drains with GOAWAY
        // where HTTP/1's closes. It is told as hyper-util tells it, from the same reads (its
        // buffer takes no more than the preface).
        if *me.proto == Proto::Unknown {
            let want = &H2_PREFACE[*me.sniffed..];
            let n = want.len().min(bytes.len());
            if bytes.is_empty() || bytes[..n] != want[..n] {
                *me.proto = Proto::Http1;
            } else {
                *me.sniffed += n;
                if *me.sniffed == H2_PREFACE.len() {
                    *me.proto = Proto::Http2;
                    if me.shared.tracked() {
                        let mut st = me.shared.lock();
                        st.h2 = true;
                        st.head_since = None;
                        st.head_begun = false;
                        st.reading_alone = false;
                        st.read_while_blocked = false;
                    }
                }
            }
            me.shared
                .version_pending
                .store(*me.proto == Proto::Unknown, Ordering::SeqCst);
        }
        if *me.proto == Proto::Http2 || !me.shared.tracked() {
            return;
        }
        let mut st = me.shared.lock();
        // While it flushes a response, hyper reads ahead at most once (into an empty buffer):
        // a second read then is hyper reading on its own.
        if st.in_flight == 0 && me.shared.write_blocked.load(Ordering::Relaxed) {
            if st.read_while_blocked {
                st.reading_alone = true;
            }
            st.read_while_blocked = true;
        }
        // Empty lines before a request line are no head: hyper skips them (RFC 9112 §2.2), so
        // a client that sends one between requests is still waiting for its next request.
        if !me.shared.heads || bytes.iter().all(|&b| b == b'\r' || b == b'\n') {
            return;
        }
        if st.in_flight == 0 {
            if st.head_since.is_none() {
                st.head_since = Some(Instant::now());
            }
            st.head_begun = true;
        }
    }

    fn on_error(self: Pin<&mut Self>) {
        let me = self.project();
        if me.io.is_timed_out() {
            me.shared.idle_timed_out.store(true, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match self.as_mut().project().io.poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                // The end of the stream too, while the protocol is unknown: it says HTTP/1.
                if buf.filled().len() > before || self.proto == Proto::Unknown {
                    self.on_read(&buf.filled()[before..]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                self.on_error();
                Poll::Ready(Err(e))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl ConnIo {
    fn check_error<T>(self: Pin<&mut Self>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(_)) = &poll {
            self.on_error();
        }
        poll
    }

    /// After a write (a flush of a socket never waits, so it says nothing): note an error, or
    /// whether output waits for the socket. When it stops waiting with nothing in flight, the
    /// response has gone out: the keep-alive clock starts now, and so does the header-read
    /// clock of a next head begun meanwhile (hyper reads it while it flushes, and parses it
    /// only once the flush is done: the wait for the client to read is not the head's).
    ///
    /// `response`: on a write that waits, whether what waits may be a response (see
    /// [`ConnIo::h2_response_waits`]).
    fn check<T>(
        self: Pin<&mut Self>,
        poll: Poll<io::Result<T>>,
        response: bool,
    ) -> Poll<io::Result<T>> {
        match &poll {
            Poll::Ready(Err(_)) => self.on_error(),
            Poll::Pending if response && self.shared.tracked() => {
                self.shared.write_blocked.store(true, Ordering::Relaxed)
            }
            Poll::Pending => {}
            Poll::Ready(Ok(_)) => {
                // A plain load first: the common write never waited, and costs no RMW.
                if self.shared.write_blocked.load(Ordering::Relaxed) {
                    self.shared.write_blocked.store(false, Ordering::Relaxed);
                    let mut st = self.shared.lock();
                    if st.in_flight == 0 {
                        let now = Instant::now();
                        st.idle_since = Some(now);
                        if st.head_begun {
                            st.head_since = Some(now);
                        }
                        st.reading_alone = false;
                        st.read_while_blocked = false;
                    }
                }
            }
        }
        poll
    }
}

impl ConnIo {
    /// After `n` bytes of `bufs` were written: on HTTP/2 with a keep-alive limit, a response
    /// still going out (see [`FrameScan`]) keeps a connection with nothing in flight from
    /// counting as idle, so the limit neither drains nor cuts it under that response.
    fn h2_written<'a>(self: Pin<&mut Self>, bufs: impl Iterator<Item = &'a [u8]>, mut n: usize) {
        let me = self.project();
        if *me.proto != Proto::Http2 || !me.shared.keep_alive {
            return;
        }
        let mut response = false;
        for buf in bufs {
            if n == 0 {
                break;
            }
            let take = buf.len().min(n);
            response |= me.frames.written(&buf[..take]);
            n -= take;
        }
        if response {
            let mut st = me.shared.lock();
            if st.in_flight == 0 {
                st.idle_since = Some(Instant::now());
            }
        }
    }
}

impl ConnIo {
    /// Whether `bufs`, whose write waits for the socket, may hold a response: always on HTTP/1;
    /// on HTTP/2 with a keep-alive limit, only if a response frame is among them. HTTP/2's own
    /// frames (PONGs, SETTINGS acks) waiting for a client that does not read are no response
    /// going out: they must not keep the keep-alive limit from closing a connection with no
    /// stream open (a client flooding PINGs and reading nothing would hold it for ever).
    fn h2_response_waits<'a>(&self, bufs: impl Iterator<Item = &'a [u8]>) -> bool {
        if self.proto != Proto::Http2 || !self.shared.keep_alive {
            return true;
        }
        let mut frames = self.frames.clone();
        let mut response = false;
        for buf in bufs {
            response |= frames.written(buf);
            if response {
                break;
            }
        }
        response
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = self.as_mut().project().io.poll_write(cx, buf);
        let response = match poll {
            Poll::Ready(Ok(n)) => {
                self.as_mut().h2_written(std::iter::once(buf), n);
                true
            }
            Poll::Pending => self.h2_response_waits(std::iter::once(buf)),
            Poll::Ready(Err(_)) => true,
        };
        self.check(poll, response)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = self.as_mut().project().io.poll_write_vectored(cx, bufs);
        let response = match poll {
            Poll::Ready(Ok(n)) => {
                self.as_mut().h2_written(bufs.iter().map(|b| &**b), n);
                true
            }
            Poll::Pending => self.h2_response_waits(bufs.iter().map(|b| &**b)),
            Poll::Ready(Err(_)) => true,
        };
        self.check(poll, response)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = self.as_mut().project().io.poll_flush(cx);
        self.check_error(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = self.as_mut().project().io.poll_shutdown(cx);
        self.check_error(poll)
    }
}

#[cfg(test)]
mod tests {
    use super::FrameScan;

    /// A frame header: `len` payload bytes, of type `kind`, on stream 1.
    fn head(len: usize, kind: u8) -> Vec<u8> {
        let l = len.to_be_bytes();
        let n = l.len();
        vec![l[n - 3], l[n - 2], l[n - 1], kind, 0, 0, 0, 0, 1]
    }

    /// Response frames are seen however the writes split them; the others (SETTINGS, PING,
    /// GOAWAY) are not, their payloads included.
    #[test]
    fn frame_scan_tells_response_frames_across_split_writes() {
        let mut out = head(6, 0x6); // PING
        out.extend([0; 6]);
        out.extend(head(70_000, 0x0)); // DATA, a 3-byte length
        out.extend(vec![7; 70_000]);
        out.extend(head(0, 0x4)); // SETTINGS
        out.extend(head(8, 0x7)); // GOAWAY
        out.extend([0; 8]);
        // From the DATA header's last byte (where its type is known) to its payload's end.
        let data = 15 + 8..15 + 9 + 70_000;
        for chunk in [1, 2, 5, 9, 10, 4096, out.len()] {
            let mut scan = FrameScan::default();
            for (i, piece) in out.chunks(chunk).enumerate() {
                let at = i * chunk;
                let overlaps = at < data.end && data.start < at + piece.len();
                assert_eq!(scan.written(piece), overlaps, "chunk {chunk}, at {at}");
            }
            assert_eq!((scan.skip, scan.have), (0, 0), "chunk {chunk}");
        }
    }
}
