//! interval: many periodic timers (heartbeats of many connections), CPU time per tick.
//!
//! 10k tasks on a multi-thread runtime (`--workers`), each ticking an interval of 10 ms 100
//! times, their first ticks spread evenly over one period. Figure: the CPU time (user + sys)
//! of the runtime's threads from before the tasks are spawned until the last one has finished,
//! divided by the ticks: ours (`interval_at`) against `tokio::time::interval_at`, and a floor
//! with no timer in the tasks at all: one ticker task (a 1 ms `tokio::time::Interval`) wakes a
//! tenth of them every millisecond through an `AtomicWaker`, so each is woken every 10 ms, as
//! often as with an interval: what the runtime costs to wake and poll the tasks, whatever the
//! timer. Creating the tasks and the intervals is counted, the runtime's start is not; each
//! measurement on a fresh runtime, the systems interleaved. CPU time comes from
//! `/proc/self/task/*/schedstat` (ns, brought up to date at the scheduler's ticks: a few ms
//! per thread, about 1% of the full run); the wall time says whether the ticks kept up.
//!
//! The target: ours at most half of Tokio's CPU per tick.

use std::future::{pending, poll_fn, Future};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::time::Instant;

use super::{Ctx, Workload};
use crate::cpu::thread_cpu_ns;
use crate::report::{interleaved, print_table, ratio, target, Summary};
use crate::rt::{run_task, Flavor};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "interval",
    about: "10k intervals x 100 ticks of 10 ms: CPU per tick, ours vs tokio::time::Interval",
    run,
};

const PERIOD: Duration = Duration::from_millis(10);

/// The target: our CPU per tick over Tokio's, at most this.
const TARGET_RATIO: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    Tokio,
    /// No timer in the tasks: a ticker task wakes them.
    Floor,
}

const SYSTEMS: [System; 3] = [System::Ours, System::Tokio, System::Floor];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: Interval",
            System::Tokio => "tokio::time::Interval",
            System::Floor => "floor: no timer, a ticker task wakes them",
        }
    }

    /// Names the runtime's threads (at most 15 bytes: see `thread_ticks`).
    fn thread_name(self) -> &'static str {
        match self {
            System::Ours => "interval-ours",
            System::Tokio => "interval-tokio",
            System::Floor => "interval-floor",
        }
    }

    /// `[CPU µs per tick, wall ms]`.
    fn measure(self, workers: usize, n: usize, ticks: usize) -> [f64; 2] {
        let b = Bench {
            workers,
            thread_name: self.thread_name(),
            n,
            ticks,
        };
        match self {
            System::Ours => b.run(
                |_, first| tokio_timing_wheel::interval_at(first, PERIOD),
                pending(),
            ),
            System::Tokio => b.run(
                |_, first| tokio::time::interval_at(first, PERIOD),
                pending(),
            ),
            System::Floor => {
                let slots: Arc<[FloorSlot]> = (0..n).map(|_| FloorSlot::default()).collect();
                let for_tasks = Arc::clone(&slots);
                b.run(
                    move |k, _| Floor {
                        slots: Arc::clone(&for_tasks),
                        k,
                        consumed: 0,
                    },
                    wake_a_tenth_every_ms(slots),
                )
            }
        }
    }
}

/// What each task awaits, again and again.
trait Ticker: Send + 'static {
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

impl Ticker for tokio_timing_wheel::Interval {
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        tokio_timing_wheel::Interval::poll_tick(self, cx).map(drop)
    }
}

impl Ticker for tokio::time::Interval {
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        tokio::time::Interval::poll_tick(self, cx).map(drop)
    }
}

/// The floor's ticker: task `k` may tick once more each time its slot's `granted` grows.
struct Floor {
    slots: Arc<[FloorSlot]>,
    k: usize,
    consumed: u32,
}

#[derive(Default)]
struct FloorSlot {
    granted: AtomicU32,
    waker: AtomicWaker,
}

impl Ticker for Floor {
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let slot = &self.slots[self.k];
        if slot.granted.load(Acquire) == self.consumed {
            slot.waker.register(cx.waker());
            if slot.granted.load(Acquire) == self.consumed {
                return Poll::Pending;
            }
        }
        self.consumed += 1;
        Poll::Ready(())
    }
}

/// The floor's ticker task: every millisecond, grants a tick to a tenth of the slots (each
/// slot every 10 ms) and wakes their tasks. Runs until aborted.
async fn wake_a_tenth_every_ms(slots: Arc<[FloorSlot]>) {
    let mut every_ms = tokio::time::interval(Duration::from_millis(1));
    for t in 0.. {
        every_ms.tick().await;
        for slot in slots.iter().skip(t % 10).step_by(10) {
            slot.granted.fetch_add(1, Release);
            slot.waker.wake();
        }
    }
}

/// One measurement: `n` tasks ticking `ticks` times each, on a fresh runtime.
struct Bench {
    workers: usize,
    thread_name: &'static str,
    n: usize,
    ticks: usize,
}

impl Bench {
    /// `[CPU µs per tick, wall ms]`: task `k` ticks `make(k, its first tick)`, with
    /// `background` spawned beside the tasks and aborted once they are done.
    fn run<I, M, B>(&self, make: M, background: B) -> [f64; 2]
    where
        I: Ticker,
        M: Fn(usize, Instant) -> I + Send + Sync + 'static,
        B: Future<Output = ()> + Send + 'static,
    {
        let rt = Flavor::MultiThread.runtime(self.workers, self.thread_name);
        let (n, ticks, name) = (self.n, self.ticks, self.thread_name);
        let make = Arc::new(make);
        let cpu0 = thread_cpu_ns(name);
        let wall = run_task(rt, async move {
            let start = std::time::Instant::now();
            let background = tokio::spawn(background);
            let first = Instant::now() + PERIOD;
            let tasks: Vec<_> = (0..n)
                .map(|k| {
                    let make = Arc::clone(&make);
                    tokio::spawn(async move {
                        let mut ticker = make(k, first + PERIOD * k as u32 / n as u32);
                        for _ in 0..ticks {
                            poll_fn(|cx| ticker.poll_tick(cx)).await;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.expect("a ticking task panicked");
            }
            background.abort();
            let wall = start.elapsed();
            // Read while the runtime's threads still live (the task runs on one of them).
            (wall, thread_cpu_ns(name))
        });
        let (wall, cpu1) = wall;
        let cpu_us = cpu1.saturating_sub(cpu0) as f64 / 1e3;
        [cpu_us / (n * ticks) as f64, wall.as_secs_f64() * 1e3]
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(10_000, 1_000);
    let ticks = ctx.size(100, 20);
    println!(
        "{n} tasks x {ticks} ticks of {PERIOD:?}, first ticks spread over one period ({} \
         runtime); CPU time of the runtime's threads per tick.\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| {
        Some(sys.measure(ctx.workers, n, ticks))
    });
    let reps: Vec<_> = reps
        .into_iter()
        .map(|r| r.expect("every build measures it"))
        .collect();
    let [ours, tokio, floor] = [0, 1, 2].map(|s| reps[s].medians());
    // At 0 when within the noise below the floor (`--quick`), so that no ratio reads the
    // wrong way.
    let above = |r: [f64; 2]| (r[0] - floor[0]).max(0.0);
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip(&reps)
        .map(|(&sys, r)| {
            let m = r.medians();
            let vs = |a: f64, b: f64| match sys {
                System::Tokio => ratio(a, b, false),
                _ => "-".to_string(),
            };
            vec![
                sys.name().to_string(),
                r.shown(0, |x| format!("{x:.3}")),
                vs(ours[0], m[0]),
                if sys == System::Floor {
                    "0 (reference)".to_string()
                } else {
                    format!("{:.3}", above(m))
                },
                vs(above(ours), above(m)),
                r.shown(1, |x| format!("{x:.0}")),
            ]
        })
        .collect();
    print_table(
        &[
            "system",
            "CPU µs per tick",
            "ours vs it",
            "above the floor",
            "ours vs it",
            "wall ms",
        ],
        &rows,
    );
    let share = ours[0] / tokio[0];
    // Without `schedstat`, a run shorter than a CPU tick per thread (`--quick`) reads as 0.
    let measurable = share.is_finite() && share > 0.0;
    println!(
        "Ours takes {share:.2}x Tokio's CPU per tick (target: at most {TARGET_RATIO}x){}; the \
         last ticks are due {:.0} ms after the start.\n",
        if measurable {
            ""
        } else {
            ", below the 10 ms CPU tick here: not measured"
        },
        (ticks as f64 + 1.0) * PERIOD.as_secs_f64() * 1e3
    );

    let us = |x: f64| format!("{x:.3} µs");
    let peer = System::Tokio.name();
    summary.add("CPU per tick", peer, [ours[0], tokio[0]], false, us);
    summary.add(
        "CPU per tick above the no-timer floor",
        peer,
        [above(ours), above(tokio)],
        false,
        us,
    );
    summary.add_text(
        "CPU per tick, ours / Tokio's",
        &format!("{share:.2}x"),
        peer,
        "1x",
        &if measurable {
            target(share <= TARGET_RATIO, &format!("<= {TARGET_RATIO}x"))
        } else {
            "n/a (less CPU than one tick)".to_string()
        },
    );
}
