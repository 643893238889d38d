//! The tower `Timeout` service and `TimeoutLayer`, in paused time.
#![cfg(feature = "tower")]

mod common;

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, assert_ready_ok, task};
use tokio_timing_wheel::tower::{Timeout, TimeoutLayer};
use tokio_timing_wheel::Timer;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};

use common::{ms, step};

/// A service answering `Ok(request)` after `delay` of (paused) time.
fn after(delay: Duration) -> impl Service<u32, Response = u32, Error = BoxError> + Clone {
    service_fn(move |req: u32| async move {
        tokio::time::sleep(delay).await;
        Ok::<_, BoxError>(req)
    })
}

#[tokio::test(start_paused = true)]
async fn a_slow_service_yields_towers_elapsed_error_at_the_deadline() {
    let service = ServiceBuilder::new()
        .layer(TimeoutLayer::new(ms(100)))
        .service(after(ms(500)));
    let start = Instant::now();
    let err = service.oneshot(1).await.unwrap_err();
    assert_eq!(
        start.elapsed(),
        ms(100),
        "exactly at the deadline in paused time"
    );
    assert!(
        err.is::<tower::timeout::error::Elapsed>(),
        "handlers written for tower::timeout keep working: {err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn never_before_the_deadline() {
    let mut service = Timeout::new(after(ms(500)), ms(100));
    let mut call = task::spawn(service.call(7));
    assert_pending!(call.poll());
    step(ms(99)).await;
    assert_pending!(call.poll());
    step(ms(1)).await;
    assert!(assert_ready!(call.poll()).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_fast_service_yields_its_response() {
    let service = TimeoutLayer::new(ms(100)).layer(after(ms(99)));
    assert_eq!(service.clone().oneshot(42).await.unwrap(), 42);
    let instant = TimeoutLayer::new(Duration::ZERO).layer(after(Duration::ZERO));
    assert_eq!(
        instant.oneshot(1).await.unwrap(),
        1,
        "ready at once beats a zero timeout"
    );
}

#[derive(Debug, PartialEq)]
struct Boom(u32);

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "boom {}", self.0)
    }
}

impl std::error::Error for Boom {}

#[tokio::test(start_paused = true)]
async fn a_failing_service_yields_its_own_error() {
    let failing = service_fn(|n: u32| async move {
        tokio::time::sleep(ms(10)).await;
        Err::<u32, _>(Boom(n))
    });
    let err = Timeout::new(failing, ms(100)).oneshot(3).await.unwrap_err();
    assert_eq!(err.downcast_ref::<Boom>(), Some(&Boom(3)));
    assert!(!err.is::<tower::timeout::error::Elapsed>());
}

/// A service whose readiness the test controls: 0 not ready, 1 ready, 2 broken.
#[derive(Clone, Debug)]
struct Gate(Arc<AtomicU8>);

impl Service<u32> for Gate {
    type Response = u32;
    type Error = Boom;
    type Future = std::future::Ready<Result<u32, Boom>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Boom>> {
        match self.0.load(SeqCst) {
            0 => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            1 => Poll::Ready(Ok(())),
            _ => Poll::Ready(Err(Boom(0))),
        }
    }

    fn call(&mut self, n: u32) -> Self::Future {
        std::future::ready(Ok(n))
    }
}

#[tokio::test(start_paused = true)]
async fn poll_ready_forwards_readiness_and_errors_without_a_timer() {
    let state = Arc::new(AtomicU8::new(0));
    let timer = Timer::builder().build().unwrap();
    let mut service = TimeoutLayer::with_timer(ms(100), timer.clone()).layer(Gate(state.clone()));
    {
        let mut ready = task::spawn(service.ready());
        assert_pending!(ready.poll());
        step(ms(1000)).await;
        assert_pending!(ready.poll(), "waiting for readiness is not timed");
        assert_eq!(timer.pending(), 0);
        state.store(1, SeqCst);
        assert_ready_ok!(ready.poll());
    }
    assert_eq!(service.call(5).await.unwrap(), 5);
    state.store(2, SeqCst);
    let err = service.ready().await.map(|_| ()).unwrap_err();
    assert_eq!(err.downcast_ref::<Boom>(), Some(&Boom(0)));
}

#[tokio::test(start_paused = true)]
async fn an_explicit_timer_holds_the_pending_call_and_nothing_for_a_ready_one() {
    let timer = Timer::builder().build().unwrap();
    let layer = TimeoutLayer::with_timer(ms(100), timer.clone());
    let mut instant = layer.layer(after(Duration::ZERO));
    assert_eq!(instant.call(1).await.unwrap(), 1);
    assert_eq!(
        timer.metrics().heap_pushes,
        0,
        "a ready response never touches the wheel"
    );

    let mut slow = layer.layer(after(ms(50)));
    let mut call = task::spawn(slow.call(2));
    assert_pending!(call.poll());
    assert_eq!(timer.pending(), 1);
    assert_eq!(Timer::current().pending(), 0);
    step(ms(50)).await;
    assert_eq!(assert_ready!(call.poll()).unwrap(), 2);
    assert_eq!(
        timer.pending(),
        0,
        "answered in time: the timer left the wheel"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_timer_yields_the_crates_elapsed_marked_shutdown() {
    let timer = Timer::builder().build().unwrap();
    let mut service = TimeoutLayer::with_timer(ms(100), timer.clone()).layer(after(ms(500)));
    let mut call = task::spawn(service.call(1));
    assert_pending!(call.poll());
    timer.shutdown();
    step(ms(1)).await;
    let err = assert_ready!(call.poll()).unwrap_err();
    let elapsed = err
        .downcast_ref::<tokio_timing_wheel::Elapsed>()
        .expect("the crate's Elapsed");
    assert!(elapsed.is_shutdown());
    assert!(!err.is::<tower::timeout::error::Elapsed>());
}

#[test]
fn debug_is_short_and_built_outside_a_runtime() {
    let layer = TimeoutLayer::new(ms(100));
    let text = format!("{layer:?}");
    assert!(text.contains("100ms") && text.len() < 200, "{text}");
    let service = layer.layer(Gate(Arc::default()));
    let text = format!("{service:?}");
    assert!(text.starts_with("Timeout") && text.len() < 400, "{text}");
}

#[tokio::test(start_paused = true)]
async fn the_response_future_prints_its_deadline_only() {
    let mut service = Timeout::new(after(ms(500)), ms(100));
    let call = service.call(1);
    let text = format!("{call:?}");
    assert!(text.starts_with("ResponseFuture { deadline:"), "{text}");
    assert!(text.len() < 200, "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_full_timer_yields_its_error_instead_of_panicking() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let calls = Arc::new(AtomicU8::new(0));
    let counted = calls.clone();
    let inner = service_fn(move |req: u32| {
        counted.fetch_add(1, SeqCst);
        async move {
            tokio::time::sleep(ms(500)).await;
            Ok::<_, BoxError>(req)
        }
    });
    let mut service = TimeoutLayer::with_timer(ms(100), timer.clone()).layer(inner);
    let mut first = task::spawn(service.call(1));
    assert_pending!(first.poll());
    assert_eq!(timer.pending(), 1);

    // The timer is full: the call is refused with the timer's error, not a panic, and the
    // inner service is not called.
    let mut second = task::spawn(service.call(2));
    let err = assert_ready!(second.poll()).unwrap_err();
    assert_eq!(
        err.downcast_ref::<tokio_timing_wheel::TimerError>(),
        Some(&tokio_timing_wheel::TimerError::Full { max_pending: 1 }),
        "{err:?}"
    );
    assert_eq!(calls.load(SeqCst), 1);
    drop(second);

    // The slot frees with the first call; the next call waits as usual.
    step(ms(100)).await;
    assert!(assert_ready!(first.poll())
        .unwrap_err()
        .is::<tower::timeout::error::Elapsed>());
    drop(first);
    let mut third = task::spawn(service.call(3));
    assert_pending!(third.poll());
    assert_eq!(timer.pending(), 1);
}

/// As tower's, the constructors are `const`: a layer can be a constant.
#[tokio::test(start_paused = true)]
async fn the_layer_and_service_can_be_built_in_a_const() {
    const LAYER: TimeoutLayer = TimeoutLayer::new(Duration::from_millis(100));
    let service = LAYER.layer(after(ms(500)));
    let err = service.oneshot(1).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());
    const fn wrap(inner: u8) -> Timeout<u8> {
        Timeout::new(inner, Duration::from_secs(1))
    }
    assert_eq!(*wrap(7).get_ref(), 7);
}

/// A response future first polled only after its deadline has passed (tower's is answered on
/// that poll): the first poll reads no clock, so it returns `Pending` with the task already
/// woken, and the next poll answers tower's `Elapsed`, with no time passing in between.
#[tokio::test(start_paused = true)]
async fn a_response_first_polled_after_its_deadline_elapses_on_the_next_poll() {
    let mut service = TimeoutLayer::new(ms(100)).layer(after(ms(500)));
    let mut response = task::spawn(service.call(1));
    tokio::time::advance(ms(200)).await;
    let late = Instant::now();
    assert_pending!(response.poll());
    assert!(response.is_woken(), "woken at once, not at a later tick");
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    assert_eq!(late.elapsed(), Duration::ZERO);
}

/// The layer's timeout is a timeout to the wheel: a firing pass wakes it after the sleeps due
/// with it (see the crate's "Wake order"), on the runtime's default timer and on a `Timer`
/// with `max_pending` (where the layer files it when the request arrives). A current-thread
/// runtime runs tasks in the order they are woken.
#[tokio::test(start_paused = true)]
async fn a_pass_wakes_the_layers_timeout_after_the_sleeps_due_with_it() {
    use std::sync::Mutex;

    // The service's future is not `Send`: tasks on a `LocalSet`, which runs them in the order
    // they are woken too.
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            for bounded in [false, true] {
                let timer = if bounded {
                    Timer::builder().max_pending(100).build().unwrap()
                } else {
                    Timer::current()
                };
                let start = Instant::now();
                let at = move |us: u64| start + Duration::from_micros(us);
                let order = Arc::new(Mutex::new(Vec::new()));
                let layer = if bounded {
                    TimeoutLayer::with_timer(Duration::from_micros(100_050), timer.clone())
                } else {
                    TimeoutLayer::new(Duration::from_micros(100_050))
                };
                let service = layer.layer(after(Duration::from_secs(3600)));
                let call = {
                    let order = order.clone();
                    tokio::task::spawn_local(async move {
                        assert!(service.oneshot(1).await.is_err());
                        order.lock().unwrap().push("timeout");
                    })
                };
                // A pass at 95 ms brings the wheel's time there: sleeps filed then for 100.1-100.3 ms
                // are a few ticks ahead, in the first level.
                timer.sleep(ms(95)).await;
                let shorts: Vec<_> = (0..3)
                    .map(|i| {
                        let (order, sleep) =
                            (order.clone(), timer.sleep_until(at(100_100 + 100 * i)));
                        tokio::task::spawn_local(async move {
                            sleep.await;
                            order.lock().unwrap().push("short");
                        })
                    })
                    .collect();
                call.await.unwrap();
                for s in shorts {
                    s.await.unwrap();
                }
                assert_eq!(
                    *order.lock().unwrap(),
                    ["short", "short", "short", "timeout"],
                    "bounded: {bounded}"
                );
            }
        })
        .await;
}
