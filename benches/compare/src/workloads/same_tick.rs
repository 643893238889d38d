//! same-tick: a million sleeps due at one instant, so in one tick of every timer: when the last
//! one wakes, and how long a Tokio 1 ms ticker running beside them stalls.
//!
//! A multi-thread runtime (`--workers`, 2 by default); N sleepers (1M and 300k), one spawned
//! task each, all with the same deadline, all registered before it (the lead is 300 ms plus
//! twice the time registering them takes, timed on a tenth of them just before); once all have
//! registered, a task starts ticking a `tokio::time::interval` of 1 ms (missed ticks delayed)
//! and records the longest gap between two of its ticks until the last sleeper has woken.
//! Every sleep is polled with a waker of the sleeper's own that records when the timer fired
//! (woke it) before waking the task; the task records when it ran (the timer's delay plus the
//! wait of the woken task for a worker, as in `fire-load`). Firing a million timers at once
//! is work done inside the runtime's timer processing, and it holds up Tokio's own timers (the
//! ticker) for as long as it takes.
//!
//! Systems, each in its own fresh runtime, repetitions interleaved in one process: ours
//! (`sleep_wheel_until`), `tokio::time::sleep_until`, and, in a build with it, Tokio's alt
//! timer. Figures: the last fire and the last task wake after the deadline, the ticker's
//! longest gap (1 ms when nothing stalls it), in ms; medians of the repetitions.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Ctx, Workload};
use crate::lateness::lead_for;
use crate::report::{interleaved, print_table, ratios, unmeasured_row, Summary};
use crate::rt::{run_task, Flavor, ALT_TIMER_MISSING};
use crate::sleep_systems::{MakeSleep, SleepBench, SleepSystem};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "same-tick",
    about: "1M and 300k sleeps due at one instant: last fire and wake, a Tokio 1 ms ticker's stall",
    run,
};

const SYSTEMS: [SleepSystem; 3] = [SleepSystem::Ours, SleepSystem::Tokio, SleepSystem::TokioAlt];

/// The ticker's period.
const TICK: Duration = Duration::from_millis(1);

/// What the sleepers of one run record.
#[derive(Debug)]
struct Shared {
    deadline: Instant,
    /// The latest timer fire (a sleep's waker woken) and task wake, in ns after the deadline.
    last_fire: AtomicU64,
    last_wake: AtomicU64,
    early: AtomicUsize,
    registered: AtomicUsize,
    /// When the last sleeper registered, in ns after the deadline (0: before it).
    registered_late: AtomicU64,
    all_registered: Notify,
    done: AtomicUsize,
    all_done: Notify,
}

impl Shared {
    fn after_deadline(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.deadline)
            .as_nanos() as u64
    }
}

/// The waker a sleep is polled with: records when the timer fires, then wakes the task.
struct Recorder {
    task: Waker,
    shared: Arc<Shared>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared
            .last_fire
            .fetch_max(self.shared.after_deadline(), Relaxed);
        self.task.wake_by_ref();
    }
}

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
struct Run {
    workers: usize,
    sleeps: usize,
    base_lead: Duration,
}

impl SleepBench for Run {
    /// `[last fire, last wake, ticker's longest gap (ms), early wakes, registered after the
    /// deadline (1 or 0)]`.
    type Output = [f64; 5];

    fn run<M: MakeSleep>(&self, flavor: Flavor, make: M) -> Option<[f64; 5]> {
        let rt = flavor.build(self.workers, "same-tick")?;
        let Run {
            sleeps: n,
            base_lead,
            ..
        } = *self;
        Some(run_task(rt, async move {
            let lead = lead_for(n, make, base_lead).await;
            let shared = Arc::new(Shared {
                deadline: Instant::now() + lead,
                last_fire: AtomicU64::new(0),
                last_wake: AtomicU64::new(0),
                early: AtomicUsize::new(0),
                registered: AtomicUsize::new(0),
                registered_late: AtomicU64::new(0),
                all_registered: Notify::new(),
                done: AtomicUsize::new(0),
                all_done: Notify::new(),
            });
            for _ in 0..n {
                tokio::spawn(sleeper(shared.clone(), make, n));
            }
            while shared.registered.load(Acquire) < n {
                shared.all_registered.notified().await;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let ticker = tokio::spawn(ticker(stop.clone()));
            while shared.done.load(Acquire) < n {
                shared.all_done.notified().await;
            }
            stop.store(true, Relaxed);
            let longest = ticker.await.expect("the ticker panicked");
            let ms = |ns: &AtomicU64| ns.load(Relaxed) as f64 / 1e6;
            [
                ms(&shared.last_fire),
                ms(&shared.last_wake),
                longest.as_secs_f64() * 1e3,
                shared.early.load(Relaxed) as f64,
                f64::from(u8::from(shared.registered_late.load(Relaxed) > 0)),
            ]
        }))
    }
}

/// Registers a sleep until the shared deadline, polled with a [`Recorder`], and records when
/// it fires and when this task runs again.
async fn sleeper<M: MakeSleep>(shared: Arc<Shared>, make: M, n: usize) {
    let mut sleep = pin!(make(shared.deadline));
    let mut recorder: Option<Waker> = None;
    let mut polled = false;
    poll_fn(|cx| {
        let waker = recorder.get_or_insert_with(|| {
            Waker::from(Arc::new(Recorder {
                task: cx.waker().clone(),
                shared: shared.clone(),
            }))
        });
        let poll = sleep.as_mut().poll(&mut Context::from_waker(waker));
        if !std::mem::replace(&mut polled, true) && shared.registered.fetch_add(1, AcqRel) + 1 == n
        {
            shared
                .registered_late
                .store(shared.after_deadline(), Relaxed);
            shared.all_registered.notify_one();
        }
        poll
    })
    .await;
    if Instant::now() < shared.deadline {
        shared.early.fetch_add(1, Relaxed);
    }
    shared.last_wake.fetch_max(shared.after_deadline(), Relaxed);
    if shared.done.fetch_add(1, AcqRel) + 1 == n {
        shared.all_done.notify_one();
    }
}

/// Ticks a 1 ms interval until `stop`: the longest gap between two ticks.
async fn ticker(stop: Arc<AtomicBool>) -> Duration {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval.tick().await;
    let mut last = Instant::now();
    let mut longest = Duration::ZERO;
    while !stop.load(Relaxed) {
        interval.tick().await;
        let now = Instant::now();
        longest = longest.max(now - last);
        last = now;
    }
    longest
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let sizes: &[usize] = ctx.size(&[1_000_000, 300_000], &[20_000]);
    let base_lead = ctx.size(Duration::from_millis(300), Duration::from_millis(30));
    println!(
        "N sleepers (N in {sizes:?}) due at one instant on a {} runtime, all registered first; \
         a `tokio::time::interval` of {TICK:?} ticks beside them from then until the last \
         wakes. In ms after the deadline: the last timer fire (its waker woken) and the last \
         task wake (the woken task running); the ticker's longest gap between two ticks (in \
         ms; {TICK:?} when nothing stalls it); medians of the repetitions, early wakes from the \
         worst one.\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let ms = |x: f64| format!("{x:.1}");
    let mut rows = Vec::new();
    let mut late_registration = false;
    let mut early = 0.0;
    for &sleeps in sizes {
        let run = Run {
            workers: ctx.workers,
            sleeps,
            base_lead,
        };
        let reps = interleaved(ctx.reps, &SYSTEMS, |sys| {
            sys.measure(Flavor::MultiThread, &run)
        });
        let results: Vec<Option<[f64; 5]>> = reps
            .iter()
            .map(|r| r.as_ref().map(|r| r.medians_but_max(&[3, 4])))
            .collect();
        let ours = results[0].expect("ours is always measured");
        for (sys, r) in SYSTEMS.iter().zip(&results) {
            let metric = format!("{sleeps} due at once: last fire / wake / ticker's longest gap");
            let Some(r) = r else {
                let mut row = vec![sleeps.to_string()];
                row.extend(unmeasured_row(sys.name(), 6, ALT_TIMER_MISSING));
                rows.push(row);
                summary.add_unmeasured(&metric, sys.name(), ALT_TIMER_MISSING);
                continue;
            };
            late_registration |= r[4] > 0.0;
            early += r[3];
            let pair = |x: &[f64; 5]| [x[0], x[1], x[2]];
            let vs = if *sys == SleepSystem::Ours {
                "-".to_string()
            } else {
                summary.add_all(&metric, sys.name(), &pair(&ours), &pair(r), false, |x| {
                    format!("{x:.1} ms")
                });
                ratios(&pair(&ours), &pair(r), false)
            };
            rows.push(vec![
                sleeps.to_string(),
                sys.name().to_string(),
                ms(r[0]),
                ms(r[1]),
                ms(r[2]),
                format!("{:.0}", r[3]),
                vs,
            ]);
        }
    }
    print_table(
        &[
            "sleeps",
            "system",
            "last fire ms",
            "last wake ms",
            "ticker's longest gap ms",
            "early wakes",
            "ours vs it (fire / wake / gap)",
        ],
        &rows,
    );
    if late_registration {
        println!("WARNING: in some run the sleepers registered after their deadline\n");
    }
    if early > 0.0 {
        println!("WARNING: early wakes\n");
    }
}
