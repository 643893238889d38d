//! reset: idle timeouts pushed back on every activity, as a connection does it.
//!
//! 100k idle timeouts of 30 s (one per connection), each registered (polled once), held by one
//! task on a current-thread runtime; then activity on them round robin, 5M times. Two variants:
//!
//! - **connection**: per activity, what an idle-connection loop does: read the clock, reset the
//!   timer to `Instant::now() + 30 s`, and poll it once with the task's waker (it is pending).
//!   Ours: `Sleep::reset` + poll; Tokio: `Sleep::reset` + poll of a pinned, boxed
//!   `tokio::time::Sleep`; tokio-util: `DelayQueue::reset_at` + `poll_expired` (a queue holds
//!   every connection's key, so polling it is that design's per-activity poll).
//! - **clock-free**: the reset alone, the deadline read once per 1000 resets (the same for every
//!   system): what the operation itself costs.

use std::future::{poll_fn, Future};
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{sleep_wheel_until, Sleep};
use tokio_util::time::DelayQueue;

use super::{Ctx, Workload};
use crate::report::{interleaved, print_table, rate, ratio, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "reset",
    about: "idle timeouts reset on activity: clock read + reset + poll, and the reset alone",
    run,
};

const IDLE: Duration = Duration::from_secs(30);
/// The clock-free variant reads the clock once per this many resets.
const BATCH: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Clock read + reset + poll, per activity.
    Connection,
    /// Reset only; the clock read once per `BATCH`.
    ClockFree,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Connection => "connection: now + reset + poll",
            Variant::ClockFree => "clock-free: reset only",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    Tokio,
    DelayQueue,
}

const SYSTEMS: [System; 3] = [System::Ours, System::Tokio, System::DelayQueue];
const VARIANTS: [Variant; 2] = [Variant::Connection, Variant::ClockFree];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: Sleep::reset",
            System::Tokio => "tokio Sleep::reset",
            System::DelayQueue => "tokio-util DelayQueue::reset_at",
        }
    }

    /// Resets per second, in both variants.
    fn measure(self, n: usize, total: usize) -> [f64; 2] {
        VARIANTS.map(|v| match self {
            System::Ours => bench(
                v,
                n,
                total,
                |n, at, cx| {
                    let mut v: Vec<Sleep> = (0..n).map(|_| sleep_wheel_until(at)).collect();
                    for s in &mut v {
                        assert!(Pin::new(s).poll(cx).is_pending());
                    }
                    v
                },
                |v, i, at| Pin::new(&mut v[i]).reset(at),
                |v, i, cx| Pin::new(&mut v[i]).poll(cx).is_pending(),
            ),
            System::Tokio => bench(
                v,
                n,
                total,
                |n, at, cx| {
                    let mut v: Vec<_> = (0..n)
                        .map(|_| Box::pin(tokio::time::sleep_until(at)))
                        .collect();
                    for s in &mut v {
                        assert!(s.as_mut().poll(cx).is_pending());
                    }
                    v
                },
                |v, i, at| v[i].as_mut().reset(at),
                |v, i, cx| v[i].as_mut().poll(cx).is_pending(),
            ),
            System::DelayQueue => bench(
                v,
                n,
                total,
                |n, at, cx| {
                    let mut q = DelayQueue::with_capacity(n);
                    let keys: Vec<_> = (0..n).map(|i| q.insert_at(i, at)).collect();
                    assert!(q.poll_expired(cx).is_pending());
                    (q, keys)
                },
                |(q, keys), i, at| q.reset_at(&keys[i], at),
                |(q, _), _, cx| q.poll_expired(cx).is_pending(),
            ),
        })
    }
}

/// Resets per second: `setup` builds `n` registered timers due at the given instant, then
/// `reset(state, i, deadline)` moves timer `i` (round robin), followed in the connection
/// variant by `poll(state, i, cx)` (true when pending). All inside one task, whose waker the
/// timers hold.
fn bench<S>(
    variant: Variant,
    n: usize,
    total: usize,
    setup: impl FnOnce(usize, Instant, &mut Context<'_>) -> S,
    reset: impl Fn(&mut S, usize, Instant),
    poll: impl Fn(&mut S, usize, &mut Context<'_>) -> bool,
) -> f64 {
    let rt = Flavor::CurrentThread.runtime(1, "reset-bench");
    let mut setup = Some(setup);
    rt.block_on(poll_fn(move |cx| {
        let setup = setup.take().expect("polled once");
        let mut state = setup(n, Instant::now() + IDLE, cx);
        let mut i = 0;
        let mut next = || {
            let now = i;
            i = if i + 1 == n { 0 } else { i + 1 };
            now
        };
        let start = std::time::Instant::now();
        let done = match variant {
            Variant::Connection => {
                let mut pending = 0;
                for _ in 0..total {
                    let k = next();
                    reset(&mut state, k, Instant::now() + IDLE);
                    pending += usize::from(poll(&mut state, k, cx));
                }
                assert_eq!(black_box(pending), total, "an idle timer fired");
                total
            }
            Variant::ClockFree => {
                for _ in 0..total / BATCH {
                    let deadline = Instant::now() + IDLE;
                    for _ in 0..BATCH {
                        reset(&mut state, next(), deadline);
                    }
                }
                total / BATCH * BATCH
            }
        };
        let elapsed = start.elapsed();
        drop(state);
        Poll::Ready(done as f64 / elapsed.as_secs_f64())
    }))
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(100_000, 10_000);
    let total = ctx.size(5_000_000, 200_000);
    println!(
        "{n} registered idle timeouts of 30 s, {total} activities round robin, each resetting \
         its timer to now + 30 s: with a clock read and a poll per activity (connection), or \
         alone with the clock read once per {BATCH} (clock-free); one task on a current-thread \
         runtime.\n"
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| Some(sys.measure(n, total)));
    let reps: Vec<_> = reps
        .into_iter()
        .map(|r| r.expect("every build measures it"))
        .collect();
    let ours = reps[0].medians();
    let mut rows = Vec::new();
    for (k, variant) in VARIANTS.iter().enumerate() {
        for (s, sys) in SYSTEMS.iter().enumerate() {
            let r = reps[s].median(k);
            rows.push(vec![
                variant.name().to_string(),
                sys.name().to_string(),
                reps[s].shown(k, rate),
                format!("{:.1}", 1e9 / r),
                if s == 0 {
                    "-".to_string()
                } else {
                    ratio(ours[k], r, true)
                },
            ]);
        }
    }
    print_table(
        &["variant", "system", "resets/s", "ns/reset", "ours vs it"],
        &rows,
    );
    for (k, variant) in VARIANTS.iter().enumerate() {
        for (s, sys) in SYSTEMS.iter().enumerate().skip(1) {
            let metric = format!("resets/s, {}", variant.name());
            let theirs = reps[s].median(k);
            summary.add(&metric, sys.name(), [ours[k], theirs], true, rate);
        }
    }
}
