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

/// The error events logged on this thread, by message, so the tests below can tell a panic
/// the crate contained (and logged) from one that reached Tokio's own catch around a task,
/// which logs nothing.
#[derive(Default)]
struct ErrorLog(std::sync::Mutex<Vec<String>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl ErrorLog {
    /// Installs a log for this thread (a current-thread runtime's tasks run on it).
    fn install() -> (std::sync::Arc<ErrorLog>, tracing::subscriber::DefaultGuard) {
        let log = std::sync::Arc::new(ErrorLog::default());
        let to = log.clone();
        let guard = crate::common::OnEvent::install(move |event: &tracing::Event<'_>| {
            if *event.metadata().level() == tracing::Level::ERROR {
                let mut message = String::new();
                event.record(&mut Message(&mut message));
                to.0.lock().unwrap().push(message);
            }
        });
        (log, guard)
    }

    fn count(&self, containing: &str) -> usize {
        let events = self.0.lock().unwrap();
        events.iter().filter(|m| m.contains(containing)).count()
    }
}

/// A waker that panics (on purpose) when woken.
struct PanickingWaker;

impl std::task::Wake for PanickingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        panic!("the awaiting task's waker panics (on purpose)");
    }
}

/// An output nobody took (the handle dropped before the task finished) is dropped inside the
/// spawned task, where Tokio would catch its destructor's panic too: the crate contains it
/// itself, and logs it.
#[test]
fn an_untaken_output_panicking_in_the_spawned_task_is_contained_and_logged() {
    quiet_intended_panics();
    let rt = crate::paused_runtime();
    let (log, _guard) = ErrorLog::install();
    rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        // An output whose destructor panics (in a `Some`: a value, not a future to await).
        drop(timer.spawn_after(ms(5), async { Some(PanicsOnDrop) }));
        tokio::time::sleep(ms(10)).await;
        crate::common::settle().await;
        assert_eq!(timer.pending(), 0);
        // And the timer goes on.
        assert_eq!(timer.spawn_after(ms(5), async { 2 }).await.unwrap(), 2);
    });
    assert_eq!(
        log.count("output panicked"),
        1,
        "the output's panic was not contained by the crate (Tokio's task catch got it)"
    );
}

/// The waker of whoever awaits the handle, woken by the spawned task as it finishes: a panic
/// there is contained and logged by the crate, and the handle still holds the output.
#[test]
fn an_awaiter_waker_panicking_when_the_task_finishes_is_contained_and_logged() {
    quiet_intended_panics();
    let rt = crate::paused_runtime();
    let (log, _guard) = ErrorLog::install();
    rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut task = timer.spawn_after(ms(5), async { 7 });
        let waker = std::task::Waker::from(std::sync::Arc::new(PanickingWaker));
        assert!(Pin::new(&mut task)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        tokio::time::sleep(ms(10)).await;
        crate::common::settle().await;
        assert!(task.is_finished());
        assert_eq!(task.await.unwrap(), 7);
    });
    assert_eq!(
        log.count("waker of a task awaiting a delayed task panicked"),
        1,
        "the waker's panic was not contained by the crate (Tokio's task catch got it)"
    );
}

/// A runtime dropped with delayed tasks waiting drains them inside Tokio's shutdown, where
/// Tokio would catch a panic too, and end the drain there: every future is dropped (each
/// destructor's panic contained and logged), every handle resolves as shut down.
#[test]
fn a_runtime_drop_drains_every_task_whose_future_panics_on_drop() {
    quiet_intended_panics();
    struct Bomb(std::sync::Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Bomb {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if !std::thread::panicking() {
                panic!("this future panics when dropped (on purpose)");
            }
        }
    }
    let (log, _guard) = ErrorLog::install();
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let rt = crate::paused_runtime();
    let tasks: Vec<_> = rt.block_on(async {
        (0..4)
            .map(|i| {
                let bomb = Bomb(dropped.clone());
                tokio_timing_wheel::spawn_after(Duration::from_secs(60 + i), async move {
                    let _bomb = bomb;
                    unreachable!("the runtime goes first");
                })
            })
            .collect()
    });
    drop(rt);
    assert_eq!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "the drain skipped a future's drop"
    );
    for task in tasks {
        assert!(task.is_finished());
        let rt = crate::current_thread();
        let err = rt.block_on(task).unwrap_err();
        assert!(err.is_shutdown(), "{err:?}");
    }
    assert_eq!(log.count("dropped unrun"), 4);
}
