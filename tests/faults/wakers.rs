//! Misbehaving wakers: panicking, blocking, calling back into the timer, or using the timer
//! when dropped. The timer contains them and carries on.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{DelayedTask, Sleep, Timer};

use crate::common::{ms, poll_with, settle, CountingWaker};
use crate::{multi_thread, paused_runtime, quiet_intended_panics, with_watchdog};

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

#[tokio::test(start_paused = true)]
async fn a_panicking_waker_is_contained_and_the_driver_carries_on() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let bad = Arc::new(PanickingWaker::default());
    let bad_waker = Waker::from(bad.clone());

    a_panicking_waker_does_not_stop_its_pass(&timer, &bad, &bad_waker).await;
    the_driver_still_fires(&timer).await;
    many_panicking_wakers_do_not_stop_their_pass(&timer, &bad, &bad_waker).await;
    shutdown_drains_a_panicking_waker(&timer, &bad, &bad_waker);
}

/// Two sleeps due in the same pass, the panicking waker woken first: both are woken once, both
/// complete as elapsed, and the timer is not shut down.
async fn a_panicking_waker_does_not_stop_its_pass(
    timer: &Timer,
    bad: &PanickingWaker,
    bad_waker: &Waker,
) {
    let good = Arc::new(CountingWaker::default());
    let good_waker = Waker::from(good.clone());
    let noop = futures::task::noop_waker();

    // Same deadline, same pass: the panicking waker is woken first.
    let mut s_bad = timer.sleep(ms(10));
    let mut s_good = timer.sleep(ms(10));
    assert!(poll_with(&mut s_bad, bad_waker).is_pending());
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
}

/// After a panicking waker the driver is alive: a later sleep completes on time, a delayed
/// task runs. (On paused time the outer timeout would fire at once, failing the test, if the
/// driver had died.)
async fn the_driver_still_fires(timer: &Timer) {
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
}

/// Many panicking wakers in one pass (more than the driver's batch of 1024), interleaved with
/// counting ones: every waker is woken once.
async fn many_panicking_wakers_do_not_stop_their_pass(
    timer: &Timer,
    bad: &PanickingWaker,
    bad_waker: &Waker,
) {
    let good = Arc::new(CountingWaker::default());
    let good_waker = Waker::from(good.clone());
    let noop = futures::task::noop_waker();
    let before = bad.attempts();
    let mut many = Vec::new();
    for i in 0..3_000 {
        let mut s = timer.sleep(ms(10));
        let w = if i % 2 == 0 { bad_waker } else { &good_waker };
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
}

/// A panicking waker drained by shutdown: `shutdown()` returns normally, the others resolve.
fn shutdown_drains_a_panicking_waker(timer: &Timer, bad: &PanickingWaker, bad_waker: &Waker) {
    let good = Arc::new(CountingWaker::default());
    let good_waker = Waker::from(good.clone());
    let noop = futures::task::noop_waker();
    let mut s_bad = timer.sleep(Duration::from_secs(3_600));
    let mut s_good = timer.sleep(Duration::from_secs(3_600));
    assert!(poll_with(&mut s_bad, bad_waker).is_pending());
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
        let rt = paused_runtime();
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

/// A waker whose destructor drops another sleep of the same timer: cancelling the sleep that
/// holds it (the wheel then drops the waker) must neither deadlock nor leave either sleep
/// pending (Tokio's `drop_from_waker_drop`). The wheel drops the waker after the shard's
/// lock, and a cancel that finds that lock taken would hand itself over.
#[test]
fn a_waker_dropped_on_cancel_may_drop_another_sleep_of_the_timer() {
    struct OwnsSleep(Mutex<Option<Sleep>>);
    impl Wake for OwnsSleep {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for OwnsSleep {
        fn drop(&mut self) {
            drop(self.0.lock().unwrap().take());
        }
    }
    with_watchdog(Duration::from_secs(20), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for timer in [
                Timer::current(),
                Timer::builder().shards(1).build().unwrap(),
            ] {
                let mut secondary = timer.sleep(Duration::from_secs(3600));
                assert_pending!(poll_with(&mut secondary, futures::task::noop_waker_ref()));
                let waker = Waker::from(Arc::new(OwnsSleep(Mutex::new(Some(secondary)))));
                let mut primary = timer.sleep(Duration::from_secs(3600));
                assert_pending!(poll_with(&mut primary, &waker));
                assert_eq!(timer.pending(), 2);
                drop(waker); // the wheel now holds the only reference
                drop(primary);
                assert_eq!(timer.pending(), 0, "both sleeps left the wheel");
            }
        });
    });
}

/// A panic payload whose destructor panics too.
struct PayloadThatPanicsOnDrop;

impl Drop for PayloadThatPanicsOnDrop {
    fn drop(&mut self) {
        panic!("this panic payload panics when dropped (on purpose)");
    }
}

/// A waker that panics, when woken, with a payload that panics when dropped.
struct DoublePanickingWaker(AtomicUsize);

impl Wake for DoublePanickingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        std::panic::panic_any(PayloadThatPanicsOnDrop);
    }
}

/// The payload is dropped inside the timer's catch too: nothing unwinds through Tokio's time
/// driver (which would take `block_on` down and leave the runtime without its driver), and the
/// timer keeps firing afterwards, on this runtime and the next `block_on`.
#[test]
fn a_waker_whose_panic_payload_panics_on_drop_is_contained() {
    quiet_intended_panics();
    with_watchdog(Duration::from_secs(60), || {
        let rt = paused_runtime();
        let bad = Arc::new(DoublePanickingWaker(AtomicUsize::new(0)));
        let timer = rt.block_on(async { Timer::builder().build().unwrap() });
        let mut sleep = {
            let _runtime = rt.enter();
            timer.sleep(ms(10))
        };
        rt.block_on(async {
            assert!(poll_with(&mut sleep, &Waker::from(bad.clone())).is_pending());
            tokio::time::sleep(ms(20)).await;
            settle().await;
        });
        assert_eq!(bad.0.load(SeqCst), 1, "the waker was woken once");
        assert!(sleep.is_elapsed());
        // Tokio's driver and the timer's runner both survived: later sleeps fire.
        rt.block_on(async {
            let start = Instant::now();
            timer.sleep(ms(10)).await;
            assert!(start.elapsed() >= ms(10));
            tokio::time::sleep(ms(1)).await;
            assert!(!timer.is_shutdown());
        });
    });
}

/// A waker whose drop panics, armed when the test says so.
struct PanicsOnDrop(Arc<AtomicBool>);

impl Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if self.0.swap(false, SeqCst) {
            panic!("this waker panics when dropped (on purpose)");
        }
    }
}

/// A sleep dropped on another thread of a busy timer hands its cancel to its shard, whose
/// next pass removes the entry and drops the waker it held: a waker whose drop panics is
/// contained there as a panicking wake is, rather than unwinding through Tokio's time driver
/// (which took `block_on` down), and the timer fires on afterwards.
#[test]
fn a_waker_that_panics_when_dropped_by_a_pass_is_contained() {
    quiet_intended_panics();
    with_watchdog(Duration::from_secs(60), || {
        let rt = paused_runtime();
        let armed = Arc::new(AtomicBool::new(false));
        let timer = rt.block_on(async { Timer::builder().shards(64).build().unwrap() });
        rt.block_on(async {
            let waker = Waker::from(Arc::new(PanicsOnDrop(armed.clone())));
            let mut sleep = timer.sleep(ms(5));
            assert!(poll_with(&mut sleep, &waker).is_pending());
            // The wheel's entry holds the last clone of the waker. Dropped on another thread,
            // with a pass due within 10 ms, the sleep is handed over, so the waker is not
            // dropped there (that drop would panic the thread).
            drop(waker);
            armed.store(true, SeqCst);
            let dropped_there = std::thread::spawn(move || drop(sleep)).join().is_err();
            assert!(
                !dropped_there && armed.load(SeqCst),
                "the cancel was handed over, its waker left for the pass"
            );
            assert_eq!(timer.pending(), 0, "out of pending() at once");
            tokio::time::sleep(ms(20)).await; // the pass sweeps the hand-over
            settle().await;
        });
        assert!(!armed.load(SeqCst), "the pass dropped the waker");
        rt.block_on(async {
            let start = Instant::now();
            timer.sleep(ms(10)).await;
            assert!(start.elapsed() >= ms(10));
            assert!(!timer.is_shutdown());
        });
    });
}

/// The pass holds a reference to each shard while it fires it: if a waker woken there drops
/// every other one (the last `Timer` handle and futures), the shard goes with the pass's, and
/// the wakers still in its wheel (a cancel handed over after the pass's sweep) with it. They
/// are dropped inside a catch too: nothing unwinds into Tokio's time driver.
#[test]
fn a_shard_dropped_inside_a_pass_drops_its_wakers_inside_a_catch() {
    struct DropsEverything {
        state: Mutex<Option<(Timer, Sleep, Sleep)>>,
        armed: Arc<AtomicBool>,
        handed_over: Arc<AtomicBool>,
    }
    impl Wake for DropsEverything {
        fn wake(self: Arc<Self>) {
            let Some((timer, a, b)) = self.state.lock().unwrap().take() else {
                return;
            };
            // A registration in the pass arms the driver again: a cancel from another thread
            // now hands over.
            let mut c = timer.sleep(ms(1));
            assert!(poll_with(&mut c, futures::task::noop_waker_ref()).is_pending());
            self.armed.store(true, SeqCst);
            let dropped_there = std::thread::spawn(move || drop(a)).join().is_err();
            self.handed_over
                .store(!dropped_there && self.armed.load(SeqCst), SeqCst);
            drop(c);
            drop(b);
            drop(timer); // the pass now holds the shard's last reference
        }
    }
    quiet_intended_panics();
    with_watchdog(Duration::from_secs(60), || {
        let rt = paused_runtime();
        let armed = Arc::new(AtomicBool::new(false));
        let handed_over = Arc::new(AtomicBool::new(false));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                let timer = Timer::builder().shards(64).build().unwrap();
                let waker = Waker::from(Arc::new(PanicsOnDrop(armed.clone())));
                let mut a = timer.sleep(ms(50));
                assert!(poll_with(&mut a, &waker).is_pending());
                drop(waker);
                let on_wake = Arc::new(DropsEverything {
                    state: Mutex::new(None),
                    armed: armed.clone(),
                    handed_over: handed_over.clone(),
                });
                let mut b = timer.sleep(ms(5));
                assert!(poll_with(&mut b, &Waker::from(on_wake.clone())).is_pending());
                *on_wake.state.lock().unwrap() = Some((timer, a, b));
                tokio::time::sleep(ms(20)).await;
                settle().await;
            });
        }));
        assert!(handed_over.load(SeqCst), "the cancel was handed over");
        assert!(!armed.load(SeqCst), "the waker was dropped, with the shard");
        assert!(
            result.is_ok(),
            "a waker's drop panic unwound through block_on"
        );
    });
}
