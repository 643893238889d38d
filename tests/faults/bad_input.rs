//! Bad input not covered by tests/sleep.rs, timeout.rs, timer.rs and delayed_task.rs: far
//! instants, huge limits, resets into the past, polling after completion.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::{sleep_wheel_until, Sleep, Timer, TimerError};

use crate::common::{ms, step};
use crate::{paused_runtime, with_watchdog};

const YEAR: Duration = Duration::from_secs(365 * 86_400);
const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test(start_paused = true)]
async fn an_instant_a_century_away_waits_and_one_past_the_30_year_horizon_fires() {
    let timer = Timer::builder().build().unwrap();
    let start = Instant::now();
    let century = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let ran = Arc::new(AtomicBool::new(false));

    let mut s = task::spawn(timer.sleep_until(century));
    assert_eq!(s.deadline(), century, "kept as given");
    assert_pending!(s.poll());
    assert!(!s.is_elapsed());
    let mut to = task::spawn(timer.timeout_at(century, std::future::pending::<()>()));
    assert_pending!(to.poll());
    let flag = ran.clone();
    let d = timer.spawn_at(century, async move { flag.store(true, SeqCst) });
    // Beyond the 30-year "far future" the crate and Tokio saturate Duration::MAX to: an
    // explicit instant there is still a real deadline.
    let thirty_one = start + 31 * YEAR;
    let mut s31 = task::spawn(timer.sleep_until(thirty_one));
    assert_pending!(s31.poll());
    assert_eq!(timer.pending(), 4);

    step(31 * YEAR - DAY).await;
    assert_pending!(s31.poll(), "not a day early");
    step(DAY).await;
    assert!(s31.is_woken(), "fires at 31 years");
    assert_ready!(s31.poll());
    assert!(Instant::now() >= thirty_one);

    step(60 * YEAR).await;
    assert!(!s.is_woken(), "a century-away sleep woken after 91 years");
    assert_pending!(s.poll());
    assert_pending!(to.poll());
    assert!(!d.is_finished());
    assert!(!ran.load(SeqCst));
    assert_eq!(timer.pending(), 3);

    drop(s);
    drop(to);
    assert!(d.cancel());
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn max_pending_of_usize_max_builds_and_works() {
    for max in [usize::MAX, usize::MAX - 1] {
        let timer = Timer::builder()
            .max_pending(max)
            .build()
            .expect("a huge limit is valid");
        let held: Vec<Sleep> = (0..1_000)
            .map(|_| timer.try_sleep(Duration::from_secs(1)).unwrap())
            .collect();
        let task = timer.try_spawn_after(ms(500), async { 5 }).unwrap();
        let mut to = task::spawn(
            timer
                .try_timeout(Duration::from_secs(2), std::future::pending::<()>())
                .unwrap(),
        );
        assert_pending!(to.poll());
        assert_eq!(timer.pending(), 1_002, "max = {max}");
        assert_eq!(task.await.unwrap(), 5);
        for s in held {
            s.await;
        }
        assert!(to
            .into_inner()
            .await
            .unwrap_err()
            .to_string()
            .contains("elapsed"));
        assert_eq!(timer.pending(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn reset_into_the_past_on_a_registered_sleep_completes_and_frees_its_slot() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let origin = Instant::now();
    tokio::time::advance(ms(100)).await;

    // Registered by try_sleep, never polled.
    let mut s = timer.try_sleep(Duration::from_secs(60)).unwrap();
    assert_eq!(timer.pending(), 1);
    assert!(timer.try_sleep(Duration::from_secs(60)).is_err(), "full");
    // Before the timer even existed.
    let past = origin.checked_sub(Duration::from_secs(5)).unwrap_or(origin);
    Pin::new(&mut s).reset(past);
    assert_eq!(s.deadline(), past);
    assert_eq!(timer.pending(), 0, "the entry is removed at once");
    assert!(s.is_elapsed());
    let mut s = task::spawn(s);
    assert_ready!(s.poll());
    assert!(!s.is_shutdown());
    let again = timer
        .try_sleep(Duration::from_secs(60))
        .expect("the reset freed the slot");

    // The same on a sleep registered by its first poll, reset to exactly now.
    drop(again);
    let mut s = task::spawn(timer.sleep(Duration::from_secs(60)));
    assert_pending!(s.poll());
    Pin::new(&mut *s).reset(Instant::now());
    assert_eq!(timer.pending(), 0);
    assert_ready!(s.poll());
    assert!(timer.try_sleep(Duration::from_secs(60)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_completed_sleep_stays_ready_when_polled_again() {
    let timer = Timer::builder().build().unwrap();
    let mut fired = task::spawn(timer.sleep(ms(10)));
    assert_pending!(fired.poll());
    let mut drained = task::spawn(timer.sleep(Duration::from_secs(3_600)));
    assert_pending!(drained.poll());
    step(ms(10)).await;
    for _ in 0..5 {
        assert_ready!(fired.poll());
        assert!(fired.is_elapsed());
        assert!(!fired.is_shutdown());
    }
    assert_eq!(timer.pending(), 1);

    timer.shutdown();
    for _ in 0..5 {
        assert_ready!(fired.poll());
        assert!(!fired.is_shutdown(), "it fired before the shutdown");
        assert_ready!(drained.poll());
        assert!(drained.is_shutdown());
        assert!(drained.is_elapsed());
    }
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_polled_again_after_it_elapsed_returns_the_same_error() {
    let timer = Timer::builder().build().unwrap();
    let mut t = task::spawn(timer.timeout(ms(10), std::future::pending::<()>()));
    assert_pending!(t.poll());
    step(ms(10)).await;
    let first = assert_ready!(t.poll()).unwrap_err();
    assert!(!first.is_shutdown());
    // Documented behaviour: polling again after `Err` (which callers should not do) does not
    // panic and does not wait again: it returns the same error.
    for _ in 0..3 {
        let again = assert_ready!(t.poll()).unwrap_err();
        assert_eq!(again, first);
    }
    assert_eq!(timer.pending(), 0);

    // The same for a timeout ended by shutdown.
    let mut t =
        task::spawn(timer.timeout(Duration::from_secs(3_600), std::future::pending::<()>()));
    assert_pending!(t.poll());
    timer.shutdown();
    let first = assert_ready!(t.poll()).unwrap_err();
    assert!(first.is_shutdown());
    for _ in 0..3 {
        assert_eq!(assert_ready!(t.poll()).unwrap_err(), first);
    }
}

#[tokio::test(start_paused = true)]
async fn spawn_at_a_century_away_can_be_cancelled_and_frees_its_slot() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let century = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let task = timer.spawn_at(century, async move { flag.store(true, SeqCst) });
    assert_eq!(timer.pending(), 1);
    assert!(timer.metrics().levels > 1, "{:?}", timer.metrics());
    assert_eq!(
        timer
            .try_spawn_after(Duration::from_secs(1), async {})
            .unwrap_err(),
        TimerError::Full { max_pending: 1 }
    );
    assert!(!task.is_finished());
    assert!(task.cancel());
    assert!(!task.cancel(), "exactly once");
    assert!(task.is_finished());
    assert_eq!(timer.pending(), 0);
    let s = timer
        .try_sleep(Duration::from_secs(1))
        .expect("the cancelled task's slot is free");
    drop(s);
    assert!(task.await.unwrap_err().is_cancelled());
    step(Duration::from_secs(10)).await;
    assert!(!ran.load(SeqCst));
    assert_eq!(timer.pending(), 0);
}

/// A deadline past the driver's 30-year sleep cap used to make the driver spin: its capped
/// Tokio sleep completed, no pass was due, and the ready sleep was polled again forever.
#[test]
fn a_deadline_beyond_thirty_years_fires_without_spinning() {
    let elapsed = with_watchdog(Duration::from_secs(20), || {
        let rt = paused_runtime();
        rt.block_on(async {
            let start = Instant::now();
            let century = Duration::from_secs(100 * 365 * 86_400);
            // Until an instant: a sleep's duration is capped at 30 years, as Tokio's.
            sleep_wheel_until(start + century).await;
            (start.elapsed(), century)
        })
    });
    assert!(elapsed.0 >= elapsed.1, "never early: {elapsed:?}");
    // And at its deadline, not at a later step of the driver's 30-year re-arms.
    assert!(elapsed.0 <= elapsed.1 + ms(2), "late: {elapsed:?}");
}
