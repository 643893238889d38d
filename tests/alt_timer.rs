//! The wheel on Tokio's unstable alternative timer (`--cfg tokio_unstable`,
//! `runtime::Builder::enable_alt_timer`): its alarm is one of that timer's entries. Without the
//! cfg this file is empty. CI runs it:
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable cargo test --test alt_timer
//! ```
#![cfg(tokio_unstable)]

use std::time::Duration;

use tokio_test::{assert_pending, task};
use tokio_timing_wheel::{sleep_wheel, Timer};

mod common;
use common::{alt_runtime, block_on_plain_thread, with_watchdog};

#[test]
fn alt_timer_sleeps_fire() {
    with_watchdog(Duration::from_secs(20), || {
        let rt = alt_runtime(2);
        rt.block_on(async {
            let start = std::time::Instant::now();
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                sleep_wheel(Duration::from_millis(20)),
            )
            .await;
            assert!(r.is_ok(), "a 20 ms wheel sleep did not fire within 5 s");
            assert!(start.elapsed() >= Duration::from_millis(20));
            // From spawned tasks too.
            let tasks: Vec<_> = (0..50u64)
                .map(|i| tokio::spawn(sleep_wheel(Duration::from_millis(1 + i % 7))))
                .collect();
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(5), t)
                    .await
                    .expect("a spawned task's wheel sleep did not fire within 5 s")
                    .unwrap();
            }
        });
    });
}

/// The promise of "On time under load": one blocked worker must not stall the other workers'
/// timers (no more than `tokio::time` does). Same scenario as
/// `timer.rs::a_blocked_worker_does_not_stall_the_other_workers_timers`, on the alt timer.
#[test]
#[ignore = "a known limitation on Tokio's alt timer: the alarm lives in the local wheel of the \
            worker that armed it, so that worker blocking delays it (README: Tokio's alt timer)"]
fn alt_timer_a_blocked_worker_does_not_stall_the_other_workers_timers() {
    with_watchdog(Duration::from_secs(20), || {
        let rt = alt_runtime(2);
        rt.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let blocker = tokio::spawn(async move {
                let mut s = task::spawn(sleep_wheel(Duration::from_millis(5)));
                assert_pending!(s.poll()); // registered from this worker
                let _ = tx.send(());
                std::thread::sleep(Duration::from_millis(600)); // a bug in user code
            });
            rx.await.unwrap();
            let start = std::time::Instant::now();
            let other = tokio::spawn(async move {
                sleep_wheel(Duration::from_millis(20)).await;
                start.elapsed()
            });
            // Tokio's own timer on the free worker, for reference.
            let tokio_start = std::time::Instant::now();
            let tokio_other = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                tokio_start.elapsed()
            });
            let took = other.await.unwrap();
            let tokio_took = tokio_other.await.unwrap();
            assert!(
                took < Duration::from_millis(400),
                "a 20 ms wheel sleep on the free worker took {took:?} while the other worker \
                 was blocked (tokio's own: {tokio_took:?})"
            );
            blocker.await.unwrap();
        });
    });
}

/// A plain thread waiting on a wheel sleep when the runtime is dropped: the sleep resolves
/// (shut down), and nothing panics.
#[test]
fn alt_timer_runtime_drop_resolves_a_plain_threads_sleep() {
    with_watchdog(Duration::from_secs(20), || {
        let rt = alt_runtime(2);
        let timer = rt.block_on(async { Timer::builder().build().unwrap() });
        let t = timer.clone();
        let waiter = std::thread::spawn(move || {
            let mut s = t.sleep(Duration::from_secs(3600));
            block_on_plain_thread(&mut s);
            s.is_shutdown()
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(rt);
        assert!(waiter.join().expect("the waiting thread panicked"));
    });
}
