//! `TimerRef`: the runtime's default timer or an explicit one, as the integrations hold it.

use std::fmt;

use tokio::time::Instant;

use crate::{sleep_wheel_until, Sleep, Timer};

/// Where an integration puts its timers: an explicit [`Timer`], or (`None`) the default timer
/// of the runtime each timer is created on, resolved at that moment, so the integration can
/// be built outside a runtime.
#[derive(Clone, Default)]
pub(crate) struct TimerRef(Option<Timer>);

impl TimerRef {
    /// The runtime's default timer, as `default()`, usable in a `const fn`.
    #[cfg(feature = "tower")] // the tower layer's `const` constructors
    pub(crate) const fn runtime_default() -> TimerRef {
        TimerRef(None)
    }

    #[cfg(any(feature = "hyper", feature = "tower", feature = "http"))] // sleeps, timeouts
    pub(crate) fn sleep(&self, duration: std::time::Duration) -> Sleep {
        match &self.0 {
            Some(t) => t.sleep(duration),
            None => crate::sleep_wheel(duration),
        }
    }

    /// Whether this is the runtime's default timer (no explicit one).
    #[cfg(any(feature = "hyper", feature = "http"))] // sleeps that move to a new default timer
    pub(crate) fn is_default(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn sleep_until(&self, deadline: Instant) -> Sleep {
        match &self.0 {
            Some(t) => t.sleep_until(deadline),
            None => sleep_wheel_until(deadline),
        }
    }

    /// A timeout whose delay is a sleep of `duration`, as tower's and tower-http's timeouts
    /// are (a duration over about 30 years means 30 years, as a Tokio sleep's, not "never"
    /// as for `timeout`).
    #[cfg(any(feature = "tower", feature = "http"))] // the timeout layers
    pub(crate) fn timeout<F: std::future::IntoFuture>(
        &self,
        duration: std::time::Duration,
        future: F,
    ) -> crate::Timeout<F::IntoFuture> {
        crate::Timeout::new(future.into_future(), self.sleep(duration))
    }
}

impl TimerRef {
    /// The explicit timer, if it has a `max_pending` limit (the runtime's default never does).
    pub(crate) fn bounded(&self) -> Option<&Timer> {
        self.0.as_ref().filter(|t| t.shard().is_bounded())
    }

    /// [`timeout`](Self::timeout) of the future `make` returns, except that on a timer with a
    /// `max_pending` limit the timeout takes its slot now, and if the timer is full `make` is
    /// not called and the error is returned: the layers refuse such a request instead of
    /// panicking when its response future is polled. A shut-down timer is not an error here
    /// (the timeout resolves as shut down when polled).
    ///
    /// The limit counts from before `make` runs if `clock_first` (as tower-http's `Timeout`,
    /// which makes its sleep before calling the inner service), else, without a `max_pending`
    /// limit, from its return (as tower's, which calls first).
    #[cfg(any(feature = "tower", feature = "http"))]
    pub(crate) fn try_timeout<F: std::future::IntoFuture>(
        &self,
        duration: std::time::Duration,
        clock_first: bool,
        make: impl FnOnce() -> F,
    ) -> Result<crate::Timeout<F::IntoFuture>, crate::TimerError> {
        match self
            .bounded()
            .map(|t| t.try_timeout_delay_until(crate::clock::sleep_deadline(t.now(), duration)))
        {
            None | Some(Err(crate::TimerError::Shutdown)) if clock_first => {
                let sleep = self.sleep(duration);
                Ok(crate::Timeout::new(make().into_future(), sleep))
            }
            None | Some(Err(crate::TimerError::Shutdown)) => Ok(self.timeout(duration, make())),
            Some(Ok(slot)) => Ok(crate::Timeout::new(make().into_future(), slot)),
            Some(Err(full)) => Err(full),
        }
    }

    /// As [`try_timeout`](Self::try_timeout), for [`timeout_at`](Self::timeout_at).
    #[cfg(feature = "grpc")]
    pub(crate) fn try_timeout_at<F: std::future::IntoFuture>(
        &self,
        deadline: Instant,
        make: impl FnOnce() -> F,
    ) -> Result<crate::Timeout<F::IntoFuture>, crate::TimerError> {
        match self.bounded().map(|t| t.try_timeout_delay_until(deadline)) {
            None | Some(Err(crate::TimerError::Shutdown)) => Ok(self.timeout_at(deadline, make())),
            Some(Ok(slot)) => Ok(crate::Timeout::new(make().into_future(), slot)),
            Some(Err(full)) => Err(full),
        }
    }

    /// [`sleep_until`](Self::sleep_until), except that on a timer with a `max_pending` limit
    /// the sleep takes its slot now, and fails with the error if the timer is full (never with
    /// `Shutdown`: a sleep on a shut-down timer resolves when polled).
    #[cfg(feature = "hyper")] // `HyperTimer`'s sleeps
    pub(crate) fn try_sleep_until(&self, deadline: Instant) -> Result<Sleep, crate::TimerError> {
        match self.bounded().map(|t| t.try_sleep_until(deadline)) {
            None | Some(Err(crate::TimerError::Shutdown)) => Ok(self.sleep_until(deadline)),
            Some(result) => result,
        }
    }

    /// [`try_sleep_until`](Self::try_sleep_until) for a limit that is a timeout (an idle
    /// connection's, a body's): the sleep is [marked](Sleep::mark_timeout) as one.
    pub(crate) fn try_timeout_delay_until(
        &self,
        deadline: Instant,
    ) -> Result<Sleep, crate::TimerError> {
        match self.bounded().map(|t| t.try_timeout_delay_until(deadline)) {
            None | Some(Err(crate::TimerError::Shutdown)) => {
                Ok(self.sleep_until(deadline).into_timeout_delay())
            }
            Some(result) => result,
        }
    }

    #[cfg(feature = "grpc")] // the gRPC deadline's response futures
    pub(crate) fn timeout_at<F: std::future::IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> crate::Timeout<F::IntoFuture> {
        match &self.0 {
            Some(t) => t.timeout_at(deadline, future),
            None => crate::timeout_at(deadline, future),
        }
    }
}

impl From<Timer> for TimerRef {
    fn from(timer: Timer) -> TimerRef {
        TimerRef(Some(timer))
    }
}

impl fmt::Debug for TimerRef {
    /// Says which timer; never prints or locks the wheel.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(t) => f.debug_struct("Timer").field("tick", &t.tick()).finish(),
            None => f.write_str("runtime default"),
        }
    }
}
