//! idle: what pending timers cost while nothing happens, on a real clock.
//!
//! 100k sleeps pending 1 h away, registered and held by a spawned task on a fresh multi-thread
//! runtime (`--workers`), then 10 s of real idle: process CPU time (user + sys,
//! `/proc/self/stat`), the CPU of the runtime's own threads, and for ours the firing passes
//! over those 10 s (`Timer::metrics().passes`; must be 0: the earliest bucket of a
//! one-hour timer is minutes away), against a runtime with no timer at all and
//! `tokio::time::sleep`. pingora's clock thread, once started by an earlier workload, wakes every
//! 10 ms for the rest of the process: hence the CPU of the runtime's threads alone.
//!
//! The paused-time check that a one-hour sleep costs one firing pass, not one per tick nor one
//! per wheel level on its way down, is a test, not a benchmark: `tests/sleep.rs`,
//! `an_hour_sleep_costs_one_pass` (paused time needs Tokio's `test-util`,
//! which this suite must not enable).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_timing_wheel::{sleep_wheel, Timer};

use super::{Ctx, Workload};
use crate::cpu::{process_ticks, thread_ticks, TICK_MS};
use crate::poll::poll_once;
use crate::report::{print_table, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "idle",
    about: "100k sleeps 1 h away, 10 s of real idle: CPU, and our firing passes (must be 0)",
    run,
};

const SLEEP: Duration = Duration::from_secs(3600);

/// `n` timers made by `make`, registered and held by a spawned task on a fresh runtime whose
/// threads are named `thread_name`, then `idle` of real time with nothing to do. Returns
/// `[process ticks, runtime-thread ticks, firing passes]`, the last one NaN unless `ours` (the
/// timers are ours: count our default timer's firing passes).
fn idle_cpu<M, S>(
    workers: usize,
    thread_name: &str,
    ours: bool,
    n: usize,
    idle: Duration,
    make: M,
) -> [f64; 3]
where
    M: Fn() -> S + Send + 'static,
    S: Future + Send + 'static,
{
    let rt = Flavor::MultiThread.runtime(workers, thread_name);
    let timer = rt.block_on(async move {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut held: Vec<Pin<Box<S>>> = (0..n).map(|_| Box::pin(make())).collect();
            for s in &mut held {
                assert!(poll_once(s.as_mut()).await.is_pending());
            }
            let _ = ready_tx.send(());
            std::future::pending::<()>().await;
            drop(held);
        });
        ready_rx.await.expect("the idle holder task failed");
        ours.then(Timer::current)
    });
    std::thread::sleep(Duration::from_millis(100));
    let wakeups = |t: &Option<Timer>| t.as_ref().map(|t| t.metrics().passes);
    let (p0, t0, w0) = (process_ticks(), thread_ticks(thread_name), wakeups(&timer));
    std::thread::sleep(idle);
    let (p1, t1, w1) = (process_ticks(), thread_ticks(thread_name), wakeups(&timer));
    drop(timer);
    rt.shutdown_background();
    let woke = match (w0, w1) {
        (Some(a), Some(b)) => (b - a) as f64,
        _ => f64::NAN,
    };
    [(p1 - p0) as f64, (t1 - t0) as f64, woke]
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(100_000, 10_000);
    let idle = ctx.size(Duration::from_secs(10), Duration::from_secs(1));
    println!(
        "{n} sleeps pending 1 h away, then {idle:?} idle ({} runtime; CPU in {TICK_MS} ms \
         ticks). Once, not repeated: the figures are counts near zero.\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let w = ctx.workers;
    let none = idle_cpu(w, "idle-none", false, 0, idle, || tokio::time::sleep(SLEEP));
    let ours = idle_cpu(w, "idle-ours", true, n, idle, || sleep_wheel(SLEEP));
    let tokio = idle_cpu(w, "idle-tokio", false, n, idle, || {
        tokio::time::sleep(SLEEP)
    });
    let rows: Vec<Vec<String>> = [
        ("runtime only, no timers", none),
        ("ours: sleep_wheel", ours),
        ("tokio::time::sleep", tokio),
    ]
    .iter()
    .map(|(name, r)| {
        vec![
            name.to_string(),
            format!("{:.0} ({} ms)", r[0], r[0] as u64 * TICK_MS),
            format!("{:.0} ({} ms)", r[1], r[1] as u64 * TICK_MS),
            if r[2].is_nan() {
                "-".to_string()
            } else {
                format!("{:.0}", r[2])
            },
        ]
    })
    .collect();
    print_table(
        &[
            "system",
            "process CPU ticks",
            "runtime threads CPU ticks",
            "our firing passes (must be 0)",
        ],
        &rows,
    );
    if ours[2] != 0.0 {
        println!("WARNING: our driver woke up {} times while idle\n", ours[2]);
    }
    summary.add(
        "runtime-thread CPU while idle",
        "tokio::time::sleep",
        [ours[1], tokio[1]],
        false,
        |x| format!("{x:.0} ticks"),
    );
    summary.add_text(
        &format!("firing passes over {idle:?} idle (must be 0)"),
        &format!("{:.0}", ours[2]),
        "a 1 ms ticker",
        &format!("{}", idle.as_millis()),
        if ours[2] == 0.0 { "none" } else { "WOKE UP" },
    );
}
