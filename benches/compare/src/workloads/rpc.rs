//! rpc-timeout: timeouts that are registered and cancelled, as around every RPC answered in time.
//!
//! `timeout(5 s, f)` where `f` is pending once (it wakes itself) and then ready, so every
//! timeout registers its timer and cancels it. One task doing N operations, and `--tasks` tasks
//! (8 by default) doing N/8 each, on a multi-thread runtime (`--workers`, 2 by default), one
//! fresh runtime per measurement, warmed up before timing. Systems: no timer at all (`f.await`,
//! the runtime's own cost: the baseline), ours (the free `timeout`, and `Timer::timeout` on a
//! handle to the same default timer, which skips the per-call runtime lookup),
//! `tokio::time::timeout` (and on a runtime with Tokio's alt timer, when built in), pingora's
//! `fast_timeout`, futures-timer (`select(f, Delay)`) and async-io (`select(f, Timer::after)`).
//!
//! "Timer cost per op" is `1/ops - 1/ops_baseline` at 1 task. It is also given as a multiple of
//! one clock read: `tokio::time::Instant::now()` called 20M times in a loop inside a task of the
//! same kind of runtime, ns per call, measured in the same run (a timer that never fires early
//! must read the clock once to compute its deadline; the target is a timer cost of at most two
//! clock reads).
//!
//! A floor runs beside the timers: [`FloorAround`](crate::floor::FloorAround), the least a
//! timer shared between threads does for a timeout it cancels, if the cancel frees the entry
//! at once (a clock read at creation; a lock, a slab insert and a waker clone on the first
//! pending poll; that lock again, the removal and the waker's drop when the future is done; no
//! wheel, no firing, no reference count, no runtime lookup). A ratio against a peer that the
//! floor itself misses in a run cannot be reached by a timer of that kind in that run.
//!
//! A second floor, for the comparison with Tokio's alt timer: the synchronisation a wheel
//! shared between threads takes per register + cancel and a wheel inside a worker does not
//! (the alt timer's lives in the worker's core, out of reach of a crate): two uncontended lock
//! round trips (ours locks the shard to file the entry and again to remove it) and the
//! increment and decrement of the future's reference to its shard. Timed alone in a loop the
//! same way, and added to the alt timer's own timeout (a per-thread `Arc<Mutex>` standing for
//! the shard: cloned at creation, locked on first poll and on drop), where it costs what it
//! costs in a real operation.
//!
//! Two rows show what the alarm costs. While any of its timers is pending, the wheel keeps one
//! Tokio sleep pending (its alarm, at the earliest bucket's time); on a runtime with Tokio's
//! default timer a pending sleep alone changes how the idle worker parks and is woken, and the
//! harness's loop with no timer pays for it: "no timer, one Tokio sleep pending" measures that
//! charge. On a runtime with the alt timer, the alarm is an alt-timer sleep, inside the worker:
//! "ours on the alt timer's runtime" runs ours there, beside the alt timer's own timeout on the
//! same kind of runtime.
//!
//! Two more rows give two peers that pending sleep too: "pingora, one Tokio sleep pending"
//! (pingora's timeouts run on a thread of their own, so its plain row has none; with the sleep
//! it is in the situation of every default runtime with a Tokio timer pending) and "alt timer,
//! one Tokio sleep pending" (there the sleep sits in the wheel of the worker that polled it,
//! and only that worker parks with a timeout: the sleep lands on a worker by chance, so this
//! row is in ours' situation only sometimes). The
//! last column counts how often the runtime's workers parked during the timed operations at 1
//! task (Tokio's `worker_park_count`, all workers, per 1,000 operations): mostly the idle
//! worker, woken each time by the busy one, which pays for the unpark.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::select;
use tokio::time::Instant;
use tokio_timing_wheel::Timer;

use super::{Ctx, Workload};
use crate::floor::FloorAround;
use crate::ops::Loop;
use crate::poll::PendingOnce;
use crate::report::{interleaved, print_table, rate, ratio, target, Reps, Summary};
use crate::rt::{Flavor, ALT_TIMER_MISSING};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "rpc-timeout",
    about: "register + cancel per RPC, 1 and 8 tasks; timer cost in ns and in clock reads",
    run,
};

const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// The target: the timer's cost per operation at 1 task, in clock reads.
const TARGET_CLOCK_READS: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    /// Not a timer: the cost of one `Instant::now()`, in ns (both figures).
    ClockRead,
    /// Not a timer: two uncontended lock round trips and an `Arc` clone and drop, in ns.
    Locking,
    Baseline,
    /// Not a timer: the baseline with one Tokio sleep pending throughout, as ours' alarm is.
    BaselineSleep,
    Ours,
    OursTimer,
    /// Not a timer: the floor (see the module docs).
    Floor,
    Tokio,
    TokioAlt,
    /// The alt timer's timeout plus a shared wheel's locking (see the module docs).
    TokioAltLocked,
    /// Ours' `timeout` on a runtime with the alt timer (its alarm an alt-timer sleep).
    OursOnAlt,
    /// The alt timer's timeout with one Tokio sleep pending throughout, as ours' alarm is.
    TokioAltSleep,
    Pingora,
    /// Pingora's timeout with one Tokio sleep pending throughout, as ours' alarm is.
    PingoraSleep,
    FuturesTimer,
    AsyncIo,
}

const SYSTEMS: [System; 16] = [
    System::ClockRead,
    System::Locking,
    System::Baseline,
    System::BaselineSleep,
    System::Ours,
    System::OursTimer,
    System::Floor,
    System::Tokio,
    System::TokioAlt,
    System::TokioAltLocked,
    System::OursOnAlt,
    System::TokioAltSleep,
    System::Pingora,
    System::PingoraSleep,
    System::FuturesTimer,
    System::AsyncIo,
];

/// The peers every summary row compares ours (the free `timeout`) with.
const PEERS: [System; 5] = [
    System::Tokio,
    System::TokioAlt,
    System::Pingora,
    System::FuturesTimer,
    System::AsyncIo,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::ClockRead => "one tokio::time::Instant::now()",
            System::Locking => "two lock round trips and an Arc clone + drop",
            System::Baseline => "no timer (baseline)",
            System::BaselineSleep => "no timer, one Tokio sleep pending",
            System::Ours => "ours: timeout",
            System::OursTimer => "ours: Timer::timeout",
            System::Floor => "floor: clock read, lock + slab, waker clone",
            System::Tokio => "tokio::time::timeout",
            System::TokioAlt => "tokio::time::timeout (alt timer)",
            System::TokioAltLocked => "alt timer + a shared wheel's locking",
            System::OursOnAlt => "ours: timeout, on the alt timer's runtime",
            System::TokioAltSleep => "alt timer, one Tokio sleep pending",
            System::Pingora => "pingora fast_timeout",
            System::PingoraSleep => "pingora, one Tokio sleep pending",
            System::FuturesTimer => "futures-timer Delay",
            System::AsyncIo => "async-io Timer",
        }
    }

    /// `[ops/s at 1 task, ops/s at many tasks, worker parks per 1,000 ops at 1 task]`; for
    /// `ClockRead` and `Locking`, their ns per call twice and no parks. `None` if this build
    /// cannot measure it.
    fn measure(self, ctx: &Ctx, n: usize, warmup: usize) -> Option<[f64; 3]> {
        if self == System::ClockRead {
            let ns = clock_read_ns(ctx.workers, n * 20);
            return Some([ns, ns, f64::NAN]);
        }
        if self == System::Locking {
            let ns = locking_ns(ctx.workers, n * 20);
            return Some([ns, ns, f64::NAN]);
        }
        let flavor = match self {
            System::TokioAlt
            | System::TokioAltLocked
            | System::OursOnAlt
            | System::TokioAltSleep => Flavor::MultiThreadAltTimer,
            _ => Flavor::MultiThread,
        };
        let at = |tasks| -> Option<(f64, f64)> {
            let l = Loop {
                flavor,
                workers: ctx.workers,
                tasks,
                n,
                warmup,
                spinners: 0,
            };
            let inner = PendingOnce::default;
            match self {
                System::ClockRead | System::Locking => unreachable!("measured above"),
                System::Baseline => l.run_counting_parks(inner, || |f| f),
                System::BaselineSleep => l.run_counting_parks(inner, || {
                    pending_sleep();
                    |f| f
                }),
                System::Ours | System::OursOnAlt => {
                    l.run_counting_parks(inner, || |f| tokio_timing_wheel::timeout(RPC_TIMEOUT, f))
                }
                // The same default timer, held as a handle: no runtime lookup per operation.
                System::OursTimer => l.run_counting_parks(inner, || {
                    let timer = Timer::current();
                    move |f| timer.timeout(RPC_TIMEOUT, f)
                }),
                System::Floor => {
                    l.run_counting_parks(inner, || |f| FloorAround::new(RPC_TIMEOUT, f))
                }
                System::Tokio | System::TokioAlt => {
                    l.run_counting_parks(inner, || |f| tokio::time::timeout(RPC_TIMEOUT, f))
                }
                System::TokioAltSleep => l.run_counting_parks(inner, || {
                    pending_sleep();
                    |f| tokio::time::timeout(RPC_TIMEOUT, f)
                }),
                System::TokioAltLocked => l.run_counting_parks(inner, || {
                    |f| {
                        let shard = SHARD.with(Arc::clone);
                        async move {
                            *shard.lock().unwrap() += 1; // "file" the entry
                            let _removed = Removed(shard);
                            tokio::time::timeout(RPC_TIMEOUT, f).await
                        }
                    }
                }),
                System::Pingora => l.run_counting_parks(inner, || {
                    |f| pingora_timeout::fast_timeout::fast_timeout(RPC_TIMEOUT, f)
                }),
                System::PingoraSleep => l.run_counting_parks(inner, || {
                    pending_sleep();
                    |f| pingora_timeout::fast_timeout::fast_timeout(RPC_TIMEOUT, f)
                }),
                System::FuturesTimer => l.run_counting_parks(inner, || {
                    |f| select(f, futures_timer::Delay::new(RPC_TIMEOUT))
                }),
                System::AsyncIo => l.run_counting_parks(inner, || {
                    |f| select(f, async_io::Timer::after(RPC_TIMEOUT))
                }),
            }
        };
        let (one, parks) = at(1)?;
        let (many, _) = at(ctx.tasks)?;
        Some([one, many, parks])
    }
}

/// Spawns one Tokio sleep that stays pending through the run: far beyond it, as the alarm for
/// the wheel's 5 s timeouts is.
fn pending_sleep() {
    tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
}

thread_local! {
    /// Stands for this thread's shard in `TokioAltLocked`.
    static SHARD: Arc<Mutex<u64>> = Arc::new(Mutex::new(0));
}

/// Drops with the `TokioAltLocked` future: "removes" its entry (a lock round trip), then lets
/// go of the shard (a reference-count decrement).
struct Removed(Arc<Mutex<u64>>);

impl Drop for Removed {
    fn drop(&mut self) {
        *self.0.lock().unwrap() -= 1;
    }
}

/// ns per call of `f`: `n` calls in a loop (after `n / 10` to warm up), in a task of a fresh
/// runtime.
fn ns_per_call(workers: usize, n: usize, name: &str, f: impl Fn() + Send + 'static) -> f64 {
    let rt = Flavor::MultiThread.runtime(workers, name);
    let ns = rt.block_on(async move {
        tokio::spawn(async move {
            for _ in 0..n / 10 {
                f();
            }
            let start = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .await
        .expect("a timed loop panicked")
    });
    drop(rt);
    ns
}

/// ns per `tokio::time::Instant::now()`.
fn clock_read_ns(workers: usize, n: usize) -> f64 {
    ns_per_call(workers, n, "clock-read", || {
        black_box(Instant::now());
    })
}

/// ns per two uncontended lock round trips and an `Arc` clone + drop.
fn locking_ns(workers: usize, n: usize) -> f64 {
    let shard = Arc::new(Mutex::new(0u64));
    ns_per_call(workers, n, "locking", move || {
        let r = black_box(shard.clone());
        *r.lock().unwrap() += 1;
        *r.lock().unwrap() -= 1;
        drop(black_box(r));
    })
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(1_000_000, 40_000);
    let warmup = ctx.size(50_000, 4_000);
    let tasks = ctx.tasks;
    println!(
        "N = {n} timeouts of 5 s, each registered and cancelled (warm-up {warmup} ops; \
         {} runtime); the clock read: {} calls in a loop.\n",
        Flavor::MultiThread.label(ctx.workers),
        n * 20
    );
    let reps = interleaved(ctx.reps, &SYSTEMS, |sys| sys.measure(ctx, n, warmup));
    let of = |sys: System| reps[SYSTEMS.iter().position(|&s| s == sys).unwrap()].as_ref();
    let measured = |sys: System| of(sys).expect("every build measures it");
    let clock_ns = measured(System::ClockRead).median(0);
    let baseline = measured(System::Baseline).median(0);
    let ours = measured(System::Ours).medians();
    // The two rates (1 task, many tasks), without the parks, for the summary rows.
    let rates = |r: &Reps<3>| -> [f64; 2] {
        let m = r.medians();
        [m[0], m[1]]
    };
    let ours_rates = [ours[0], ours[1]];
    // ns per operation over the baseline's; `cost` clamps at 0 for the timers, while the
    // pending-sleep row stays signed (the loop may run faster with it, within the spread).
    let signed_cost = |ops: f64| 1e9 / ops - 1e9 / baseline;
    let cost = |ops: f64| signed_cost(ops).max(0.0);

    let rows: Vec<Vec<String>> = SYSTEMS[2..]
        .iter()
        .map(|&sys| {
            let Some(r) = of(sys) else {
                return crate::report::unmeasured_row(sys.name(), 9, ALT_TIMER_MISSING);
            };
            let o = r.medians();
            let vs = |higher: bool, a: f64, b: f64| match sys {
                System::Ours | System::Baseline | System::BaselineSleep => "-".to_string(),
                _ => ratio(a, b, higher),
            };
            let (timer_cost, reads) = if sys == System::Baseline {
                ("0 (reference)".to_string(), "-".to_string())
            } else if sys == System::BaselineSleep {
                let c = signed_cost(o[0]);
                (format!("{c:.0}"), format!("{:.1}", c / clock_ns))
            } else {
                let c = cost(o[0]);
                (format!("{c:.0}"), format!("{:.1}", c / clock_ns))
            };
            vec![
                sys.name().to_string(),
                r.shown(0, rate),
                vs(true, ours[0], o[0]),
                r.shown(1, rate),
                vs(true, ours[1], o[1]),
                timer_cost,
                reads,
                vs(false, cost(ours[0]), cost(o[0])),
                r.shown(2, |x| format!("{x:.1}")),
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
            "in clock reads",
            "ours vs it",
            "worker parks per 1k ops (1 task)",
        ],
        &rows,
    );
    let ours_cost = cost(ours[0]);
    let ours_reads = ours_cost / clock_ns;
    println!(
        "One `tokio::time::Instant::now()` inside the runtime: {} ns. Timer cost per op at 1 \
         task, ours (`timeout`): {ours_cost:.0} ns = {ours_reads:.1} clock reads (target: at \
         most {TARGET_CLOCK_READS}).\n",
        measured(System::ClockRead).shown(0, |x| format!("{x:.1}")),
    );
    let locking_ns = measured(System::Locking).median(0);
    let alt_gap = of(System::TokioAlt).map(|r| ours_cost - cost(r.medians()[0]));
    println!(
        "Two uncontended lock round trips and an `Arc` clone + drop, the synchronisation a \
         shared wheel takes per register + cancel and a wheel inside a worker does not: {} ns.{}\n",
        measured(System::Locking).shown(0, |x| format!("{x:.1}")),
        match alt_gap {
            Some(g) => format!(" Ours' timer cost over the alt timer's at 1 task: {g:.0} ns."),
            None => String::new(),
        }
    );

    let ns = |x: f64| format!("{x:.0} ns");
    let both = format!("ops/s, 1 task / {tasks} tasks");
    for peer in PEERS {
        let Some(p) = of(peer) else {
            summary.add_unmeasured(&both, peer.name(), ALT_TIMER_MISSING);
            continue;
        };
        let p = rates(p);
        summary.add_all(&both, peer.name(), &ours_rates, &p, true, rate);
        summary.add(
            "timer cost/op, 1 task",
            peer.name(),
            [ours_cost, cost(p[0])],
            false,
            ns,
        );
    }
    let handle = rates(measured(System::OursTimer));
    let tokio = rates(measured(System::Tokio));
    let floor = rates(measured(System::Floor));
    summary.add_all(
        &format!("the floor's {both} (not a timer: the most one freeing at cancel can reach)"),
        System::Tokio.name(),
        &floor,
        &tokio,
        true,
        rate,
    );
    summary.add_all(
        &format!("{both} (ours: Timer::timeout on a handle)"),
        System::Tokio.name(),
        &handle,
        &tokio,
        true,
        rate,
    );
    match of(System::TokioAltLocked) {
        Some(p) => summary.add_all(
            &both,
            System::TokioAltLocked.name(),
            &ours_rates,
            &rates(p),
            true,
            rate,
        ),
        None => summary.add_unmeasured(&both, System::TokioAltLocked.name(), ALT_TIMER_MISSING),
    }
    match (of(System::OursOnAlt), of(System::TokioAlt)) {
        (Some(o), Some(p)) => summary.add_all(
            &format!("{both}, ours on the alt timer's runtime"),
            System::TokioAlt.name(),
            &rates(o),
            &rates(p),
            true,
            rate,
        ),
        _ => summary.add_unmeasured(
            &format!("{both}, ours on the alt timer's runtime"),
            System::TokioAlt.name(),
            ALT_TIMER_MISSING,
        ),
    }
    for peer in [System::TokioAltSleep, System::PingoraSleep] {
        match of(peer) {
            Some(p) => summary.add_all(
                &format!("{both}, each beside one pending Tokio sleep (ours': its alarm)"),
                peer.name(),
                &ours_rates,
                &rates(p),
                true,
                rate,
            ),
            None => summary.add_unmeasured(
                &format!("{both}, each beside one pending Tokio sleep (ours': its alarm)"),
                peer.name(),
                ALT_TIMER_MISSING,
            ),
        }
    }
    // What one pending Tokio sleep (ours' alarm) adds to the harness's operation at 1 task.
    let alarm_ns = signed_cost(measured(System::BaselineSleep).median(0));
    println!(
        "One Tokio sleep pending beside the loop (ours keeps one, its alarm, while it has \
         timers): {alarm_ns:+.0} ns per operation at 1 task (negative: faster, within the \
         spread); the workers parked {:.1} times per 1,000 operations with it, {:.1} without.\n",
        measured(System::BaselineSleep).median(2),
        measured(System::Baseline).median(2),
    );
    if let Some(gap) = alt_gap {
        summary.add_text(
            "timer cost/op over the alt timer's, 1 task, against one pending Tokio sleep's charge",
            &format!("{gap:.0} ns"),
            System::BaselineSleep.name(),
            &format!("{alarm_ns:.0} ns"),
            &if gap <= 0.0 {
                "ours the cheaper".to_string()
            } else if gap <= alarm_ns {
                "within the alarm's charge".to_string()
            } else {
                format!("{:.0} ns beyond it", gap - alarm_ns.max(0.0))
            },
        );
        summary.add_text(
            "timer cost/op over the alt timer's, 1 task, against the locking floor",
            &format!("{gap:.0} ns"),
            System::Locking.name(),
            &format!("{locking_ns:.1} ns"),
            &if gap <= locking_ns {
                "within the floor".to_string()
            } else {
                format!("{:.1} ns beyond the floor", gap - locking_ns)
            },
        );
    }
    summary.add_text(
        "timer cost/op, 1 task, in clock reads",
        &format!("{ours_cost:.0} ns = {ours_reads:.1} reads"),
        System::ClockRead.name(),
        &format!("{clock_ns:.1} ns"),
        &target(
            ours_reads <= TARGET_CLOCK_READS,
            &format!("<= {TARGET_CLOCK_READS}"),
        ),
    );
}
