//! Side-by-side benchmarks of `tokio-timing-wheel` ("ours") against Tokio's own timer and other
//! timer crates, in one process, each system measured back to back.
//!
//! ```sh
//! cargo run --release --example compare                # all, about 1.5 minutes on 2 cores
//! cargo run --release --example compare -- --quick     # tiny sizes, a smoke run (CI): < 20 s
//! cargo run --release --example compare -- --only fire # one workload (names below)
//! ```
//!
//! Every timing is repeated 3 times (interleaving the systems) and the median is printed. Each
//! workload prints a Markdown table, with ratios written as "N x better" or "N x worse" from our
//! side (throughput: ours / peer; costs and latencies: peer / ours), and a summary table ends
//! the run. Sizes are printed at the start. Workloads run in the order 1, 2, 3, 4, 6, 5.
//!
//! Workloads (`--only` name in brackets):
//!
//! 1. **rpc-timeout** \[`rpc-timeout`\]: `timeout(5 s, f)` where `f` is pending once (it wakes
//!    itself) and then ready, so every timeout registers a timer and cancels it. 1 task doing
//!    N operations, and 8 tasks doing N/8 each, on a 2-worker multi-thread runtime, one fresh
//!    runtime per measurement, warmed up before timing. Systems: no timer at all (`f.await`, the
//!    runtime's own cost), the baseline plus one `Instant::now()` per operation (the least any
//!    timer that never fires early pays: it must read the clock to compute the deadline), ours
//!    (the free `timeout`, and `Timer::timeout` on a handle to the same default timer, which
//!    skips the per-call runtime lookup), `tokio::time::timeout`, pingora's `fast_timeout`,
//!    futures-timer (`select(f, Delay)`) and async-io (`select(f, Timer::after)`). "Timer cost per op" is
//!    `1/ops - 1/ops_baseline` at 1 task.
//! 2. **reset churn** \[`reset`\]: 100k idle timeouts of 30 s held in one task, each polled once
//!    (registered), then reset round robin to `now + 30 s` (the clock read once per 1000
//!    resets, the same for every system): ours (`Sleep::reset`), Tokio (`Sleep::reset`) and
//!    tokio-util's `DelayQueue::reset_at`.
//! 3. **fire** \[`fire`\]: 200k spawned tasks each sleeping until `start + lead + i * 2 s / 200k`,
//!    on a 2-worker runtime. The lead is 50 ms plus twice the time registering them all takes,
//!    timed on a tenth of them just before, so that every sleeper is registered before the
//!    first deadline even on a slow or busy machine (the table shows when the last one was, and
//!    warns otherwise). Each records how late it woke (`Instant::now() - deadline`): p50, p99
//!    and max lateness, the delay from the last deadline to the last wake, and the number of
//!    early wakes (must be 0), for ours and Tokio.
//! 4. **memory** \[`memory`\]: 1M pending 10-minute sleeps, each polled once. A counting global
//!    allocator (below) gives the bytes allocated per timer, including the holder: ours in a
//!    `Vec<Sleep>` (inline), Tokio's in a `Vec<Pin<Box<Sleep>>>` (8-byte pointer + the box).
//!    "Timer structures" is what remains after subtracting the holder: the wheel's own share.
//! 5. **idle** \[`idle`\]: (b) real clock: 100k sleeps pending 1 h away, held by a spawned task,
//!    then 10 s of real idle: process CPU time (user + sys, `/proc/self/stat`) and the CPU of the
//!    runtime's own threads, against a runtime with no timer at all; (a) paused clock: one
//!    1-hour sleep on ours: driver wakeups until it fires, and wheel levels. 5a is the only
//!    place this program pauses time (pausing slows every later `Instant::now()`), in its own
//!    current-thread runtime, so the idle workload runs last.
//! 6. **delayed** \[`delayed`\]: 1M delayed tasks, delays spread uniformly over 1 s, every other
//!    one cancelled right after all are created: ours (`spawn_after` + `DelayedTask::cancel`)
//!    against `tokio::spawn(sleep_until + work)` + `JoinHandle::abort`. Wall time from the first
//!    spawn until every task has run or been dropped (it cannot drop below the 1 s spread, so
//!    it says little about cost), the process CPU time over that span (tasks per CPU-second:
//!    the throughput the machine gets), the time taken to issue the 1M tasks, and the peak of
//!    allocated bytes above the start (handles included), on a 2-worker runtime. Tasks whose delay ends
//!    while the others are still being created run before the cancel pass reaches them, so
//!    fewer than half are cancelled; the table gives both counts.
//!
//! The counting allocator adds one relaxed atomic add per allocation and per free to every
//! system (and a `fetch_max` during workload 6 only). pingora's clock thread, once started by
//! workload 1, wakes every 10 ms for the rest of the process; the idle workload therefore also
//! reports the CPU of the runtime's threads alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::future::{poll_fn, Future};
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::select;
use futures::task::noop_waker_ref;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_timing_wheel::{sleep_wheel, sleep_wheel_until, spawn_after, Sleep, Timer};

// ---------------------------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------------------------

/// `System`, counting the bytes currently allocated (as requested by the layouts) and, while
/// `TRACK_PEAK` is set, their peak.
struct CountingAlloc;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static TRACK_PEAK: AtomicBool = AtomicBool::new(false);

impl CountingAlloc {
    fn added(size: usize) {
        let now = ALLOCATED.fetch_add(size, Relaxed) + size;
        if TRACK_PEAK.load(Relaxed) {
            PEAK.fetch_max(now, Relaxed);
        }
    }

    fn removed(size: usize) {
        ALLOCATED.fetch_sub(size, Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        Self::removed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                Self::added(new_size - layout.size());
            } else {
                Self::removed(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocated() -> usize {
    ALLOCATED.load(Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Sizes, options, helpers
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Sizes {
    reps: usize,
    rpc_ops: usize,
    rpc_warmup: usize,
    reset_timers: usize,
    reset_total: usize,
    fire_n: usize,
    fire_spread: Duration,
    mem_n: usize,
    idle_timers: usize,
    idle_for: Duration,
    delayed_n: usize,
    delayed_spread: Duration,
}

impl Sizes {
    fn full() -> Sizes {
        Sizes {
            reps: 3,
            rpc_ops: 1_000_000,
            rpc_warmup: 50_000,
            reset_timers: 100_000,
            reset_total: 5_000_000,
            fire_n: 200_000,
            fire_spread: Duration::from_secs(2),
            mem_n: 1_000_000,
            idle_timers: 100_000,
            idle_for: Duration::from_secs(10),
            delayed_n: 1_000_000,
            delayed_spread: Duration::from_secs(1),
        }
    }

    fn quick() -> Sizes {
        Sizes {
            reps: 3,
            rpc_ops: 40_000,
            rpc_warmup: 4_000,
            reset_timers: 10_000,
            reset_total: 200_000,
            fire_n: 10_000,
            fire_spread: Duration::from_millis(200),
            mem_n: 50_000,
            idle_timers: 10_000,
            idle_for: Duration::from_secs(1),
            delayed_n: 20_000,
            delayed_spread: Duration::from_millis(100),
        }
    }
}

const WORKLOADS: [&str; 6] = ["rpc-timeout", "reset", "fire", "memory", "delayed", "idle"];
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
const RESET_IDLE: Duration = Duration::from_secs(30);
const RESET_BATCH: usize = 1000;
const FIRE_LEAD: Duration = Duration::from_millis(50);
const MEM_SLEEP: Duration = Duration::from_secs(600);
const IDLE_SLEEP: Duration = Duration::from_secs(3600);
/// `/proc` reports CPU time in USER_HZ ticks, 100 per second on Linux.
const TICK_MS: u64 = 10;

fn multi_thread(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("cannot build a multi-thread runtime")
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot build a current-thread runtime")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Half the range of `v`, in percent of its median: how far apart the repetitions were.
fn spread_pct(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    (hi - lo) / 2.0 / median(v.to_vec()) * 100.0
}

/// Runs `f` `reps` times and returns the median of each of its `K` figures.
fn median_of<const K: usize>(reps: usize, mut f: impl FnMut() -> [f64; K]) -> [f64; K] {
    let runs: Vec<[f64; K]> = (0..reps).map(|_| f()).collect();
    std::array::from_fn(|k| median(runs.iter().map(|r| r[k]).collect()))
}

/// `spread * i / n`, the i-th of n points spread uniformly over `spread`.
fn spread_at(spread: Duration, i: usize, n: usize) -> Duration {
    Duration::from_nanos((spread.as_nanos() * i as u128 / n as u128) as u64)
}

/// Polls `fut` once with a no-op waker.
fn poll_noop<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(noop_waker_ref()))
}

/// Polls `fut` once with the current task's waker.
async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// "N x better" / "N x worse", from our side; `higher_is_better` tells which way to divide.
fn ratio(ours: f64, peer: f64, higher_is_better: bool) -> String {
    let r = if higher_is_better {
        ours / peer
    } else {
        peer / ours
    };
    if ours == peer {
        "same".to_string()
    } else if !r.is_finite() || r <= 0.0 {
        "n/a".to_string()
    } else if r >= 1.0 {
        format!("{r:.2}x better")
    } else {
        format!("{:.2}x worse", 1.0 / r)
    }
}

fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(headers.to_vec());
    println!(
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
    println!();
}

/// Rows of the final summary: workload, metric, ours, peer, peer's figure, ours vs peer.
#[derive(Default)]
struct Summary {
    workload: &'static str,
    rows: Vec<Vec<String>>,
}

impl Summary {
    /// Starts the rows of a workload.
    fn workload(&mut self, name: &'static str) {
        self.workload = name;
    }

    fn add(
        &mut self,
        metric: &str,
        peer: &str,
        [ours, theirs]: [f64; 2],
        higher_is_better: bool,
        fmt: impl Fn(f64) -> String,
    ) {
        self.rows.push(vec![
            self.workload.to_string(),
            metric.to_string(),
            fmt(ours),
            peer.to_string(),
            fmt(theirs),
            ratio(ours, theirs, higher_is_better),
        ]);
    }
}

// ---------------------------------------------------------------------------------------------
// 1. rpc-timeout
// ---------------------------------------------------------------------------------------------

/// Pending once (waking itself at once), then ready: an RPC answered on the next poll.
#[derive(Default)]
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RpcSystem {
    Baseline,
    ClockRead,
    Ours,
    OursTimer,
    Tokio,
    Pingora,
    FuturesTimer,
    AsyncIo,
}

const RPC_SYSTEMS: [RpcSystem; 8] = [
    RpcSystem::Baseline,
    RpcSystem::ClockRead,
    RpcSystem::Ours,
    RpcSystem::OursTimer,
    RpcSystem::Tokio,
    RpcSystem::Pingora,
    RpcSystem::FuturesTimer,
    RpcSystem::AsyncIo,
];

impl RpcSystem {
    fn name(self) -> &'static str {
        match self {
            RpcSystem::Baseline => "no timer (baseline)",
            RpcSystem::ClockRead => "no timer, one clock read (floor)",
            RpcSystem::Ours => "ours: timeout",
            RpcSystem::OursTimer => "ours: Timer::timeout",
            RpcSystem::Tokio => "tokio::time::timeout",
            RpcSystem::Pingora => "pingora fast_timeout",
            RpcSystem::FuturesTimer => "futures-timer Delay",
            RpcSystem::AsyncIo => "async-io Timer",
        }
    }

    /// Operations per second of `n` timeouts split over `tasks` tasks, on a fresh runtime.
    fn measure(self, tasks: usize, n: usize, warmup: usize) -> f64 {
        use RpcSystem::*;
        match self {
            Baseline => rpc_timeout_bench(tasks, n, warmup, || |f| f),
            // What any timer that never fires early pays at least: `Instant::now()` once.
            ClockRead => rpc_timeout_bench(tasks, n, warmup, || {
                |f| async move {
                    black_box(tokio::time::Instant::now());
                    f.await
                }
            }),
            Ours => rpc_timeout_bench(tasks, n, warmup, || {
                |f| tokio_timing_wheel::timeout(RPC_TIMEOUT, f)
            }),
            // The same default timer, held as a handle: no runtime lookup per operation.
            OursTimer => rpc_timeout_bench(tasks, n, warmup, || {
                let timer = Timer::current();
                move |f| timer.timeout(RPC_TIMEOUT, f)
            }),
            Tokio => rpc_timeout_bench(tasks, n, warmup, || {
                |f| tokio::time::timeout(RPC_TIMEOUT, f)
            }),
            Pingora => rpc_timeout_bench(tasks, n, warmup, || {
                |f| pingora_timeout::fast_timeout::fast_timeout(RPC_TIMEOUT, f)
            }),
            FuturesTimer => rpc_timeout_bench(tasks, n, warmup, || {
                |f| select(f, futures_timer::Delay::new(RPC_TIMEOUT))
            }),
            AsyncIo => rpc_timeout_bench(tasks, n, warmup, || {
                |f| select(f, async_io::Timer::after(RPC_TIMEOUT))
            }),
        }
    }
}

/// `setup` runs inside the fresh runtime and returns the function that wraps each future.
fn rpc_timeout_bench<S, M, F>(tasks: usize, n: usize, warmup: usize, setup: S) -> f64
where
    S: FnOnce() -> M + Send + 'static,
    M: Fn(PendingOnce) -> F + Clone + Send + 'static,
    F: Future + Send + 'static,
{
    let rt = multi_thread("rpc-bench");
    let elapsed = rt.block_on(async move {
        let make = setup();
        rpc_ops(tasks, warmup, make.clone()).await;
        let start = std::time::Instant::now();
        rpc_ops(tasks, n, make).await;
        start.elapsed()
    });
    drop(rt);
    (n / tasks * tasks) as f64 / elapsed.as_secs_f64()
}

async fn rpc_ops<M, F>(tasks: usize, n: usize, make: M)
where
    M: Fn(PendingOnce) -> F + Clone + Send + 'static,
    F: Future + Send + 'static,
{
    let per_task = n / tasks;
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let make = make.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    black_box(make(PendingOnce::default()).await);
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("a benchmark task panicked");
    }
}

fn run_rpc(sizes: &Sizes, summary: &mut Summary) {
    println!(
        "## 1. rpc-timeout: N = {} timeouts of 5 s, each registered and cancelled \
         (warm-up {} ops; 2-worker runtime)\n",
        sizes.rpc_ops, sizes.rpc_warmup
    );
    let configs = [1usize, 8];
    // results[system][config]: one figure per repetition, systems interleaved.
    let mut runs = vec![vec![Vec::new(); configs.len()]; RPC_SYSTEMS.len()];
    for _ in 0..sizes.reps {
        for (s, sys) in RPC_SYSTEMS.iter().enumerate() {
            for (c, &tasks) in configs.iter().enumerate() {
                runs[s][c].push(sys.measure(tasks, sizes.rpc_ops, sizes.rpc_warmup));
            }
        }
    }
    let ops: Vec<Vec<f64>> = runs
        .iter()
        .map(|per_config| per_config.iter().map(|v| median(v.clone())).collect())
        .collect();
    // "2.50 M ±4%": the median and half the range of the repetitions.
    let shown =
        |s: usize, c: usize| format!("{} ±{:.0}%", rate(ops[s][c]), spread_pct(&runs[s][c]));
    let at = |sys: RpcSystem| &ops[RPC_SYSTEMS.iter().position(|&s| s == sys).unwrap()];
    let ours = at(RpcSystem::Ours).clone();
    let baseline = at(RpcSystem::Baseline)[0];
    let cost = |x: f64| (1e9 / x - 1e9 / baseline).max(0.0);
    let rows: Vec<Vec<String>> = RPC_SYSTEMS
        .iter()
        .zip(&ops)
        .enumerate()
        .map(|(s, (&sys, o))| {
            let vs = |higher: bool, a: f64, b: f64| {
                if matches!(
                    sys,
                    RpcSystem::Ours | RpcSystem::Baseline | RpcSystem::ClockRead
                ) {
                    "-".to_string()
                } else {
                    ratio(a, b, higher)
                }
            };
            vec![
                sys.name().to_string(),
                shown(s, 0),
                vs(true, ours[0], o[0]),
                shown(s, 1),
                vs(true, ours[1], o[1]),
                if sys == RpcSystem::Baseline {
                    "0 (reference)".to_string()
                } else {
                    format!("{:.0}", cost(o[0]))
                },
                vs(false, cost(ours[0]), cost(o[0])),
            ]
        })
        .collect();
    print_table(
        &[
            "system",
            "1 task ops/s",
            "ours vs it",
            "8 tasks ops/s",
            "ours vs it",
            "timer cost ns/op (1 task)",
            "ours vs it",
        ],
        &rows,
    );
    summary.workload("1 rpc-timeout");
    let ns = |x: f64| format!("{x:.0} ns");
    for (&sys, o) in RPC_SYSTEMS.iter().zip(&ops) {
        if matches!(
            sys,
            RpcSystem::Ours | RpcSystem::OursTimer | RpcSystem::Baseline | RpcSystem::ClockRead
        ) {
            continue;
        }
        summary.add("ops/s, 1 task", sys.name(), [ours[0], o[0]], true, rate);
        summary.add("ops/s, 8 tasks", sys.name(), [ours[1], o[1]], true, rate);
        let costs = [cost(ours[0]), cost(o[0])];
        summary.add("timer cost/op, 1 task", sys.name(), costs, false, ns);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. reset churn
// ---------------------------------------------------------------------------------------------

/// Resets per second: `setup` builds `n` registered timers due at the given instant, then
/// `reset(state, i, deadline)` moves timer `i` (round robin), the deadline read once per batch.
fn reset_bench<S>(
    n: usize,
    total: usize,
    setup: impl FnOnce(usize, Instant) -> S,
    mut reset: impl FnMut(&mut S, usize, Instant),
) -> f64 {
    let rt = current_thread();
    rt.block_on(async move {
        let mut state = setup(n, Instant::now() + RESET_IDLE);
        let batches = total / RESET_BATCH;
        let mut i = 0;
        let start = std::time::Instant::now();
        for _ in 0..batches {
            let deadline = Instant::now() + RESET_IDLE;
            for _ in 0..RESET_BATCH {
                reset(&mut state, i, deadline);
                i += 1;
                if i == n {
                    i = 0;
                }
            }
        }
        let elapsed = start.elapsed();
        drop(state);
        (batches * RESET_BATCH) as f64 / elapsed.as_secs_f64()
    })
}

#[derive(Debug, Clone, Copy)]
enum ResetSystem {
    Ours,
    Tokio,
    DelayQueue,
}

impl ResetSystem {
    fn name(self) -> &'static str {
        match self {
            ResetSystem::Ours => "ours: Sleep::reset",
            ResetSystem::Tokio => "tokio Sleep::reset",
            ResetSystem::DelayQueue => "tokio-util DelayQueue::reset_at",
        }
    }

    fn measure(self, n: usize, total: usize) -> f64 {
        match self {
            ResetSystem::Ours => reset_bench(
                n,
                total,
                |n, at| {
                    (0..n)
                        .map(|_| {
                            let mut s = sleep_wheel_until(at);
                            assert!(poll_noop(Pin::new(&mut s)).is_pending());
                            s
                        })
                        .collect::<Vec<Sleep>>()
                },
                |v, i, at| Pin::new(&mut v[i]).reset(at),
            ),
            ResetSystem::Tokio => reset_bench(
                n,
                total,
                |n, at| {
                    (0..n)
                        .map(|_| {
                            let mut s = Box::pin(tokio::time::sleep_until(at));
                            assert!(poll_noop(s.as_mut()).is_pending());
                            s
                        })
                        .collect::<Vec<_>>()
                },
                |v, i, at| v[i].as_mut().reset(at),
            ),
            ResetSystem::DelayQueue => reset_bench(
                n,
                total,
                |n, at| {
                    let mut q = tokio_util::time::DelayQueue::with_capacity(n);
                    let keys: Vec<_> = (0..n).map(|i| q.insert_at(i, at)).collect();
                    let mut cx = Context::from_waker(noop_waker_ref());
                    assert!(q.poll_expired(&mut cx).is_pending());
                    (q, keys)
                },
                |(q, keys), i, at| q.reset_at(&keys[i], at),
            ),
        }
    }
}

fn run_reset(sizes: &Sizes, summary: &mut Summary) {
    println!(
        "## 2. reset churn: {} registered timeouts of 30 s, {} resets to now + 30 s round robin \
         (clock read once per {} resets; current-thread runtime)\n",
        sizes.reset_timers, sizes.reset_total, RESET_BATCH
    );
    let systems = [
        ResetSystem::Ours,
        ResetSystem::Tokio,
        ResetSystem::DelayQueue,
    ];
    let per_sec = median_of(sizes.reps, || {
        systems.map(|s| s.measure(sizes.reset_timers, sizes.reset_total))
    });
    let ours = per_sec[0];
    let rows: Vec<Vec<String>> = systems
        .iter()
        .zip(per_sec)
        .enumerate()
        .map(|(k, (sys, r))| {
            vec![
                sys.name().to_string(),
                rate(r),
                format!("{:.1}", 1e9 / r),
                if k == 0 {
                    "-".to_string()
                } else {
                    ratio(ours, r, true)
                },
            ]
        })
        .collect();
    print_table(&["system", "resets/s", "ns/reset", "ours vs it"], &rows);
    summary.workload("2 reset");
    for (sys, r) in systems.iter().zip(per_sec).skip(1) {
        summary.add("resets/s", sys.name(), [ours, r], true, rate);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. fire
// ---------------------------------------------------------------------------------------------

/// What the sleepers of one fire run record.
struct FireProbe {
    start: Instant,
    n: usize,
    /// Per sleeper: wake time minus deadline, in ns (negative: early).
    lateness: Vec<AtomicI64>,
    registered: AtomicUsize,
    /// When the last sleeper registered, in ns after `start`.
    registered_at: AtomicU64,
    /// The latest wake, in ns after `start`.
    last_wake: AtomicU64,
    done: AtomicUsize,
    all_done: Notify,
}

impl FireProbe {
    fn since_start(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }
}

fn signed_ns(a: Instant, b: Instant) -> i64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_nanos() as i64,
        None => -((b - a).as_nanos() as i64),
    }
}

/// Spawns `n` tasks that each register a 1-hour sleep made by `make` and drop it, and waits
/// for them: the time it takes to register that many sleepers here and now.
async fn registration_time<M, S>(n: usize, make: M) -> Duration
where
    M: Fn(Instant) -> S + Copy + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let start = std::time::Instant::now();
    let far = Instant::now() + IDLE_SLEEP;
    let handles: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                assert!(poll_once(pin!(make(far))).await.is_pending());
            })
        })
        .collect();
    for h in handles {
        h.await.expect("a calibration task panicked");
    }
    start.elapsed()
}

/// Returns `[p50 µs, p99 µs, max µs, last deadline -> last wake µs, early wakes, all registered
/// at (ms after start), first deadline (ms after start)]`.
fn fire_bench<M, S>(n: usize, spread: Duration, make: M) -> [f64; 7]
where
    M: Fn(Instant) -> S + Copy + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let rt = multi_thread("fire-bench");
    let (probe, lead) = rt.block_on(async move {
        tokio::spawn(async move {
            // The first deadline comes FIRE_LEAD after the time registering them all should
            // take (twice a tenth of them, timed now), so that every sleeper is registered
            // before it even on a slow or busy machine.
            let lead = FIRE_LEAD + registration_time(n / 10, make).await * 20;
            let start = Instant::now();
            let probe = Arc::new(FireProbe {
                start,
                n,
                lateness: (0..n).map(|_| AtomicI64::new(0)).collect(),
                registered: AtomicUsize::new(0),
                registered_at: AtomicU64::new(0),
                last_wake: AtomicU64::new(0),
                done: AtomicUsize::new(0),
                all_done: Notify::new(),
            });
            for i in 0..n {
                let deadline = start + lead + spread_at(spread, i, n);
                let p = probe.clone();
                tokio::spawn(async move {
                    let mut sleep = pin!(make(deadline));
                    let first = poll_once(sleep.as_mut()).await;
                    if p.registered.fetch_add(1, AcqRel) + 1 == p.n {
                        p.registered_at
                            .store(p.since_start(Instant::now()), Relaxed);
                    }
                    if first.is_pending() {
                        sleep.await;
                    }
                    let now = Instant::now();
                    p.lateness[i].store(signed_ns(now, deadline), Relaxed);
                    p.last_wake.fetch_max(p.since_start(now), Relaxed);
                    if p.done.fetch_add(1, AcqRel) + 1 == p.n {
                        p.all_done.notify_one();
                    }
                });
            }
            while probe.done.load(Acquire) < n {
                probe.all_done.notified().await;
            }
            (probe, lead)
        })
        .await
        .expect("the fire benchmark panicked")
    });
    drop(rt);
    let mut late: Vec<i64> = probe.lateness.iter().map(|l| l.load(Relaxed)).collect();
    late.sort_unstable();
    let pct = |p: f64| late[((late.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    let last_deadline = lead + spread_at(spread, n - 1, n);
    let tail = probe.last_wake.load(Relaxed) as f64 - last_deadline.as_nanos() as f64;
    [
        pct(0.50),
        pct(0.99),
        pct(1.0),
        tail / 1e3,
        late.iter().filter(|&&l| l < 0).count() as f64,
        probe.registered_at.load(Relaxed) as f64 / 1e6,
        lead.as_secs_f64() * 1e3,
    ]
}

fn run_fire(sizes: &Sizes, summary: &mut Summary) {
    let (n, spread) = (sizes.fire_n, sizes.fire_spread);
    println!(
        "## 3. fire: {n} sleeping tasks, deadlines spread over {spread:?} from start + lead \
         (lead: {FIRE_LEAD:?} + 2x the time registering them takes, measured on a tenth \
         just before; 2-worker runtime)\n"
    );
    let names = ["ours: sleep_wheel_until", "tokio::time::sleep_until"];
    let both = median_of(sizes.reps, || {
        let o = fire_bench(n, spread, sleep_wheel_until);
        let t = fire_bench(n, spread, tokio::time::sleep_until);
        let mut all = [0.0; 14];
        all[..7].copy_from_slice(&o);
        all[7..].copy_from_slice(&t);
        all
    });
    let (ours, tokio) = both.split_at(7);
    let rows: Vec<Vec<String>> = names
        .iter()
        .zip([ours, tokio])
        .map(|(name, r)| {
            vec![
                name.to_string(),
                format!("{:.0}", r[0]),
                format!("{:.0}", r[1]),
                format!("{:.0}", r[2]),
                format!("{:.0}", r[3]),
                format!("{:.0}", r[4]),
                format!("{:.1}", r[5]),
                format!("{:.1}", r[6]),
            ]
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
    if ours[5] > ours[6] || tokio[5] > tokio[6] {
        println!("WARNING: not every sleeper was registered before the first deadline\n");
    }
    let us = |x: f64| format!("{x:.0} µs");
    let peer = names[1];
    summary.workload("3 fire");
    summary.add("lateness p50", peer, [ours[0], tokio[0]], false, us);
    summary.add("lateness p99", peer, [ours[1], tokio[1]], false, us);
    summary.add("lateness max", peer, [ours[2], tokio[2]], false, us);
    summary.add(
        "last deadline -> last wake",
        peer,
        [ours[3], tokio[3]],
        false,
        us,
    );
    let early = |x: f64| format!("{x:.0}");
    summary.add(
        "early wakes (must be 0)",
        peer,
        [ours[4], tokio[4]],
        false,
        early,
    );
}

// ---------------------------------------------------------------------------------------------
// 4. memory
// ---------------------------------------------------------------------------------------------

/// Bytes allocated per timer while `n` made by `make` (each created and polled once) are held
/// in a `Vec` (its buffer counted), on a fresh current-thread runtime.
fn bytes_per_timer<T>(n: usize, mut make: impl FnMut() -> T) -> f64 {
    let rt = current_thread();
    rt.block_on(async move {
        drop(make()); // one-time setup (a default timer, a wheel) is not counted
        let before = allocated();
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            held.push(make());
        }
        let after = allocated();
        drop(held);
        after.saturating_sub(before) as f64 / n as f64
    })
}

fn run_memory(sizes: &Sizes, summary: &mut Summary) {
    let n = sizes.mem_n;
    println!("## 4. memory: {n} pending sleeps of 10 min, each polled once\n");
    let ours = bytes_per_timer(n, || {
        let mut s = sleep_wheel(MEM_SLEEP);
        assert!(poll_noop(Pin::new(&mut s)).is_pending());
        s
    });
    let tokio = bytes_per_timer(n, || {
        let mut s = Box::pin(tokio::time::sleep(MEM_SLEEP));
        assert!(poll_noop(s.as_mut()).is_pending());
        s
    });
    let ours_size = size_of::<Sleep>();
    let tokio_size = size_of::<tokio::time::Sleep>();
    let tokio_holder = size_of::<Pin<Box<tokio::time::Sleep>>>() + tokio_size;
    let rows = vec![
        vec![
            "ours: Sleep".to_string(),
            ours_size.to_string(),
            format!("Vec<Sleep>: {ours_size} B inline"),
            format!("{ours:.1}"),
            format!("{:.1}", ours - ours_size as f64),
            "-".to_string(),
        ],
        vec![
            "tokio::time::Sleep".to_string(),
            tokio_size.to_string(),
            format!("Vec<Pin<Box<Sleep>>>: 8 B pointer + {tokio_size} B box"),
            format!("{tokio:.1}"),
            format!("{:.1}", tokio - tokio_holder as f64),
            ratio(ours, tokio, false),
        ],
    ];
    print_table(
        &[
            "system",
            "size_of future",
            "held as (counted)",
            "bytes allocated per timer",
            "timer structures per timer",
            "ours vs it (bytes per timer)",
        ],
        &rows,
    );
    let bytes = |x: f64| format!("{x:.1} B");
    summary.workload("4 memory");
    summary.add(
        "bytes per pending timer",
        "tokio::time::Sleep",
        [ours, tokio],
        false,
        bytes,
    );
}

// ---------------------------------------------------------------------------------------------
// 6. delayed tasks
// ---------------------------------------------------------------------------------------------

/// Shared by the delayed tasks of one run.
struct DelayedProbe {
    n: usize,
    ran: AtomicUsize,
    /// Tasks that ran or were dropped without running.
    settled: AtomicUsize,
    all_settled: Notify,
}

/// Moved into each delayed task's future: counts it as settled when the future is dropped,
/// whether it ran (`work`) or was cancelled.
struct Settle(Arc<DelayedProbe>);

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

/// Returns `[wall ms, tasks/s, peak MB above the start, tasks that ran]`.
/// Returns `[wall ms, tasks/s by wall time, peak MB, tasks run, process CPU s, spawn-phase ms]`.
/// Wall time is bounded below by the spread; CPU time is what the timer costs the machine.
fn delayed_bench<H, Sp, C>(n: usize, spread: Duration, spawn: Sp, cancel: C) -> [f64; 6]
where
    H: Send + 'static,
    Sp: Fn(Duration, Settle) -> H + Send + 'static,
    C: Fn(&H) + Send + 'static,
{
    let rt = multi_thread("delayed-bench");
    let result = rt.block_on(async move {
        tokio::spawn(async move {
            let probe = Arc::new(DelayedProbe {
                n,
                ran: AtomicUsize::new(0),
                settled: AtomicUsize::new(0),
                all_settled: Notify::new(),
            });
            let base = allocated();
            PEAK.store(base, Relaxed);
            TRACK_PEAK.store(true, Relaxed);
            let cpu0 = process_ticks();
            let start = std::time::Instant::now();
            let handles: Vec<H> = (0..n)
                .map(|i| spawn(spread_at(spread, i, n), Settle(probe.clone())))
                .collect();
            let spawn_phase = start.elapsed();
            for h in handles.iter().skip(1).step_by(2) {
                cancel(h);
            }
            while probe.settled.load(Acquire) < n {
                probe.all_settled.notified().await;
            }
            let wall = start.elapsed();
            let cpu = (process_ticks() - cpu0) as f64 / 100.0; // USER_HZ
            TRACK_PEAK.store(false, Relaxed);
            let peak = PEAK.load(Relaxed).saturating_sub(base);
            drop(handles);
            [
                wall.as_secs_f64() * 1e3,
                n as f64 / wall.as_secs_f64(),
                peak as f64 / 1e6,
                probe.ran.load(Relaxed) as f64,
                cpu,
                spawn_phase.as_secs_f64() * 1e3,
            ]
        })
        .await
        .expect("the delayed-task benchmark panicked")
    });
    drop(rt);
    result
}

fn run_delayed(sizes: &Sizes, summary: &mut Summary) {
    let (n, spread) = (sizes.delayed_n, sizes.delayed_spread);
    println!(
        "## 6. delayed tasks: {n} tasks, delays spread over {spread:?}, every other one cancelled \
         after all are created (2-worker runtime)\n"
    );
    let names = ["ours: spawn_after + cancel", "tokio::spawn(sleep) + abort"];
    let both = median_of(sizes.reps, || {
        let o = delayed_bench(
            n,
            spread,
            |d, s| spawn_after(d, async move { s.work() }),
            |h| {
                h.cancel();
            },
        );
        let t = delayed_bench(
            n,
            spread,
            |d, s| {
                let at = Instant::now() + d;
                tokio::spawn(async move {
                    tokio::time::sleep_until(at).await;
                    s.work();
                })
            },
            tokio::task::JoinHandle::abort,
        );
        std::array::from_fn::<f64, 12, _>(|i| if i < 6 { o[i] } else { t[i - 6] })
    });
    let (ours, tokio) = both.split_at(6);
    let rows: Vec<Vec<String>> = names
        .iter()
        .zip([ours, tokio])
        .enumerate()
        .map(|(k, (name, r))| {
            let vs = |a: f64, b: f64, higher: bool| {
                if k == 0 {
                    "-".to_string()
                } else {
                    ratio(a, b, higher)
                }
            };
            vec![
                name.to_string(),
                format!("{:.0}", r[0]),
                rate(r[1]),
                vs(ours[1], r[1], true),
                format!("{:.1}", r[2]),
                format!("{:.0}", r[2] * 1e6 / n as f64),
                vs(ours[2], r[2], false),
                format!("{:.0}", r[3]),
                format!("{:.0}", n as f64 - r[3]),
                format!("{:.2}", r[4]),
                rate(n as f64 / r[4]),
                vs(n as f64 / ours[4], n as f64 / r[4], true),
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
            "1M spawns ms",
            "ours vs it",
        ],
        &rows,
    );
    println!(
        "_Wall time cannot drop below the {spread:?} spread, so throughput is compared per \
         CPU-second (user + sys of the whole process) and by how fast the tasks are issued._\n"
    );
    let peer = names[1];
    summary.workload("6 delayed");
    summary.add("tasks/s (wall)", peer, [ours[1], tokio[1]], true, rate);
    let per_cpu = |r: &[f64]| n as f64 / r[4];
    summary.add(
        "tasks per CPU-second",
        peer,
        [per_cpu(ours), per_cpu(tokio)],
        true,
        rate,
    );
    let ms = |x: f64| format!("{x:.0} ms");
    summary.add("time to issue 1M", peer, [ours[5], tokio[5]], false, ms);
    let mb = |x: f64| format!("{x:.1} MB");
    summary.add("peak memory", peer, [ours[2], tokio[2]], false, mb);
}

// ---------------------------------------------------------------------------------------------
// 5. idle cost
// ---------------------------------------------------------------------------------------------

/// utime + stime, in clock ticks, from a `/proc/.../stat` line.
fn stat_ticks(stat: &str) -> u64 {
    // The command name, in parentheses, may hold spaces: count fields after the last ')'.
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    let field = |k: usize| fields.get(k - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// CPU ticks of the whole process.
fn process_ticks() -> u64 {
    stat_ticks(&fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// The machine's busy CPU ticks and this process's, at one moment: timings taken while other
/// processes keep the CPUs busy are noisy, so each workload says how busy they kept them.
struct Load {
    machine: u64,
    own: u64,
    at: std::time::Instant,
}

impl Load {
    fn now() -> Load {
        // "cpu  user nice system idle iowait irq softirq steal ...": all but idle and iowait.
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|&k| f.get(k)).sum();
        Load {
            machine: busy,
            own: process_ticks(),
            at: std::time::Instant::now(),
        }
    }

    /// How much of the machine's CPUs other processes kept busy since `self`, in percent.
    fn others_since(&self) -> f64 {
        let now = Load::now();
        let others = (now.machine - self.machine).saturating_sub(now.own - self.own);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let capacity = self.at.elapsed().as_secs_f64() * (1000 / TICK_MS) as f64 * cpus as f64;
        others as f64 / capacity * 100.0
    }
}

/// CPU ticks of this process's threads whose name starts with `prefix`.
fn thread_ticks(prefix: &str) -> u64 {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
        .map(|t| stat_ticks(&fs::read_to_string(t.path().join("stat")).unwrap_or_default()))
        .sum()
}

/// 5b: `n` timers made by `make`, registered and held by a spawned task on a fresh 2-worker
/// runtime whose threads are named `thread_name`, then `idle` of real time with nothing to
/// do. Returns `[process ticks, runtime-thread ticks, driver wakeups]`, the last one NaN
/// unless `ours` (the timers are ours: count our default timer's driver wakeups).
fn idle_cpu<M, S>(thread_name: &str, ours: bool, n: usize, idle: Duration, make: M) -> [f64; 3]
where
    M: Fn() -> S + Send + 'static,
    S: Future + Send + 'static,
{
    let rt = multi_thread(thread_name);
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
    let wakeups = |t: &Option<Timer>| t.as_ref().map(|t| t.metrics().driver_wakeups);
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

/// 5a: one 1-hour sleep on ours, with paused time, in its own current-thread runtime.
/// Returns (driver wakeups until it fired, wheel levels while it was pending, virtual time).
fn idle_paused() -> (u64, usize, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("cannot build a paused runtime");
    rt.block_on(async {
        let timer = Timer::current();
        tokio::task::yield_now().await; // let the driver make its first pass
        let before = timer.metrics().driver_wakeups;
        let start = Instant::now();
        let mut sleep = pin!(sleep_wheel(IDLE_SLEEP));
        assert!(poll_once(sleep.as_mut()).await.is_pending());
        tokio::task::yield_now().await;
        let levels = timer.metrics().levels;
        sleep.await;
        (
            timer.metrics().driver_wakeups - before,
            levels,
            start.elapsed(),
        )
    })
}

fn run_idle(sizes: &Sizes, summary: &mut Summary) {
    let (n, idle) = (sizes.idle_timers, sizes.idle_for);
    println!(
        "## 5. idle cost\n\n### 5b. real clock: {n} sleeps pending 1 h away, then {idle:?} idle \
         (2-worker runtime; CPU in {TICK_MS} ms ticks)\n"
    );
    let none = idle_cpu("idle-none", false, 0, idle, || {
        tokio::time::sleep(IDLE_SLEEP)
    });
    let ours = idle_cpu("idle-ours", true, n, idle, || sleep_wheel(IDLE_SLEEP));
    let tokio = idle_cpu("idle-tokio", false, n, idle, || {
        tokio::time::sleep(IDLE_SLEEP)
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
            "our driver wakeups",
        ],
        &rows,
    );
    let ticks = |x: f64| format!("{x:.0} ticks");
    summary.workload("5b idle");
    summary.add(
        "runtime-thread CPU while idle",
        "tokio::time::sleep",
        [ours[1], tokio[1]],
        false,
        ticks,
    );

    println!("### 5a. paused clock: one sleep_wheel(1 h) on ours (runs last)\n");
    let (wakeups, levels, elapsed) = idle_paused();
    print_table(
        &[
            "system",
            "driver wakeups until it fired",
            "wheel levels",
            "virtual time elapsed",
            "a 1 ms ticker would wake",
        ],
        &[vec![
            "ours: sleep_wheel".to_string(),
            wakeups.to_string(),
            levels.to_string(),
            format!("{elapsed:?}"),
            (IDLE_SLEEP.as_millis()).to_string(),
        ]],
    );
}

// ---------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------

/// One workload's runner.
type Step = fn(&Sizes, &mut Summary);

fn usage() -> ! {
    eprintln!(
        "usage: cargo run --release --example compare -- [--quick] [--only NAME]\n\
         NAME: {}",
        WORKLOADS.join(", ")
    );
    std::process::exit(2);
}

fn main() {
    let mut quick = false;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--only" => match args.next() {
                Some(name) if WORKLOADS.contains(&name.as_str()) => only = Some(name),
                _ => usage(),
            },
            _ => usage(),
        }
    }
    let sizes = if quick { Sizes::quick() } else { Sizes::full() };
    let wanted = |name: &str| only.as_deref().map_or(true, |o| o == name);

    println!(
        "# tokio-timing-wheel vs peers{}\n",
        if quick { " (--quick)" } else { "" }
    );
    println!(
        "{} CPUs; median of {} runs; \"Nx better/worse\" is ours against the peer.\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        sizes.reps
    );
    println!("sizes: {sizes:?}\n");

    let begin = std::time::Instant::now();
    let mut summary = Summary::default();
    let steps: [(&str, Step); 6] = [
        ("rpc-timeout", run_rpc),
        ("reset", run_reset),
        ("fire", run_fire),
        ("memory", run_memory),
        ("delayed", run_delayed),
        // Last: 5a pauses time.
        ("idle", run_idle),
    ];
    let whole_run = Load::now();
    for (name, run) in steps {
        if wanted(name) {
            let load = Load::now();
            run(&sizes, &mut summary);
            println!(
                "_Other processes kept {:.0}% of the CPUs busy during this workload._\n",
                load.others_since()
            );
        }
    }

    println!("## Summary\n");
    print_table(
        &[
            "workload",
            "metric",
            "ours",
            "peer",
            "peer's",
            "ours vs peer",
        ],
        &summary.rows,
    );
    println!(
        "total time: {:.1} s; other processes kept {:.0}% of the CPUs busy meanwhile",
        begin.elapsed().as_secs_f64(),
        whole_run.others_since()
    );
}
