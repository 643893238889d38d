//! `Timer`'s limits and counts: `max_pending` refuses registrations past the limit (sleeps,
//! timeouts and delayed tasks alike), and `pending()` counts registered timers exactly.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{Sleep, Timer, TimerError};

mod common;
use common::{ms, panic_message, settle};

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
    let mut ready = task::spawn(timer.try_sleep(Duration::ZERO).expect("no slot needed"));
    assert_eq!(timer.pending(), 2);
    assert_ready!(ready.poll());
    let now = timer
        .try_spawn_after(Duration::ZERO, async { 1 })
        .expect("no slot needed");
    assert_eq!(now.await.unwrap(), 1);
    // A timeout whose future is ready at once never touches the wheel.
    assert_eq!(
        timer.timeout(Duration::from_secs(1), async { 2 }).await,
        Ok(2)
    );
    // One that never elapses still waits in the timer (a shutdown must resolve it): a slot.
    assert!(matches!(
        timer.try_timeout(Duration::MAX, std::future::pending::<()>()),
        Err(TimerError::Full { max_pending: 2 })
    ));
    drop(s);
    let mut forever = task::spawn(
        timer
            .try_timeout(Duration::MAX, std::future::pending::<()>())
            .expect("a slot is free"),
    );
    assert_pending!(forever.poll());
    assert_eq!(timer.pending(), 2);
    drop(forever);
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

/// A sleep or timeout made with a duration reads no clock before it registers; first polled
/// after its deadline on a full timer it needs no slot, and completes, as one made for the
/// same instant (`sleep_until`) does, instead of panicking for want of a slot.
#[tokio::test(start_paused = true)]
async fn a_duration_sleep_first_polled_after_its_deadline_completes_on_a_full_timer() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holder = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    assert_eq!(timer.pending(), 1);
    let mut late = task::spawn(timer.sleep(Duration::from_millis(10)));
    let mut late_timeout =
        task::spawn(timer.timeout(Duration::from_millis(10), std::future::pending::<()>()));
    tokio::time::advance(Duration::from_millis(20)).await;
    assert_ready!(late.poll());
    assert!(!late.is_shutdown());
    assert!(assert_ready!(late_timeout.poll()).is_err(), "elapsed");
    assert_eq!(timer.pending(), 1, "neither took a slot");
}

/// A delayed task made with a duration reads no clock before it registers, as a sleep does;
/// on a full timer, a deadline passed by the time it is filed (1 ns: the clock has moved on
/// by then) needs no slot either, and the task starts at once instead of being refused.
/// Real time: in paused time no deadline passes between the call and its filing.
#[tokio::test(flavor = "current_thread")]
async fn a_delayed_task_due_before_it_is_filed_starts_on_a_full_timer() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holder = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let task = timer
        .try_spawn_after(Duration::from_nanos(1), async { 7 })
        .expect("due before it is filed: no slot needed");
    assert_eq!(task.await.unwrap(), 7);
    assert_eq!(timer.pending(), 1, "it took no slot");
    assert!(
        matches!(
            timer.try_spawn_after(Duration::from_secs(1), async {}),
            Err(TimerError::Full { max_pending: 1 })
        ),
        "a deadline ahead still needs one"
    );
}

/// Polled before its deadline on a full timer, a sleep made with a duration still panics,
/// as documented (`Timer::try_sleep` returns the error instead).
#[tokio::test(start_paused = true)]
#[should_panic(expected = "try_* methods")]
async fn a_duration_sleep_polled_before_its_deadline_on_a_full_timer_panics() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holder = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let mut early = task::spawn(timer.sleep(Duration::from_millis(10)));
    let _ = early.poll();
}

// ---------------------------------------------------------------------------------------------
// A seeded model of every registration kind against `pending()` and `max_pending`
// ---------------------------------------------------------------------------------------------

/// One live object of the model, with the wheel time (if any) its slot is held for.
enum Live {
    /// A sleep or a timeout's delay; `filed`: the deadline its slot is held for.
    Sleep {
        sleep: Pin<Box<Sleep>>,
        filed: Option<Instant>,
    },
    Timeout {
        timeout: Pin<Box<tokio_timing_wheel::Timeout<std::future::Pending<()>>>>,
        filed: Option<Instant>,
    },
    /// A delayed task; `filed`: waiting for that instant (its slot held).
    Task {
        task: tokio_timing_wheel::DelayedTask<u8>,
        filed: Option<Instant>,
        cancelled: bool,
    },
    /// A `try_interval` or `try_delay_queue`: one slot for life.
    Interval(tokio_timing_wheel::Interval),
    /// A plain `interval`: one slot from its first wait.
    LazyInterval {
        interval: tokio_timing_wheel::Interval,
        waited: bool,
    },
    Queue(Box<tokio_timing_wheel::DelayQueue<u32>>),
}

impl Live {
    fn holds_slot(&self) -> bool {
        match self {
            Live::Sleep { filed, .. } | Live::Timeout { filed, .. } | Live::Task { filed, .. } => {
                filed.is_some()
            }
            Live::Interval(_) | Live::Queue(_) => true,
            Live::LazyInterval { waited, .. } => *waited,
        }
    }

    /// The pass at `now` fired what was filed for it.
    fn fire_through(&mut self, now: Instant) {
        match self {
            Live::Sleep { filed, .. } | Live::Timeout { filed, .. } | Live::Task { filed, .. } => {
                if filed.is_some_and(|d| d <= now) {
                    *filed = None;
                }
            }
            Live::Interval(_) | Live::Queue(_) | Live::LazyInterval { .. } => {}
        }
    }
}

/// What the model says a `try_*` registration answers.
enum Want {
    /// Refused: the timer is shut down.
    Shutdown,
    /// Accepted without a slot (nothing to wait for).
    Free,
    /// Refused: the timer is full.
    Full,
    /// Accepted, taking a slot.
    Slot,
}

impl Want {
    fn of(shut: bool, zero: bool, full: bool) -> Want {
        match (shut, zero, full) {
            (true, _, _) => Want::Shutdown,
            (false, true, _) => Want::Free,
            (false, false, true) => Want::Full,
            (false, false, false) => Want::Slot,
        }
    }

    /// Checks `r` against the model: the value and whether it took a slot when accepted.
    fn check<T>(self, r: Result<T, TimerError>, cap: usize, ctx: &str) -> Option<(T, bool)> {
        let refusal = match self {
            Want::Free => return Some((r.expect(ctx), false)),
            Want::Slot => return Some((r.expect(ctx), true)),
            Want::Shutdown => TimerError::Shutdown,
            Want::Full => TimerError::Full { max_pending: cap },
        };
        assert_eq!(r.err(), Some(refusal), "{ctx}");
        None
    }
}

/// Whether a sleep's or timeout's poll must take a slot (not yet filed, deadline ahead, timer
/// running); `None` when it must and the timer is full: the poll would panic, as documented.
fn must_file(
    filed: Option<Instant>,
    deadline: Instant,
    now: Instant,
    shut: bool,
    full: bool,
) -> Option<bool> {
    let needs = filed.is_none() && deadline > now && !shut;
    (!(needs && full)).then_some(needs)
}

/// Checks a sleep's or timeout's poll against the model and records the slot it holds;
/// `true` if it completed without one.
fn note_poll(
    filed: &mut Option<Instant>,
    deadline: Instant,
    needs: bool,
    pending: bool,
    shut: bool,
    ctx: &str,
) -> bool {
    if filed.is_some() || needs {
        assert!(pending, "{ctx}");
        filed.get_or_insert(deadline);
        false
    } else if pending {
        // Made with a duration and first polled after its deadline: filed, due on the pass
        // that follows at once.
        assert!(!shut, "{ctx}");
        *filed = Some(deadline);
        false
    } else {
        true
    }
}

/// Polls `f` once with `waker`, outside the task's budget.
async fn poll_once<F: Future + Unpin>(
    f: &mut F,
    waker: &std::task::Waker,
) -> std::task::Poll<F::Output> {
    tokio::task::unconstrained(std::future::poll_fn(|_| {
        let mut cx = Context::from_waker(waker);
        std::task::Poll::Ready(Pin::new(&mut *f).poll(&mut cx))
    }))
    .await
}

async fn run_model(seed: u64, max: Option<usize>) {
    let mut b = Timer::builder();
    if let Some(max) = max {
        b = b.max_pending(max);
    }
    let timer = b.build().unwrap();
    let cap = max.unwrap_or(usize::MAX);
    let mut rng = common::XorShift::new(seed);
    let mut live: Vec<Live> = Vec::new();
    // Every poll wakes this waker: what the wheel still holds of it is counted.
    let tracker = std::sync::Arc::new(common::CountingWaker::default());
    let waker = std::task::Waker::from(tracker.clone());
    let mut shut = false;
    // Delayed tasks whose handle was dropped: each waits for its instant, holding its slot.
    let mut detached: Vec<Instant> = Vec::new();
    let held = |live: &Vec<Live>, detached: &Vec<Instant>| {
        live.iter().filter(|l| l.holds_slot()).count() + detached.len()
    };
    let full = |live: &Vec<Live>, detached: &Vec<Instant>| held(live, detached) >= cap;
    let durations = [0u64, 1, 3, 7, 20, 50];
    for step_no in 0..400 {
        let now = Instant::now();
        let d = ms(durations[rng.below(durations.len() as u64) as usize]);
        let what = rng.below(16);
        let ctx = format!("seed {seed} step {step_no} op {what}");
        match what {
            0 => {
                // try_sleep (a far one sometimes)
                let d = if rng.below(8) == 0 { Duration::MAX } else { d };
                let r = timer.try_sleep(d);
                let want = Want::of(shut, d.is_zero(), full(&live, &detached));
                if let Some((sleep, slot)) = want.check(r, cap, &ctx) {
                    let sleep = Box::pin(sleep);
                    let filed = slot.then(|| sleep.deadline());
                    live.push(Live::Sleep { sleep, filed });
                }
            }
            1 => {
                // a lazy sleep, registered by its first poll below
                live.push(Live::Sleep {
                    sleep: Box::pin(timer.sleep(d)),
                    filed: None,
                });
            }
            2 => {
                let r = timer.try_timeout(d, std::future::pending::<()>());
                let want = Want::of(shut, d.is_zero(), full(&live, &detached));
                if let Some((timeout, slot)) = want.check(r, cap, &ctx) {
                    let timeout = Box::pin(timeout);
                    let filed = slot.then(|| timeout.deadline());
                    live.push(Live::Timeout { timeout, filed });
                }
            }
            3 => {
                let panics = rng.below(3) == 0;
                let r = timer.try_spawn_after(d, async move {
                    if panics {
                        panic!("a delayed task panics (on purpose)");
                    }
                    7
                });
                if shut {
                    // Resolved with the shutdown error, as `spawn_after` does.
                    let t = r.expect(&ctx);
                    assert!(t.is_finished(), "{ctx}");
                    assert!(t.await.unwrap_err().is_shutdown(), "{ctx}");
                } else {
                    let want = Want::of(false, d.is_zero(), full(&live, &detached));
                    if let Some((task, slot)) = want.check(r, cap, &ctx) {
                        let filed = slot.then_some(now + d);
                        live.push(Live::Task {
                            task,
                            filed,
                            cancelled: false,
                        });
                    }
                }
            }
            4 => {
                let r = timer.try_interval(d.max(ms(1)));
                let want = Want::of(shut, false, full(&live, &detached));
                if let Some((interval, _)) = want.check(r, cap, &ctx) {
                    live.push(Live::Interval(interval));
                }
            }
            5 => {
                let r = timer.try_delay_queue::<u32>();
                let want = Want::of(shut, false, full(&live, &detached));
                if let Some((queue, _)) = want.check(r, cap, &ctx) {
                    live.push(Live::Queue(Box::new(queue)));
                }
            }
            6 | 7 if !live.is_empty() => {
                // poll one
                let i = rng.below(live.len() as u64) as usize;
                let is_full = full(&live, &detached);
                match &mut live[i] {
                    Live::Sleep { sleep, filed } => {
                        let Some(needs) = must_file(*filed, sleep.deadline(), now, shut, is_full)
                        else {
                            continue; // would panic, as documented
                        };
                        let p = poll_once(&mut sleep.as_mut(), &waker).await;
                        note_poll(filed, sleep.deadline(), needs, p.is_pending(), shut, &ctx);
                    }
                    Live::Timeout { timeout, filed } => {
                        let deadline = timeout.deadline();
                        let Some(needs) = must_file(*filed, deadline, now, shut, is_full) else {
                            continue;
                        };
                        let p = poll_once(&mut timeout.as_mut(), &waker).await;
                        if note_poll(filed, deadline, needs, p.is_pending(), shut, &ctx) {
                            assert!(matches!(p, std::task::Poll::Ready(Err(_))), "{ctx}");
                        }
                    }
                    Live::Task { task, .. } => {
                        if !task.is_finished() {
                            continue;
                        }
                        let t =
                            std::mem::replace(task, timer.spawn_after(Duration::ZERO, async { 0 }));
                        drop(t.await);
                        live.swap_remove(i);
                    }
                    Live::Interval(iv) => {
                        let _ = poll_once(&mut Box::pin(iv.tick()), &waker).await;
                    }
                    Live::LazyInterval { interval, waited } => {
                        if !*waited && is_full && !shut {
                            // Its first wait would panic, as documented: unless a tick is due.
                            continue;
                        }
                        let p = poll_once(&mut Box::pin(interval.tick()), &waker).await;
                        *waited |= p.is_pending() && !shut;
                    }
                    Live::Queue(q) => {
                        if rng.below(2) == 0 {
                            q.insert(step_no as u32, d);
                        }
                        let _ =
                            poll_once(&mut std::future::poll_fn(|cx| q.poll_expired(cx)), &waker)
                                .await;
                    }
                }
            }
            8 | 9 if !live.is_empty() => {
                // reset one: later, earlier, to now or the past
                let i = rng.below(live.len() as u64) as usize;
                let to = match rng.below(4) {
                    0 => now,
                    1 => now - ms(1 + rng.below(5)),
                    _ => now + d,
                };
                let is_full = full(&live, &detached);
                match &mut live[i] {
                    Live::Sleep { sleep, filed } => {
                        let r = sleep.as_mut().try_reset(to);
                        if shut || to <= now {
                            assert_eq!(r, Ok(()), "{ctx}");
                            *filed = None;
                        } else if max.is_none() {
                            // Later: lazy, the entry stays filed where it was.
                            assert_eq!(r, Ok(()), "{ctx}");
                            if filed.is_some_and(|f| to < f) {
                                *filed = Some(to);
                            }
                        } else if filed.is_some() || !is_full {
                            assert_eq!(r, Ok(()), "{ctx}");
                            *filed = Some(to);
                        } else {
                            assert_eq!(r, Err(TimerError::Full { max_pending: cap }), "{ctx}");
                        }
                    }
                    Live::Task { task, filed, .. } => {
                        let r = task.reset(to);
                        assert_eq!(r, filed.is_some(), "{ctx}");
                        if filed.is_some() {
                            *filed = Some(to.max(now));
                        }
                    }
                    Live::Interval(iv) | Live::LazyInterval { interval: iv, .. } => {
                        match rng.below(3) {
                            0 => iv.reset(),
                            1 => iv.reset_immediately(),
                            _ => iv.reset_at(to),
                        }
                    }
                    Live::Queue(q) => match rng.below(3) {
                        0 => q.clear(),
                        1 => {
                            if let Some(k) = q.peek() {
                                q.remove(&k);
                            }
                        }
                        _ => {
                            if let Some(k) = q.peek() {
                                q.reset_at(&k, to);
                            }
                        }
                    },
                    Live::Timeout { .. } => {}
                }
            }
            10 | 11 if !live.is_empty() => {
                // drop or cancel one
                let i = rng.below(live.len() as u64) as usize;
                if let Live::Task {
                    task,
                    filed,
                    cancelled,
                } = &mut live[i]
                {
                    if rng.below(2) == 0 {
                        let c = task.cancel();
                        assert_eq!(c, filed.is_some() && !shut, "{ctx}");
                        *cancelled |= c;
                        *filed = None;
                        continue;
                    }
                }
                match live.swap_remove(i) {
                    // On another thread than the one that made it (work stealing).
                    l @ (Live::Sleep { .. }
                    | Live::Timeout { .. }
                    | Live::Interval(_)
                    | Live::LazyInterval { .. })
                        if rng.below(2) == 0 =>
                    {
                        std::thread::spawn(move || drop(l)).join().unwrap();
                    }
                    Live::Timeout { timeout, .. } if rng.below(2) == 0 => {
                        let _inner = Pin::into_inner(timeout).into_inner();
                    }
                    // Dropping the handle does not cancel the task.
                    Live::Task {
                        filed: Some(at), ..
                    } => detached.push(at),
                    other => drop(other),
                }
            }
            12 | 13 => {
                tokio::time::advance(d).await;
            }
            15 if rng.below(2) == 0 => timer.shrink_to_fit(),
            15 => live.push(Live::LazyInterval {
                interval: timer.interval(d.max(ms(1))),
                waited: false,
            }),
            14 if step_no > 300 && !shut && rng.below(8) == 0 => {
                timer.shutdown();
                shut = true;
            }
            _ => {}
        }
        settle().await;
        if shut {
            for l in &mut live {
                l.fire_through(far());
            }
            live.retain(|l| {
                !matches!(
                    l,
                    Live::Interval(_) | Live::Queue(_) | Live::LazyInterval { .. }
                )
            });
        }
        let now = Instant::now();
        for l in &mut live {
            l.fire_through(now);
        }
        detached.retain(|&at| at > now && !shut);
        let want = held(&live, &detached);
        if shut {
            assert_eq!(timer.pending(), 0, "{ctx}: after shutdown");
        } else {
            assert_eq!(timer.pending(), want, "{ctx}");
            assert_eq!(timer.metrics().pending, want, "{ctx}");
        }
    }
    // Every handle resolves; everything dropped gives every slot back.
    for l in live.drain(..) {
        if let Live::Task {
            task, cancelled, ..
        } = l
        {
            let r = tokio::time::timeout(Duration::from_secs(3600), task)
                .await
                .unwrap_or_else(|_| panic!("seed {seed}: a delayed task never resolved"));
            if cancelled {
                assert!(r.unwrap_err().is_cancelled(), "seed {seed}");
            }
        }
    }
    // Detached delayed tasks run at their deadlines.
    common::step(ms(60)).await;
    assert_eq!(timer.pending(), 0, "seed {seed}: at the end");
    // Cancels handed over by other threads are swept by the pass due soon after.
    common::step(ms(20)).await;
    drop(waker);
    assert_eq!(
        std::sync::Arc::strong_count(&tracker),
        1,
        "seed {seed}: the wheel still holds a waker of a future gone"
    );
    if !shut {
        if let Some(max) = max {
            let all: Vec<Sleep> = (0..max)
                .map(|_| {
                    timer
                        .try_sleep(Duration::from_secs(1))
                        .expect("every slot back")
                })
                .collect();
            assert!(timer.try_sleep(Duration::from_secs(1)).is_err());
            drop(all);
        }
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(86400 * 365 * 100)
}

#[tokio::test(start_paused = true)]
async fn seeded_model_of_every_kind_keeps_pending_and_max_pending_exact() {
    for seed in 1..=40 {
        run_model(seed, Some(3)).await;
        run_model(seed, None).await;
    }
}

/// Futures made and polled on one worker of a multi-thread runtime, moved, and dropped on
/// another worker, a blocking thread or the test's own, on a busy timer (an interval ticks
/// every millisecond, so cancels from other threads are handed over to the shard): after
/// each step `pending()` counts exactly what is live, a full timer refuses exactly when the
/// model is full, and once everything is dropped the wheel holds none of their wakers after
/// the passes that follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn futures_dropped_on_other_workers_keep_pending_and_max_pending_exact() {
    use std::sync::Arc;
    const MAX: usize = 4;
    let timer = Timer::builder().max_pending(MAX).build().unwrap();
    let tracker = Arc::new(common::CountingWaker::default());
    // The busy part: one slot, ticking every millisecond.
    let mut busy = timer.try_interval(ms(1)).unwrap();
    let ticking = tokio::spawn(async move {
        loop {
            busy.tick().await;
        }
    });
    enum Held {
        Sleep(Sleep),
        Timeout(tokio_timing_wheel::Timeout<std::future::Pending<()>>),
        Task(tokio_timing_wheel::DelayedTask<()>),
    }
    impl Held {
        /// Cancels a delayed task (dropping its handle would not), then drops it.
        fn end(self) {
            match self {
                Held::Task(t) => assert!(t.cancel()),
                Held::Sleep(s) => drop(s),
                Held::Timeout(t) => drop(t.into_inner()),
            }
        }
    }
    let mut rng = common::XorShift::new(7);
    let mut live: Vec<Held> = Vec::new();
    for step in 0..400 {
        let ctx = format!("step {step}");
        let held = live.len() + 1; // the interval
        match rng.below(5) {
            0 | 1 => {
                let (t, w) = (timer.clone(), Waker::from(tracker.clone()));
                let kind = rng.below(3);
                let made = tokio::spawn(async move {
                    let hour = Duration::from_secs(3600);
                    let mut cx = Context::from_waker(&w);
                    match kind {
                        0 => t.try_sleep(hour).map(|mut s| {
                            assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
                            Held::Sleep(s)
                        }),
                        1 => t.try_timeout(hour, std::future::pending()).map(|mut s| {
                            assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
                            Held::Timeout(s)
                        }),
                        _ => t.try_spawn_after(hour, async {}).map(Held::Task),
                    }
                })
                .await
                .unwrap();
                if held >= MAX {
                    assert!(matches!(made, Err(TimerError::Full { .. })), "{ctx}");
                } else {
                    live.push(made.expect(&ctx));
                }
            }
            2 | 3 if !live.is_empty() => {
                let i = rng.below(live.len() as u64) as usize;
                let h = live.swap_remove(i);
                match rng.below(3) {
                    0 => tokio::spawn(async move { h.end() }).await.unwrap(),
                    1 => tokio::task::spawn_blocking(move || h.end()).await.unwrap(),
                    _ => h.end(),
                }
            }
            _ => tokio::task::yield_now().await,
        }
        assert_eq!(timer.pending(), live.len() + 1, "{ctx}");
    }
    for h in live.drain(..) {
        h.end();
    }
    assert_eq!(timer.pending(), 1);
    tokio::time::sleep(ms(30)).await;
    ticking.abort();
    let _ = ticking.await;
    assert_eq!(timer.pending(), 0);
    tokio::time::sleep(ms(30)).await;
    assert_eq!(
        Arc::strong_count(&tracker),
        1,
        "the wheel still holds wakers of futures gone"
    );
}
