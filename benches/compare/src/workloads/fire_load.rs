//! fire-load: how late timers fire on a saturated runtime (as a loaded service sees it).
//!
//! A runtime (the multi-thread one, `--workers`, 2 by default; and separately `current_thread`),
//! 10 000 sleeps with deadlines spread over 1 s after a lead, ALL registered while the runtime
//! is idle: each in its own spawned task that polls it once, and only once every one has
//! registered does the load start, so registration delay does not count. The load: N busy
//! tasks, each looping `{ spin 20 µs (busy-wait on std::time::Instant); yield_now().await }`,
//! for N in 0, 100, 300, 1000, 3000, until the last sleeper wakes. Each sleeper records how late
//! it woke (`Instant::now() - deadline`: the timer's delay plus the wait of the woken task for a
//! worker, which is what a user sees): p50, p99, max, and early wakes (must be 0).
//!
//! Systems, each in its own fresh runtime, repetitions interleaved: ours (`sleep_wheel_until`),
//! `tokio::time::sleep_until`, pingora's `fast_timeout::fast_sleep` (it takes a duration: the
//! time left until the deadline when the sleep is made; it rounds deadlines up to its 10 ms
//! ticks and fires from its own thread, so it is late by up to 10 ms by design), and, in a build
//! with it, Tokio's alt timer (multi-thread only; Tokio ignores it on `current_thread`).
//! pingora's wakes come from its own thread, so they land in the runtime's global queue: a busy
//! `current_thread` runtime takes one task from there every 31 polls (Tokio's default global
//! queue interval), fewer than its sleepers fall due, and their lateness grows to seconds; its
//! truncation to whole milliseconds also lets it wake up to 1 ms early at times.
//!
//! The lead is 100 ms plus twice the time registering the sleepers takes (timed on a tenth of
//! them just before); the table warns if the load was not running by the first deadline.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::{Ctx, Workload};
use crate::lateness::{lateness_stats, Sleepers};
use crate::ops::spawn_busy;
use crate::report::{interleaved, print_table, ratios, unmeasured_row, Summary};
use crate::rt::{run_task, Flavor, ALT_TIMER_MISSING};
use crate::sleep_systems::{MakeSleep, SleepBench, SleepSystem};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "fire-load",
    about: "10k sleeps registered while idle, then N tasks {spin 20 µs; yield}: lateness",
    run,
};

/// What each busy task spins for between yields.
const SPIN: Duration = Duration::from_micros(20);

/// The systems measured on a runtime of `flavor` (Tokio ignores the alt timer on
/// `current_thread`).
fn systems_on(flavor: Flavor) -> &'static [SleepSystem] {
    use SleepSystem::*;
    match flavor {
        Flavor::CurrentThread => &[Ours, Tokio, Pingora],
        _ => &[Ours, Tokio, Pingora, TokioAlt],
    }
}

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
struct Run {
    workers: usize,
    sleeps: usize,
    spread: Duration,
    base_lead: Duration,
    busy: usize,
}

impl SleepBench for Run {
    /// `[p50, p99, max (ms), early wakes, load running at (ms after start), first deadline
    /// (ms after start)]`.
    type Output = [f64; 6];

    fn run<M: MakeSleep>(&self, flavor: Flavor, make: M) -> Option<[f64; 6]> {
        let rt = flavor.build(self.workers, "fire-load")?;
        let Run {
            sleeps: n,
            spread,
            base_lead,
            busy,
            ..
        } = *self;
        // The busy tasks are dropped at their next yield, when the runtime is.
        Some(run_task(rt, async move {
            let sleepers = Sleepers::spread_over(n, spread, base_lead, make).await;
            sleepers.all_registered().await;
            let stop = spawn_busy(busy, SPIN);
            let load_at = sleepers.start.elapsed();
            sleepers.all_woken().await;
            stop.store(true, Relaxed);
            let [p50, p99, max, early] = lateness_stats(&sleepers.lateness_ns());
            [
                p50 / 1e3,
                p99 / 1e3,
                max / 1e3,
                early,
                load_at.as_secs_f64() * 1e3,
                sleepers.lead.as_secs_f64() * 1e3,
            ]
        }))
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let sleeps = ctx.size(10_000, 1_000);
    let spread = ctx.size(Duration::from_secs(1), Duration::from_millis(200));
    let busy_counts: &[usize] = ctx.size(&[0, 100, 300, 1000, 3000], &[0, 300]);
    let base_lead = ctx.size(Duration::from_millis(100), Duration::from_millis(30));
    println!(
        "{sleeps} sleeps, deadlines spread over {spread:?}, all registered on the idle runtime; \
         then N busy tasks looping {{ spin {SPIN:?}; yield_now }} until the last one wakes, N in \
         {busy_counts:?}. Lateness in ms (wake - deadline); medians of the repetitions; early \
         wakes and the load's start from the worst one.\n"
    );
    let ms = |x: f64| format!("{x:.2}");
    let mut early = [0.0; 2];
    let mut late_load = false;
    for flavor in [Flavor::MultiThread, Flavor::CurrentThread] {
        println!("### {} runtime\n", flavor.label(ctx.workers));
        let systems = systems_on(flavor);
        let mut rows = Vec::new();
        for &busy in busy_counts {
            let run = Run {
                workers: ctx.workers,
                sleeps,
                spread,
                base_lead,
                busy,
            };
            let reps = interleaved(ctx.reps, systems, |sys| sys.measure(flavor, &run));
            // Per run: the load's start against that run's first deadline.
            late_load |= reps.iter().flatten().any(|r| r.any_run(|f| f[4] > f[5]));
            let results: Vec<Option<[f64; 6]>> =
                // Medians, but the early wakes and the load's start of the worst repetition.
                reps.iter().map(|r| r.as_ref().map(|r| r.medians_but_max(&[3, 4]))).collect();
            let ours = results[0].expect("ours is always measured");
            for (sys, r) in systems.iter().zip(&results) {
                let metric = format!(
                    "lateness p50 / p99 / max, {busy} busy, {}",
                    flavor.label(ctx.workers)
                );
                let Some(r) = r else {
                    let mut row = vec![busy.to_string()];
                    row.extend(unmeasured_row(sys.name(), 6, ALT_TIMER_MISSING));
                    rows.push(row);
                    summary.add_unmeasured(&metric, sys.name(), ALT_TIMER_MISSING);
                    continue;
                };
                let vs = if *sys == SleepSystem::Ours {
                    "-".to_string()
                } else {
                    ratios(&ours[..3], &r[..3], false)
                };
                rows.push(vec![
                    busy.to_string(),
                    sys.name().to_string(),
                    ms(r[0]),
                    ms(r[1]),
                    ms(r[2]),
                    format!("{:.0}", r[3]),
                    vs,
                ]);
                if *sys == SleepSystem::Ours {
                    early[0] += r[3];
                } else {
                    early[1] += r[3];
                    summary.add_all(&metric, sys.name(), &ours[..3], &r[..3], false, |x| {
                        format!("{x:.2} ms")
                    });
                }
            }
        }
        print_table(
            &[
                "busy tasks",
                "system",
                "late p50 ms",
                "late p99 ms",
                "late max ms",
                "early wakes",
                "ours vs it (p50 / p99 / max)",
            ],
            &rows,
        );
    }
    if late_load {
        println!("WARNING: in some run the load started after the first deadline\n");
    }
    summary.add_text(
        "early wakes, worst runs summed (must be 0)",
        &format!("{:.0}", early[0]),
        "all peers",
        &format!("{:.0}", early[1]),
        if early[0] == 0.0 {
            "ours: none early"
        } else {
            "ours: EARLY WAKES"
        },
    );
}
