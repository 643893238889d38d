//! Faults end in documented outcomes, never a hang or an abort.
//!
//! Misbehaving wakers (panicking, blocking, calling back into the timer), a runtime shut down
//! or dropped under pending timers, timer handles dropped under a pending timeout, delayed
//! tasks whose futures panic when dropped, and bad input not covered by the other test files.
//! Where a hang is the failure mode, the test is bounded by `tokio::time::timeout` (on paused
//! time it then fails at once) or by a watchdog thread on the real clock.

use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{
    sleep_wheel, spawn_after, timeout, DelayedTask, Elapsed, Sleep, Timer, TimerError,
};

mod common;
use common::{ms, poll_with, settle, step, CountingWaker};

const YEAR: Duration = Duration::from_secs(365 * 86_400);
const DAY: Duration = Duration::from_secs(86_400);

/// Runs `f` on its own thread and fails if it does not finish within `limit`.
fn with_watchdog<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let body = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(limit) {
        Ok(()) => body.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => match body.join() {
            Ok(out) => out,
            Err(payload) => resume_unwind(payload),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: not finished within {limit:?}"),
    }
}

/// Keeps the panics these tests cause on purpose (their messages say "on purpose") out of the
/// output; any other panic is reported as usual.
fn quiet_intended_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or_default();
            if !msg.contains("(on purpose)") {
                report(info);
            }
        }));
    });
}

fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A waker that panics when woken (after counting the attempt).
#[derive(Default)]
struct PanickingWaker(AtomicUsize);

impl PanickingWaker {
    fn attempts(&self) -> usize {
        self.0.load(SeqCst)
    }
}

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        panic!("this waker panics when woken (on purpose)");
    }
}

// ---------------------------------------------------------------------------------------------
// Misbehaving wakers
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_panicking_waker_is_contained_and_the_driver_carries_on() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let bad = Arc::new(PanickingWaker::default());
    let bad_waker = Waker::from(bad.clone());
    let good = Arc::new(CountingWaker::default());
    let good_waker = Waker::from(good.clone());
    let noop = futures::task::noop_waker();

    // Same deadline, same pass: the panicking waker is woken first.
    let mut s_bad = timer.sleep(ms(10));
    let mut s_good = timer.sleep(ms(10));
    assert!(poll_with(&mut s_bad, &bad_waker).is_pending());
    assert!(poll_with(&mut s_good, &good_waker).is_pending());
    assert_eq!(timer.pending(), 2);

    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert_eq!(
        bad.attempts(),
        1,
        "the driver fired the panicking waker once"
    );
    assert_eq!(
        good.count(),
        1,
        "a waker after the panicking one in the same pass is still woken"
    );
    assert!(s_bad.is_elapsed());
    assert!(poll_with(&mut s_bad, &noop).is_ready());
    assert!(
        !s_bad.is_shutdown(),
        "a panicking waker does not shut the timer down"
    );
    assert!(poll_with(&mut s_good, &noop).is_ready());
    assert!(!timer.is_shutdown());
    assert_eq!(timer.pending(), 0);

    // The driver is alive: a later sleep completes on time, a delayed task runs. (On paused
    // time the outer timeout would fire at once, failing the test, if the driver had died.)
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(60), timer.sleep(ms(5)))
        .await
        .expect("a later sleep on the same timer must complete");
    assert!(start.elapsed() >= ms(5) && start.elapsed() <= ms(6));
    let task = timer.spawn_after(ms(5), async { 7 });
    let out = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("a delayed task must still run");
    assert_eq!(out.unwrap(), 7);

    // Many panicking wakers in one pass (more than the driver's batch of 1024), interleaved
    // with counting ones: every counting waker is woken.
    let good = Arc::new(CountingWaker::default());
    let good_waker = Waker::from(good.clone());
    let before = bad.attempts();
    let mut many = Vec::new();
    for i in 0..3_000 {
        let mut s = timer.sleep(ms(10));
        let w = if i % 2 == 0 { &bad_waker } else { &good_waker };
        assert!(poll_with(&mut s, w).is_pending());
        many.push(s);
    }
    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert_eq!(bad.attempts() - before, 1_500);
    assert_eq!(good.count(), 1_500);
    for s in &mut many {
        assert!(poll_with(s, &noop).is_ready());
    }
    assert_eq!(timer.pending(), 0);

    // A panicking waker drained by shutdown: shutdown() returns normally, the others resolve.
    let mut s_bad = timer.sleep(Duration::from_secs(3_600));
    let mut s_good = timer.sleep(Duration::from_secs(3_600));
    assert!(poll_with(&mut s_bad, &bad_waker).is_pending());
    assert!(poll_with(&mut s_good, &good_waker).is_pending());
    let before = (bad.attempts(), good.count());
    timer.shutdown();
    assert_eq!((bad.attempts(), good.count()), (before.0 + 1, before.1 + 1));
    assert!(poll_with(&mut s_bad, &noop).is_ready());
    assert!(s_bad.is_shutdown());
    assert!(poll_with(&mut s_good, &noop).is_ready());
    assert!(s_good.is_shutdown());
}

/// A waker that blocks its caller for 50 ms when woken.
struct BlockingWaker {
    wakes: AtomicUsize,
}

impl Wake for BlockingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
        std::thread::sleep(ms(50));
    }
}

#[test]
fn a_blocking_waker_delays_but_does_not_stop_timers_due_at_the_same_time() {
    const BLOCKERS: usize = 4;
    const OTHERS: usize = 200;
    with_watchdog(Duration::from_secs(60), || {
        let rt = multi_thread(2);
        rt.block_on(async {
            let timer = Timer::builder().build().unwrap();
            let deadline = Instant::now() + ms(200);

            // The blocking wakers register first, so the driver wakes them first.
            let blockers: Vec<(Sleep, Arc<BlockingWaker>)> = (0..BLOCKERS)
                .map(|_| {
                    let w = Arc::new(BlockingWaker {
                        wakes: AtomicUsize::new(0),
                    });
                    let mut s = timer.sleep_until(deadline);
                    assert!(poll_with(&mut s, &Waker::from(w.clone())).is_pending());
                    (s, w)
                })
                .collect();
            let mut handles = Vec::new();
            for i in 0..OTHERS {
                let t = timer.clone();
                handles.push(tokio::spawn(async move {
                    if i % 2 == 0 {
                        t.sleep_until(deadline).await;
                    } else {
                        let r = t.timeout_at(deadline, std::future::pending::<()>()).await;
                        assert!(!r.unwrap_err().is_shutdown());
                    }
                    Instant::now()
                }));
            }
            let ran_at = timer.spawn_at(deadline, async { Instant::now() });

            let all = async {
                let mut at = Vec::new();
                for h in handles {
                    at.push(h.await.unwrap());
                }
                at.push(ran_at.await.unwrap());
                at
            };
            let at = tokio::time::timeout(Duration::from_secs(30), all)
                .await
                .expect("timers due with blocking wakers must still fire");
            let mut max_late = Duration::ZERO;
            for (i, t) in at.iter().enumerate() {
                assert!(*t >= deadline, "timer {i} fired {:?} early", deadline - *t);
                max_late = max_late.max(*t - deadline);
            }
            println!(
                "blocking wakers: {} timers fired, at most {max_late:?} late",
                at.len()
            );
            assert!(max_late < Duration::from_secs(20), "{max_late:?} late");

            let noop = futures::task::noop_waker();
            for (i, (mut s, w)) in blockers.into_iter().enumerate() {
                assert_eq!(w.wakes.load(SeqCst), 1, "blocker {i} woken once");
                assert!(poll_with(&mut s, &noop).is_ready());
                assert!(!s.is_shutdown());
            }
            assert_eq!(timer.pending(), 0);

            // And the timer still works afterwards.
            let start = Instant::now();
            tokio::time::timeout(Duration::from_secs(10), timer.sleep(ms(10)))
                .await
                .expect("a later sleep completes");
            assert!(start.elapsed() >= ms(10));
        });
    });
}

/// A waker that, when woken, calls back into its own timer: reads, registers, cancels.
struct ReentrantWaker {
    timer: Timer,
    victim: Mutex<Option<Sleep>>,
    task: Mutex<Option<DelayedTask<()>>>,
    registered: Mutex<Vec<Sleep>>,
    cancelled: AtomicBool,
    wakes: AtomicUsize,
    shut_down_on_wake: bool,
}

impl Wake for ReentrantWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
        let _ = self.timer.pending();
        let _ = self.timer.metrics();
        drop(self.victim.lock().unwrap().take());
        if let Some(t) = self.task.lock().unwrap().as_ref() {
            self.cancelled.store(t.cancel(), SeqCst);
        }
        if let Ok(s) = self.timer.try_sleep(Duration::from_secs(3_600)) {
            self.registered.lock().unwrap().push(s);
        }
        if self.shut_down_on_wake {
            self.timer.shutdown();
        }
    }
}

#[test]
fn a_waker_calling_back_into_the_timer_neither_deadlocks_nor_panics() {
    with_watchdog(Duration::from_secs(30), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let noop = futures::task::noop_waker();
            for shut_down_on_wake in [false, true] {
                let timer = Timer::builder().build().unwrap();
                let mut victim = timer.sleep(Duration::from_secs(3_600));
                assert!(poll_with(&mut victim, &noop).is_pending());
                let w = Arc::new(ReentrantWaker {
                    timer: timer.clone(),
                    victim: Mutex::new(Some(victim)),
                    task: Mutex::new(Some(
                        timer.spawn_after(Duration::from_secs(3_600), async {}),
                    )),
                    registered: Mutex::new(Vec::new()),
                    cancelled: AtomicBool::new(false),
                    wakes: AtomicUsize::new(0),
                    shut_down_on_wake,
                });
                let waker = Waker::from(w.clone());
                let mut s = timer.sleep(ms(10));
                assert!(poll_with(&mut s, &waker).is_pending());
                // A neighbour in the same pass, and one due later.
                let mut same = task::spawn(timer.sleep(ms(10)));
                assert_pending!(same.poll());
                let mut later = task::spawn(timer.sleep(ms(50)));
                assert_pending!(later.poll());
                assert_eq!(timer.pending(), 5);

                let start = Instant::now();
                tokio::time::timeout(Duration::from_secs(60), async {
                    tokio::time::sleep(ms(10)).await;
                    settle().await;
                })
                .await
                .unwrap();
                assert_eq!(w.wakes.load(SeqCst), 1, "shutdown={shut_down_on_wake}");
                assert!(w.victim.lock().unwrap().is_none());
                assert!(w.cancelled.load(SeqCst), "the waker cancelled the task");
                assert!(poll_with(&mut s, &noop).is_ready());
                assert!(same.is_woken());
                assert_ready!(same.poll());
                let task = w.task.lock().unwrap().take().unwrap();
                assert!(task.await.unwrap_err().is_cancelled());
                if shut_down_on_wake {
                    assert!(timer.is_shutdown());
                    assert!(later.is_woken());
                    assert_ready!(later.poll());
                    let mut added = w.registered.lock().unwrap().pop().unwrap();
                    assert!(poll_with(&mut added, &noop).is_ready());
                    assert!(added.is_shutdown(), "drained by the shutdown");
                    assert_eq!(timer.pending(), 0);
                } else {
                    // The sleep registered from inside the waker is pending; `later` fires.
                    assert_eq!(timer.pending(), 2, "`later` and the one the waker added");
                    tokio::time::timeout(Duration::from_secs(60), later)
                        .await
                        .expect("the driver keeps going");
                    assert!(start.elapsed() >= ms(50));
                    assert_eq!(timer.pending(), 1);
                    w.registered.lock().unwrap().clear();
                    assert_eq!(timer.pending(), 0);
                }
            }
        });
    });
}

// ---------------------------------------------------------------------------------------------
// Runtime shutdown and a dropped driver
// ---------------------------------------------------------------------------------------------

#[test]
fn runtime_shut_down_mid_flight_resolves_every_delayed_task() {
    const N: usize = 1_000;
    with_watchdog(Duration::from_secs(60), || {
        let rt = multi_thread(2);
        let finished: Arc<Vec<AtomicBool>> =
            Arc::new((0..N).map(|_| AtomicBool::new(false)).collect());
        let fin = finished.clone();
        let (handles, timer, default_timer) = rt.block_on(async move {
            let timer = Timer::builder().build().unwrap();
            let mut handles: Vec<(usize, DelayedTask<usize>)> = Vec::new();
            for i in 0..N {
                // Deadlines over 0..400 ms; the runtime shuts down after about 150 ms.
                let d = ms((i as u64 * 7) % 400);
                let t = timer.clone();
                match i % 5 {
                    0 => drop(tokio::spawn(async move { t.sleep(d).await })),
                    1 => drop(tokio::spawn(async move {
                        let _ = t.timeout(d, std::future::pending::<()>()).await;
                    })),
                    2 => drop(tokio::spawn(async move {
                        let _ = timeout(d, sleep_wheel(Duration::from_secs(3_600))).await;
                    })),
                    _ => {
                        let fin = fin.clone();
                        let body = async move {
                            if i % 2 == 0 {
                                // Still running when the runtime shuts down.
                                tokio::time::sleep(Duration::from_secs(10)).await;
                            }
                            fin[i].store(true, SeqCst);
                            i
                        };
                        let task = if i % 5 == 3 {
                            t.spawn_after(d, body)
                        } else {
                            spawn_after(d, body)
                        };
                        handles.push((i, task));
                    }
                }
            }
            tokio::time::sleep(ms(150)).await;
            (handles, timer, Timer::current())
        });
        let pending = timer.pending() + default_timer.pending();
        assert!(
            pending > 0,
            "timers are pending when the runtime shuts down"
        );
        rt.shutdown_timeout(ms(100));

        assert!(
            timer.is_shutdown(),
            "the explicit timer shut down with its runtime"
        );
        assert!(
            default_timer.is_shutdown(),
            "the default timer shut down too"
        );
        assert_eq!(timer.pending(), 0);
        assert_eq!(default_timer.pending(), 0);
        assert_eq!(timer.try_sleep(ms(1)).unwrap_err(), TimerError::Shutdown);

        let other = current_thread();
        let (mut ok, mut shut) = (0, 0);
        other.block_on(async {
            for (i, h) in handles {
                let r = tokio::time::timeout(Duration::from_secs(5), h)
                    .await
                    .unwrap_or_else(|_| panic!("delayed task {i} did not resolve: a hang"));
                match r {
                    Ok(v) => {
                        assert_eq!(v, i);
                        assert!(finished[i].load(SeqCst), "task {i}: Ok but did not finish");
                        ok += 1;
                    }
                    Err(e) => {
                        assert!(e.is_shutdown(), "task {i}: {e:?}");
                        assert!(!finished[i].load(SeqCst), "task {i} finished, yet {e:?}");
                        shut += 1;
                    }
                }
            }
        });
        println!("runtime shutdown: {ok} delayed tasks had run, {shut} resolved with shutdown");
        assert_eq!(ok + shut, N * 2 / 5);
        assert!(ok > 0, "some tasks ran before the shutdown");
        assert!(shut > 0, "some tasks were cut short by the shutdown");
    });
}

#[test]
fn dropping_the_driver_runtime_resolves_futures_polled_on_another_runtime() {
    const EACH: usize = 10;
    with_watchdog(Duration::from_secs(60), || {
        let a = multi_thread(1);
        let b = current_thread();
        let timer = a.block_on(async { Timer::builder().build().unwrap() });

        // Futures polled on B are driven by A's driver.
        let t = timer.clone();
        b.block_on(async move {
            let start = Instant::now();
            let mut s = t.sleep(ms(20));
            tokio::time::timeout(Duration::from_secs(10), &mut s)
                .await
                .expect("a sleep polled on B fires through A's driver");
            assert!(!s.is_shutdown());
            assert!(start.elapsed() >= ms(20));
        });

        let sleepers: Vec<_> = (0..EACH)
            .map(|_| {
                let t = timer.clone();
                b.spawn(async move {
                    let mut s = t.sleep(Duration::from_secs(3_600));
                    (&mut s).await;
                    (s.is_shutdown(), s.is_elapsed())
                })
            })
            .collect();
        let timeouts: Vec<_> = (0..EACH)
            .map(|_| {
                let t = timer.clone();
                b.spawn(async move {
                    t.timeout(Duration::from_secs(3_600), std::future::pending::<()>())
                        .await
                })
            })
            .collect();
        let delayed = {
            let _b = b.enter();
            timer.spawn_after(Duration::from_secs(3_600), async { 1 })
        };
        let unpolled = timer.sleep(Duration::from_secs(3_600));
        let expected = 2 * EACH + 1;
        b.block_on(async {
            for _ in 0..1_000 {
                if timer.pending() == expected {
                    break;
                }
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(
            timer.pending(),
            expected,
            "everything registered before the drop"
        );
        assert!(!timer.is_shutdown());

        drop(a); // drops the driver task

        assert!(
            timer.is_shutdown(),
            "the timer shut down with its driver's runtime"
        );
        assert_eq!(timer.pending(), 0);
        assert_eq!(
            timer.try_sleep(Duration::from_secs(1)).unwrap_err(),
            TimerError::Shutdown
        );
        let t = timer.clone();
        b.block_on(async move {
            let bound = Duration::from_secs(5);
            for (i, h) in sleepers.into_iter().enumerate() {
                let (is_shutdown, is_elapsed) = tokio::time::timeout(bound, h)
                    .await
                    .unwrap_or_else(|_| panic!("sleep {i} hangs"))
                    .unwrap();
                assert!(is_shutdown, "sleep {i} completes with is_shutdown()");
                assert!(is_elapsed);
            }
            for (i, h) in timeouts.into_iter().enumerate() {
                let r: Result<(), Elapsed> = tokio::time::timeout(bound, h)
                    .await
                    .unwrap_or_else(|_| panic!("timeout {i} hangs"))
                    .unwrap();
                assert!(r.unwrap_err().is_shutdown(), "timeout {i}");
            }
            let e = tokio::time::timeout(bound, delayed)
                .await
                .expect("the delayed task resolves")
                .unwrap_err();
            assert!(e.is_shutdown(), "{e:?}");
            let mut unpolled = unpolled;
            tokio::time::timeout(bound, &mut unpolled)
                .await
                .expect("a sleep first polled after the drop completes");
            assert!(unpolled.is_shutdown());

            // New registrations.
            assert_eq!(
                t.try_timeout(ms(5), std::future::ready(()))
                    .map(drop)
                    .unwrap_err(),
                TimerError::Shutdown
            );
            let late = t.try_spawn_after(ms(5), async {}).unwrap();
            assert!(late.await.unwrap_err().is_shutdown());
            let mut s = t.sleep(ms(5));
            tokio::time::timeout(bound, &mut s).await.unwrap();
            assert!(s.is_shutdown());
        });
    });
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outliving_every_timer_handle_still_times_out_at_its_deadline() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    // One polled (registered) before the handles go, one first polled after.
    let mut polled = task::spawn(timer.timeout(ms(30), std::future::pending::<()>()));
    assert_pending!(polled.poll());
    let unpolled = timer.timeout(ms(50), std::future::pending::<()>());
    let clone = timer.clone();
    drop(timer);
    drop(clone);
    settle().await;

    let err = tokio::time::timeout(Duration::from_secs(60), polled.into_inner())
        .await
        .expect("a registered timeout must still fire")
        .unwrap_err();
    assert!(
        !err.is_shutdown(),
        "timed out at its deadline, not shut down"
    );
    assert!(
        start.elapsed() >= ms(30) && start.elapsed() <= ms(31),
        "{:?}",
        start.elapsed()
    );

    let err = tokio::time::timeout(Duration::from_secs(60), unpolled)
        .await
        .expect("a timeout first polled after the handles were dropped must still fire")
        .unwrap_err();
    assert!(!err.is_shutdown());
    assert!(
        start.elapsed() >= ms(50) && start.elapsed() <= ms(51),
        "{:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// Delayed-task futures that panic when dropped
// ---------------------------------------------------------------------------------------------

/// A future that is ready at once with 7, and panics when dropped.
struct PanicsOnDrop;

impl Future for PanicsOnDrop {
    type Output = u32;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u32> {
        Poll::Ready(7)
    }
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("this future panics when dropped (on purpose)");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_task_whose_future_panics_on_drop_is_contained() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(Duration::from_secs(3_600), PanicsOnDrop);
    assert!(
        task.cancel(),
        "cancel stops it; the drop's panic is contained"
    );
    assert_eq!(timer.pending(), 0);
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("resolves")
        .unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_resolves_a_task_whose_future_panics_on_drop() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(Duration::from_secs(3_600), PanicsOnDrop);
    let other = timer.spawn_after(Duration::from_secs(3_600), async { 1 });
    timer.shutdown();
    assert_eq!(timer.pending(), 0);
    let e = tokio::time::timeout(Duration::from_secs(60), other)
        .await
        .expect("resolves")
        .unwrap_err();
    assert!(e.is_shutdown());
    // Documented: "pending delayed tasks resolve with DelayedError::is_shutdown".
    assert!(
        task.is_finished(),
        "a pending task must be finished once the timer shut down"
    );
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("awaiting a task drained by shutdown must not hang")
        .unwrap_err();
    assert!(err.is_shutdown(), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn a_task_whose_future_panics_on_drop_after_completing_is_not_reported_as_shutdown() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(ms(5), PanicsOnDrop);
    let r = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("resolves");
    assert!(!timer.is_shutdown());
    // The timer and the runtime are running: "shutdown" would be a false report. The output
    // (Ok(7)) or the panic (is_panic) are the documented outcomes.
    match r {
        Ok(v) => assert_eq!(v, 7),
        Err(e) => assert!(
            e.is_panic(),
            "the task ran and its future panicked when dropped, yet the error is {e:?} \
             (is_shutdown: {})",
            e.is_shutdown()
        ),
    }
    // The timer keeps working.
    let t = timer.spawn_after(ms(5), async { 2 });
    assert_eq!(t.await.unwrap(), 2);
}

// ---------------------------------------------------------------------------------------------
// Bad input (not covered by tests/sleep.rs, timeout.rs, timer.rs, delayed_task.rs)
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_instant_a_century_away_waits_and_one_past_the_30_year_horizon_fires() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    let century = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let ran = Arc::new(AtomicBool::new(false));

    let mut s = task::spawn(timer.sleep_until(century));
    assert_eq!(s.deadline(), century, "kept as given");
    assert_pending!(s.poll());
    assert!(!s.is_elapsed());
    let mut to = task::spawn(timer.timeout_at(century, std::future::pending::<()>()));
    assert_pending!(to.poll());
    let flag = ran.clone();
    let d = timer.spawn_at(century, async move { flag.store(true, SeqCst) });
    // Beyond the 30-year "far future" the crate and Tokio saturate Duration::MAX to: an
    // explicit instant there is still a real deadline.
    let thirty_one = start + 31 * YEAR;
    let mut s31 = task::spawn(timer.sleep_until(thirty_one));
    assert_pending!(s31.poll());
    assert_eq!(timer.pending(), 4);

    step(31 * YEAR - DAY).await;
    assert_pending!(s31.poll(), "not a day early");
    step(DAY).await;
    assert!(s31.is_woken(), "fires at 31 years");
    assert_ready!(s31.poll());
    assert!(Instant::now() >= thirty_one);

    step(60 * YEAR).await;
    assert!(!s.is_woken(), "a century-away sleep woken after 91 years");
    assert_pending!(s.poll());
    assert_pending!(to.poll());
    assert!(!d.is_finished());
    assert!(!ran.load(SeqCst));
    assert_eq!(timer.pending(), 3);

    drop(s);
    drop(to);
    assert!(d.cancel());
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn max_pending_of_usize_max_builds_and_works() {
    for max in [usize::MAX, usize::MAX - 1] {
        let timer = Timer::builder()
            .max_pending(max)
            .build()
            .expect("a huge limit is valid");
        let held: Vec<Sleep> = (0..1_000)
            .map(|_| timer.try_sleep(Duration::from_secs(1)).unwrap())
            .collect();
        let task = timer.try_spawn_after(ms(500), async { 5 }).unwrap();
        let mut to = task::spawn(
            timer
                .try_timeout(Duration::from_secs(2), std::future::pending::<()>())
                .unwrap(),
        );
        assert_pending!(to.poll());
        assert_eq!(timer.pending(), 1_002, "max = {max}");
        assert_eq!(task.await.unwrap(), 5);
        for s in held {
            s.await;
        }
        assert!(to
            .into_inner()
            .await
            .unwrap_err()
            .to_string()
            .contains("elapsed"));
        assert_eq!(timer.pending(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn reset_into_the_past_on_a_registered_sleep_completes_and_frees_its_slot() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let origin = Instant::now();
    tokio::time::advance(ms(100)).await;

    // Registered by try_sleep, never polled.
    let mut s = timer.try_sleep(Duration::from_secs(60)).unwrap();
    assert_eq!(timer.pending(), 1);
    assert!(timer.try_sleep(Duration::from_secs(60)).is_err(), "full");
    // Before the timer even existed.
    let past = origin.checked_sub(Duration::from_secs(5)).unwrap_or(origin);
    Pin::new(&mut s).reset(past);
    assert_eq!(s.deadline(), past);
    assert_eq!(timer.pending(), 0, "the entry is removed at once");
    assert!(s.is_elapsed());
    let mut s = task::spawn(s);
    assert_ready!(s.poll());
    assert!(!s.is_shutdown());
    let again = timer
        .try_sleep(Duration::from_secs(60))
        .expect("the reset freed the slot");

    // The same on a sleep registered by its first poll, reset to exactly now.
    drop(again);
    let mut s = task::spawn(timer.sleep(Duration::from_secs(60)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(Instant::now());
    assert_eq!(timer.pending(), 0);
    assert_ready!(s.poll());
    assert!(timer.try_sleep(Duration::from_secs(60)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_completed_sleep_stays_ready_when_polled_again() {
    let timer = Timer::builder().build().unwrap();
    let mut fired = task::spawn(timer.sleep(ms(10)));
    assert_pending!(fired.poll());
    let mut drained = task::spawn(timer.sleep(Duration::from_secs(3_600)));
    assert_pending!(drained.poll());
    step(ms(10)).await;
    for _ in 0..5 {
        assert_ready!(fired.poll());
        assert!(fired.is_elapsed());
        assert!(!fired.is_shutdown());
    }
    assert_eq!(timer.pending(), 1);

    timer.shutdown();
    for _ in 0..5 {
        assert_ready!(fired.poll());
        assert!(!fired.is_shutdown(), "it fired before the shutdown");
        assert_ready!(drained.poll());
        assert!(drained.is_shutdown());
        assert!(drained.is_elapsed());
    }
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_polled_again_after_it_elapsed_returns_the_same_error() {
    let timer = Timer::builder().build().unwrap();
    let mut t = task::spawn(timer.timeout(ms(10), std::future::pending::<()>()));
    assert_pending!(t.poll());
    step(ms(10)).await;
    let first = assert_ready!(t.poll()).unwrap_err();
    assert!(!first.is_shutdown());
    // Documented behaviour: polling again after `Err` (which callers should not do) does not
    // panic and does not wait again: it returns the same error.
    for _ in 0..3 {
        let again = assert_ready!(t.poll()).unwrap_err();
        assert_eq!(again, first);
    }
    assert_eq!(timer.pending(), 0);

    // The same for a timeout ended by shutdown.
    let mut t =
        task::spawn(timer.timeout(Duration::from_secs(3_600), std::future::pending::<()>()));
    assert_pending!(t.poll());
    timer.shutdown();
    let first = assert_ready!(t.poll()).unwrap_err();
    assert!(first.is_shutdown());
    for _ in 0..3 {
        assert_eq!(assert_ready!(t.poll()).unwrap_err(), first);
    }
}

#[tokio::test(start_paused = true)]
async fn spawn_at_a_century_away_can_be_cancelled_and_frees_its_slot() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let century = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let task = timer.spawn_at(century, async move { flag.store(true, SeqCst) });
    assert_eq!(timer.pending(), 1);
    assert!(timer.metrics().levels > 1, "{:?}", timer.metrics());
    assert_eq!(
        timer
            .try_spawn_after(Duration::from_secs(1), async {})
            .unwrap_err(),
        TimerError::Full { max_pending: 1 }
    );
    assert!(!task.is_finished());
    assert!(task.cancel());
    assert!(!task.cancel(), "exactly once");
    assert!(task.is_finished());
    assert_eq!(timer.pending(), 0);
    let s = timer
        .try_sleep(Duration::from_secs(1))
        .expect("the cancelled task's slot is free");
    drop(s);
    assert!(task.await.unwrap_err().is_cancelled());
    step(Duration::from_secs(10)).await;
    assert!(!ran.load(SeqCst));
    assert_eq!(timer.pending(), 0);
}

// Regressions found in review ---------------------------------------------------------------

/// A deadline past the driver's 30-year sleep cap used to make the driver spin: its capped
/// Tokio sleep completed, no pass was due, and the ready sleep was polled again forever.
#[test]
fn a_deadline_beyond_thirty_years_fires_without_spinning() {
    let elapsed = with_watchdog(Duration::from_secs(20), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let start = Instant::now();
            let century = Duration::from_secs(100 * 365 * 86_400);
            sleep_wheel(century).await;
            (start.elapsed(), century)
        })
    });
    assert!(elapsed.0 >= elapsed.1, "never early: {elapsed:?}");
}

/// A task that enters another runtime inside `block_in_place` must not leave that runtime's
/// timer behind for its later calls: the default timer is looked up by runtime, not by task.
#[test]
fn a_task_visiting_another_runtime_keeps_its_own_default_timer() {
    let fired = with_watchdog(Duration::from_secs(20), || {
        let rt_a = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt_a.block_on(async {
            tokio::spawn(async {
                let rt_b = tokio::task::block_in_place(|| {
                    let rt_b = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt_b.block_on(sleep_wheel(Duration::from_millis(1)));
                    rt_b
                });
                // Back on runtime A (rt_b is alive but not driven).
                let r = tokio::time::timeout(
                    Duration::from_secs(5),
                    sleep_wheel(Duration::from_millis(10)),
                )
                .await;
                tokio::task::block_in_place(|| drop(rt_b));
                r.is_ok()
            })
            .await
            .unwrap()
        })
    });
    assert!(fired, "the sleep on runtime A never fired");
}

/// A waker whose destructor uses the same timer: replacing it on a later poll must not drop
/// it under the shard lock (that deadlocked).
#[test]
fn a_waker_dropped_on_re_poll_may_use_the_timer() {
    struct UsesTimer(Timer);
    impl Wake for UsesTimer {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for UsesTimer {
        fn drop(&mut self) {
            let _ = self.0.pending();
        }
    }
    with_watchdog(Duration::from_secs(20), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let timer = rt.block_on(async { Timer::builder().shards(1).build().unwrap() });
        let _guard = rt.enter();
        let mut s = timer.sleep(Duration::from_secs(10));
        let w1 = Waker::from(Arc::new(UsesTimer(timer.clone())));
        assert!(Pin::new(&mut s)
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        drop(w1); // the wheel now holds the only reference
        let w2 = Waker::from(Arc::new(UsesTimer(timer.clone())));
        assert!(Pin::new(&mut s)
            .poll(&mut Context::from_waker(&w2))
            .is_pending());
        assert_eq!(timer.pending(), 1);
    });
}
