//! delayed: delayed tasks by the million, half of them cancelled.
//!
//! 1M delayed tasks, delays spread uniformly over 1 s after a lead, every other one cancelled
//! right after all are created: ours (`spawn_after` + `DelayedTask::cancel`) against
//! `tokio::spawn(sleep_until + work)` + `JoinHandle::abort`, on a multi-thread runtime
//! (`--workers`). Figures: wall time from the first deadline until every task has run or been
//! dropped (it cannot drop below the 1 s spread, so it says little about cost), the process CPU
//! time from the first spawn to the end (tasks per CPU-second: the throughput the machine
//! gets), the time taken to issue the 1M tasks, and the peak of allocated bytes above the start
//! (handles included, from the counting allocator, in one more run of each system, untimed:
//! counting costs every allocation and free a shared atomic update, which the timed runs must
//! not pay).
//!
//! The lead (2 s; `--quick` 200 ms) puts the first deadline after the cancel pass, so that
//! every system runs exactly half the tasks and cancels the other half. Without it, the tasks
//! whose delay ended while the others were still being created ran before the cancel pass
//! reached them, so the mix of fired and cancelled tasks depended on each system's issue time:
//! the faster issuer cancelled more and ran fewer, and a cancelled delayed task of ours never
//! becomes a Tokio task at all, so tasks per CPU-second compared different work. The table
//! gives both counts, and warns if the cancel pass still ended after the first deadline.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_timing_wheel::spawn_after;

use super::{Ctx, Workload};
use crate::alloc::Meter;
use crate::cpu::{process_ticks, TICK_MS};
use crate::lateness::spread_at;
use crate::report::{interleaved, print_table, rate, ratio, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "delayed",
    about: "1M delayed tasks over 1 s, half cancelled: CPU per task, issue time, peak memory",
    run,
};

/// Shared by the delayed tasks of one run.
struct Probe {
    n: usize,
    ran: AtomicUsize,
    /// Tasks that ran or were dropped without running.
    settled: AtomicUsize,
    all_settled: Notify,
}

/// Moved into each delayed task's future: counts it as settled when the future is dropped,
/// whether it ran (`work`) or was cancelled.
struct Settle(Arc<Probe>);

impl Settle {
    fn work(self) {
        self.0.ran.fetch_add(1, Relaxed);
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if self.0.settled.fetch_add(1, AcqRel) + 1 == self.0.n {
            self.0.all_settled.notify_one();
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum System {
    Ours,
    Tokio,
}

const SYSTEMS: [System; 2] = [System::Ours, System::Tokio];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: spawn_after + cancel",
            System::Tokio => "tokio::spawn(sleep) + abort",
        }
    }

    /// The figures of one run; with `metered`, the allocation meter runs throughout (for the
    /// peak: the other figures then pay for its counting).
    fn measure(
        self,
        workers: usize,
        n: usize,
        lead: Duration,
        spread: Duration,
        metered: bool,
    ) -> [f64; 7] {
        match self {
            System::Ours => bench(
                workers,
                n,
                lead,
                spread,
                metered,
                |d, s| spawn_after(d, async move { s.work() }),
                |h| {
                    h.cancel();
                },
            ),
            System::Tokio => bench(
                workers,
                n,
                lead,
                spread,
                metered,
                |d, s| {
                    let at = Instant::now() + d;
                    tokio::spawn(async move {
                        tokio::time::sleep_until(at).await;
                        s.work();
                    })
                },
                tokio::task::JoinHandle::abort,
            ),
        }
    }
}

/// `[wall ms, tasks/s by wall time, peak MB, tasks run, process CPU s, spawn-phase ms, 1 if the
/// cancel pass ended after the first deadline]` (wall time from the first deadline); the peak is
/// NaN unless `metered`.
fn bench<H, Sp, C>(
    workers: usize,
    n: usize,
    lead: Duration,
    spread: Duration,
    metered: bool,
    spawn: Sp,
    cancel: C,
) -> [f64; 7]
where
    H: Send + 'static,
    Sp: Fn(Duration, Settle) -> H + Send + 'static,
    C: Fn(&H) + Send + 'static,
{
    let rt = Flavor::MultiThread.runtime(workers, "delayed-bench");
    let result = rt.block_on(async move {
        tokio::spawn(async move {
            let probe = Arc::new(Probe {
                n,
                ran: AtomicUsize::new(0),
                settled: AtomicUsize::new(0),
                all_settled: Notify::new(),
            });
            let meter = metered.then(Meter::start);
            let cpu0 = process_ticks();
            let start = std::time::Instant::now();
            let handles: Vec<H> = (0..n)
                .map(|i| spawn(lead + spread_at(spread, i, n), Settle(probe.clone())))
                .collect();
            let spawn_phase = start.elapsed();
            for h in handles.iter().skip(1).step_by(2) {
                cancel(h);
            }
            let cancelled_late = start.elapsed() >= lead;
            while probe.settled.load(Acquire) < n {
                probe.all_settled.notified().await;
            }
            let wall = start.elapsed().saturating_sub(lead);
            let cpu = (process_ticks() - cpu0) as f64 * TICK_MS as f64 / 1e3;
            let peak = meter
                .as_ref()
                .map_or(f64::NAN, |m| m.peak().max(0) as f64 / 1e6);
            drop(meter);
            drop(handles);
            [
                wall.as_secs_f64() * 1e3,
                n as f64 / wall.as_secs_f64(),
                peak,
                probe.ran.load(Relaxed) as f64,
                cpu,
                spawn_phase.as_secs_f64() * 1e3,
                f64::from(u8::from(cancelled_late)),
            ]
        })
        .await
        .expect("the delayed-task benchmark panicked")
    });
    drop(rt);
    result
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(1_000_000, 20_000);
    let spread = ctx.size(Duration::from_secs(1), Duration::from_millis(100));
    let lead = ctx.size(Duration::from_secs(2), Duration::from_millis(200));
    println!(
        "{n} tasks, delays spread over {spread:?} after a lead of {lead:?}, every other one \
         cancelled after all are created ({} runtime).\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| {
        Some(sys.measure(ctx.workers, n, lead, spread, false))
    });
    let [mut ours, mut tokio] = [0, 1].map(|s| {
        reps[s]
            .as_ref()
            .expect("always measured")
            .medians_but_max(&[6])
    });
    // The peak from one more run of each, metered and untimed.
    for (sys, r) in SYSTEMS.iter().zip([&mut ours, &mut tokio]) {
        r[2] = sys.measure(ctx.workers, n, lead, spread, true)[2];
    }
    if ours[6] > 0.0 || tokio[6] > 0.0 {
        println!(
            "WARNING: in some run the cancel pass ended after the first deadline: the systems \
             may have run different numbers of tasks\n"
        );
    }
    let per_cpu = |r: &[f64; 7]| n as f64 / r[4];
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip([ours, tokio])
        .enumerate()
        .map(|(k, (sys, r))| {
            let vs = |a: f64, b: f64, higher: bool| {
                if k == 0 {
                    "-".to_string()
                } else {
                    ratio(a, b, higher)
                }
            };
            vec![
                sys.name().to_string(),
                format!("{:.0}", r[0]),
                rate(r[1]),
                vs(ours[1], r[1], true),
                format!("{:.1}", r[2]),
                format!("{:.0}", r[2] * 1e6 / n as f64),
                vs(ours[2], r[2], false),
                format!("{:.0}", r[3]),
                format!("{:.0}", n as f64 - r[3]),
                format!("{:.2}", r[4]),
                rate(per_cpu(&r)),
                vs(per_cpu(&ours), per_cpu(&r), true),
                format!("{:.0}", r[5]),
                vs(ours[5], r[5], false),
            ]
        })
        .collect();
    print_table(
        &[
            "system",
            "wall ms",
            "tasks/s",
            "ours vs it",
            "peak MB",
            "peak B/task",
            "ours vs it",
            "ran",
            "cancelled",
            "process CPU s",
            "tasks per CPU-s",
            "ours vs it",
            "spawn phase ms",
            "ours vs it",
        ],
        &rows,
    );
    println!(
        "_Wall time cannot drop below the {spread:?} spread, so throughput is compared per \
         CPU-second (user + sys of the whole process) and by how fast the tasks are issued._\n"
    );
    let peer = System::Tokio.name();
    summary.add("tasks/s (wall)", peer, [ours[1], tokio[1]], true, rate);
    summary.add(
        "tasks per CPU-second",
        peer,
        [per_cpu(&ours), per_cpu(&tokio)],
        true,
        rate,
    );
    summary.add(
        &format!("time to issue {n}"),
        peer,
        [ours[5], tokio[5]],
        false,
        |x| format!("{x:.0} ms"),
    );
    summary.add("peak memory", peer, [ours[2], tokio[2]], false, |x| {
        format!("{x:.1} MB")
    });
}
