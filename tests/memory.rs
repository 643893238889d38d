//! Memory stays flat across rounds of registering and cancelling.
//!
//! A counting global allocator tracks the bytes currently allocated by the whole process, so
//! everything runs inside one `#[test]` (tests of one binary run on parallel threads and would
//! disturb the count), on a `current_thread` runtime (no worker threads allocating behind our
//! back).

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_timing_wheel::{DelayedTask, Sleep, Timer};

mod common;
use common::settle_for;

/// Wraps the system allocator, counting the bytes currently allocated.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards its arguments unchanged to `System`, which implements
// `GlobalAlloc` soundly, and returns what `System` returned; the bookkeeping beside the calls
// only touches an atomic counter (it never allocates, so it cannot recurse into the allocator).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has a non-zero size, the only requirement of
        // `GlobalAlloc::alloc`, and it is passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            CURRENT.fetch_add(layout.size(), SeqCst);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`: the caller's non-zero-size `layout`, passed on unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            CURRENT.fetch_add(layout.size(), SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator with `layout`;
        // this allocator got every block from `System` with that same layout (or, after a
        // `realloc`, with the layout the caller now passes), so `System` may free it.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout` (so from
        // `System`, see `dealloc`) and that `new_size` is non-zero and does not overflow when
        // rounded up to `layout.align()`: exactly `System.realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_add(new_size, SeqCst);
            CURRENT.fetch_sub(layout.size(), SeqCst);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn current() -> usize {
    CURRENT.load(SeqCst)
}

/// Sleeps registered per round.
#[cfg(not(debug_assertions))]
const SLEEPS: usize = 1_000_000;
#[cfg(debug_assertions)]
const SLEEPS: usize = 200_000;
const SLEEP_ROUNDS: usize = 10;

/// Delayed tasks registered per round.
const TASKS: usize = 100_000;
const TASK_ROUNDS: usize = 5;

/// Request/response cycles per round: one timeout registered, answered, dropped, then the
/// runtime gets to run (as a server does between requests).
#[cfg(not(debug_assertions))]
const CYCLES: usize = 200_000;
#[cfg(debug_assertions)]
const CYCLES: usize = 50_000;
const CYCLE_ROUNDS: usize = 5;

/// Sleeps registered on another thread and cancelled on the runtime's, per round.
const REMOTE: usize = 100_000;
const REMOTE_ROUNDS: usize = 5;

/// Allowed growth between the first and the last round.
const TOLERANCE: usize = 64 * 1024;

/// Allowed bytes per pending sleep, the `Sleep` itself in the `Vec` included.
const MAX_BYTES_PER_SLEEP: usize = 200;

/// The yields that let the tasks the drops woke run (and a firing pass trim levels or
/// shrink after them).
const SETTLE_YIELDS: usize = 50;

fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}

/// Growth of `after[last]` over `after[0]`, as a signed number of bytes.
/// Memory after the last round is within `TOLERANCE` of the first, and no round creeps
/// above the first by more than that either.
fn assert_flat(after: &[usize]) {
    let g = growth(after);
    assert!(
        g <= TOLERANCE as isize,
        "memory grew by {g} bytes from round 1 to round {}: {after:?}",
        after.len()
    );
    for (i, &a) in after.iter().enumerate().skip(1) {
        assert!(
            a <= after[0] + TOLERANCE,
            "round {} holds {} bytes more than round 1: {after:?}",
            i + 1,
            a - after[0]
        );
    }
}

fn growth(after: &[usize]) -> isize {
    after[after.len() - 1] as isize - after[0] as isize
}

async fn sleep_rounds(timer: &Timer) -> Vec<usize> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut after = Vec::with_capacity(SLEEP_ROUNDS);
    for round in 1..=SLEEP_ROUNDS {
        let before = current();
        let mut sleeps: Vec<Sleep> = Vec::with_capacity(SLEEPS);
        for i in 0..SLEEPS {
            // An hour and up to ~3 hours more, spread over many buckets of several levels.
            let d = Duration::from_secs(3_600) + Duration::from_micros(i as u64 * 10_007);
            let mut s = timer.sleep(d);
            assert!(
                Pin::new(&mut s).poll(&mut cx).is_pending(),
                "a sleep an hour away is pending"
            );
            sleeps.push(s);
        }
        assert_eq!(timer.pending(), SLEEPS, "round {round}: all registered");
        let held = current().saturating_sub(before);
        drop(sleeps);
        assert_eq!(timer.pending(), 0, "round {round}: all cancelled");
        settle_for(SETTLE_YIELDS).await;
        assert_eq!(timer.pending(), 0, "round {round}");
        let now = current();
        println!(
            "sleeps round {round:2}: {SLEEPS} pending held {:9.1} KiB ({:5.1} B/timer, \
             Sleep is {} B); after cancelling all: {:9.1} KiB",
            kib(held),
            held as f64 / SLEEPS as f64,
            std::mem::size_of::<Sleep>(),
            kib(now)
        );
        assert!(
            held < MAX_BYTES_PER_SLEEP * SLEEPS,
            "round {round}: {} bytes per pending sleep (at most {MAX_BYTES_PER_SLEEP} expected)",
            held / SLEEPS
        );
        after.push(now);
    }
    after
}

async fn task_rounds(timer: &Timer) -> Vec<usize> {
    let mut after = Vec::with_capacity(TASK_ROUNDS);
    for round in 1..=TASK_ROUNDS {
        let before = current();
        let tasks: Vec<DelayedTask<()>> = (0..TASKS)
            .map(|i| {
                let d = Duration::from_secs(3_600) + Duration::from_micros(i as u64 * 10_007);
                timer.spawn_after(d, async {})
            })
            .collect();
        assert_eq!(timer.pending(), TASKS, "round {round}: all registered");
        let held = current().saturating_sub(before);
        for (i, t) in tasks.iter().enumerate() {
            assert!(t.cancel(), "round {round}: task {i} not cancelled");
        }
        assert_eq!(timer.pending(), 0, "round {round}: all cancelled");
        drop(tasks);
        settle_for(SETTLE_YIELDS).await;
        assert_eq!(timer.pending(), 0, "round {round}");
        let now = current();
        println!(
            "tasks  round {round:2}: {TASKS} pending held {:9.1} KiB ({:5.1} B/task); \
             after cancelling all: {:9.1} KiB",
            kib(held),
            held as f64 / TASKS as f64,
            kib(now)
        );
        after.push(now);
    }
    after
}

/// A future that is pending on its first poll and ready on the next (an RPC answered in time).
struct AnswersOnSecondPoll(bool);

impl Future for AnswersOnSecondPoll {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The crate's headline pattern, one request at a time: `timeout(1 h, rpc)` registers when the
/// RPC is not ready at once and is removed when it answers; between requests the runtime runs
/// (and with it the timer's driver). Nothing is ever pending between cycles.
async fn rpc_cycle_rounds(timer: &Timer) -> Vec<usize> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut after = Vec::with_capacity(CYCLE_ROUNDS);
    for round in 1..=CYCLE_ROUNDS {
        for cycle in 0..CYCLES {
            let mut t = timer.timeout(Duration::from_secs(3_600), AnswersOnSecondPoll(false));
            if let Poll::Ready(r) = Pin::new(&mut t).poll(&mut cx) {
                panic!(
                    "round {round}, cycle {cycle}: a 1-hour timeout completed on its first poll \
                     with {r:?} (timer shut down: {}, {:?})",
                    timer.is_shutdown(),
                    timer.metrics()
                );
            }
            assert_eq!(Pin::new(&mut t).poll(&mut cx), Poll::Ready(Ok(())));
            drop(t);
            tokio::task::yield_now().await;
        }
        settle_for(SETTLE_YIELDS).await;
        assert_eq!(timer.pending(), 0, "round {round}");
        let now = current();
        println!(
            "rpc    round {round:2}: {CYCLES} timeouts registered and answered one at a time; \
             after: {:9.1} KiB",
            kib(now)
        );
        after.push(now);
    }
    after
}

/// Sleeps registered (first poll) on a thread of their own and dropped on the runtime's, as
/// work stealing moves a future to another worker between registering and cancelling it, on
/// a busy timer (an interval ticks every millisecond): the cancels are handed over to the
/// registering thread's shard. Each is no longer pending at once; its memory comes back with
/// the next pass, although the registering thread registers nothing more until the next
/// round.
async fn remote_cancel_rounds(timer: &Timer) -> Vec<usize> {
    let (to_helper, requests) = std::sync::mpsc::channel::<usize>();
    let (to_runtime, registered) = std::sync::mpsc::channel::<Vec<Sleep>>();
    let helper = std::thread::spawn({
        let timer = timer.clone();
        move || {
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            for n in requests {
                let sleeps = (0..n)
                    .map(|i| {
                        let d = Duration::from_secs(3_600) + Duration::from_micros(i as u64);
                        let mut s = timer.sleep(d);
                        assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
                        s
                    })
                    .collect();
                to_runtime.send(sleeps).unwrap();
            }
        }
    });
    let mut after = Vec::with_capacity(REMOTE_ROUNDS);
    for round in 1..=REMOTE_ROUNDS {
        to_helper.send(REMOTE).unwrap();
        let sleeps = registered.recv().unwrap();
        assert_eq!(timer.pending(), REMOTE + 1, "round {round}: all registered");
        drop(sleeps); // on this thread: handed over
        assert_eq!(
            timer.pending(),
            1,
            "round {round}: only the interval at once"
        );
        // The interval's next pass sweeps them (real time: leave a margin).
        tokio::time::sleep(Duration::from_millis(50)).await;
        settle_for(SETTLE_YIELDS).await;
        let now = current();
        println!(
            "remote round {round:2}: {REMOTE} sleeps registered on another thread and dropped \
             here; after: {:9.1} KiB",
            kib(now)
        );
        after.push(now);
    }
    drop(to_helper);
    helper.join().unwrap();
    after
}

#[test]
fn memory_is_flat_across_rounds_of_registering_and_cancelling() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        // Warm up the runtime and the driver (first allocations of Tokio's own structures).
        timer.sleep(Duration::from_millis(2)).await;
        settle_for(SETTLE_YIELDS).await;
        let baseline = current();
        println!("baseline: {:.1} KiB", kib(baseline));

        let after = sleep_rounds(&timer).await;
        let g = growth(&after);
        println!(
            "sleeps: after round 1 {:.1} KiB, after round {SLEEP_ROUNDS} {:.1} KiB, growth {g} B",
            kib(after[0]),
            kib(after[after.len() - 1]),
        );
        assert_flat(&after);
        assert!(
            after[0] <= baseline + TOLERANCE,
            "cancelling every sleep left {} bytes behind",
            after[0].saturating_sub(baseline)
        );

        let after = task_rounds(&timer).await;
        let g = growth(&after);
        println!(
            "tasks: after round 1 {:.1} KiB, after round {TASK_ROUNDS} {:.1} KiB, growth {g} B",
            kib(after[0]),
            kib(after[after.len() - 1]),
        );
        assert_flat(&after);
        assert_eq!(timer.pending(), 0);

        let after = rpc_cycle_rounds(&timer).await;
        let g = growth(&after);
        println!(
            "rpc: after round 1 {:.1} KiB, after round {CYCLE_ROUNDS} {:.1} KiB, growth {g} B \
             ({:.1} B per cycle)",
            kib(after[0]),
            kib(after[after.len() - 1]),
            g as f64 / ((CYCLE_ROUNDS - 1) * CYCLES) as f64
        );
        assert!(
            g <= TOLERANCE as isize,
            "memory grew by {g} bytes from round 1 to round {CYCLE_ROUNDS} of request/response \
             cycles, with no timer pending in between: {after:?}"
        );
        assert_eq!(timer.pending(), 0);

        // The registering thread's shard differs from this thread's among 64 (threads take
        // shard numbers in turn).
        let remote_timer = Timer::builder().shards(64).build().unwrap();
        remote_timer.sleep(Duration::from_millis(2)).await;
        let mut ticks = remote_timer.interval(Duration::from_millis(1));
        let ticker = tokio::spawn(async move {
            loop {
                ticks.tick().await;
            }
        });
        settle_for(SETTLE_YIELDS).await;
        let before = current();
        let after = remote_cancel_rounds(&remote_timer).await;
        println!(
            "remote: before {:.1} KiB, after round 1 {:.1} KiB, after round {REMOTE_ROUNDS} \
             {:.1} KiB",
            kib(before),
            kib(after[0]),
            kib(after[after.len() - 1]),
        );
        assert_flat(&after);
        assert!(
            after[0] <= before + TOLERANCE,
            "sleeps cancelled from another thread left {} bytes behind after a pass",
            after[0].saturating_sub(before)
        );
        ticker.abort();
        assert_eq!(remote_timer.pending(), 1, "the interval");

        // A burst too small for a shard to give its memory back by itself when it empties:
        // kept for the next one, until `shrink_to_fit` asks for it.
        let timer = Timer::builder().build().unwrap();
        timer.sleep(Duration::from_millis(2)).await;
        settle_for(SETTLE_YIELDS).await;
        let before = current();
        let held = burst_cancelled(&timer, 1_000).await;
        let levels = timer.metrics().levels;
        timer.shrink_to_fit();
        let after = current();
        println!(
            "shrink_to_fit: before {:.1} KiB, held after the burst {:.1} KiB, after {:.1} KiB",
            kib(before),
            kib(held),
            kib(after)
        );
        assert!(
            held >= before + 32 * 1024,
            "a cancelled burst of 1,000 kept no memory for the next: {held} against {before}"
        );
        assert!(
            after + 32 * 1024 <= held,
            "shrink_to_fit gave back {} bytes of {}",
            held.saturating_sub(after),
            held - before
        );
        assert!(
            timer.metrics().levels < levels,
            "levels kept: {levels} before, {} after",
            timer.metrics().levels
        );
        assert_eq!(timer.pending(), 0);
    });
}

/// Registers `n` sleeps 10 s to 20 s away (level 2 of the default geometry, kept when it
/// empties) and cancels them all: the memory then held.
async fn burst_cancelled(timer: &Timer, n: usize) -> usize {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let sleeps: Vec<Sleep> = (0..n)
        .map(|i| {
            let d = Duration::from_secs(10) + Duration::from_millis(i as u64 * 10);
            let mut s = timer.sleep(d);
            assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
            s
        })
        .collect();
    assert_eq!(timer.pending(), n);
    drop(sleeps);
    settle_for(SETTLE_YIELDS).await;
    assert_eq!(timer.pending(), 0);
    current()
}
