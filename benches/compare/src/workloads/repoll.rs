//! repoll: timeouts polled again and again while registered, as around a handler that waits
//! for several reads before it answers.
//!
//! `timeout(5 s, f)` where `f` wakes itself and is pending 8 times, then ready: every timeout
//! registers its timer on the first poll, is polled 8 more times with the timer registered
//! (each such poll checks the timer, and a timer that needs a lock to be re-polled pays for
//! it every time), and is then cancelled. One task doing N operations, and `--tasks` tasks
//! (8 by default) doing N/8 each, on a multi-thread runtime (`--workers`, 2 by default), one
//! fresh runtime per measurement, warmed up before timing. Systems: no timer at all (`f.await`,
//! the runtime's own cost: the baseline), ours (the free `timeout`), `tokio::time::timeout`
//! (and on a runtime with Tokio's alt timer, when built in). Ops/s; "timer cost per op" is
//! `1/ops - 1/ops_baseline`.
//!
//! Two floors run beside them. [`CheckedOnce`], ours with its re-polls skipped (the same
//! registration and cancel, the later polls going to the inner future alone). Not a timeout:
//! what ours would do if a re-poll cost nothing. A ratio against Tokio that it misses cannot
//! be reached by making re-polls cheaper, only by the registration, the cancel or the harness.
//! And [`FloorAround`], the least a timer shared between threads does for a timeout it cancels
//! (see `rpc-timeout`), whose re-polls cost nothing: a ratio that it misses cannot be reached
//! by a timer of that kind at all.

use std::time::Duration;

use super::{Ctx, Workload};
use crate::floor::{CheckedOnce, FloorAround};
use crate::ops::Loop;
use crate::poll::PendingTimes;
use crate::report::{interleaved, print_table, rate, ratio, unmeasured_row, Summary};
use crate::rt::{Flavor, ALT_TIMER_MISSING};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "repoll",
    about: "a timeout around a future woken 8 times before it is ready, 1 and 8 tasks: ops/s",
    run,
};

const TIMEOUT: Duration = Duration::from_secs(5);

/// How many times the inner future is pending (waking itself) before it is ready.
const WAKES: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Baseline,
    Ours,
    Tokio,
    TokioAlt,
    /// Not a timeout: ours with re-polls skipped (see the module docs).
    Skipped,
    /// Not a timer: the floor (see the module docs).
    Floor,
}

const SYSTEMS: [System; 6] = [
    System::Baseline,
    System::Ours,
    System::Skipped,
    System::Floor,
    System::Tokio,
    System::TokioAlt,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Baseline => "no timer (baseline)",
            System::Ours => "ours: timeout",
            System::Tokio => "tokio::time::timeout",
            System::TokioAlt => "tokio::time::timeout (alt timer)",
            System::Skipped => "ours with re-polls skipped",
            System::Floor => "floor: clock read, lock + slab, waker clone",
        }
    }

    /// `[ops/s at 1 task, ops/s at many tasks]`; `None` if this build cannot measure it.
    fn measure(self, ctx: &Ctx, n: usize, warmup: usize) -> Option<[f64; 2]> {
        let flavor = match self {
            System::TokioAlt => Flavor::MultiThreadAltTimer,
            _ => Flavor::MultiThread,
        };
        let inner = || PendingTimes(WAKES);
        let at = |tasks| -> Option<f64> {
            let l = Loop {
                flavor,
                workers: ctx.workers,
                tasks,
                n,
                warmup,
                spinners: 0,
            };
            match self {
                System::Baseline => l.run(inner, || |f| f),
                System::Ours => l.run(inner, || |f| tokio_timing_wheel::timeout(TIMEOUT, f)),
                System::Skipped => l.run(inner, || |f| CheckedOnce::new(TIMEOUT, f)),
                System::Floor => l.run(inner, || |f| FloorAround::new(TIMEOUT, f)),
                System::Tokio | System::TokioAlt => {
                    l.run(inner, || |f| tokio::time::timeout(TIMEOUT, f))
                }
            }
        };
        Some([at(1)?, at(ctx.tasks)?])
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(500_000, 20_000);
    let warmup = ctx.size(25_000, 2_000);
    let tasks = ctx.tasks;
    println!(
        "N = {n} timeouts of 5 s around a future pending {WAKES} times (waking itself) before \
         it is ready: each timer registered, polled {WAKES} more times, cancelled (warm-up \
         {warmup} ops; {} runtime).\n",
        Flavor::MultiThread.label(ctx.workers),
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| sys.measure(ctx, n, warmup));
    let of = |sys: System| reps[SYSTEMS.iter().position(|&s| s == sys).unwrap()].as_ref();
    let measured = |sys: System| of(sys).expect("every build measures it");
    let baseline = measured(System::Baseline).medians();
    let ours = measured(System::Ours).medians();
    let cost = |ops: f64| (1e9 / ops - 1e9 / baseline[0]).max(0.0);
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .map(|&sys| {
            let Some(r) = of(sys) else {
                return unmeasured_row(sys.name(), 6, ALT_TIMER_MISSING);
            };
            let o = r.medians();
            let vs = |higher: bool, a: f64, b: f64| match sys {
                System::Ours | System::Baseline => "-".to_string(),
                _ => ratio(a, b, higher),
            };
            vec![
                sys.name().to_string(),
                r.shown(0, rate),
                vs(true, ours[0], o[0]),
                r.shown(1, rate),
                vs(true, ours[1], o[1]),
                match sys {
                    System::Baseline => "0 (reference)".to_string(),
                    _ => format!("{:.0}", cost(o[0])),
                },
            ]
        })
        .collect();
    let many = format!("{tasks} tasks ops/s");
    print_table(
        &[
            "system",
            "1 task ops/s",
            "ours vs it",
            &many,
            "ours vs it",
            "timer cost ns/op (1 task)",
        ],
        &rows,
    );
    let both = format!("ops/s, 1 task / {tasks} tasks");
    for peer in [System::Tokio, System::TokioAlt] {
        match of(peer) {
            Some(p) => summary.add_all(&both, peer.name(), &ours, &p.medians(), true, rate),
            None => summary.add_unmeasured(&both, peer.name(), ALT_TIMER_MISSING),
        }
    }
    let tokio = measured(System::Tokio).medians();
    let skipped =
        format!("ops/s, 1 task / {tasks} tasks, ours with re-polls skipped (not a timeout)");
    let skipped_ops = measured(System::Skipped).medians();
    summary.add_all(
        &skipped,
        System::Tokio.name(),
        &skipped_ops,
        &tokio,
        true,
        rate,
    );
    let floor = format!(
        "the floor's ops/s, 1 task / {tasks} tasks (not a timer: the most one freeing at cancel can reach)"
    );
    let floor_ops = measured(System::Floor).medians();
    summary.add_all(&floor, System::Tokio.name(), &floor_ops, &tokio, true, rate);
}
