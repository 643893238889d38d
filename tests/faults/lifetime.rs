//! A timer's lifetime: its runtime shut down or dropped under pending timers, its handles
//! dropped under a pending timeout, a task that visits another runtime. Every pending future
//! resolves, and the default timer stays the one of the runtime the task runs on.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_test::{assert_pending, task};
use tokio_timing_wheel::{
    sleep_wheel, spawn_after, timeout, DelayedTask, Elapsed, Sleep, Timer, TimerError,
};

use crate::common::{ms, settle};
use crate::{current_thread, multi_thread, paused_runtime, with_watchdog};

/// Timers registered before the runtime shuts down, in
/// [`runtime_shut_down_mid_flight_resolves_every_delayed_task`].
const N: usize = 1_000;

/// The delayed tasks of [`register_mixed_timers`], with their numbers.
type Numbered = Vec<(usize, DelayedTask<usize>)>;

#[test]
fn runtime_shut_down_mid_flight_resolves_every_delayed_task() {
    with_watchdog(Duration::from_secs(60), || {
        let rt = multi_thread(2);
        let finished: Arc<Vec<AtomicBool>> =
            Arc::new((0..N).map(|_| AtomicBool::new(false)).collect());
        let (handles, timer, default_timer) = rt.block_on(register_mixed_timers(finished.clone()));
        shut_down_with_timers_pending(rt, &timer, &default_timer);
        every_delayed_task_ran_or_was_cut_short(handles, &finished);
    });
}

/// Registers [`N`] timers of every kind with deadlines over 0..400 ms, on an explicit timer
/// and on the default one, then lets 150 ms pass. Delayed task `i` sets `fin[i]` when it
/// finishes; half of them are still running (on a Tokio sleep) when the runtime shuts down.
/// Returns the delayed tasks, the explicit timer and the default timer.
async fn register_mixed_timers(fin: Arc<Vec<AtomicBool>>) -> (Numbered, Timer, Timer) {
    let timer = Timer::builder().build().unwrap();
    let mut handles: Numbered = Vec::new();
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
}

/// Shuts `rt` down while timers are pending on both timers: each timer shuts down with it,
/// empty, and refuses new registrations.
fn shut_down_with_timers_pending(
    rt: tokio::runtime::Runtime,
    timer: &Timer,
    default_timer: &Timer,
) {
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
}

/// Awaits every delayed task on another runtime: each resolves (no hang), either with its
/// output after it finished, or with the shutdown error without having finished; some of
/// each.
fn every_delayed_task_ran_or_was_cut_short(handles: Numbered, finished: &[AtomicBool]) {
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
}

/// Sleeps, and timeouts, registered from runtime B in
/// [`dropping_the_driver_runtime_resolves_futures_polled_on_another_runtime`].
const EACH: usize = 10;

/// Futures of a timer driven by runtime A, registered from runtime B.
struct OnB {
    /// Tasks awaiting an hour-long sleep; they return `(is_shutdown, is_elapsed)`.
    sleepers: Vec<JoinHandle<(bool, bool)>>,
    /// Tasks awaiting an hour-long timeout.
    timeouts: Vec<JoinHandle<Result<(), Elapsed>>>,
    /// An hour-long delayed task that spawns onto A.
    delayed: DelayedTask<i32>,
    /// A sleep never polled.
    unpolled: Sleep,
}

#[test]
fn dropping_the_driver_runtime_resolves_futures_polled_on_another_runtime() {
    with_watchdog(Duration::from_secs(60), || {
        let a = multi_thread(1);
        let b = current_thread();
        let timer = a.block_on(async { Timer::builder().build().unwrap() });

        b.block_on(a_sleep_polled_on_b_fires_through_a(timer.clone()));
        let on_b = register_from_b(&b, &timer);

        drop(a); // drops the timer's sentinel task

        assert!(
            timer.is_shutdown(),
            "the timer shut down with its driver's runtime"
        );
        assert_eq!(timer.pending(), 0);
        assert_eq!(
            timer.try_sleep(Duration::from_secs(1)).unwrap_err(),
            TimerError::Shutdown
        );
        b.block_on(async {
            everything_on_b_resolves_as_shut_down(on_b).await;
            new_registrations_resolve_as_shut_down(&timer).await;
        });
    });
}

/// Futures polled on B are driven by A's driver.
async fn a_sleep_polled_on_b_fires_through_a(t: Timer) {
    let start = Instant::now();
    let mut s = t.sleep(ms(20));
    tokio::time::timeout(Duration::from_secs(10), &mut s)
        .await
        .expect("a sleep polled on B fires through A's driver");
    assert!(!s.is_shutdown());
    assert!(start.elapsed() >= ms(20));
}

/// Registers [`EACH`] sleeps and timeouts from tasks on `b`, a delayed task and an unpolled
/// sleep, and waits until all that should be in the wheel is.
fn register_from_b(b: &tokio::runtime::Runtime, timer: &Timer) -> OnB {
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
    OnB {
        sleepers,
        timeouts,
        delayed,
        unpolled,
    }
}

/// After A is gone: every sleep completes with `is_shutdown()`, every timeout and the delayed
/// task resolve with the shutdown error, and so does a sleep first polled now.
async fn everything_on_b_resolves_as_shut_down(on_b: OnB) {
    let bound = Duration::from_secs(5);
    for (i, h) in on_b.sleepers.into_iter().enumerate() {
        let (is_shutdown, is_elapsed) = tokio::time::timeout(bound, h)
            .await
            .unwrap_or_else(|_| panic!("sleep {i} hangs"))
            .unwrap();
        assert!(is_shutdown, "sleep {i} completes with is_shutdown()");
        assert!(is_elapsed);
    }
    for (i, h) in on_b.timeouts.into_iter().enumerate() {
        let r: Result<(), Elapsed> = tokio::time::timeout(bound, h)
            .await
            .unwrap_or_else(|_| panic!("timeout {i} hangs"))
            .unwrap();
        assert!(r.unwrap_err().is_shutdown(), "timeout {i}");
    }
    let e = tokio::time::timeout(bound, on_b.delayed)
        .await
        .expect("the delayed task resolves")
        .unwrap_err();
    assert!(e.is_shutdown(), "{e:?}");
    let mut unpolled = on_b.unpolled;
    tokio::time::timeout(bound, &mut unpolled)
        .await
        .expect("a sleep first polled after the drop completes");
    assert!(unpolled.is_shutdown());
}

/// After A is gone: `try_*` refuse, a delayed task resolves with the shutdown error, and a
/// sleep completes at once with `is_shutdown()`.
async fn new_registrations_resolve_as_shut_down(t: &Timer) {
    let bound = Duration::from_secs(5);
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

/// Runs `task()` as a task of a fresh multi-thread runtime of `workers` workers (so it may
/// `block_in_place`), under a watchdog: a hang fails the test instead of stalling it.
fn on_a_multi_thread_task<F>(workers: usize, task: impl FnOnce() -> F + Send + 'static) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    with_watchdog(Duration::from_secs(20), move || {
        multi_thread(workers).block_on(async move { tokio::spawn(task()).await.unwrap() })
    })
}

/// A task that enters another runtime inside `block_in_place` must not leave that runtime's
/// timer behind for its later calls when that runtime only runs inside its `block_on` (a
/// current-thread one): its timer would never fire again.
#[test]
fn a_task_visiting_another_runtime_keeps_its_own_default_timer() {
    let fired = on_a_multi_thread_task(2, || async {
        let rt_b = tokio::task::block_in_place(|| {
            let rt_b = current_thread();
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
    });
    assert!(fired, "the sleep on runtime A never fired");
}

/// A task whose first timer call runs inside a nested multi-thread runtime may keep that
/// runtime's timer for its later calls on this thread (the per-task lookup cache of builds
/// without Tokio's `test-util`; these tests have it, so here every call looks the runtime
/// up, and the test holds the behaviour both ways): the timer fires while its runtime lives,
/// and once the runtime is gone the task's calls find their own runtime's timer again: no
/// hang, nothing early.
#[test]
fn a_task_visiting_another_multi_thread_runtime_still_sleeps_on_time() {
    let elapsed = on_a_multi_thread_task(1, || async {
        let rt_b = tokio::task::block_in_place(|| {
            let rt_b = multi_thread(1);
            rt_b.block_on(sleep_wheel(Duration::from_millis(1)));
            rt_b
        });
        // Back on runtime A, while B lives.
        let start = tokio::time::Instant::now();
        sleep_wheel(Duration::from_millis(10)).await;
        let first = start.elapsed();
        tokio::task::block_in_place(|| drop(rt_b));
        // B is gone, and its timer with it.
        let start = tokio::time::Instant::now();
        let sleep = sleep_wheel(Duration::from_millis(20));
        sleep.await;
        (first, start.elapsed())
    });
    assert!(
        elapsed.0 >= Duration::from_millis(10),
        "early: {:?}",
        elapsed.0
    );
    assert!(
        elapsed.1 >= Duration::from_millis(20),
        "early: {:?}",
        elapsed.1
    );
}

/// A paused current-thread runtime entered inside a multi-thread task (`block_in_place` +
/// `block_on`) runs its sleeps on its own paused clock, also after the task used the outer
/// runtime's timer: auto-advance completes an hour's sleep at once, before a two-hour Tokio
/// timeout on the same clock.
#[test]
fn a_paused_runtime_entered_inside_a_task_sleeps_on_its_own_clock() {
    let on_time = on_a_multi_thread_task(2, || async {
        // The outer runtime's timer, used first by this task on this thread.
        sleep_wheel(Duration::from_millis(1)).await;
        drop(sleep_wheel(Duration::from_millis(1)));
        tokio::task::block_in_place(|| {
            paused_runtime().block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(7200),
                    sleep_wheel(Duration::from_secs(3600)),
                )
                .await
                .is_ok()
            })
        })
    });
    assert!(on_time, "the sleep ran on the outer runtime's real clock");
}
