//! `Timer`: its auto traits, and what firing costs: no wakeups while idle or detached, a
//! huge cascade moved a batch per lock hold, and a blocked worker stalling only its own
//! timers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, task};
use tokio_timing_wheel::{sleep_wheel, BuildError, DelayedTask, Sleep, Timer, TimerError};

mod common;
use common::{ms, settle};

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

/// A pass gives its shard's lock up between batches of a big cascade, and others may take it
/// meanwhile: a waker woken in the first batch cancels the rest of the bucket and calls
/// `shrink_to_fit`, which released the level of the bucket the pass was still moving, and the
/// pass's next batch panicked inside Tokio's timer processing (every later pass of the shard
/// too). The pass must end cleanly, the first sleep fire and nothing stay pending.
#[tokio::test(start_paused = true)]
async fn shrink_to_fit_between_the_batches_of_a_cascade_leaves_the_pass_whole() {
    struct CancelRestAndShrink {
        timer: Timer,
        rest: std::sync::Mutex<Vec<Sleep>>,
    }
    impl std::task::Wake for CancelRestAndShrink {
        fn wake(self: Arc<Self>) {
            self.rest.lock().unwrap().clear(); // cancels the rest of the bucket
            self.timer.shrink_to_fit(); // its level is now empty
        }
    }

    let timer = Timer::builder().shards(1).build().unwrap();
    let start = Instant::now();
    let on_wake = Arc::new(CancelRestAndShrink {
        timer: timer.clone(),
        rest: std::sync::Mutex::new(Vec::new()),
    });
    // The first of a level-1 bucket ([64, 128) ms), then thousands behind it in the same one.
    let mut first = timer.sleep_until(start + ms(64));
    let waker = std::task::Waker::from(on_wake.clone());
    assert!(Pin::new(&mut first)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let rest: Vec<_> = (0..5_000)
        .map(|_| timer.try_sleep_until(start + ms(100)).unwrap())
        .collect();
    *on_wake.rest.lock().unwrap() = rest;
    assert_eq!(timer.pending(), 5_001);

    tokio::time::sleep_until(start + ms(200)).await;
    settle().await;
    assert!(
        on_wake.rest.lock().unwrap().is_empty(),
        "the first sleep fired"
    );
    let mut first = task::spawn(first);
    assert!(first.poll().is_ready());
    assert_eq!(timer.pending(), 0);
    // The shard still works: a new sleep fires on time.
    let later = Instant::now();
    timer.sleep(ms(10)).await;
    assert!(later.elapsed() >= ms(10));
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

/// `TimerMetrics::lateness`: on time in paused time (exact deadlines), and as late as the
/// runtime held the timers up when it did; a window between two reads counts only what fired
/// in it.
#[tokio::test(start_paused = true)]
async fn lateness_reports_how_late_fired_timers_were() {
    let timer = Timer::builder().build().unwrap();
    // Whole milliseconds: Tokio's own timer, which wakes the wheel, fires on a 1 ms grid.
    for i in 1..=100 {
        timer.sleep(ms(i % 7 + 1)).await;
    }
    let on_time = timer.metrics().lateness;
    assert_eq!(on_time.count(), 100);
    assert_eq!(
        on_time.max(),
        Duration::ZERO,
        "paused time: exactly at the deadline"
    );
    assert_eq!(on_time.p99(), Duration::ZERO);
    assert_eq!(on_time.later_than(Duration::from_micros(1)), 0);

    // The runtime is held up: the clock jumps 50 ms while two sleeps (due at 10 and 30 ms)
    // and a delayed task (due at 20 ms) wait.
    let a = tokio::spawn(timer.sleep(Duration::from_millis(10)));
    let b = tokio::spawn(timer.sleep(Duration::from_millis(30)));
    let c = timer.spawn_after(Duration::from_millis(20), async {});
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_millis(50)).await;
    a.await.unwrap();
    b.await.unwrap();
    c.await.unwrap();

    let window = timer.metrics().lateness.since(&on_time);
    assert_eq!(window.count(), 3);
    assert_eq!(
        window.later_than(Duration::from_millis(16)),
        3,
        "{window:?}"
    );
    assert_eq!(
        window.later_than(Duration::from_millis(32)),
        1,
        "{window:?}"
    );
    assert!(window.p50() >= Duration::from_millis(20) && window.p50() <= Duration::from_millis(33));
    assert!(window.max() >= Duration::from_millis(40));
    assert_eq!(
        timer.metrics().lateness.max(),
        Duration::from_millis(40),
        "exact, all time"
    );
}

/// A cancelled sleep leaves its bucket's heap item behind (so the next sleep for that bucket
/// costs no heap push). When the wheel had emptied and a far sleep was registered first, a
/// second, nearer sleep joining such a left-behind bucket told the driver nothing, and the
/// alarm stayed on the far sleep: a 5 s sleep fired after an hour.
#[tokio::test(start_paused = true)]
async fn a_sleep_joining_a_bucket_emptied_by_a_cancel_fires_on_time_after_a_far_one() {
    let timer = Timer::builder().shards(1).build().unwrap();
    let start = Instant::now();
    // Empties a level-2 bucket (4.096-8.191 s at the default geometry) by a cancel.
    let mut cancelled = task::spawn(timer.sleep(ms(5_000)));
    assert_pending!(cancelled.poll());
    drop(cancelled);
    // A pass with the wheel otherwise empty: the alarm is disarmed.
    timer.sleep(ms(10)).await;
    let mut far = task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert_pending!(far.poll());
    let mut near = task::spawn(timer.sleep_until(start + ms(5_000)));
    assert_pending!(near.poll());
    tokio::time::sleep_until(start + ms(5_001)).await;
    settle().await;
    assert!(
        near.is_woken(),
        "a 5 s sleep had not fired at {:?}",
        start.elapsed()
    );
    assert_pending!(far.poll());
}

/// A sleep registered on one thread and dropped on another (work stealing), on a quiet timer,
/// gives back its memory at once, the task's waker included (which keeps the task's
/// allocation alive): handed over to the shard instead (as an earlier version did), the waker
/// stayed until the shard's next registration or the timer's next pass, with the registering
/// thread gone and nothing else pending, when the sleep's bucket came due.
#[test]
fn a_sleep_dropped_on_another_thread_lets_go_of_its_waker_at_once_on_a_quiet_timer() {
    let (rt, timer, task, sleep) = hour_sleep_registered_on_another_thread(None);
    drop(sleep); // on another thread than the one that registered it
    assert_eq!(timer.pending(), 0);
    assert_eq!(Arc::strong_count(&task), 1, "the waker dropped at once");
    drop(rt);
}

/// On a busy timer (a pass due within 10 ms of the last), a sleep dropped on another thread
/// than the one that registered it is handed over to the shard: no longer pending at once, its
/// waker dropped by that pass. No pass runs in the drop.
#[test]
fn a_sleep_dropped_on_another_thread_of_a_busy_timer_lets_go_of_its_waker_at_the_next_pass() {
    let (rt, timer, task, sleep) = hour_sleep_registered_on_another_thread(Some(ms(5)));
    let passes = timer.metrics().passes;
    drop(sleep); // on another thread than the one that registered it
    assert_eq!(timer.metrics().passes, passes, "the drop ran a pass");
    assert_eq!(timer.pending(), 1, "only the 5 ms sleep is pending");
    assert_eq!(
        Arc::strong_count(&task),
        2,
        "handed over: swept by the pass due"
    );
    rt.block_on(async { tokio::time::sleep(ms(6)).await });
    assert_eq!(
        Arc::strong_count(&task),
        1,
        "a cancelled sleep still holds its task's waker after the pass ({} passes since)",
        timer.metrics().passes - passes
    );
}

/// A task that is never woken, only counted (its `Arc`'s strong count: the wakers alive).
struct Task;

impl std::task::Wake for Task {
    fn wake(self: Arc<Self>) {}
}

/// A paused runtime and a timer on it; a sleep of an hour registered with a task's waker on a
/// thread that then exits (its shard differs from this thread's); with `near`, a sleep that
/// long registered by this thread too, and kept pending in the timer.
fn hour_sleep_registered_on_another_thread(
    near: Option<Duration>,
) -> (tokio::runtime::Runtime, Timer, Arc<Task>, Sleep) {
    let rt = common::paused_runtime();
    let timer = rt.block_on(async { Timer::builder().shards(1024).build().unwrap() });
    // This thread takes its shard number first, so the registering thread's differs.
    drop(timer.sleep(ms(1)));
    if let Some(d) = near {
        let mut near = Box::pin(timer.sleep(d));
        let noop = futures::task::noop_waker();
        assert!(near
            .as_mut()
            .poll(&mut Context::from_waker(&noop))
            .is_pending());
        rt.spawn(near);
    }
    let task = Arc::new(Task);
    let sleep = std::thread::spawn({
        let timer = timer.clone();
        let waker = std::task::Waker::from(task.clone());
        move || {
            let mut sleep = timer.sleep(Duration::from_secs(3600));
            assert!(Pin::new(&mut sleep)
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            sleep // the registering thread exits
        }
    })
    .join()
    .unwrap();
    assert_eq!(timer.pending(), 1 + usize::from(near.is_some()));
    assert_eq!(
        Arc::strong_count(&task),
        2,
        "the wheel holds the task's waker"
    );
    (rt, timer, task, sleep)
}

/// What `TimerMetrics::lateness` counts, at its edges: a sleep, timeout or delayed task due
/// when first polled or created completes without entering the wheel and is not counted, nor
/// is an interval's tick already due when polled (the loop body took longer than a period);
/// a tick that waited counts.
#[tokio::test(start_paused = true)]
async fn lateness_counts_only_what_waited_in_the_wheel() {
    let timer = Timer::builder().build().unwrap();
    let before = timer.metrics().lateness;
    timer.sleep(Duration::ZERO).await;
    timer.sleep_until(Instant::now() - ms(5)).await;
    let _ = timer
        .timeout(Duration::ZERO, std::future::pending::<()>())
        .await;
    timer.spawn_after(Duration::ZERO, async {}).await.unwrap();
    timer
        .spawn_at(Instant::now() - ms(5), async {})
        .await
        .unwrap();
    assert_eq!(timer.metrics().lateness.since(&before).count(), 0);

    let mut ticks = timer.interval(ms(10));
    ticks.tick().await; // 0 ms
    ticks.tick().await; // 10 ms, on time
    assert_eq!(
        timer.metrics().lateness.count(),
        1,
        "the tick at 10 ms waited"
    );
    let before = timer.metrics().lateness;
    tokio::time::advance(ms(100)).await; // the loop body takes 100 ms
    ticks.tick().await; // the tick due at 20 ms, polled at 110 ms: complete at once
    assert_eq!(timer.metrics().lateness.since(&before).count(), 0);
    ticks.tick().await; // the tick due at 30 ms (Burst): at once too
    assert_eq!(timer.metrics().lateness.since(&before).count(), 0);
    assert_eq!(timer.metrics().lateness.max(), Duration::ZERO);
}

/// `Timer::pending` counts every entry in the wheel: a `try_sleep` from its creation (it
/// takes its slot then), an interval's one entry from its first wait until it is dropped
/// (also between ticks), and a delay queue's one registration.
#[tokio::test(start_paused = true)]
async fn pending_counts_try_sleeps_intervals_and_delay_queues() {
    let timer = Timer::builder().build().unwrap();
    let unpolled = timer.try_sleep(Duration::from_secs(60)).unwrap();
    assert_eq!(timer.pending(), 1, "a try_sleep holds its slot unpolled");
    drop(unpolled);
    assert_eq!(timer.pending(), 0);

    let mut ticks = timer.interval(ms(10));
    ticks.tick().await;
    ticks.tick().await;
    assert_eq!(timer.pending(), 1, "the interval's entry, between ticks");
    drop(ticks);
    assert_eq!(timer.pending(), 0);

    let mut queue = timer.delay_queue();
    for i in 0..10u64 {
        queue.insert(i, ms(10 + i));
    }
    let mut next = task::spawn(futures::StreamExt::next(&mut queue));
    assert_pending!(next.poll());
    assert_eq!(timer.pending(), 1, "ten items, one registration");
}

/// A sleep made with a duration reads no clock on its first poll: first polled only after
/// its deadline, it enters the wheel, fires on the next pass and counts as late from its
/// deadline (unlike a sleep made with a deadline already passed, which is not counted).
#[tokio::test(start_paused = true)]
async fn lateness_counts_a_duration_sleep_first_polled_after_its_deadline() {
    let timer = Timer::builder().build().unwrap();
    let before = timer.metrics().lateness;
    let sleep = timer.sleep(ms(10));
    tokio::time::advance(ms(100)).await;
    sleep.await;
    let window = timer.metrics().lateness.since(&before);
    assert_eq!(window.count(), 1, "{window:?}");
    assert_eq!(timer.metrics().lateness.max(), ms(90));
}

/// A sleep dropped within the tick it is due in (a timeout whose call answered) leaves an
/// item in the queue of that tick's entries; the next pass armed the alarm for its deadline
/// anyway, a firing pass for nothing.
#[tokio::test(start_paused = true)]
async fn a_sleep_dropped_in_its_last_tick_does_not_wake_the_driver() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    let mut first = task::spawn(timer.sleep_until(start + ms(15)));
    let mut dropped = task::spawn(timer.sleep_until(start + ms(17)));
    let mut last = task::spawn(timer.sleep_until(start + ms(19)));
    assert_pending!(first.poll());
    assert_pending!(dropped.poll());
    assert_pending!(last.poll());
    // The pass at 10 ms has moved all three to the tick's queue.
    tokio::time::sleep_until(start + ms(12)).await;
    drop(dropped);
    let before = timer.metrics().passes;
    tokio::time::sleep_until(start + ms(20)).await;
    assert!(first.is_woken() && last.is_woken());
    let passes = timer.metrics().passes - before;
    assert_eq!(passes, 2, "{passes} firing passes for two sleeps");
}
