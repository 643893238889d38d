//! `grpc::{GrpcTimeoutLayer, PropagateDeadlineLayer}` with a real tonic client and tonic's
//! server-side gRPC handling, over loopback (HTTP/2), served by `server::serve`.
#![cfg(all(feature = "grpc", feature = "server"))]

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_timing_wheel::grpc::{
    parse_grpc_timeout, Deadline, GrpcTimeoutLayer, PropagateDeadlineLayer,
};
use tokio_timing_wheel::server::serve;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};
use tower::ServiceBuilder;

mod common;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Raw bytes as the message: tonic's generic client and server, no protobuf, no codegen.
#[derive(Clone, Copy, Debug, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// What a backend saw: the `grpc-timeout` it was sent, and its `Deadline`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Call>>>);

/// One call a backend saw: the `grpc-timeout` it was sent, and the `Deadline` it ran under.
type Call = (Option<Duration>, Option<Deadline>);

/// A gRPC service: `/test.Svc/Sleep` sleeps for the milliseconds in the message, then echoes
/// it; `/test.Svc/Relay` works 100 ms, then calls `/test.Svc/Sleep` on `next` (through
/// `PropagateDeadlineLayer`).
#[derive(Clone)]
struct Svc {
    seen: Seen,
    next: Option<SocketAddr>,
}

impl tower::Service<http::Request<Incoming>> for Svc {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Incoming>) -> Self::Future {
        let asked = req
            .headers()
            .get("grpc-timeout")
            .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        self.seen
            .0
            .lock()
            .unwrap()
            .push((asked, req.extensions().get::<Deadline>().copied()));
        let next = self.next;
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Raw);
            let res = match req.uri().path() {
                "/test.Svc/Sleep" => {
                    let handler = tower::service_fn(|req: tonic::Request<Bytes>| async move {
                        let n: u64 = std::str::from_utf8(req.get_ref()).unwrap().parse().unwrap();
                        tokio::time::sleep(ms(n)).await;
                        Ok::<_, Status>(tonic::Response::new(req.into_inner()))
                    });
                    grpc.unary(handler, req).await
                }
                "/test.Svc/Relay" => {
                    let handler = tower::service_fn(move |req: tonic::Request<Bytes>| async move {
                        // Inside the handler: the deadline is current, and the client layer
                        // passes what is left of it on.
                        assert!(Deadline::current().is_some());
                        tokio::time::sleep(ms(100)).await; // some of it spent here
                        let mut client = client(next.unwrap()).await;
                        let res =
                            unary(&mut client, "/test.Svc/Sleep", req.into_inner(), None).await?;
                        Ok::<_, Status>(tonic::Response::new(res))
                    });
                    grpc.unary(handler, req).await
                }
                _ => http::Response::new(tonic::body::Body::default()),
            };
            Ok(res)
        })
    }
}

type Transport = tower::util::BoxCloneService<
    http::Request<tonic::body::Body>,
    http::Response<Incoming>,
    hyper::Error,
>;
type Client = tonic::client::Grpc<tokio_timing_wheel::grpc::PropagateDeadline<Transport>>;

/// tonic's client (codec, framing, status) over a hyper HTTP/2 connection. tonic's `Channel`
/// also enforces `grpc-timeout` on its side, answering Cancelled at the same instant the
/// server answers DEADLINE_EXCEEDED; these tests check the server's answer, so they use a
/// transport that does not race it.
async fn client(addr: SocketAddr) -> Client {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let transport = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let mut send = send.clone();
        async move { send.send_request(req).await }
    });
    let uri: http::Uri = format!("http://{addr}").parse().unwrap();
    tonic::client::Grpc::with_origin(
        ServiceBuilder::new()
            .layer(PropagateDeadlineLayer::new())
            .service(tower::util::BoxCloneService::new(transport)),
        uri,
    )
}

/// The same over tonic's `Channel`, for a call that is in time.
async fn channel_client(addr: SocketAddr) -> tonic::client::Grpc<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(channel)
}

async fn unary(
    client: &mut Client,
    path: &'static str,
    msg: Bytes,
    timeout: Option<Duration>,
) -> Result<Bytes, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let mut req = tonic::Request::new(msg);
    if let Some(t) = timeout {
        req.set_timeout(t); // tonic sends it as `grpc-timeout`
    }
    let res = client
        .unary(req, PathAndQuery::from_static(path), Raw)
        .await?;
    Ok(res.into_inner())
}

async fn start(layer: GrpcTimeoutLayer, next: Option<SocketAddr>) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let svc = ServiceBuilder::new().layer(layer).service(Svc {
        seen: seen.clone(),
        next,
    });
    tokio::spawn(serve(listener, svc).into_future());
    (addr, seen)
}

#[tokio::test]
async fn in_time_answers_normally() {
    let (addr, seen) = start(GrpcTimeoutLayer::new(), None).await;
    let mut c = channel_client(addr).await;
    c.ready().await.unwrap();
    let mut req = tonic::Request::new(Bytes::from("10"));
    req.set_timeout(ms(5000));
    let res = c
        .unary(req, PathAndQuery::from_static("/test.Svc/Sleep"), Raw)
        .await
        .unwrap();
    assert_eq!(res.into_inner(), "10");
    let seen = seen.0.lock().unwrap();
    assert_eq!(seen[0].0, Some(ms(5000)));
    assert!(seen[0].1.is_some(), "no Deadline extension");
}

/// The client's `grpc-timeout` passes: tonic's client reads DEADLINE_EXCEEDED (not Cancelled)
/// with our message, at the deadline.
#[tokio::test]
async fn late_answers_deadline_exceeded() {
    let (addr, _) = start(GrpcTimeoutLayer::new(), None).await;
    let mut c = client(addr).await;
    let started = Instant::now();
    let status = unary(
        &mut c,
        "/test.Svc/Sleep",
        Bytes::from("60000"),
        Some(ms(100)),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "Deadline exceeded");
    let took = started.elapsed();
    assert!(took >= ms(100) && took < Duration::from_secs(5), "{took:?}");
}

/// The server's maximum applies without a header, and caps a longer one.
#[tokio::test]
async fn the_servers_max_applies() {
    let (addr, _) = start(GrpcTimeoutLayer::new().max(ms(100)), None).await;
    let mut c = client(addr).await;
    for timeout in [None, Some(Duration::from_secs(60))] {
        let status = unary(&mut c, "/test.Svc/Sleep", Bytes::from("60000"), timeout)
            .await
            .unwrap_err();
        assert_eq!(
            status.code(),
            Code::DeadlineExceeded,
            "{timeout:?}: {status:?}"
        );
    }
}

/// A malformed `grpc-timeout` is ignored (no deadline), never a panic.
#[tokio::test]
async fn malformed_header_is_ignored() {
    let (addr, seen) = start(GrpcTimeoutLayer::new(), None).await;
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for bad in ["123456789S", "1s", "-1S", "S", ""] {
        let req = http::Request::post(format!("http://{addr}/nowhere"))
            .header("content-type", "application/grpc")
            .header("grpc-timeout", bad)
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let res = send.send_request(req).await.unwrap();
        assert_eq!(res.status(), 200);
        // The service's own answer (a gRPC error would carry a status): the call went ahead.
        assert!(
            res.headers().get("grpc-status").is_none(),
            "{bad:?}: {res:?}"
        );
    }
    let seen = seen.0.lock().unwrap();
    assert_eq!(seen.len(), 5, "every call reached the service");
    assert!(seen.iter().all(|(_, d)| d.is_none()), "a deadline was set");
}

/// A deadline propagates through a chain: the client gives the relay 1.5 s, the relay
/// spends 100 ms of it, its call to the backend carries what is left (bounded loosely below,
/// for the connection the relay opens and for a stall of the test's threads), and the client
/// is answered DEADLINE_EXCEEDED.
#[tokio::test]
async fn deadline_propagates_through_a_chain() {
    let (backend, backend_seen) = start(GrpcTimeoutLayer::new(), None).await;
    let (relay, _) = start(GrpcTimeoutLayer::new(), Some(backend)).await;
    let mut c = client(relay).await;
    let started = Instant::now();
    let status = unary(
        &mut c,
        "/test.Svc/Relay",
        Bytes::from("60000"),
        Some(ms(1_500)),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let seen = backend_seen.0.lock().unwrap();
    let passed_on = seen
        .first()
        .expect("the relay never called the backend")
        .0
        .expect("the backend got no grpc-timeout");
    assert!(
        passed_on <= ms(1_400) && passed_on > ms(700),
        "the backend was given {passed_on:?}, not what was left of 1.5 s after 100 ms"
    );
}

/// The largest `grpc-timeout` the spec allows (`99999999H`, some 11 000 years) is a deadline
/// like any other: no overflow, no panic, and the call is answered as usual.
#[tokio::test(start_paused = true)]
async fn the_largest_grpc_timeout_is_honoured() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    let mut svc = ServiceBuilder::new()
        .layer(GrpcTimeoutLayer::new())
        .service_fn(|_req: http::Request<()>| async {
            let left = tokio_timing_wheel::grpc::Deadline::current()
                .expect("no deadline")
                .remaining();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, std::convert::Infallible>(http::Response::new(format!("{}", left.as_secs())))
        });
    let req = http::Request::builder()
        .header("grpc-timeout", "99999999H")
        .body(())
        .unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    assert!(res.headers().get("grpc-status").is_none(), "{res:?}");
    assert_eq!(res.into_body(), format!("{}", 99_999_999u64 * 3600));
}

/// When the deadline passes, the handler's future is dropped, with what it holds, as
/// DEADLINE_EXCEEDED is answered, not when the response future is dropped later.
#[tokio::test(start_paused = true)]
async fn the_handlers_future_is_dropped_at_the_deadline() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower::{Service, ServiceBuilder, ServiceExt};

    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let mut svc = ServiceBuilder::new()
        .layer(GrpcTimeoutLayer::new())
        .service_fn(move |_req: http::Request<()>| {
            let held = common::SetOnDrop(flag.clone());
            async move {
                let _held = held;
                std::future::pending::<()>().await;
                Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
            }
        });
    let req = http::Request::builder()
        .header("grpc-timeout", "1S")
        .body(())
        .unwrap();
    let mut res = std::pin::pin!(svc.ready().await.unwrap().call(req));
    let early = tokio::time::timeout(ms(900), res.as_mut()).await;
    assert!(early.is_err(), "answered before the deadline");
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped before the deadline"
    );
    let res = res.await.unwrap();
    assert_eq!(res.headers()["grpc-status"], "4", "{res:?}");
    assert!(
        dropped.load(Ordering::SeqCst),
        "DEADLINE_EXCEEDED answered, but the handler's future is still alive"
    );
}

/// A handler that counts its calls in `calls` and answers only after a minute.
fn slow_handler(
    calls: Arc<std::sync::atomic::AtomicUsize>,
) -> impl tower::Service<
    http::Request<()>,
    Response = http::Response<String>,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<Output = Result<http::Response<String>, std::convert::Infallible>>,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(http::Response::new(String::from("late")))
        }
    })
}

/// A call with a `grpc-timeout` of one second.
fn with_a_second_deadline() -> http::Request<()> {
    http::Request::builder()
        .header("grpc-timeout", "1S")
        .body(())
        .unwrap()
}

/// On an explicit timer with `max_pending` that is full, a call with a deadline is refused with
/// a trailers-only RESOURCE_EXHAUSTED (as tonic answers an overloaded server), without calling
/// the handler, rather than panicking in the request's task; a call without a deadline needs
/// no timer and is served.
#[tokio::test(start_paused = true)]
async fn a_full_timer_answers_resource_exhausted_without_calling_the_handler() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = GrpcTimeoutLayer::new()
        .timer(timer.clone())
        .layer(slow_handler(calls.clone()));
    let mut refused = tokio_test::task::spawn(svc.call(with_a_second_deadline()));
    let res = match refused.poll() {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("a refused call must be answered at once"),
    };
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/grpc");
    assert_eq!(res.headers()["grpc-status"], "8"); // RESOURCE_EXHAUSTED
    assert!(res.body().is_empty());
    assert_eq!(
        calls.load(SeqCst),
        0,
        "the refused call reached the handler"
    );

    // Without a deadline no timer is needed: the call is served.
    let mut plain = tokio_test::task::spawn(svc.call(http::Request::new(())));
    assert!(plain.poll().is_pending());
    assert_eq!(calls.load(SeqCst), 1);
}

/// A call waiting when its timer shuts down is answered UNAVAILABLE (the server is going
/// away), not DEADLINE_EXCEEDED: its deadline had not passed, and a client may retry it.
#[tokio::test(start_paused = true)]
async fn a_call_cut_by_a_timer_shutdown_answers_unavailable() {
    use tokio_timing_wheel::Timer;
    use tower::{Layer, Service};

    let timer = Timer::builder().build().unwrap();
    let mut svc = GrpcTimeoutLayer::new()
        .timer(timer.clone())
        .layer(slow_handler(Arc::default()));
    let mut waiting = tokio_test::task::spawn(svc.call(with_a_second_deadline()));
    assert!(waiting.poll().is_pending());
    timer.shutdown();
    assert!(waiting.is_woken());
    let res = match waiting.poll() {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("a shutdown resolves the call's timer"),
    };
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["grpc-status"], "14"); // UNAVAILABLE
    assert!(res.body().is_empty());
}

/// Nested layers (a server-wide cap outside, a per-method layer inside): the handler's
/// deadline is the sooner of the two, so what it sees and passes on is the one that cuts it.
#[tokio::test(start_paused = true)]
async fn nested_layers_give_the_handler_the_sooner_deadline() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    let start = Instant::now();
    let mut svc = ServiceBuilder::new()
        .layer(GrpcTimeoutLayer::new().max(Duration::from_secs(1)))
        .layer(GrpcTimeoutLayer::new())
        .service_fn(|req: http::Request<()>| async move {
            let ext = *req.extensions().get::<Deadline>().expect("no extension");
            let current = Deadline::current().expect("no deadline");
            Ok::<_, std::convert::Infallible>(http::Response::new(Some((ext, current))))
        });
    let req = http::Request::builder()
        .header("grpc-timeout", "10S")
        .body(())
        .unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    let (ext, current) = res.into_body().expect("answered DEADLINE_EXCEEDED");
    let cut_at = start + Duration::from_secs(1);
    assert_eq!(current.instant(), cut_at, "Deadline::current");
    assert_eq!(ext.instant(), cut_at, "the request's Deadline extension");
}

/// What a client passes on never outlasts the deadline it serves under: `grpc-timeout` is
/// rounded down, in whatever unit keeps it within 8 digits.
#[tokio::test(start_paused = true)]
async fn a_propagated_deadline_is_never_longer_than_what_is_left() {
    use tower::{Service, ServiceExt};
    let channel = tower::service_fn(|req: http::Request<()>| async move {
        Ok::<_, std::convert::Infallible>(req.headers()["grpc-timeout"].clone())
    });
    let mut client = tower::Layer::layer(&PropagateDeadlineLayer::new(), channel);
    for left in [
        Duration::from_nanos(100_000_001),
        Duration::from_nanos(100_000_000_001),
        Duration::from_millis(99_999_999) + Duration::from_nanos(1),
        Duration::from_secs(99_999_999 * 60) + Duration::from_nanos(1),
        Duration::from_secs(7200) + Duration::from_nanos(999_999_999),
    ] {
        let mut req = http::Request::new(());
        req.extensions_mut().insert(Deadline::after(left));
        let sent = client.ready().await.unwrap().call(req).await.unwrap();
        assert!(sent.len() <= 9, "{left:?} sent as {sent:?}");
        let sent_d = parse_grpc_timeout(sent.as_bytes()).expect("well-formed");
        assert!(sent_d <= left, "{left:?} left, but {sent:?} passed on");
        assert!(left - sent_d <= left / 50_000, "{left:?} -> {sent:?}");
    }
}

/// A request's own, later [`Deadline`] made while serving a call does not outlast that call:
/// the sooner of the two is passed on, as with a `grpc-timeout` already on the request.
#[tokio::test(start_paused = true)]
async fn a_later_deadline_on_an_outgoing_request_does_not_outlast_the_call_served() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    let mut svc = ServiceBuilder::new()
        .layer(GrpcTimeoutLayer::new())
        .service_fn(|_req: http::Request<()>| async move {
            let channel = tower::service_fn(|req: http::Request<()>| async move {
                Ok::<_, std::convert::Infallible>(req.headers()["grpc-timeout"].clone())
            });
            let mut client = tower::Layer::layer(&PropagateDeadlineLayer::new(), channel);
            let mut out = http::Request::new(());
            out.extensions_mut()
                .insert(Deadline::after(Duration::from_secs(10)));
            let sent = client.ready().await.unwrap().call(out).await.unwrap();
            Ok::<_, std::convert::Infallible>(http::Response::new(Some(sent)))
        });
    let req = http::Request::builder()
        .header("grpc-timeout", "1S")
        .body(())
        .unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    let sent = res.into_body().expect("answered DEADLINE_EXCEEDED");
    let sent = parse_grpc_timeout(sent.as_bytes()).unwrap();
    assert!(sent <= Duration::from_secs(1), "passed on {sent:?}");
}

/// Under tonic's own `transport::Server` (which alone answers Cancelled at a `grpc-timeout`),
/// the layer added with `Server::builder().layer(..)` answers DEADLINE_EXCEEDED: tonic's own
/// timeout wraps it, polls it first, and starts its sleep only after the layer's deadline.
#[tokio::test]
async fn under_tonics_own_server_the_layer_answers_deadline_exceeded() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = tower::service_fn(|req: http::Request<tonic::body::Body>| async move {
        let handler = tower::service_fn(|req: tonic::Request<Bytes>| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, Status>(tonic::Response::new(req.into_inner()))
        });
        Ok::<_, std::convert::Infallible>(tonic::server::Grpc::new(Raw).unary(handler, req).await)
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(GrpcTimeoutLayer::new())
            .serve_with_incoming(svc, tonic::transport::server::TcpIncoming::from(listener)),
    );
    let mut c = client(addr).await;
    for _ in 0..5 {
        let status = unary(&mut c, "/test.Svc/Sleep", Bytes::new(), Some(ms(20)))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    }
}
