//! fire: how late timers fire on an idle runtime.
//!
//! 200k spawned tasks each sleeping until `start + lead + i * 2 s / 200k`, on a multi-thread
//! runtime. The lead is 50 ms plus twice the time registering them all takes, timed on a tenth
//! of them just before, so that every sleeper is registered before the first deadline even on a
//! slow or busy machine (the table shows when the last one was, and warns otherwise). Each
//! records how late it woke (`Instant::now() - deadline`): p50, p99 and max lateness, the delay
//! from the last deadline to the last wake, and the number of early wakes (must be 0), for ours
//! (`sleep_wheel_until`), `tokio::time::sleep_until`, and the latter on a runtime with Tokio's
//! alt timer when built in.

use std::time::Duration;

use super::{Ctx, Workload};
use crate::lateness::{lateness_stats, spread_at, Sleepers};
use crate::report::{interleaved, print_table, unmeasured_row, Summary};
use crate::rt::{run_task, Flavor, ALT_TIMER_MISSING};
use crate::sleep_systems::{MakeSleep, SleepBench, SleepSystem};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "fire",
    about: "200k sleeps spread over 2 s on an idle runtime: lateness p50/p99/max, early wakes",
    run,
};

const LEAD: Duration = Duration::from_millis(50);

const SYSTEMS: [SleepSystem; 3] = [SleepSystem::Ours, SleepSystem::Tokio, SleepSystem::TokioAlt];

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
struct Run {
    workers: usize,
    n: usize,
    spread: Duration,
}

impl SleepBench for Run {
    /// `[p50 µs, p99 µs, max µs, last deadline -> last wake µs, early wakes, all registered at
    /// (ms after start), first deadline (ms after start)]`.
    type Output = [f64; 7];

    fn run<M: MakeSleep>(&self, flavor: Flavor, make: M) -> Option<[f64; 7]> {
        let Run { n, spread, .. } = *self;
        let rt = flavor.build(self.workers, "fire-bench")?;
        Some(run_task(rt, async move {
            let sleepers = Sleepers::spread_over(n, spread, LEAD, make).await;
            let lead = sleepers.lead;
            sleepers.all_woken().await;
            let [p50, p99, max, early] = lateness_stats(&sleepers.lateness_ns());
            let last_deadline = lead + spread_at(spread, n - 1, n);
            let tail = sleepers.last_wake().as_secs_f64() - last_deadline.as_secs_f64();
            [
                p50,
                p99,
                max,
                tail * 1e6,
                early,
                sleepers.registered_at().as_secs_f64() * 1e3,
                lead.as_secs_f64() * 1e3,
            ]
        }))
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(200_000, 10_000);
    let spread = ctx.size(Duration::from_secs(2), Duration::from_millis(200));
    println!(
        "{n} sleeping tasks, deadlines spread over {spread:?} from start + lead (lead: {LEAD:?} \
         + 2x the time registering them takes, measured on a tenth just before; {} runtime).\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let run = Run {
        workers: ctx.workers,
        n,
        spread,
    };
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| {
        sys.measure(Flavor::MultiThread, &run)
    });
    // Medians, but the early wakes of the worst repetition: they must all be 0.
    let medians: Vec<Option<[f64; 7]>> = reps
        .iter()
        .map(|r| r.as_ref().map(|r| r.medians_but_max(&[4])))
        .collect();
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip(&medians)
        .map(|(sys, r)| match r {
            None => unmeasured_row(sys.name(), 8, ALT_TIMER_MISSING),
            Some(r) => {
                let mut row = vec![sys.name().to_string()];
                row.extend(r[..5].iter().map(|x| format!("{x:.0}")));
                row.extend(r[5..].iter().map(|x| format!("{x:.1}")));
                row
            }
        })
        .collect();
    print_table(
        &[
            "system",
            "late p50 µs",
            "late p99 µs",
            "late max µs",
            "last deadline -> last wake µs",
            "early wakes",
            "all registered at ms",
            "first deadline at ms",
        ],
        &rows,
    );
    // Per run: the medians of the two figures may come from different runs.
    if reps.iter().flatten().any(|r| r.any_run(|f| f[5] > f[6])) {
        println!("WARNING: not every sleeper was registered before the first deadline\n");
    }
    let ours = medians[0].expect("ours is always measured");
    let us = |x: f64| format!("{x:.0} µs");
    for (sys, peer) in SYSTEMS.iter().zip(&medians).skip(1) {
        let metric = "lateness p50 / p99 / max";
        let Some(peer) = peer else {
            summary.add_unmeasured(metric, sys.name(), ALT_TIMER_MISSING);
            continue;
        };
        summary.add_all(metric, sys.name(), &ours[..3], &peer[..3], false, us);
        summary.add(
            "last deadline -> last wake",
            sys.name(),
            [ours[3], peer[3]],
            false,
            us,
        );
        summary.add(
            "early wakes, worst run (must be 0)",
            sys.name(),
            [ours[4], peer[4]],
            false,
            |x| format!("{x:.0}"),
        );
    }
}
