//! Delayed tasks whose futures panic when dropped: cancelling, shutting down and completing
//! such a task is contained and reported as what happened.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_timing_wheel::Timer;

use crate::common::ms;
use crate::quiet_intended_panics;

/// A future that is ready at once with 7, and panics when dropped.
struct PanicsOnDrop;

impl Future for PanicsOnDrop {
    type Output = u32;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u32> {
        Poll::Ready(7)
    }
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("this future panics when dropped (on purpose)");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_task_whose_future_panics_on_drop_is_contained() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(Duration::from_secs(3_600), PanicsOnDrop);
    assert!(
        task.cancel(),
        "cancel stops it; the drop's panic is contained"
    );
    assert_eq!(timer.pending(), 0);
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("resolves")
        .unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_resolves_a_task_whose_future_panics_on_drop() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(Duration::from_secs(3_600), PanicsOnDrop);
    let other = timer.spawn_after(Duration::from_secs(3_600), async { 1 });
    timer.shutdown();
    assert_eq!(timer.pending(), 0);
    let e = tokio::time::timeout(Duration::from_secs(60), other)
        .await
        .expect("resolves")
        .unwrap_err();
    assert!(e.is_shutdown());
    // Documented: "pending delayed tasks resolve with DelayedError::is_shutdown".
    assert!(
        task.is_finished(),
        "a pending task must be finished once the timer shut down"
    );
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("awaiting a task drained by shutdown must not hang")
        .unwrap_err();
    assert!(err.is_shutdown(), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn a_task_whose_future_panics_on_drop_after_completing_is_not_reported_as_shutdown() {
    quiet_intended_panics();
    let timer = Timer::builder().build().unwrap();
    let task = timer.spawn_after(ms(5), PanicsOnDrop);
    let r = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("resolves");
    assert!(!timer.is_shutdown());
    // The timer and the runtime are running: "shutdown" would be a false report. The output
    // (Ok(7)) or the panic (is_panic) are the documented outcomes.
    match r {
        Ok(v) => assert_eq!(v, 7),
        Err(e) => assert!(
            e.is_panic(),
            "the task ran and its future panicked when dropped, yet the error is {e:?} \
             (is_shutdown: {})",
            e.is_shutdown()
        ),
    }
    // The timer keeps working.
    let t = timer.spawn_after(ms(5), async { 2 });
    assert_eq!(t.await.unwrap(), 2);
}
