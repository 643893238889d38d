//! `HyperTimer`: hyper's timers (header-read timeout, keep-alive) on the wheel.
//!
//! hyper 1.x asks its user for a [`hyper::rt::Timer`] and uses it for the HTTP/1 header-read
//! timeout (slowloris protection: a new `sleep_until` for every request head, dropped once the
//! head is read), HTTP/2 keep-alive pings (one sleep per connection, reset after each pong), and
//! hyper-util's client pool idle timeout (one sleep, reset every round). hyper-util's `TokioTimer`
//! puts them on `tokio::time`; [`HyperTimer`] puts them on this crate's wheel, where
//! registering, resetting and cancelling does not contend on one lock.
//!
//! hyper talks in [`std::time::Instant`]s. [`HyperTimer::now`](hyper::rt::Timer::now) reads
//! Tokio's clock and converts it, and deadlines are converted back with
//! [`tokio::time::Instant::from_std`], so paused Tokio time drives hyper's timers too.
//!
//! # Examples
//!
//! An HTTP/1 server whose header-read timeout runs on the wheel, each connection also under an
//! [`IdleTimeout`](crate::IdleTimeout). hyper reads through its own `rt::Read`/`rt::Write`
//! traits, so the Tokio stream goes into `IdleTimeout` first and then into hyper-util's
//! `TokioIo` adapter (implementing hyper's traits for `IdleTimeout` directly would take
//! `unsafe` code, which this crate has none of):
//!
//! ```
//! use std::convert::Infallible;
//! use std::time::Duration;
//!
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use hyper::server::conn::http1;
//! use hyper::service::service_fn;
//! use hyper::{Request, Response};
//! use hyper_util::rt::TokioIo;
//! use tokio_timing_wheel::hyper::HyperTimer;
//! use tokio_timing_wheel::IdleTimeout;
//!
//! async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     Ok(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let timer = HyperTimer::new();
//! # let addr = listener.local_addr()?;
//! # let client = tokio::spawn(async move {
//! #     use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! #     let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
//! #     s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
//! #     let mut out = String::new();
//! #     s.read_to_string(&mut out).await.unwrap();
//! #     assert!(out.ends_with("hello\n"), "{out}");
//! # });
//! # for _ in 0..1 {
//! let (tcp, _) = listener.accept().await?;
//! let io = TokioIo::new(IdleTimeout::new(tcp, Duration::from_secs(60)));
//! let timer = timer.clone();
//! tokio::spawn(async move {
//!     let served = http1::Builder::new()
//!         .timer(timer)
//!         .header_read_timeout(Duration::from_secs(10))
//!         .serve_connection(io, service_fn(hello))
//!         .await;
//!     if let Err(e) = served {
//!         eprintln!("connection ended: {e}");
//!     }
//! });
//! # }
//! # client.await.unwrap();
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use super::timer_ref::TimerRef;
use crate::clock::sleep_deadline;
use crate::fallback::TokioSleep;
use crate::{Sleep, Timer, TimerError};

/// A [`hyper::rt::Timer`] whose sleeps live in this crate's timing wheel.
///
/// Give it to hyper's connection builders (`.timer(HyperTimer::new())`) or hyper-util's
/// client. [`HyperTimer::new`] uses the default timer of the runtime each sleep is created on;
/// [`HyperTimer::from`] a [`Timer`] uses that timer (its tick, limit and metrics).
///
/// [`reset`](hyper::rt::Timer::reset) moves the existing sleep in place: no allocation, and a
/// later deadline (hyper's usual case: the next HTTP/2 keep-alive ping after a pong, the next
/// round of hyper-util's pool idle timer; hyper's HTTP/1 header-read timeout makes a new sleep
/// for every request head instead) costs one comparison, the wheel's lazy reset. A sleep that
/// did not come from a `HyperTimer`, or whose timer has shut down, is replaced by a new one (as
/// [`sleep_until`](hyper::rt::Timer::sleep_until) would make) rather than left as it was: after
/// the runtime's default timer is shut down, an HTTP/2 connection's keep-alive goes on, on the
/// new default timer, rather than firing at once at every later reset.
///
/// hyper takes a completed sleep for its deadline, so a sleep of the runtime's default timer
/// ([`HyperTimer::new`]) pending when that timer shuts down does not complete then: it waits
/// out the rest on the runtime's new default timer (a header-read timeout, or an HTTP/2
/// keep-alive waiting for its pong, keeps its full limit). A sleep of an explicit [`Timer`]
/// pending in its wheel at its shutdown completes then, as [`Sleep`] does (the server going away: the
/// connections waiting on it close); sleeps made or reset after it wait on Tokio's own timer,
/// as an [`Interval`](crate::Interval) does then, instead of completing at once (a header-read
/// timeout that closed every new connection at once; hyper-util's pool idle task, which
/// resets its sleep each time it completes, spinning).
///
/// hyper's timers have no way to report an error either. On a [`Timer`] built with
/// [`max_pending`](crate::Builder::max_pending) that is full, a sleep (made, or reset to a
/// deadline it must wait for) waits on Tokio's own timer instead, logged as a warning; its next
/// `reset` that finds a slot puts it back on the wheel. A sleep that completed at once, or a
/// panic, would close connections or make hyper-util's pool idle task spin. The wheel never
/// holds more than its limit. Such a sleep waits for its deadline whatever becomes of the
/// timer: it is not in the wheel, and the timer's shutdown does not complete it.
///
/// A [`sleep`](hyper::rt::Timer::sleep) first polled only after its deadline has passed may
/// return `Pending` with its task already woken and complete on the next poll (hyper-util's
/// `TokioTimer` completes on the first); [`sleep_until`](hyper::rt::Timer::sleep_until) and a
/// `reset` check the clock and complete on the first poll.
///
/// # Panics
///
/// Making a sleep with a `HyperTimer::new()` (`sleep`, `sleep_until`, or a `reset` that
/// replaces the sleep, or the poll of a sleep whose default timer shut down) outside a Tokio
/// runtime, or on a runtime without a time driver, as Tokio's `sleep` does; making one after
/// an explicit timer's shutdown, once that timer's runtime has shut down too, in the same
/// places.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hyper::rt::Timer as _;
/// use tokio_timing_wheel::hyper::HyperTimer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = HyperTimer::new();
/// let start = timer.now(); // Tokio's clock, as a std Instant
/// let mut sleep = timer.sleep(Duration::from_secs(10));
/// timer.reset(&mut sleep, start + Duration::from_secs(30));
/// sleep.await;
/// assert!(timer.now() >= start + Duration::from_secs(30));
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct HyperTimer {
    timer: TimerRef,
}

impl HyperTimer {
    /// A timer that puts each sleep on the default timer of the runtime it is created on (the
    /// one [`sleep_wheel`](crate::sleep_wheel) uses). It may be built outside a runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::hyper::HyperTimer;
    ///
    /// let timer = HyperTimer::new(); // no runtime needed yet
    /// let mut builder = hyper::server::conn::http1::Builder::new();
    /// builder.timer(timer).header_read_timeout(std::time::Duration::from_secs(10));
    /// ```
    pub fn new() -> HyperTimer {
        HyperTimer::default()
    }
}

impl From<Timer> for HyperTimer {
    /// A `HyperTimer` whose sleeps go to `timer`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{hyper::HyperTimer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let wheel = Timer::builder().tick(Duration::from_millis(10)).build().unwrap();
    /// let timer = HyperTimer::from(wheel.clone());
    /// # drop(timer);
    /// # }
    /// ```
    fn from(timer: Timer) -> HyperTimer {
        HyperTimer {
            timer: TimerRef::from(timer),
        }
    }
}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(match self.timer.bounded() {
            None => WheelSleep::wheel(&self.timer, self.timer.sleep(duration)),
            Some(t) => WheelSleep::on(t, t.try_sleep(duration), || {
                sleep_deadline(t.now(), duration)
            }),
        })
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(WheelSleep::until(&self.timer, Instant::from_std(deadline)))
    }

    /// Tokio's clock (paused time included), as hyper's `std::time::Instant`.
    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        let deadline = Instant::from_std(new_deadline);
        match sleep.as_mut().downcast_mut_pin::<WheelSleep>() {
            Some(ours) => ours.get_mut().reset(&self.timer, deadline),
            // Not one of ours (hyper never mixes timers, but a caller might): replace it, so
            // the new deadline holds either way.
            None => *sleep = Box::pin(WheelSleep::until(&self.timer, deadline)),
        }
    }
}

/// The sleep hyper holds, under a type of this module so that [`HyperTimer`]'s `reset` can
/// recognise it: the wheel's [`Sleep`], or, while a timer built with a `max_pending` limit
/// is full, Tokio's own timer (hyper's timers have no way to report an error).
enum WheelSleep {
    /// On the runtime's default timer (a [`HyperTimer::new`]'s).
    Default(Sleep),
    /// On an explicit timer.
    Wheel(Sleep),
    Tokio(TokioSleep),
}

impl WheelSleep {
    /// `sleep`, made on `timer`; on Tokio's timer if `timer` is an explicit one that has shut
    /// down (its sleep would complete at once).
    fn wheel(timer: &TimerRef, sleep: Sleep) -> WheelSleep {
        if timer.is_default() {
            WheelSleep::Default(sleep)
        } else if sleep.shard().is_shutdown() {
            WheelSleep::Tokio(TokioSleep::new(sleep.deadline(), sleep.shard()))
        } else {
            WheelSleep::Wheel(sleep)
        }
    }

    /// A sleep until `deadline` on `timer`, or on Tokio's timer if `timer` is full.
    fn until(timer: &TimerRef, deadline: Instant) -> WheelSleep {
        match timer.bounded() {
            None => WheelSleep::wheel(timer, timer.sleep_until(deadline)),
            Some(t) => WheelSleep::on(t, t.try_sleep_until(deadline), || deadline),
        }
    }

    /// What a `try_sleep` on the bounded `timer` gave, for a sleep until `deadline()`: the
    /// wheel's sleep; on a shut-down or full timer, Tokio's.
    fn on(
        timer: &Timer,
        made: Result<Sleep, TimerError>,
        deadline: impl FnOnce() -> Instant,
    ) -> WheelSleep {
        match made {
            Ok(sleep) => WheelSleep::Wheel(sleep),
            Err(TimerError::Shutdown) => {
                WheelSleep::Tokio(TokioSleep::new(deadline(), timer.shard()))
            }
            Err(e) => {
                full(&e);
                WheelSleep::Tokio(TokioSleep::new(deadline(), timer.shard()))
            }
        }
    }

    fn reset(&mut self, timer: &TimerRef, deadline: Instant) {
        match self {
            // Its timer shut down: a new sleep in the same box, as `sleep_until` would make (on
            // the runtime's new default timer for a `new()`'s, on Tokio's timer for an explicit
            // timer's), rather than one that completes at once for every later deadline.
            WheelSleep::Default(sleep) | WheelSleep::Wheel(sleep)
                if sleep.shard().is_shutdown() =>
            {
                *self = WheelSleep::until(timer, deadline);
            }
            WheelSleep::Default(sleep) | WheelSleep::Wheel(sleep) => {
                // Fails only on a full bounded timer, the sleep left without a slot.
                if let Err(e) = Pin::new(&mut *sleep).try_reset(deadline) {
                    full(&e);
                    *self = WheelSleep::Tokio(TokioSleep::new(deadline, sleep.shard()));
                }
            }
            // An explicit timer shut down: it stays on Tokio's timer, re-armed in place.
            WheelSleep::Tokio(tokio) if !timer.is_default() && tokio.shard().is_shutdown() => {
                tokio.reset(deadline)
            }
            // Back to the wheel if it has a slot now; else re-armed in place.
            WheelSleep::Tokio(tokio) => match timer.try_sleep_until(deadline) {
                // On the runtime's default timer if `timer` is a `HyperTimer::new()`'s.
                Ok(sleep) => *self = WheelSleep::wheel(timer, sleep),
                Err(_) => tokio.reset(deadline),
            },
        }
    }
}

/// Says that a full timer's sleep waits on Tokio's timer.
fn full(e: &TimerError) {
    tracing::warn!(error = %e, "a hyper timer waits on Tokio's timer: the wheel is full");
}

impl Future for WheelSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            WheelSleep::Wheel(sleep) => Pin::new(sleep).poll(cx),
            WheelSleep::Default(sleep) => {
                std::task::ready!(Pin::new(&mut *sleep).poll(cx));
                if sleep.is_shutdown() {
                    // The runtime's default timer shut down before the deadline. hyper would
                    // take the completion for the deadline (a header-read timeout, an HTTP/2
                    // keep-alive that gives up on its pong): the rest is waited on the
                    // runtime's new default timer.
                    *sleep = crate::sleep_wheel_until(sleep.deadline());
                    return Pin::new(sleep).poll(cx);
                }
                Poll::Ready(())
            }
            WheelSleep::Tokio(tokio) => {
                let deadline = tokio.deadline();
                tokio.poll_until(deadline, cx)
            }
        }
    }
}

impl hyper::rt::Sleep for WheelSleep {}
