//! lone: sleeps one at a time, each alone in its timer: how often the runtime wakes for one.
//!
//! On a `current_thread` runtime, one task sleeps `n` times in turn for each of 3.3 ms, 15.7 ms
//! and 100.3 ms (the last past the default tick's first level, 64 ms), starting each at another
//! phase against the millisecond grid (a spin of 0-970 µs first), and records how late it woke
//! (`Instant::now() - deadline`). Figures per sleep: the runtime thread's parks (Tokio's
//! `worker_park_count`: an idle runtime parks once after each time it is woken, so this grows
//! with the wakeups a sleep costs, a timer's own driver wakeups included; a sleep that needs
//! one timer firing reads about 2: read it against Tokio's row), our firing passes,
//! lateness p50 and max, early wakes (must be 0). Systems: ours on the runtime's default timer
//! (1 ms tick), ours on a timer with a 10 ms tick, and `tokio::time::sleep_until`.

use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{sleep_wheel_until, Timer};

use super::{Ctx, Workload};
use crate::lateness::{lateness_stats, signed_ns};
use crate::report::{interleaved, print_table, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "lone",
    about: "sleeps of 3.3, 15.7 and 100.3 ms one at a time: wakeups (parks) per sleep, lateness",
    run,
};

const DURATIONS: [Duration; 3] = [
    Duration::from_micros(3_300),
    Duration::from_micros(15_700),
    Duration::from_micros(100_300),
];

/// The coarse tick of the second system.
const COARSE: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    OursCoarse,
    Tokio,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: sleep_wheel_until (1 ms tick)",
            System::OursCoarse => "ours: Timer::sleep_until, 10 ms tick",
            System::Tokio => "tokio::time::sleep_until",
        }
    }
}

const SYSTEMS: [System; 3] = [System::Ours, System::OursCoarse, System::Tokio];

/// Spins for `d` (a phase against the millisecond grid, without a timer).
fn spin(d: Duration) {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// `n` lone sleeps of `dur` on `sys`, on a fresh `current_thread` runtime: `[parks per sleep,
/// our passes per sleep (NaN for Tokio), lateness p50 µs, max µs, early wakes]`.
fn measure(sys: System, dur: Duration, n: usize) -> [f64; 5] {
    let rt = Flavor::CurrentThread.runtime(1, "lone-bench");
    let metrics = rt.metrics();
    rt.block_on(async move {
        let timer = match sys {
            System::Ours => Some(Timer::current()),
            System::OursCoarse => Some(Timer::builder().tick(COARSE).build().unwrap()),
            System::Tokio => None,
        };
        let timer = &timer;
        let sleep_until = |deadline: Instant| async move {
            match (sys, timer) {
                (System::OursCoarse, Some(t)) => t.sleep_until(deadline).await,
                (System::Ours, _) => sleep_wheel_until(deadline).await,
                _ => tokio::time::sleep_until(deadline).await,
            }
        };
        // A first sleep, not counted: the alarm's allocation, the first registration.
        sleep_until(Instant::now() + Duration::from_millis(1)).await;
        let passes = || {
            timer
                .as_ref()
                .map_or(f64::NAN, |t| t.metrics().passes as f64)
        };
        let (parks0, passes0) = (metrics.worker_park_count(0), passes());
        let mut late = Vec::with_capacity(n);
        for i in 0..n {
            spin(Duration::from_micros(97 * (i % 11) as u64));
            let deadline = Instant::now() + dur;
            sleep_until(deadline).await;
            late.push(signed_ns(Instant::now(), deadline));
        }
        let parks = (metrics.worker_park_count(0) - parks0) as f64;
        let [p50, _, max, early] = lateness_stats(&late);
        [
            parks / n as f64,
            (passes() - passes0) / n as f64,
            p50,
            max,
            early,
        ]
    })
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(20, 3);
    println!(
        "One task sleeps {n} times in turn for each duration, each sleep alone (current_thread \
         runtime; phases 0-970 µs off the grid). Parks: the runtime thread's, per sleep.\n"
    );
    let mut rows = Vec::new();
    let mut parks = Vec::new();
    for dur in DURATIONS {
        let reps = interleaved(ctx.reps, &SYSTEMS, |&sys| Some(measure(sys, dur, n)));
        let figures: Vec<[f64; 5]> = reps
            .iter()
            .map(|r| {
                r.as_ref()
                    .expect("every build has these")
                    .medians_but_max(&[3, 4])
            })
            .collect();
        for (sys, f) in SYSTEMS.iter().zip(&figures) {
            rows.push(vec![
                format!("{dur:?}"),
                sys.name().to_string(),
                format!("{:.2}", f[0]),
                if f[1].is_nan() {
                    "-".to_string()
                } else {
                    format!("{:.2}", f[1])
                },
                format!("{:.0}", f[2]),
                format!("{:.0}", f[3]),
                format!("{:.0}", f[4]),
            ]);
        }
        parks.push(figures);
    }
    print_table(
        &[
            "sleep",
            "system",
            "parks per sleep",
            "our passes per sleep",
            "lateness p50 µs",
            "max µs",
            "early wakes",
        ],
        &rows,
    );
    for (dur, f) in DURATIONS.iter().zip(&parks) {
        for (ours, tick) in [(0, ""), (1, ", ours on a 10 ms tick")] {
            summary.add(
                &format!("wakeups (parks) per lone {dur:?} sleep{tick}"),
                "tokio::time::sleep",
                [f[ours][0], f[2][0]],
                false,
                |x| format!("{x:.2}"),
            );
        }
    }
    let early: f64 = parks.iter().flatten().map(|f| f[4]).sum();
    if early > 0.0 {
        println!("WARNING: {early} early wakes\n");
    }
}
