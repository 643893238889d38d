//! rpc-situations: rpc-timeout's operation in the situations a runtime is found in: idle
//! workers, the other workers busy, one worker, one thread.
//!
//! The operation is rpc-timeout's (`timeout(5 s, f)`, `f` pending once then ready: every
//! timer registered and cancelled), one task doing N operations and `--tasks` tasks (8 by
//! default) doing N/8 each, one fresh runtime per measurement, warmed up before timing, in
//! four situations:
//!
//! - **idle**: the multi-thread runtime (`--workers`, 2 by default) with nothing else to run,
//!   as in rpc-timeout: at 1 task the other workers are idle, and park (Tokio parks one of
//!   them on its time driver, under the driver's lock) or look for work to steal;
//! - **busy**: the same runtime with `workers - 1` more tasks that loop `{ spin 100 µs;
//!   yield_now }` throughout, so the other workers are kept busy (their tasks may still move
//!   between workers: the load, not its place, is what is controlled);
//! - **one worker**: a multi-thread runtime of one worker (the alt timer applies), so no other
//!   worker parks, wakes or steals: each timer's own cost on a worker, which idle workers add
//!   to in **idle** (what they add depends on the operation's length and on how the idle
//!   worker parks: on Tokio's I/O driver here, as in any runtime with `enable_all` and the
//!   `net` feature);
//! - **current_thread**: Tokio's `current_thread` runtime, everything on one thread.
//!
//! Systems: no timer at all (the baseline), ours (the free `timeout`, and `Timer::timeout` on
//! a handle to the same default timer, which skips the free function's runtime lookup),
//! `tokio::time::timeout`
//! (and on a runtime with Tokio's alt timer, when built in, multi-thread only: Tokio ignores it
//! on `current_thread`), pingora's `fast_timeout`. Ops/s, and ours against each in each
//! situation: which of the situations a ratio of rpc-timeout holds in.

use std::time::Duration;

use super::{Ctx, Workload};
use crate::ops::{Loop, SPIN};
use crate::poll::PendingOnce;
use crate::report::{interleaved, print_table, rate, ratio, unmeasured_row, Summary};
use crate::rt::{Flavor, ALT_TIMER_MISSING};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "rpc-situations",
    about: "rpc-timeout with idle workers, busy workers, one worker, current_thread: ops/s",
    run,
};

const RPC_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Situation {
    Idle,
    Busy,
    OneWorker,
    CurrentThread,
}

impl Situation {
    fn label(self, workers: usize) -> String {
        match self {
            Situation::Idle => format!("idle: {}", Flavor::MultiThread.label(workers)),
            Situation::Busy => format!(
                "busy: {}, {} spinning task(s)",
                Flavor::MultiThread.label(workers),
                workers.saturating_sub(1)
            ),
            Situation::OneWorker => format!("one worker: {}", Flavor::MultiThread.label(1)),
            Situation::CurrentThread => Flavor::CurrentThread.label(workers),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Baseline,
    Ours,
    OursTimer,
    Tokio,
    TokioAlt,
    Pingora,
}

const SYSTEMS: [System; 6] = [
    System::Baseline,
    System::Ours,
    System::OursTimer,
    System::Tokio,
    System::TokioAlt,
    System::Pingora,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Baseline => "no timer (baseline)",
            System::Ours => "ours: timeout",
            System::OursTimer => "ours: Timer::timeout",
            System::Tokio => "tokio::time::timeout",
            System::TokioAlt => "tokio::time::timeout (alt timer)",
            System::Pingora => "pingora fast_timeout",
        }
    }

    /// The systems measured in `situation` (Tokio ignores the alt timer on `current_thread`).
    fn in_situation(situation: Situation) -> &'static [System] {
        match situation {
            Situation::CurrentThread => &[
                System::Baseline,
                System::Ours,
                System::OursTimer,
                System::Tokio,
                System::Pingora,
            ],
            _ => &SYSTEMS,
        }
    }

    /// `[ops/s at 1 task, ops/s at many tasks]`; `None` if this build cannot measure it.
    fn measure(self, ctx: &Ctx, situation: Situation, n: usize, warmup: usize) -> Option<[f64; 2]> {
        let flavor = match (situation, self) {
            (Situation::CurrentThread, _) => Flavor::CurrentThread,
            (_, System::TokioAlt) => Flavor::MultiThreadAltTimer,
            _ => Flavor::MultiThread,
        };
        let spinners = match situation {
            Situation::Busy => ctx.workers.saturating_sub(1),
            _ => 0,
        };
        let workers = match situation {
            Situation::OneWorker => 1,
            _ => ctx.workers,
        };
        let at = |tasks| -> Option<f64> {
            let l = Loop {
                flavor,
                workers,
                tasks,
                n,
                warmup,
                spinners,
            };
            let inner = PendingOnce::default;
            match self {
                System::Baseline => l.run(inner, || |f| f),
                System::Ours => l.run(inner, || |f| tokio_timing_wheel::timeout(RPC_TIMEOUT, f)),
                // The same default timer, held as a handle: no runtime lookup per operation.
                System::OursTimer => l.run(inner, || {
                    let timer = tokio_timing_wheel::Timer::current();
                    move |f| timer.timeout(RPC_TIMEOUT, f)
                }),
                System::Tokio | System::TokioAlt => {
                    l.run(inner, || |f| tokio::time::timeout(RPC_TIMEOUT, f))
                }
                System::Pingora => l.run(inner, || {
                    |f| pingora_timeout::fast_timeout::fast_timeout(RPC_TIMEOUT, f)
                }),
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
        "N = {n} timeouts of 5 s, each registered and cancelled (warm-up {warmup} ops), in \
         four situations; a busy task spins {SPIN:?} between yields.\n"
    );
    let both = format!("ops/s, 1 task / {tasks} tasks");
    for situation in [
        Situation::Idle,
        Situation::Busy,
        Situation::OneWorker,
        Situation::CurrentThread,
    ] {
        let label = situation.label(ctx.workers);
        println!("### {label}\n");
        let systems = System::in_situation(situation);
        let reps = interleaved(ctx.reps, systems, |sys| {
            sys.measure(ctx, situation, n, warmup)
        });
        let of = |sys: System| reps[systems.iter().position(|&s| s == sys).unwrap()].as_ref();
        let ours = of(System::Ours).expect("every build measures it").medians();
        let rows: Vec<Vec<String>> = systems
            .iter()
            .map(|&sys| {
                let Some(r) = of(sys) else {
                    return unmeasured_row(sys.name(), 5, ALT_TIMER_MISSING);
                };
                let o = r.medians();
                let vs = |a: f64, b: f64| match sys {
                    System::Ours | System::Baseline => "-".to_string(),
                    _ => ratio(a, b, true),
                };
                vec![
                    sys.name().to_string(),
                    r.shown(0, rate),
                    vs(ours[0], o[0]),
                    r.shown(1, rate),
                    vs(ours[1], o[1]),
                ]
            })
            .collect();
        let many = format!("{tasks} tasks ops/s");
        print_table(
            &["system", "1 task ops/s", "ours vs it", &many, "ours vs it"],
            &rows,
        );
        let metric = format!("{both}, {label}");
        for &peer in systems {
            if matches!(peer, System::Baseline | System::Ours | System::OursTimer) {
                continue;
            }
            match of(peer) {
                Some(p) => summary.add_all(&metric, peer.name(), &ours, &p.medians(), true, rate),
                None => summary.add_unmeasured(&metric, peer.name(), ALT_TIMER_MISSING),
            }
        }
        let handle = of(System::OursTimer)
            .expect("every build measures it")
            .medians();
        let tokio = of(System::Tokio)
            .expect("every build measures it")
            .medians();
        summary.add_all(
            &format!("{both} (ours: Timer::timeout on a handle), {label}"),
            System::Tokio.name(),
            &handle,
            &tokio,
            true,
            rate,
        );
    }
}
