//! Errors for building a timer and for registrations it refuses.

use std::fmt;

/// Why a [`Builder`](crate::Builder) could not build a [`Timer`](crate::Timer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The tick was zero.
    ZeroTick,
    /// The tick does not fit in `u64` nanoseconds (about 584 years).
    TickTooLarge,
    /// The wheel size is not a power of two between 2 and 65536.
    InvalidWheelSize(usize),
    /// `max_pending` was zero: such a timer could never hold a timer.
    ZeroMaxPending,
    /// `build()` was called outside a Tokio runtime (the driver task needs one).
    NoRuntime,
    /// The runtime has no time driver (`enable_time()` / `enable_all()` was not called).
    NoTimeDriver,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroTick => f.write_str("timer tick must be greater than zero"),
            BuildError::TickTooLarge => f.write_str("timer tick must fit in u64 nanoseconds"),
            BuildError::InvalidWheelSize(n) => write!(
                f,
                "wheel size must be a power of two between 2 and {}, got {n}",
                crate::wheel::MAX_WHEEL_SIZE
            ),
            BuildError::ZeroMaxPending => f.write_str("max_pending must be at least 1"),
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
