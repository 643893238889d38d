//! `Timer`'s limits and counts: `max_pending` refuses registrations past the limit (sleeps,
//! timeouts and delayed tasks alike), and `pending()` counts registered timers exactly.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::Context;
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
