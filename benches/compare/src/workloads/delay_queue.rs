//! delay-queue: a keyed delay queue's operations, expiry and memory, ours against tokio-util's.
//!
//! Each queue is owned by one task on a current-thread runtime (both queues are `&mut self`),
//! ours (`tokio_timing_wheel::DelayQueue`) against tokio-util's `DelayQueue`, `u64` values:
//!
//! - **operations**: 1M inserts (`insert_at`, deadlines spread over 1 to 61 s), then 1M resets
//!   of random items (`reset_at`, to 30 to 90 s: mostly later, as idle timeouts move), then
//!   500k removals of random items (`try_remove`; an item already removed counts as an
//!   operation too). Wall time of each phase: ops/s of each and of all 2.5M. The random
//!   sequence is the same for both queues (a fixed-seed xorshift), and the deadlines are
//!   computed before timing from an instant read just before (no clock read in the timed
//!   loops). Dropping the queue is not timed. The target: at least 2x tokio-util's
//!   ops/s over all operations.
//! - **expiry**: 1M items due over 1 s (from 50 ms on), taken out through the `Stream` until
//!   the queue is empty: items per CPU-second of the thread that runs the runtime
//!   (`/proc/thread-self/schedstat`, ns, brought up to date at the scheduler's ticks: a few ms,
//!   a few % of a run) and the wall time (at least
//!   the spread); then a burst: 1M items all due at one instant, taken out once it has passed,
//!   items per second of wall time (the drain alone: what a queue does per expired item).
//! - **waiting polls**: a queue holding 100k items is polled while none is due, as a task in
//!   a `select!` loop polls it at every wake (a message on a channel, a read): polls per
//!   second of 10k polls that each find nothing due, with the items in one bucket (30 s
//!   timeouts given within 100 ms, as a burst of connections after a restart) and spread over
//!   1 to 61 s. Ours reads the clock at each such poll (it hands an item out as soon as a
//!   poll finds its exact deadline passed); tokio-util's reads none (it hands items out only
//!   when its timer fires). A third system gives that clock read's price in the same run:
//!   tokio-util's queue with one `Instant::now()` read before each poll, the least a queue
//!   that reads the clock there can cost if it does the rest as cheaply as tokio-util's.
//! - **peeks**: a loop that peeks at the next item and removes it, until the queue is empty
//!   (`while let Some(key) = q.peek() { q.try_remove(&key) }`), over 30k items given 30 s
//!   timeouts within 1 ms (one slot of the wheel) and over 100k spread over 1 to 61 s: items
//!   per second. tokio-util's `peek` names the head of its earliest slot's list (not always
//!   an earliest item); ours names an earliest one, and keeps what it walked for the peeks
//!   that follow.
//! - **memory**: bytes allocated per item held (the counting allocator, [`crate::alloc`]),
//!   the queue's growth included, for a queue of 1M items made with `new()` (both grow their
//!   storage by doubling). Allocation is deterministic: once, not interleaved.
//!
//! Operations and expiry: medians of interleaved repetitions, a fresh runtime each.

use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use super::{Ctx, Workload};
use crate::alloc::Meter;
use crate::cpu::current_thread_cpu_ns;
use crate::lateness::spread_at;
use crate::report::{interleaved, print_table, rate, ratio, target, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "delay-queue",
    about: "1M inserts, 1M resets, 500k removes; expiry; bytes per item: ours vs tokio-util",
    run,
};

/// The target: our ops/s over tokio-util's, over all operations, at least this.
const TARGET_RATIO: f64 = 2.0;

type Ours = tokio_timing_wheel::DelayQueue<u64>;
type Peer = tokio_util::time::DelayQueue<u64>;

const OURS: &str = "ours: DelayQueue";
const PEER: &str = "tokio-util DelayQueue";
/// tokio-util's queue with one clock read before each waiting poll: ours' floor there.
const PEER_CLOCK: &str = "tokio-util DelayQueue + one clock read a poll";

/// The operations both queues offer, so that one function measures both.
trait Queue: Default + Stream + Unpin {
    type Key: Copy;
    fn insert_at(&mut self, value: u64, at: Instant) -> Self::Key;
    fn reset_at(&mut self, key: &Self::Key, at: Instant);
    fn try_remove(&mut self, key: &Self::Key) -> bool;
    fn peek(&self) -> Option<Self::Key>;
}

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
    fn peek(&self) -> Option<Self::Key> {
        Ours::peek(self)
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
    fn peek(&self) -> Option<Self::Key> {
        Peer::peek(self)
    }
}

/// A small deterministic PRNG (xorshift64*): the same sequence for both queues.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The operations of the first measurement, as offsets from an instant given later.
struct Plan {
    inserts: Vec<Duration>,
    /// (item, new deadline)
    resets: Vec<(usize, Duration)>,
    removes: Vec<usize>,
}

impl Plan {
    fn new(n: usize) -> Plan {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let ms = |rng: &mut Rng, lo: u64, span: u64| Duration::from_millis(lo + rng.below(span));
        Plan {
            inserts: (0..n).map(|_| ms(&mut rng, 1_000, 60_000)).collect(),
            resets: (0..n)
                .map(|_| (rng.below(n as u64) as usize, ms(&mut rng, 30_000, 60_000)))
                .collect(),
            removes: (0..n / 2).map(|_| rng.below(n as u64) as usize).collect(),
        }
    }

    /// `[inserts, resets, removes]`: how many operations each phase does.
    fn counts(&self) -> [usize; 3] {
        [self.inserts.len(), self.resets.len(), self.removes.len()]
    }

    /// The insert deadlines, from `base`.
    fn insert_deadlines(&self, base: Instant) -> Vec<Instant> {
        self.inserts.iter().map(|&d| base + d).collect()
    }
}

/// Operations per second: `[inserts, resets, removes, all]`, on a fresh runtime.
fn ops_per_sec<Q: Queue>(plan: &Plan) -> [f64; 4] {
    let rt = Flavor::CurrentThread.runtime(1, "dq-ops");
    let secs = rt.block_on(async {
        let base = Instant::now();
        let inserts = plan.insert_deadlines(base);
        let resets: Vec<(usize, Instant)> =
            plan.resets.iter().map(|&(i, d)| (i, base + d)).collect();
        let mut q = Q::default();
        let t = std::time::Instant::now();
        let keys: Vec<Q::Key> = inserts
            .iter()
            .enumerate()
            .map(|(i, &at)| q.insert_at(i as u64, at))
            .collect();
        let insert = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        for &(i, at) in &resets {
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
        [insert, reset, remove]
    });
    drop(rt);
    let counts = plan.counts();
    let all = counts.iter().sum::<usize>() as f64 / secs.iter().sum::<f64>();
    [
        counts[0] as f64 / secs[0],
        counts[1] as f64 / secs[1],
        counts[2] as f64 / secs[2],
        all,
    ]
}

/// `[items per CPU-second, wall ms]` for `n` items due over `spread`, taken out as a stream;
/// then `[items per second]` for a burst of `n` items due at once.
fn expiry<Q: Queue>(n: usize, spread: Duration) -> [f64; 3] {
    let rt = Flavor::CurrentThread.runtime(1, "dq-expiry");
    let out = rt.block_on(async {
        let mut q = Q::default();
        let start = Instant::now() + Duration::from_millis(50);
        for i in 0..n {
            q.insert_at(i as u64, start + spread_at(spread, i, n));
        }
        let cpu0 = current_thread_cpu_ns();
        let wall = std::time::Instant::now();
        let taken = drain(&mut q).await;
        let wall = wall.elapsed();
        let cpu = current_thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9;
        assert_eq!(taken, n, "the queue lost items");

        let due = Instant::now() + Duration::from_millis(10);
        for i in 0..n {
            q.insert_at(i as u64, due);
        }
        tokio::time::sleep_until(due + Duration::from_millis(5)).await;
        let burst = std::time::Instant::now();
        assert_eq!(drain(&mut q).await, n, "the queue lost items");
        let burst = burst.elapsed();
        [
            n as f64 / cpu,
            wall.as_secs_f64() * 1e3,
            n as f64 / burst.as_secs_f64(),
        ]
    });
    drop(rt);
    out
}

/// A queue of `n` items given deadlines 30 s from now, spread evenly within `bunched` (a
/// burst of timeouts in one slot of the wheel), or, with `None`, over 1 to 61 s.
fn filled<Q: Queue>(n: usize, bunched: Option<Duration>) -> Q {
    let mut q = Q::default();
    let base = Instant::now();
    for i in 0..n {
        let at = match bunched {
            Some(within) => base + Duration::from_secs(30) + spread_at(within, i, n),
            None => base + Duration::from_secs(1) + spread_at(Duration::from_secs(60), i, n),
        };
        q.insert_at(i as u64, at);
    }
    q
}

/// Polls per second of `polls` polls of a queue holding `n` items, none due, their deadlines
/// 30 s away within 100 ms (`bunched`) or over 1 to 61 s; on a fresh runtime. With
/// `read_clock`, each poll is preceded by one `tokio::time::Instant::now()`.
fn waiting_polls<Q: Queue>(n: usize, polls: usize, bunched: bool, read_clock: bool) -> f64 {
    let rt = Flavor::CurrentThread.runtime(1, "dq-waiting");
    let secs = rt.block_on(async {
        let within = bunched.then_some(Duration::from_millis(100));
        let mut q = filled::<Q>(n, within);
        let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
        // The first wait sets the alarm: not timed.
        assert!(std::pin::Pin::new(&mut q).poll_next(&mut cx).is_pending());
        let t = std::time::Instant::now();
        for _ in 0..polls {
            if read_clock {
                std::hint::black_box(Instant::now());
            }
            assert!(std::pin::Pin::new(&mut q).poll_next(&mut cx).is_pending());
        }
        t.elapsed().as_secs_f64()
    });
    drop(rt);
    polls as f64 / secs
}

/// Items per second of a loop that peeks and removes until the queue is empty, over `n` items
/// 30 s away within 1 ms (`bunched`: one slot) or over 1 to 61 s; on a fresh runtime.
fn peek_loop<Q: Queue>(n: usize, bunched: bool) -> f64 {
    let rt = Flavor::CurrentThread.runtime(1, "dq-peek");
    let secs = rt.block_on(async {
        let mut q = filled::<Q>(n, bunched.then_some(Duration::from_millis(1)));
        let t = std::time::Instant::now();
        let mut taken = 0;
        while let Some(key) = q.peek() {
            assert!(q.try_remove(&key), "peek named an item not in the queue");
            taken += 1;
        }
        assert_eq!(taken, n, "the loop took every item");
        t.elapsed().as_secs_f64()
    });
    drop(rt);
    n as f64 / secs
}

/// Takes every item out of `q` through its `Stream`, until it is empty; how many.
async fn drain<Q: Queue>(q: &mut Q) -> usize {
    let mut taken = 0;
    while q.next().await.is_some() {
        taken += 1;
    }
    taken
}

/// Bytes allocated per item of a queue made with `new()` holding the plan's inserts.
fn bytes_per_item<Q: Queue>(plan: &Plan) -> f64 {
    let rt = Flavor::CurrentThread.runtime(1, "dq-memory");
    let bytes = rt.block_on(async {
        let inserts = plan.insert_deadlines(Instant::now());
        let meter = Meter::start();
        let mut q = Q::default();
        for (i, &at) in inserts.iter().enumerate() {
            q.insert_at(i as u64, at);
        }
        let bytes = meter.net();
        drop(meter);
        drop(q);
        bytes
    });
    drop(rt);
    bytes.max(0) as f64 / plan.inserts.len() as f64
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(1_000_000, 50_000);
    let expiring = ctx.size(1_000_000, 20_000);
    let spread = ctx.size(Duration::from_secs(1), Duration::from_millis(100));
    let plan = Plan::new(n);
    let [inserts, resets, removes] = plan.counts();
    println!(
        "Operations: {inserts} inserts, {resets} resets, {removes} removes. Expiry: \
         {expiring} items due over {spread:?}, then {expiring} due at once. Memory: {inserts} items held. One task on a \
         current-thread runtime.\n"
    );

    println!("### Operations\n");
    let systems = [OURS, PEER];
    let ops = interleaved(ctx.reps, &systems, |&sys| {
        Some(if sys == OURS {
            ops_per_sec::<Ours>(&plan)
        } else {
            ops_per_sec::<Peer>(&plan)
        })
    });
    let ops: Vec<_> = ops.into_iter().map(|r| r.expect("measured")).collect();
    let [ours, peer] = [0, 1].map(|s| ops[s].medians());
    let phases = ["insert_at", "reset_at", "try_remove", "all operations"];
    let rows: Vec<Vec<String>> = phases
        .iter()
        .enumerate()
        .map(|(k, phase)| {
            vec![
                phase.to_string(),
                ops[0].shown(k, rate),
                ops[1].shown(k, rate),
                ratio(ours[k], peer[k], true),
            ]
        })
        .collect();
    print_table(
        &["operation", "ours ops/s", "tokio-util ops/s", "ours vs it"],
        &rows,
    );
    let times = ours[3] / peer[3];
    println!(
        "Ours runs all operations at {times:.2}x tokio-util's rate (target: at least \
         {TARGET_RATIO}x).\n"
    );

    println!("### Expiry\n");
    let exp = interleaved(ctx.reps, &systems, |&sys| {
        Some(if sys == OURS {
            expiry::<Ours>(expiring, spread)
        } else {
            expiry::<Peer>(expiring, spread)
        })
    });
    let exp: Vec<_> = exp.into_iter().map(|r| r.expect("measured")).collect();
    let [ours_exp, peer_exp] = [0, 1].map(|s| exp[s].medians());
    let rows: Vec<Vec<String>> = systems
        .iter()
        .zip(&exp)
        .enumerate()
        .map(|(s, (sys, r))| {
            vec![
                sys.to_string(),
                r.shown(0, rate),
                if s == 0 {
                    "-".to_string()
                } else {
                    ratio(ours_exp[0], r.median(0), true)
                },
                r.shown(1, |x| format!("{x:.0}")),
                r.shown(2, rate),
                if s == 0 {
                    "-".to_string()
                } else {
                    ratio(ours_exp[2], r.median(2), true)
                },
            ]
        })
        .collect();
    print_table(
        &[
            "system",
            "items per CPU-second",
            "ours vs it",
            "wall ms",
            "burst: items/s",
            "ours vs it",
        ],
        &rows,
    );

    println!("### Waiting polls\n");
    let held = ctx.size(100_000, 5_000);
    let polls = ctx.size(10_000, 1_000);
    println!(
        "{polls} polls of a queue holding {held} items, none due: polls per second. Ours \
         reads the clock at each, tokio-util's reads none; the clock read's price, in the \
         same run: tokio-util's with one `Instant::now()` before each poll.\n"
    );
    let layouts = [
        ("in one bucket (30 s, within 100 ms)", true),
        ("over 1 to 61 s", false),
    ];
    let wait_systems = [OURS, PEER, PEER_CLOCK];
    let waits = interleaved(ctx.reps, &wait_systems, |&sys| {
        Some(layouts.map(|(_, bunched)| match sys {
            OURS => waiting_polls::<Ours>(held, polls, bunched, false),
            PEER => waiting_polls::<Peer>(held, polls, bunched, false),
            PEER_CLOCK => waiting_polls::<Peer>(held, polls, bunched, true),
            _ => unreachable!("not a waiting-polls system: {sys}"),
        }))
    });
    let waits: Vec<_> = waits.into_iter().map(|r| r.expect("measured")).collect();
    let [ours_wait, peer_wait, clock_wait] = [0, 1, 2].map(|s| waits[s].medians());
    let ns = |polls_per_sec: f64| 1e9 / polls_per_sec;
    let rows: Vec<Vec<String>> = layouts
        .iter()
        .enumerate()
        .map(|(k, (layout, _))| {
            vec![
                layout.to_string(),
                waits[0].shown(k, rate),
                waits[1].shown(k, rate),
                ratio(ours_wait[k], peer_wait[k], true),
                waits[2].shown(k, rate),
                ratio(ours_wait[k], clock_wait[k], true),
                format!("{:.1}", ns(clock_wait[k]) - ns(peer_wait[k])),
                format!("{:.1}", ns(ours_wait[k]) - ns(peer_wait[k])),
            ]
        })
        .collect();
    print_table(
        &[
            "items",
            "ours polls/s",
            "tokio-util polls/s",
            "ours vs it",
            "tokio-util + a clock read, polls/s",
            "ours vs that",
            "the clock read, ns a poll",
            "ours' gap to tokio-util, ns a poll",
        ],
        &rows,
    );

    println!("### Peeks\n");
    let bunched = ctx.size(30_000, 2_000);
    let spread = ctx.size(100_000, 5_000);
    println!("A loop that peeks and removes until the queue is empty: items per second.\n");
    let peek_layouts = [
        (
            format!("{bunched} in one slot (30 s, within 1 ms)"),
            bunched,
            true,
        ),
        (format!("{spread} over 1 to 61 s"), spread, false),
    ];
    let peeks = interleaved(ctx.reps, &systems, |&sys| {
        Some([0, 1].map(|k| {
            let (_, n, bunched) = peek_layouts[k];
            if sys == OURS {
                peek_loop::<Ours>(n, bunched)
            } else {
                peek_loop::<Peer>(n, bunched)
            }
        }))
    });
    let peeks: Vec<_> = peeks.into_iter().map(|r| r.expect("measured")).collect();
    let [ours_peek, peer_peek] = [0, 1].map(|s| peeks[s].medians());
    let rows: Vec<Vec<String>> = peek_layouts
        .iter()
        .enumerate()
        .map(|(k, (layout, _, _))| {
            vec![
                layout.clone(),
                peeks[0].shown(k, rate),
                peeks[1].shown(k, rate),
                ratio(ours_peek[k], peer_peek[k], true),
            ]
        })
        .collect();
    print_table(
        &["items", "ours items/s", "tokio-util items/s", "ours vs it"],
        &rows,
    );

    println!("### Memory\n");
    let ours_bytes = bytes_per_item::<Ours>(&plan);
    let peer_bytes = bytes_per_item::<Peer>(&plan);
    print_table(
        &["system", "bytes per item held (u64 values)", "ours vs it"],
        &[
            vec![
                OURS.to_string(),
                format!("{ours_bytes:.1}"),
                "-".to_string(),
            ],
            vec![
                PEER.to_string(),
                format!("{peer_bytes:.1}"),
                ratio(ours_bytes, peer_bytes, false),
            ],
        ],
    );

    summary.add_all(
        "ops/s: insert / reset / remove",
        PEER,
        &ours[..3],
        &peer[..3],
        true,
        rate,
    );
    summary.add(
        "ops/s, all operations",
        PEER,
        [ours[3], peer[3]],
        true,
        rate,
    );
    summary.add_text(
        "ops/s, all operations, ours / tokio-util's",
        &format!("{times:.2}x"),
        PEER,
        "1x",
        &target(times >= TARGET_RATIO, &format!(">= {TARGET_RATIO}x")),
    );
    summary.add(
        "expired items per CPU-second",
        PEER,
        [ours_exp[0], peer_exp[0]],
        true,
        rate,
    );
    summary.add(
        "expired items per second, a burst due at once",
        PEER,
        [ours_exp[2], peer_exp[2]],
        true,
        rate,
    );
    summary.add(
        "waiting polls/s, items in one bucket",
        PEER,
        [ours_wait[0], peer_wait[0]],
        true,
        rate,
    );
    summary.add(
        "waiting polls/s, items over 1 to 61 s",
        PEER,
        [ours_wait[1], peer_wait[1]],
        true,
        rate,
    );
    summary.add_all(
        "waiting polls/s, one bucket / over 1 to 61 s",
        PEER_CLOCK,
        &ours_wait,
        &clock_wait,
        true,
        rate,
    );
    summary.add(
        "peek + remove loop, items/s, items in one slot",
        PEER,
        [ours_peek[0], peer_peek[0]],
        true,
        rate,
    );
    summary.add(
        "peek + remove loop, items/s, items over 1 to 61 s",
        PEER,
        [ours_peek[1], peer_peek[1]],
        true,
        rate,
    );
    summary.add(
        "bytes per item held",
        PEER,
        [ours_bytes, peer_bytes],
        false,
        |x| format!("{x:.1} B"),
    );
}
