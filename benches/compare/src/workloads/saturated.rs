//! saturated: a burst of RPCs spawned at once, each under a timeout: how long woken tasks wait.
//!
//! The shape of the `rpc_service` example at scale. On a multi-thread runtime (`--workers`),
//! `n` tasks are spawned at once from outside the runtime (so they queue in Tokio's global
//! queue); each calls a simulated backend (a sleep: 90% of 1-20 ms, 8% of 20-150 ms, 2% of
//! 1-2 s, from a fixed-seed generator, the same for every system) under a 200 ms timeout. For
//! a call that completes, the figure is how long after its backend's deadline the task ran
//! (`elapsed - latency`); for one that times out, how long after the timeout's deadline
//! (`elapsed - 200 ms`). Both measure the time from a timer's deadline to its task's poll:
//! the timer's firing, then the wait in Tokio's run queues, which holds most of it while the
//! burst's tasks are still queued. Mean and p99 of each, in ms, and the burst's wall time.
//!
//! Systems: ours (the backend is `sleep_wheel`, the timeout `timeout`: both on the runtime's
//! default timer, so the same firing passes wake both kinds), ours with the timeouts on a
//! second `Timer` (each kind woken by passes of its own), and `tokio::time` for both.

use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::Timer;

use super::{Ctx, Workload};
use crate::report::{interleaved, print_table, ratio, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "saturated",
    about: "300k RPCs spawned at once under 200 ms timeouts: deadline-to-poll delay of woken tasks",
    run,
};

const TIMEOUT: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    OursTwoTimers,
    Tokio,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: sleep_wheel + timeout, one timer",
            System::OursTwoTimers => "ours: timeouts on a second Timer",
            System::Tokio => "tokio::time: sleep + timeout",
        }
    }
}

const SYSTEMS: [System; 3] = [System::Ours, System::OursTwoTimers, System::Tokio];

/// xorshift64*: the same latencies for every system.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// The `i`-th call's backend latency.
fn latency(i: u64) -> Duration {
    let mut s = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let ms = match next(&mut s) % 100 {
        0..=89 => 1 + next(&mut s) % 20,
        90..=97 => 20 + next(&mut s) % 130,
        _ => 1_000 + next(&mut s) % 1_000,
    };
    Duration::from_millis(ms)
}

/// One call: `(timed out, µs from the deadline that ended it to this poll)`.
async fn call(sys: System, lat: Duration, second: Option<Timer>) -> (bool, f64) {
    let start = Instant::now();
    let timed_out = match (sys, second) {
        (System::Ours, _) => {
            tokio_timing_wheel::timeout(TIMEOUT, tokio_timing_wheel::sleep_wheel(lat))
                .await
                .is_err()
        }
        (System::OursTwoTimers, Some(t)) => t
            .timeout(TIMEOUT, tokio_timing_wheel::sleep_wheel(lat))
            .await
            .is_err(),
        _ => tokio::time::timeout(TIMEOUT, tokio::time::sleep(lat))
            .await
            .is_err(),
    };
    let deadline = if timed_out { TIMEOUT } else { lat };
    let late = start.elapsed().saturating_sub(deadline);
    (timed_out, late.as_secs_f64() * 1e6)
}

/// Mean and p99 of `v` (µs), in ms.
fn mean_p99(v: &mut [f64]) -> [f64; 2] {
    if v.is_empty() {
        return [f64::NAN; 2];
    }
    v.sort_unstable_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let p99 = v[((v.len() - 1) as f64 * 0.99).round() as usize];
    [mean / 1e3, p99 / 1e3]
}

/// `[completed: mean ms, p99 ms; timed out: mean ms, p99 ms; wall ms]` for `n` calls on `sys`.
fn measure(sys: System, workers: usize, n: usize) -> [f64; 5] {
    let rt = Flavor::MultiThread.runtime(workers, "saturated");
    let second = (sys == System::OursTwoTimers).then(|| {
        let _in = rt.enter();
        Timer::builder().build().expect("a default timer")
    });
    let wall = std::time::Instant::now();
    let handles: Vec<_> = (0..n as u64)
        .map(|i| rt.spawn(call(sys, latency(i), second.clone())))
        .collect();
    let outcomes = rt.block_on(async {
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.expect("a call panicked"));
        }
        out
    });
    let wall = wall.elapsed().as_secs_f64() * 1e3;
    drop(second);
    drop(rt);
    let (mut done, mut timed_out): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for (t, late) in outcomes {
        if t {
            timed_out.push(late);
        } else {
            done.push(late);
        }
    }
    let [d_mean, d_p99] = mean_p99(&mut done);
    let [t_mean, t_p99] = mean_p99(&mut timed_out);
    [d_mean, d_p99, t_mean, t_p99, wall]
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(300_000, 5_000);
    println!(
        "{n} calls spawned at once on a {}-worker multi-thread runtime, each a backend sleep \
         (90% 1-20 ms, 8% 20-150 ms, 2% 1-2 s) under a {TIMEOUT:?} timeout. Delay: from the \
         deadline that ended a call (its backend's, or its timeout's) to its task's poll, ms.\n",
        ctx.workers
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |&sys| {
        Some(measure(sys, ctx.workers, n))
    });
    let reps: Vec<_> = reps.into_iter().map(|r| r.expect("measured")).collect();
    let med: Vec<[f64; 5]> = reps.iter().map(|r| r.medians()).collect();
    let tokio = SYSTEMS
        .iter()
        .position(|&s| s == System::Tokio)
        .expect("Tokio is a system");
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip(&reps)
        .enumerate()
        .map(|(s, (sys, r))| {
            let vs = |k: usize| {
                if s == tokio {
                    "-".to_string()
                } else {
                    ratio(med[s][k], med[tokio][k], false)
                }
            };
            vec![
                sys.name().to_string(),
                r.shown(0, |x| format!("{x:.1}")),
                r.shown(1, |x| format!("{x:.1}")),
                vs(0),
                r.shown(2, |x| format!("{x:.1}")),
                r.shown(3, |x| format!("{x:.1}")),
                vs(2),
                r.shown(4, |x| format!("{x:.0}")),
            ]
        })
        .collect();
    print_table(
        &[
            "system",
            "completed: mean ms",
            "p99 ms",
            "mean vs Tokio",
            "timed out: mean ms",
            "p99 ms",
            "mean vs Tokio",
            "wall ms",
        ],
        &rows,
    );
    for (sys, what, k) in [
        (System::Ours, "completed calls", 0),
        (System::Ours, "timed-out calls", 2),
        (
            System::OursTwoTimers,
            "timed-out calls, timeouts on a second Timer",
            2,
        ),
    ] {
        let s = SYSTEMS.iter().position(|&x| x == sys).expect("a system");
        summary.add(
            &format!("deadline-to-poll delay, mean, {what}"),
            "tokio::time",
            [med[s][k], med[tokio][k]],
            false,
            |x| format!("{x:.1} ms"),
        );
    }
}
