//! Integration tests for `sleep_wheel`, `sleep_wheel_until` and `Sleep` on paused and real time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{sleep_wheel, sleep_wheel_until, Sleep, Timer, TimerError};

mod common;
use common::{
    ms, panic_message, poll_with, step_for, CountingWaker, XorShift, SHORT_SETTLE_YIELDS,
};

const TICK: Duration = Duration::from_millis(1);
const MS: Duration = Duration::from_millis(1);
const DAY: Duration = Duration::from_secs(86_400);

const DURATIONS: [Duration; 12] = [
    Duration::ZERO,
    Duration::from_millis(1),
    Duration::from_millis(63),
    Duration::from_millis(64),
    Duration::from_millis(65),
    Duration::from_millis(4096),
    Duration::from_secs(3600),
    Duration::from_secs(400 * 86_400),
    // Deadlines inside a tick round up, never down.
    Duration::from_nanos(1),
    Duration::from_micros(1500),
    Duration::from_micros(64_001),
    Duration::from_nanos(4_096_000_001),
];

#[tokio::test(start_paused = true)]
async fn awaited_sleep_is_never_early_and_at_most_one_tick_late() {
    for d in DURATIONS {
        let start = Instant::now();
        sleep_wheel(d).await;
        let elapsed = start.elapsed();
        assert!(elapsed >= d, "sleep of {d:?} woke early, after {elapsed:?}");
        assert!(
            elapsed <= d + TICK,
            "sleep of {d:?} woke more than one tick late, after {elapsed:?}"
        );
    }
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn polled_sleep_is_pending_just_before_deadline_and_ready_within_one_tick() {
    for d in DURATIONS {
        let start = Instant::now();
        let mut s = task::spawn(sleep_wheel(d));
        assert_eq!(s.deadline(), start + d, "deadline of a {d:?} sleep");
        if d.is_zero() {
            assert_ready!(s.poll());
            continue;
        }
        assert_pending!(s.poll());
        assert_eq!(Timer::current().pending(), 1, "{d:?}");

        // Just before the deadline (one microsecond, or now): must not have fired.
        let gap = d.min(Duration::from_micros(1));
        step_for(d - gap, SHORT_SETTLE_YIELDS).await;
        assert!(!s.is_woken(), "sleep of {d:?} woken before its deadline");
        assert_pending!(s.poll(), "sleep of {d:?} ready before its deadline");
        assert!(!s.is_elapsed(), "{d:?}");

        // At the deadline plus at most one tick: must have fired.
        step_for(gap + TICK, SHORT_SETTLE_YIELDS).await;
        assert!(
            s.is_woken(),
            "sleep of {d:?} not woken one tick after its deadline"
        );
        assert_ready!(
            s.poll(),
            "sleep of {d:?} not ready one tick after its deadline"
        );
        assert!(s.is_elapsed(), "{d:?}");
        assert_eq!(Timer::current().pending(), 0, "{d:?}");
    }
}

/// A sleep's duration is capped at about 30 years, as Tokio caps its own: a century (which
/// adds without overflow) means the same deadline as Tokio's sleep, through every way of
/// making one; a timeout is not capped (Tokio's is not either).
#[tokio::test(start_paused = true)]
async fn a_sleep_over_thirty_years_waits_thirty_as_tokios_does() {
    let century = 100 * 365 * DAY;
    let tokio_deadline = tokio::time::sleep(century).deadline();
    assert_eq!(
        tokio_deadline,
        Instant::now() + 365 * 30 * DAY,
        "Tokio's cap"
    );
    let timer = Timer::builder().build().unwrap();
    assert_eq!(sleep_wheel(century).deadline(), tokio_deadline);
    assert_eq!(timer.sleep(century).deadline(), tokio_deadline);
    assert_eq!(timer.try_sleep(century).unwrap().deadline(), tokio_deadline);
    let task = tokio_timing_wheel::spawn_after(century, async {});
    assert_eq!(task.deadline(), tokio_deadline);
    assert!(task.cancel());
    let task = timer.spawn_after(century, async {});
    assert_eq!(task.deadline(), tokio_deadline);
    assert!(task.cancel());
    let timeout = tokio_timing_wheel::timeout(century, std::future::pending::<()>());
    assert_eq!(
        timeout.deadline(),
        Instant::now() + century,
        "timeouts are not capped"
    );
}

/// `Duration::MAX` saturates, as in Tokio, at the far future (30 years from now): the sleep
/// waits all of it, never panics, and completes there, not before.
#[tokio::test(start_paused = true)]
async fn duration_max_saturates_to_the_far_future_and_fires_only_there() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::MAX));
    let deadline = s.deadline();
    assert_eq!(
        deadline,
        start + 365 * 30 * DAY,
        "Duration::MAX must mean the far future, got {:?} from now",
        deadline - start
    );
    assert_pending!(s.poll());
    assert_eq!(Timer::current().pending(), 1);
    for _ in 0..4 {
        step_for(250 * DAY, SHORT_SETTLE_YIELDS).await;
        assert!(!s.is_woken(), "Duration::MAX sleep woken");
        assert_pending!(s.poll(), "Duration::MAX sleep fired");
        assert!(!s.is_elapsed());
    }
    // Up to a millisecond short of its deadline, still waiting.
    step_for(deadline - Instant::now() - ms(1), SHORT_SETTLE_YIELDS).await;
    assert!(!s.is_woken(), "woken a millisecond early");
    assert_pending!(s.poll());
    assert_eq!(Timer::current().pending(), 1);
    // Within a tick of it, done.
    step_for(ms(2), SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "not woken a millisecond after its deadline");
    assert_ready!(s.poll());
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn far_deadline_on_nanosecond_tick_timer_never_fires() {
    // 1000 years in 1 ns ticks does not fit in u64: the deadline's wheel time saturates at
    // the horizon (about 584 years), which time never reaches, rather than wrapping to some
    // earlier time. Stepped past the horizon itself below, so a wrapped deadline (anywhere
    // short of it) would have fired.
    let timer = Timer::builder()
        .tick(Duration::from_nanos(1))
        .build()
        .unwrap();
    let mut far = task::spawn(timer.sleep_until(Instant::now() + 365_000 * DAY));
    let mut max = task::spawn(timer.sleep(Duration::MAX));
    let mut near = task::spawn(timer.sleep(Duration::from_millis(5)));
    assert_pending!(far.poll());
    assert_pending!(max.poll());
    assert_pending!(near.poll());
    assert_eq!(timer.pending(), 3);
    step_for(Duration::from_millis(5), SHORT_SETTLE_YIELDS).await;
    assert_ready!(near.poll());
    step_for(1000 * DAY, SHORT_SETTLE_YIELDS).await;
    assert_pending!(far.poll());
    assert_pending!(max.poll());
    assert_eq!(timer.pending(), 2);
    tokio::time::advance(Duration::from_secs(585 * 365 * 86_400)).await;
    step_for(DAY, SHORT_SETTLE_YIELDS).await;
    assert_pending!(far.poll(), "a saturated deadline fired");
    // A sleep's duration is capped at about 30 years, as Tokio's (an instant is not).
    assert_ready!(max.poll());
    assert_eq!(timer.pending(), 1);
}

#[tokio::test(start_paused = true)]
async fn deadline_in_the_past_is_ready_on_first_poll() {
    let mut s = task::spawn(sleep_wheel_until(Instant::now() - Duration::from_secs(1)));
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    assert!(!s.is_shutdown());
    let mut now = task::spawn(sleep_wheel_until(Instant::now()));
    assert_ready!(now.poll());
    assert_eq!(Timer::current().pending(), 0, "nothing registered");
}

#[tokio::test(start_paused = true)]
async fn zero_duration_is_ready_on_first_poll() {
    let mut s = task::spawn(sleep_wheel(Duration::ZERO));
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    // Ready again on a second poll, and nothing registered.
    assert_ready!(s.poll());
    assert_eq!(Timer::current().pending(), 0);
}

/// Spawns one task per deadline that sleeps until it; returns `(index, woke at)` in wake order.
async fn sleep_until_each(deadlines: &[Instant]) -> Vec<(usize, Instant)> {
    let woke = Arc::new(Mutex::new(Vec::with_capacity(deadlines.len())));
    let mut handles = Vec::with_capacity(deadlines.len());
    for (i, &deadline) in deadlines.iter().enumerate() {
        let woke = woke.clone();
        handles.push(tokio::spawn(async move {
            sleep_wheel_until(deadline).await;
            woke.lock().unwrap().push((i, Instant::now()));
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let woke = woke.lock().unwrap().clone();
    woke
}

/// Every sleep woke exactly once, never before its deadline and at most one tick after it.
fn assert_each_fired_once_on_time(woke: &[(usize, Instant)], deadlines: &[Instant]) {
    assert_eq!(
        woke.len(),
        deadlines.len(),
        "every sleep fires exactly once"
    );
    let mut seen = vec![false; deadlines.len()];
    for &(i, at) in woke {
        assert!(!seen[i], "sleep {i} fired twice");
        seen[i] = true;
        let deadline = deadlines[i];
        assert!(at >= deadline, "sleep {i} early by {:?}", deadline - at);
        assert!(
            at <= deadline + TICK,
            "sleep {i} late by {:?}",
            at - deadline
        );
    }
}

#[tokio::test(start_paused = true)]
async fn many_random_sleeps_fire_exactly_once_in_deadline_order() {
    const N: usize = 2000;
    let mut rng = XorShift::new(0x9E37_79B9_7F4A_7C15);
    let start = Instant::now();
    // Spread over several levels: under 64 ms, under 4 s, under 5 min, under 3 h.
    let deadlines: Vec<Instant> = (0..N)
        .map(|i| {
            let range = [64, 4096, 300_000, 10_000_000][i % 4];
            start + Duration::from_millis(rng.below(range))
        })
        .collect();
    let woke = sleep_until_each(&deadlines).await;
    assert_each_fired_once_on_time(&woke, &deadlines);
    for pair in woke.windows(2) {
        let (a, b) = (pair[0].0, pair[1].0);
        assert!(
            deadlines[a] <= deadlines[b],
            "wake order not sorted by deadline: {a} ({:?}) before {b} ({:?})",
            deadlines[a] - start,
            deadlines[b] - start
        );
    }
    assert_eq!(Timer::current().pending(), 0);
}

/// A pass wakes a sleep set further ahead than the first level's span (here 100.5 ms ahead)
/// as it takes it, before the short sleeps due in the same pass (5 ms ones, due before it),
/// which wait for the end of the pass, so its task runs first (a current-thread runtime runs
/// tasks in the order they are woken). Timeouts come after both: see `tests/timeout.rs`.
#[tokio::test(start_paused = true)]
async fn a_pass_wakes_long_timers_before_short_ones_due_with_them() {
    Timer::current(); // the timer's time starts now
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let record = |what: &'static str, at: Instant| {
        let order = order.clone();
        tokio::spawn(async move {
            sleep_wheel_until(at).await;
            order.lock().unwrap().push(what);
        })
    };
    let long = record("long", start + Duration::from_micros(100_500));
    // A pass at 95 ms brings the wheel's time there: sleeps filed then for 100.1-100.4 ms are
    // a few ticks ahead, in the first level.
    sleep_wheel(Duration::from_millis(95)).await;
    let shorts: Vec<_> = (0..4)
        .map(|i| record("short", start + Duration::from_micros(100_100 + 100 * i)))
        .collect();
    long.await.unwrap();
    for s in shorts {
        s.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order, ["long", "short", "short", "short", "short"]);
    assert!(
        Instant::now() <= start + Duration::from_millis(101),
        "one pass, at 101 ms"
    );
}

#[tokio::test(start_paused = true)]
async fn many_random_sub_tick_sleeps_fire_once_never_early_within_one_tick() {
    const N: usize = 2000;
    let mut rng = XorShift::new(0x0123_4567_89AB_CDEF);
    Timer::current(); // the timer's ticks start now
    let start = Instant::now();
    let deadlines: Vec<Instant> = (0..N)
        .map(|i| {
            let range_us = [64_000, 4_096_000, 300_000_000][i % 3];
            start + Duration::from_micros(rng.below(range_us))
        })
        .collect();
    let woke = sleep_until_each(&deadlines).await;
    assert_each_fired_once_on_time(&woke, &deadlines);
    // Within a tick the order is unspecified; across ticks it follows the deadlines.
    let tick_of = |d: Instant| (d - start).as_nanos().div_ceil(TICK.as_nanos());
    for pair in woke.windows(2) {
        let (a, b) = (pair[0].0, pair[1].0);
        assert!(
            tick_of(deadlines[a]) <= tick_of(deadlines[b]),
            "wake order not sorted by deadline tick: {a} ({:?}) before {b} ({:?})",
            deadlines[a] - start,
            deadlines[b] - start
        );
    }
}

#[tokio::test(start_paused = true)]
async fn reset_later_is_lazy_and_fires_at_the_new_deadline() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(100)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(start + Duration::from_millis(300));
    assert_eq!(s.deadline(), start + Duration::from_millis(300));
    assert!(!s.is_elapsed());
    assert_pending!(s.poll());
    assert_eq!(Timer::current().pending(), 1);

    // The old deadline passes: at most a spurious wakeup, never completion.
    step_for(Duration::from_millis(100), SHORT_SETTLE_YIELDS).await;
    assert_pending!(s.poll(), "fired at the old deadline");
    assert!(!s.is_elapsed());
    assert_eq!(
        Timer::current().pending(),
        1,
        "re-filed for the new deadline"
    );

    step_for(Duration::from_millis(199), SHORT_SETTLE_YIELDS).await;
    assert!(!s.is_woken());
    assert_pending!(s.poll(), "fired before the new deadline");

    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "not woken at the new deadline");
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_fires_at_the_earlier_deadline() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::from_secs(300)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(start + Duration::from_millis(100));
    assert_eq!(s.deadline(), start + Duration::from_millis(100));
    assert_pending!(s.poll());

    step_for(Duration::from_millis(99), SHORT_SETTLE_YIELDS).await;
    assert!(!s.is_woken());
    assert_pending!(s.poll());

    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "not woken at the earlier deadline");
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn reset_to_the_past_makes_the_next_poll_ready() {
    let mut s = task::spawn(sleep_wheel(Duration::from_secs(300)));
    assert_pending!(s.poll());
    assert_eq!(Timer::current().pending(), 1);
    Pin::new(&mut *s).reset(Instant::now() - MS);
    assert!(s.is_elapsed(), "reset to the past: elapsed at once");
    assert_ready!(s.poll());
    assert_eq!(Timer::current().pending(), 0, "the old entry is removed");

    // To exactly now, too.
    let mut s = task::spawn(sleep_wheel(Duration::from_secs(300)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(Instant::now());
    assert_ready!(s.poll());
    assert_eq!(Timer::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn reset_after_completion_waits_again() {
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(10)));
    assert_pending!(s.poll());
    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    assert_ready!(s.poll());
    assert!(s.is_elapsed());

    let again = Instant::now() + Duration::from_millis(50);
    Pin::new(&mut *s).reset(again);
    assert!(!s.is_elapsed(), "a reset Sleep waits again");
    assert_pending!(s.poll());
    assert_eq!(Timer::current().pending(), 1);

    step_for(Duration::from_millis(49), SHORT_SETTLE_YIELDS).await;
    assert!(!s.is_woken());
    assert_pending!(s.poll());
    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken());
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    assert_eq!(Instant::now(), again);
}

#[tokio::test(start_paused = true)]
async fn reset_before_first_poll_uses_the_new_deadline() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(10)));
    Pin::new(&mut *s).reset(start + Duration::from_millis(40));
    assert_pending!(s.poll());
    step_for(Duration::from_millis(39), SHORT_SETTLE_YIELDS).await;
    assert_pending!(s.poll());
    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert_ready!(s.poll());
}

/// Documented on `Sleep::reset`: after a lazy reset to a later deadline, the old deadline's
/// wakeup replaces the waker the `Sleep` held. Polled after it, the `Sleep` is woken at the new
/// deadline; not polled, it is not (Tokio's would be), yet it counts as elapsed once the clock
/// reaches the new deadline and completes on its next poll.
#[tokio::test(start_paused = true)]
async fn reset_later_wakes_at_the_new_deadline_only_if_polled_after_the_old() {
    for poll_between in [true, false] {
        let start = Instant::now();
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        let mut s = sleep_wheel_until(start + Duration::from_millis(10));
        assert!(poll_with(&mut s, &waker).is_pending());
        Pin::new(&mut s).reset(start + Duration::from_millis(30));
        step_for(Duration::from_millis(15), SHORT_SETTLE_YIELDS).await;
        assert_eq!(counter.count(), 1, "the old deadline wakes the task");
        if poll_between {
            assert!(poll_with(&mut s, &waker).is_pending());
        }
        step_for(Duration::from_millis(15), SHORT_SETTLE_YIELDS).await;
        let expected = if poll_between { 2 } else { 1 };
        assert_eq!(counter.count(), expected, "polled between: {poll_between}");
        assert!(s.is_elapsed());
        assert!(poll_with(&mut s, &waker).is_ready());
    }
}

#[tokio::test(start_paused = true)]
async fn reset_later_after_firing_but_before_poll_waits_for_the_new_deadline() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(100)));
    assert_pending!(s.poll());
    step_for(Duration::from_millis(100), SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "fired");
    // Not polled yet: move the deadline later.
    Pin::new(&mut *s).reset(start + Duration::from_millis(150));
    assert!(!s.is_elapsed());
    assert_pending!(s.poll(), "must wait for the new deadline");
    step_for(Duration::from_millis(49), SHORT_SETTLE_YIELDS).await;
    assert_pending!(s.poll());
    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken());
    assert_ready!(s.poll());
}

#[tokio::test(start_paused = true)]
async fn is_elapsed_is_true_once_fired_even_before_the_next_poll() {
    // Documented: "Whether the deadline has been reached (this Sleep returned Ready or will on
    // its next poll without waiting)".
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(20)));
    assert_pending!(s.poll());
    assert!(!s.is_elapsed());
    step_for(Duration::from_millis(20), SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "fired");
    assert!(
        s.is_elapsed(),
        "the deadline was reached and the next poll completes, yet is_elapsed() is false"
    );
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_sleep_removes_its_timer_and_waker() {
    let timer = Timer::current();
    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(counter.clone());
    let mut s = sleep_wheel(Duration::from_secs(60));
    assert_eq!(
        timer.pending(),
        0,
        "registered on first poll, not at creation"
    );
    assert!(poll_with(&mut s, &waker).is_pending());
    assert_eq!(timer.pending(), 1);
    drop(waker);
    assert_eq!(
        Arc::strong_count(&counter),
        2,
        "the wheel holds a waker clone"
    );
    drop(s);
    assert_eq!(timer.pending(), 0);
    assert_eq!(Arc::strong_count(&counter), 1, "the waker is released");
    step_for(Duration::from_secs(61), SHORT_SETTLE_YIELDS).await;
    assert_eq!(counter.count(), 0, "a dropped sleep never wakes");
}

#[tokio::test(start_paused = true)]
async fn only_the_latest_waker_is_woken() {
    let first = Arc::new(CountingWaker::default());
    let second = Arc::new(CountingWaker::default());
    let (w1, w2) = (Waker::from(first.clone()), Waker::from(second.clone()));
    let mut s = sleep_wheel(Duration::from_millis(30));
    assert!(poll_with(&mut s, &w1).is_pending());
    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    // The task moved: poll from another one.
    assert!(poll_with(&mut s, &w2).is_pending());
    step_for(Duration::from_millis(19), SHORT_SETTLE_YIELDS).await;
    assert_eq!((first.count(), second.count()), (0, 0), "woken early");
    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert_eq!(first.count(), 0, "the stale waker was woken");
    assert_eq!(
        second.count(),
        1,
        "the latest waker was not woken exactly once"
    );
    assert!(poll_with(&mut s, &w2).is_ready());
    assert_eq!(Arc::strong_count(&first), 2, "only the local w1 holds it");

    // Same with mock tasks: the future moves from one task to another.
    let mut s = sleep_wheel(Duration::from_millis(30));
    let mut a = task::spawn(poll_fn_ref(&mut s));
    assert_pending!(a.poll());
    drop(a);
    let mut b = task::spawn(poll_fn_ref(&mut s));
    assert_pending!(b.poll());
    step_for(Duration::from_millis(30), SHORT_SETTLE_YIELDS).await;
    assert!(b.is_woken());
    assert_ready!(b.poll());
}

/// A future polling `sleep` by reference, so several mock tasks can take turns.
fn poll_fn_ref(sleep: &mut Sleep) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| Pin::new(&mut *sleep).poll(cx))
}

#[tokio::test(start_paused = true)]
async fn explicit_timer_with_10ms_tick_fires_within_one_tick() {
    let tick = Duration::from_millis(10);
    let timer = Timer::builder().tick(tick).build().unwrap();
    assert_eq!(timer.tick(), tick);
    let d = Duration::from_millis(25);

    let start = Instant::now();
    timer.sleep(d).await;
    let elapsed = start.elapsed();
    assert!(elapsed >= d, "early: {elapsed:?}");
    assert!(elapsed <= d + tick, "more than one tick late: {elapsed:?}");

    // Polled: pending just before 25 ms, ready by 35 ms.
    let mut s = task::spawn(timer.sleep(d));
    assert_pending!(s.poll());
    step_for(d - Duration::from_micros(1), SHORT_SETTLE_YIELDS).await;
    assert_pending!(s.poll());
    step_for(Duration::from_micros(1) + tick, SHORT_SETTLE_YIELDS).await;
    assert!(s.is_woken(), "not woken within a tick of its deadline");
    assert_ready!(s.poll());
}

/// Review finding: with a tick that is not a power-of-two multiple of the wheel's old time
/// unit (10 ms, 3 ms, 100 µs), `sleep(1 ms)` took 2 ms of virtual time. Every whole-millisecond
/// sleep must now complete exactly at its deadline in paused time, as Tokio's own does.
#[tokio::test(start_paused = true)]
async fn sleeps_are_exact_in_virtual_time_whatever_the_tick() {
    let ticks = [
        Duration::from_millis(10),
        Duration::from_millis(3),
        Duration::from_millis(1),
        Duration::from_micros(100),
        Duration::from_micros(700),
        Duration::from_secs(7),
    ];
    for tick in ticks {
        let timer = Timer::builder().tick(tick).build().unwrap();
        for ms in [1u64, 2, 3, 7, 10, 11, 25, 999, 1000, 4321] {
            let d = Duration::from_millis(ms);
            let start = Instant::now();
            timer.sleep(d).await;
            assert_eq!(start.elapsed(), d, "tick {tick:?}, sleep {d:?}");
        }
    }
}

/// Review finding: a timer counts time in a `u64` of nanoseconds since it was built, so past
/// about 584 years of uptime deadlines saturate. They must then never fire (not fire at once,
/// which would be early), whatever the tick.
#[tokio::test(start_paused = true)]
async fn past_the_584_year_horizon_sleeps_never_fire_early() {
    for tick in [Duration::from_nanos(1), Duration::from_millis(1)] {
        let timer = Timer::builder().tick(tick).build().unwrap();
        tokio::time::advance(Duration::from_secs(585 * 365 * 86_400)).await;
        let mut s = task::spawn(timer.sleep(Duration::from_secs(1)));
        assert_pending!(s.poll());
        step_for(Duration::from_secs(3600), SHORT_SETTLE_YIELDS).await;
        assert_pending!(s.poll(), "tick {tick:?}: a saturated deadline fired");
        assert!(!s.is_elapsed());
    }
}

/// A sleep past the horizon (about 584 years) needs no wakeup: made there, or moved there
/// (a limited timer's reset moves the entry at once), it leaves an idle paused runtime's clock
/// where it is, rather than walking it through the wheel's far buckets to the horizon, past
/// which the timer could fire nothing. A shutdown still resolves it.
#[tokio::test(start_paused = true)]
async fn a_sleep_past_the_horizon_does_not_move_paused_time() {
    let start = Instant::now();
    let beyond = start + Duration::from_secs(600 * 365 * 86_400);
    let timer = Timer::builder().max_pending(8).build().unwrap();
    let mut made = task::spawn(timer.sleep_until(beyond));
    let mut moved = task::spawn(timer.sleep(Duration::from_secs(1)));
    assert_pending!(made.poll());
    assert_pending!(moved.poll());
    moved.enter(|_, s| s.reset(beyond));
    assert_pending!(moved.poll());
    common::idle_on_another_thread().await;
    // At most to the wake the driver was armed for before the reset (a pass finding nothing).
    let moved_by = Instant::now() - start;
    assert!(
        moved_by <= Duration::from_secs(1),
        "paused time moved {moved_by:?}"
    );
    assert_pending!(made.poll());
    assert_pending!(moved.poll());
    assert_eq!(timer.pending(), 2);
    // The timer still works, and a shutdown resolves both.
    let now = Instant::now();
    timer.sleep(TICK).await;
    assert_eq!(Instant::now(), now + TICK);
    timer.shutdown();
    assert_ready!(made.poll());
    assert_ready!(moved.poll());
    assert!(made.is_shutdown() && moved.is_shutdown());
}

#[tokio::test(start_paused = true)]
async fn an_hour_sleep_costs_one_pass() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    let mut s = task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert_pending!(s.poll());
    let levels = timer.metrics().levels;
    assert!(levels >= 1, "{:?}", timer.metrics());
    drop(s);
    assert_eq!(timer.pending(), 0);

    let timer = Timer::builder().build().unwrap();
    timer.sleep(Duration::from_secs(3600)).await;
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_secs(3600) && elapsed <= Duration::from_secs(3600) + TICK);
    let m = timer.metrics();
    // One, at its deadline: its bucket, levels up, is cascaded by that same pass.
    assert_eq!(m.passes, 1, "{m:?} for {levels} levels");
    assert_eq!(m.pending, 0);

    // Idle afterwards: no more wakeups.
    let before = timer.metrics().passes;
    step_for(DAY, SHORT_SETTLE_YIELDS).await;
    assert_eq!(timer.metrics().passes, before, "an idle timer woke up");
}

/// A lone sleep costs the driver one pass, at its deadline, whatever the tick and however far
/// away: not one at the start of its bucket (a coarse tick's, or a higher level's, which
/// cascades) and another at the deadline.
#[tokio::test(start_paused = true)]
async fn a_lone_sleep_costs_one_pass_whatever_the_tick_and_distance() {
    for tick_ms in [1, 10, 100] {
        let timer = Timer::builder()
            .tick(Duration::from_millis(tick_ms))
            .build()
            .unwrap();
        for (i, ms) in [0u64, 3, 15, 99, 150, 5_000, 3_600_000]
            .into_iter()
            .enumerate()
        {
            // Phases against the tick's grid and Tokio's millisecond grid.
            tokio::time::advance(Duration::from_micros(137 * i as u64 + 1)).await;
            let wait = Duration::from_millis(ms) + Duration::from_micros(250);
            let before = timer.metrics().passes;
            let start = Instant::now();
            timer.sleep(wait).await;
            let elapsed = start.elapsed();
            // Tokio's paused clock jumps whole milliseconds from its reading to its next
            // timer, rounded up: up to 2 ms past a deadline, its own sleeps' too.
            assert!(
                elapsed >= wait && elapsed <= wait + 2 * MS,
                "{elapsed:?} for {wait:?} on a {tick_ms} ms tick, {} passes",
                timer.metrics().passes - before
            );
            assert_eq!(
                timer.metrics().passes - before,
                1,
                "a lone sleep of {wait:?} on a {tick_ms} ms tick"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_runtime_sleeps_are_never_early() {
    const N: u64 = 1000;
    let mut handles = Vec::with_capacity(N as usize);
    for i in 0..N {
        let d = Duration::from_millis(1 + (i * 7919) % 50);
        handles.push(tokio::spawn(async move {
            let start = Instant::now();
            let s = sleep_wheel(d);
            let deadline = s.deadline();
            s.await;
            (d, start.elapsed(), Instant::now() >= deadline)
        }));
    }
    let mut done = 0;
    let mut max_late = Duration::ZERO;
    for h in handles {
        let (d, elapsed, reached) = h.await.unwrap();
        assert!(reached, "woke before its deadline ({d:?})");
        assert!(elapsed >= d, "sleep of {d:?} woke early, after {elapsed:?}");
        max_late = max_late.max(elapsed - d);
        done += 1;
    }
    assert_eq!(done, N);
    assert!(
        max_late < Duration::from_millis(500),
        "a sleep was {max_late:?} late"
    );
    assert_eq!(Timer::current().pending(), 0);
}

/// Sleeps polled once by one task and then awaited by another (a waker swapped in under the
/// lock, racing the pass that fires the entry on whichever worker Tokio fires the alarm), or
/// dropped on a plain thread (a cancel from another thread than the shard's, on a busy timer:
/// handed over), while their deadlines come: every awaited one completes, none early, and
/// nothing is left pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeps_handed_between_tasks_and_threads_near_their_deadline_complete_once_never_early() {
    const N: usize = 2000;
    let timer = Timer::builder().build().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Sleep>();
    let (drop_tx, drop_rx) = std::sync::mpsc::channel::<Sleep>();
    let dropper = std::thread::spawn(move || drop_rx.into_iter().for_each(drop));
    let awaiter = tokio::spawn(async move {
        let mut tasks = Vec::new();
        while let Some(s) = rx.recv().await {
            tasks.push(tokio::spawn(async move {
                let deadline = s.deadline();
                s.await;
                Instant::now() >= deadline
            }));
        }
        let mut completed = 0;
        for t in tasks {
            assert!(t.await.unwrap(), "a sleep completed before its deadline");
            completed += 1;
        }
        completed
    });
    let mut rng = XorShift::new(0x5eed);
    let mut sent = 0;
    for i in 0..N {
        let mut s = timer.sleep(Duration::from_micros(rng.below(3_000)));
        // Registered by this task's waker (or due at once, then completed).
        if poll_with(&mut s, &futures::task::noop_waker()).is_ready() {
            continue;
        }
        if i % 3 == 0 {
            drop_tx.send(s).unwrap();
        } else {
            tx.send(s).unwrap();
            sent += 1;
        }
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    drop((tx, drop_tx));
    let completed = tokio::time::timeout(Duration::from_secs(20), awaiter)
        .await
        .expect("a handed-over sleep never completed")
        .unwrap();
    dropper.join().unwrap();
    assert_eq!(completed, sent);
    assert_eq!(timer.pending(), 0);
}

#[test]
fn two_runtimes_in_two_threads_have_distinct_default_timers() {
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2usize)
        .map(|n| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                // Register n + 1 long sleeps on this runtime's default timer.
                let held: Vec<Sleep> = rt.block_on(async {
                    assert_eq!(Timer::current().pending(), 0, "runtime {n}: fresh timer");
                    let mut held = Vec::new();
                    for _ in 0..=n {
                        let mut s = sleep_wheel(Duration::from_secs(3600));
                        assert!(poll_with(&mut s, &futures::task::noop_waker()).is_pending());
                        held.push(s);
                    }
                    held
                });
                barrier.wait();
                // Both runtimes hold their sleeps now; each timer sees only its own.
                rt.block_on(async {
                    assert_eq!(Timer::current().pending(), n + 1, "runtime {n}");
                    assert_eq!(Timer::current().metrics().pending, n + 1, "runtime {n}");
                });
                barrier.wait();
                // Both work at once, on the real clock.
                rt.block_on(async {
                    for ms in [1u64, 5, 20] {
                        let d = Duration::from_millis(ms);
                        let start = Instant::now();
                        sleep_wheel(d).await;
                        let elapsed = start.elapsed();
                        assert!(elapsed >= d, "runtime {n}: early after {elapsed:?}");
                        assert!(elapsed < d + Duration::from_millis(500), "{elapsed:?}");
                    }
                    drop(held);
                    assert_eq!(Timer::current().pending(), 0, "runtime {n}");
                });
            })
        })
        .collect();
    for t in threads {
        t.join().expect("runtime thread panicked");
    }
}

#[test]
fn sleep_wheel_outside_a_runtime_panics_mentioning_tokio() {
    let err = std::panic::catch_unwind(|| drop(sleep_wheel(Duration::from_secs(1))))
        .expect_err("sleep_wheel outside a runtime must panic");
    let msg = panic_message(&*err);
    assert!(msg.contains("Tokio"), "panic message: {msg:?}");

    let err = std::panic::catch_unwind(|| drop(sleep_wheel_until(Instant::now())))
        .expect_err("sleep_wheel_until outside a runtime must panic");
    let msg = panic_message(&*err);
    assert!(msg.contains("Tokio"), "panic message: {msg:?}");
}

// ---------------------------------------------------------------------------------------------
// Review findings (issue: correctness)
// ---------------------------------------------------------------------------------------------

/// A `Sleep` from `try_sleep` on a bounded timer, reset later, lost its slot when its old
/// deadline passed, and panicked "timer is full" when awaited once another sleep took the
/// slot. It must keep its slot through the lazy reset.
#[tokio::test(start_paused = true)]
async fn a_reset_sleep_keeps_its_slot_on_a_bounded_timer() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let mut a = Box::pin(timer.try_sleep(Duration::from_millis(10)).unwrap());
    a.as_mut()
        .reset(Instant::now() + Duration::from_millis(100));
    step_for(Duration::from_millis(20), SHORT_SETTLE_YIELDS).await;
    assert_eq!(
        timer.try_sleep(Duration::from_secs(3600)).unwrap_err(),
        TimerError::Full { max_pending: 1 },
        "the reset sleep still holds the only slot"
    );
    let start = Instant::now();
    a.as_mut().await; // must not panic
    assert_eq!(start.elapsed(), Duration::from_millis(80));
    assert!(!a.is_shutdown());
    // Completed, its slot is free; a reset takes one again, and try_reset reports a full
    // timer instead of a later panic.
    let _other = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    assert_eq!(
        a.as_mut()
            .try_reset(Instant::now() + Duration::from_secs(1)),
        Err(TimerError::Full { max_pending: 1 })
    );
}

/// A sleep that fired at its deadline was reported as shut down when first polled after
/// `Timer::shutdown()`. Fired and cut short by the shutdown must be told apart.
#[tokio::test(start_paused = true)]
async fn a_sleep_that_fired_before_shutdown_is_not_reported_as_shut_down() {
    let timer = Timer::builder().build().unwrap();
    let mut fired = task::spawn(timer.sleep(Duration::from_millis(10)));
    let mut cut_short = task::spawn(timer.sleep(Duration::from_secs(10)));
    assert_pending!(fired.poll());
    assert_pending!(cut_short.poll());
    step_for(Duration::from_millis(20), SHORT_SETTLE_YIELDS).await;
    timer.shutdown();
    assert_ready!(fired.poll());
    assert!(!fired.is_shutdown(), "it elapsed at its deadline");
    assert_ready!(cut_short.poll());
    assert!(cut_short.is_shutdown(), "the shutdown cut it short");

    // A sleep created after the shutdown with a deadline already passed elapsed too.
    let mut past = task::spawn(timer.sleep_until(Instant::now() - Duration::from_millis(5)));
    assert_ready!(past.poll());
    assert!(!past.is_shutdown());
}

/// After a shutdown, a `Sleep` reset to a deadline that came after the shutdown (and has
/// passed since) was cut short by it, as a new sleep for that deadline is: a bounded timer
/// reported it as elapsed, because its reset took a slot by reading the clock first.
#[tokio::test(start_paused = true)]
async fn a_sleep_reset_after_shutdown_is_cut_short_on_bounded_timers_too() {
    for bounded in [false, true] {
        let timer = bounded_or_not(bounded);
        let mut done = task::spawn(timer.sleep(Duration::from_millis(1)));
        assert_pending!(done.poll());
        step_for(Duration::from_millis(1), SHORT_SETTLE_YIELDS).await;
        assert_ready!(done.poll());
        shut_down_then_reset_past_the_shutdown(&timer, &mut done, bounded).await;
    }
}

/// Shuts `timer` down, lets 10 ms pass, and checks that `sleep` reset to a deadline 5 ms
/// after the shutdown (passed since) is cut short, as a new sleep for that deadline is.
async fn shut_down_then_reset_past_the_shutdown(
    timer: &Timer,
    sleep: &mut task::Spawn<Sleep>,
    bounded: bool,
) {
    timer.shutdown();
    let shut = Instant::now();
    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    let after_shutdown = shut + Duration::from_millis(5);
    let mut new = task::spawn(timer.sleep_until(after_shutdown));
    assert_ready!(new.poll());
    assert!(new.is_shutdown(), "bounded {bounded}: a new sleep");
    sleep.enter(|_, s| s.reset(after_shutdown));
    assert_ready!(sleep.poll());
    assert!(sleep.is_shutdown(), "bounded {bounded}: a reset sleep");
}

/// A `Timer` built on a paused runtime and used from a plain thread computed deadlines on the
/// system clock while its driver counted virtual time: after the runtime had been advanced by
/// an hour, a 2 s sleep completed at once. Deadlines now come from the timer's runtime clock.
#[test]
fn a_sleep_made_outside_the_runtime_uses_the_runtime_clock() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    rt.block_on(tokio::time::advance(Duration::from_secs(3600)));

    // This thread is outside the runtime here.
    let waker = Arc::new(CountingWaker::default());
    let waker = Waker::from(waker);
    let mut s = timer.sleep(Duration::from_secs(2));
    let start = rt.block_on(async { Instant::now() });
    assert!(
        s.deadline() >= start + Duration::from_secs(2),
        "deadline on the runtime clock"
    );
    assert!(poll_with(&mut s, &waker).is_pending(), "completed at once");
    rt.block_on(tokio::time::advance(Duration::from_secs(1)));
    assert!(poll_with(&mut s, &waker).is_pending(), "early");
    rt.block_on(async {
        tokio::time::advance(Duration::from_secs(1)).await;
        common::settle().await;
    });
    assert!(poll_with(&mut s, &waker).is_ready());
}

// ---------------------------------------------------------------------------------------------
// Found in review: cooperative budget
// ---------------------------------------------------------------------------------------------

/// The same root cause in `Sleep`: a zero or past deadline completes on the first poll without
/// spending budget, so `loop { sleep_wheel(Duration::ZERO).await }` (a retry loop whose
/// backoff came out as zero) never yields; Tokio's `sleep(ZERO)` yields every 128 polls.
#[tokio::test(start_paused = true)]
async fn a_loop_of_zero_sleeps_yields_to_other_tasks_like_tokios() {
    let other_ran = Arc::new(AtomicBool::new(false));
    let flag = other_ran.clone();
    tokio::spawn(async move { flag.store(true, SeqCst) });
    let mut n = 0;
    while !other_ran.load(SeqCst) && n < 5_000 {
        tokio_timing_wheel::sleep_wheel(Duration::ZERO).await;
        n += 1;
    }
    assert!(
        other_ran.load(SeqCst),
        "5000 zero sleeps ran without yielding once"
    );
}

/// A `Sleep` consults the cooperative budget only to complete: out of budget, a first poll
/// registers and a re-poll keeps waiting, both `Pending` without waking the task (Tokio's
/// `Sleep` would wake it, only for the next poll to register or find it still waiting), and
/// neither fires early. Once due, out of budget, it yields
/// as Tokio's does: `Pending`, woken when the task yields, and ready once its budget is renewed.
#[tokio::test(start_paused = true)]
async fn a_sleep_polled_out_of_budget_registers_or_waits_without_a_wake() {
    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(counter.clone());
    let poll = |s: &mut Sleep| Pin::new(s).poll(&mut Context::from_waker(&waker));
    let start = Instant::now();
    let mut s = sleep_wheel(Duration::from_millis(10));
    assert!(poll(&mut s).is_pending()); // registered
    common::exhaust_budget();
    assert!(!tokio::task::coop::has_budget_remaining());
    for _ in 0..10 {
        assert!(poll(&mut s).is_pending());
    }
    let mut fresh = sleep_wheel(Duration::from_millis(10));
    assert!(poll(&mut fresh).is_pending()); // registers, out of budget
    assert!(!fresh.is_elapsed());
    tokio::task::yield_now().await; // a wake Tokio defers comes now
    assert_eq!(counter.count(), 0, "woken for polls that find it waiting");

    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    assert_eq!(counter.count(), 2, "the deadline's wakes, one per sleep");
    assert!(
        fresh.is_elapsed(),
        "the sleep registered out of budget fired"
    );
    common::exhaust_budget();
    assert!(poll(&mut s).is_pending(), "due, but out of budget");
    tokio::task::yield_now().await; // a fresh budget (Tokio defers the wake to the yield)
    assert_eq!(counter.count(), 3, "out of budget: woken to yield");
    assert!(poll(&mut s).is_ready());
    assert_eq!(start.elapsed(), Duration::from_millis(10));
}

/// A `Sleep` carries what a lock-free re-poll needs (the registered deadline in wheel time and
/// the identity of the waker the wheel holds) and stays within the size of Tokio's, and within
/// one 64-byte cache line.
#[test]
fn a_sleep_is_no_larger_than_tokios() {
    let ours = std::mem::size_of::<Sleep>();
    let tokios = std::mem::size_of::<tokio::time::Sleep>();
    println!("Sleep is {ours} B, Tokio's {tokios} B");
    assert!(ours <= tokios, "Sleep is {ours} B, Tokio's {tokios} B");
    // A cache line: its state sits in the padding of the registration (see `TimerEntry`).
    assert!(ours <= 64, "Sleep is {ours} B, more than 64");
}

/// The re-poll without a lock: any number of polls by the same task neither fires the sleep
/// early nor loses its wakeup, and a task that moves away and back is the one woken.
#[tokio::test(start_paused = true)]
async fn re_polls_by_the_same_task_and_by_tasks_that_move_back_and_forth() {
    let first = Arc::new(CountingWaker::default());
    let second = Arc::new(CountingWaker::default());
    let (w1, w2) = (Waker::from(first.clone()), Waker::from(second.clone()));
    let mut s = sleep_wheel(Duration::from_millis(30));
    for _ in 0..100 {
        assert!(poll_with(&mut s, &w1).is_pending());
    }
    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    assert!(poll_with(&mut s, &w2).is_pending());
    assert!(poll_with(&mut s, &w1).is_pending()); // back to the first task
    for _ in 0..100 {
        assert!(poll_with(&mut s, &w1).is_pending());
    }
    step_for(Duration::from_millis(19), SHORT_SETTLE_YIELDS).await;
    assert!(poll_with(&mut s, &w1).is_pending(), "ready early");
    assert_eq!((first.count(), second.count()), (0, 0), "woken early");
    step_for(MS, SHORT_SETTLE_YIELDS).await;
    assert_eq!(
        (first.count(), second.count()),
        (1, 0),
        "the wrong task woken"
    );
    assert!(poll_with(&mut s, &w1).is_ready());
    assert!(s.is_elapsed());
}

/// Clones of [`clone_counting_waker`]'s waker.
static WAKER_CLONES: AtomicUsize = AtomicUsize::new(0);

/// A waker that does nothing but count its clones (every one is the same waker: a null data
/// pointer and this vtable).
fn clone_counting_waker() -> Waker {
    fn raw() -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn clone(_: *const ()) -> RawWaker {
        WAKER_CLONES.fetch_add(1, SeqCst);
        raw()
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions never read the data pointer (null), `clone` returns a
    // waker with the same vtable, and `wake`, `wake_by_ref` and `drop` do nothing, so every
    // requirement of `RawWaker` holds for any data pointer.
    unsafe { Waker::from_raw(raw()) }
}

/// A re-poll of a waiting sleep by the task the wheel will wake takes no reference count:
/// it clones no waker (the registration clones one, kept by the wheel).
#[tokio::test(start_paused = true)]
async fn a_re_poll_by_the_same_task_clones_no_waker() {
    let waker = clone_counting_waker();
    let mut s = sleep_wheel(Duration::from_millis(30));
    assert!(poll_with(&mut s, &waker).is_pending());
    let registered = WAKER_CLONES.load(SeqCst);
    assert_eq!(registered, 1, "the registration keeps one clone");
    for _ in 0..100 {
        assert!(poll_with(&mut s, &waker).is_pending());
    }
    assert_eq!(
        WAKER_CLONES.load(SeqCst),
        registered,
        "a re-poll cloned the waker"
    );
    tokio::time::advance(Duration::from_millis(30)).await;
    assert!(poll_with(&mut s, &waker).is_ready());
}

#[tokio::test(start_paused = true)]
async fn is_elapsed_is_false_until_polled_and_fired_as_in_tokio() {
    // Due already, but never polled: not elapsed (Tokio answers the same).
    let mut s = task::spawn(sleep_wheel_until(Instant::now()));
    assert!(!s.is_elapsed());
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    // A zero duration too.
    let mut s = task::spawn(sleep_wheel(Duration::ZERO));
    assert!(!s.is_elapsed());
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
    // Reset after completing: waits again, not elapsed until it fires.
    Pin::new(&mut *s).reset(Instant::now() + Duration::from_millis(5));
    assert!(!s.is_elapsed());
    assert_pending!(s.poll());
    assert!(!s.is_elapsed());
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(s.is_woken());
    assert!(s.is_elapsed(), "fired, before the next poll");
    assert_ready!(s.poll());
}

/// Differential: our `Sleep` and Tokio's, driven side by side through the same script (first
/// polls and re-polls in budget, out of it and unconstrained; paused time advanced to and past
/// the deadline; resets earlier, later, after completion and to the past; zero durations),
/// answer alike at every step: `Ready` or `Pending`, as many wakes of each one's own waker,
/// the same `is_elapsed`. Except where ours is meant to be better (out of budget, a poll that
/// registers or finds it waiting answers `Pending` without the wake Tokio's makes), asserted
/// as ours no worse, and where `src/sleep.rs` documents a difference, not asserted.
#[tokio::test(start_paused = true)]
async fn polls_resets_and_budget_answer_as_tokios_sleep_does() {
    use common::differential::{Budget::*, Referee, Rel::*};
    use std::task::Poll::{Pending, Ready};
    let t0 = Instant::now();
    let mut r = Referee::default();
    let mut ours = Box::pin(sleep_wheel(10 * MS));
    let mut theirs = Box::pin(tokio::time::sleep(10 * MS));
    macro_rules! poll {
        ($rel:ident, $budget:ident, $what:expr $(=> $expect:expr)?) => {{
            let ours_answer = r.poll(0, ours.as_mut(), $budget).await;
            let answers = [ours_answer, r.poll(1, theirs.as_mut(), $budget).await];
            let elapsed = Some([ours.is_elapsed(), theirs.is_elapsed()]);
            let answer = r.judge($rel, $what, Some(answers), elapsed).await.unwrap();
            $(assert_eq!(answer, $expect, "{}", $what);)?
            let _ = answer;
        }};
    }
    macro_rules! wait {
        ($rel:ident, $d:expr, $what:expr) => {{
            step_for($d, SHORT_SETTLE_YIELDS).await;
            let elapsed = Some([ours.is_elapsed(), theirs.is_elapsed()]);
            r.judge::<()>($rel, $what, None, elapsed).await;
        }};
    }
    macro_rules! reset {
        ($at:expr) => {{
            ours.as_mut().reset($at);
            theirs.as_mut().reset($at);
        }};
    }
    macro_rules! fresh {
        ($ours:ident, $theirs:ident, $arg:expr) => {{
            let arg = $arg;
            (r, ours) = (Referee::default(), Box::pin($ours(arg)));
            theirs = Box::pin(tokio::time::$theirs(arg));
        }};
    }

    poll!(Same, Has, "first poll" => Pending);
    poll!(Same, Has, "re-poll");
    // Tokio's consults the budget first, and wakes the task for a poll that finds it waiting.
    poll!(NoWorse, Spent, "re-poll out of budget");
    poll!(Same, Unconstrained, "re-poll unconstrained");
    wait!(Same, 5 * MS, "halfway");
    reset!(t0 + 20 * MS);
    // `Sleep::reset`: a later deadline is lazy, one extra wake at the old one to re-file.
    wait!(Documented, 5 * MS, "old deadline, reset later");
    poll!(Same, Has, "re-poll past the old deadline");
    reset!(t0 + 15 * MS);
    poll!(NoWorse, Spent, "reset earlier, out of budget");
    wait!(Same, 5 * MS, "the earlier deadline");
    poll!(Same, Spent, "due, out of budget" => Pending); // woken to yield
    poll!(Same, Has, "due" => Ready(()));
    poll!(Same, Has, "re-poll once complete" => Ready(()));
    reset!(Instant::now() + 10 * MS);
    poll!(Same, Has, "reset once complete" => Pending);
    wait!(Same, 10 * MS, "its new deadline");
    reset!(Instant::now() + 5 * MS);
    // `Sleep::is_elapsed`: a `Sleep` reset and not polled since answers false.
    wait!(SameAnswer, 5 * MS, "reset, past it, not polled");
    poll!(Same, Has, "then polled" => Ready(()));
    reset!(t0);
    // Tokio's fires at once, waking the task that polled it last (the one resetting it, which
    // is to poll it anyway); ours completes on its next poll, without that wake.
    poll!(NoWorse, Spent, "reset to the past, no budget");
    poll!(Same, Has, "reset to the past" => Ready(()));

    // A first poll out of budget: ours registers (no wake), Tokio's wakes the task to register
    // on its next poll. Both are ready at the deadline.
    fresh!(sleep_wheel, sleep, 10 * MS);
    poll!(NoWorse, Spent, "first poll out of budget");
    assert_eq!(r.woken(0), 0, "registered out of budget without a wake");
    wait!(NoWorse, 10 * MS, "deadline, first poll unbudgeted");
    // Ours registered without a wake: its one wake is the deadline's.
    assert_eq!(
        r.woken(0),
        1,
        "the deadline woke the sleep registered out of budget"
    );
    poll!(Same, Has, "polled at the deadline" => Ready(()));

    // A deadline passed before the first poll: `sleep_wheel_until` checks the clock as Tokio's
    // does; `sleep_wheel`'s first poll reads no clock (documented: ready a driver pass later).
    fresh!(sleep_wheel_until, sleep_until, Instant::now() + 10 * MS);
    wait!(Same, 10 * MS, "until: deadline, never polled");
    poll!(Same, Has, "until: first poll" => Ready(()));
    fresh!(sleep_wheel, sleep, 10 * MS);
    wait!(Same, 10 * MS, "deadline, never polled");
    poll!(Documented, Has, "first poll past the deadline");
    poll!(Same, Has, "the next poll" => Ready(()));

    // Zero durations: out of budget, Pending and woken to yield (ours elapsed, as documented),
    // then ready; ready at once in budget or unconstrained.
    fresh!(sleep_wheel, sleep, Duration::ZERO);
    poll!(SameAnswer, Spent, "zero, out of budget" => Pending);
    poll!(Same, Has, "zero, polled again" => Ready(()));
    for budget in [Has, Unconstrained] {
        fresh!(sleep_wheel, sleep, Duration::ZERO);
        poll!(Same, budget, "zero, first poll" => Ready(()));
    }
}

/// A reset to a deadline already passed completes the `Sleep` at once, and, as Tokio's does,
/// wakes the task that polled it last: another task than the one resetting it (a shared
/// `Sleep`, a combinator that resets without polling after) must not wait forever.
#[tokio::test(start_paused = true)]
async fn a_reset_to_the_past_wakes_the_task_waiting_on_the_sleep() {
    for bounded in [false, true] {
        let timer = if bounded {
            Timer::builder().max_pending(4).build().unwrap()
        } else {
            Timer::current()
        };
        for back in [Duration::ZERO, MS] {
            let mut s = task::spawn(timer.sleep(Duration::from_secs(300)));
            assert_pending!(s.poll());
            Pin::new(&mut *s).reset(Instant::now() - back);
            assert!(
                s.is_woken(),
                "reset {back:?} into the past (bounded: {bounded}): waiting task not woken"
            );
            assert_ready!(s.poll());
            assert_eq!(timer.pending(), 0);
        }
    }
}

/// A later reset is lazy: the old deadline's extra wakeup re-files the `Sleep` on its next
/// poll. Until that poll `is_elapsed` must still answer by the new deadline, as Tokio's does:
/// once it has passed, the `Sleep` has elapsed (its next poll completes).
#[tokio::test(start_paused = true)]
async fn a_sleep_reset_later_is_elapsed_at_the_new_deadline_even_unpolled_since_the_old() {
    let start = Instant::now();
    let mut s = task::spawn(sleep_wheel(Duration::from_millis(10)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(start + Duration::from_millis(30));
    assert_pending!(s.poll());
    step_for(Duration::from_millis(10), SHORT_SETTLE_YIELDS).await;
    assert!(!s.is_elapsed(), "elapsed at the old deadline");
    step_for(Duration::from_millis(25), SHORT_SETTLE_YIELDS).await;
    assert!(
        s.is_elapsed(),
        "the new deadline has passed, yet is_elapsed() is false"
    );
    assert_ready!(s.poll());
    assert!(s.is_elapsed());
}

/// A sleep decades away (2^36 * 10 ms, about 22 years) stays pending while the clock moves
/// about 12 days, in the wheel's upper levels: it neither holds up a short sleep made then,
/// which fires exactly on time, nor corrupts the wheel for sleeps dropped before and after
/// their deadlines (as Tokio's own wheel must not).
#[tokio::test(start_paused = true)]
async fn a_sleep_decades_away_neither_delays_nor_corrupts_later_sleeps() {
    let far = tokio::spawn(sleep_wheel(Duration::from_millis(10 << 36)));
    tokio::time::advance(Duration::from_millis((1 << 30) - 1)).await;

    let start = Instant::now();
    sleep_wheel(Duration::from_millis(10)).await;
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(10) && elapsed <= Duration::from_millis(11),
        "a 10 ms sleep took {elapsed:?} beside one 22 years away"
    );

    let mut first = task::spawn(sleep_wheel(Duration::from_millis(10)));
    assert_pending!(first.poll());
    let mut second = task::spawn(sleep_wheel(Duration::from_millis(20)));
    assert_pending!(second.poll());
    tokio::time::advance(Duration::from_millis(30)).await;
    assert!(first.is_woken() && second.is_woken());
    drop(first);
    tokio::time::advance(Duration::from_millis(1 << 31)).await;
    assert_ready!(second.poll());
    drop(second);

    let start = Instant::now();
    sleep_wheel(Duration::from_millis(7)).await;
    assert_eq!(start.elapsed(), Duration::from_millis(7));
    assert!(
        !far.is_finished(),
        "the 22-year sleep fired after about 37 days"
    );
    far.abort();
}

/// A `Sleep` that its timer's shutdown completed does not wait again when reset: whatever
/// the new deadline, the next poll completes, and it reports `is_shutdown()` unless the new
/// deadline had passed when the timer shut down (then it elapsed), as a new sleep for that
/// deadline would.
#[tokio::test(start_paused = true)]
async fn a_sleep_cut_short_by_shutdown_completes_at_once_when_reset() {
    for bounded in [false, true] {
        let timer = bounded_or_not(bounded);
        let start = Instant::now();
        let mut cut = task::spawn(timer.sleep(Duration::from_secs(10)));
        assert_pending!(cut.poll());
        step_for(Duration::from_millis(20), SHORT_SETTLE_YIELDS).await;
        timer.shutdown();
        assert_ready!(cut.poll());
        assert!(cut.is_shutdown());

        let later = Instant::now() + Duration::from_secs(3600);
        cut.enter(|_, s| s.reset(later));
        assert_eq!(cut.deadline(), later);
        assert_ready!(cut.poll());
        assert!(
            cut.is_shutdown(),
            "bounded {bounded}: reset past the shutdown"
        );

        let before_shutdown = start + Duration::from_millis(5);
        cut.enter(|_, s| s.reset(before_shutdown));
        assert_ready!(cut.poll());
        let mut new = task::spawn(timer.sleep_until(before_shutdown));
        assert_ready!(new.poll());
        assert!(!new.is_shutdown(), "bounded {bounded}: a new sleep elapsed");
        assert!(
            !cut.is_shutdown(),
            "bounded {bounded}: reset to a deadline passed before the shutdown"
        );
    }
}

/// A timer built with `max_pending` (a small limit) if `bounded`, else without a limit.
fn bounded_or_not(bounded: bool) -> Timer {
    let builder = Timer::builder();
    let builder = if bounded {
        builder.max_pending(4)
    } else {
        builder
    };
    builder.build().unwrap()
}

/// A `Sleep` still registered when its timer shut down (not polled since), then reset to a
/// deadline that came after the shutdown and has passed by the reset, was cut short by the
/// shutdown, as a new sleep for that deadline is: the reset completed it as elapsed.
#[tokio::test(start_paused = true)]
async fn a_registered_sleep_reset_after_shutdown_to_a_passed_deadline_is_cut_short() {
    for bounded in [false, true] {
        let timer = bounded_or_not(bounded);
        let mut sleep = task::spawn(timer.sleep(Duration::from_secs(10)));
        assert_pending!(sleep.poll());
        step_for(Duration::from_millis(20), SHORT_SETTLE_YIELDS).await;
        shut_down_then_reset_past_the_shutdown(&timer, &mut sleep, bounded).await;
    }
}

/// A model of one `Sleep`'s life, as the docs of `Sleep` and `Timer::shutdown` state it, for
/// [`sleeps_around_a_shutdown_answer_as_the_docs_say`].
///
/// - Never complete before the deadline `d`, unless the timer shut down; after a shutdown
///   (at `S`), the next poll completes, `is_shutdown()` iff `d > S` (a deadline reached at or
///   before `S` counts as elapsed, also for a sleep first polled or reset after `S`), unless
///   it completed before the shutdown and was not reset since.
/// - A registered sleep fires in a pass at or after `d`: by the time Tokio's clock reaches
///   `d` rounded up to its 1 ms grid, it is ready, and the task that last polled it was
///   woken; so is it by a shutdown. A first poll checks the clock (a deadline given as an
///   instant, any reset) and completes at once if due, except `sleep(d)`'s first poll,
///   which reads no clock: past its deadline, it may answer `Pending` but its task is woken
///   at once and its next poll completes.
/// - `is_elapsed()`: `true` once completed; `false` before the deadline (running timer), and
///   while never polled (made by `sleep`/`sleep_until`, never reset); `true` for a sleep
///   waiting (last poll `Pending`) once it must have fired, or once the timer shut down.
/// - A slot (`pending()`, and on a bounded timer what `try_*` may take) is held by a sleep
///   registered and not yet fired: from a `Pending` poll, a `try_sleep*` with a future
///   deadline, or on a bounded timer a reset to a future deadline (at once), until it fires,
///   completes, is dropped or the timer shuts down.
struct ModelSleep {
    s: task::Spawn<Sleep>,
    d: Instant,
    /// The next registration from idle reads the clock (not `sleep(non-zero)`'s first).
    check_clock: bool,
    /// Made by `sleep`/`sleep_until` and neither polled nor reset since.
    untouched: bool,
    /// The last poll answered `Pending`, and no reset since.
    waiting: bool,
    /// Woken since the last poll.
    woken: bool,
    /// Completed since made or reset: `Some(is_shutdown)`.
    done: Option<bool>,
    /// The deadline its wheel entry is filed for, and whether it surely is (else maybe).
    entry: Option<(Instant, bool)>,
    /// Answered `Pending` to a first poll past its deadline: the next poll completes.
    must_complete: bool,
    /// Reset since its last poll.
    reset_since: bool,
    /// Not registered: never polled (nor made by a `try_*` for a future deadline), completed,
    /// or reset since without a registration (a bounded timer's reset to a future deadline
    /// registers at once).
    unregistered: bool,
}

/// The model's run of one seed, with a log of its steps for a failure's message.
struct ModelRun {
    t0: Instant,
    timer: Timer,
    max: Option<usize>,
    shut: Option<Instant>,
    sleeps: Vec<Option<ModelSleep>>,
    log: Vec<String>,
    seed: u64,
}

/// `t` rounded up to Tokio's 1 ms grid (from `t0`, where the runtime's clock started).
fn grid_ceil(t0: Instant, t: Instant) -> Instant {
    let ns = t.saturating_duration_since(t0).as_nanos();
    let ms = ns.div_ceil(1_000_000);
    t0 + Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX / 2))
}

impl ModelRun {
    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {} ({:?} max, shards {:?}): {what}\nsteps:\n  {}",
            self.seed,
            self.max,
            self.timer,
            self.log.join("\n  ")
        );
    }

    fn check(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(what());
        }
    }

    /// Whether `m`'s entry is surely in the wheel (`.0`), and maybe (`.1`).
    fn entry_there(&self, m: &ModelSleep) -> (bool, bool) {
        let now = Instant::now();
        match m.entry {
            _ if self.shut.is_some() => (false, false),
            None => (false, false),
            Some((f, _)) if now >= grid_ceil(self.t0, f) => (false, false),
            Some((f, sure)) if now < f => (sure, true),
            Some(_) => (false, true),
        }
    }

    /// The slots held: at least, at most.
    fn held(&self) -> (usize, usize) {
        let mut lo_hi = (0, 0);
        for m in self.sleeps.iter().flatten() {
            let (sure, maybe) = self.entry_there(m);
            lo_hi.0 += usize::from(sure);
            lo_hi.1 += usize::from(maybe);
        }
        lo_hi
    }

    /// A deadline for a new sleep or a reset: passed, now, near (on and off the grid),
    /// around the shutdown, far.
    fn deadline(&self, rng: &mut XorShift) -> Instant {
        let now = Instant::now();
        let base = match (rng.below(4), self.shut) {
            (0, Some(s)) => s,
            _ => now,
        };
        let off = match rng.below(6) {
            0 => Duration::ZERO,
            1 => MS * rng.below(20) as u32,
            2 => Duration::from_nanos(rng.below(20_000_000)),
            3 => Duration::from_secs(rng.below(4000)),
            _ => Duration::from_nanos(1 + rng.below(3)) + MS * rng.below(3) as u32,
        };
        if rng.below(3) == 0 {
            base.checked_sub(off).unwrap_or(base)
        } else {
            base + off
        }
    }

    /// Compares every observable with the model.
    fn check_all(&mut self) {
        let now = Instant::now();
        let shut = self.shut;
        for i in 0..self.sleeps.len() {
            let Some(m) = self.sleeps[i].as_mut() else {
                continue;
            };
            m.woken |= m.s.is_woken();
            let m = self.sleeps[i].as_ref().unwrap();
            let (d, done, waiting, woken) = (m.d, m.done, m.waiting, m.woken);
            let (elapsed, is_shut, deadline) =
                (m.s.is_elapsed(), m.s.is_shutdown(), m.s.deadline());
            self.check(deadline == d, || {
                format!("#{i}: deadline {deadline:?}, not {d:?}")
            });
            self.check(is_shut == (done == Some(true)), || {
                format!("#{i}: is_shutdown {is_shut}, completed {done:?}")
            });
            let due = now >= grid_ceil(self.t0, d);
            if waiting && (shut.is_some() || due) {
                self.check(woken, || {
                    format!("#{i}: waiting, due or shut down, not woken")
                });
            }
            if done.is_some() {
                self.check(elapsed, || format!("#{i}: completed, is_elapsed false"));
            } else if shut.is_none() && now < d {
                self.check(!elapsed, || {
                    format!("#{i}: before its deadline, is_elapsed")
                });
            } else if m.untouched || m.unregistered && m.reset_since {
                self.check(!elapsed, || format!("#{i}: never polled, is_elapsed"));
            } else if waiting && !m.reset_since && (shut.is_some() || due) {
                self.check(elapsed, || format!("#{i}: waiting, fired, not is_elapsed"));
            }
        }
        let (lo, hi) = self.held();
        let pending = self.timer.pending();
        self.check(lo <= pending && pending <= hi, || {
            format!("pending() {pending}, expected {lo}..={hi}")
        });
    }

    /// Polls sleep `i` and checks its answer.
    fn poll(&mut self, i: usize) {
        let now = Instant::now();
        let t0 = self.t0;
        let shut = self.shut;
        let bounded_full = self.max.is_some_and(|k| self.held().1 >= k);
        let m = self.sleeps[i].as_mut().unwrap();
        // A poll that would take a slot of a full timer panics, as documented: not made.
        let surely_filed = matches!(m.entry, Some((f, true)) if now < f);
        // `sleep(d)`'s first poll reads no clock: it files its entry even past the deadline.
        let unchecked = !m.check_clock && m.untouched;
        let registers =
            m.done.is_none() && !surely_filed && shut.is_none() && (m.d > now || unchecked);
        if bounded_full && registers {
            self.log
                .push(format!("skip poll #{i}: would register on a full timer"));
            return;
        }
        let first_unchecked = !m.check_clock && m.untouched;
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.s.poll()));
        let Ok(answer) = answer else {
            self.fail(format!("poll #{i} panicked"));
        };
        let m = self.sleeps[i].as_mut().unwrap();
        m.woken = false;
        m.untouched = false;
        m.reset_since = false;
        m.unregistered = answer.is_ready();
        let m = self.sleeps[i].as_ref().unwrap();
        let (d, done, must_complete) = (m.d, m.done, m.must_complete);
        self.log.push(format!(
            "poll #{i} (deadline {:?}): {answer:?}",
            d.saturating_duration_since(t0)
        ));
        let m_woken_now = m.s.is_woken();
        let ready = answer.is_ready();
        if let Some(s) = shut {
            self.check(ready, || {
                format!("#{i}: polled after the shutdown, pending")
            });
            let expect = done.unwrap_or(d > s);
            let got = self.sleeps[i].as_ref().unwrap().s.is_shutdown();
            self.check(got == expect, || {
                format!("#{i}: is_shutdown {got}, expected {expect}")
            });
        } else if now < d {
            self.check(!ready, || format!("#{i}: ready before its deadline"));
        } else if done.is_some() || must_complete {
            self.check(ready, || {
                format!("#{i}: completed (or due to), yet pending")
            });
        } else if now >= grid_ceil(t0, d) {
            let ok = ready || first_unchecked && m_woken_now;
            self.check(ok, || format!("#{i}: due, pending (woken {m_woken_now})"));
        }
        let m = self.sleeps[i].as_mut().unwrap();
        if ready {
            m.done = Some(m.done.unwrap_or(shut.is_some_and(|s| m.d > s)));
            m.entry = None;
            m.waiting = false;
            m.must_complete = false;
        } else {
            m.waiting = true;
            m.must_complete = first_unchecked && now >= d && m_woken_now;
            m.entry = match m.entry {
                Some((f, true)) if now < f => Some((f, true)),
                Some((f, _)) if now >= grid_ceil(t0, f) => Some((m.d, true)),
                Some(_) => Some((m.d, false)),
                None => Some((m.d, true)),
            };
        }
    }

    fn reset(&mut self, i: usize, d: Instant, try_: bool) {
        let now = Instant::now();
        let t0 = self.t0;
        let shut = self.shut;
        let max = self.max;
        let (lo, hi) = self.held();
        let m = self.sleeps[i].as_mut().unwrap();
        m.woken |= m.s.is_woken();
        // On a bounded timer, a reset to a future deadline of a sleep without an entry takes
        // a slot at once: whether it may find the timer full.
        let had = match m.entry {
            _ if shut.is_some() => (false, false),
            None => (false, false),
            Some((f, _)) if now >= grid_ceil(t0, f) => (false, false),
            Some((f, sure)) if now < f => (sure, true),
            Some(_) => (false, true),
        };
        let result = if try_ {
            Pin::new(&mut *m.s).try_reset(d)
        } else {
            Pin::new(&mut *m.s).reset(d);
            Ok(())
        };
        m.d = d;
        m.check_clock = true;
        m.untouched = false;
        m.done = None;
        m.must_complete = false;
        m.reset_since = true;
        m.unregistered = if max.is_some() && shut.is_none() && d > now {
            result.is_err()
        } else {
            m.unregistered
        };
        let was_waiting = std::mem::replace(&mut m.waiting, false);
        if was_waiting {
            // Still waited on by the task that polled it last: keep checking its wake.
            m.waiting = true;
        }
        let bounded = max.is_some();
        let takes = bounded && shut.is_none() && d > now;
        let entry_before = m.entry;
        m.entry = if shut.is_some() || bounded && d <= now {
            None
        } else if bounded {
            // Without the error (`reset`), whether it found a slot is known only for sure.
            let others = (lo - usize::from(had.0), hi - usize::from(had.1));
            let k = max.unwrap();
            match result {
                Err(_) => None,
                Ok(()) if try_ || had.0 || others.1 < k => Some((d, true)),
                Ok(()) if others.0 >= k => None,
                Ok(()) => Some((d, false)),
            }
        } else {
            match entry_before {
                None => None,
                // Later: lazy, the entry stays where it is.
                Some((f, sure)) if d >= f => Some((f, sure && had.0)),
                Some(_) if d <= now => None,
                Some(_) if had.0 => Some((d, true)),
                Some(_) if had.1 => Some((d, false)),
                Some(_) => None,
            }
        };
        self.log.push(format!(
            "{}reset #{i} to {:?}: {result:?}",
            if try_ { "try_" } else { "" },
            d.saturating_duration_since(t0)
        ));
        let k = max.unwrap_or(usize::MAX);
        match result {
            Ok(()) if !try_ => {}
            Ok(()) => self.check(!takes || had.1 || lo < k, || {
                format!("#{i}: reset took a slot of a full timer ({lo}..={hi} of {k})")
            }),
            Err(TimerError::Full { .. }) => self.check(try_ && takes && !had.0 && hi >= k, || {
                format!("#{i}: reset reported full ({lo}..={hi} of {k})")
            }),
            Err(e) => self.fail(format!("#{i}: try_reset {e:?}")),
        }
    }

    fn make(&mut self, i: usize, rng: &mut XorShift) {
        let now = Instant::now();
        let (lo, hi) = self.held();
        let k = self.max.unwrap_or(usize::MAX);
        let kind = rng.below(4);
        let dur = match rng.below(5) {
            0 => Duration::ZERO,
            1 => Duration::MAX,
            2 => Duration::from_nanos(rng.below(5_000_000)),
            3 => MS * rng.below(30) as u32,
            _ => Duration::from_secs(rng.below(4000)),
        };
        let until = self.deadline(rng);
        let after = now
            .checked_add(dur)
            .unwrap_or(now + Duration::from_secs(86_400 * 365 * 30));
        let (made, d, what) = match kind {
            0 => (Ok(self.timer.sleep(dur)), after, format!("sleep({dur:?})")),
            1 => (
                Ok(self.timer.sleep_until(until)),
                until,
                "sleep_until".to_string(),
            ),
            2 => (
                self.timer.try_sleep(dur),
                after,
                format!("try_sleep({dur:?})"),
            ),
            _ => (
                self.timer.try_sleep_until(until),
                until,
                "try_sleep_until".to_string(),
            ),
        };
        self.log.push(format!(
            "#{i} = {what} at {:?}, deadline {:?}: {}",
            now.saturating_duration_since(self.t0),
            d.saturating_duration_since(self.t0),
            if made.is_ok() {
                "ok".to_string()
            } else {
                format!("{:?}", made.as_ref().err())
            }
        ));
        let try_ = kind >= 2;
        let takes = try_ && d > now;
        let sleep = match made {
            Ok(s) => {
                self.check(self.shut.is_none() || !try_, || {
                    format!("#{i}: try_* after shutdown: ok")
                });
                self.check(!takes || lo < k, || {
                    format!("#{i}: took a slot of a full timer")
                });
                s
            }
            Err(TimerError::Shutdown) => {
                self.check(self.shut.is_some(), || {
                    format!("#{i}: shutdown error, not shut down")
                });
                return;
            }
            Err(TimerError::Full { .. }) => {
                self.check(self.shut.is_none() && takes && hi >= k, || {
                    format!("#{i}: full ({lo}..={hi} of {k})")
                });
                return;
            }
            Err(e) => self.fail(format!("#{i}: {e:?}")),
        };
        self.sleeps[i] = Some(ModelSleep {
            s: task::spawn(sleep),
            d,
            check_clock: kind != 0 || dur.is_zero(),
            untouched: !takes,
            waiting: false,
            woken: false,
            done: None,
            entry: takes.then_some((d, true)),
            must_complete: false,
            reset_since: false,
            unregistered: !takes,
        });
    }
}

/// Runs one seed of the model on a timer with `max` pending and `shards` shards.
async fn run_sleep_model(seed: u64, max: Option<usize>, shards: usize, t0: Instant) {
    let mut rng = XorShift::new(seed);
    let builder = Timer::builder().shards(shards);
    let builder = match max {
        Some(k) => builder.max_pending(k),
        None => builder,
    };
    let n = 2 + rng.below(3) as usize;
    let steps = 20 + rng.below(30);
    let shutdown_at = rng.below(steps + 5);
    let mut run = ModelRun {
        t0,
        timer: builder.build().unwrap(),
        max,
        shut: None,
        sleeps: (0..n).map(|_| None).collect(),
        log: Vec::new(),
        seed,
    };
    for step in 0..steps {
        if step == shutdown_at {
            run.timer.shutdown();
            run.shut = Some(Instant::now());
            run.log.push(format!(
                "shutdown at {:?}",
                Instant::now().saturating_duration_since(t0)
            ));
            for m in run.sleeps.iter_mut().flatten() {
                m.entry = None;
            }
        }
        let i = rng.below(n as u64) as usize;
        match rng.below(10) {
            0 | 1 if run.sleeps[i].is_none() => run.make(i, &mut rng),
            0..=3 if run.sleeps[i].is_some() => run.poll(i),
            4 | 5 if run.sleeps[i].is_some() => {
                let d = run.deadline(&mut rng);
                let try_ = rng.below(2) == 0;
                run.reset(i, d, try_);
            }
            6 if run.sleeps[i].is_some() => {
                run.sleeps[i] = None;
                run.log.push(format!("drop #{i}"));
            }
            _ => {
                let d = match rng.below(6) {
                    0 => Duration::ZERO,
                    1 => Duration::from_nanos(rng.below(2_000_000)),
                    2 => Duration::from_secs(rng.below(3)),
                    _ => MS * rng.below(12) as u32,
                };
                tokio::time::advance(d).await;
                common::settle_for(4).await;
                run.log.push(format!(
                    "advance {d:?} to {:?}",
                    Instant::now().saturating_duration_since(t0)
                ));
            }
        }
        run.check_all();
    }
    run.timer.shutdown();
}

/// Model-based: random sleeps (`sleep`, `sleep_until`, `try_sleep*`; zero, passed, near, far
/// and `Duration::MAX` deadlines) polled, reset, dropped, with paused time advanced on and
/// off Tokio's millisecond grid and the timer shut down once at a random step, on bounded and
/// unbounded timers of 1 to 3 shards: every answer as [`ModelSleep`] says. `SLEEP_MODEL_SEEDS`
/// sets how many seeds per configuration (a few by default).
#[tokio::test(start_paused = true)]
async fn sleeps_around_a_shutdown_answer_as_the_docs_say() {
    let t0 = Instant::now();
    let seeds: u64 = std::env::var("SLEEP_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let first: u64 = std::env::var("SLEEP_MODEL_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    tokio::task::unconstrained(async {
        for seed in first..first + seeds {
            for max in [None, Some(1), Some(2), Some(3)] {
                let shards = 1 + (seed % 3) as usize;
                run_sleep_model(seed, max, shards, t0).await;
            }
        }
    })
    .await;
}

/// `is_elapsed` answers `false` for a `Sleep` not polled since it was reset, while it is
/// not registered, whatever its deadline: so on a timer without a limit, and it must on a
/// bounded one too, where a reset to a deadline already passed takes no slot (nor does a
/// `try_sleep_until` for one). A bounded timer answered `true` there, before and after a
/// shutdown, where the same sleep on an unbounded timer answered `false`.
#[tokio::test(start_paused = true)]
async fn a_sleep_reset_to_a_passed_deadline_is_not_elapsed_until_polled_bounded_or_not() {
    for bounded in [false, true] {
        for shut_down in [false, true] {
            let timer = bounded_or_not(bounded);
            let passed = Instant::now();
            step_for(Duration::from_millis(5), SHORT_SETTLE_YIELDS).await;
            let mut sleep = task::spawn(timer.sleep(Duration::from_secs(10)));
            let made = timer.try_sleep_until(passed);
            if shut_down {
                timer.shutdown();
            } else {
                let made = made.unwrap();
                assert!(
                    !made.is_elapsed(),
                    "bounded {bounded}: try_sleep_until, never polled"
                );
            }
            sleep.enter(|_, s| s.reset(passed));
            assert!(
                !sleep.is_elapsed(),
                "bounded {bounded}, shut down {shut_down}: reset, not polled since"
            );
            assert_eq!(timer.pending(), 0);
            assert_ready!(sleep.poll());
            assert!(sleep.is_elapsed() && !sleep.is_shutdown());
        }
    }
}

/// Sleeps on a coarse tick whose buckets start at the same time (a far one in a level-1
/// bucket, a near one filed later into the level-0 bucket of that bucket's first tick): once a
/// pass has asked for the next wake with both filed, still one pass each, at its deadline,
/// none at the shared bucket start, where nothing is due.
#[tokio::test(start_paused = true)]
async fn sleeps_whose_buckets_start_together_cost_no_pass_at_that_start() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .unwrap();
    let origin = Instant::now();
    // A pass at 15 ms moves the wheel's time into its second tick.
    timer.sleep(Duration::from_millis(15)).await;
    let before = timer.metrics().passes;
    let at = |ms| origin + Duration::from_millis(ms);
    // Level 1, the bucket of 640..1280 ms; level 0, the bucket of 640..650 ms; and one whose
    // pass asks for the next wake with those two filed.
    let mut far = task::spawn(timer.sleep_until(at(1000)));
    let mut near = task::spawn(timer.sleep_until(at(645)));
    assert_pending!(far.poll());
    assert_pending!(near.poll());
    timer.sleep_until(at(300)).await;
    near.await;
    assert!(origin.elapsed() >= Duration::from_millis(645));
    far.await;
    assert_eq!(
        timer.metrics().passes - before,
        3,
        "one pass per sleep (at 300, 645 and 1000 ms), none at 640 ms"
    );
}

/// In paused time a sleep completes where a Tokio sleep with the same deadline does, never
/// before it. Tokio's auto-advance moves the clock by whole milliseconds from where it stands,
/// so once a sub-millisecond `advance` has left the clock off Tokio's 1 ms grid, both complete
/// up to 1 ms past their deadline's millisecond: here 333 µs past a deadline on the grid.
#[tokio::test(start_paused = true)]
async fn in_paused_time_it_completes_where_a_tokio_sleep_does_with_the_clock_off_the_grid() {
    let origin = Instant::now(); // where Tokio's grid starts
    tokio::time::advance(Duration::from_micros(333)).await;
    let us = Duration::from_micros;
    for (after, late) in [
        (ms(2), us(333)),
        (ms(4) + us(500), us(833)),
        (ms(9), us(333)),
        (ms(11) + us(900), us(433)),
        (ms(200), us(333)),
    ] {
        let deadline = origin + after;
        let ours = tokio::spawn(async move {
            sleep_wheel_until(deadline).await;
            Instant::now()
        });
        let tokios = tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            Instant::now()
        });
        let (ours, tokios) = (ours.await.unwrap(), tokios.await.unwrap());
        assert_eq!(
            ours, tokios,
            "deadline {after:?}: ours and Tokio's complete together"
        );
        assert_eq!(ours - deadline, late, "deadline {after:?}");
    }
}
