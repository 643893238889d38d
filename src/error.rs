//! Every error type of the crate: building a timer, refused registrations, elapsed timeouts
//! and delayed tasks that produced no output.

use std::any::Any;
use std::fmt;

/// Why a [`Builder`](crate::Builder) could not build a [`Timer`](crate::Timer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The tick was zero.
    ZeroTick,
    /// The tick does not fit in `u64` nanoseconds (about 584 years).
    TickTooLarge,
    /// The wheel size is not a power of two between 2 and `max` (65536).
    InvalidWheelSize {
        /// The size asked for.
        size: usize,
        /// The largest wheel size.
        max: usize,
    },
    /// `max_pending` was zero: such a timer could never hold a timer.
    ZeroMaxPending,
    /// [`shards`](crate::Builder::shards) was zero.
    ZeroShards,
    /// [`shards`](crate::Builder::shards) was above `max` (1024).
    TooManyShards {
        /// The number of shards asked for.
        shards: usize,
        /// The most shards a timer can have.
        max: usize,
    },
    /// `build()` was called outside a Tokio runtime (the timer's alarm is a sleep on that
    /// runtime's time driver).
    NoRuntime,
    /// The runtime has no time driver (`enable_time()` / `enable_all()` was not called).
    NoTimeDriver,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroTick => f.write_str("timer tick must be greater than zero"),
            BuildError::TickTooLarge => f.write_str("timer tick must fit in u64 nanoseconds"),
            BuildError::InvalidWheelSize { size, max } => write!(
                f,
                "wheel size must be a power of two between 2 and {max}, got {size}"
            ),
            BuildError::ZeroMaxPending => f.write_str("max_pending must be at least 1"),
            BuildError::ZeroShards => f.write_str("shards must be at least 1"),
            BuildError::TooManyShards { shards, max } => {
                write!(f, "shards must be at most {max}, got {shards}")
            }
            BuildError::NoRuntime => {
                f.write_str("Timer::builder().build() must be called from within a Tokio runtime")
            }
            BuildError::NoTimeDriver => f.write_str(
                "the Tokio runtime has no time driver: build it with enable_time() or enable_all()",
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Why a timer refused a registration (returned by the `try_*` methods of
/// [`Timer`](crate::Timer)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerError {
    /// The timer already holds `max_pending` timers (or, without a limit, one of its shards
    /// holds the most a wheel can index: about four billion).
    Full {
        /// The limit the timer was built with (or the wheel's own capacity).
        max_pending: usize,
    },
    /// The timer was shut down (explicitly, or because its runtime shut down).
    Shutdown,
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::Full { max_pending } => {
                write!(
                    f,
                    "timer is full: {max_pending} timers are pending (max_pending)"
                )
            }
            TimerError::Shutdown => f.write_str("timer has been shut down"),
        }
    }
}

impl std::error::Error for TimerError {}

/// The error of a [`Timeout`](crate::Timeout) whose deadline passed before its future completed.
///
/// Converts into [`std::io::Error`] with [`ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elapsed {
    shutdown: bool,
}

impl Elapsed {
    pub(crate) fn new(shutdown: bool) -> Elapsed {
        Elapsed { shutdown }
    }

    /// Whether the timeout ended because its timer shut down rather than at its deadline.
    pub fn is_shutdown(&self) -> bool {
        self.shutdown
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shutdown {
            f.write_str("timer shut down before the deadline")
        } else {
            f.write_str("deadline has elapsed")
        }
    }
}

impl std::error::Error for Elapsed {}

/// Into tower's error, for a service stack that tests `err.is::<tower::timeout::error::Elapsed>()`
/// (the shutdown flag is lost: tower's type has none).
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
impl From<Elapsed> for tower::timeout::error::Elapsed {
    fn from(_: Elapsed) -> tower::timeout::error::Elapsed {
        tower::timeout::error::Elapsed::new()
    }
}

impl From<Elapsed> for std::io::Error {
    fn from(e: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

/// Why a [`DelayedTask`](crate::DelayedTask) produced no output: it was cancelled, it panicked, or the timer (or
/// its runtime) shut down before it could run.
pub struct DelayedError {
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(std::sync::Mutex<Box<dyn Any + Send + 'static>>),
    Shutdown,
}

impl DelayedError {
    pub(crate) fn cancelled() -> Self {
        DelayedError {
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(payload: Box<dyn Any + Send + 'static>) -> Self {
        DelayedError {
            repr: Repr::Panic(std::sync::Mutex::new(payload)),
        }
    }

    pub(crate) fn shutdown() -> Self {
        DelayedError {
            repr: Repr::Shutdown,
        }
    }

    /// The task was cancelled with [`DelayedTask::cancel`](crate::DelayedTask::cancel) before it started.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked; the panic was caught.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The task never ran, or was stopped, because the timer or its runtime shut down.
    pub fn is_shutdown(&self) -> bool {
        matches!(self.repr, Repr::Shutdown)
    }

    /// The panic payload.
    ///
    /// # Panics
    ///
    /// If the error is not a panic; see [`try_into_panic`](DelayedError::try_into_panic).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::spawn_after;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let t = spawn_after(Duration::from_millis(1), async { panic!("boom") });
    /// let err = t.await.unwrap_err();
    /// assert!(err.is_panic());
    /// let payload = err.into_panic();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    /// # }
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.try_into_panic() {
            Ok(p) => p,
            Err(e) => panic!("`DelayedError::into_panic` called on a non-panic error: {e}"),
        }
    }

    /// The panic payload, or the error itself if it is not a panic.
    ///
    /// # Errors
    ///
    /// `Err(self)`, unchanged, when the task was cancelled or shut down rather than panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::spawn_after;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let t = spawn_after(Duration::from_secs(1), async {});
    /// assert!(t.cancel());
    /// let err = t.await.unwrap_err().try_into_panic().unwrap_err();
    /// assert!(err.is_cancelled());
    /// # }
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, DelayedError> {
        match self.repr {
            Repr::Panic(p) => Ok(p
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)),
            repr => Err(DelayedError { repr }),
        }
    }
}

impl fmt::Display for DelayedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("delayed task was cancelled"),
            Repr::Panic(_) => f.write_str("delayed task panicked"),
            Repr::Shutdown => f.write_str(
                "delayed task stopped: its timer or runtime shut down before it finished",
            ),
        }
    }
}

impl fmt::Debug for DelayedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("DelayedError::Cancelled"),
            Repr::Panic(_) => f.write_str("DelayedError::Panic(..)"),
            Repr::Shutdown => f.write_str("DelayedError::Shutdown"),
        }
    }
}

impl std::error::Error for DelayedError {}

/// A delayed task's error as an I/O error of kind [`Other`](std::io::ErrorKind::Other), as
/// Tokio converts a `JoinError`, so that `handle.await?` works in a function returning
/// `io::Result`. The `DelayedError` (with a panic's payload) is kept inside, where Tokio's
/// keeps only a message: get it back with `get_ref()` and `downcast_ref`, or `into_inner()`
/// and `downcast`.
///
/// # Examples
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use tokio_timing_wheel::{spawn_after, DelayedError};
///
/// async fn job() -> io::Result<u32> {
///     let answer = spawn_after(Duration::from_millis(5), async { 42 }).await?;
///     Ok(answer)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// assert_eq!(job().await.unwrap(), 42);
///
/// let t = spawn_after(Duration::from_secs(1), async {});
/// t.cancel();
/// let err = io::Error::from(t.await.unwrap_err());
/// assert_eq!(err.kind(), io::ErrorKind::Other);
/// let inner = err.get_ref().unwrap().downcast_ref::<DelayedError>().unwrap();
/// assert!(inner.is_cancelled());
/// # }
/// ```
impl From<DelayedError> for std::io::Error {
    fn from(err: DelayedError) -> std::io::Error {
        std::io::Error::other(err)
    }
}
