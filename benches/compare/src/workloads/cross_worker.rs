//! cross-worker: timeouts registered on one worker and cancelled, or fired, on another.
//!
//! The case Tokio's per-worker alt timer was built for: work stealing moves a task, or a
//! future, to another worker between registering its timer and cancelling it. On a
//! multi-thread runtime (`--workers`, 2 by default) run one producer task per two workers, each
//! with its own consumer task. A producer makes timeouts around a future that never completes,
//! polls each once (registering its timer on the producer's worker, with the producer's waker),
//! and hands them over in batches of 64, tagged with the registering thread, through a queue.
//! The consumer drops 9 of every 10 (cancelled: 5 s timeouts) and awaits every 10th (1 ms
//! timeouts, which fire) alongside the following batches. Both loop busily, yielding between
//! batches, so the scheduler spreads them over the workers; the table gives the share of
//! timeouts the consumer got on another thread than the one that registered them. (A 1 ms
//! timeout that has already elapsed when first polled, on a busy machine, counts as fired and is
//! not handed over.)
//!
//! Throughput: timeouts per second, from the first registration until every one is cancelled
//! or has fired (each fired one is checked to have elapsed). Ours (`timeout`) against
//! `tokio::time::timeout` on Tokio's default timer and on its alt timer (when built in).
//!
//! Each timeout is made in a box that the harness reuses: the consumer drops the timeout in
//! place (cancelling it, or after it fired) and hands the empty box back to its producer, which
//! makes the next timeout in it. So the harness allocates nothing per timeout once its boxes
//! are made (a few in flight are freed at the end): with a box per timeout, made by the
//! producer and freed by the consumer, the allocator's cross-thread frees (glibc's locks, its
//! consolidation) moved this workload's figures by more than the timers differed. A timer's
//! own allocations (the alt timer's entries) are freed where that timer frees them, as in real
//! use.
//!
//! A baseline runs the same harness with no timer at all (a future that never completes where
//! a timeout would be cancelled, and where one would fire, one pending at its first poll and
//! ready at the next, so that it too is handed over and awaited): "timer cost per timeout" is
//! `1/rate - 1/rate_baseline`, the wall time the timer adds to the harness's own (handing over,
//! awaiting, the boxes' round trip), and the ratio over it is the one a timer can move.
//!
//! A floor runs in the same harness: [`FloorTimeout`](crate::floor::FloorTimeout), the least a
//! timer shared between threads does for a timeout it cancels, if the cancel frees the entry
//! at once (a clock read; a lock, a slab insert and a waker clone on the registering thread;
//! that lock again, the removal and the waker's drop on the cancelling one; no wheel, no
//! firing). Its cost over the harness is what no such timer can go below here: a target
//! against Tokio that the floor itself misses cannot be met by a timer of that kind.

use std::collections::VecDeque;
use std::future::{pending, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread::{self, ThreadId};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;

use super::{Ctx, Workload};
use crate::floor::FloorTimeout;
use crate::poll::poll_once;
use crate::report::{interleaved, print_table, rate, ratio, unmeasured_row, Summary};
use crate::rt::{run_task, Flavor, ALT_TIMER_MISSING};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "cross-worker",
    about: "timeouts registered on one worker, cancelled (90%) or fired (10%) on another",
    run,
};

/// Runs of each system per repetition of the suite (`--reps`): a run takes a quarter of a
/// second or so, and on a shared machine a spell of half speed lasting a few seconds
/// (unrelated to the system then running) spans several runs in a row, two of the three of
/// one system at times; the median of nine outlasts a spell that covers up to four of them
/// (about four rounds of the systems, four to five seconds).
const REPS_FACTOR: usize = 3;

/// Timeouts per hand-over.
const BATCH: usize = 64;
/// A producer waits while this many of its batches are queued.
const MAX_QUEUED: usize = 16;
/// Every this many timeouts, one fires; the others are cancelled.
const FIRE_EVERY: usize = 10;
const FIRES_AFTER: Duration = Duration::from_millis(1);
const CANCELLED_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Baseline,
    Ours,
    Tokio,
    TokioAlt,
    /// Not a timer: the floor (see the module docs).
    Floor,
}

const SYSTEMS: [System; 5] = [
    System::Baseline,
    System::Ours,
    System::Floor,
    System::Tokio,
    System::TokioAlt,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Baseline => "no timer (the harness alone)",
            System::Ours => "ours: timeout",
            System::Tokio => "tokio::time::timeout",
            System::TokioAlt => "tokio::time::timeout (alt timer)",
            System::Floor => "floor: clock read, lock + slab on each side",
        }
    }

    /// `[timeouts/s, % handed to another thread, fired]`; `None` without such a runtime.
    fn measure(self, workers: usize, n: usize) -> Option<[f64; 3]> {
        // Each future resolves to whether its timeout elapsed.
        match self {
            System::Baseline => bench(Flavor::MultiThread, workers, n, |d| NoTimer {
                fires: d == FIRES_AFTER,
                polled: false,
            }),
            System::Floor => bench(Flavor::MultiThread, workers, n, |d| {
                FloorTimeout::new(d, d == FIRES_AFTER)
            }),
            System::Ours => bench(Flavor::MultiThread, workers, n, |d| {
                tokio_timing_wheel::timeout(d, pending::<()>()).map(|r| r.is_err())
            }),
            System::Tokio => bench(Flavor::MultiThread, workers, n, |d| {
                tokio::time::timeout(d, pending::<()>()).map(|r| r.is_err())
            }),
            System::TokioAlt => bench(Flavor::MultiThreadAltTimer, workers, n, |d| {
                tokio::time::timeout(d, pending::<()>()).map(|r| r.is_err())
            }),
        }
    }
}

/// The baseline's future: no timer; where a timeout would fire, pending at its first poll and
/// ready at the next (handed over and awaited as a fired timeout is; it arranges no wake-up,
/// as the consumer polls what it awaits when it takes it), and pending for ever where one
/// would be cancelled.
struct NoTimer {
    fires: bool,
    polled: bool,
}

impl Future for NoTimer {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<bool> {
        if self.fires && self.polled {
            Poll::Ready(true)
        } else {
            self.polled = true;
            Poll::Pending
        }
    }
}

/// One producer and one consumer per two workers: both are always runnable, so each tends to
/// keep a worker of its own, and the consumer drops what the producer registered elsewhere.
fn pairs_for(workers: usize) -> usize {
    (workers / 2).max(1)
}

/// How many timeouts fire when each of `pairs` producers makes `per_producer`: each producer
/// counts from 0 and makes every `FIRE_EVERY`-th one fire, its first included.
fn expected_fired(pairs: usize, per_producer: usize) -> usize {
    pairs * per_producer.div_ceil(FIRE_EVERY)
}

/// A timeout's box, reused for one timeout after another (see the module docs): `None` between
/// two.
type Slot<F> = Pin<Box<Padded<F>>>;

pin_project_lite::pin_project! {
    /// A timeout alone in its cache lines (two: the adjacent-line prefetcher fetches pairs), so
    /// that no two timeouts in flight share a line (the consumer dropping one, the producer
    /// making another): a box comes back to the producer only once emptied.
    #[repr(align(128))]
    struct Padded<F> {
        #[pin]
        timeout: Option<F>,
    }
}

impl<F> Padded<F> {
    fn empty() -> Padded<F> {
        Padded { timeout: None }
    }

    /// Drops the timeout held (cancelling it), if any, then holds `timeout`.
    fn set(self: Pin<&mut Self>, timeout: Option<F>) {
        self.project().timeout.set(timeout);
    }

    fn timeout(self: Pin<&mut Self>) -> Pin<&mut F> {
        self.project()
            .timeout
            .as_pin_mut()
            .expect("a timeout in its box")
    }
}

/// Registered timeouts on their way from a producer to its consumer, each with whether it is
/// one that fires, tagged with the thread that registered them.
type Batch<F> = (ThreadId, Vec<(Slot<F>, bool)>);

/// What a producer and its consumer share.
struct Handover<F> {
    queue: Mutex<VecDeque<Batch<F>>>,
    /// What the consumer gives back to the producer: emptied boxes, and the emptied vectors
    /// of the batches.
    returned: Mutex<Returned<F>>,
    producer_done: AtomicBool,
}

struct Returned<F> {
    slots: Vec<Slot<F>>,
    batches: Vec<Vec<(Slot<F>, bool)>>,
}

fn bench<M, F>(flavor: Flavor, workers: usize, n: usize, make: M) -> Option<[f64; 3]>
where
    M: Fn(Duration) -> F + Copy + Send + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let rt = flavor.build(workers, "cross-worker")?;
    let pairs = pairs_for(workers);
    let batches = (n / pairs / BATCH).max(1);
    Some(run_task(rt, async move {
        let start = std::time::Instant::now();
        let pairs: Vec<_> = (0..pairs)
            .map(|_| {
                let handover = Arc::new(Handover {
                    queue: Mutex::new(VecDeque::new()),
                    returned: Mutex::new(Returned {
                        slots: Vec::new(),
                        batches: Vec::new(),
                    }),
                    producer_done: AtomicBool::new(false),
                });
                let producer = tokio::spawn(produce(handover.clone(), batches, make));
                (producer, tokio::spawn(consume(handover)))
            })
            .collect();
        let (mut total, mut handed, mut cross, mut fired) = (0, 0, 0, 0);
        for (producer, consumer) in pairs {
            let (h, x, f) = consumer.await.expect("a consumer panicked");
            let (made, fired_at_once) = producer.await.expect("a producer panicked");
            total += made;
            handed += h;
            cross += x;
            fired += fired_at_once + f;
        }
        let elapsed = start.elapsed();
        [
            total as f64 / elapsed.as_secs_f64(),
            cross as f64 / handed.max(1) as f64 * 100.0,
            fired as f64,
        ]
    }))
}

/// Sets `producer_done` when dropped: when the producer returns, and when it panics (so that
/// its consumer stops waiting, and the panic surfaces).
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

/// Returns `(timeouts made, of which already elapsed at their first poll)`. A 1 ms timeout may
/// be: on a busy machine, more than 1 ms can pass between making it and polling it.
async fn produce<M, F>(handover: Arc<Handover<F>>, batches: usize, make: M) -> (usize, usize)
where
    M: Fn(Duration) -> F,
    F: Future<Output = bool>,
{
    let _done = Done(&handover.producer_done);
    let (mut k, mut fired_at_once) = (0, 0);
    // Boxes given back, taken from `handover.returned` a batch's worth at a time.
    let mut slots: Vec<Slot<F>> = Vec::new();
    for _ in 0..batches {
        while handover.queue.lock().unwrap().len() >= MAX_QUEUED {
            if Arc::strong_count(&handover) == 1 {
                return (k, fired_at_once); // the consumer is gone (it panicked)
            }
            tokio::task::yield_now().await;
        }
        let mut batch = {
            let mut returned = handover.returned.lock().unwrap();
            if slots.len() < BATCH {
                slots.append(&mut returned.slots);
            }
            returned.batches.pop()
        }
        .unwrap_or_else(|| Vec::with_capacity(BATCH));
        for _ in 0..BATCH {
            let fires = k % FIRE_EVERY == 0;
            k += 1;
            let mut slot = slots.pop().unwrap_or_else(|| Box::pin(Padded::empty()));
            let timeout = make(if fires { FIRES_AFTER } else { CANCELLED_AFTER });
            slot.as_mut().set(Some(timeout));
            match poll_once(slot.as_mut().timeout()).await {
                Poll::Pending => batch.push((slot, fires)),
                Poll::Ready(elapsed) => {
                    assert!(fires && elapsed, "a 5 s timeout completed at once");
                    fired_at_once += 1;
                    slot.as_mut().set(None);
                    slots.push(slot);
                }
            }
        }
        let me = thread::current().id();
        handover.queue.lock().unwrap().push_back((me, batch));
        tokio::task::yield_now().await;
    }
    (k, fired_at_once)
}

/// Returns `(timeouts handed over, of which registered on another thread, of which fired)`.
async fn consume<F>(handover: Arc<Handover<F>>) -> (usize, usize, usize)
where
    F: Future<Output = bool>,
{
    let mut firing = FuturesUnordered::new();
    let (mut handled, mut cross, mut fired) = (0, 0, 0);
    // Emptied boxes, given back with each batch's vector.
    let mut emptied: Vec<Slot<F>> = Vec::new();
    loop {
        // Read before looking at the queue: done and then empty means nothing more comes.
        let done = handover.producer_done.load(Acquire);
        let next = handover.queue.lock().unwrap().pop_front();
        match next {
            Some((registered_on, mut batch)) => {
                handled += batch.len();
                if registered_on != thread::current().id() {
                    cross += batch.len();
                }
                for (mut slot, fires) in batch.drain(..) {
                    if fires {
                        firing.push(fire(slot));
                    } else {
                        slot.as_mut().set(None); // cancels it
                        emptied.push(slot);
                    }
                }
                let mut returned = handover.returned.lock().unwrap();
                returned.slots.append(&mut emptied);
                returned.batches.push(batch);
            }
            None if done => break,
            None => {}
        }
        while let Poll::Ready(Some((elapsed, slot))) = poll_once(pin!(firing.next())).await {
            assert!(elapsed, "a timeout around a pending future completed");
            fired += 1;
            emptied.push(slot);
        }
        tokio::task::yield_now().await;
    }
    while let Some((elapsed, _)) = firing.next().await {
        assert!(elapsed, "a timeout around a pending future completed");
        fired += 1;
    }
    (handled, cross, fired)
}

/// Awaits the timeout in `slot`, then drops it there: whether it elapsed, and the empty box.
async fn fire<F: Future<Output = bool>>(mut slot: Slot<F>) -> (bool, Slot<F>) {
    let elapsed = slot.as_mut().timeout().await;
    slot.as_mut().set(None);
    (elapsed, slot)
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(1_000_000, 40_000);
    let pairs = pairs_for(ctx.workers);
    let handled = (n / pairs / BATCH).max(1) * BATCH * pairs;
    let runs = REPS_FACTOR * ctx.reps;
    println!(
        "{handled} timeouts, made and registered by {pairs} producer tasks, handed in batches of \
         {BATCH} to {pairs} consumer tasks that cancel 9 in 10 (5 s timeouts) and await the \
         10th (1 ms); {} runtime. Each figure is the median of {runs} runs of each system, in \
         turn.\n",
        Flavor::MultiThread.label(ctx.workers)
    );
    let reps = interleaved(runs, &SYSTEMS, |&sys| sys.measure(ctx.workers, n));
    let baseline = reps[0]
        .as_ref()
        .expect("the baseline is always measured")
        .median(0);
    let ours = reps[1].as_ref().expect("ours is always measured").medians();
    let cost = |rate: f64| (1e9 / rate - 1e9 / baseline).max(0.0);
    let expected_fired = expected_fired(pairs, handled / pairs);
    let rows: Vec<Vec<String>> = SYSTEMS
        .iter()
        .zip(&reps)
        .map(|(sys, r)| match r {
            None => unmeasured_row(sys.name(), 7, ALT_TIMER_MISSING),
            Some(r) => {
                let m = r.medians();
                let vs = |a: f64, b: f64, higher: bool| match sys {
                    System::Baseline | System::Ours => "-".to_string(),
                    _ => ratio(a, b, higher),
                };
                vec![
                    sys.name().to_string(),
                    r.shown(0, rate),
                    vs(ours[0], m[0], true),
                    if *sys == System::Baseline {
                        "0 (reference)".to_string()
                    } else {
                        format!("{:.0}", cost(m[0]))
                    },
                    vs(cost(ours[0]), cost(m[0]), false),
                    format!("{:.0}%", m[1]),
                    format!("{:.0} (expected {expected_fired})", m[2]),
                ]
            }
        })
        .collect();
    print_table(
        &[
            "system",
            "timeouts/s",
            "ours vs it",
            "timer cost ns/timeout",
            "ours vs it",
            "on another thread",
            "fired",
        ],
        &rows,
    );
    let peers = || {
        SYSTEMS
            .iter()
            .zip(&reps)
            .filter(|(sys, _)| matches!(sys, System::Tokio | System::TokioAlt))
    };
    let metric = "timeouts/s, registered and cancelled across workers";
    for (sys, r) in peers() {
        match r {
            Some(r) => summary.add(metric, sys.name(), [ours[0], r.median(0)], true, rate),
            None => summary.add_unmeasured(metric, sys.name(), ALT_TIMER_MISSING),
        }
    }
    let metric = "timer cost ns per timeout across workers (over no timer)";
    for (sys, r) in peers() {
        match r {
            Some(r) => summary.add(
                metric,
                sys.name(),
                [cost(ours[0]), cost(r.median(0))],
                false,
                |x| format!("{x:.0}"),
            ),
            None => summary.add_unmeasured(metric, sys.name(), ALT_TIMER_MISSING),
        }
    }
    // Not ours: how far any timer that frees a cancelled entry at once could get past Tokio's.
    let floor = reps[2]
        .as_ref()
        .expect("the floor is always measured")
        .median(0);
    let tokio = reps[3]
        .as_ref()
        .expect("Tokio is always measured")
        .median(0);
    summary.add_text(
        "the floor's timeouts/s across workers (not a timer: the most a timer freeing at cancel can reach)",
        &rate(floor),
        System::Tokio.name(),
        &rate(tokio),
        &ratio(floor, tokio, true),
    );
}

#[cfg(test)]
mod tests {
    use super::{expected_fired, FIRE_EVERY};

    /// The table's "expected" is what the producers' own rule (`k % FIRE_EVERY == 0`, `k` per
    /// producer) makes fire, also when a producer's share is not a multiple of `FIRE_EVERY`
    /// (16 workers: 8 producers of 124,992 each fire 100,000, not a tenth of 999,936).
    #[test]
    fn expected_fired_counts_per_producer() {
        for (pairs, per_producer) in [(1, 1_000_000), (8, 124_992), (8, 4_992), (3, 7), (1, 1)] {
            let by_rule = (0..per_producer).filter(|k| k % FIRE_EVERY == 0).count() * pairs;
            assert_eq!(
                expected_fired(pairs, per_producer),
                by_rule,
                "{pairs} x {per_producer}"
            );
        }
        assert_eq!(expected_fired(8, 124_992), 100_000);
    }
}
