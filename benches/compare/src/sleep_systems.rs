//! The sleeps the firing workloads compare (ours, Tokio's on either timer, pingora's), and how a
//! measurement generic over the sleep runs with each.

use std::future::Future;

use tokio::time::Instant;
use tokio_timing_wheel::sleep_wheel_until;

use crate::rt::Flavor;

/// Makes a system's sleep until a deadline (`sleep_wheel_until`, `tokio::time::sleep_until`, ...).
pub(crate) trait MakeSleep:
    Fn(Instant) -> Self::Sleep + Copy + Send + Sync + 'static
{
    /// The sleep future.
    type Sleep: Future<Output = ()> + Send + 'static;
}

impl<M, S> MakeSleep for M
where
    M: Fn(Instant) -> S + Copy + Send + Sync + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    type Sleep = S;
}

/// A measurement that works with any system's sleep.
pub(crate) trait SleepBench {
    /// What one measurement returns.
    type Output;

    /// Measures with sleeps made by `make`, on a fresh runtime of `flavor`; `None` if this build
    /// has no such runtime.
    fn run<M: MakeSleep>(&self, flavor: Flavor, make: M) -> Option<Self::Output>;
}

/// A sleep implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SleepSystem {
    /// `sleep_wheel_until`.
    Ours,
    /// `tokio::time::sleep_until`.
    Tokio,
    /// `tokio::time::sleep_until` on a runtime with Tokio's alt timer (multi-thread only).
    TokioAlt,
    /// pingora's `fast_timeout::fast_sleep`.
    Pingora,
}

impl SleepSystem {
    /// Its name in the tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SleepSystem::Ours => "ours: sleep_wheel_until",
            SleepSystem::Tokio => "tokio::time::sleep_until",
            SleepSystem::TokioAlt => "tokio::time::sleep_until (alt timer)",
            SleepSystem::Pingora => "pingora fast_sleep",
        }
    }

    /// Runs `bench` with this system's sleep on a runtime of `flavor` (the alt timer's for
    /// `TokioAlt`, whatever `flavor` says); `None` where this build has no such runtime.
    pub(crate) fn measure<B: SleepBench>(self, flavor: Flavor, bench: &B) -> Option<B::Output> {
        match self {
            SleepSystem::Ours => bench.run(flavor, sleep_wheel_until),
            SleepSystem::Tokio => bench.run(flavor, tokio::time::sleep_until),
            SleepSystem::TokioAlt => {
                bench.run(Flavor::MultiThreadAltTimer, tokio::time::sleep_until)
            }
            SleepSystem::Pingora => bench.run(flavor, pingora_sleep_until),
        }
    }
}

/// pingora's sleep takes a duration: the time left until `deadline` when the sleep is made. It
/// registers on its first poll, adding that duration to the clock then (so never before
/// `deadline`), and rounds up to its 10 ms ticks.
fn pingora_sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
    pingora_timeout::fast_timeout::fast_sleep(deadline.saturating_duration_since(Instant::now()))
}
