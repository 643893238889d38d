//! `http::{TimeoutLayer, RequestBodyTimeoutLayer, ResponseBodyTimeoutLayer}` over real sockets:
//! on an `axum::Router` served by `server::serve`, and under plain hyper-util.
#![cfg(all(feature = "http", feature = "server"))]

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body as _, Frame};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_timing_wheel::http::{
    RequestBodyTimeoutLayer, ResponseBodyTimeoutLayer, TimeoutBody, TimeoutError, TimeoutLayer,
};
use tokio_timing_wheel::server::serve;
use tower::ServiceBuilder;

mod common;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn router() -> Router {
    Router::new().route("/", get(|| async { "fast" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "slow"
        }),
    )
}

async fn get_path(addr: SocketAddr, path: &str) -> (StatusCode, Bytes) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path).body(Empty::<Bytes>::new()).unwrap();
    let res = tokio::time::timeout(Duration::from_secs(10), send.send_request(req))
        .await
        .expect("no answer")
        .unwrap();
    let status = res.status();
    (status, res.into_body().collect().await.unwrap().to_bytes())
}

/// `Router::layer(TimeoutLayer::new(..))` as is: 408 with an empty body, served by `serve`.
#[tokio::test]
async fn axum_router_answers_408_with_an_empty_body() {
    let app = router().layer(TimeoutLayer::new(ms(100)));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, app).into_future());
    assert_eq!(
        get_path(addr, "/").await,
        (StatusCode::OK, Bytes::from("fast"))
    );
    let started = Instant::now();
    let (status, body) = get_path(addr, "/slow").await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(body.is_empty());
    let took = started.elapsed();
    assert!(took >= ms(100) && took < Duration::from_secs(5), "{took:?}");
    server.abort();
}

/// Under plain hyper-util (no `serve`), and with another status.
#[tokio::test]
async fn plain_hyper_util_with_another_status() {
    let app = router().layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        ms(50),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let svc = TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    let (status, body) = get_path(addr, "/slow").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.is_empty());
    server.abort();
}

/// A request body that stalls mid-way fails with `TimeoutError` after the limit; the handler
/// sees it and answers 408.
#[tokio::test]
async fn stalled_request_body_times_out() {
    let app = ServiceBuilder::new()
        .layer(RequestBodyTimeoutLayer::new(ms(100)))
        .service_fn(|req: Request<TimeoutBody<Incoming>>| async move {
            let status = match req.into_body().collect().await {
                Ok(_) => StatusCode::OK,
                Err(e) if e.is::<TimeoutError>() => StatusCode::REQUEST_TIMEOUT,
                Err(_) => StatusCode::BAD_REQUEST,
            };
            let mut res = Response::new(Full::<Bytes>::default());
            *res.status_mut() = status;
            Ok::<_, Infallible>(res)
        });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, app).into_future());
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // 10 bytes announced; 2 sent a little at a time within the limit, then nothing.
    tcp.write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n")
        .await
        .unwrap();
    for b in b"ab" {
        tokio::time::sleep(ms(40)).await;
        tcp.write_all(&[*b]).await.unwrap();
    }
    let started = Instant::now();
    let mut buf = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
        .await
        .expect("no answer")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    // The server may have the last byte before `started`: a loose lower bound (a timer not
    // reset by that byte would fire some 20 ms after it).
    assert!(started.elapsed() >= ms(50), "{:?}", started.elapsed());
    server.abort();
}

/// A response body that stops producing fails after the limit: the client sees the body cut.
#[tokio::test]
async fn stalled_response_body_times_out() {
    let app = ServiceBuilder::new()
        .layer(ResponseBodyTimeoutLayer::new(ms(100)))
        .service_fn(|_req: Request<Incoming>| async {
            let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
            tokio::spawn(async move {
                tx.send_data(Bytes::from("first")).await.unwrap();
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(tx);
            });
            Ok::<_, Infallible>(Response::new(body))
        });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, app).into_future());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let res = send
        .send_request(Request::get("/").body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let mut body = res.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "first");
    let started = Instant::now();
    let rest = tokio::time::timeout(Duration::from_secs(10), body.collect())
        .await
        .expect("the body was never cut");
    assert!(rest.is_err(), "the stalled body ended normally");
    assert!(started.elapsed() >= ms(50), "{:?}", started.elapsed());
    server.abort();
}

/// A body timeout of `Duration::MAX` means no limit (as tower-http's): the body waits, its
/// deadline saturates instead of overflowing.
#[tokio::test(start_paused = true)]
async fn a_body_timeout_of_duration_max_waits_for_ever() {
    let (_tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let mut body = std::pin::pin!(TimeoutBody::new(Duration::MAX, body));
    // A year later (paused time), still waiting for its first frame.
    let waited = tokio::time::timeout(Duration::from_secs(86_400 * 365), body.frame()).await;
    assert!(
        waited.is_err(),
        "a body with no frame must still be waiting"
    );
}

/// At the limit the handler's future is dropped, with what it holds (a database connection, a
/// permit), as the 408 is answered, not when the response future is dropped later.
#[tokio::test(start_paused = true)]
async fn the_handlers_future_is_dropped_when_the_408_is_answered() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tower::Service;

    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let handler = tower::service_fn(move |_req: Request<()>| {
        let held = common::SetOnDrop(flag.clone());
        async move {
            let _held = held;
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    });
    let mut svc = tokio_timing_wheel::http::Timeout::new(handler, Duration::from_secs(1));
    let mut res = std::pin::pin!(svc.call(Request::new(())));
    let early = tokio::time::timeout(ms(900), res.as_mut()).await;
    assert!(early.is_err(), "answered before the limit");
    assert!(!dropped.load(Ordering::SeqCst), "dropped before the limit");
    let res = res.await.unwrap();
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(
        dropped.load(Ordering::SeqCst),
        "408 answered, but the handler's future (and what it holds) is still alive"
    );
}

/// A response ready at the poll that finds the limit passed is delivered, not replaced by a
/// 408: the handler's future is asked first, as tower's `Timeout` and Tokio's `timeout` ask it.
#[tokio::test(start_paused = true)]
async fn a_response_ready_when_the_limit_is_found_passed_is_delivered() {
    use tokio_test::{assert_pending, assert_ready};
    use tower::Service;

    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut rx = Some(rx);
    let handler = tower::service_fn(move |_req: Request<()>| {
        let rx = rx.take().expect("one request");
        async move {
            rx.await.unwrap();
            Ok::<_, Infallible>(Response::new(String::from("in time")))
        }
    });
    let mut svc = tokio_timing_wheel::http::Timeout::new(handler, Duration::from_secs(1));
    let mut res = tokio_test::task::spawn(svc.call(Request::new(())));
    assert_pending!(res.poll());
    // The limit passes and the response becomes ready before the next poll.
    tokio::time::advance(Duration::from_secs(2)).await;
    tx.send(()).unwrap();
    let res = assert_ready!(res.poll()).unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.into_body(), "in time");
}

/// A body of one frame that arrives when sent, then ends (`is_end_stream`).
struct OneFrame(Option<tokio::sync::oneshot::Receiver<Bytes>>);

impl http_body::Body for OneFrame {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(rx) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        let data = std::task::ready!(Pin::new(rx).poll(cx)).unwrap();
        self.0 = None;
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }
}

/// A body that has ended leaves no timer behind: the one its last wait placed leaves the wheel
/// with its last frame, and the task is not woken at that wait's deadline.
#[tokio::test(start_paused = true)]
async fn a_finished_body_leaves_no_timer_behind() {
    use tokio_timing_wheel::Timer;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut body = std::pin::pin!(TimeoutBody::new(
        Duration::from_secs(30),
        OneFrame(Some(rx))
    ));
    let mut task = tokio_test::task::spawn(());
    let first = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(first.is_pending(), "a frame before it was sent");
    assert_eq!(Timer::current().pending(), 1, "the wait placed no timer");
    tx.send(Bytes::from("last")).unwrap();
    let last = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(matches!(last, Poll::Ready(Some(Ok(_)))), "{last:?}");
    assert!(body.is_end_stream());
    assert_eq!(
        Timer::current().pending(),
        0,
        "the ended body's timer is still filed"
    );
    // Past the deadline of the wait: nothing fires, nobody is woken.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!task.is_woken(), "woken at the ended body's old deadline");
}

/// Trailers are a body's last frame even when the inner body does not say so
/// (`is_end_stream` is false by default, as for `http_body_util`'s `Channel` and `StreamBody`,
/// and hyper stops polling after trailers): the timer leaves the wheel with them, and nobody
/// is woken at the last wait's deadline.
#[tokio::test(start_paused = true)]
async fn a_body_that_ends_with_trailers_leaves_no_timer_behind() {
    use tokio_timing_wheel::Timer;

    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let mut body = std::pin::pin!(TimeoutBody::new(Duration::from_secs(30), body));
    let mut task = tokio_test::task::spawn(());
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    assert_eq!(Timer::current().pending(), 1);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    tx.send_trailers(trailers).await.unwrap();
    let last = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    match last {
        Poll::Ready(Some(Ok(frame))) => assert!(frame.is_trailers()),
        other => panic!("not the trailers: {other:?}"),
    }
    assert_eq!(
        Timer::current().pending(),
        0,
        "the timer of a body that ended with trailers is still filed"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!task.is_woken(), "woken at the ended body's old deadline");
    drop(tx);
}

/// A streaming body outlives a shutdown of the runtime's default timer: its later waits use the
/// new default timer, and it times out at its limit, not at once.
#[tokio::test(start_paused = true)]
async fn after_the_default_timer_shut_down_a_body_still_waits_its_limit() {
    use tokio_timing_wheel::Timer;

    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let mut body = std::pin::pin!(TimeoutBody::new(ms(1000), body));
    let mut task = tokio_test::task::spawn(());
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    tx.send_data(Bytes::from("a")).await.unwrap();
    let frame = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(matches!(frame, Poll::Ready(Some(Ok(_)))), "{frame:?}");

    Timer::current().shutdown();
    let wait = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(wait.is_pending(), "a frame just came: {wait:?}");
    tokio::time::advance(ms(999)).await;
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    tokio::time::advance(ms(1)).await;
    tokio::task::yield_now().await;
    let late = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    let err = match late {
        Poll::Ready(Some(Err(e))) => e,
        other => panic!("not timed out at the limit: {other:?}"),
    };
    assert!(err.is::<TimeoutError>());
}

/// A service that counts its calls and answers after 60 s.
fn counted_slow_handler(
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> impl tower::Service<
    Request<()>,
    Response = Response<String>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<String>, Infallible>>,
> + Clone {
    tower::service_fn(move |_req: Request<()>| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, Infallible>(Response::new(String::from("late")))
        }
    })
}

/// The limit counts from before the inner service's `call` runs, as tower-http's: a `call`
/// that works 800 ms before returning its future (which answers 800 ms later) is cut at a
/// 1.2 s limit. Counted from the `call`'s return (tower's way), it would have answered.
/// Real time, with 400 ms between either outcome and the other's deadline (a stall of the
/// test's threads shorter than that changes nothing).
#[tokio::test]
async fn the_limit_counts_from_before_the_inner_call() {
    use tower::{Layer, Service};

    let inner = tower::service_fn(|_req: Request<()>| {
        std::thread::sleep(ms(800)); // work done in `call`, before the future
        async {
            tokio::time::sleep(ms(800)).await;
            Ok::<_, Infallible>(Response::new(String::from("answered")))
        }
    });
    let mut svc = TimeoutLayer::new(ms(1_200)).layer(inner);
    let start = Instant::now();
    let res = svc.call(Request::new(())).await.unwrap();
    let took = start.elapsed();
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT, "after {took:?}");
    assert!(took >= ms(1_200), "cut early: {took:?}");
}

/// On an explicit timer with `max_pending` that is full, a request is refused with an empty
/// `503 Service Unavailable` (not a panic of the request's task), without calling the handler.
#[tokio::test(start_paused = true)]
async fn a_full_timer_answers_503_without_calling_the_handler() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = TimeoutLayer::new(Duration::from_secs(1))
        .timer(timer.clone())
        .layer(counted_slow_handler(calls.clone()));
    let mut first = tokio_test::task::spawn(svc.call(Request::new(())));
    assert!(first.poll().is_pending());
    assert_eq!(timer.pending(), 1);

    let mut second = tokio_test::task::spawn(svc.call(Request::new(())));
    let res = match second.poll() {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("a refused request must be answered at once"),
    };
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.body().is_empty());
    assert_eq!(
        calls.load(SeqCst),
        1,
        "the refused request reached the handler"
    );

    // The first request still times out at its limit, freeing the slot.
    tokio::time::advance(Duration::from_secs(1)).await;
    let res = match first.poll() {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("not answered at the limit"),
    };
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(timer.pending(), 0);
}

/// Asserts that a body's poll failed with the error of a full timer of one slot.
fn fails_as_full(polled: Poll<Option<Result<Frame<Bytes>, tower::BoxError>>>) {
    let err = match polled {
        Poll::Ready(Some(Err(e))) => e,
        other => panic!("not failed: {other:?}"),
    };
    assert_eq!(
        err.downcast_ref::<tokio_timing_wheel::TimerError>(),
        Some(&tokio_timing_wheel::TimerError::Full { max_pending: 1 }),
        "{err:?}"
    );
}

/// A request body's wait on a full explicit timer fails the body with the timer's error
/// rather than panicking in whoever reads it (the handler's task).
#[tokio::test(start_paused = true)]
async fn a_body_on_a_full_timer_fails_with_the_timers_error() {
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let mut svc = RequestBodyTimeoutLayer::new(ms(100))
        .timer(timer.clone())
        .layer(tower::service_fn(
            |req: Request<TimeoutBody<_>>| async move { Ok::<_, Infallible>(req.into_body()) },
        ));
    let (_tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let body = svc.call(Request::new(body)).await.unwrap();
    let mut body = std::pin::pin!(body);
    let mut task = tokio_test::task::spawn(());
    fails_as_full(task.enter(|cx, _| body.as_mut().poll_frame(cx)));
}

/// A response body whose timer fired (freeing its slot) while its reader was away, and whose
/// slot was then taken, fails with the timer's error at its next wait, not with a panic.
#[tokio::test(start_paused = true)]
async fn a_body_whose_slot_was_taken_fails_with_the_timers_error() {
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let mut body = Some(body);
    let mut svc = ResponseBodyTimeoutLayer::new(ms(100))
        .timer(timer.clone())
        .layer(tower::service_fn(move |_req: Request<()>| {
            let body = body.take().unwrap();
            async move { Ok::<_, Infallible>(Response::new(body)) }
        }));
    let body = svc.call(Request::new(())).await.unwrap().into_body();
    let mut body = std::pin::pin!(body);
    let mut task = tokio_test::task::spawn(());
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    assert_eq!(timer.pending(), 1);
    tx.send_data(Bytes::from("a")).await.unwrap();
    let frame = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(matches!(frame, Poll::Ready(Some(Ok(_)))), "{frame:?}");
    // The reader is away past the old deadline: the timer fires, and its slot is taken.
    tokio::time::sleep(ms(200)).await;
    assert_eq!(timer.pending(), 0);
    let _held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    fails_as_full(task.enter(|cx, _| body.as_mut().poll_frame(cx)));
}

/// A request waiting when its timer shuts down is answered `503 Service Unavailable`, not
/// `408`: it was not slow (its limit had not passed), the server can no longer time it.
#[tokio::test(start_paused = true)]
async fn a_request_cut_by_a_timer_shutdown_answers_503_not_408() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().build().unwrap();
    let mut svc = TimeoutLayer::new(Duration::from_secs(1))
        .timer(timer.clone())
        .layer(counted_slow_handler(Arc::new(AtomicUsize::new(0))));
    let mut waiting = tokio_test::task::spawn(svc.call(Request::new(())));
    assert!(waiting.poll().is_pending());
    timer.shutdown();
    assert!(waiting.is_woken());
    let res = match waiting.poll() {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("a shutdown resolves the request's timer"),
    };
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.body().is_empty());
}

/// tower-http's constructors and accessors, spelled as tower-http spells them, so that code
/// written for `tower_http::timeout` compiles with only its imports changed; the layer made by
/// `layer_with_status_code` answers its status.
#[tokio::test(start_paused = true)]
async fn tower_http_constructors_and_accessors_are_all_here() {
    use tokio_timing_wheel::http::{RequestBodyTimeout, ResponseBodyTimeout, Timeout};
    use tower::{Layer, Service, ServiceExt};

    let slow = tower::service_fn(|_req: Request<()>| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, Infallible>(Response::new(String::from("late")))
    });
    let layer: TimeoutLayer =
        Timeout::<()>::layer_with_status_code(StatusCode::GATEWAY_TIMEOUT, ms(10));
    let mut svc = layer.layer(slow);
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(()))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(res.body().is_empty());

    let _: RequestBodyTimeoutLayer = RequestBodyTimeout::<()>::layer(ms(10));
    let _: ResponseBodyTimeoutLayer = ResponseBodyTimeout::<()>::layer(ms(10));
    let mut request_body = RequestBodyTimeout::new(7_u8, ms(10));
    *request_body.get_mut() += 1;
    assert_eq!(*request_body.get_ref(), 8);
    let mut response_body = ResponseBodyTimeout::new(7_u8, ms(10));
    *response_body.get_mut() += 1;
    assert_eq!(response_body.into_inner(), 8);
}

/// `Debug` shows the deadline of the wait in progress, and none between frames or once the
/// body has ended (not the stale deadline of an earlier wait).
#[tokio::test(start_paused = true)]
async fn debug_shows_the_deadline_of_the_wait_in_progress_only() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut body = std::pin::pin!(TimeoutBody::new(ms(1000), OneFrame(Some(rx))));
    assert!(format!("{body:?}").contains("deadline: None"), "{body:?}");
    let mut task = tokio_test::task::spawn(());
    let start = Instant::now();
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    let waiting = format!("{body:?}");
    assert!(
        waiting.contains(&format!("deadline: Some({:?})", start + ms(1000))),
        "{waiting}"
    );
    tx.send(Bytes::from("last")).unwrap();
    let last = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(matches!(last, Poll::Ready(Some(Ok(_)))), "{last:?}");
    assert!(
        format!("{body:?}").contains("deadline: None"),
        "an ended body shows the deadline of its last wait: {body:?}"
    );
}

/// A body waiting when the runtime's default timer shuts down waits out its limit on the
/// runtime's new default timer, as `IdleTimeout` does: a `TimeoutError` then would report a
/// timeout the body never had.
#[tokio::test(start_paused = true)]
async fn a_body_waiting_when_the_default_timer_shuts_down_still_waits_its_limit() {
    use tokio_timing_wheel::Timer;

    let (_tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let mut body = std::pin::pin!(TimeoutBody::new(ms(1000), body));
    let mut task = tokio_test::task::spawn(());
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    tokio::time::advance(ms(300)).await;
    Timer::current().shutdown();
    let cut = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    assert!(cut.is_pending(), "not a timeout, 700 ms early: {cut:?}");
    tokio::time::advance(ms(699)).await;
    assert!(task
        .enter(|cx, _| body.as_mut().poll_frame(cx))
        .is_pending());
    tokio::time::advance(ms(1)).await;
    tokio::task::yield_now().await;
    assert!(
        task.is_woken(),
        "woken at the limit by the new default timer"
    );
    let late = task.enter(|cx, _| body.as_mut().poll_frame(cx));
    let err = match late {
        Poll::Ready(Some(Err(e))) => e,
        other => panic!("not timed out at the limit: {other:?}"),
    };
    assert!(err.is::<TimeoutError>());
}

/// A body's limit is a timeout: a firing pass wakes it after the sleeps due with it (see the
/// crate's "Wake order"), also once the runtime's default timer shut down and the limit moved
/// to the new one. A current-thread runtime runs tasks in the order they are woken.
#[tokio::test(start_paused = true)]
async fn a_pass_wakes_a_body_limit_after_the_sleeps_due_with_it() {
    use std::sync::{Arc, Mutex};
    use tokio_timing_wheel::{sleep_wheel_until, Timer};

    for shutdown in [false, true] {
        Timer::current(); // the timer's time starts now
        let start = Instant::now();
        let at = move |us: u64| start + Duration::from_micros(us);
        let order = Arc::new(Mutex::new(Vec::new()));
        let (tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
        let limited = {
            let order = order.clone();
            tokio::spawn(async move {
                let mut body =
                    std::pin::pin!(TimeoutBody::new(Duration::from_micros(1_000_050), body));
                let frame = body.frame().await.expect("an error, not the end");
                assert!(frame.unwrap_err().is::<TimeoutError>());
                order.lock().unwrap().push("body");
            })
        };
        tokio::time::sleep(ms(300)).await;
        if shutdown {
            // The limit moves to the runtime's new default timer, with the sleeps below.
            Timer::current().shutdown();
        }
        tokio::time::sleep(ms(695)).await;
        let shorts: Vec<_> = (0..3)
            .map(|i| {
                let order = order.clone();
                tokio::spawn(async move {
                    sleep_wheel_until(at(1_000_100 + 100 * i)).await;
                    order.lock().unwrap().push("short");
                })
            })
            .collect();
        limited.await.unwrap();
        for s in shorts {
            s.await.unwrap();
        }
        drop(tx);
        assert_eq!(
            *order.lock().unwrap(),
            ["short", "short", "short", "body"],
            "shutdown: {shutdown}"
        );
    }
}
