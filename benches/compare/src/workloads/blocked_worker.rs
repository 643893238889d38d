//! blocked-worker: one worker blocked by user code, and the timers of every other task.
//!
//! A multi-thread runtime (`--workers`, 2 by default). 500 sleeping tasks with deadlines one
//! every millisecond over 500 ms after a lead, all registered first (as in `fire`). 100 ms into
//! that span, one more task, woken by a sleep of the system under test, registers a sleep
//! 100 µs away (earlier than any other pending deadline: for ours, registering a new earliest
//! deadline wakes the driver from that worker) and then blocks its thread with
//! `std::thread::sleep(300 ms)`: a bug in user code, but a common one. Each of the OTHER tasks
//! records how late its sleep woke it: p50, p99 and max over all of them, and over those due
//! while the worker was blocked; early wakes must be 0. Ours (`sleep_wheel_until`) against
//! `tokio::time::sleep_until`, and Tokio's alt timer when built in, in the same run. With
//! `tokio::time`, only the tasks queued on the blocked worker wait (an earlier measurement: 1.3-3.2 ms
//! elsewhere).

use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;

use super::{Ctx, Workload};
use crate::lateness::{lateness_stats, Sleepers};
use crate::poll::poll_once;
use crate::report::{interleaved, print_table, ratios, unmeasured_row, Summary};
use crate::rt::{run_task, Flavor, ALT_TIMER_MISSING};
use crate::sleep_systems::{MakeSleep, SleepBench, SleepSystem};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "blocked-worker",
    about: "one task blocks its worker 300 ms: lateness of every other task's timers",
    run,
};

const LEAD: Duration = Duration::from_millis(50);
/// How far ahead the blocking task's own sleep is: earlier than every other pending deadline.
const BLOCKER_SLEEP: Duration = Duration::from_micros(100);

const SYSTEMS: [SleepSystem; 3] = [SleepSystem::Ours, SleepSystem::Tokio, SleepSystem::TokioAlt];

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
struct Run {
    workers: usize,
    sleepers: usize,
    spread: Duration,
    block_after: Duration,
    block_for: Duration,
}

impl SleepBench for Run {
    type Output = [f64; 7];

    /// `[p50, p99, max of all (ms), p50, p99, max of those due while blocked (ms), early
    /// wakes]`; `None` without such a runtime.
    fn run<M: MakeSleep>(&self, flavor: Flavor, make: M) -> Option<[f64; 7]> {
        let rt = flavor.build(self.workers, "blocked-worker")?;
        let Run {
            sleepers: n,
            spread,
            block_after,
            block_for,
            ..
        } = *self;
        Some(run_task(rt, async move {
            let sleepers = Sleepers::spread_over(n, spread, LEAD, make).await;
            sleepers.all_registered().await;
            let block_at = sleepers.start + sleepers.lead + block_after;
            let blocker = tokio::spawn(async move {
                make(block_at).await;
                let mut touch = pin!(make(Instant::now() + BLOCKER_SLEEP));
                let _ = poll_once(touch.as_mut()).await;
                std::thread::sleep(block_for);
            });
            sleepers.all_woken().await;
            blocker.await.expect("the blocking task panicked");
            let blocked = block_at..block_at + block_for;
            let during: Vec<i64> = sleepers
                .lateness()
                .filter(|(d, _)| blocked.contains(d))
                .map(|(_, l)| l)
                .collect();
            let [p50, p99, max, early] = lateness_stats(&sleepers.lateness_ns());
            let [b50, b99, bmax, _] = lateness_stats(&during);
            let ms = |us: f64| us / 1e3;
            [ms(p50), ms(p99), ms(max), ms(b50), ms(b99), ms(bmax), early]
        }))
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let run = Run {
        workers: ctx.workers,
        sleepers: ctx.size(500, 200),
        spread: ctx.size(Duration::from_millis(500), Duration::from_millis(200)),
        block_after: ctx.size(Duration::from_millis(100), Duration::from_millis(50)),
        block_for: ctx.size(Duration::from_millis(300), Duration::from_millis(100)),
    };
    println!(
        "{} sleeping tasks, deadlines spread over {:?}; {:?} after the first deadline a task \
         blocks its worker for {:?} ({} runtime). Lateness of the other tasks' sleeps, in ms.\n",
        run.sleepers,
        run.spread,
        run.block_after,
        run.block_for,
        Flavor::MultiThread.label(ctx.workers)
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| {
        sys.measure(Flavor::MultiThread, &run)
    });
    // Medians, but the early wakes of the worst repetition.
    let results: Vec<Option<[f64; 7]>> = reps
        .iter()
        .map(|r| r.as_ref().map(|r| r.medians_but_max(&[6])))
        .collect();
    let ours = results[0].expect("ours is always measured");
    let ms = |x: f64| format!("{x:.2}");
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip(&results)
        .map(|(sys, r)| match r {
            None => unmeasured_row(sys.name(), 9, ALT_TIMER_MISSING),
            Some(r) => {
                let mut row = vec![sys.name().to_string()];
                row.extend(r[..6].iter().map(|&x| ms(x)));
                row.push(format!("{:.0}", r[6]));
                row.push(if *sys == SleepSystem::Ours {
                    "-".to_string()
                } else {
                    ratios(&ours[3..6], &r[3..6], false)
                });
                row
            }
        })
        .collect();
    print_table(
        &[
            "system",
            "all: p50",
            "p99",
            "max",
            "due while blocked: p50",
            "p99",
            "max",
            "early wakes",
            "ours vs it (while blocked)",
        ],
        &rows,
    );
    let metric = "others' lateness while blocked, p50 / p99 / max";
    for (sys, r) in SYSTEMS.iter().zip(&results).skip(1) {
        match r {
            Some(r) => summary.add_all(metric, sys.name(), &ours[3..6], &r[3..6], false, |x| {
                format!("{x:.2} ms")
            }),
            None => summary.add_unmeasured(metric, sys.name(), ALT_TIMER_MISSING),
        }
    }
    if let Some(tokio) = results[1] {
        let early = "early wakes, worst run (must be 0)";
        summary.add(
            early,
            SleepSystem::Tokio.name(),
            [ours[6], tokio[6]],
            false,
            |x| format!("{x:.0}"),
        );
    }
}
