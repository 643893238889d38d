//! `Interval` and `DelayQueue` beside `tokio::time::Interval` and tokio-util's `DelayQueue`:
//! one module of the side-by-side suite, which includes it with `mod` and calls
//! [`run`]; it is not a bench target of its own (`autobenches = false`).
//!
//! What the including crate must provide: `crate::alloc::allocated() -> usize`, the bytes
//! currently allocated by the whole process (a counting global allocator), and the
//! dependencies `tokio` (`rt-multi-thread`, `time`), `tokio-util` (`time`), `futures` and
//! `tokio-timing-wheel`. CPU time comes from `/proc/self/task/*/schedstat` (nanoseconds, every
//! thread of the process), or `/proc/self/stat` (10 ms ticks) where that is missing: Linux.
//!
//! Workloads, each timed 3 times with the systems interleaved (medians printed, and the
//! spread: half the range in percent of the median):
//!
//! 1. **intervals**: 10k tasks on a 2-worker runtime, each ticking an interval of 10 ms 100
//!    times, the starts spread evenly over one period (heartbeats of many connections). The
//!    CPU time of the whole process over the run, per tick: ours (`interval_at`) against
//!    `tokio::time::interval_at`. Target: at most half of Tokio's.
//! 2. **delay queue operations**: one queue, in one task on a current-thread runtime: 1M
//!    inserts (`insert_at`, deadlines spread over 1 to 61 s), then 1M resets of random items
//!    (`reset_at`, to 30 to 90 s: mostly later, as idle timeouts move), then 500k removals of
//!    random items (`try_remove`, some already removed: the same sequence for both). Ops/s of
//!    each phase and of all 2.5M: ours against tokio-util's `DelayQueue`. Target: at least 2x.
//!    Deadlines are computed before timing: no clock read inside the timed loops.
//! 3. **delay queue expiry**: 1M items due over 1 s of real time, taken out through the
//!    `Stream` until the queue is empty: items per CPU-second of the process.
//! 4. **bytes per item**: bytes allocated per item held, queue growth included, for a queue of
//!    1M items made with `new()` (both grow their storage by doubling).
//!
//! `quick` divides every size by 10 (intervals: 1k tasks x 20 ticks): a smoke run.

use std::fs;
use std::future::{poll_fn, Future};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::task::AtomicWaker;
use futures::StreamExt;
use tokio::runtime::Runtime;
use tokio::time::Instant;

const PERIOD: Duration = Duration::from_millis(10);
const REPETITIONS: usize = 3;

/// Runs every workload and prints its Markdown table.
pub(crate) fn run(quick: bool) {
    let scale = if quick { 10 } else { 1 };
    println!("## Interval and DelayQueue\n");
    intervals(10_000 / scale, if quick { 20 } else { 100 });
    delay_queue_ops(1_000_000 / scale);
    delay_queue_expiry(1_000_000 / scale);
    bytes_per_item(1_000_000 / scale);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// CPU time used so far by every live thread of the process.
fn cpu_time() -> Duration {
    let from_schedstat: u64 = fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    if from_schedstat > 0 {
        return Duration::from_nanos(from_schedstat);
    }
    // utime + stime in USER_HZ (100 Hz) ticks; the command name may hold spaces.
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

fn multi_thread() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

/// The median of `v` and half its range in percent of the median.
fn summary(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    let spread = (v[v.len() - 1] - v[0]) / 2.0 / median * 100.0;
    (median, spread)
}

/// Times `ours` and `peer` [`REPETITIONS`] times each, interleaved; medians and spreads.
fn interleaved(
    mut ours: impl FnMut() -> f64,
    mut peer: impl FnMut() -> f64,
) -> ((f64, f64), (f64, f64)) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..REPETITIONS {
        a.push(ours());
        b.push(peer());
    }
    (summary(a), summary(b))
}

/// A small deterministic PRNG (xorshift64*), the same sequence for every system.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn row(label: &str, unit: &str, ours: (f64, f64), peer: (f64, f64), ratio: f64, target: &str) {
    println!(
        "| {label} | {:.3} {unit} (±{:.0}%) | {:.3} {unit} (±{:.0}%) | {ratio:.2}x | {target} |",
        ours.0, ours.1, peer.0, peer.1
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Intervals
// ---------------------------------------------------------------------------------------------

/// What a task of workload 1 awaits, again and again.
trait Ticker: Send + 'static {
    fn tick(&mut self) -> impl Future<Output = ()> + Send + '_;
}

impl Ticker for tokio_timing_wheel::Interval {
    async fn tick(&mut self) {
        tokio_timing_wheel::Interval::tick(self).await;
    }
}

impl Ticker for tokio::time::Interval {
    async fn tick(&mut self) {
        tokio::time::Interval::tick(self).await;
    }
}

/// The floor: no timer at all. One ticker task wakes a tenth of the tasks every millisecond
/// (each every 10 ms), through an `AtomicWaker` and a counter: what the runtime costs to
/// wake and poll a task, whatever the timer.
struct Floor {
    slots: Arc<[FloorSlot]>,
    k: usize,
    consumed: u32,
}

#[derive(Default)]
struct FloorSlot {
    granted: AtomicU32,
    waker: AtomicWaker,
}

impl Ticker for Floor {
    fn tick(&mut self) -> impl Future<Output = ()> + Send + '_ {
        poll_fn(move |cx| {
            let slot = &self.slots[self.k];
            if slot.granted.load(Acquire) == self.consumed {
                slot.waker.register(cx.waker());
                if slot.granted.load(Acquire) == self.consumed {
                    return Poll::Pending;
                }
            }
            self.consumed += 1;
            Poll::Ready(())
        })
    }
}

/// Process CPU time per tick, in microseconds, for `n` tasks each awaiting `ticks` ticks of
/// `make(task number, first tick)`, on a fresh 2-worker runtime, with `background` spawned
/// first and aborted at the end.
fn cpu_per_tick<I, M, B>(n: usize, ticks: usize, make: M, background: B) -> f64
where
    I: Ticker,
    M: Fn(usize, Instant) -> I + Send + Sync + 'static,
    B: Future<Output = ()> + Send + 'static,
{
    let rt = multi_thread();
    let make = Arc::new(make);
    // Warm the runtime and the timer up.
    let warm = make.clone();
    rt.block_on(async move {
        let mut i = warm(0, Instant::now());
        for _ in 0..3 {
            tokio::time::timeout(Duration::from_millis(100), i.tick())
                .await
                .ok();
        }
    });
    let start = Instant::now() + PERIOD;
    let before = cpu_time();
    rt.block_on(async move {
        let background = tokio::spawn(background);
        let tasks: Vec<_> = (0..n)
            .map(|k| {
                let first = start + PERIOD * k as u32 / n as u32;
                let make = make.clone();
                tokio::spawn(async move {
                    let mut i = make(k, first);
                    for _ in 0..ticks {
                        i.tick().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("ticking task");
        }
        background.abort();
    });
    let cpu = cpu_time() - before;
    drop(rt);
    cpu.as_secs_f64() * 1e6 / (n * ticks) as f64
}

fn floor_cpu_per_tick(n: usize, ticks: usize) -> f64 {
    let slots: Arc<[FloorSlot]> = (0..n).map(|_| FloorSlot::default()).collect();
    let for_tasks = slots.clone();
    let make = move |k, _first| Floor {
        slots: for_tasks.clone(),
        k,
        consumed: 0,
    };
    let ticker = async move {
        let mut every_ms = tokio::time::interval(Duration::from_millis(1));
        for t in 0.. {
            every_ms.tick().await;
            for slot in slots.iter().skip(t % 10).step_by(10) {
                slot.granted.fetch_add(1, Release);
                slot.waker.wake();
            }
        }
    };
    cpu_per_tick(n, ticks, make, ticker)
}

fn intervals(n: usize, ticks: usize) {
    println!("### 1. intervals: {n} tasks x {ticks} ticks of {PERIOD:?}\n");
    println!("| metric | ours | tokio::time::Interval | ours / Tokio | target |");
    println!("|---|---:|---:|---:|---|");
    let idle = std::future::pending::<()>;
    let (mut ours, mut peer, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPETITIONS {
        let make = |_, t| tokio_timing_wheel::interval_at(t, PERIOD);
        ours.push(cpu_per_tick(n, ticks, make, idle()));
        let make = |_, t| tokio::time::interval_at(t, PERIOD);
        peer.push(cpu_per_tick(n, ticks, make, idle()));
        floor.push(floor_cpu_per_tick(n, ticks));
    }
    let above = |v: &[f64]| summary(v.iter().zip(&floor).map(|(x, f)| x - f).collect());
    let (o, p) = (above(&ours), above(&peer));
    let (ours, peer, floor) = (summary(ours), summary(peer), summary(floor));
    row(
        "CPU per tick (process, all threads)",
        "µs",
        ours,
        peer,
        ours.0 / peer.0,
        "≤ 0.5x",
    );
    row("the same, above the floor", "µs", o, p, o.0 / p.0, "");
    println!(
        "| the floor: tasks woken by a plain ticker, no timer | {:.3} µs (±{:.0}%) | | | |",
        floor.0, floor.1
    );
    println!();
}

// ---------------------------------------------------------------------------------------------
// 2-4. DelayQueue
// ---------------------------------------------------------------------------------------------

/// The operations of workload 2, computed before timing.
struct Plan {
    inserts: Vec<Instant>,
    resets: Vec<(usize, Instant)>,
    removes: Vec<usize>,
}

impl Plan {
    fn new(n: usize) -> Plan {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let now = Instant::now();
        let ms =
            |rng: &mut Rng, lo: u64, span: u64| now + Duration::from_millis(lo + rng.below(span));
        Plan {
            inserts: (0..n).map(|_| ms(&mut rng, 1_000, 60_000)).collect(),
            resets: (0..n)
                .map(|_| (rng.below(n as u64) as usize, ms(&mut rng, 30_000, 60_000)))
                .collect(),
            removes: (0..n / 2).map(|_| rng.below(n as u64) as usize).collect(),
        }
    }
}

/// The operations both queues offer, so one function times both.
trait Queue: Default {
    type Key: Copy;
    fn insert_at(&mut self, value: u64, at: Instant) -> Self::Key;
    fn reset_at(&mut self, key: &Self::Key, at: Instant);
    fn try_remove(&mut self, key: &Self::Key) -> bool;
}

type Ours = tokio_timing_wheel::DelayQueue<u64>;
type Peer = tokio_util::time::DelayQueue<u64>;

impl Queue for Ours {
    type Key = tokio_timing_wheel::delay_queue::Key;
    fn insert_at(&mut self, value: u64, at: Instant) -> Self::Key {
        Ours::insert_at(self, value, at)
    }
    fn reset_at(&mut self, key: &Self::Key, at: Instant) {
        Ours::reset_at(self, key, at)
    }
    fn try_remove(&mut self, key: &Self::Key) -> bool {
        Ours::try_remove(self, key).is_some()
    }
}

impl Queue for Peer {
    type Key = tokio_util::time::delay_queue::Key;
    fn insert_at(&mut self, value: u64, at: Instant) -> Self::Key {
        Peer::insert_at(self, value, at)
    }
    fn reset_at(&mut self, key: &Self::Key, at: Instant) {
        Peer::reset_at(self, key, at)
    }
    fn try_remove(&mut self, key: &Self::Key) -> bool {
        Peer::try_remove(self, key).is_some()
    }
}

/// Seconds taken by each phase: `[insert, reset, remove]`. Resets skip removed items (none
/// are removed before them); removals of an item already removed count as operations too.
fn time_ops<Q: Queue>(plan: &Plan) -> [f64; 3] {
    current_thread().block_on(async {
        let mut q = Q::default();
        let t = std::time::Instant::now();
        let keys: Vec<Q::Key> = plan
            .inserts
            .iter()
            .enumerate()
            .map(|(i, &at)| q.insert_at(i as u64, at))
            .collect();
        let inserted = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        for &(i, at) in &plan.resets {
            q.reset_at(&keys[i], at);
        }
        let reset = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let mut removed = 0usize;
        for &i in &plan.removes {
            removed += usize::from(q.try_remove(&keys[i]));
        }
        let remove = t.elapsed().as_secs_f64();
        std::hint::black_box(removed);
        [inserted, reset, remove] // dropping the queue is not timed
    })
}

fn delay_queue_ops(n: usize) {
    println!(
        "### 2. DelayQueue operations: {n} inserts, {n} resets, {} removes\n",
        n / 2
    );
    println!("| operation | ours | tokio-util | ours / tokio-util | target |");
    println!("|---|---:|---:|---:|---|");
    let plan = Plan::new(n);
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for _ in 0..REPETITIONS {
        ours.push(time_ops::<Ours>(&plan));
        peer.push(time_ops::<Peer>(&plan));
    }
    let counts = [n, n, n / 2];
    let labels = ["insert_at", "reset_at", "try_remove"];
    for phase in 0..3 {
        let rate = |v: &[[f64; 3]]| {
            summary(
                v.iter()
                    .map(|t| counts[phase] as f64 / t[phase] / 1e6)
                    .collect(),
            )
        };
        let (o, p) = (rate(&ours), rate(&peer));
        row(labels[phase], "M ops/s", o, p, o.0 / p.0, "");
    }
    let total = |v: &[[f64; 3]]| {
        summary(
            v.iter()
                .map(|t| (n + n + n / 2) as f64 / t.iter().sum::<f64>() / 1e6)
                .collect(),
        )
    };
    let (o, p) = (total(&ours), total(&peer));
    row("all operations", "M ops/s", o, p, o.0 / p.0, "≥ 2x");
    println!();
}

/// A queue of `n` items, their deadlines those of `plan`.
fn fill<Q: Queue>(plan: &Plan) -> Q {
    let mut q = Q::default();
    for (i, &at) in plan.inserts.iter().enumerate() {
        q.insert_at(i as u64, at);
    }
    q
}

/// Millions of items taken out per CPU-second, for `n` items due over one second.
fn expiry_rate<Q: Queue + futures::Stream + Unpin>(n: usize) -> f64 {
    current_thread().block_on(async {
        let mut q = Q::default();
        let start = Instant::now() + Duration::from_millis(50);
        for i in 0..n {
            q.insert_at(
                i as u64,
                start + Duration::from_secs(1) * i as u32 / n as u32,
            );
        }
        let before = cpu_time();
        let mut taken = 0;
        while q.next().await.is_some() {
            taken += 1;
        }
        let cpu = cpu_time() - before;
        assert_eq!(taken, n);
        n as f64 / cpu.as_secs_f64() / 1e6
    })
}

fn delay_queue_expiry(n: usize) {
    println!("### 3. DelayQueue expiry: {n} items due over 1 s, taken out as a stream\n");
    println!("| metric | ours | tokio-util | ours / tokio-util | target |");
    println!("|---|---:|---:|---:|---|");
    let (ours, peer) = interleaved(|| expiry_rate::<Ours>(n), || expiry_rate::<Peer>(n));
    row("items per CPU-second", "M", ours, peer, ours.0 / peer.0, "");
    println!();
}

/// Bytes allocated per item of a queue filled as `plan` says.
fn bytes_per_item_of<Q: Queue>(plan: &Plan) -> f64 {
    current_thread().block_on(async {
        let before = crate::alloc::allocated();
        let q: Q = fill(plan);
        let bytes = crate::alloc::allocated().saturating_sub(before);
        drop(q);
        bytes as f64 / plan.inserts.len() as f64
    })
}

fn bytes_per_item(n: usize) {
    println!("### 4. DelayQueue memory: {n} items held, the queue made with `new()`\n");
    println!("| metric | ours | tokio-util | tokio-util / ours |");
    println!("|---|---:|---:|---:|");
    let plan = Plan::new(n);
    let (ours, peer) = (
        bytes_per_item_of::<Ours>(&plan),
        bytes_per_item_of::<Peer>(&plan),
    );
    println!(
        "| bytes per item (`u64` values) | {ours:.0} B | {peer:.0} B | {:.2}x |",
        peer / ours
    );
    println!();
}
