//! Micro-benchmarks of the internal hierarchical timing wheel (size 64), in ns per operation.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench wheel --features internals
//! ```
//!
//! Every row is measured twice: on a wheel holding no other entries ("0 present") and on one
//! already holding 1M entries with deadlines spread uniformly over `1..=10_000_000` ticks
//! ("1M present"). The wheel's time stays at tick 0 except in the advance row. Each cell is the
//! median of 5 runs, each on a freshly built wheel with the same fixed-seed inputs; only the
//! operations themselves are timed, never the setup.
//!
//! - **insert**: insert a batch of 1M entries with random deadlines in `1..=10_000_000`
//!   (including the slab's growth).
//! - **remove**: remove such a batch again, keys in random order. In the 0-present column the
//!   last remove empties the wheel, which frees the slab inside the timing (a few ms in all).
//! - **reschedule later**: move each entry of such a batch to its deadline + 30 000 ticks; the
//!   entry's bucket still expires in time, so the wheel only records the new deadline (lazy).
//! - **reschedule earlier**: move each entry of such a batch to a random deadline in
//!   `1..=1000`, which unlinks it and links it into a lower bucket.
//! - **insert+remove pair**: the RPC-timeout pattern, 1M times: insert at now + 5000 ticks and
//!   remove the entry again at once; ns per pair.
//! - **advance**: insert 1M entries with random deadlines in `1..=1_000_000`, then step time the
//!   way a driver does, `advance(next_expiration())`, until tick 1 000 000; ns per expired entry
//!   (in the 1M-present column, prefilled entries due by then fire too and are counted). The
//!   number of `advance` calls (jumps) and the wheel's counters are printed below the table.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tokio_timing_wheel::internals::{Key, Wheel};

const WHEEL_SIZE: usize = 64;
/// Entries in a measured batch.
const BATCH: usize = 1_000_000;
/// Entries already present, one column each.
const PRESENT: [usize; 2] = [0, 1_000_000];
/// Deadlines of prefilled and batch entries lie in `1..=SPREAD`.
const SPREAD: u64 = 10_000_000;
/// Deadlines of the advance batch lie in `1..=ADVANCE_SPREAD`.
const ADVANCE_SPREAD: u64 = 1_000_000;
/// How far "reschedule later" moves a deadline.
const LATER_BY: u64 = 30_000;
/// "Reschedule earlier" moves deadlines into `1..=EARLIER_SPREAD`.
const EARLIER_SPREAD: u64 = 1000;
/// The pair's timeout, from the wheel's time (which stays 0: it is never advanced there).
const PAIR_TIMEOUT: u64 = 5000;
/// Runs per measurement; the median is reported.
const RUNS: usize = 5;
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// xorshift64: tiny, deterministic, good enough to scatter deadlines.
struct Rng(u64);

impl Rng {
    fn new() -> Self {
        Rng(SEED)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A deadline in `1..=max`.
    fn deadline(&mut self, max: u64) -> u64 {
        1 + self.next() % max
    }

    fn deadlines(&mut self, n: usize, max: u64) -> Vec<u64> {
        (0..n).map(|_| self.deadline(max)).collect()
    }

    /// Fisher-Yates.
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// One timed run: `ops` operations took `elapsed`.
#[derive(Clone, Copy)]
struct Sample {
    elapsed: Duration,
    ops: usize,
    /// `advance` calls made (advance row only).
    jumps: usize,
    /// The wheel's `(cascades, flushes, heap pushes, heap pops, levels)` after the run.
    counters: (u64, u64, u64, u64, usize),
}

impl Sample {
    fn new(elapsed: Duration, ops: usize, wheel: &Wheel) -> Self {
        Sample {
            elapsed,
            ops,
            jumps: 0,
            counters: wheel.counters(),
        }
    }

    fn ns_per_op(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.ops as f64
    }
}

/// Times `f`, keeping its result alive past the clock.
fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let start = Instant::now();
    let r = black_box(f());
    (start.elapsed(), r)
}

/// A wheel holding `present` entries with deadlines in `1..=SPREAD`.
fn prefilled(present: usize, rng: &mut Rng) -> Wheel {
    let mut wheel = Wheel::new(WHEEL_SIZE);
    for i in 0..present {
        wheel.insert(rng.deadline(SPREAD), i as u64);
    }
    wheel
}

/// Inserts one entry per deadline, returning `(key, deadline)` pairs.
fn insert_all(wheel: &mut Wheel, deadlines: &[u64]) -> Vec<(Key, u64)> {
    deadlines
        .iter()
        .enumerate()
        .map(|(i, &d)| (wheel.insert(d, i as u64), d))
        .collect()
}

/// A prefilled wheel plus a batch of `BATCH` entries with deadlines in `1..=max`.
fn with_batch(present: usize, max: u64, rng: &mut Rng) -> (Wheel, Vec<(Key, u64)>) {
    let mut wheel = prefilled(present, rng);
    let deadlines = rng.deadlines(BATCH, max);
    let batch = insert_all(&mut wheel, &deadlines);
    (wheel, batch)
}

fn insert(present: usize) -> Sample {
    let mut rng = Rng::new();
    let mut wheel = prefilled(present, &mut rng);
    let deadlines = rng.deadlines(BATCH, SPREAD);
    let (elapsed, batch) = time(|| insert_all(&mut wheel, &deadlines));
    Sample::new(elapsed, batch.len(), &wheel)
}

fn remove(present: usize) -> Sample {
    let mut rng = Rng::new();
    let (mut wheel, mut batch) = with_batch(present, SPREAD, &mut rng);
    rng.shuffle(&mut batch);
    let (elapsed, sum) = time(|| {
        batch
            .iter()
            .map(|&(key, _)| wheel.remove(key).expect("pending"))
            .fold(0u64, u64::wrapping_add)
    });
    black_box(sum);
    Sample::new(elapsed, batch.len(), &wheel)
}

/// Reschedules every batch entry to `new_deadline(old_deadline, rng)`, timing only that.
fn reschedule(present: usize, new_deadline: impl Fn(u64, &mut Rng) -> u64) -> Sample {
    let mut rng = Rng::new();
    let (mut wheel, batch) = with_batch(present, SPREAD, &mut rng);
    let moves: Vec<(Key, u64)> = batch
        .iter()
        .map(|&(key, d)| (key, new_deadline(d, &mut rng)))
        .collect();
    let (elapsed, moved) = time(|| {
        moves
            .iter()
            .filter(|&&(key, d)| wheel.reschedule(key, d))
            .count()
    });
    assert_eq!(moved, BATCH);
    Sample::new(elapsed, moved, &wheel)
}

fn reschedule_later(present: usize) -> Sample {
    reschedule(present, |d, _| d + LATER_BY)
}

fn reschedule_earlier(present: usize) -> Sample {
    reschedule(present, |_, rng| rng.deadline(EARLIER_SPREAD))
}

fn insert_remove_pair(present: usize) -> Sample {
    let mut rng = Rng::new();
    let mut wheel = prefilled(present, &mut rng);
    let (elapsed, sum) = time(|| {
        (0..BATCH as u64)
            .map(|i| {
                let key = wheel.insert(PAIR_TIMEOUT, i);
                wheel.remove(key).expect("pending")
            })
            .fold(0u64, u64::wrapping_add)
    });
    black_box(sum);
    Sample::new(elapsed, BATCH, &wheel)
}

fn advance(present: usize) -> Sample {
    let mut rng = Rng::new();
    let (mut wheel, _) = with_batch(present, ADVANCE_SPREAD, &mut rng);
    let before = wheel.len();
    let (elapsed, (fired, jumps)) = time(|| {
        let (mut fired, mut jumps) = (0, 0);
        while let Some(t) = wheel.next_expiration().filter(|&t| t <= ADVANCE_SPREAD) {
            fired += wheel.advance(t, |value| {
                black_box(value);
            });
            jumps += 1;
        }
        (fired, jumps)
    });
    assert!(fired >= BATCH, "only {fired} of the batch fired");
    assert_eq!(before - wheel.len(), fired);
    Sample {
        jumps,
        ..Sample::new(elapsed, fired, &wheel)
    }
}

/// One measurement: builds its own wheel for the given number of present entries.
type Bench = fn(usize) -> Sample;

/// Runs `bench` `RUNS` times and returns the median run by ns/op.
fn median(bench: Bench, present: usize) -> Sample {
    let mut runs: Vec<Sample> = (0..RUNS).map(|_| bench(present)).collect();
    runs.sort_by(|a, b| a.ns_per_op().total_cmp(&b.ns_per_op()));
    runs[RUNS / 2]
}

/// The median of each column.
fn row(bench: Bench) -> [Sample; 2] {
    PRESENT.map(|present| median(bench, present))
}

/// The table's rows, in order.
const BENCHES: [(&str, Bench); 6] = [
    ("insert", insert),
    ("remove (random order)", remove),
    ("reschedule later (+30 000, lazy)", reschedule_later),
    (
        "reschedule earlier (to 1..=1000, relink)",
        reschedule_earlier,
    ),
    ("insert+remove pair (now + 5000)", insert_remove_pair),
    (
        "advance (per expired entry, 1M over 1..=1 000 000)",
        advance,
    ),
];

fn main() {
    let start = Instant::now();
    println!("wheel size {WHEEL_SIZE}, batch {BATCH}, median of {RUNS} runs, ns/op\n");
    println!("| operation | 0 present | 1M present |");
    println!("|---|---:|---:|");
    let rows = BENCHES.map(|(name, bench)| {
        let row = row(bench);
        let [empty, full] = row.map(|s| s.ns_per_op());
        println!("| {name} | {empty:.1} | {full:.1} |");
        row
    });
    println!();
    for (present, s) in rows.iter().flat_map(|r| PRESENT.iter().zip(r)) {
        if s.jumps == 0 {
            continue;
        }
        let (cascades, flushes, pushes, pops, levels) = s.counters;
        println!(
            "advance, {present} present: {} expired in {} jumps; cascades {cascades}, \
             flushes {flushes}, heap pushes {pushes}, heap pops {pops}, levels left {levels}",
            s.ops, s.jumps
        );
    }
    println!("\ntotal {:.1} s", start.elapsed().as_secs_f64());
}
