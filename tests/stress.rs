//! Multi-threaded stress of one Timer with exact accounting.
//!
//! Eight workers (six Tokio tasks on a two-worker `multi_thread` runtime, and two plain threads
//! that `block_on` the same runtime's handle) run random operations on one explicit [`Timer`]
//! with real-clock deadlines of 0..20 ms:
//!
//! - sleeps that are awaited, some of them reset (earlier, later, or to the past) on the way;
//! - timeouts that elapse, and timeouts whose future answers in time;
//! - "held" sleeps, polled once with a probe waker of their own, then dropped (cancelled)
//!   later, some of them reset first (earlier or later);
//! - delayed tasks, half of them cancelled later.
//!
//! At the end every timer is accounted for exactly: it fired once or was cancelled once, none
//! fired before its deadline, a cancelled delayed task never ran and every other one ran once,
//! `pending()` is back to 0, and the `max_pending` reservation counter is exactly balanced.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tokio_timing_wheel::{DelayedError, DelayedTask, Sleep, Timer, TimerError};

mod common;
use common::XorShift;

/// Operations over all workers.
#[cfg(not(debug_assertions))]
const TOTAL_OPS: usize = 1_000_000;
#[cfg(debug_assertions)]
const TOTAL_OPS: usize = 100_000;

/// Workers that are Tokio tasks on the runtime's two worker threads.
const TASKS: usize = 6;
/// Workers that are plain threads blocking on the runtime's handle.
const THREADS: usize = 2;
const WORKERS: usize = TASKS + THREADS;

/// Deadlines are 0..20 ms away, with microsecond resolution (so most fall inside a tick).
const MAX_DELAY_US: u64 = 20_000;

/// The timer's limit: far above what the workers hold at once (each holds at most
/// `AWAIT_CAP + HELD_CAP + DELAYED_CAP + JOIN_CAP` timers), so no registration is refused.
const MAX_PENDING: usize = 50_000;
const AWAIT_CAP: usize = 256;
const HELD_CAP: usize = 128;
const DELAYED_CAP: usize = 128;
const JOIN_CAP: usize = 256;

/// The test fails (instead of hanging) past this.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Lateness beyond this fails the test; on a noisy 2-core box anything below is tolerated.
const MAX_LATENESS: Duration = Duration::from_secs(10);

/// A random deadline offset for the workers: 0..`MAX_DELAY_US` microseconds.
trait RandomDelay {
    /// The next delay.
    fn delay(&mut self) -> Duration;
}

impl RandomDelay for XorShift {
    fn delay(&mut self) -> Duration {
        Duration::from_micros(self.below(MAX_DELAY_US))
    }
}

/// Counters shared by all workers.
struct Shared {
    base: Instant,
    /// Awaited sleeps created / completed.
    sleeps: AtomicU64,
    sleeps_fired: AtomicU64,
    resets: AtomicU64,
    /// Timeouts created / elapsed at their deadline / answered in time (timer removed).
    timeouts: AtomicU64,
    timeouts_elapsed: AtomicU64,
    timeouts_ok: AtomicU64,
    /// Held sleeps created, and those of them ready on their first poll (never in the wheel).
    held: AtomicU64,
    held_ready_at_once: AtomicU64,
    /// Delayed tasks created; per task: how often it ran, and whether `cancel()` returned true.
    delayed: AtomicU64,
    delayed_cancel_true: AtomicU64,
    delayed_ok: AtomicU64,
    delayed_err_cancelled: AtomicU64,
    next_task_id: AtomicUsize,
    runs: Vec<AtomicU8>,
    cancelled: Vec<AtomicU8>,
    /// Anything fired before its deadline.
    early: AtomicU64,
    max_late_us: AtomicU64,
    /// Unexpected outcomes, with the first few messages.
    wrong: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            base: Instant::now(),
            sleeps: AtomicU64::new(0),
            sleeps_fired: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            timeouts_elapsed: AtomicU64::new(0),
            timeouts_ok: AtomicU64::new(0),
            held: AtomicU64::new(0),
            held_ready_at_once: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            delayed_cancel_true: AtomicU64::new(0),
            delayed_ok: AtomicU64::new(0),
            delayed_err_cancelled: AtomicU64::new(0),
            next_task_id: AtomicUsize::new(0),
            runs: (0..TOTAL_OPS).map(|_| AtomicU8::new(0)).collect(),
            cancelled: (0..TOTAL_OPS).map(|_| AtomicU8::new(0)).collect(),
            early: AtomicU64::new(0),
            max_late_us: AtomicU64::new(0),
            wrong: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
        }
    }

    fn fail(&self, msg: String) {
        self.wrong.fetch_add(1, SeqCst);
        let mut f = self.failures.lock().unwrap();
        if f.len() < 20 {
            f.push(msg);
        }
    }

    /// Records a completion at `now` of a timer due at `deadline`.
    fn on_time(&self, what: &str, now: Instant, deadline: Instant) {
        if now < deadline {
            self.early.fetch_add(1, SeqCst);
            self.fail(format!(
                "{what} completed {:?} before its deadline",
                deadline - now
            ));
        } else {
            let late = (now - deadline).as_micros() as u64;
            self.max_late_us.fetch_max(late, SeqCst);
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }
}

/// The waker of a held sleep: counts its wakes and remembers when the first one came.
struct Probe {
    base: Instant,
    /// Only ever lowered (a reset earlier), so a wake must come at or after it.
    deadline_ns: AtomicU64,
    wakes: AtomicU32,
    woke_ns: AtomicU64,
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let now = Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos() as u64;
        if self.wakes.fetch_add(1, SeqCst) == 0 {
            self.woke_ns.store(now, SeqCst);
        }
    }
}

/// A held sleep after it was dropped: its probe, its wakes at the drop site, and when the drop
/// had finished.
struct Dropped {
    probe: Arc<Probe>,
    wakes_before_drop: u32,
    dropped_ns: u64,
}

/// Polls `fut` once with the current task's context.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

/// Polls every ready future of `set` once, without waiting, handing their outputs to `on_done`.
async fn pump<F: Future>(set: &mut FuturesUnordered<F>, mut on_done: impl FnMut(F::Output)) {
    std::future::poll_fn(|cx| {
        while let Poll::Ready(Some(v)) = set.poll_next_unpin(cx) {
            on_done(v);
        }
        Poll::Ready(())
    })
    .await
}

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;
type Joined = (usize, bool, Result<(), DelayedError>);

async fn join(id: usize, cancel_returned: bool, task: DelayedTask<()>) -> Joined {
    (id, cancel_returned, task.await)
}

fn check_joined(shared: &Shared, (id, cancel_returned, result): Joined) {
    match result {
        Ok(()) => {
            shared.delayed_ok.fetch_add(1, SeqCst);
            if cancel_returned {
                shared.fail(format!(
                    "delayed task {id}: cancel() returned true, yet it ran"
                ));
            }
        }
        Err(e) if e.is_cancelled() => {
            shared.delayed_err_cancelled.fetch_add(1, SeqCst);
            if !cancel_returned {
                shared.fail(format!(
                    "delayed task {id}: cancelled error, but cancel() returned false"
                ));
            }
        }
        Err(e) => shared.fail(format!("delayed task {id}: unexpected error {e:?}")),
    }
}

/// An awaited sleep, maybe reset on the way.
fn awaited_sleep(timer: &Timer, shared: &Arc<Shared>, rng: &mut XorShift) -> Job {
    let timer = timer.clone();
    let shared = shared.clone();
    let d = rng.delay();
    // 0, 1: no reset; 2: earlier; 3: later; 4: to the past.
    let reset = rng.below(8).min(4);
    let yields = rng.below(4);
    let offset = rng.delay();
    shared.sleeps.fetch_add(1, SeqCst);
    Box::pin(async move {
        let mut s = timer.sleep(d);
        if reset >= 2 && poll_once(&mut s).await.is_pending() {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            let now = Instant::now();
            let target = match reset {
                2 => now + offset.min(s.deadline().saturating_duration_since(now)),
                3 => s.deadline() + offset,
                _ => now.checked_sub(Duration::from_millis(1)).unwrap_or(now),
            };
            Pin::new(&mut s).reset(target);
            shared.resets.fetch_add(1, SeqCst);
        }
        (&mut s).await;
        let now = Instant::now();
        if s.is_shutdown() {
            shared.fail("an awaited sleep completed with is_shutdown()".into());
        }
        shared.on_time("a sleep", now, s.deadline());
        shared.sleeps_fired.fetch_add(1, SeqCst);
    })
}

/// A timeout that elapses, or one whose future answers in time.
fn awaited_timeout(timer: &Timer, shared: &Arc<Shared>, rng: &mut XorShift) -> Job {
    let timer = timer.clone();
    let shared = shared.clone();
    let d = rng.delay();
    let answers = rng.below(2) == 0;
    shared.timeouts.fetch_add(1, SeqCst);
    Box::pin(async move {
        if answers {
            // The RPC pattern: registered on the first poll, removed when the answer comes.
            let r = timer
                .timeout(Duration::from_secs(5), async {
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                    7
                })
                .await;
            match r {
                Ok(7) => shared.timeouts_ok.fetch_add(1, SeqCst),
                other => {
                    shared.fail(format!("an answered timeout returned {other:?}"));
                    0
                }
            };
        } else {
            let t = timer.timeout(d, std::future::pending::<()>());
            let deadline = t.deadline();
            match t.await {
                Err(e) if !e.is_shutdown() => {
                    shared.on_time("a timeout", Instant::now(), deadline);
                    shared.timeouts_elapsed.fetch_add(1, SeqCst);
                }
                other => shared.fail(format!("an elapsing timeout returned {other:?}")),
            }
        }
    })
}

struct Held {
    sleep: Sleep,
    probe: Arc<Probe>,
}

fn drop_held(shared: &Shared, held: Held, dropped: &mut Vec<Dropped>) {
    let wakes_before_drop = held.probe.wakes.load(SeqCst);
    let probe = held.probe.clone();
    drop(held);
    dropped.push(Dropped {
        probe,
        wakes_before_drop,
        dropped_ns: shared.ns(Instant::now()),
    });
}

/// What one worker hands back.
struct WorkerReport {
    dropped: Vec<Dropped>,
}

async fn worker(timer: Timer, shared: Arc<Shared>, seed: u64, ops: usize) -> WorkerReport {
    let mut rng = XorShift::new(seed);
    let mut awaited: FuturesUnordered<Job> = FuturesUnordered::new();
    let mut held: VecDeque<Held> = VecDeque::new();
    let mut dropped: Vec<Dropped> = Vec::new();
    let mut delayed: VecDeque<(usize, DelayedTask<()>)> = VecDeque::new();
    let mut joins = FuturesUnordered::new();

    for op in 0..ops {
        let r = rng.below(100);
        match r {
            0..=24 => awaited.push(awaited_sleep(&timer, &shared, &mut rng)),
            25..=34 => awaited.push(awaited_timeout(&timer, &shared, &mut rng)),
            35..=69 if r >= 55 && !held.is_empty() => {
                // Drop (cancel) a held sleep, or reset it.
                let i = rng.below(held.len() as u64) as usize;
                let mut h = held.swap_remove_back(i).expect("index in range");
                match rng.below(5) {
                    0..=2 => drop_held(&shared, h, &mut dropped),
                    3 => {
                        // Earlier (possibly into the past: then it completes, unregistered).
                        let now = Instant::now();
                        let left = h.sleep.deadline().saturating_duration_since(now);
                        let target = (now + rng.delay().min(left))
                            .checked_sub(Duration::from_micros(rng.below(2) * 1_000))
                            .unwrap_or(now);
                        h.probe.deadline_ns.fetch_min(shared.ns(target), SeqCst);
                        Pin::new(&mut h.sleep).reset(target);
                        shared.resets.fetch_add(1, SeqCst);
                        held.push_back(h);
                    }
                    _ => {
                        // Later: lazy; the old registration still fires at the old deadline,
                        // which the probe keeps as the earliest allowed wake.
                        let target = h.sleep.deadline() + rng.delay();
                        Pin::new(&mut h.sleep).reset(target);
                        shared.resets.fetch_add(1, SeqCst);
                        held.push_back(h);
                    }
                }
            }
            35..=69 => {
                // A held sleep: polled once with its own probe waker.
                let mut sleep = timer.sleep(rng.delay());
                shared.held.fetch_add(1, SeqCst);
                let probe = Arc::new(Probe {
                    base: shared.base,
                    deadline_ns: AtomicU64::new(u64::MAX),
                    wakes: AtomicU32::new(0),
                    woke_ns: AtomicU64::new(0),
                });
                let waker = Waker::from(probe.clone());
                match Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(()) => {
                        // Due at once: never entered the wheel.
                        shared.on_time("a held sleep", Instant::now(), sleep.deadline());
                        shared.held_ready_at_once.fetch_add(1, SeqCst);
                    }
                    Poll::Pending => {
                        // Registered at the first poll: its deadline is fixed by now.
                        probe.deadline_ns.store(shared.ns(sleep.deadline()), SeqCst);
                        held.push_back(Held { sleep, probe });
                    }
                }
            }
            70..=84 => {
                let id = shared.next_task_id.fetch_add(1, SeqCst);
                let d = rng.delay();
                let deadline = Instant::now() + d;
                let sh = shared.clone();
                let body = async move {
                    sh.on_time("a delayed task", Instant::now(), deadline);
                    sh.runs[id].fetch_add(1, SeqCst);
                };
                let task = if rng.below(2) == 0 {
                    timer.spawn_after(d, body)
                } else {
                    timer.spawn_at(deadline, body)
                };
                shared.delayed.fetch_add(1, SeqCst);
                delayed.push_back((id, task));
            }
            _ => {
                if let Some((id, task)) = delayed.pop_front() {
                    let c = rng.below(2) == 0 && task.cancel();
                    if c {
                        shared.cancelled[id].store(1, SeqCst);
                        shared.delayed_cancel_true.fetch_add(1, SeqCst);
                    }
                    joins.push(join(id, c, task));
                }
            }
        }

        // Bounded work in flight.
        while held.len() > HELD_CAP {
            let h = held.pop_front().expect("non-empty");
            drop_held(&shared, h, &mut dropped);
        }
        while delayed.len() > DELAYED_CAP {
            let (id, task) = delayed.pop_front().expect("non-empty");
            let c = rng.below(2) == 0 && task.cancel();
            if c {
                shared.cancelled[id].store(1, SeqCst);
                shared.delayed_cancel_true.fetch_add(1, SeqCst);
            }
            joins.push(join(id, c, task));
        }
        // Register what was just pushed, and collect what is done.
        pump(&mut awaited, |()| {}).await;
        pump(&mut joins, |j| check_joined(&shared, j)).await;
        while awaited.len() >= AWAIT_CAP {
            awaited.next().await;
        }
        while joins.len() >= JOIN_CAP {
            if let Some(j) = joins.next().await {
                check_joined(&shared, j);
            }
        }
        // Leave the workers to the driver (and the other tasks) now and then.
        if op % 16 == 15 {
            tokio::task::yield_now().await;
        }
    }

    // Wind down: drop every held sleep, decide on every delayed task, await everything.
    while let Some(h) = held.pop_front() {
        drop_held(&shared, h, &mut dropped);
    }
    while let Some((id, task)) = delayed.pop_front() {
        let c = rng.below(2) == 0 && task.cancel();
        if c {
            shared.cancelled[id].store(1, SeqCst);
            shared.delayed_cancel_true.fetch_add(1, SeqCst);
        }
        joins.push(join(id, c, task));
    }
    while awaited.next().await.is_some() {}
    while let Some(j) = joins.next().await {
        check_joined(&shared, j);
    }
    WorkerReport { dropped }
}

fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().max_pending(MAX_PENDING).build().unwrap() });
    let shared = Arc::new(Shared::new());
    let per_worker = TOTAL_OPS / WORKERS;
    let ops = per_worker * WORKERS;
    let started = std::time::Instant::now();

    let tasks: Vec<_> = (0..TASKS)
        .map(|n| {
            rt.spawn(worker(
                timer.clone(),
                shared.clone(),
                0x9E37_79B9_7F4A_7C15 ^ (n as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
                per_worker,
            ))
        })
        .collect();
    let threads: Vec<_> = (0..THREADS)
        .map(|n| {
            let handle = rt.handle().clone();
            let timer = timer.clone();
            let shared = shared.clone();
            std::thread::spawn(move || {
                let _entered = handle.enter();
                handle.block_on(worker(
                    timer,
                    shared,
                    0x2545_F491_4F6C_DD1D ^ (n as u64 + 101).wrapping_mul(0x9E37_79B9),
                    per_worker,
                ))
            })
        })
        .collect();

    let mut reports = Vec::new();
    rt.block_on(async {
        for t in tasks {
            reports.push(t.await.expect("worker task panicked"));
        }
    });
    for t in threads {
        reports.push(t.join().expect("worker thread panicked"));
    }
    let took = started.elapsed();

    // Everything resolved: nothing may be left in the wheel.
    assert_eq!(timer.pending(), 0, "timers left in the wheel");
    assert_eq!(timer.metrics().pending, 0);

    // Let wakes that raced with the last drops finish, then check every probe.
    std::thread::sleep(Duration::from_millis(100));

    let s = &*shared;
    let failures = s.failures.lock().unwrap().clone();
    assert_eq!(
        s.wrong.load(SeqCst),
        0,
        "unexpected outcomes, first ones: {failures:#?}"
    );
    assert_eq!(s.early.load(SeqCst), 0, "fired early: {failures:#?}");

    // Awaited sleeps: each completed exactly once.
    let sleeps = s.sleeps.load(SeqCst);
    assert_eq!(s.sleeps_fired.load(SeqCst), sleeps, "awaited sleeps");

    // Timeouts: each elapsed or answered.
    let timeouts = s.timeouts.load(SeqCst);
    assert_eq!(
        s.timeouts_elapsed.load(SeqCst) + s.timeouts_ok.load(SeqCst),
        timeouts,
        "timeouts"
    );

    // Held sleeps: woken at most once, never early; fired before the drop or cancelled by it;
    // one dropped before its deadline is never woken afterwards.
    let held = s.held.load(SeqCst);
    let ready_at_once = s.held_ready_at_once.load(SeqCst);
    let dropped: Vec<&Dropped> = reports.iter().flat_map(|r| &r.dropped).collect();
    assert_eq!(
        dropped.len() as u64 + ready_at_once,
        held,
        "every held sleep was dropped or ready at once"
    );
    let (mut held_fired, mut held_cancelled, mut raced) = (0u64, 0u64, 0u64);
    for (i, d) in dropped.iter().enumerate() {
        let wakes = d.probe.wakes.load(SeqCst);
        let deadline = d.probe.deadline_ns.load(SeqCst);
        assert!(wakes <= 1, "held sleep {i} was woken {wakes} times");
        if wakes == 1 {
            let woke = d.probe.woke_ns.load(SeqCst);
            assert!(
                woke >= deadline,
                "held sleep {i} woken {} ns before its deadline",
                deadline - woke
            );
        }
        if d.wakes_before_drop == 1 {
            held_fired += 1;
        } else {
            held_cancelled += 1;
            if wakes == 1 {
                // The driver took it out of the wheel just before the drop: only possible
                // once it was due.
                raced += 1;
                assert!(
                    d.dropped_ns >= deadline,
                    "held sleep {i} was woken after it was dropped {} ns before its deadline",
                    deadline - d.dropped_ns
                );
            }
        }
    }
    assert_eq!(held_fired + held_cancelled, dropped.len() as u64);

    // Delayed tasks: cancelled ones never ran, every other one ran exactly once.
    let delayed = s.delayed.load(SeqCst);
    let cancel_true = s.delayed_cancel_true.load(SeqCst);
    assert_eq!(
        s.delayed_ok.load(SeqCst) + s.delayed_err_cancelled.load(SeqCst),
        delayed,
        "every delayed task resolved"
    );
    assert_eq!(s.delayed_err_cancelled.load(SeqCst), cancel_true);
    let ids = s.next_task_id.load(SeqCst);
    assert_eq!(ids as u64, delayed);
    let mut ran = 0u64;
    for id in 0..ids {
        let runs = s.runs[id].load(SeqCst);
        let cancelled = s.cancelled[id].load(SeqCst) == 1;
        let expected = u8::from(!cancelled);
        assert_eq!(
            runs, expected,
            "delayed task {id} (cancel returned {cancelled}) ran {runs} times"
        );
        ran += u64::from(runs);
    }
    assert_eq!(ran + cancel_true, delayed, "ran + cancelled == registered");

    // The whole ledger.
    let registered = sleeps + timeouts + held + delayed;
    let fired = sleeps + s.timeouts_elapsed.load(SeqCst) + ready_at_once + held_fired + raced + ran;
    let cancelled = s.timeouts_ok.load(SeqCst) + (held_cancelled - raced) + cancel_true;
    assert_eq!(
        fired + cancelled,
        registered,
        "fired + cancelled == registered"
    );

    let max_late = Duration::from_micros(s.max_late_us.load(SeqCst));
    assert!(
        max_late < MAX_LATENESS,
        "a timer fired {max_late:?} after its deadline"
    );

    // The max_pending reservation is exactly balanced: the full limit is available again,
    // and not one more.
    rt.block_on(async {
        let all: Vec<Sleep> = (0..MAX_PENDING)
            .map(|i| {
                timer
                    .try_sleep(Duration::from_secs(3_600))
                    .unwrap_or_else(|e| panic!("slot {i} of {MAX_PENDING} refused: {e}"))
            })
            .collect();
        assert_eq!(timer.pending(), MAX_PENDING);
        assert_eq!(
            timer.try_sleep(Duration::from_secs(3_600)).unwrap_err(),
            TimerError::Full {
                max_pending: MAX_PENDING
            },
            "more slots than max_pending after the stress"
        );
        drop(all);
        assert_eq!(timer.pending(), 0);
    });

    let m = timer.metrics();
    println!(
        "stress: {ops} ops by {WORKERS} workers in {took:?} = {:.0} ops/s; \
         registered {registered}: fired {fired}, cancelled {cancelled} \
         (sleeps {sleeps}, timeouts {timeouts}, held {held}, delayed {delayed}, \
         resets {}, raced drops {raced}); max lateness {max_late:?}; \
         driver wakeups {}",
        ops as f64 / took.as_secs_f64(),
        s.resets.load(SeqCst),
        m.driver_wakeups,
    );
    rt.shutdown_timeout(Duration::from_secs(1));
}

#[test]
fn one_timer_many_threads_random_ops_exact_accounting() {
    let (tx, rx) = mpsc::channel();
    let body = std::thread::spawn(move || {
        run();
        let _ = tx.send(());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(()) => body.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: report its panic.
            if let Err(payload) = body.join() {
                std::panic::resume_unwind(payload);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the stress test did not finish within {WATCHDOG:?}: a hang")
        }
    }
}
