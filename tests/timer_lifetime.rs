//! `Timer`'s shutdown and lifetime: shutdown resolves everything pending, dropping the runtime
//! does too, dropped handles stop nothing, and each runtime has its own default timer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{sleep_wheel, spawn_after, Timer, TimerError};

mod common;
use common::{ms, settle, with_watchdog, OnEvent};

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
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
    // The sentinel task waits on while the timer lives, to learn of the runtime's shutdown
    // (an interval of the timer waits on the runtime's Tokio timer now), and ends with it.
    assert_eq!(alive_tasks(), base + 1, "the sentinel task waits on");
    drop((timer, s, unpolled));
    settle().await;
    assert_eq!(
        alive_tasks(),
        base,
        "the sentinel task ended with the timer"
    );
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

thread_local! {
    /// A runtime kept per thread, dropped with the thread's other thread-locals as it exits.
    static THREAD_RUNTIME: std::cell::RefCell<Option<tokio::runtime::Runtime>> =
        const { std::cell::RefCell::new(None) };
}

/// A runtime kept in a thread-local is dropped as its thread exits, after Tokio's own
/// thread-local context is gone: its timers shut down there, as with Tokio's own timers,
/// rather than abort the process (a panic in a thread-local's destructor), and a sleep of its
/// default timer polled elsewhere resolves. Paused or not.
#[test]
fn a_runtime_dropped_with_its_threads_thread_locals_shuts_its_timers_down() {
    for paused in [false, true] {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Stored before Tokio's context is first used on this thread: thread-locals are
            // destroyed in the reverse order, so the runtime drops after the context.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(paused)
                .build()
                .unwrap();
            THREAD_RUNTIME.with(|r| *r.borrow_mut() = Some(rt));
            let (elsewhere,) = THREAD_RUNTIME.with(|r| {
                r.borrow().as_ref().unwrap().block_on(async {
                    sleep_wheel(ms(1)).await;
                    tokio::spawn(async { sleep_wheel(Duration::from_secs(100)).await });
                    let mut elsewhere = task::spawn(sleep_wheel(Duration::from_secs(100)));
                    assert_pending!(elsewhere.poll());
                    drop(spawn_after(Duration::from_secs(100), async {}));
                    tokio::task::yield_now().await;
                    (elsewhere.into_inner(),)
                })
            });
            tx.send(elsewhere).unwrap();
        })
        .join()
        .expect("the thread ends without a panic");
        let mut elsewhere = rx.recv().unwrap();
        let mut polled = task::spawn(&mut elsewhere);
        assert_ready!(polled.poll());
        assert!(elsewhere.is_shutdown(), "paused: {paused}");
    }
}

/// A task dropped as its thread's locals are destroyed (its runtime kept in one, Tokio's
/// context outliving it) may make a timer in its destructor, as it may make Tokio's: the
/// per-thread cache, destroyed already, is skipped instead of panicking, which Tokio would
/// catch, leaving the rest of the destructor unrun.
#[test]
fn a_task_dropped_with_its_threads_thread_locals_may_make_a_timer() {
    static DONE: AtomicBool = AtomicBool::new(false);
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            drop(tokio::spawn(tokio_timing_wheel::timeout(
                Duration::from_secs(1),
                async {},
            )));
            drop(sleep_wheel(Duration::from_secs(1)));
            DONE.store(true, SeqCst);
        }
    }
    std::thread::spawn(|| {
        // Tokio's context first: destroyed last, after the runtime (stored next) and the
        // crate's cache (first used after that).
        let _ = tokio::runtime::Handle::try_current();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        THREAD_RUNTIME.with(|r| *r.borrow_mut() = Some(rt));
        THREAD_RUNTIME.with(|r| {
            r.borrow().as_ref().unwrap().block_on(async {
                sleep_wheel(ms(1)).await; // the cache holds this runtime's timer
                tokio::spawn(async {
                    let _cleanup = Cleanup;
                    std::future::pending::<()>().await
                });
                tokio::task::yield_now().await;
            })
        });
    })
    .join()
    .expect("the thread ends without a panic");
    assert!(DONE.load(SeqCst), "the destructor ran to its end");
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

/// A tracing subscriber whose `event` uses the default timer (reads its metrics, as a layer
/// that annotates events with them might): the crate logs while it creates a runtime's
/// default timer, and that event must not reach the subscriber under the registry's lock,
/// or the subscriber's `Timer::current()` would wait for it on its own thread, forever.
#[test]
fn a_tracing_subscriber_may_use_the_default_timer() {
    let events = with_watchdog(Duration::from_secs(20), || {
        let events = Arc::new(AtomicUsize::new(0));
        let seen = events.clone();
        let _guard = OnEvent::install(move |_: &tracing::Event<'_>| {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = Timer::current().metrics();
                seen.fetch_add(1, SeqCst);
            }
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            sleep_wheel(ms(5)).await;
            let t = spawn_after(ms(5), async { 7 });
            assert_eq!(t.await.unwrap(), 7);
        });
        events.load(SeqCst)
    });
    assert!(events > 0, "the subscriber saw the crate's events");
}

/// Runs its closure when dropped: as a thread-local, as its thread exits.
struct AtExit(Option<Box<dyn FnOnce()>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

thread_local! {
    static AT_EXIT: std::cell::RefCell<Option<AtExit>> = const { std::cell::RefCell::new(None) };
}

/// A multi-thread runtime of one worker (a real clock) and a timer built on it.
fn one_worker_with_a_timer() -> (tokio::runtime::Runtime, Timer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    (rt, timer)
}

/// A timer whose alarm is first set from a thread whose Tokio context is already destroyed
/// (a sleep first polled in a thread-local's destructor as its thread exits) cannot make its
/// Tokio sleep there: it sets it from its runtime instead, and goes on. Before, Tokio's panic
/// there was taken for the runtime refusing timers, and the whole timer shut down.
#[test]
fn a_timer_first_armed_as_a_thread_exits_goes_on() {
    let (rt, timer) = one_worker_with_a_timer();
    // Made here: with Tokio's `test-util`, once any runtime of the process has paused its
    // clock, reading the clock where Tokio's context is destroyed panics (the sleep's first
    // poll reads the timer's clock its own way).
    let sleep = {
        let _entered = rt.enter();
        timer.sleep(ms(50))
    };
    let deadline = sleep.deadline();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Stored before Tokio's context is first used on this thread: thread-locals are
        // destroyed in the reverse order, so this runs after the context is gone.
        let at_exit = AtExit(Some(Box::new(move || {
            let mut sleep = task::spawn(sleep);
            assert_pending!(sleep.poll()); // registered: the timer's first alarm
            let _ = tx.send(sleep.into_inner());
        })));
        AT_EXIT.with(|slot| *slot.borrow_mut() = Some(at_exit));
        let _ = tokio::runtime::Handle::try_current();
    })
    .join()
    .expect("the thread ends without a panic");
    let sleep = rx.recv().expect("the destructor ran");
    assert!(!timer.is_shutdown(), "the timer goes on");
    let woke = rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(10), sleep)
            .await
            .map(|()| Instant::now())
    });
    let woke = woke.expect("the sleep completes");
    assert!(woke >= deadline, "never early");
    assert!(!timer.is_shutdown(), "the timer goes on");
}

/// A thread exiting, its Tokio context gone, runs a pass for a sleep it registers, the alarm
/// already set: where runtimes can pause their clocks (Tokio's `test-util`) it cannot read
/// the runtime's clock there, so its pass counts from the last pass's time (here the timer's
/// start: none has run), while Tokio's sleep, reset for the new head, reads the runtime's
/// clock and is due at once. The pass, due again and again, must not spin on that thread: it
/// goes to the runtime, which fires the sleep, in a pass or two.
#[test]
fn a_pass_due_on_a_thread_without_tokios_context_does_not_spin() {
    let (rt, timer) = one_worker_with_a_timer();
    // The alarm is set (an hour away); registering passes nothing.
    let far = {
        let _entered = rt.enter();
        let mut far = task::spawn(timer.sleep(Duration::from_secs(3_600)));
        assert_pending!(far.poll());
        far
    };
    // Tokio's own timer goes 50 ms on (and never back), with no pass of ours: nothing is due.
    rt.block_on(async { tokio::time::sleep(ms(50)).await });
    assert_eq!(timer.metrics().passes, 0);
    let t = timer.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Stored before Tokio's context is first used on this thread (see above).
        let at_exit = AtExit(Some(Box::new(move || {
            // Its deadline counts from the timer's start (this thread reads no clock): 40 ms
            // behind Tokio's.
            let mut sleep = task::spawn(t.sleep(ms(10)));
            let _ = sleep.poll(); // registered, or due already
            let _ = tx.send(sleep.into_inner());
        })));
        AT_EXIT.with(|slot| *slot.borrow_mut() = Some(at_exit));
        let _ = tokio::runtime::Handle::try_current();
    });
    let sleep = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the exiting thread's registration spun (or its destructor never ran)");
    rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(10), sleep)
            .await
            .expect("the sleep completes")
    });
    let passes = timer.metrics().passes;
    assert!(
        (1..=3).contains(&passes),
        "{passes} passes: the pass went back and forth"
    );
    assert!(!timer.is_shutdown(), "the timer goes on");
    drop(far);
}
