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

/// A held sleep and the probe waker it was polled with.
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

/// A delayed task's join future, boxed so that [`Worker`] can name its type.
type Join = Pin<Box<dyn Future<Output = Joined> + Send>>;

/// One worker's state: its random source and everything it has in flight.
struct Worker {
    timer: Timer,
    shared: Arc<Shared>,
    rng: XorShift,
    /// Awaited sleeps and timeouts.
    awaited: FuturesUnordered<Job>,
    /// Held sleeps, oldest first, and those dropped so far.
    held: VecDeque<Held>,
    dropped: Vec<Dropped>,
    /// Delayed tasks not yet decided on (cancel or not), oldest first.
    delayed: VecDeque<(usize, DelayedTask<()>)>,
    /// Delayed tasks decided on, being awaited.
    joins: FuturesUnordered<Join>,
}

async fn worker(timer: Timer, shared: Arc<Shared>, seed: u64, ops: usize) -> WorkerReport {
    let mut w = Worker {
        timer,
        shared,
        rng: XorShift::new(seed),
        awaited: FuturesUnordered::new(),
        held: VecDeque::new(),
        dropped: Vec::new(),
        delayed: VecDeque::new(),
        joins: FuturesUnordered::new(),
    };
    for op in 0..ops {
        w.random_op();
        w.bound_work_in_flight().await;
        // Leave the workers to the driver (and the other tasks) now and then.
        if op % 16 == 15 {
            tokio::task::yield_now().await;
        }
    }
    w.wind_down().await
}

impl Worker {
    /// One random operation: start an awaited sleep (25%) or timeout (10%); drop or reset a
    /// held sleep (15%, when one is held) or else hold a new one (35% in all); spawn a delayed
    /// task (15%); decide on the oldest delayed task (15%).
    fn random_op(&mut self) {
        let r = self.rng.below(100);
        match r {
            0..=24 => self
                .awaited
                .push(awaited_sleep(&self.timer, &self.shared, &mut self.rng)),
            25..=34 => self
                .awaited
                .push(awaited_timeout(&self.timer, &self.shared, &mut self.rng)),
            35..=69 if r >= 55 && !self.held.is_empty() => self.drop_or_reset_a_held_sleep(),
            35..=69 => self.hold_a_sleep(),
            70..=84 => self.spawn_delayed(),
            _ => {
                if let Some((id, task)) = self.delayed.pop_front() {
                    self.decide(id, task);
                }
            }
        }
    }

    /// Drops (cancels) a random held sleep, or resets it earlier or later.
    fn drop_or_reset_a_held_sleep(&mut self) {
        let (shared, rng) = (&*self.shared, &mut self.rng);
        let i = rng.below(self.held.len() as u64) as usize;
        let mut h = self.held.swap_remove_back(i).expect("index in range");
        match rng.below(5) {
            0..=2 => drop_held(shared, h, &mut self.dropped),
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
                self.held.push_back(h);
            }
            _ => {
                // Later: lazy; the old registration still fires at the old deadline,
                // which the probe keeps as the earliest allowed wake.
                let target = h.sleep.deadline() + rng.delay();
                Pin::new(&mut h.sleep).reset(target);
                shared.resets.fetch_add(1, SeqCst);
                self.held.push_back(h);
            }
        }
    }

    /// A held sleep: polled once with its own probe waker, then kept (if it registered).
    fn hold_a_sleep(&mut self) {
        let shared = &*self.shared;
        let mut sleep = self.timer.sleep(self.rng.delay());
        shared.held.fetch_add(1, SeqCst);
        let probe = Arc::new(Probe {
            base: shared.base,
            deadline_ns: AtomicU64::new(u64::MAX),
            wakes: AtomicU32::new(0),
            woke_ns: AtomicU64::new(0),
        });
        let waker = Waker::from(probe.clone());
        // Outside the task's cooperative budget: out of budget, a due sleep yields (`Pending`,
        // the probe woken at once) instead of answering `Ready`.
        let mut poll = tokio::task::unconstrained(Pin::new(&mut sleep));
        match Pin::new(&mut poll).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(()) => {
                // Due at once: never entered the wheel.
                shared.on_time("a held sleep", Instant::now(), sleep.deadline());
                shared.held_ready_at_once.fetch_add(1, SeqCst);
            }
            Poll::Pending => {
                // Registered at the first poll: its deadline is fixed by now.
                probe.deadline_ns.store(shared.ns(sleep.deadline()), SeqCst);
                self.held.push_back(Held { sleep, probe });
            }
        }
    }

    /// A delayed task (by `spawn_after` or `spawn_at`) that checks it runs on time and counts
    /// its runs.
    fn spawn_delayed(&mut self) {
        let id = self.shared.next_task_id.fetch_add(1, SeqCst);
        let d = self.rng.delay();
        let deadline = Instant::now() + d;
        let sh = self.shared.clone();
        let body = async move {
            sh.on_time("a delayed task", Instant::now(), deadline);
            sh.runs[id].fetch_add(1, SeqCst);
        };
        let task = if self.rng.below(2) == 0 {
            self.timer.spawn_after(d, body)
        } else {
            self.timer.spawn_at(deadline, body)
        };
        self.shared.delayed.fetch_add(1, SeqCst);
        self.delayed.push_back((id, task));
    }

    /// Cancels delayed task `id` or not (a coin toss), records a successful cancel, and awaits
    /// the task among [`joins`](Worker::joins).
    fn decide(&mut self, id: usize, task: DelayedTask<()>) {
        let c = self.rng.below(2) == 0 && task.cancel();
        if c {
            self.shared.cancelled[id].store(1, SeqCst);
            self.shared.delayed_cancel_true.fetch_add(1, SeqCst);
        }
        self.joins.push(Box::pin(join(id, c, task)));
    }

    /// Keeps the work in flight bounded (the caps), registers what was just pushed, and
    /// collects what is done.
    async fn bound_work_in_flight(&mut self) {
        while self.held.len() > HELD_CAP {
            let h = self.held.pop_front().expect("non-empty");
            drop_held(&self.shared, h, &mut self.dropped);
        }
        while self.delayed.len() > DELAYED_CAP {
            let (id, task) = self.delayed.pop_front().expect("non-empty");
            self.decide(id, task);
        }
        // Register what was just pushed, and collect what is done.
        let shared = &*self.shared;
        pump(&mut self.awaited, |()| {}).await;
        pump(&mut self.joins, |j| check_joined(shared, j)).await;
        while self.awaited.len() >= AWAIT_CAP {
            self.awaited.next().await;
        }
        while self.joins.len() >= JOIN_CAP {
            if let Some(j) = self.joins.next().await {
                check_joined(shared, j);
            }
        }
    }

    /// Drops every held sleep, decides on every delayed task, and awaits everything.
    async fn wind_down(mut self) -> WorkerReport {
        while let Some(h) = self.held.pop_front() {
            drop_held(&self.shared, h, &mut self.dropped);
        }
        while let Some((id, task)) = self.delayed.pop_front() {
            self.decide(id, task);
        }
        while self.awaited.next().await.is_some() {}
        while let Some(j) = self.joins.next().await {
            check_joined(&self.shared, j);
        }
        WorkerReport {
            dropped: self.dropped,
        }
    }
}

/// Runs [`WORKERS`] workers on one timer (built with [`MAX_PENDING`]), checks the ledger, and
/// checks the `max_pending` reservation is balanced afterwards.
fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().max_pending(MAX_PENDING).build().unwrap() });
    let shared = Arc::new(Shared::new());
    let ops = (TOTAL_OPS / WORKERS) * WORKERS;
    let started = std::time::Instant::now();
    let reports = run_workers(&rt, &timer, &shared);
    let took = started.elapsed();

    // Everything resolved: nothing may be left in the wheel.
    assert_eq!(timer.pending(), 0, "timers left in the wheel");
    assert_eq!(timer.metrics().pending, 0);

    // Let wakes that raced with the last drops finish, then check every probe.
    std::thread::sleep(Duration::from_millis(100));

    let s = &*shared;
    no_unexpected_outcome(s);
    awaited_sleeps_and_timeouts_all_completed(s);
    let held = held_sleeps_fired_or_were_cancelled(s, &reports);
    let ran = delayed_tasks_ran_unless_cancelled(s);
    let ledger = ledger(s, &held, ran);
    let max_late = Duration::from_micros(s.max_late_us.load(SeqCst));
    assert!(
        max_late < MAX_LATENESS,
        "a timer fired {max_late:?} after its deadline"
    );
    rt.block_on(the_reservation_is_balanced(&timer));

    let m = timer.metrics();
    let Ledger {
        registered,
        fired,
        cancelled,
    } = ledger;
    println!(
        "stress: {ops} ops by {WORKERS} workers in {took:?} = {:.0} ops/s; \
         registered {registered}: fired {fired}, cancelled {cancelled} \
         (sleeps {}, timeouts {}, held {}, delayed {}, \
         resets {}, raced drops {}); max lateness {max_late:?}; \
         firing passes {}",
        ops as f64 / took.as_secs_f64(),
        s.sleeps.load(SeqCst),
        s.timeouts.load(SeqCst),
        s.held.load(SeqCst),
        s.delayed.load(SeqCst),
        s.resets.load(SeqCst),
        held.raced,
        m.passes,
    );
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// Runs [`TASKS`] workers as tasks on `rt` and [`THREADS`] on plain threads that `block_on`
/// its handle, each with its own seed and `TOTAL_OPS / WORKERS` operations; returns their
/// reports once all are done.
fn run_workers(
    rt: &tokio::runtime::Runtime,
    timer: &Timer,
    shared: &Arc<Shared>,
) -> Vec<WorkerReport> {
    let per_worker = TOTAL_OPS / WORKERS;
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
    reports
}

/// No worker saw an unexpected outcome, and nothing fired early.
fn no_unexpected_outcome(s: &Shared) {
    let failures = s.failures.lock().unwrap().clone();
    assert_eq!(
        s.wrong.load(SeqCst),
        0,
        "unexpected outcomes, first ones: {failures:#?}"
    );
    assert_eq!(s.early.load(SeqCst), 0, "fired early: {failures:#?}");
}

/// Each awaited sleep completed exactly once; each timeout elapsed or was answered.
fn awaited_sleeps_and_timeouts_all_completed(s: &Shared) {
    let sleeps = s.sleeps.load(SeqCst);
    assert_eq!(s.sleeps_fired.load(SeqCst), sleeps, "awaited sleeps");
    let timeouts = s.timeouts.load(SeqCst);
    assert_eq!(
        s.timeouts_elapsed.load(SeqCst) + s.timeouts_ok.load(SeqCst),
        timeouts,
        "timeouts"
    );
}

/// How the held sleeps that were dropped ended.
#[derive(Clone, Copy)]
struct HeldTally {
    /// Woken before the drop.
    fired: u64,
    /// Not woken before the drop.
    cancelled: u64,
    /// Of the cancelled: woken anyway, by a pass that took it out of the wheel just before
    /// the drop.
    raced: u64,
}

/// Held sleeps: woken at most once, never early; fired before the drop or cancelled by it;
/// one dropped before its deadline is never woken afterwards.
fn held_sleeps_fired_or_were_cancelled(s: &Shared, reports: &[WorkerReport]) -> HeldTally {
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
    HeldTally {
        fired: held_fired,
        cancelled: held_cancelled,
        raced,
    }
}

/// Delayed tasks: cancelled ones never ran, every other one ran exactly once. Returns how
/// many ran.
fn delayed_tasks_ran_unless_cancelled(s: &Shared) -> u64 {
    let delayed = s.delayed.load(SeqCst);
    let cancel_true = s.delayed_cancel_true.load(SeqCst);
    assert_eq!(
        s.delayed_ok.load(SeqCst) + s.delayed_err_cancelled.load(SeqCst),
        delayed,
        "every delayed task resolved"
    );
    assert_eq!(s.delayed_err_cancelled.load(SeqCst), cancel_true);
    let ids = s.next_task_id.load(SeqCst);
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
    ran
}

/// Every timer registered, of every kind.
struct Ledger {
    registered: u64,
    fired: u64,
    cancelled: u64,
}

/// The whole ledger, for the report. It balances (every timer registered fired once or was
/// cancelled once) by the checks of each kind above, which is where a failure shows.
fn ledger(s: &Shared, held: &HeldTally, ran: u64) -> Ledger {
    let (sleeps, timeouts) = (s.sleeps.load(SeqCst), s.timeouts.load(SeqCst));
    let ready_at_once = s.held_ready_at_once.load(SeqCst);
    let cancel_true = s.delayed_cancel_true.load(SeqCst);
    let HeldTally {
        fired: held_fired,
        cancelled: held_cancelled,
        raced,
    } = *held;
    let registered = sleeps + timeouts + s.held.load(SeqCst) + s.delayed.load(SeqCst);
    let fired = sleeps + s.timeouts_elapsed.load(SeqCst) + ready_at_once + held_fired + raced + ran;
    let cancelled = s.timeouts_ok.load(SeqCst) + (held_cancelled - raced) + cancel_true;
    Ledger {
        registered,
        fired,
        cancelled,
    }
}

/// The `max_pending` reservation is exactly balanced: the full limit is available again, and
/// not one more.
async fn the_reservation_is_balanced(timer: &Timer) {
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
