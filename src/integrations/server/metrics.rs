//! `ServeMetrics` and `CloseReason`: why each connection ended, counted.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why a connection served by [`serve`](fn@super::serve) ended: machine-readable, so a dashboard
/// or a test can tell a timeout from a transport error.
///
/// Each close is logged with `tracing` (level `debug`, field `reason` set to
/// [`as_str`](CloseReason::as_str)) and counted in [`ServeMetrics`].
///
/// # Examples
///
/// ```
/// use tokio_timing_wheel::server::CloseReason;
///
/// assert!(CloseReason::Idle.is_timeout());
/// assert!(!CloseReason::Error.is_timeout());
/// assert_eq!(CloseReason::KeepAlive.as_str(), "keep-alive");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// The connection ended on its own: the client closed it, or asked to (`Connection: close`),
    /// or it was upgraded (HTTP/1: its socket handed to `hyper::upgrade::on`, after a
    /// `101 Switching Protocols` or a CONNECT answered with success).
    ///
    /// An upgraded connection is counted at the upgrade (under the drain's reason instead, if
    /// its connection was draining then), though its socket lives on in the application: it
    /// is no longer [active](ServeMetrics::active), the graceful shutdown neither waits for it
    /// nor cuts it, and only the [idle limit](super::Serve::idle_timeout) still applies to it,
    /// failing its I/O with `TimedOut`, which is not counted again. So every accepted
    /// connection is still counted closed exactly once.
    Completed,
    /// An HTTP/1 request head did not arrive in full within the header-read timeout (also while
    /// the connection was draining).
    HeaderRead,
    /// No request was in flight for the keep-alive timeout; or, while the connection was
    /// draining, for the keep-alive timeout since the drain began (an HTTP/2 client that never
    /// acknowledged the GOAWAY). On HTTP/2 the keep-alive timeout drains the connection
    /// (GOAWAY), and it is counted here when that drain ends, unless the shutdown timeout cuts
    /// the drain first ([`ShutdownTimeout`](CloseReason::ShutdownTimeout)).
    KeepAlive,
    /// Nothing was read or written for the idle timeout (`IdleTimeout`).
    Idle,
    /// The connection reached its maximum age and was drained (HTTP/1 `Connection: close`,
    /// HTTP/2 GOAWAY), or closed at once if it had sent nothing yet.
    MaxAge,
    /// Drained by the graceful shutdown, or closed at once if it had sent nothing yet.
    Shutdown,
    /// Still open when the shutdown timeout ran out: cut. It is counted from the shutdown
    /// signal for the graceful shutdown, and from the drain's start for a drain the
    /// connection began on its own: at its maximum age, or (HTTP/2) at the keep-alive timeout
    /// with its GOAWAY.
    ShutdownTimeout,
    /// A transport or protocol error (a reset, a malformed request, an HTTP/2 keep-alive ping
    /// left unanswered past hyper's 20 s timeout, ...), or the connection's
    /// task ended without closing it: a handler that hyper polls on the connection's task
    /// (HTTP/1) panicked, or the task was dropped (its runtime shut down).
    Error,
}

impl CloseReason {
    /// Every reason, in the order [`ServeMetrics`] counts them.
    pub const ALL: [CloseReason; 8] = [
        CloseReason::Completed,
        CloseReason::HeaderRead,
        CloseReason::KeepAlive,
        CloseReason::Idle,
        CloseReason::MaxAge,
        CloseReason::Shutdown,
        CloseReason::ShutdownTimeout,
        CloseReason::Error,
    ];

    /// Whether one of the connection timeouts closed it: header-read, keep-alive or idle.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::server::CloseReason;
    ///
    /// assert!(CloseReason::HeaderRead.is_timeout());
    /// assert!(!CloseReason::MaxAge.is_timeout());
    /// ```
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            CloseReason::HeaderRead | CloseReason::KeepAlive | CloseReason::Idle
        )
    }

    /// A short, stable name: `completed`, `header-read`, `keep-alive`, `idle`, `max-age`,
    /// `shutdown`, `shutdown-timeout`, `error`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::server::CloseReason;
    ///
    /// assert_eq!(CloseReason::HeaderRead.as_str(), "header-read");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Completed => "completed",
            CloseReason::HeaderRead => "header-read",
            CloseReason::KeepAlive => "keep-alive",
            CloseReason::Idle => "idle",
            CloseReason::MaxAge => "max-age",
            CloseReason::Shutdown => "shutdown",
            CloseReason::ShutdownTimeout => "shutdown-timeout",
            CloseReason::Error => "error",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counters of a [`Serve`](super::Serve): connections accepted, open, and closed by reason.
///
/// A cheap handle (one `Arc`): get it with [`Serve::metrics`](super::Serve::metrics) before
/// awaiting the server, clone it anywhere, read it at any time.
///
/// # Examples
///
/// ```
/// use tokio_timing_wheel::server::{serve, CloseReason};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let app = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hi")))
/// });
/// let server = serve(listener, app).with_graceful_shutdown(async {});
/// let metrics = server.metrics();
/// server.await?;
/// assert_eq!(metrics.accepted(), 0);
/// assert_eq!(metrics.closed(CloseReason::Idle), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct ServeMetrics {
    inner: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    closed: [AtomicU64; 8],
}

impl ServeMetrics {
    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.inner.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed so far for `reason`.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.inner.closed[reason.index()].load(Ordering::Relaxed)
    }

    /// Connections closed so far by a timeout (header-read, keep-alive or idle).
    pub fn timed_out(&self) -> u64 {
        CloseReason::ALL
            .into_iter()
            .filter(|r| r.is_timeout())
            .map(|r| self.closed(r))
            .sum()
    }

    /// Connections open now: accepted and not yet closed. Every accepted connection is counted
    /// closed exactly once, also when its task panics or is dropped ([`CloseReason::Error`]);
    /// an upgraded one at its upgrade ([`CloseReason::Completed`]).
    pub fn active(&self) -> u64 {
        let closed: u64 = CloseReason::ALL.into_iter().map(|r| self.closed(r)).sum();
        self.accepted().saturating_sub(closed)
    }

    /// Counts a connection accepted: it is open until the returned guard closes it.
    pub(crate) fn on_accept(&self) -> Open {
        self.inner.accepted.fetch_add(1, Ordering::Relaxed);
        Open {
            metrics: self.clone(),
            reason: None,
        }
    }

    fn on_close(&self, reason: CloseReason) {
        self.inner.closed[reason.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// An accepted connection, counted open until this guard goes: its close is counted exactly
/// once, for the reason given to [`close`](Open::close), or as [`CloseReason::Error`] if the
/// guard is dropped without one (the connection's task panicked, was aborted, or was dropped
/// with its runtime).
#[derive(Debug)]
pub(crate) struct Open {
    metrics: ServeMetrics,
    reason: Option<CloseReason>,
}

impl Open {
    /// Counts the connection closed for `reason`.
    pub(crate) fn close(mut self, reason: CloseReason) {
        self.reason = Some(reason);
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let reason = self.reason.unwrap_or_else(|| {
            tracing::debug!("connection task ended without a close (a panic or an abort)");
            CloseReason::Error
        });
        self.metrics.on_close(reason);
    }
}

impl fmt::Debug for ServeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ServeMetrics");
        d.field("accepted", &self.accepted());
        d.field("active", &self.active());
        for r in CloseReason::ALL {
            d.field(r.as_str(), &self.closed(r));
        }
        d.finish()
    }
}
