//! Integration tests for `Timer`: building, limits, pending counts, shutdown and lifetime.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{
    sleep_wheel, spawn_after, BuildError, DelayedTask, Sleep, Timer, TimerError,
};

mod common;
use common::{ms, panic_message, poll_with, settle, CountingWaker};

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

// ---------------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn builder_rejects_invalid_settings() {
    let err = Timer::builder().tick(Duration::ZERO).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroTick);
    assert!(!err.to_string().is_empty());

    let err = Timer::builder().tick(Duration::MAX).build().unwrap_err();
    assert_eq!(err, BuildError::TickTooLarge);
    assert!(!err.to_string().is_empty());

    for size in [0usize, 1, 48, 100, 1 << 17] {
        let err = Timer::builder().wheel_size(size).build().unwrap_err();
        assert_eq!(err, BuildError::InvalidWheelSize { size, max: 65536 });
        assert!(err.to_string().contains(&size.to_string()), "{err}");
    }

    let err = Timer::builder().max_pending(0).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroMaxPending);
    assert!(!err.to_string().is_empty());

    // Errors are std errors.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(!boxed.to_string().is_empty());
}

#[test]
fn build_outside_a_runtime_is_no_runtime() {
    let err = Timer::builder().build().unwrap_err();
    assert_eq!(err, BuildError::NoRuntime);
    assert!(!err.to_string().is_empty());
}

#[test]
fn build_on_a_runtime_without_time_is_no_time_driver() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt.block_on(async { Timer::builder().build().unwrap_err() });
    assert_eq!(err, BuildError::NoTimeDriver);
    assert!(!err.to_string().is_empty());

    let _guard = rt.enter();
    assert_eq!(
        Timer::builder().build().unwrap_err(),
        BuildError::NoTimeDriver
    );
}

#[test]
fn timer_and_futures_have_the_expected_auto_traits() {
    fn clone_send_sync_debug<T: Clone + Send + Sync + std::fmt::Debug + 'static>() {}
    fn send_sync_unpin<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    fn send_unpin<T: Send + Unpin>() {}
    clone_send_sync_debug::<Timer>();
    clone_send_sync_debug::<BuildError>();
    clone_send_sync_debug::<TimerError>();
    send_sync_unpin::<Sleep>();
    send_unpin::<DelayedTask<String>>();
}

#[tokio::test(start_paused = true)]
async fn huge_tick_builds_and_fires_not_early() {
    let day = Duration::from_secs(86_400);
    let timer = Timer::builder().tick(day).build().unwrap();
    assert_eq!(timer.tick(), day);

    let start = Instant::now();
    timer.sleep(Duration::from_secs(1)).await;
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_secs(1), "early: {elapsed:?}");
    assert!(elapsed <= Duration::from_secs(1) + day, "late: {elapsed:?}");

    let start = Instant::now();
    let t = timer.spawn_after(Duration::from_secs(3 * 86_400 + 5), async {
        Instant::now()
    });
    let at = t.await.unwrap();
    assert!(at >= start + Duration::from_secs(3 * 86_400 + 5));
    assert!(at <= start + Duration::from_secs(3 * 86_400 + 5) + day);
}

async fn check_wheel_size(size: usize) {
    let timer = Timer::builder().wheel_size(size).build().unwrap();
    let start = Instant::now();
    let delays = [
        Duration::from_micros(300),
        ms(1),
        ms(2),
        ms(7),
        ms(64),
        ms(65),
        ms(1_000),
        ms(4_097),
        Duration::from_secs(3_600),
        Duration::from_secs(86_400 * 3),
    ];
    let mut handles = Vec::new();
    for d in delays {
        let timer = timer.clone();
        handles.push(tokio::spawn(async move {
            timer.sleep(d).await;
            (d, Instant::now())
        }));
    }
    for h in handles {
        let (d, at) = h.await.unwrap();
        assert!(at >= start + d, "wheel {size}: {d:?} fired early");
        assert!(
            at <= start + d + timer.tick(),
            "wheel {size}: {d:?} fired {:?} late",
            at - (start + d)
        );
    }
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn smallest_and_largest_wheel_sizes_work() {
    check_wheel_size(2).await;
    check_wheel_size(65_536).await;
}

#[tokio::test(start_paused = true)]
async fn explicit_shard_counts_work() {
    for shards in [1, 3, 64] {
        let timer = Timer::builder().shards(shards).build().unwrap();
        let start = Instant::now();
        timer.sleep(ms(15)).await;
        assert!(start.elapsed() >= ms(15));
        assert!(start.elapsed() <= ms(16));
    }
}

// ---------------------------------------------------------------------------------------------
// max_pending
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn max_pending_limits_registrations() {
    let timer = Timer::builder().max_pending(3).build().unwrap();
    let short = timer.try_sleep(ms(10)).expect("1st");
    let b = timer.try_sleep(Duration::from_secs(10)).expect("2nd");
    let c = timer.try_sleep(Duration::from_secs(10)).expect("3rd");
    assert_eq!(timer.pending(), 3);

    let err = timer.try_sleep(Duration::from_secs(10)).unwrap_err();
    assert_eq!(err, TimerError::Full { max_pending: 3 });
    assert!(err.to_string().contains("full"), "{err}");
    assert_eq!(
        timer
            .try_spawn_after(Duration::from_secs(1), async {})
            .unwrap_err(),
        TimerError::Full { max_pending: 3 }
    );
    assert_eq!(
        timer
            .try_timeout(Duration::from_secs(1), std::future::ready(()))
            .unwrap_err(),
        TimerError::Full { max_pending: 3 }
    );
    assert_eq!(
        timer
            .try_sleep_until(Instant::now() + Duration::from_secs(1))
            .unwrap_err(),
        TimerError::Full { max_pending: 3 }
    );
    assert_eq!(timer.pending(), 3, "refused registrations take no slot");

    // Dropping (cancelling) one frees a slot.
    drop(b);
    assert_eq!(timer.pending(), 2);
    let d = timer
        .try_sleep(Duration::from_secs(10))
        .expect("slot freed by drop");
    assert_eq!(
        timer.try_sleep(Duration::from_secs(10)).unwrap_err(),
        TimerError::Full { max_pending: 3 }
    );

    // Letting one expire frees a slot, even if nobody polls it.
    tokio::time::sleep(ms(20)).await;
    settle().await;
    assert_eq!(timer.pending(), 2);
    let mut short = task::spawn(short);
    assert_ready!(short.poll());
    let task = timer
        .try_spawn_after(Duration::from_secs(10), async { 9 })
        .expect("slot freed by expiry");
    assert_eq!(
        timer
            .try_spawn_after(Duration::from_secs(1), async {})
            .unwrap_err(),
        TimerError::Full { max_pending: 3 }
    );

    // A plain sleep on a full timer panics when polled, mentioning "full".
    let mut plain = timer.sleep(Duration::from_secs(1));
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let payload = catch_unwind(AssertUnwindSafe(|| Pin::new(&mut plain).poll(&mut cx)))
        .expect_err("polling a sleep on a full timer panics");
    let msg = panic_message(&*payload);
    assert!(msg.contains("full"), "message: {msg}");
    drop(plain);
    assert_eq!(timer.pending(), 3);

    // Cancelling a delayed task frees its slot.
    assert!(task.cancel());
    assert_eq!(timer.pending(), 2);
    let e = timer
        .try_sleep(Duration::from_secs(1))
        .expect("slot freed by cancel");
    drop((c, d, e));
    assert_eq!(timer.pending(), 0);

    // Once empty, the whole capacity is available again.
    let all: Vec<Sleep> = (0..3)
        .map(|_| timer.try_sleep(Duration::from_secs(1)).unwrap())
        .collect();
    assert!(timer.try_sleep(Duration::from_secs(1)).is_err());
    drop(all);
}

#[tokio::test(start_paused = true)]
async fn max_pending_counts_sleeps_timeouts_and_tasks_alike() {
    let timer = Timer::builder().max_pending(2).build().unwrap();
    let mut s = task::spawn(timer.sleep(Duration::from_secs(5)));
    assert_pending!(s.poll());
    let t = timer.spawn_after(Duration::from_secs(5), async {});
    assert_eq!(timer.pending(), 2);
    assert!(matches!(
        timer.try_spawn_after(Duration::from_secs(1), async {}),
        Err(TimerError::Full { max_pending: 2 })
    ));
    // Registrations that need no timer do not need a slot.
    let ready = timer.try_sleep(Duration::ZERO).expect("no slot needed");
    assert!(ready.is_elapsed());
    let now = timer
        .try_spawn_after(Duration::ZERO, async { 1 })
        .expect("no slot needed");
    assert_eq!(now.await.unwrap(), 1);
    // A timeout whose future is ready at once never touches the wheel.
    assert_eq!(
        timer.timeout(Duration::from_secs(1), async { 2 }).await,
        Ok(2)
    );
    drop(s);
    assert!(t.cancel());
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_of_a_full_timer_reports_shutdown_not_full() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let held = timer.try_sleep(Duration::from_secs(1)).unwrap();
    assert!(matches!(
        timer.try_sleep(Duration::from_secs(1)),
        Err(TimerError::Full { max_pending: 1 })
    ));
    timer.shutdown();
    assert_eq!(
        timer.try_sleep(Duration::from_secs(1)).unwrap_err(),
        TimerError::Shutdown
    );
    let mut held = held;
    (&mut held).await;
    assert!(held.is_shutdown());
}

// ---------------------------------------------------------------------------------------------
// pending()
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn pending_counts_registered_timers_exactly() {
    let timer = Timer::builder().build().unwrap();
    assert_eq!(timer.pending(), 0);

    let mut s1 = task::spawn(timer.sleep(ms(100)));
    let s2 = timer.sleep(ms(200));
    assert_eq!(timer.pending(), 0, "a sleep registers on its first poll");
    assert_pending!(s1.poll());
    assert_eq!(timer.pending(), 1);
    assert_pending!(s1.poll());
    assert_eq!(timer.pending(), 1, "polling again does not register twice");

    let t1 = timer.spawn_after(ms(150), async { 1 });
    let t2 = timer.spawn_after(ms(300), async { 2 });
    assert_eq!(timer.pending(), 3, "delayed tasks register at once");
    let mut to = task::spawn(timer.timeout(ms(250), std::future::pending::<()>()));
    assert_pending!(to.poll());
    assert_eq!(timer.pending(), 4);
    assert_eq!(timer.metrics().pending, 4);

    drop(s2);
    assert_eq!(timer.pending(), 4, "an unpolled sleep was never counted");
    drop(to);
    assert_eq!(timer.pending(), 3, "a dropped timeout is removed");

    tokio::time::sleep(ms(100)).await;
    settle().await;
    assert!(s1.is_woken());
    assert_ready!(s1.poll());
    assert_eq!(timer.pending(), 2, "the first sleep fired");

    assert_eq!(t1.await.unwrap(), 1);
    assert_eq!(timer.pending(), 1);
    assert_eq!(t2.await.unwrap(), 2);
    assert_eq!(timer.pending(), 0);
    assert_eq!(timer.metrics().pending, 0);
}

// ---------------------------------------------------------------------------------------------
// shutdown()
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn shutdown_resolves_everything_pending() {
    let base = alive_tasks();
    let timer = Timer::builder().build().unwrap();
    assert_eq!(alive_tasks(), base + 1, "the timer's sentinel task");
    let start = Instant::now();

    let t = timer.clone();
    let sleeper = tokio::spawn(async move {
        let mut s = t.sleep(Duration::from_secs(3_600));
        (&mut s).await;
        (s.is_shutdown(), s.is_elapsed())
    });
    let t = timer.clone();
    let timeouter = tokio::spawn(async move {
        t.timeout(Duration::from_secs(3_600), std::future::pending::<()>())
            .await
    });
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let delayed = timer.spawn_after(Duration::from_secs(3_600), async move {
        flag.store(true, SeqCst);
    });
    // Created before shutdown, polled only after it.
    let unpolled = timer.sleep(Duration::from_secs(3_600));
    settle().await;
    assert_eq!(timer.pending(), 3);
    assert!(!timer.is_shutdown());

    timer.shutdown();
    assert!(timer.is_shutdown());
    assert_eq!(timer.pending(), 0);
    timer.shutdown(); // a no-op
    assert!(timer.is_shutdown());

    let (is_shutdown, is_elapsed) = sleeper.await.unwrap();
    assert!(is_shutdown, "a pending sleep completes with is_shutdown()");
    assert!(is_elapsed);
    let err = timeouter.await.unwrap().unwrap_err();
    assert!(
        err.is_shutdown(),
        "a pending timeout errs with is_shutdown()"
    );
    assert!(delayed.is_finished());
    let err = delayed.await.unwrap_err();
    assert!(err.is_shutdown(), "{err:?}");
    let mut unpolled = unpolled;
    (&mut unpolled).await;
    assert!(unpolled.is_shutdown());
    assert!(start.elapsed() < Duration::from_secs(1), "resolved at once");

    // New registrations after shutdown.
    let mut s = timer.sleep(Duration::from_secs(3_600));
    (&mut s).await;
    assert!(s.is_shutdown());
    timer.sleep_until(Instant::now() + ms(5)).await;
    assert_eq!(timer.try_sleep(ms(5)).unwrap_err(), TimerError::Shutdown);
    assert_eq!(
        timer.try_sleep_until(Instant::now() + ms(5)).unwrap_err(),
        TimerError::Shutdown
    );
    assert_eq!(
        timer
            .try_timeout(ms(5), std::future::ready(()))
            .unwrap_err(),
        TimerError::Shutdown
    );
    assert!(timer
        .timeout(ms(5), std::future::pending::<()>())
        .await
        .unwrap_err()
        .is_shutdown());
    let ran2 = Arc::new(AtomicBool::new(false));
    let flag2 = ran2.clone();
    let late = timer.spawn_after(ms(5), async move { flag2.store(true, SeqCst) });
    assert!(late.is_finished());
    assert!(late.await.unwrap_err().is_shutdown());
    let late = timer
        .try_spawn_after(Duration::ZERO, async {})
        .expect("a shut-down timer hands back a resolved task");
    assert!(late.await.unwrap_err().is_shutdown());
    assert!(start.elapsed() < Duration::from_secs(1), "resolved at once");
    assert_eq!(timer.pending(), 0);

    tokio::time::sleep(Duration::from_secs(7_200)).await;
    settle().await;
    assert!(!ran.load(SeqCst), "a shut-down delayed task never runs");
    assert!(!ran2.load(SeqCst));
    assert_eq!(alive_tasks(), base, "the sentinel task ended");
}

// ---------------------------------------------------------------------------------------------
// Lifetime
// ---------------------------------------------------------------------------------------------

#[test]
fn dropping_the_runtime_resolves_pending_delayed_tasks() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (default_task, explicit_task, started_task, queued_task, started) =
            rt.block_on(async {
                let default_task = spawn_after(Duration::from_secs(10), async { 1 });
                let timer = Timer::builder().build().unwrap();
                let explicit_task = timer.spawn_after(Duration::from_secs(10), async { 2 });
                drop(timer);
                tokio::spawn(async { sleep_wheel(Duration::from_secs(3_600)).await });
                // A task that started and then blocks forever.
                let started = Arc::new(AtomicBool::new(false));
                let flag = started.clone();
                let started_task = spawn_after(ms(1), async move {
                    flag.store(true, SeqCst);
                    std::future::pending::<u32>().await
                });
                while !started.load(SeqCst) {
                    tokio::time::sleep(ms(1)).await;
                }
                // Spawned onto the runtime, but never polled before it drops.
                let queued_task = spawn_after(Duration::ZERO, async { 4 });
                (
                    default_task,
                    explicit_task,
                    started_task,
                    queued_task,
                    started,
                )
            });
        assert!(started.load(SeqCst));
        drop(rt);

        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let results = other.block_on(async {
            [
                default_task.await.map(|_| ()),
                explicit_task.await.map(|_| ()),
                started_task.await.map(|_| ()),
                queued_task.await.map(|_| ()),
            ]
        });
        let _ = tx.send(results.map(|r| r.map_err(|e| e.is_shutdown())));
    });
    let results = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("awaiting the handles after the runtime dropped must not hang");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(*r, Err(true), "handle {i} must resolve with is_shutdown()");
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_timer_handles_do_not_stop_pending_sleeps_and_driver_exits() {
    let base = alive_tasks();
    let timer = Timer::builder().build().unwrap();
    assert_eq!(alive_tasks(), base + 1);
    let start = Instant::now();
    let mut sleep = task::spawn(timer.sleep(ms(100)));
    assert_pending!(sleep.poll());
    let sleep2 = timer.sleep(ms(200)); // not polled yet
    let clone = timer.clone();
    drop(timer);
    drop(clone);
    settle().await;
    assert_eq!(alive_tasks(), base + 1, "pending futures keep the driver");

    let sleep = sleep.into_inner();
    sleep.await;
    assert!(start.elapsed() >= ms(100) && start.elapsed() <= ms(101));
    sleep2.await;
    assert!(start.elapsed() >= ms(200) && start.elapsed() <= ms(201));

    settle().await;
    tokio::time::sleep(ms(10)).await;
    settle().await;
    assert_eq!(
        alive_tasks(),
        base,
        "the sentinel task exits once all is gone"
    );
}

#[tokio::test(start_paused = true)]
async fn driver_exits_after_fire_and_forget_task_with_no_handles() {
    let base = alive_tasks();
    let timer = Timer::builder().build().unwrap();
    assert_eq!(alive_tasks(), base + 1);
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    drop(timer.spawn_after(ms(100), async move { flag.store(true, SeqCst) }));
    drop(timer);
    settle().await;
    assert_eq!(
        alive_tasks(),
        base + 1,
        "a pending delayed task keeps the driver"
    );

    tokio::time::sleep(ms(150)).await;
    settle().await;
    assert!(ran.load(SeqCst), "the task ran with every handle gone");
    tokio::time::sleep(ms(1_000)).await;
    settle().await;
    assert_eq!(
        alive_tasks(),
        base,
        "no handle, future or pending task is left: the driver must exit"
    );
}

#[tokio::test(start_paused = true)]
async fn driver_exits_when_handles_dropped_with_nothing_pending() {
    let base = alive_tasks();
    let timer = Timer::builder().build().unwrap();
    timer.sleep(ms(5)).await;
    assert_eq!(alive_tasks(), base + 1);
    drop(timer);
    settle().await;
    assert_eq!(alive_tasks(), base);
}

#[tokio::test(start_paused = true)]
async fn two_timers_are_independent() {
    let a = Timer::builder().build().unwrap();
    let b = Timer::builder().tick(ms(10)).build().unwrap();
    assert_eq!(a.tick(), ms(1));
    assert_eq!(b.tick(), ms(10));

    let a1 = a.try_sleep(Duration::from_secs(1)).unwrap();
    let a2 = a.spawn_after(Duration::from_secs(1), async {});
    let mut b1 = task::spawn(b.sleep(Duration::from_secs(2)));
    assert_pending!(b1.poll());
    assert_eq!(a.pending(), 2);
    assert_eq!(b.pending(), 1);
    assert_eq!(a.metrics().pending, 2);
    assert_eq!(b.metrics().pending, 1);
    assert_eq!(
        Timer::current().pending(),
        0,
        "the default timer is separate"
    );

    a.shutdown();
    assert!(a.is_shutdown());
    assert!(!b.is_shutdown());
    assert_eq!(a.pending(), 0);
    assert_eq!(b.pending(), 1);
    assert!(a2.await.unwrap_err().is_shutdown());
    drop(a1);

    let start = Instant::now();
    let mut b1 = b1.into_inner();
    (&mut b1).await;
    assert!(!b1.is_shutdown(), "b fired normally");
    assert!(start.elapsed() >= Duration::from_secs(2));
    assert_eq!(b.pending(), 0);
    assert!(b.metrics().passes >= 1);
}

#[test]
fn timer_current_is_per_runtime() {
    let rt1 = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let rt2 = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();

    let (mut s, first) = rt1.block_on(async {
        let first = Timer::current();
        let second = Timer::current();
        assert_eq!(first.tick(), ms(1), "the default tick");
        assert_eq!(first.pending(), 0);
        let mut s = task::spawn(sleep_wheel(Duration::from_secs(60)));
        assert_pending!(s.poll());
        assert_eq!(first.pending(), 1);
        assert_eq!(second.pending(), 1, "both calls give the same timer");
        let t = second.try_sleep(Duration::from_secs(60)).unwrap();
        assert_eq!(Timer::current().pending(), 2);
        drop(t);
        assert_eq!(first.pending(), 1);
        (s, first)
    });

    rt2.block_on(async {
        assert_eq!(
            Timer::current().pending(),
            0,
            "another runtime has another default timer"
        );
        let _t = Timer::current().try_sleep(Duration::from_secs(60)).unwrap();
        assert_eq!(Timer::current().pending(), 1);
    });

    rt1.block_on(async {
        assert_eq!(Timer::current().pending(), 1);
        assert_eq!(first.pending(), 1);
        tokio::time::sleep(Duration::from_secs(61)).await;
        settle().await;
        assert!(s.is_woken());
        assert_ready!(s.poll());
        assert_eq!(Timer::current().pending(), 0);
    });
    drop(s);
}

// ---------------------------------------------------------------------------------------------
// Runtime flavours (real clock: loose bounds)
// ---------------------------------------------------------------------------------------------

const SLACK: Duration = Duration::from_millis(500);

#[track_caller]
fn assert_loosely_on_time(elapsed: Duration, expected: Duration) {
    assert!(elapsed >= expected, "early: {elapsed:?} < {expected:?}");
    assert!(
        elapsed < expected + SLACK,
        "late: {elapsed:?} for {expected:?}"
    );
}

async fn flavour_scenario() {
    let timer = Timer::builder().build().unwrap();

    // Sleeps from several tasks (on several workers in the multi-thread flavour).
    let mut handles = Vec::new();
    for i in 1..=8u64 {
        let timer = timer.clone();
        handles.push(tokio::spawn(async move {
            let start = Instant::now();
            let d = ms(10 * i);
            if i % 2 == 0 {
                timer.sleep(d).await;
            } else {
                sleep_wheel(d).await;
            }
            assert_loosely_on_time(start.elapsed(), d);
        }));
    }

    // Delayed tasks: one completes, one is cancelled.
    let start = Instant::now();
    let value = timer.spawn_after(ms(50), async { 50 });
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let cancelled = spawn_after(ms(60), async move { flag.store(true, SeqCst) });
    assert!(cancelled.cancel());

    // A timeout that elapses and one that does not.
    let to_start = Instant::now();
    let err = timer
        .timeout(ms(30), std::future::pending::<()>())
        .await
        .unwrap_err();
    assert!(!err.is_shutdown());
    assert_loosely_on_time(to_start.elapsed(), ms(30));
    assert_eq!(
        timer
            .timeout(Duration::from_secs(5), async {
                tokio::time::sleep(ms(5)).await;
                7
            })
            .await,
        Ok(7)
    );

    assert_eq!(value.await.unwrap(), 50);
    assert_loosely_on_time(start.elapsed(), ms(50));
    for h in handles {
        h.await.unwrap();
    }
    tokio::time::sleep(ms(30)).await;
    assert!(!ran.load(SeqCst));
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert_eq!(timer.pending(), 0);
    assert_eq!(Timer::current().pending(), 0);
}

#[test]
fn works_on_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(flavour_scenario());
}

#[test]
fn works_on_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async { tokio::spawn(flavour_scenario()).await.unwrap() });
}

#[test]
fn timer_can_be_used_from_a_thread_outside_the_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let remote = timer.clone();
    let (start, task, sleep) = std::thread::spawn(move || {
        let start = Instant::now();
        let task = remote.spawn_after(ms(30), async { Instant::now() });
        let sleep = remote.try_sleep(ms(40)).expect("registers from any thread");
        (start, task, sleep)
    })
    .join()
    .unwrap();
    let at = rt.block_on(task).unwrap();
    assert_loosely_on_time(at - start, ms(30));
    rt.block_on(sleep);
    assert_loosely_on_time(start.elapsed(), ms(40));
    assert_eq!(timer.pending(), 0);
}

// ---------------------------------------------------------------------------------------------
// Review findings (issue: correctness)
// ---------------------------------------------------------------------------------------------

/// A detached timer (every `Timer` handle dropped, a completed `Sleep` kept) re-armed a 1 s
/// recheck after every pass, so in paused time auto-advance raced the virtual clock ahead
/// (122 767 s in the review) while the runtime waited for something from another thread.
/// Idle must mean no wakeups, detached too.
#[tokio::test(start_paused = true)]
async fn a_detached_timer_costs_no_wakeups_in_paused_time() {
    let timer = Timer::builder().build().unwrap();
    let mut kept = timer.sleep(ms(5));
    (&mut kept).await;
    let probe = timer.clone();
    drop(timer);
    let passes = probe.metrics().passes;
    drop(probe);

    let start = Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300)); // real time
        let _ = tx.send(());
    });
    rx.await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "virtual time raced ahead {:?} while waiting on a real thread",
        start.elapsed()
    );
    assert!(kept.is_elapsed());
    assert!(passes >= 1);
}

/// After 10 000 sleeps of 1..10 000 ms were registered and dropped, the emptied buckets made
/// the driver wake 32 times in 2 s before a one-hour sleep (0 without the burst). The alarm is
/// now set only for buckets that hold something: one wakeup, the one armed while the burst
/// was alive.
#[tokio::test(start_paused = true)]
async fn cancelled_sleeps_do_not_make_a_far_sleep_wake_the_driver() {
    let timer = Timer::builder().build().unwrap();
    for i in 1..=10_000 {
        let mut s = task::spawn(timer.sleep(ms(i)));
        assert_pending!(s.poll());
    }
    let mut hour = task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert_pending!(hour.poll());
    assert_eq!(timer.pending(), 1);
    let before = timer.metrics().passes;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let wakeups = timer.metrics().passes - before;
    assert!(
        wakeups <= 1,
        "{wakeups} firing passes in 2 s for a sleep an hour away"
    );
    assert_pending!(hour.poll());
}

/// With a huge bucket cascading, a registration from another thread waited for the whole
/// cascade (14.6 ms for 1M entries in the review) because the driver relinked the bucket under
/// the shard lock in one go. The work per lock hold is now bounded: an entry due when the
/// bucket expires is handed out (and its waker woken, after the lock) long before the rest of
/// the bucket has moved down, and a registration from that waker succeeds.
#[tokio::test(start_paused = true)]
async fn a_huge_cascade_is_moved_a_batch_per_lock_hold() {
    struct Probe {
        timer: Timer,
        cascades_when_woken: std::sync::Mutex<Option<u64>>,
        registered: AtomicBool,
    }
    impl std::task::Wake for Probe {
        fn wake(self: Arc<Self>) {
            let m = self.timer.metrics(); // takes every shard's lock: it is free now
            *self.cascades_when_woken.lock().unwrap() = Some(m.cascades);
            let s = self.timer.try_sleep(Duration::from_secs(3600));
            self.registered.store(s.is_ok(), SeqCst);
        }
    }

    const N: u64 = 100_000;
    let timer = Timer::builder().shards(1).build().unwrap();
    // All in one level-2 bucket (4096 ms wide, expiring at 8192 ms); the probe first, due
    // exactly at the bucket's expiration.
    let start = Instant::now();
    let probe = Arc::new(Probe {
        timer: timer.clone(),
        cascades_when_woken: std::sync::Mutex::new(None),
        registered: AtomicBool::new(false),
    });
    let mut first = timer.sleep_until(start + ms(8192));
    let waker = std::task::Waker::from(probe.clone());
    assert!(Pin::new(&mut first)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let rest: Vec<_> = (0..N)
        .map(|i| timer.try_sleep_until(start + ms(8193 + i % 4000)).unwrap())
        .collect();
    assert_eq!(timer.metrics().levels, 3);

    tokio::time::sleep_until(start + ms(8192)).await;
    settle().await;
    let cascaded = probe
        .cascades_when_woken
        .lock()
        .unwrap()
        .expect("the probe fired");
    assert!(
        cascaded < N / 10,
        "the probe was woken only after {cascaded} of {N} entries had moved down"
    );
    assert!(probe.registered.load(SeqCst));
    drop(rest);
}

/// On time under load: a task that registered a sleep (which, in the old design,
/// queued the driver task on its worker) and then blocked its thread stalled every wheel timer
/// of the runtime for as long as it blocked. Timers now fire inside Tokio's own timer
/// processing, which the other worker runs: only the blocked worker's tasks wait. (Wall clock,
/// with a wide margin: the old design was late by the whole 600 ms block.)
#[test]
fn a_blocked_worker_does_not_stall_the_other_workers_timers() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let blocker = tokio::spawn(async move {
            let mut s = task::spawn(sleep_wheel(ms(5)));
            assert_pending!(s.poll()); // registered from this worker
            let _ = tx.send(());
            std::thread::sleep(Duration::from_millis(600)); // a bug in user code
        });
        rx.await.unwrap();
        let start = std::time::Instant::now();
        let other = tokio::spawn(async move {
            sleep_wheel(ms(20)).await;
            start.elapsed()
        });
        let took = other.await.unwrap();
        assert!(
            took < Duration::from_millis(400),
            "a 20 ms sleep on the free worker took {took:?} while the other worker was blocked"
        );
        blocker.await.unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// Found in review: a timer used from another runtime reads its own runtime's clock
// ---------------------------------------------------------------------------------------------

/// Never early, whichever runtime polls: a `Timer` built on a paused runtime A (its clock an
/// hour ahead) and used from a task of a real-clock runtime B computes the deadline on B's
/// clock and compares it with A's wheel time, so `timer.sleep(2 s)` completes on its first
/// poll although no clock (A's or B's) has moved at all. A plain thread gets A's clock
/// (`a_sleep_made_outside_the_runtime_uses_the_runtime_clock`); a task of another runtime
/// does not. Tokio's own timers cannot be mixed this way (a `Sleep` belongs to one driver).
#[test]
fn a_timer_of_a_paused_runtime_used_from_another_runtime_never_fires_early() {
    let a = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = a.block_on(async {
        let timer = Timer::builder().build().unwrap();
        // An hour of A's virtual time, through the wheel (the driver's passes move its time).
        timer.sleep(Duration::from_secs(3600)).await;
        timer
    });
    let a_now = a.block_on(async { Instant::now() });

    let b = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let (ready, deadline) = b.block_on(async {
        let mut s = timer.sleep(Duration::from_secs(2));
        (poll_with(&mut s, &waker).is_ready(), s.deadline())
    });
    let a_later = a.block_on(async { Instant::now() });
    assert_eq!(a_now, a_later, "A's clock did not move");
    assert!(
        !ready,
        "a 2 s sleep completed on its first poll: deadline {deadline:?} is on B's clock, \
         {:?} behind A's wheel time",
        a_now.saturating_duration_since(deadline)
    );
}

/// Worse than the first test: a task of another runtime can become the driver's runner (its
/// registration lowers the alarm, and the alarm is due), and the runner's pass reads "now"
/// with `Driver::now`, on the runner's runtime clock. A paused runtime B an hour ahead then
/// fires the timer's other entries, those of runtime A's own tasks, up to an hour early.
/// Here a 3 s sleep of a task on A completes at once (within 1 s of A's real clock).
#[test]
fn a_foreign_runtimes_clock_never_fires_the_timers_own_entries_early() {
    let a = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let timer = a.block_on(async { Timer::builder().build().unwrap() });
    // Keeps A's Tokio time driver turning every millisecond (any busy service does), so a
    // Tokio timer set in A's past is found elapsed at once when it is (re)registered.
    a.spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });

    // A task on A waits 3 s on the wheel; the test only waits 1 s for it.
    let (registered_tx, registered_rx) = std::sync::mpsc::channel();
    let t = timer.clone();
    let victim = a.spawn(async move {
        let mut s = tokio_test::task::spawn(t.sleep(Duration::from_secs(3)));
        tokio_test::assert_pending!(s.poll());
        registered_tx.send(()).unwrap();
        let start = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(1), s).await;
        (r.is_ok(), start.elapsed())
    });
    registered_rx.recv().unwrap();

    // Runtime B, paused: a sleep created, then B's clock moves an hour, then its first poll.
    let b = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    b.block_on(async {
        let mut s = timer.sleep(Duration::from_millis(1));
        tokio::time::advance(Duration::from_secs(3600)).await;
        std::thread::sleep(Duration::from_millis(20)); // its deadline is past on A's clock too
        let waker = Waker::from(Arc::new(CountingWaker::default()));
        let _ = poll_with(&mut s, &waker); // registers in the past: this thread runs the pass
    });

    let (fired, after) = a.block_on(victim).unwrap();
    assert!(
        !fired,
        "a 3 s sleep of a task on A completed after {after:?}: another runtime's clock fired it"
    );
}

/// The other direction: a runner on a paused runtime whose clock is *behind* the timer's
/// runtime spins for ever. Its pass (on its own clock) finds the head bucket not yet due, arms
/// for it, Tokio (on the timer's runtime clock) reports that alarm already due, so it passes
/// again, and so on: the registering task's poll never returns, and as the runner role is
/// never given back, every other timer of the `Timer` stops too. A paused runtime falls behind
/// real time whenever it is busy or blocked without advancing.
#[test]
fn a_runner_on_a_runtime_whose_clock_is_behind_does_not_spin() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let b = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let a = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let a_origin = a.block_on(async { Instant::now() });
        let timer = a.block_on(async { Timer::builder().build().unwrap() });
        a.spawn(async {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        std::thread::sleep(Duration::from_millis(30));
        b.block_on(async {
            // B's clock to 5 ms after A's origin: 25 ms behind A's clock.
            let behind = a_origin + Duration::from_millis(5);
            tokio::time::advance(behind.saturating_duration_since(Instant::now())).await;
            let mut s = timer.sleep(Duration::from_millis(1)); // due on A's clock, not on B's
            let waker = Waker::from(Arc::new(CountingWaker::default()));
            let _ = poll_with(&mut s, &waker);
        });
        let _ = done_tx.send(());
        drop(a);
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the registering poll on the lagging runtime has not returned after 10 s (spinning)"
    );
}
