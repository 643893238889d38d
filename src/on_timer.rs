//! `OnTimer`: the runtime's default timer or an explicit one, as the integrations hold it.

use std::fmt;
use std::future::IntoFuture;
use std::time::Duration;

use tokio::time::Instant;

use crate::{sleep_wheel, sleep_wheel_until, Sleep, Timeout, Timer};

/// Where an integration puts its timers: an explicit [`Timer`], or (`None`) the default timer
/// of the runtime each timer is created on, resolved at that moment, so the integration can
/// be built outside a runtime.
#[derive(Clone, Default)]
pub(crate) struct OnTimer(Option<Timer>);

impl OnTimer {
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn sleep(&self, duration: Duration) -> Sleep {
        match &self.0 {
            Some(t) => t.sleep(duration),
            None => sleep_wheel(duration),
        }
    }

    pub(crate) fn sleep_until(&self, deadline: Instant) -> Sleep {
        match &self.0 {
            Some(t) => t.sleep_until(deadline),
            None => sleep_wheel_until(deadline),
        }
    }

    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        match &self.0 {
            Some(t) => t.timeout(duration, future),
            None => crate::timeout(duration, future),
        }
    }
}

impl From<Timer> for OnTimer {
    fn from(timer: Timer) -> OnTimer {
        OnTimer(Some(timer))
    }
}

impl fmt::Debug for OnTimer {
    /// Says which timer; never prints or locks the wheel.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(t) => f.debug_struct("Timer").field("tick", &t.tick()).finish(),
            None => f.write_str("runtime default"),
        }
    }
}
