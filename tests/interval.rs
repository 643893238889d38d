//! Integration tests for `Interval` in paused time: the intents of Tokio's own interval tests
//! (burst / delay / skip after a stall, every reset, the first tick, streams), then what is
//! ours: `set_period`, one wheel entry for life, no allocation per tick, shutdown, the waker
//! of the latest poll, a full timer, bounded `Debug`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::{self, Instant};
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use tokio_timing_wheel::{interval, interval_at, Interval, MissedTickBehavior, Timer, TimerError};

mod common;
use common::alloc::allocations;
use common::{ms, panic_message, paused_runtime, settle, step, XorShift};

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
            // Tokio's message, whole, for a `should_panic(expected = ...)` carried over.
            panic_message(&*err).contains("`period` must be non-zero."),
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
    time::advance(ms(100) - Duration::from_nanos(1)).await;
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
        // When the last tick came out: more than 5 ms after its instant, it was missed, and
        // the behavior places the next one from then (Tokio's rule); otherwise one period on.
        let mut came_out = Instant::now();
        let mut missed = 0;
        for _ in 0..200 {
            let expected = if came_out > prev + ms(5) {
                missed += 1;
                let late = (came_out - prev).as_nanos() % period.as_nanos();
                match behavior {
                    MissedTickBehavior::Burst => prev + period,
                    MissedTickBehavior::Delay => came_out + period,
                    MissedTickBehavior::Skip => {
                        came_out + period - Duration::from_nanos(late as u64)
                    }
                }
            } else {
                prev + period
            };
            let t = i.tick().await;
            came_out = Instant::now();
            assert!(came_out >= t, "{behavior:?}: tick before its instant");
            assert_eq!(t, expected, "{behavior:?}");
            if behavior == MissedTickBehavior::Skip {
                assert_eq!((t - start).as_nanos() % period.as_nanos(), 0);
            }
            prev = t;
            // The loop body: sometimes short, sometimes longer than several periods.
            time::sleep(Duration::from_micros(
                rng.below(3 * period.as_micros() as u64),
            ))
            .await;
        }
        assert!(
            missed > 10,
            "{behavior:?}: only {missed} ticks missed, too few to test"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_awaited_tick_after_an_overrun_completes_without_time_passing() {
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

/// As Tokio's: a tick whose instant passed while the loop body ran (it overran the period)
/// completes on the poll that finds it due, whatever the timer's driver last did. Tokio's
/// interval does (its timer entry is re-filed at a time its driver has reached).
#[tokio::test(start_paused = true)]
async fn a_tick_overdue_when_polled_completes_on_that_poll() {
    let timer = Timer::builder().build().unwrap();
    for overrun in [ms(10), ms(14), ms(25)] {
        for kind in ["interval", "try_interval"] {
            let start = Instant::now();
            let mut i = task::spawn(match kind {
                "interval" => interval(ms(10)),
                _ => timer.try_interval(ms(10)).unwrap(),
            });
            assert_ready_eq!(poll_next(&mut i), start);
            assert_pending!(poll_next(&mut i));
            step(ms(10)).await;
            assert_ready_eq!(poll_next(&mut i), start + ms(10), "{kind}");
            time::advance(overrun).await; // the loop body
            assert_ready_eq!(
                poll_next(&mut i),
                start + ms(20),
                "{kind}: overran by {overrun:?}"
            );
        }
    }
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

/// As tokio-stream's `IntervalStream`, the interval is a `FusedStream` that never ends: a
/// `select!` loop's `select_next_some` (which needs one) takes it as it is.
#[tokio::test(start_paused = true)]
async fn an_interval_is_a_fused_stream_that_never_ends() {
    use futures::stream::FusedStream;
    let start = Instant::now();
    let mut i = interval(ms(5));
    assert!(!i.is_terminated());
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(i.select_next_some().await);
    }
    assert_eq!(got, [start, start + ms(5), start + ms(10)]);
    assert!(!i.is_terminated());
}

/// Counts ticks and yields every fourth; on the others it returns `Pending`, waking itself
/// only if `wake_on_pending` (Tokio's test of `poll_tick` with a self-waking stream). Yields
/// its last item at its twelfth tick and ends at the poll after the next; `taken` tells how
/// many ticks it took.
struct IntervalStreamer {
    counter: u32,
    timer: Interval,
    wake_on_pending: bool,
    taken: Arc<AtomicU32>,
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
                this.taken.store(this.counter, SeqCst);
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

/// The items of an [`IntervalStreamer`] of a 10 ms interval read for up to 150 ms, how many
/// ticks it took, and whether the 150 ms ran out before it ended.
async fn stream_items(wake_on_pending: bool) -> (Vec<u32>, u32, bool) {
    let taken = Arc::new(AtomicU32::new(0));
    let stream = IntervalStreamer {
        counter: 0,
        timer: interval(ms(10)),
        wake_on_pending,
        taken: taken.clone(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(12);
    let reader = tokio::spawn(time::timeout(ms(150), async move {
        tokio::pin!(stream);
        while let Some(item) = stream.next().await {
            tx.send(item).await.ok();
        }
    }));
    let mut items = Vec::new();
    while let Some(item) = rx.recv().await {
        items.push(item);
    }
    let timed_out = reader.await.expect("the reading task panicked").is_err();
    (items, taken.load(SeqCst), timed_out)
}

#[tokio::test(start_paused = true)]
async fn poll_tick_in_a_self_waking_stream() {
    // Thirteen ticks (the last ends it) by 120 ms.
    assert_eq!(stream_items(true).await, (vec![4, 8, 12], 13, false));
}

#[tokio::test(start_paused = true)]
async fn poll_tick_does_not_wake_a_task_that_got_ready() {
    // The stream returns Pending without asking to be woken after a Ready tick (its first):
    // it stalls until the 150 ms run out, when the timeout polls it once more (its second
    // tick). A wake in between would have made that a third.
    assert_eq!(stream_items(false).await, (vec![], 2, true));
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

/// `try_interval` takes the interval's slot at once and keeps it for life: a full timer is an
/// error at creation, never a panic at a later poll, and the ticks are those of `interval`.
#[tokio::test(start_paused = true)]
async fn try_interval_takes_its_slot_at_once_and_ticks_as_interval_does() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let start = Instant::now();
    let mut i = task::spawn(timer.try_interval(ms(10)).unwrap());
    assert_eq!(timer.pending(), 1, "the slot, before any poll");
    assert_eq!(
        timer.try_interval(ms(10)).unwrap_err(),
        TimerError::Full { max_pending: 1 }
    );
    assert_eq!(
        timer.try_interval_at(start + ms(5), ms(10)).unwrap_err(),
        TimerError::Full { max_pending: 1 }
    );
    assert_ready_eq!(poll_next(&mut i), start, "the first tick at once");
    for n in 1..=5u32 {
        assert_pending!(poll_next(&mut i));
        step(ms(10)).await;
        assert!(i.is_woken(), "tick {n}");
        assert_ready_eq!(poll_next(&mut i), start + ms(10) * n);
        assert_eq!(timer.pending(), 1, "the same slot, tick {n}");
        assert!(timer.try_sleep(ms(1)).is_err(), "still full at tick {n}");
    }
    drop(i);
    assert_eq!(timer.pending(), 0, "dropped: the slot is free");
    assert!(timer.try_interval(ms(10)).is_ok());
}

/// A `try_interval_at` polled before its start waits for it and is woken there; one first
/// polled after its start (its entry fired with no task to wake) has the tick at once; reset
/// before any poll, it ticks at the new instant. On a shut-down timer it is an error; one made
/// before the shutdown goes on, on Tokio's timer, as any interval.
#[tokio::test(start_paused = true)]
async fn try_interval_at_waits_for_its_start_resets_and_outlives_a_shutdown() {
    let timer = Timer::builder().max_pending(4).build().unwrap();
    let start = Instant::now() + ms(50);
    let mut i = task::spawn(timer.try_interval_at(start, ms(10)).unwrap());
    let mut late = task::spawn(timer.try_interval_at(start, ms(10)).unwrap());
    step(ms(20)).await;
    assert_pending!(poll_next(&mut i));
    step(ms(30)).await;
    assert!(i.is_woken());
    assert_ready_eq!(poll_next(&mut i), start);
    step(ms(5)).await;
    assert_ready_eq!(
        poll_next(&mut late),
        start,
        "its first poll, 5 ms after the start"
    );
    drop((i, late));

    let now = Instant::now();
    let mut j = task::spawn(timer.try_interval_at(now + ms(100), ms(10)).unwrap());
    j.reset_at(now + ms(20));
    assert_pending!(poll_next(&mut j));
    step(ms(20)).await;
    assert!(j.is_woken());
    assert_ready_eq!(poll_next(&mut j), now + ms(20));

    timer.shutdown();
    assert_eq!(
        timer.try_interval(ms(10)).unwrap_err(),
        TimerError::Shutdown
    );
    assert_pending!(poll_next(&mut j));
    step(ms(10)).await;
    assert!(j.is_woken(), "on Tokio's timer after the shutdown");
    assert_ready_eq!(poll_next(&mut j), now + ms(30));
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

// ---------------------------------------------------------------------------------------------
// Found in review: cooperative budget, and the fallback after a shutdown
// ---------------------------------------------------------------------------------------------

/// Tokio's `Interval` takes part in cooperative scheduling (each tick polls a Tokio `Sleep`,
/// which spends task budget), so a loop of ticks that are all due at once yields to the
/// runtime every 128 ticks. Ours completes every owed tick at once (`Interval::due`) and never
/// returns `Pending` while behind: after a stall, a Burst loop starves every other task of
/// its worker (the whole runtime on `current_thread`) until it has caught up. See the next
/// test for the case where it never catches up.
#[tokio::test(start_paused = true)]
async fn a_bursting_interval_yields_to_other_tasks_like_tokios() {
    let other_ran = Arc::new(AtomicBool::new(false));
    let flag = other_ran.clone();
    tokio::spawn(async move { flag.store(true, SeqCst) });

    // Tokio's interval, the baseline: the other task gets to run within the burst.
    let tokio_ticks_before_yield = {
        let mut iv = tokio::time::interval(Duration::from_millis(1));
        iv.tick().await;
        tokio::time::advance(Duration::from_secs(10)).await; // 10 000 ticks owed
        other_ran.store(false, SeqCst);
        let again = other_ran.clone();
        tokio::spawn(async move { again.store(true, SeqCst) });
        let mut n = 0usize;
        while !other_ran.load(SeqCst) && n < 5_000 {
            iv.tick().await;
            n += 1;
        }
        n
    };
    assert!(
        tokio_ticks_before_yield < 5_000,
        "baseline: Tokio's interval yields within a burst"
    );

    let mut iv = tokio_timing_wheel::interval(Duration::from_millis(1));
    iv.tick().await;
    tokio::time::advance(Duration::from_secs(10)).await; // 10 000 ticks owed
    other_ran.store(false, SeqCst);
    let again = other_ran.clone();
    tokio::spawn(async move { again.store(true, SeqCst) });
    let mut ticks = 0usize;
    while !other_ran.load(SeqCst) && ticks < 5_000 {
        iv.tick().await;
        ticks += 1;
    }
    assert!(
        other_ran.load(SeqCst),
        "5000 ticks of a bursting Interval ran without yielding once \
         (Tokio's yielded after {tokio_ticks_before_yield})"
    );
}

/// The same, without a stall: a Burst interval whose loop body takes longer than the period
/// falls behind for good, and from the moment it is more than 5 ms late every tick is due
/// when the previous one completes. Tokio's loop still yields every 128 ticks; ours never
/// yields again, so on a `current_thread` runtime no other task ever runs. (Real clock: the
/// body must spend time without yielding. The assertion is on whether the other task ran, not
/// on timing.)
#[test]
fn an_interval_slower_than_its_period_still_lets_other_tasks_run() {
    // Ticks `$iv` with 2 ms of work each (period 1 ms) until a task spawned at tick 20, once
    // well behind, gets to run: `None` if it did within 400 ticks, else the ticks run.
    macro_rules! starved_for {
        ($iv:expr) => {{
            let other_ran = Arc::new(AtomicBool::new(false));
            let mut ticks = 0usize;
            while !other_ran.load(SeqCst) && ticks < 400 {
                $iv.tick().await;
                let spin = std::time::Instant::now();
                while spin.elapsed() < Duration::from_millis(2) {} // slower than the period
                ticks += 1;
                if ticks == 20 {
                    // Well behind now: from here the task must yield for this to run.
                    let flag = other_ran.clone();
                    tokio::spawn(async move { flag.store(true, SeqCst) });
                }
            }
            (!other_ran.load(SeqCst)).then_some(ticks)
        }};
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (tokio_starved, ours_starved) = rt.block_on(async {
        let mut tokio_iv = tokio::time::interval(Duration::from_millis(1));
        let tokio_starved = starved_for!(tokio_iv);
        let mut iv = tokio_timing_wheel::interval(Duration::from_millis(1));
        (tokio_starved, starved_for!(iv))
    });
    assert_eq!(tokio_starved, None, "baseline: Tokio's interval yields");
    assert_eq!(
        ours_starved, None,
        "a 1 ms interval with 2 ms of work per tick never yielded to the runtime"
    );
}

/// A timer's futures work from plain threads (`Driver::now` enters the timer's runtime for the
/// clock; `timer.rs::timer_can_be_used_from_a_thread_outside_the_runtime`), and the docs of
/// `Interval` promise that after a shutdown it "does not stop, hang or spin: from then on it
/// waits on Tokio's own timer". On a plain thread that fallback (`Interval::fall_back` ->
/// `tokio::time::sleep_until`) panics: there is no runtime on the thread. The timer's
/// runtime is alive here; the fallback could have entered it.
#[test]
fn an_interval_on_a_plain_thread_goes_on_after_its_timer_shuts_down() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let t = timer.clone();
    let ticks = std::thread::spawn(move || {
        let mut iv = t.interval(Duration::from_millis(5));
        let first = common::block_on_plain_thread(iv.tick());
        let second = common::block_on_plain_thread(iv.tick()); // through the wheel
        t.shutdown();
        let third = common::block_on_plain_thread(iv.tick()); // documented: on Tokio's timer from now on
        (first, second, third)
    })
    .join();
    let (first, second, third) = match ticks {
        Ok(t) => t,
        Err(payload) => panic!(
            "the plain thread's interval panicked after the shutdown: {}",
            common::panic_message(&*payload)
        ),
    };
    assert_eq!(second - first, Duration::from_millis(5));
    assert_eq!(third - second, Duration::from_millis(5));
}

/// An interval longer than a level-0 span (64 ticks: 100 ms and 1 s heartbeats on the 1 ms
/// default tick) files its entry a level up at every tick, and that level is kept: whole
/// ticks, driver included, allocate nothing once warm (checked in release builds, see
/// `ticks_allocate_nothing`).
#[tokio::test(start_paused = true)]
async fn long_periods_allocate_nothing_per_tick() {
    for period in [ms(100), ms(1000), ms(70_000)] {
        let mut i = interval(period);
        for _ in 0..5 {
            i.tick().await; // warm-up
        }
        let before = allocations();
        for _ in 0..50 {
            i.tick().await;
        }
        let allocated = allocations() - before;
        if !cfg!(debug_assertions) {
            assert_eq!(allocated, 0, "allocations in 50 ticks of {period:?}");
        }
    }
}

/// An interval carried over from a runtime that is gone ticks on the current (paused) one,
/// every 10 ms, neither spinning nor stopping. (Each paused runtime has its own clock: the
/// schedule carried over may be in the past here, and its first ticks would then catch up at
/// once, Burst; Delay moves the schedule to now.)
async fn ticks_on_the_current_runtime(i: &mut Interval) {
    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
    i.tick().await;
    let start = Instant::now();
    for _ in 0..3 {
        i.tick().await;
    }
    assert_eq!(start.elapsed(), ms(30), "ticks neither spin nor stop");
}

/// The same when the timer was shut down before its runtime: the interval then waits on its
/// runtime's Tokio timer, and must still move to the current runtime once that one is gone
/// (the timer's shutdown had ended the task that tells it of its runtime's, and Tokio
/// panicked: "A Tokio 1.x context was found, but it is being shutdown").
#[test]
fn an_interval_of_a_timer_shut_down_before_its_runtime_moves_on_when_the_runtime_goes() {
    let first = paused_runtime();
    let timer = first.block_on(async { Timer::builder().build().unwrap() });
    let mut i = first.block_on(async {
        let mut i = timer.interval(ms(10));
        i.tick().await;
        timer.shutdown();
        i.tick().await; // on the runtime's Tokio timer from now on
        i
    });
    drop(first);
    let second = paused_runtime();
    second.block_on(ticks_on_the_current_runtime(&mut i));
    // A new interval of the shut-down timer, made once its runtime is gone, ticks too (on
    // the current runtime's clock: see the test after the next).
    let third = paused_runtime();
    third.block_on(async {
        let start = Instant::now();
        let mut j = timer.interval(ms(10));
        for k in 0..3 {
            assert_eq!(j.tick().await, start + ms(10 * k), "tick {k} on this clock");
        }
        assert_eq!(Instant::now(), start + ms(20), "three ticks, each on time");
    });
}

/// The interval's runtime shuts down (and its default timer with it): polled on another
/// runtime, the interval goes on there, on that runtime's Tokio timer, keeping its period;
/// outside any runtime it panics with a message saying so.
#[test]
fn after_its_runtime_is_gone_an_interval_ticks_on_the_current_runtime() {
    let first = paused_runtime();
    let mut i = first.block_on(async {
        let mut i = interval(ms(10));
        i.tick().await;
        i.tick().await;
        i
    });
    drop(first);
    let second = paused_runtime();
    second.block_on(async {
        ticks_on_the_current_runtime(&mut i).await;
        assert!(format!("{i:?}").contains("tokio"));
    });
    drop(second);
    i.reset(); // its Tokio sleep's runtime is gone too: no panic until polled outside one
    let outside = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        common::block_on_plain_thread(i.tick());
    }));
    let msg = common::panic_message(&*outside.unwrap_err());
    assert!(msg.contains("no Tokio runtime is current"), "{msg}");
}

/// Carried over to another runtime once its own is gone, an interval waits on the current
/// runtime's Tokio timer, so it must read that runtime's clock too: a stall there is a stall
/// (Delay restarts one period after the late tick), and `reset` waits one period of it.
/// (Each paused runtime has a clock of its own; the gone one's stopped when it went.)
#[test]
fn after_its_runtime_is_gone_an_interval_reads_the_clock_it_waits_on() {
    let first = paused_runtime();
    let mut i = first.block_on(async {
        let mut i = interval(ms(10));
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        i.tick().await;
        i.tick().await;
        i
    });
    drop(first);
    let second = paused_runtime();
    second.block_on(async {
        // Far past the schedule carried over, whatever the two clocks' origins.
        time::advance(Duration::from_secs(3600)).await;
        i.tick().await; // late: Delay restarts the schedule from now
        let now = Instant::now();
        assert_eq!(i.tick().await, now + ms(10), "Delay: one period after now");
        assert_eq!(Instant::now(), now + ms(10));
        // A stall on this runtime's clock.
        time::advance(ms(100)).await;
        assert_eq!(i.tick().await, now + ms(20), "the missed tick, at once");
        let late = Instant::now();
        assert_eq!(i.tick().await, late + ms(10), "Delay, after a stall");
        i.reset();
        let reset = Instant::now();
        assert_eq!(i.tick().await, reset + ms(10), "reset: one period from now");
        assert_eq!(Instant::now(), reset + ms(10));
    });
}

/// A new interval of a timer whose runtime is gone starts at once, on the current runtime's
/// clock, whatever the gone runtime's clock said.
#[test]
fn an_interval_made_after_its_timers_runtime_is_gone_starts_now() {
    let first = paused_runtime();
    let timer = first.block_on(async {
        let timer = Timer::builder().build().unwrap();
        time::advance(Duration::from_secs(3600)).await; // the first runtime's clock runs ahead
        timer
    });
    drop(first);
    let second = paused_runtime();
    second.block_on(async {
        let start = Instant::now();
        let mut i = timer.interval(ms(10));
        assert_eq!(i.tick().await, start, "the first tick is immediate");
        assert_eq!(i.tick().await, start + ms(10));
        assert_eq!(Instant::now(), start + ms(10));
    });
}

/// A reset that brings the next tick to now, or nearer, wakes the task waiting for it, as
/// Tokio's does (its sleep, reset, fires): an interval shared behind a lock may be reset by
/// another task than the one waiting on it. Without the wake, the waiting task slept on until
/// the tick's old instant, here a minute late.
#[tokio::test(start_paused = true)]
async fn a_reset_that_brings_the_tick_nearer_wakes_the_waiting_task() {
    type Reset = fn(&mut Interval);
    let resets: [(&str, Reset); 4] = [
        ("reset_immediately", |i| i.reset_immediately()),
        ("reset_at(now)", |i| i.reset_at(Instant::now())),
        ("reset_at(the past)", |i| i.reset_at(Instant::now() - ms(5))),
        ("reset_after(0)", |i| i.reset_after(Duration::ZERO)),
    ];
    for (name, reset) in resets {
        let mut i = task::spawn(interval(Duration::from_secs(60)));
        assert_ready!(poll_next(&mut i));
        assert_pending!(poll_next(&mut i)); // waits for the tick a minute away
        reset(&mut i);
        assert!(i.is_woken(), "{name} did not wake the waiting task");
        let tick = assert_ready!(poll_next(&mut i));
        assert!(tick <= Instant::now(), "{name}: a tick for a later instant");
    }

    // After a shutdown the interval waits on Tokio's timer: a reset to a nearer instant
    // wakes it then, not at the old one.
    let timer = Timer::builder().build().unwrap();
    let mut i = task::spawn(timer.interval(Duration::from_secs(60)));
    assert_ready!(poll_next(&mut i));
    timer.shutdown();
    assert_pending!(poll_next(&mut i));
    let now = Instant::now();
    i.reset_after(ms(10));
    step(ms(10)).await;
    assert!(
        i.is_woken(),
        "a reset after a shutdown did not wake at its instant"
    );
    assert_ready_eq!(poll_next(&mut i), now + ms(10));
    assert_pending!(poll_next(&mut i));
    i.reset_immediately();
    assert!(
        i.is_woken(),
        "reset_immediately after a shutdown did not wake the task"
    );
    assert_ready_eq!(poll_next(&mut i), now + ms(10));
}

/// `reset_after` caps its duration at about 30 years, as Tokio's does (`safe_delay`), not only
/// a duration too large to add: a longer one ticks at 30 years, as the period does.
#[tokio::test(start_paused = true)]
async fn reset_after_caps_a_long_duration_at_about_thirty_years_as_tokio() {
    let thirty_years = Duration::from_secs(86_400 * 365 * 30);
    let century = thirty_years * 4;
    let start = Instant::now();
    let mut theirs = task::spawn(tokio::time::interval(ms(10)));
    assert_ready!(theirs.enter(|cx, mut i| i.poll_tick(cx)));
    theirs.reset_after(century);
    let mut ours = task::spawn(interval(ms(10)));
    assert_ready!(poll_next(&mut ours));
    ours.reset_after(century);
    assert_pending!(poll_next(&mut ours));
    time::advance(thirty_years).await;
    assert_ready_eq!(
        theirs.enter(|cx, mut i| i.poll_tick(cx)),
        start + thirty_years,
        "baseline"
    );
    assert_ready_eq!(poll_next(&mut ours), start + thirty_years);
}

/// An interval whose next tick lies past the horizon (about 584 years), made there or reset
/// there, needs no wakeup, as a sleep there needs none: an idle paused runtime's clock stays
/// where it is, and the timer's other sleeps still fire. A shutdown moves the interval onto
/// Tokio's timer, as ever.
#[tokio::test(start_paused = true)]
async fn an_interval_past_the_horizon_does_not_move_paused_time() {
    let start = Instant::now();
    let beyond = start + Duration::from_secs(600 * 365 * 86_400);
    let timer = Timer::builder().build().unwrap();
    let mut made = task::spawn(timer.interval_at(beyond, ms(10)));
    let mut moved = task::spawn(timer.interval(ms(10)));
    assert_pending!(poll_next(&mut made));
    assert_ready!(poll_next(&mut moved));
    assert_pending!(poll_next(&mut moved));
    moved.reset_at(beyond);
    assert_pending!(poll_next(&mut moved));
    // Reset there right after a tick, then polled by another task: waiting, not ticked.
    let mut ticked = task::spawn(timer.interval(ms(10)));
    assert_ready!(poll_next(&mut ticked));
    ticked.reset_at(beyond);
    let mut ticked = task::spawn(ticked.into_inner());
    assert_pending!(poll_next(&mut ticked));
    assert!(!ticked.is_woken(), "woken as if it had ticked");
    common::idle_on_another_thread().await;
    let moved_by = Instant::now() - start;
    assert!(moved_by <= ms(10), "paused time moved {moved_by:?}");
    assert_pending!(poll_next(&mut made));
    assert_pending!(poll_next(&mut moved));
    assert_pending!(poll_next(&mut ticked));
    assert!(!ticked.is_woken(), "woken as if it had ticked");
    assert_eq!(timer.pending(), 3);
    let now = Instant::now();
    timer.sleep(ms(1)).await;
    assert_eq!(Instant::now(), now + ms(1));
}

/// A tick overdue when polled completes on that poll also right after another timer fired
/// in a pass at a clock reading between two of Tokio's milliseconds. (When that poll filed
/// the entry without reading the clock, the tick waited for the driver, whose alarm, a Tokio
/// sleep, Tokio rounds up to its next millisecond: in paused time driven by `advance`,
/// forever, until the driver passed at once for work already due by its last pass.)
#[tokio::test(start_paused = true)]
async fn an_overdue_tick_completes_at_once_after_a_pass_between_tokios_milliseconds() {
    let start = Instant::now();
    let timer = Timer::builder().build().unwrap();
    let mut other = task::spawn(timer.interval_at(start + ms(20), Duration::from_secs(1)));
    assert_pending!(poll_next(&mut other));
    let mut i = task::spawn(timer.interval(ms(5)));
    assert_ready_eq!(poll_next(&mut i), start);
    assert_pending!(poll_next(&mut i));
    step(ms(5)).await;
    assert_ready_eq!(poll_next(&mut i), start + ms(5));
    // The loop body overruns; meanwhile `other` fires, in a pass at 35.5 ms.
    step(ms(30) + Duration::from_micros(500)).await;
    assert!(other.is_woken());
    assert_ready_eq!(poll_next(&mut i), start + ms(10));
    assert_ready_eq!(poll_next(&mut i), start + ms(15), "Burst: at once");
    assert_ready_eq!(poll_next(&mut i), start + ms(20));
}

/// An interval reset to a later tick left its entry in the bucket of the tick it had been
/// waiting for (the wheel re-files a later deadline lazily, when that bucket expires): once an
/// earlier timer had fired, the driver was armed again for that bucket, a firing pass that
/// only moved the entry on. Tokio's `Interval::reset` moves its registration, and its
/// timer does not wake at the old tick.
#[tokio::test(start_paused = true)]
async fn an_interval_reset_later_does_not_wake_the_driver_at_its_old_tick() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    let mut earlier = task::spawn(timer.sleep(ms(10)));
    assert_pending!(earlier.poll());
    let mut ticks = task::spawn(timer.interval(ms(20)));
    assert_ready!(poll_next(&mut ticks)); // the first tick, at once
    assert_pending!(poll_next(&mut ticks)); // the next one waits, for 20 ms
    ticks.enter(|_, mut i| i.reset_at(start + ms(5000)));
    assert_pending!(poll_next(&mut ticks));
    let before = timer.metrics().passes;
    time::sleep_until(start + ms(4000)).await;
    assert!(earlier.is_woken());
    let passes = timer.metrics().passes - before;
    assert_eq!(passes, 1, "{passes} firing passes for one sleep due in 4 s");
    assert!(!ticks.is_woken());
}
