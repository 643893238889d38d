//! Integration tests for delayed tasks: `spawn_after`, `spawn_at`, `DelayedTask` and `DelayedError`.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{
    sleep_wheel, spawn_after, spawn_at, DelayedError, DelayedTask, Timer, TimerError,
};

mod common;
use common::{ms, settle, CountingWaker, XorShift};

const TICK: Duration = Duration::from_millis(1);

/// Asserts `at` lies in `[deadline, deadline + TICK]`.
#[track_caller]
fn assert_on_time(at: Instant, deadline: Instant) {
    assert!(
        at >= deadline,
        "ran {:?} before its deadline",
        deadline - at
    );
    assert!(
        at <= deadline + TICK,
        "ran {:?} after its deadline, more than one tick",
        at - deadline
    );
}

#[tokio::test(start_paused = true)]
async fn result_is_delivered_at_or_after_the_deadline_within_one_tick() {
    let start = Instant::now();
    let deadline = start + ms(250);
    let task = spawn_after(ms(250), async { (Instant::now(), "done") });
    let (ran_at, value) = task.await.expect("the task completes");
    assert_eq!(value, "done");
    assert_on_time(ran_at, deadline);

    // The same through spawn_at, with a deadline that is not a whole number of ticks.
    let deadline = Instant::now() + Duration::from_micros(12_345);
    let task = spawn_at(deadline, async { Instant::now() });
    let ran_at = task.await.expect("the task completes");
    assert_on_time(ran_at, deadline);
}

#[tokio::test(start_paused = true)]
async fn future_does_not_run_before_its_deadline() {
    let start = Instant::now();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let task = spawn_after(ms(100), async move {
        flag.store(true, SeqCst);
    });

    tokio::time::sleep_until(start + ms(99)).await;
    settle().await;
    assert!(!ran.load(SeqCst), "ran 1 ms before its deadline");
    assert!(!task.is_finished());

    tokio::time::sleep_until(start + ms(100)).await;
    settle().await;
    assert!(ran.load(SeqCst), "did not run at its deadline");
    assert!(task.is_finished());
    task.await.expect("the task completes");
}

#[tokio::test(start_paused = true)]
async fn zero_duration_and_past_deadline_run_promptly() {
    let timer = Timer::current();
    let passes = timer.metrics().passes;
    let start = Instant::now();
    let zero = spawn_after(Duration::ZERO, async { Instant::now() });
    let ran_at = zero.await.expect("zero-duration task completes");
    assert_eq!(ran_at, start, "a zero duration must not wait");

    tokio::time::advance(ms(10)).await;
    let now = Instant::now();
    let past = spawn_at(now - ms(5), async { Instant::now() });
    let ran_at = past.await.expect("past-deadline task completes");
    assert_eq!(ran_at, now, "a past deadline must not wait");

    // Both ran without being filed in the wheel: a filed entry would have needed a firing
    // pass to start it (checking `pending()` here could not tell: a pass would have emptied
    // the wheel again before the tasks ran).
    assert_eq!(
        timer.metrics().passes,
        passes,
        "a task due at once went through the wheel"
    );
    assert_eq!(timer.pending(), 0);

    // Even without awaiting the handle, the task runs once the runtime gets to it.
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let task = spawn_after(Duration::ZERO, async move { flag.store(true, SeqCst) });
    settle().await;
    assert!(ran.load(SeqCst));
    assert!(task.is_finished());
}

#[tokio::test(start_paused = true)]
async fn cancel_before_deadline_prevents_the_run() {
    let timer = Timer::current();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let task = spawn_after(ms(100), async move {
        flag.store(true, SeqCst);
        1
    });
    assert_eq!(timer.pending(), 1);
    assert!(!task.is_finished());

    tokio::time::sleep(ms(50)).await;
    assert!(task.cancel(), "the first cancel stops the task");
    assert_eq!(timer.pending(), 0, "cancel removes the timer at once");
    assert!(task.is_finished(), "a cancelled task is finished");
    assert!(!task.cancel(), "the second cancel changes nothing");

    tokio::time::sleep(ms(1_000)).await;
    settle().await;
    assert!(!ran.load(SeqCst), "a cancelled task must never run");
    assert!(!task.cancel());

    let err = task.await.expect_err("a cancelled task has no output");
    assert!(err.is_cancelled());
    assert!(!err.is_panic());
    assert!(!err.is_shutdown());
}

#[tokio::test(start_paused = true)]
async fn cancel_drops_the_future_without_running_it() {
    struct DropFlag(Arc<AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = DropFlag(dropped.clone());
    let task = spawn_after(ms(100), async move {
        let _guard = guard;
        unreachable!("cancelled");
    });
    assert!(!dropped.load(SeqCst));
    assert!(task.cancel());
    assert!(dropped.load(SeqCst), "cancel drops the future at once");
    assert!(task.await.unwrap_err().is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn cancel_after_start_returns_false_and_task_completes() {
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let (tx, rx) = oneshot::channel::<u32>();
    let task = spawn_after(ms(20), async move {
        flag.store(true, SeqCst);
        rx.await.expect("sender kept") * 2
    });

    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert!(started.load(SeqCst), "the task started at its deadline");
    assert!(!task.is_finished(), "it is blocked on the channel");

    assert!(!task.cancel(), "a started task cannot be cancelled");
    assert!(!task.cancel());
    assert!(!task.is_finished(), "cancel did not interrupt it");

    tx.send(21).unwrap();
    assert_eq!(task.await.expect("the task completes"), 42);
}

#[tokio::test(start_paused = true)]
async fn cancel_after_start_with_long_sleep_returns_false() {
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let start = Instant::now();
    let task = spawn_after(ms(10), async move {
        flag.store(true, SeqCst);
        tokio::time::sleep(ms(500)).await;
        "slow"
    });
    tokio::time::sleep(ms(100)).await;
    assert!(started.load(SeqCst));
    assert!(!task.cancel());
    assert_eq!(task.await.unwrap(), "slow");
    assert!(start.elapsed() >= ms(510));
}

#[tokio::test(start_paused = true)]
async fn cancel_after_completion_returns_false() {
    let mut task = spawn_after(ms(10), async { 5 });
    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert!(task.is_finished());
    assert!(!task.cancel(), "a finished task cannot be cancelled");
    assert_eq!((&mut task).await.unwrap(), 5, "the output is still there");
    assert!(task.is_finished());
    assert!(!task.cancel(), "nor once its output was taken");
}

#[tokio::test(start_paused = true)]
async fn panicking_task_reports_the_panic_and_timers_keep_working() {
    let task = spawn_after(ms(10), async {
        if true {
            panic!("boom");
        }
    });
    let err = task.await.expect_err("the task panicked");
    assert!(err.is_panic());
    assert!(!err.is_cancelled());
    assert!(!err.is_shutdown());
    let payload = err.into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));

    // A formatted panic (with a runtime argument) carries a String.
    let n = std::hint::black_box(2);
    let task = spawn_after(ms(10), async move {
        if true {
            panic!("boom {n}");
        }
    });
    let err = task.await.unwrap_err();
    let payload = err.try_into_panic().expect("a panic error");
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("boom 2")
    );

    // The timer survived: a later sleep and a later delayed task still fire on time.
    let start = Instant::now();
    sleep_wheel(ms(30)).await;
    assert_on_time(Instant::now(), start + ms(30));
    let start = Instant::now();
    let later = spawn_after(ms(40), async { Instant::now() });
    assert_on_time(later.await.unwrap(), start + ms(40));
}

#[tokio::test(start_paused = true)]
async fn self_rearming_task_fires_repeatedly_at_the_right_times() {
    struct State {
        count: AtomicUsize,
        times: Mutex<Vec<Instant>>,
    }

    fn arm(state: Arc<State>) {
        drop(spawn_after(ms(100), async move {
            state.times.lock().unwrap().push(Instant::now());
            if state.count.fetch_add(1, SeqCst) + 1 < 5 {
                arm(state);
            }
        }));
    }

    let start = Instant::now();
    let state = Arc::new(State {
        count: AtomicUsize::new(0),
        times: Mutex::new(Vec::new()),
    });
    arm(state.clone());

    tokio::time::sleep(ms(2_000)).await;
    settle().await;
    assert_eq!(state.count.load(SeqCst), 5, "fired exactly five times");
    let times = state.times.lock().unwrap().clone();
    assert_eq!(times.len(), 5);
    for (i, at) in times.iter().enumerate() {
        assert_on_time(*at, start + ms(100) * (i as u32 + 1));
    }
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_does_not_cancel() {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let task = spawn_after(ms(50), async move { flag.store(true, SeqCst) });
    drop(task);
    assert_eq!(Timer::current().pending(), 1, "still registered");
    tokio::time::sleep(ms(60)).await;
    settle().await;
    assert!(
        ran.load(SeqCst),
        "a dropped handle must not cancel the task"
    );
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn many_delayed_tasks_each_run_exactly_once_never_early() {
    const N: usize = 1000;
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15);
    let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(N);
    let mut immediate = 0;
    for i in 0..N {
        // Up to 5 s, microsecond resolution, so deadlines fall inside ticks too.
        let delay = Duration::from_micros(rng.next() % 5_000_000);
        let deadline = start + delay;
        immediate += usize::from(delay.is_zero());
        let counts = counts.clone();
        let fut = async move {
            counts[i].fetch_add(1, SeqCst);
            Instant::now()
        };
        let task = if i % 2 == 0 {
            spawn_after(delay, fut)
        } else {
            spawn_at(deadline, fut)
        };
        tasks.push((deadline, task));
    }
    assert_eq!(
        Timer::current().pending(),
        N - immediate,
        "every task with a future deadline is registered"
    );

    for (i, (deadline, task)) in tasks.into_iter().enumerate() {
        let ran_at = task.await.unwrap_or_else(|e| panic!("task {i}: {e}"));
        assert_on_time(ran_at, deadline);
    }
    tokio::time::sleep(ms(10_000)).await;
    settle().await;
    for (i, c) in counts.iter().enumerate() {
        assert_eq!(c.load(SeqCst), 1, "task {i} ran {} times", c.load(SeqCst));
    }
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn delayed_error_traits_and_conversions() {
    fn assert_traits<T: std::fmt::Debug + std::fmt::Display + std::error::Error + Send + Sync>() {}
    assert_traits::<DelayedError>();
    fn assert_send<T: Send>() {}
    assert_send::<DelayedTask<u8>>();

    let task = spawn_after(ms(100), async {});
    assert!(task.cancel());
    let cancelled = task.await.unwrap_err();
    assert!(!format!("{cancelled}").is_empty());
    assert!(format!("{cancelled:?}").contains("Cancel"));
    assert!(std::error::Error::source(&cancelled).is_none());
    let back = cancelled
        .try_into_panic()
        .expect_err("a cancelled error is not a panic");
    assert!(back.is_cancelled(), "try_into_panic gives the error back");

    let task = spawn_after(ms(1), async {
        if true {
            panic!("p");
        }
    });
    let panicked = task.await.unwrap_err();
    assert!(!panicked.to_string().is_empty());
    assert!(format!("{panicked:?}").contains("Panic"));
    assert_ne!(panicked.to_string(), back.to_string());

    let timer = Timer::builder().build().unwrap();
    timer.shutdown();
    let shut = timer.spawn_after(ms(1), async {}).await.unwrap_err();
    assert!(shut.is_shutdown());
    assert!(!shut.to_string().is_empty());
    assert!(format!("{shut:?}").contains("Shutdown"));
    assert!(shut.try_into_panic().unwrap_err().is_shutdown());

    // Debug of the handle does not panic and says whether it finished.
    let task = spawn_after(ms(5), async {});
    assert!(format!("{task:?}").contains("false"));
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "called on a non-panic error")]
async fn into_panic_on_a_cancelled_error_panics() {
    let task = spawn_after(ms(100), async {});
    assert!(task.cancel());
    let err = task.await.unwrap_err();
    let _ = err.into_panic();
}

#[tokio::test(start_paused = true)]
async fn polling_after_completion_panics() {
    let mut task = spawn_after(ms(10), async { 7 });
    assert_eq!((&mut task).await.unwrap(), 7);
    assert!(task.is_finished());

    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let result = catch_unwind(AssertUnwindSafe(|| Pin::new(&mut task).poll(&mut cx)));
    let payload = result.expect_err("polling a completed DelayedTask must panic");
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(msg.contains("after it completed"), "message: {msg}");
    // The handle is still usable afterwards.
    assert!(task.is_finished());
    assert!(!task.cancel());
}

#[tokio::test(start_paused = true)]
async fn handle_is_woken_when_the_task_completes() {
    let mut handle = task::spawn(spawn_after(ms(30), async { 3 }));
    assert_pending!(handle.poll());
    assert!(!handle.is_woken());
    tokio::time::sleep(ms(30)).await;
    settle().await;
    assert!(handle.is_woken(), "completion wakes the awaiting task");
    assert_eq!(assert_ready!(handle.poll()).unwrap(), 3);
}

#[tokio::test(start_paused = true)]
async fn cancel_wakes_a_waiting_handle() {
    let mut handle = task::spawn(spawn_after(ms(1_000), async { 1 }));
    assert_pending!(handle.poll());
    assert!(!handle.is_woken());
    assert!(handle.cancel());
    assert!(handle.is_woken(), "cancel wakes whoever awaits the handle");
    let err = assert_ready!(handle.poll()).unwrap_err();
    assert!(err.is_cancelled());
}

#[test]
#[should_panic(expected = "runtime")]
fn spawn_after_outside_a_runtime_panics() {
    let _task = spawn_after(ms(1), async {});
}

#[test]
fn cancel_racing_the_deadline_stops_or_runs_each_task_exactly_once() {
    const N: usize = 200;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut stopped, mut completed) = (0, 0);
        // At least 15 rounds, more (up to 100) until both sides of the race were seen: a
        // stalled machine can fire every timer late in a few rounds.
        for round in 0..100u64 {
            if round >= 15 && stopped > 0 && completed > 0 {
                break;
            }
            let runs: Arc<Vec<AtomicUsize>> =
                Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
            let tasks: Vec<_> = (0..N)
                .map(|i| {
                    let runs = runs.clone();
                    spawn_after(
                        Duration::from_micros(1_500 + 250 * (i as u64 % 8)),
                        async move {
                            runs[i].fetch_add(1, SeqCst);
                            i
                        },
                    )
                })
                .collect();
            // Cancel around the deadlines, from this (possibly other) worker thread.
            std::thread::sleep(Duration::from_micros(2_000 + 300 * (round % 10)));
            let cancelled: Vec<bool> = tasks.iter().map(|t| t.cancel()).collect();
            for (i, (task, was_cancelled)) in tasks.into_iter().zip(&cancelled).enumerate() {
                match task.await {
                    Ok(v) => {
                        assert!(!was_cancelled, "task {i}: cancel returned true but it ran");
                        assert_eq!(v, i);
                        completed += 1;
                    }
                    Err(e) => {
                        assert!(*was_cancelled, "task {i}: {e} but cancel returned false");
                        assert!(e.is_cancelled());
                        stopped += 1;
                    }
                }
            }
            tokio::time::sleep(ms(5)).await;
            for (i, c) in cancelled.iter().enumerate() {
                let expected = usize::from(!c);
                assert_eq!(runs[i].load(SeqCst), expected, "task {i} (cancelled: {c})");
            }
        }
        // Both sides of the race were taken: cancels that beat the deadline and tasks that
        // ran first (else the test exercised no race at all).
        assert!(stopped > 0, "no cancel beat its deadline");
        assert!(completed > 0, "no task ran before its cancel");
    });
}

// ---------------------------------------------------------------------------------------------
// Review findings (issue: correctness)
// ---------------------------------------------------------------------------------------------

/// `cancel` returned true on a task that had already resolved as shut down (it never would
/// have run): it must be true only when it stopped a task that would otherwise have run.
#[tokio::test(start_paused = true)]
async fn cancel_is_false_for_a_task_refused_by_a_shut_down_timer() {
    let timer = Timer::builder().build().unwrap();
    timer.shutdown();
    let d = timer.try_spawn_after(ms(10), async { 1 }).unwrap();
    assert!(d.is_finished());
    assert!(!d.cancel(), "nothing was stopped: the timer had shut down");
    assert!(d.await.unwrap_err().is_shutdown());

    let d = timer.spawn_at(Instant::now() + ms(10), async { 2 });
    assert!(!d.cancel());
    assert!(d.await.unwrap_err().is_shutdown());
}

/// The same when the registration races with the shutdown (2 495 of 40 000 tasks in the
/// review's stress run): whatever the interleaving, `cancel()` is true exactly when the task
/// ends cancelled, and false when it ends shut down.
#[test]
fn cancel_racing_a_shutdown_is_true_only_for_tasks_it_stopped() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut stopped, mut refused) = (0, 0);
        for round in 0..20 {
            let timer = Timer::builder().build().unwrap();
            let started = Arc::new(AtomicUsize::new(0));
            let spawner = {
                let (timer, started) = (timer.clone(), started.clone());
                tokio::spawn(async move {
                    let mut outcomes = Vec::new();
                    for _ in 0..500 {
                        let d = timer.spawn_after(Duration::from_secs(60), async {});
                        let cancelled = d.cancel();
                        outcomes.push((cancelled, d.await.unwrap_err()));
                        started.fetch_add(1, SeqCst);
                        tokio::task::yield_now().await;
                    }
                    outcomes
                })
            };
            // The shutdown lands among the registrations, once the first has been cancelled.
            while started.load(SeqCst) == 0 && !spawner.is_finished() {
                tokio::task::yield_now().await;
            }
            timer.shutdown();
            for (cancelled, err) in spawner.await.unwrap() {
                assert_eq!(
                    cancelled,
                    err.is_cancelled(),
                    "round {round}: cancel() said {cancelled}, the task ended {err}"
                );
                assert!(err.is_cancelled() ^ err.is_shutdown());
                if cancelled {
                    stopped += 1;
                } else {
                    refused += 1;
                }
            }
        }
        assert!(
            stopped >= 20,
            "each round cancels one task before its shutdown"
        );
        assert!(refused > 0, "no registration met the shutdown");
    });
}

#[tokio::test(start_paused = true)]
async fn reset_moves_a_waiting_task_later_earlier_and_into_the_past() {
    let start = Instant::now();
    let ran_at = Arc::new(Mutex::new(None));
    let r = ran_at.clone();
    let mut t = spawn_at(start + ms(100), async move {
        *r.lock().unwrap() = Some(Instant::now());
    });
    assert_eq!(t.deadline(), start + ms(100));
    // Later, and again later (lazily re-filed: nothing runs at the old deadline).
    assert!(t.reset(start + ms(300)));
    assert!(t.reset(start + ms(500)));
    assert_eq!(t.deadline(), start + ms(500));
    tokio::time::sleep_until(start + ms(499)).await;
    settle().await;
    assert!(
        ran_at.lock().unwrap().is_none(),
        "ran before its new deadline"
    );
    // Earlier, to an instant already passed: runs at once.
    assert!(t.reset(start + ms(450)));
    (&mut t).await.unwrap_or_else(|_| unreachable!());
    let at = ran_at.lock().unwrap().unwrap();
    assert_on_time(at, start + ms(499));

    // Earlier, to an instant still ahead: runs then, not at the old deadline.
    let start = Instant::now();
    let mut t = spawn_at(start + ms(500), async { Instant::now() });
    tokio::time::sleep_until(start + ms(100)).await;
    assert!(t.reset(start + ms(200)));
    assert_eq!(t.deadline(), start + ms(200));
    assert_on_time((&mut t).await.unwrap(), start + ms(200));

    // Into the past: starts at once.
    let mut t = spawn_after(Duration::from_secs(60), async { Instant::now() });
    let now = Instant::now();
    assert!(t.reset(now - ms(5)));
    assert_on_time((&mut t).await.unwrap(), now);
}

/// A delayed task reset to an instant the wheel's time has already passed runs without time
/// moving, also when the last firing pass came at a clock reading between two of Tokio's
/// milliseconds: the driver passes at once for work filed already due, where its alarm (a
/// Tokio sleep, rounded up to Tokio's next millisecond) would wait for a paused clock driven
/// by `advance` to move.
#[tokio::test(start_paused = true)]
async fn a_reset_into_the_past_after_a_pass_off_tokios_grid_runs_without_time_moving() {
    let start = Instant::now();
    let timer = Timer::builder().build().unwrap();
    let mut other = task::spawn(timer.sleep_until(start + ms(20)));
    assert_pending!(other.poll());
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let mut t = timer.spawn_after(Duration::from_secs(60), async move {
        r.store(true, SeqCst);
    });
    tokio::time::advance(ms(35) + Duration::from_micros(500)).await;
    settle().await;
    assert!(other.is_woken(), "fired in a pass at 35.5 ms");
    assert!(t.reset(start + ms(10)));
    settle().await;
    assert!(ran.load(SeqCst), "waited for the clock to move");
}

#[tokio::test(start_paused = true)]
async fn reset_keeps_the_task_pending_and_renewals_postpone_it() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let start = Instant::now();
    let mut lease = timer.spawn_after(ms(30), async { Instant::now() });
    for i in 1..=10 {
        tokio::time::sleep_until(start + ms(10 * i)).await;
        assert!(lease.reset(Instant::now() + ms(30)), "renewal {i}");
        assert_eq!(timer.pending(), 1, "the renewal keeps its one slot");
    }
    let expired = (&mut lease).await.unwrap();
    assert_on_time(expired, start + ms(130));
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn reset_is_false_once_the_task_started_was_cancelled_or_shut_down() {
    let mut t = spawn_after(ms(1), async {});
    (&mut t).await.unwrap();
    assert!(!t.reset(Instant::now() + ms(10)));
    assert_eq!(t.deadline(), Instant::now() + ms(10));

    let mut t = spawn_after(ms(10), async {});
    assert!(t.cancel());
    assert!(!t.reset(Instant::now() + ms(10)));

    let timer = Timer::builder().build().unwrap();
    let mut t = timer.spawn_after(ms(10), async {});
    timer.shutdown();
    assert!(!t.reset(Instant::now() + ms(10)));
    assert!(t.await.unwrap_err().is_shutdown());

    // Due at once when spawned: nothing left to move.
    let mut t = spawn_after(Duration::ZERO, async {});
    assert!(!t.reset(Instant::now() + ms(10)));
}

/// As with Tokio's `JoinHandle`, dropping the handle lets go of the waker of whoever awaited
/// it: a detached task must not keep the awaiting task alive until it runs (here an hour).
#[tokio::test(start_paused = true)]
async fn dropping_an_awaited_handle_releases_its_waker() {
    let woken = Arc::new(CountingWaker::default());
    let waker = Waker::from(woken.clone());
    let mut t = spawn_after(Duration::from_secs(3_600), async { 1 });
    assert!(Pin::new(&mut t)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(waker);
    assert_eq!(Arc::strong_count(&woken), 2, "the handle holds the waker");
    drop(t);
    assert_eq!(
        Arc::strong_count(&woken),
        1,
        "a dropped handle still held the waker"
    );
    tokio::time::sleep(Duration::from_secs(3_601)).await;
    settle().await;
    assert_eq!(woken.count(), 0, "nor is it woken when the task finishes");
}

/// A value (held by a future, or a task's output) whose destructor panics (on purpose), unless
/// it is dropped while unwinding.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a delayed task's future or output panics when dropped (on purpose)");
        }
    }
}

/// A future refused by a shut-down timer never runs, and, as one cancelled or drained by a
/// shutdown, is dropped with its destructor's panic contained: `spawn_after` on a shut-down
/// timer does not panic, it resolves with the shutdown error.
#[tokio::test(start_paused = true)]
async fn a_refused_future_that_panics_when_dropped_is_contained() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holds_the_slot = timer.spawn_after(Duration::from_secs(10), async {});
    let bomb = PanicsOnDrop;
    let full = timer.try_spawn_after(ms(10), async move {
        let _bomb = &bomb;
    });
    assert!(matches!(full, Err(TimerError::Full { .. })));

    timer.shutdown();
    let bomb = PanicsOnDrop;
    let refused = timer.spawn_after(ms(10), async move {
        let _bomb = &bomb;
    });
    assert!(refused.await.unwrap_err().is_shutdown());
}

/// A delayed task whose deadline passed but that no firing pass had started when its timer
/// shut down never runs: it resolves with the shutdown error (a sleep would count as elapsed).
/// Real time: a current-thread runtime whose only task blocks cannot fire its timer.
#[test]
fn a_task_due_but_not_started_at_shutdown_resolves_as_shut_down() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let t = timer.spawn_after(ms(1), async move { flag.store(true, SeqCst) });
        std::thread::sleep(ms(20)); // the deadline passes; the runtime cannot fire
        timer.shutdown();
        assert!(t.await.unwrap_err().is_shutdown());
        settle().await;
        assert!(!ran.load(SeqCst));
    });
}

/// The handle has the auto traits of Tokio's `JoinHandle`, whatever its output: `Send`, `Sync`
/// and `Unpin` for any `Send` output (`!Sync` ones too), and unwind-safe, so it can be used
/// inside `catch_unwind` without `AssertUnwindSafe`.
#[tokio::test(start_paused = true)]
async fn the_handle_has_the_auto_traits_of_a_join_handle() {
    use std::panic::{RefUnwindSafe, UnwindSafe};
    fn join_handle_like<H: Send + Sync + Unpin + UnwindSafe + RefUnwindSafe>(_: &H) {}
    join_handle_like(&tokio::spawn(async { std::cell::Cell::new(1u8) }));
    let t = spawn_after(ms(1), async { std::cell::Cell::new(5u8) });
    join_handle_like(&t);
    assert!(!catch_unwind(|| t.is_finished()).unwrap());
    assert_eq!(t.await.unwrap().get(), 5);
}

/// As Tokio's `JoinHandle`: dropping a handle whose task finished with an output nobody took
/// (or a panic's payload) drops it with its destructor's panic contained; the panic does not
/// reach whoever dropped the handle (polled or not).
#[tokio::test(start_paused = true)]
async fn dropping_a_handle_drops_an_untaken_output_that_panics_contained() {
    for polled in [false, true] {
        let mut t = spawn_after(ms(10), async { PanicsOnDrop });
        if polled {
            let waker = Waker::from(Arc::new(CountingWaker::default()));
            assert!(Pin::new(&mut t)
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
        }
        tokio::time::sleep(ms(20)).await;
        settle().await;
        assert!(t.is_finished());
        assert!(
            catch_unwind(AssertUnwindSafe(move || drop(t))).is_ok(),
            "the output's panic reached the handle's dropper (polled: {polled})"
        );
    }

    // The same for the payload of a task that panicked.
    let t = spawn_after(ms(10), async {
        std::panic::panic_any(PanicsOnDrop);
    });
    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert!(t.is_finished());
    assert!(
        catch_unwind(AssertUnwindSafe(move || drop(t))).is_ok(),
        "the panic payload's panic reached the handle's dropper"
    );
}

/// A waker that counts its wakes, then panics (on purpose).
#[derive(Default)]
struct PanickingWaker {
    woken: AtomicUsize,
}

impl std::task::Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, SeqCst);
        panic!("the awaiting task's waker panics (on purpose)");
    }
}

/// At a shutdown's drain, the waker of whoever awaits a delayed task is user code and may
/// panic: the task's future is still dropped there, inside the drain (its destructor's panic
/// contained), never left for later (when the handle is dropped, where its panic would reach
/// the dropper).
#[tokio::test(start_paused = true)]
async fn a_panicking_awaiter_waker_at_shutdown_still_drops_the_future_contained() {
    struct DropFlag(Arc<AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
            if !std::thread::panicking() {
                panic!("a delayed task's future or output panics when dropped (on purpose)");
            }
        }
    }
    let timer = Timer::builder().build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = DropFlag(dropped.clone());
    let mut t = timer.spawn_after(Duration::from_secs(3_600), async move {
        let _guard = guard;
        unreachable!("shut down first");
    });
    let panicking = Arc::new(PanickingWaker::default());
    let waker = Waker::from(panicking.clone());
    assert!(Pin::new(&mut t)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    timer.shutdown();
    assert_eq!(
        panicking.woken.load(SeqCst),
        1,
        "the awaiter's waker called"
    );
    assert!(
        dropped.load(SeqCst),
        "the drain skipped the future's drop after the awaiter's waker panicked"
    );
    let t = catch_unwind(AssertUnwindSafe(move || {
        drop(t);
    }));
    assert!(t.is_ok(), "the future's panic reached the handle's dropper");
}

/// A panicking waker of whoever awaits the handle is contained wherever the task resolves:
/// at a cancel, the canceller gets `true`, not the waker's panic.
#[tokio::test(start_paused = true)]
async fn a_panicking_awaiter_waker_at_cancel_is_contained() {
    let mut t = spawn_after(Duration::from_secs(3_600), async { 1 });
    let panicking = Arc::new(PanickingWaker::default());
    let waker = Waker::from(panicking.clone());
    assert!(Pin::new(&mut t)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let cancelled = catch_unwind(AssertUnwindSafe(|| t.cancel()));
    assert!(matches!(cancelled, Ok(true)), "{cancelled:?}");
    assert_eq!(
        panicking.woken.load(SeqCst),
        1,
        "the awaiter's waker called"
    );
    assert!(t.await.unwrap_err().is_cancelled());
}

/// A task reset to a deadline already passed is due at once: the timer's lateness counts it
/// from the reset, not from the past deadline (an hour late, or late since the timer was
/// built), so one such reset does not inflate the lateness figures.
#[tokio::test(start_paused = true)]
async fn a_reset_into_the_past_counts_lateness_from_the_reset() {
    let timer = Timer::builder().build().unwrap();
    let built = Instant::now();
    tokio::time::advance(Duration::from_secs(60)).await;
    for past in [
        built + Duration::from_secs(30),
        built - Duration::from_secs(3_600),
    ] {
        let before = timer.metrics().lateness;
        let mut t = timer.spawn_after(Duration::from_secs(60), async { Instant::now() });
        tokio::time::advance(ms(10)).await;
        let reset_at = Instant::now();
        assert!(t.reset(past));
        assert_on_time((&mut t).await.unwrap(), reset_at);
        let window = timer.metrics().lateness.since(&before);
        assert_eq!(window.count(), 1);
        assert!(
            window.max() <= 2 * TICK,
            "a reset into the past counted {:?} late",
            window.max()
        );
    }
}

/// A waker that counts its wakes and records whether, when woken, the delayed task's future
/// (which sets `dropped` when dropped) was still alive.
struct WokenBeforeDropWaker {
    dropped: Arc<AtomicBool>,
    woken_before_drop: AtomicBool,
    woken: AtomicUsize,
}

impl std::task::Wake for WokenBeforeDropWaker {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, SeqCst);
        if !self.dropped.load(SeqCst) {
            self.woken_before_drop.store(true, SeqCst);
        }
    }
}

/// A future pending forever that sets `dropped` when dropped, and a waker that tells whether
/// it was woken before that.
fn drop_order_probe() -> (
    impl Future<Output = ()> + Send + 'static,
    Arc<AtomicBool>,
    Arc<WokenBeforeDropWaker>,
) {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = common::SetOnDrop(dropped.clone());
    let fut = async move {
        let _flag = flag;
        std::future::pending::<()>().await;
    };
    let waker = Arc::new(WokenBeforeDropWaker {
        dropped: dropped.clone(),
        woken_before_drop: AtomicBool::new(false),
        woken: AtomicUsize::new(0),
    });
    (fut, dropped, waker)
}

/// As Tokio drops a task's future before its `JoinHandle` resolves: when a timer's shutdown
/// resolves a waiting task, whoever awaits the handle is woken (and `is_finished` turns true)
/// only once the future, and whatever it holds (a permit, a connection), is gone.
#[tokio::test(start_paused = true)]
async fn a_shutdown_drops_the_future_before_the_handle_resolves() {
    let timer = Timer::builder().build().unwrap();
    let (fut, dropped, probe) = drop_order_probe();
    let mut t = timer.spawn_after(Duration::from_secs(3_600), fut);
    let waker = Waker::from(probe.clone());
    assert!(Pin::new(&mut t)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    timer.shutdown();
    assert!(dropped.load(SeqCst));
    assert_eq!(
        probe.woken.load(SeqCst),
        1,
        "the awaiter woken by the shutdown"
    );
    assert!(
        !probe.woken_before_drop.load(SeqCst),
        "the handle resolved while the future was still alive"
    );
    assert!(t.await.unwrap_err().is_shutdown());
}

/// The same when the runtime drops a task that started, queued but never polled, or running:
/// the future goes first, then the handle resolves with the shutdown error.
#[test]
fn a_runtime_drop_drops_the_future_before_the_handle_resolves() {
    for polled in [false, true] {
        let rt = common::paused_runtime();
        let (fut, dropped, probe) = drop_order_probe();
        let mut t = {
            let _runtime = rt.enter();
            spawn_after(Duration::ZERO, fut)
        };
        if polled {
            rt.block_on(settle());
        }
        let waker = Waker::from(probe.clone());
        assert!(Pin::new(&mut t)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(rt);
        assert!(dropped.load(SeqCst));
        assert_eq!(
            probe.woken.load(SeqCst),
            1,
            "polled: {polled}: the awaiter woken by the runtime's drop"
        );
        assert!(
            !probe.woken_before_drop.load(SeqCst),
            "polled: {polled}: the handle resolved while the future was still alive"
        );
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut t).poll(&mut cx) {
            std::task::Poll::Ready(r) => assert!(r.unwrap_err().is_shutdown()),
            std::task::Poll::Pending => panic!("unresolved after the runtime dropped"),
        }
    }
}

/// The blocking clone's state: whether a clone started, and whether it was let go in time.
static CLONE_STARTED: AtomicBool = AtomicBool::new(false);
static CLONE_LET_GO: (Mutex<bool>, std::sync::Condvar) =
    (Mutex::new(false), std::sync::Condvar::new());
static LET_GO_IN_TIME: AtomicBool = AtomicBool::new(false);

/// A waker whose first clone blocks (up to 10 s of real time) until [`CLONE_LET_GO`] is set.
fn blocking_clone_waker() -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn raw() -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn clone(_: *const ()) -> RawWaker {
        if !CLONE_STARTED.swap(true, SeqCst) {
            let (let_go, cv) = &CLONE_LET_GO;
            let guard = let_go.lock().unwrap();
            let (guard, _) = cv
                .wait_timeout_while(guard, Duration::from_secs(10), |go| !*go)
                .unwrap();
            LET_GO_IN_TIME.store(*guard, SeqCst);
        }
        raw()
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions never read the data pointer (null), `clone` returns a
    // waker with the same vtable, and `wake`, `wake_by_ref` and `drop` do nothing, so every
    // requirement of `RawWaker` holds for any data pointer.
    unsafe { Waker::from_raw(raw()) }
}

/// A waker's clone is user code: the handle clones the awaiting task's waker outside its own
/// lock, so a clone that blocks (here until the timer's shutdown has returned) holds up
/// nobody resolving the task: not a shutdown's drain, nor a worker finishing the task.
#[test]
fn a_waker_clone_that_blocks_in_the_awaiting_task_holds_up_no_shutdown() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let timer = Timer::builder().build().unwrap();
    let mut t = timer.spawn_after(Duration::from_secs(3_600), async {});
    let shutter = std::thread::spawn(move || {
        while !CLONE_STARTED.load(SeqCst) {
            std::thread::yield_now();
        }
        timer.shutdown(); // resolves the task: must not wait for the clone
        let (let_go, cv) = &CLONE_LET_GO;
        *let_go.lock().unwrap() = true;
        cv.notify_all();
    });
    let waker = blocking_clone_waker();
    let polled = Pin::new(&mut t).poll(&mut Context::from_waker(&waker));
    shutter.join().unwrap();
    assert!(
        LET_GO_IN_TIME.load(SeqCst),
        "the shutdown waited for the awaiting task's waker clone"
    );
    let r = match polled {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => {
            assert!(t.is_finished());
            rt.block_on(t)
        }
    };
    assert!(r.unwrap_err().is_shutdown());
}

/// `handle.await?` works in a function returning `io::Result`, as with Tokio's `JoinError`:
/// each error becomes an I/O error of kind `Other` that keeps the `DelayedError`, a panic's
/// payload included.
#[tokio::test(start_paused = true)]
async fn errors_convert_to_io_errors_that_keep_the_delayed_error() {
    async fn run<T: Send + 'static>(t: DelayedTask<T>) -> std::io::Result<T> {
        Ok(t.await?)
    }
    assert_eq!(run(spawn_after(ms(5), async { 7 })).await.unwrap(), 7);

    let cancelled = spawn_after(ms(5), async {});
    assert!(cancelled.cancel());
    let err = run(cancelled).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Other);
    let inner = err.get_ref().unwrap().downcast_ref::<DelayedError>();
    assert!(inner.unwrap().is_cancelled(), "{err}");

    let panicked = spawn_after(ms(5), async { panic!("boom") });
    let err = run::<()>(panicked).await.unwrap_err();
    assert_eq!(err.to_string(), "delayed task panicked");
    let inner = err
        .into_inner()
        .unwrap()
        .downcast::<DelayedError>()
        .unwrap();
    assert_eq!(inner.into_panic().downcast_ref::<&str>(), Some(&"boom"));

    let timer = Timer::builder().build().unwrap();
    let stopped = timer.spawn_after(ms(5), async {});
    timer.shutdown();
    let err = run(stopped).await.unwrap_err();
    let inner = err.get_ref().unwrap().downcast_ref::<DelayedError>();
    assert!(inner.unwrap().is_shutdown(), "{err}");
}
