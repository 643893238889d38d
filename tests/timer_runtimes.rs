//! `Timer` across runtimes: every runtime flavour and a plain thread (real clock, loose
//! bounds), and a timer used from another runtime, which reads its own runtime's clock.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{sleep_wheel, spawn_after, Timer};

mod common;
use common::{ms, poll_with, CountingWaker};

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
// A timer used from another runtime reads its own runtime's clock
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
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        // Registers in the past: this thread runs the pass (on B's clock) as it files it.
        let ready = poll_with(&mut s, &waker).is_ready();
        // A pass came for the due sleep (else the test would show nothing): here, or, should
        // A's worker have held the runner's role just then, there, soon.
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while !ready && counter.count() == 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            ready || counter.count() == 1,
            "B's due sleep neither ready nor woken"
        );
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
