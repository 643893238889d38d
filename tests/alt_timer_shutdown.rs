//! The wheel on Tokio's unstable alternative timer at runtime shutdown. Each test here would
//! kill the test process if it failed (a Tokio worker panicking aborts the process), so they
//! live apart from `alt_timer.rs`. Without `--cfg tokio_unstable` this file is empty. CI runs:
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!     cargo test --test alt_timer_shutdown -- --test-threads=1
//! ```
//!
//! Why it needs care: the alt timer fires every timer of a worker when the worker stops
//! (`shutdown_local_timers`), before that worker drops the runtime's tasks (`pre_shutdown`),
//! so the wheel's alarm fires before the sentinel task is dropped; the wake runs a pass and
//! re-arms the alarm, and Tokio panics ("A Tokio 1.x context was found, but it is being
//! shutdown"). The alarm contains that panic and shuts the timer down instead (found in
//! review: before, the worker's panic aborted the process).
#![cfg(tokio_unstable)]

use std::future::Future;
use std::time::Duration;

use tokio_timing_wheel::{sleep_wheel, Timer};

mod common;
use common::alt_runtime;

/// Deterministic: one worker, one pending 1 h wheel sleep, drop the runtime.
#[test]
fn alt_timer_dropping_the_runtime_with_a_pending_sleep_does_not_abort() {
    let rt = alt_runtime(1);
    rt.block_on(async {
        let pending = tokio::spawn(sleep_wheel(Duration::from_secs(3600)));
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(pending); // detached: the task stays, its sleep registered
    });
    drop(rt);
}

/// Registrations from plain threads racing the runtime's drop: besides the abort above, a
/// registering thread that re-arms the alarm once the runtime has begun shutting down panics
/// in Tokio (`push_from_remote`: the alt timer refuses new timers as soon as shutdown starts,
/// before the sentinel task is dropped and shuts the wheel down).
#[test]
fn alt_timer_registrations_racing_runtime_drop_do_not_panic() {
    {
        for _ in 0..50 {
            let rt = alt_runtime(2);
            let timer = rt.block_on(async { Timer::builder().build().unwrap() });
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let threads: Vec<_> = (0..2)
                .map(|k| {
                    let t = timer.clone();
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let mut i = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                            i += 1;
                            // Each registration earlier than the last: re-arms the alarm.
                            let d = Duration::from_secs(1_000_000) / (i * 2 + k) as u32;
                            let mut s = t.sleep(d);
                            let w = futures::task::noop_waker();
                            let _ = std::pin::Pin::new(&mut s)
                                .poll(&mut std::task::Context::from_waker(&w));
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(5));
            drop(rt);
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            for th in threads {
                th.join().expect("a registering thread panicked");
            }
        }
    }
}
