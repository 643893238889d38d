//! `IdleTimeout`: an I/O stream that fails once it has been idle too long.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::timer_ref::TimerRef;
use crate::clock::deadline_after;
use crate::{Sleep, Timer, TimerError};

pin_project! {
    /// Wraps a Tokio `AsyncRead + AsyncWrite` stream (a `TcpStream`, a TLS stream, ...) and
    /// makes it fail once the connection has been idle longer than a limit: the idle-connection
    /// detector of Netty's `IdleStateHandler`, which hyper lacks (hyper#1628).
    ///
    /// Three limits, each optional, as in Netty:
    ///
    /// - [`idle`](IdleTimeoutBuilder::idle): no read **and** no write succeeded for that long
    ///   (the common case, [`IdleTimeout::new`]);
    /// - [`read_idle`](IdleTimeoutBuilder::read_idle): no read succeeded for that long, however
    ///   much was written;
    /// - [`write_idle`](IdleTimeoutBuilder::write_idle): no write succeeded for that long,
    ///   however much was read.
    ///
    /// Each successful read or write (a poll that returns `Ready(Ok)`, an end of stream and a
    /// zero-length write included: an application that goes on reading after its peer closed
    /// its side keeps a read limit from passing) pushes the limits it
    /// counts for later: one clock read per completed read and per write call, none per
    /// byte, and no access to the wheel (the wheel's lazy [`Sleep::reset`]). Once any limit has passed, the connection has
    /// timed out: the next read or write, and every one after it, fails with
    /// [`io::ErrorKind::TimedOut`], and a read or write pending at the deadline is woken to
    /// fail. Shutting the writer down (`poll_shutdown`) still works, so the connection can be
    /// closed cleanly; a flush or shutdown that waits (the peer reads nothing) is timed as a
    /// write, so it fails at the deadline, or at once if it waits after it, instead of
    /// holding the connection open forever. Reads and writes are judged when they complete: a write is refused
    /// before it sends anything; a read that completes past the deadline (the data arrived
    /// while nobody was reading) fails and its data is dropped.
    ///
    /// A timer enters the wheel when a read (write) first waits. Activity does not touch it:
    /// it stays at the old deadline, where it leaves the wheel (waking the task that waited
    /// last) unless a read or write waits again, which re-files it for the new deadline. So
    /// an idle connection holds one timer per direction that waits, and one busy without
    /// waiting none.
    ///
    /// A shutdown of the timer does not cut the limits short. With the default timer, a read
    /// or write waiting then is woken and waits out the rest of its limit on the runtime's new
    /// default timer, as do later reads and writes that wait. An explicit timer that was shut
    /// down fails every read or write that waits as timed out, the one waiting then included.
    ///
    /// # With hyper
    ///
    /// hyper reads and writes through its own `rt::Read` and `rt::Write` traits: wrap the Tokio
    /// stream first, then hand it to hyper through hyper-util's `TokioIo`, as in
    /// `TokioIo::new(IdleTimeout::new(tcp, limit))` (the `tokio_timing_wheel::hyper` module,
    /// feature `hyper`, has a whole server). Implementing hyper's traits directly would take `unsafe`
    /// code (filling hyper's uninitialised read buffer), which this crate does not have, and
    /// would save nothing: `TokioIo` is a zero-cost adapter.
    ///
    /// On an explicit timer built with [`max_pending`](crate::Builder::max_pending), a read or
    /// write that must wait and finds the timer full (it needs a slot: its first wait, or one
    /// after its timer fired) fails with an [`io::ErrorKind::Other`] error that wraps
    /// [`TimerError::Full`](crate::TimerError::Full) (reach it with
    /// [`io::Error::get_ref`]: std's `io::Error::source` skips the error it wraps), rather
    /// than panicking or waiting with no limit; the stream has not timed out, and a later
    /// wait tries again.
    ///
    /// # Panics
    ///
    /// Polling a read, write, flush or shutdown that would wait, outside a Tokio runtime or on one without a
    /// time driver (the default timer is that of the runtime it is polled on).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use tokio_timing_wheel::IdleTimeout;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let (ours, mut peer) = tokio::io::duplex(64);
    /// let mut conn = IdleTimeout::new(ours, Duration::from_secs(30));
    ///
    /// peer.write_all(b"ping").await.unwrap();
    /// let mut buf = [0; 4];
    /// conn.read_exact(&mut buf).await.unwrap(); // activity: idle again from now
    ///
    /// // The peer goes quiet: 30 s later the pending read fails.
    /// let start = tokio::time::Instant::now();
    /// let err = conn.read(&mut buf).await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    /// assert_eq!(start.elapsed(), Duration::from_secs(30));
    /// # }
    /// ```
    pub struct IdleTimeout<IO> {
        #[pin]
        io: IO,
        limits: Limits,
        last_read: Instant,
        last_write: Instant,
        // The earliest deadline of the limits, `None` without limits. It only moves later.
        deadline: Option<Instant>,
        // Created on the first read (write) that waits, polled only by reads (writes), so that
        // a reader and a writer in two tasks each get their own wakeup.
        read_sleep: Option<Sleep>,
        write_sleep: Option<Sleep>,
        timer: TimerRef,
        timed_out: bool,
    }
}

/// The limits of an [`IdleTimeout`]; `None` is no limit.
#[derive(Clone, Copy, Debug, Default)]
struct Limits {
    idle: Option<Duration>,
    read: Option<Duration>,
    write: Option<Duration>,
}

impl Limits {
    /// The earliest instant at which a limit passes, given the last read and write.
    fn deadline(&self, last_read: Instant, last_write: Instant) -> Option<Instant> {
        let last_any = last_read.max(last_write);
        [
            (last_any, self.idle),
            (last_read, self.read),
            (last_write, self.write),
        ]
        .into_iter()
        .filter_map(|(since, limit)| Some(deadline_after(since, limit?)))
        .min()
    }
}

/// Builds an [`IdleTimeout`] with separate read and write limits, or on an explicit
/// [`Timer`]. One builder can wrap many connections.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::io::AsyncReadExt;
/// use tokio_timing_wheel::{IdleTimeout, Timer};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = Timer::builder().tick(Duration::from_millis(10)).build().unwrap();
/// let idle = IdleTimeout::builder()
///     .read_idle(Duration::from_secs(30)) // the peer must send something every 30 s
///     .write_idle(Duration::from_secs(300)) // and we must send something every 5 min
///     .timer(timer);
///
/// let (ours, _peer) = tokio::io::duplex(64);
/// let mut conn = idle.build(ours);
/// let err = conn.read_u8().await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct IdleTimeoutBuilder {
    limits: Limits,
    timer: TimerRef,
}

impl IdleTimeoutBuilder {
    /// Times out when neither a read nor a write has succeeded for `limit` (Netty's
    /// all-idle time).
    ///
    /// Unlike Netty, where a limit of 0 turns the check off, `Duration::ZERO` times the
    /// connection out at once: its first read or write fails, even one whose data is ready.
    /// To turn a limit off, do not set it. A limit too large to add to the clock (such as
    /// `Duration::MAX`) waits about 30 years, as `tokio::time::sleep` does. The same holds for
    /// [`read_idle`](Self::read_idle) and [`write_idle`](Self::write_idle).
    pub fn idle(mut self, limit: Duration) -> Self {
        self.limits.idle = Some(limit);
        self
    }

    /// Times out when no read has succeeded for `limit`, whatever was written meanwhile.
    pub fn read_idle(mut self, limit: Duration) -> Self {
        self.limits.read = Some(limit);
        self
    }

    /// Times out when no write has succeeded for `limit`, whatever was read meanwhile.
    pub fn write_idle(mut self, limit: Duration) -> Self {
        self.limits.write = Some(limit);
        self
    }

    /// Uses `timer` rather than the default timer of the runtime the stream is polled on.
    pub fn timer(mut self, timer: Timer) -> Self {
        self.timer = TimerRef::from(timer);
        self
    }

    /// Wraps `io`; its limits count from now. With no limit set, it never times out.
    pub fn build<IO>(&self, io: IO) -> IdleTimeout<IO> {
        let now = Instant::now();
        IdleTimeout {
            io,
            limits: self.limits,
            last_read: now,
            last_write: now,
            deadline: self.limits.deadline(now, now),
            read_sleep: None,
            write_sleep: None,
            timer: self.timer.clone(),
            timed_out: false,
        }
    }
}

impl IdleTimeout<()> {
    /// A builder for separate read and write limits, or an explicit timer (the same as
    /// `IdleTimeoutBuilder::default()`; the stream's type comes with [`build`](IdleTimeoutBuilder::build)).
    pub fn builder() -> IdleTimeoutBuilder {
        IdleTimeoutBuilder::default()
    }

    /// Whether `err`, or an error in its `source()` chain (a hyper error wrapping the I/O
    /// error, say) or wrapped in an `io::Error` of the chain (an adapter's
    /// `io::Error::new(kind, err)`), is the error an `IdleTimeout` fails with: tells an idle
    /// close from a transport error, even one of kind `TimedOut`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::io::AsyncReadExt;
    /// use tokio_timing_wheel::IdleTimeout;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let (_peer, io) = tokio::io::duplex(64);
    /// let mut io = IdleTimeout::new(io, Duration::from_secs(1));
    /// let err = io.read(&mut [0; 8]).await.unwrap_err();
    /// assert!(IdleTimeout::is_idle_error(&err));
    ///
    /// let other = std::io::Error::new(std::io::ErrorKind::TimedOut, "the kernel gave up");
    /// assert!(!IdleTimeout::is_idle_error(&other));
    /// # }
    /// ```
    pub fn is_idle_error(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(err);
        while let Some(e) = next {
            if e.is::<IdleElapsed>() {
                return true;
            }
            // An `io::Error`'s `source()` is that of the error it wraps, skipping the wrapped
            // error itself (an `IdleElapsed`, or the idle `io::Error` an adapter re-wrapped):
            // walk into it instead.
            if let Some(inner) = e.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
                next = Some(inner);
                continue;
            }
            next = e.source();
        }
        false
    }
}

impl<IO> IdleTimeout<IO> {
    /// Wraps `io`: it times out when neither a read nor a write has succeeded for `limit`,
    /// counted from now, on the default timer of the runtime it is polled on. It may be built
    /// outside a runtime.
    pub fn new(io: IO, limit: Duration) -> IdleTimeout<IO> {
        IdleTimeoutBuilder::default().idle(limit).build(io)
    }

    /// When the connection times out unless it reads or writes before (`None` without limits).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the connection has timed out: a read or write, or a flush or shutdown that
    /// waited, has failed because the connection was idle too long.
    pub fn is_timed_out(&self) -> bool {
        self.timed_out
    }

    /// A reference to the wrapped stream.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// A mutable reference to the wrapped stream (reading or writing through it directly
    /// does not count as activity).
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// A pinned mutable reference to the wrapped stream.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut IO> {
        self.project().io
    }

    /// The wrapped stream; its timers leave the wheel.
    pub fn into_inner(self) -> IO {
        self.io
    }
}

/// The error of every read and write once the connection has timed out.
fn timed_out_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, IdleElapsed)
}

/// What an `IdleTimeout`'s `io::Error` carries, so [`IdleTimeout::is_idle_error`] can tell it
/// from a transport error of the same kind.
#[derive(Debug)]
struct IdleElapsed;

impl fmt::Display for IdleElapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection idle past its limit (IdleTimeout)")
    }
}

impl std::error::Error for IdleElapsed {}

/// A read or write must wait: arms `sleep` (created on first use) for `deadline` with this
/// task's waker; `Ready(Ok)` once the deadline has passed (or the timer shut down),
/// `Ready(Err)` if an explicit timer with `max_pending` is full (then the next wait tries
/// again with a new sleep).
fn wait_idle(
    slot: &mut Option<Sleep>,
    deadline: Option<Instant>,
    timer: &TimerRef,
    cx: &mut Context<'_>,
) -> Poll<Result<(), TimerError>> {
    let Some(deadline) = deadline else {
        return Poll::Pending;
    };
    let sleep = match slot {
        Some(sleep) => sleep,
        None => slot.insert(timer.try_timeout_delay_until(deadline)?),
    };
    // Its timer shut down since it was filed (whether or not a wait was pending then, or
    // activity came since): a new sleep, as for the first wait (on the runtime's new default
    // timer), rather than one that completes at once, cutting the limit short. On an explicit
    // timer that was shut down, the new one completes at once too.
    let placed = if sleep.shard().is_shutdown() {
        Some(
            timer
                .try_timeout_delay_until(deadline)
                .map(|new| *sleep = new),
        )
    } else if sleep.deadline() != deadline {
        // Activity since the last wait: a later deadline, one comparison in the wheel.
        Some(Pin::new(&mut *sleep).try_reset(deadline))
    } else {
        None
    };
    if let Some(Err(e)) = placed {
        *slot = None; // without a slot: the next wait takes a new one
        return Poll::Ready(Err(e));
    }
    Pin::new(sleep).poll(cx).map(Ok)
}

impl<IO> IdleTimeout<IO> {
    /// The tail of every read and write poll: records activity, or fails once timed out.
    fn finish<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        read: bool,
        now: Option<Instant>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let me = self.project();
        match poll {
            Poll::Ready(Ok(v)) => {
                let Some(deadline) = *me.deadline else {
                    return Poll::Ready(Ok(v)); // no limits: no clock read
                };
                let now = now.unwrap_or_else(Instant::now);
                if now >= deadline {
                    *me.timed_out = true;
                    return Poll::Ready(Err(timed_out_error()));
                }
                if read {
                    *me.last_read = now;
                } else {
                    *me.last_write = now;
                }
                *me.deadline = me.limits.deadline(*me.last_read, *me.last_write);
                Poll::Ready(Ok(v))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let sleep = if read { me.read_sleep } else { me.write_sleep };
                match wait_idle(sleep, *me.deadline, me.timer, cx) {
                    Poll::Ready(Ok(())) => {
                        *me.timed_out = true;
                        Poll::Ready(Err(timed_out_error()))
                    }
                    // A full timer cannot time this wait: fail it rather than wait untimed.
                    Poll::Ready(Err(full)) => Poll::Ready(Err(io::Error::other(full))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    /// Before a write: the clock read that both refuses a write past the deadline (before it
    /// sends anything) and stamps a successful one (`None` without limits: no clock read).
    /// `Err` if timed out.
    fn before_write(self: Pin<&mut Self>) -> Result<Option<Instant>, io::Error> {
        let me = self.project();
        if *me.timed_out {
            return Err(timed_out_error());
        }
        let Some(deadline) = *me.deadline else {
            return Ok(None);
        };
        let now = Instant::now();
        if now >= deadline {
            *me.timed_out = true;
            return Err(timed_out_error());
        }
        Ok(Some(now))
    }
}

impl<IO: AsyncRead> AsyncRead for IdleTimeout<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.timed_out {
            return Poll::Ready(Err(timed_out_error()));
        }
        let poll = self.as_mut().project().io.poll_read(cx, buf);
        self.finish(cx, true, None, poll)
    }
}

impl<IO: AsyncWrite> AsyncWrite for IdleTimeout<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let now = self.as_mut().before_write()?;
        let poll = self.as_mut().project().io.poll_write(cx, buf);
        self.finish(cx, false, now, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let now = self.as_mut().before_write()?;
        let poll = self.as_mut().project().io.poll_write_vectored(cx, bufs);
        self.finish(cx, false, now, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    /// Flushing is not activity, but a flush that waits (the peer reads nothing) times out
    /// like a write.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.timed_out {
            return Poll::Ready(Err(timed_out_error()));
        }
        match self.as_mut().project().io.poll_flush(cx) {
            Poll::Pending => self.finish(cx, false, None, Poll::Pending),
            done => done,
        }
    }

    /// Always forwarded, timed out or not, so the connection can be closed cleanly; but a
    /// shutdown that waits (a TLS stream or a buffered writer flushing to a peer that reads
    /// nothing) times out like a flush, as soon as it waits once the limit has passed.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.as_mut().project().io.poll_shutdown(cx) {
            Poll::Pending => self.finish(cx, false, None, Poll::Pending),
            done => done,
        }
    }
}

impl<IO: fmt::Debug> fmt::Debug for IdleTimeout<IO> {
    /// The stream, the limits and the deadline; never the wheel.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdleTimeout")
            .field("io", &self.io)
            .field("limits", &self.limits)
            .field("deadline", &self.deadline)
            .field("timed_out", &self.timed_out)
            .field("timer", &self.timer)
            .finish()
    }
}
