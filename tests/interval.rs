//! Integration tests for `Interval` in paused time: the intents of Tokio's own interval tests
//! (burst / delay / skip after a stall, every reset, the first tick, streams), then what is
//! ours: `set_period`, one wheel entry for life, no allocation per tick, shutdown, the waker
//! of the latest poll, a full timer, bounded `Debug`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::{self, Instant};
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use tokio_timing_wheel::{interval, interval_at, Interval, MissedTickBehavior, Timer};

mod common;
use common::alloc::allocations;
use common::{ms, panic_message, settle, step, XorShift};

#[global_allocator]
static ALLOC: common::alloc::Counting = common::alloc::Counting;

/// Polls the interval once per delta, expecting `Ready(start + delta)` each time, then once
/// more expecting `Pending` (as in Tokio's tests).
macro_rules! check_interval_poll {
    ($i:ident, $start:ident, $($delta:expr),*$(,)?) => {
        $(
            assert_ready_eq!(poll_next(&mut $i), $start + ms($delta));
        )*
        assert_pending!(poll_next(&mut $i));
    };
    ($i:ident, $start:ident) => {
        check_interval_poll!($i, $start,);
    };
}

fn poll_next(interval: &mut task::Spawn<Interval>) -> Poll<Instant> {
    interval.enter(|cx, mut interval| interval.poll_tick(cx))
}

/// An interval of 300 ms started 1 ms ago, polled at once: the first tick.
async fn started_interval(behavior: MissedTickBehavior) -> (Instant, task::Spawn<Interval>) {
    let start = Instant::now();
    time::advance(ms(1)).await;
    let mut i = task::spawn(interval_at(start, ms(300)));
    i.set_missed_tick_behavior(behavior);
    check_interval_poll!(i, start, 0);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    time::advance(ms(200)).await;
    check_interval_poll!(i, start, 300);
    (start, i)
}

#[tokio::test]
async fn zero_period_panics_with_a_clear_message() {
    let attempts: [Box<dyn Fn()>; 4] = [
        Box::new(|| drop(interval(Duration::ZERO))),
        Box::new(|| drop(interval_at(Instant::now(), Duration::ZERO))),
        Box::new(|| drop(Timer::current().interval(Duration::ZERO))),
        Box::new(|| interval(ms(1)).set_period(Duration::ZERO)),
    ];
    for attempt in attempts {
        let err = catch_unwind(AssertUnwindSafe(attempt)).unwrap_err();
        assert!(
            panic_message(&*err).contains("`period` must be non-zero"),
            "{}",
            panic_message(&*err)
        );
    }
}

// Expected ticks: |     1     |     2     |     3     |     4     |     5     |     6     |
// Actual ticks:   | work -----|          delay          | work | work | work -| work -----|
#[tokio::test(start_paused = true)]
async fn burst_catches_up_at_once_after_a_stall() {
    let (start, mut i) = started_interval(MissedTickBehavior::Burst).await;
    time::advance(ms(650)).await;
    check_interval_poll!(i, start, 600, 900);
    time::advance(ms(200)).await;
    check_interval_poll!(i, start);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start, 1200);
    time::advance(ms(250)).await;
    check_interval_poll!(i, start, 1500);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1800);
}

// Expected ticks: |     1     |     2     |     3     |     4     |     5     |     6     |
// Actual ticks:   | work -----|          delay          | work -----| work -----| work -----|
#[tokio::test(start_paused = true)]
async fn delay_restarts_one_period_after_the_late_tick() {
    let (start, mut i) = started_interval(MissedTickBehavior::Delay).await;
    time::advance(ms(650)).await;
    check_interval_poll!(i, start, 600);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    // The late tick was polled at 951 ms, so the next comes at 1251 ms.
    time::advance(ms(201)).await;
    check_interval_poll!(i, start, 1251);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1551);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1851);
}

// Expected ticks: |     1     |     2     |     3     |     4     |     5     |     6     |
// Actual ticks:   | work -----|          delay          | work ---| work -----| work -----|
#[tokio::test(start_paused = true)]
async fn skip_realigns_to_the_next_multiple_of_the_period() {
    let (start, mut i) = started_interval(MissedTickBehavior::Skip).await;
    time::advance(ms(650)).await;
    check_interval_poll!(i, start, 600);
    time::advance(ms(250)).await;
    check_interval_poll!(i, start, 1200);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1500);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1800);
}

#[tokio::test(start_paused = true)]
async fn a_tick_up_to_five_ms_late_is_not_missed() {
    let start = Instant::now();
    let mut i = task::spawn(interval(ms(100)));
    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
    check_interval_poll!(i, start, 0);
    time::advance(ms(105)).await;
    // 5 ms late: on schedule, the next tick at 200 ms.
    check_interval_poll!(i, start, 100);
    time::advance(ms(100) + Duration::from_nanos(1)).await;
    // 5 ms and 1 ns late: missed, so Delay restarts from now.
    assert_ready_eq!(poll_next(&mut i), start + ms(200));
    time::advance(ms(100)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(Duration::from_nanos(1)).await;
    assert_ready_eq!(poll_next(&mut i), start + ms(305) + Duration::from_nanos(1));
}

#[tokio::test(start_paused = true)]
async fn reset_waits_one_period_from_now() {
    let (start, mut i) = started_interval(MissedTickBehavior::Burst).await;
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    i.reset();
    time::advance(ms(250)).await;
    check_interval_poll!(i, start);
    time::advance(ms(50)).await;
    check_interval_poll!(i, start, 701);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1001);
}

#[tokio::test(start_paused = true)]
async fn reset_immediately_ticks_at_once() {
    let (start, mut i) = started_interval(MissedTickBehavior::Burst).await;
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    i.reset_immediately();
    check_interval_poll!(i, start, 401);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    time::advance(ms(200)).await;
    check_interval_poll!(i, start, 701);
}

#[tokio::test(start_paused = true)]
async fn reset_after_waits_the_given_duration() {
    let (start, mut i) = started_interval(MissedTickBehavior::Burst).await;
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    i.reset_after(ms(20));
    time::advance(ms(20)).await;
    check_interval_poll!(i, start, 421);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    time::advance(ms(200)).await;
    check_interval_poll!(i, start, 721);
}

#[tokio::test(start_paused = true)]
async fn reset_at_moves_the_next_tick_earlier_or_later() {
    let (start, mut i) = started_interval(MissedTickBehavior::Burst).await;
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    i.reset_at(Instant::now() + ms(40));
    time::advance(ms(40)).await;
    check_interval_poll!(i, start, 441);
    time::advance(ms(100)).await;
    check_interval_poll!(i, start);
    // Further away than the period: waited for all the same.
    i.reset_at(Instant::now() + ms(1000));
    for _ in 0..3 {
        time::advance(ms(300)).await;
        check_interval_poll!(i, start);
    }
    time::advance(ms(100)).await;
    check_interval_poll!(i, start, 1541);
    time::advance(ms(300)).await;
    check_interval_poll!(i, start, 1841);
    // Into the past: at once, then the missed-tick behavior decides.
    i.reset_at(start);
    check_interval_poll!(i, start, 0, 300, 600, 900, 1200, 1500, 1800);
}

#[tokio::test(start_paused = true)]
async fn huge_periods_and_resets_saturate_instead_of_panicking() {
    let mut i = task::spawn(interval(Duration::MAX));
    assert_ready!(poll_next(&mut i));
    assert_pending!(poll_next(&mut i));
    assert_eq!(i.period(), Duration::from_secs(86_400 * 365 * 30));
    i.reset();
    i.reset_after(Duration::MAX);
    assert_pending!(poll_next(&mut i));
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert_pending!(poll_next(&mut i));
}

#[tokio::test(start_paused = true)]
async fn first_tick_is_immediate_and_interval_at_waits_for_its_start() {
    let start = Instant::now();
    let mut i = task::spawn(interval(ms(10)));
    check_interval_poll!(i, start, 0);

    let later = start + ms(50);
    let mut j = task::spawn(interval_at(later, ms(10)));
    assert_pending!(poll_next(&mut j));
    step(ms(49)).await;
    assert!(!j.is_woken());
    assert_pending!(poll_next(&mut j));
    step(ms(1)).await;
    assert!(
        j.is_woken(),
        "the timer's driver wakes the interval at its start"
    );
    assert_ready_eq!(poll_next(&mut j), later);
}

/// Paused time moves in whole milliseconds when Tokio's timer (which wakes the driver)
/// fires: a tick at a whole millisecond completes exactly then, any other within 1 ms after.
#[tokio::test(start_paused = true)]
async fn awaited_ticks_are_never_early_and_on_time() {
    for (period, late) in [
        (ms(7), Duration::ZERO),
        (Duration::from_micros(7_300), ms(1)),
    ] {
        for behavior in [
            MissedTickBehavior::Burst,
            MissedTickBehavior::Delay,
            MissedTickBehavior::Skip,
        ] {
            let start = Instant::now();
            let mut i = interval(period);
            i.set_missed_tick_behavior(behavior);
            for n in 0..100u32 {
                let t = i.tick().await;
                assert_eq!(t, start + period * n, "{behavior:?}");
                let now = Instant::now();
                assert!(now >= t, "{behavior:?}: early");
                assert!(now - t <= late, "{behavior:?}: {:?} late", now - t);
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn ticks_keep_each_behaviors_spacing_under_random_stalls() {
    let mut rng = XorShift::new(11);
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let start = Instant::now();
        let period = ms(1 + rng.below(50));
        let mut i = interval(period);
        i.set_missed_tick_behavior(behavior);
        let mut prev = i.tick().await;
        for _ in 0..200 {
            let t = i.tick().await;
            assert!(Instant::now() >= t, "{behavior:?}: tick before its instant");
            match behavior {
                MissedTickBehavior::Burst => assert_eq!(t, prev + period),
                MissedTickBehavior::Skip => {
                    assert!(t > prev);
                    assert_eq!((t - start).as_nanos() % period.as_nanos(), 0);
                }
                MissedTickBehavior::Delay => assert!(t - prev >= period),
            }
            prev = t;
            // The loop body: sometimes short, sometimes longer than several periods.
            time::sleep(Duration::from_micros(
                rng.below(3 * period.as_micros() as u64),
            ))
            .await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiting_poll_after_an_overrun_completes_on_the_drivers_next_pass() {
    let start = Instant::now();
    let mut i = interval(ms(10));
    i.tick().await;
    i.tick().await;
    // The loop body overran the next tick (at 20 ms) and the one after (at 30 ms).
    time::sleep(ms(25)).await;
    assert_eq!(i.tick().await, start + ms(20));
    assert_eq!(Instant::now(), start + ms(35), "no time passes");
    assert_eq!(i.tick().await, start + ms(30), "Burst: at once");
    assert_eq!(i.tick().await, start + ms(40));
    assert_eq!(Instant::now(), start + ms(40));
}

#[tokio::test(start_paused = true)]
async fn set_period_applies_from_the_next_tick() {
    let start = Instant::now();
    let mut i = task::spawn(interval(ms(100)));
    check_interval_poll!(i, start, 0);
    i.set_period(ms(30));
    assert_eq!(i.period(), ms(30));
    // The tick already scheduled keeps its instant...
    time::advance(ms(99)).await;
    check_interval_poll!(i, start);
    time::advance(ms(1)).await;
    check_interval_poll!(i, start, 100);
    // ...and the ones after it follow the new period.
    time::advance(ms(30)).await;
    check_interval_poll!(i, start, 130);
    // With a reset, at once from now.
    i.set_period(ms(50));
    i.reset();
    time::advance(ms(50)).await;
    check_interval_poll!(i, start, 180);
    time::advance(ms(50)).await;
    check_interval_poll!(i, start, 230);
}

#[tokio::test(start_paused = true)]
async fn tick_is_cancel_safe() {
    let start = Instant::now();
    let mut i = interval(ms(100));
    assert_eq!(i.tick().await, start);
    tokio::select! {
        _ = i.tick() => panic!("the tick at 100 ms came before 50 ms"),
        _ = time::sleep(ms(50)) => {}
    }
    assert_eq!(i.tick().await, start + ms(100), "no tick was consumed");
}

#[tokio::test(start_paused = true)]
async fn an_interval_is_a_stream_of_tick_instants() {
    let start = Instant::now();
    let i = interval(ms(5));
    assert_eq!(i.size_hint(), (usize::MAX, None));
    let ticks: Vec<Instant> = i.take(4).collect().await;
    assert_eq!(
        ticks,
        [start, start + ms(5), start + ms(10), start + ms(15)]
    );
}

/// Counts ticks and yields every fourth; on the others it returns `Pending`, waking itself
/// only if `wake_on_pending` (Tokio's test of `poll_tick` with a self-waking stream).
struct IntervalStreamer {
    counter: u32,
    timer: Interval,
    wake_on_pending: bool,
}

impl Stream for IntervalStreamer {
    type Item = u32;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u32>> {
        let this = Pin::into_inner(self);
        if this.counter > 12 {
            return Poll::Ready(None);
        }
        match this.timer.poll_tick(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                this.counter += 1;
                if this.counter % 4 == 0 {
                    Poll::Ready(Some(this.counter))
                } else {
                    if this.wake_on_pending {
                        cx.waker().wake_by_ref();
                    }
                    Poll::Pending
                }
            }
        }
    }
}

async fn stream_items(wake_on_pending: bool) -> Vec<u32> {
    let stream = IntervalStreamer {
        counter: 0,
        timer: interval(ms(10)),
        wake_on_pending,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(12);
    tokio::spawn(time::timeout(ms(150), async move {
        tokio::pin!(stream);
        while let Some(item) = stream.next().await {
            tx.send(item).await.ok();
        }
    }));
    let mut items = Vec::new();
    while let Some(item) = rx.recv().await {
        items.push(item);
    }
    items
}

#[tokio::test(start_paused = true)]
async fn poll_tick_in_a_self_waking_stream() {
    assert_eq!(stream_items(true).await, [4, 8, 12]);
}

#[tokio::test(start_paused = true)]
async fn poll_tick_does_not_wake_a_task_that_got_ready() {
    // The stream returns Pending without asking to be woken after a Ready tick: it stalls.
    assert_eq!(stream_items(false).await, Vec::<u32>::new());
}

#[tokio::test(start_paused = true)]
async fn one_wheel_entry_for_life_and_none_after_drop() {
    let timer = Timer::builder().build().unwrap();
    let mut i = timer.interval(ms(10));
    i.tick().await;
    assert_eq!(
        timer.pending(),
        0,
        "a tick that needs no wait needs no entry"
    );
    for _ in 0..50 {
        i.tick().await;
        assert_eq!(timer.pending(), 1);
    }
    let pushes = timer.metrics().heap_pushes;
    for _ in 0..50 {
        i.tick().await;
    }
    assert!(
        timer.metrics().heap_pushes - pushes <= 50,
        "at most one bucket per tick"
    );
    drop(i);
    assert_eq!(
        timer.pending(),
        0,
        "dropping the interval removes its entry"
    );
}

/// The interval's own polls allocate nothing, ever; neither does a whole tick, driver
/// included, once warm (checked in release builds: in debug builds the driver checks the
/// wheel's invariants after each pass, which allocates).
#[tokio::test(start_paused = true)]
async fn ticks_allocate_nothing() {
    let mut i = task::spawn(interval(ms(10)));
    let mut polls = 0;
    for n in 0..300 {
        let before = allocations();
        let ready = poll_next(&mut i).is_ready();
        let pending = poll_next(&mut i).is_pending();
        if n >= 10 {
            polls += allocations() - before; // after a warm-up
        }
        assert!(ready && pending);
        step(ms(10)).await;
    }
    assert_eq!(polls, 0, "allocations in the interval's polls");

    let mut i = interval(ms(10));
    for _ in 0..20 {
        i.tick().await; // warm-up: the timer, its driver and their buffers
    }
    let before = allocations();
    for _ in 0..200 {
        i.tick().await;
    }
    if !cfg!(debug_assertions) {
        assert_eq!(allocations() - before, 0, "allocations in 200 ticks");
    }
}

#[tokio::test(start_paused = true)]
async fn the_latest_pollers_waker_is_woken() {
    let start = Instant::now();
    let mut i = interval(ms(10));
    let mut a = task::spawn(());
    let mut b = task::spawn(());
    assert_ready_eq!(a.enter(|cx, _| i.poll_tick(cx)), start);
    assert_pending!(a.enter(|cx, _| i.poll_tick(cx)));
    // The interval moves to another task.
    assert_pending!(b.enter(|cx, _| i.poll_tick(cx)));
    step(ms(10)).await;
    assert!(b.is_woken() && !a.is_woken());
    assert_ready_eq!(b.enter(|cx, _| i.poll_tick(cx)), start + ms(10));
}

#[tokio::test(start_paused = true)]
async fn after_a_shutdown_ticks_go_on_with_tokios_timer_without_spinning() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    let mut i = task::spawn(timer.interval(ms(10)));
    check_interval_poll!(i, start, 0);
    step(ms(10)).await;
    check_interval_poll!(i, start, 10);

    timer.shutdown();
    assert_eq!(timer.pending(), 0);
    assert_pending!(poll_next(&mut i), "the shutdown is not a tick");
    settle().await;
    assert!(
        !i.is_woken(),
        "nothing wakes it before the next tick: no spin"
    );
    assert!(format!("{:?}", *i).contains("tokio"));
    step(ms(10)).await;
    assert!(i.is_woken());
    check_interval_poll!(i, start, 20);
    step(ms(10)).await;
    check_interval_poll!(i, start, 30);

    // One made on the shut-down timer works the same way.
    let mut j = timer.interval(ms(5));
    let t = j.tick().await;
    assert_eq!(j.tick().await, t + ms(5));
}

#[tokio::test(start_paused = true)]
async fn a_full_timer_panics_when_the_interval_first_waits() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holds_the_slot = timer.try_sleep(Duration::from_secs(60)).unwrap();
    let mut i = task::spawn(timer.interval(ms(10)));
    assert_ready!(poll_next(&mut i), "the first tick needs no slot");
    let err = catch_unwind(AssertUnwindSafe(|| poll_next(&mut i))).unwrap_err();
    assert!(panic_message(&*err).contains("timer is full"));
}

#[tokio::test(start_paused = true)]
async fn interval_is_unpin_send_sync_and_debug_is_bounded() {
    fn assert_traits<T: Unpin + Send + Sync + std::fmt::Debug>() {}
    assert_traits::<Interval>();
    fn assert_value<T: Copy + Eq + std::hash::Hash + std::fmt::Debug + Default>() {}
    assert_value::<MissedTickBehavior>();
    assert_eq!(MissedTickBehavior::default(), MissedTickBehavior::Burst);

    // Beside a thousand pending timers, an interval still prints a line, not the wheel.
    let sleeps: Vec<_> = (0..1000)
        .map(|n| Box::pin(tokio_timing_wheel::sleep_wheel(ms(n + 1))))
        .collect();
    let mut sleeps = task::spawn(futures::future::join_all(sleeps));
    assert_pending!(sleeps.poll());
    let mut i = interval(ms(10));
    i.tick().await;
    let mut i = task::spawn(i);
    assert_pending!(poll_next(&mut i));
    let printed = format!("{:?}", *i);
    assert!(printed.len() < 200, "{} bytes: {printed}", printed.len());
    assert!(printed.contains("period") && printed.contains("next_tick"));
}

/// A reset between ticks re-files the entry the last tick parked; the next tick must still
/// wake the task (the firing moved the waker out of the entry, so re-filing has to put one
/// back). Checked by the wake itself, not by polling after time moved.
#[tokio::test(start_paused = true)]
async fn a_reset_between_ticks_still_wakes_the_task() {
    let mut i = task::spawn(interval(ms(10)));
    assert!(poll_next(&mut i).is_ready()); // the first tick is immediate
    assert!(poll_next(&mut i).is_pending()); // registers
    step(ms(10)).await;
    assert!(i.is_woken());
    assert!(poll_next(&mut i).is_ready()); // the entry is parked now
    i.reset();
    assert!(poll_next(&mut i).is_pending());
    step(ms(10)).await;
    assert!(
        i.is_woken(),
        "the reset interval's next tick did not wake the task"
    );
    assert!(poll_next(&mut i).is_ready());
}
