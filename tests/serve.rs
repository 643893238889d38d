//! `server::serve` over real sockets on loopback: hyper clients (HTTP/1 and HTTP/2) and raw TCP
//! for the slow clients, each limit closing what it should, when it should, with its reason.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_timing_wheel::server::{serve, CloseReason, Serve, ServeMetrics};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A body that never ends, its frame again and again, always ready: 64 KiB frames (see
/// [`Endless::large`]) a client that never reads cannot drain.
struct Endless(Bytes);

impl Endless {
    fn large() -> Endless {
        Endless(Bytes::from(vec![b'x'; 64 * 1024]))
    }
}

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(self.0.clone()))))
    }
}

type Body = http_body_util::Either<Full<Bytes>, Endless>;

/// The `?mark=K` of each request the server has begun to handle.
static STARTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Waits (bounded) until the server handles the request marked `key`: a test that must act
/// while a request is in flight waits for it rather than sleeping and hoping.
async fn in_flight(key: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while !STARTED.lock().unwrap().iter().any(|k| k == key) {
        assert!(Instant::now() < until, "request {key} never started");
        tokio::time::sleep(ms(5)).await;
    }
}

/// `/` answers at once, `/slow/N` after N ms, `/kib/N` with N KiB, `/endless` with a body that never ends,
/// `/panic` panics, `/tunnel` (CONNECT) and an HTTP/1 CONNECT to any authority open an echo
/// tunnel; a `?mark=K` query is recorded (see [`in_flight`]).
async fn app(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    if path == "/tunnel" || req.method() == http::Method::CONNECT {
        // A CONNECT tunnel that echoes what it gets.
        tokio::spawn(async move {
            if let Ok(up) = hyper::upgrade::on(req).await {
                let mut io = TokioIo::new(up);
                let mut buf = [0; 64];
                while let Ok(n) = io.read(&mut buf).await {
                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        });
        return Ok(Response::new(http_body_util::Either::Left(Full::from(""))));
    }
    if path == "/panic" {
        panic!("the handler panics (on purpose)");
    }
    if path == "/late-body" {
        // Answers at once, with more than the socket buffers hold, and reads its request's
        // body later, from another task.
        let body = req.into_body();
        tokio::spawn(async move {
            tokio::time::sleep(ms(150)).await;
            let _ = body.collect().await;
        });
        return Ok(Response::new(http_body_util::Either::Left(Full::from(
            vec![b'x'; 64 << 20],
        ))));
    }
    if let Some(key) = req.uri().query().and_then(|q| q.strip_prefix("mark=")) {
        STARTED.lock().unwrap().push(key.to_owned());
    }
    if let Some(n) = path.strip_prefix("/slow/") {
        tokio::time::sleep(ms(n.parse().unwrap())).await;
    }
    if path == "/big" {
        // More than the socket buffers hold: hyper buffers it whole and drops the body.
        return Ok(Response::new(http_body_util::Either::Left(Full::from(
            vec![b'x'; 64 << 20],
        ))));
    }
    if let Some(n) = path.strip_prefix("/kib/") {
        return Ok(Response::new(http_body_util::Either::Left(Full::from(
            vec![b'x'; n.parse::<usize>().unwrap() << 10],
        ))));
    }
    if path == "/endless" {
        return Ok(Response::new(http_body_util::Either::Right(
            Endless::large(),
        )));
    }
    Ok(Response::new(http_body_util::Either::Left(Full::from(
        "ok",
    ))))
}

type App = tower::util::ServiceFn<
    fn(
        Request<Incoming>,
    )
        -> Pin<Box<dyn std::future::Future<Output = Result<Response<Body>, Infallible>> + Send>>,
>;

async fn server() -> Serve<App> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let f: fn(Request<Incoming>) -> Pin<Box<dyn std::future::Future<Output = _> + Send>> =
        |req| Box::pin(app(req));
    serve(listener, tower::service_fn(f))
}

/// Spawns the server; its address, metrics and task.
fn start(
    s: Serve<App>,
) -> (
    SocketAddr,
    ServeMetrics,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let addr = s.local_addr().unwrap();
    let metrics = s.metrics();
    (addr, metrics, tokio::spawn(s.into_future()))
}

/// Waits (bounded) until the server has accepted a connection.
async fn accepted(metrics: &ServeMetrics) {
    let until = Instant::now() + Duration::from_secs(10);
    while metrics.accepted() == 0 {
        assert!(Instant::now() < until, "never accepted: {metrics:?}");
        tokio::time::sleep(ms(5)).await;
    }
}

/// Waits (bounded) until `metrics` counts a close for `reason`.
async fn closed(metrics: &ServeMetrics, reason: CloseReason) {
    let until = Instant::now() + Duration::from_secs(10);
    while metrics.closed(reason) == 0 {
        assert!(Instant::now() < until, "no {reason} close: {metrics:?}");
        tokio::time::sleep(ms(5)).await;
    }
}

/// Reads until EOF or an error; how long that took.
async fn until_closed(tcp: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    read.await.expect("the server never closed the connection");
    start.elapsed()
}

/// Sends `request` on a new connection, reads its response, and waits for the server to close
/// the connection: the response.
async fn answered_then_closed(addr: SocketAddr, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let res = read_response(&mut tcp).await;
    until_closed(&mut tcp).await;
    res
}

/// Reads one whole `Content-Length: 2` response.
async fn read_response(tcp: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0; 1024];
    while !out.ends_with(b"\r\n\r\nok") {
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(out).unwrap()
}

/// Connects over HTTP/2 (prior knowledge), drives the connection in a task, and sends one
/// GET for `uri`: the request handle (keep it: dropping it lets the client close the
/// connection), the response, and the connection's task (it ends when the connection closes).
async fn h2_get(
    addr: SocketAddr,
    uri: &str,
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    Response<Incoming>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let res = send
        .send_request(Request::get(uri).body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    (send, res, conn)
}

#[tokio::test]
async fn http1_and_http2_over_one_listener() {
    let (addr, metrics, task) = start(server().await);
    // HTTP/1.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let res = send
        .send_request(Request::get("/").body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    // HTTP/2, prior knowledge.
    let (_send, res, _conn) = h2_get(addr, "http://x/").await;
    assert_eq!(res.version(), http::Version::HTTP_2);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    assert_eq!(metrics.accepted(), 2);
    task.abort();
}

/// Slowloris: a head trickled a byte at a time is cut at the header-read limit, not extended
/// by each byte, and long before the keep-alive limit.
#[tokio::test]
async fn partial_head_is_cut_at_the_header_read_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(150))
        .keep_alive_timeout(Duration::from_secs(5));
    let (addr, metrics, task) = start(s);
    // From before the connect: the limit runs from the accept, which may come first.
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // A byte every 50 ms, a third of the limit: the whole head takes 3.65 s, so a limit that
    // each byte put off would not cut it before the trickle ends, past the bound below.
    let head = b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: 1234567890123456789012345678901234567890";
    let mut sent = 0;
    let trickle = async {
        for b in head {
            if metrics.closed(CloseReason::HeaderRead) > 0 || tcp.write_all(&[*b]).await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(ms(50)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), trickle).await;
    until_closed(&mut tcp).await;
    let took = start.elapsed();
    assert!(
        sent < head.len(),
        "the whole head went out: the limit never cut it"
    );
    assert!(took >= ms(150), "cut too early: {took:?}");
    assert!(took < Duration::from_secs(3), "cut too late: {took:?}");
    closed(&metrics, CloseReason::HeaderRead).await;
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 0);
    task.abort();
}

/// A new connection that sends nothing has no request in flight: the keep-alive limit closes
/// it when that limit is the shorter, whatever the header-read limit.
#[tokio::test]
async fn silent_new_connection_is_closed_at_a_shorter_keep_alive_limit() {
    let s = server()
        .await
        .header_read_timeout(Duration::from_secs(5))
        .keep_alive_timeout(ms(200));
    let (addr, metrics, task) = start(s);
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut tcp).await;
    let took = start.elapsed();
    assert!(took >= ms(200), "closed too early: {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "held past the keep-alive limit: {took:?}"
    );
    closed(&metrics, CloseReason::KeepAlive).await;
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 0);
    task.abort();
}

/// Once its first head has begun, a new connection is bounded by the header-read limit alone,
/// as any head is: a shorter keep-alive limit does not cut it.
#[tokio::test]
async fn first_head_begun_is_bounded_by_the_header_read_limit_alone() {
    let s = server()
        .await
        .header_read_timeout(ms(1500))
        .keep_alive_timeout(ms(400));
    let (addr, metrics, task) = start(s);
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost").await.unwrap();
    until_closed(&mut tcp).await;
    let took = start.elapsed();
    assert!(
        took >= ms(1500),
        "cut before the header-read limit: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "cut too late: {took:?}");
    closed(&metrics, CloseReason::HeaderRead).await;
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 0);
    task.abort();
}

/// Half a head pipelined behind a request (sent in the same write) cannot hold the connection:
/// the server cannot tell it from an idle wait (hyper has it buffered), so the keep-alive limit
/// closes it, as documented on `header_read_timeout`.
#[tokio::test]
async fn pipelined_partial_head_is_bounded_by_the_keep_alive_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(100))
        .keep_alive_timeout(ms(300));
    let (addr, metrics, task) = start(s);
    answered_then_closed(
        addr,
        b"GET / HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost",
    )
    .await;
    closed(&metrics, CloseReason::KeepAlive).await;
    task.abort();
}

/// A keep-alive connection waiting for its next request is closed at the keep-alive limit,
/// not at the (shorter) header-read limit; and a head begun then gets the header-read limit.
#[tokio::test]
async fn idle_keep_alive_is_closed_at_the_keep_alive_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(100))
        .keep_alive_timeout(ms(1_500));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // Two requests apart by more than the header-read limit: the connection stays (a stall
    // of over a second would close it, at the keep-alive limit).
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tokio::time::sleep(ms(250)).await;
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    let idle = until_closed(&mut tcp).await;
    // The server's clock started before the client had read the response: a loose lower
    // bound (the metrics below tell keep-alive from header-read).
    assert!(
        idle >= ms(1_000),
        "closed before the keep-alive limit: {idle:?}"
    );
    assert!(idle < Duration::from_secs(4), "closed too late: {idle:?}");
    closed(&metrics, CloseReason::KeepAlive).await;
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 0, "{metrics:?}");
    task.abort();
}

/// A request in flight is not cut by the keep-alive limit.
#[tokio::test]
async fn keep_alive_waits_for_the_request_in_flight() {
    let s = server().await.keep_alive_timeout(ms(100));
    let (addr, metrics, task) = start(s);
    let res = answered_then_closed(addr, b"GET /slow/300 HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    closed(&metrics, CloseReason::KeepAlive).await;
    task.abort();
}

/// A service that is not ready (backpressure: a concurrency limit, a full `Buffer`) until
/// `ready_at`, then answers "ok".
struct NotReadyUntil {
    ready_at: Instant,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Clone for NotReadyUntil {
    fn clone(&self) -> Self {
        NotReadyUntil {
            ready_at: self.ready_at,
            wait: None,
        }
    }
}

impl tower::Service<Request<Incoming>> for NotReadyUntil {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Full<Bytes>>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        let at = self.ready_at;
        let wait = self
            .wait
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        std::task::ready!(wait.as_mut().poll(cx));
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::from("ok"))))
    }
}

/// Sends a whole request head at once to a service ready only 600 ms later, under `limits`:
/// the response (the request must not be cut) and the metrics.
async fn request_to_a_service_not_ready(
    limits: impl FnOnce(Serve<NotReadyUntil>) -> Serve<NotReadyUntil>,
) -> (String, ServeMetrics) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service = NotReadyUntil {
        ready_at: Instant::now() + ms(600),
        wait: None,
    };
    let s = limits(serve(listener, service));
    let addr = s.local_addr().unwrap();
    let metrics = s.metrics();
    let task = tokio::spawn(s.into_future());
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(10), read_response(&mut tcp))
        .await
        .expect("no response");
    task.abort();
    (res, metrics)
}

/// A request whose head has arrived is in flight while it waits for the service to be ready:
/// the keep-alive limit does not cut it.
#[tokio::test]
async fn keep_alive_does_not_cut_a_request_waiting_for_the_service() {
    let (res, metrics) = request_to_a_service_not_ready(|s| s.keep_alive_timeout(ms(200))).await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 0, "{metrics:?}");
}

/// Nor does the header-read limit: the head arrived in full.
#[tokio::test]
async fn header_read_does_not_cut_a_request_waiting_for_the_service() {
    let (res, metrics) = request_to_a_service_not_ready(|s| s.header_read_timeout(ms(200))).await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 0, "{metrics:?}");
}

/// A client that asks for an endless response and never reads it cannot hold the connection
/// past the idle limit.
#[tokio::test]
async fn a_client_that_never_reads_is_cut_at_the_idle_limit() {
    let s = server()
        .await
        .idle_timeout(ms(200))
        .keep_alive_timeout(Duration::from_secs(30));
    let (addr, metrics, task) = start(s);
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    closed(&metrics, CloseReason::Idle).await;
    // At the limit once the socket's buffers are full: well under a second, not at the
    // helper's 10 s.
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "cut after {took:?}");
    assert_eq!(metrics.active(), 0);
    drop(tcp);
    task.abort();
}

/// A response hyper has buffered whole but the client does not read is still in flight: the
/// keep-alive limit does not apply, the idle limit does.
#[tokio::test]
async fn an_unread_buffered_response_is_in_flight_until_written() {
    let s = server()
        .await
        .keep_alive_timeout(ms(100))
        .idle_timeout(ms(400));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    closed(&metrics, CloseReason::Idle).await;
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 0, "{metrics:?}");
    drop(tcp);
    task.abort();
}

/// A next head sent whole while a long response still goes out waits for that response:
/// hyper reads it ahead while it flushes, and parses it only after, so its header-read limit
/// counts from the response's last byte written, not from its arrival (the limit used to cut
/// the response partway), with the keep-alive limit set or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_head_sent_during_a_long_response_does_not_cut_it() {
    for keep_alive in [false, true] {
        let mut s = server().await.header_read_timeout(ms(100));
        if keep_alive {
            s = s.keep_alive_timeout(Duration::from_secs(5));
        }
        let (addr, metrics, task) = start(s);
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /kib/16384 HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0; 64 << 10];
        let mut got = tcp.read(&mut buf).await.unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut tail = Vec::new();
        let until = Instant::now() + Duration::from_secs(20);
        let second = loop {
            assert!(
                Instant::now() < until,
                "keep-alive {keep_alive}: {got} bytes"
            );
            // A steady reader: the 16 MiB take the server several header-read limits to send.
            tokio::time::sleep(ms(3)).await;
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break false,
                Ok(n) => {
                    got += n;
                    tail.extend_from_slice(&buf[..n]);
                    tail.drain(..tail.len().saturating_sub(64));
                    if tail.ends_with(b"\r\n\r\nok") {
                        break true;
                    }
                }
            }
        };
        assert!(
            second && got > 16 << 20,
            "keep-alive {keep_alive}: {got} bytes, the next response {second}; {metrics:?}"
        );
        assert_eq!(metrics.closed(CloseReason::HeaderRead), 0, "{metrics:?}");
        task.abort();
    }
}

/// A client that sends a request whose handler reads its (1-byte) body after answering with
/// more than the socket buffers hold, then never reads and writes `writes`, one every 100 ms:
/// hyper, its request over, reads each of them on its own while the response waits to go
/// out, and each read keeps the idle limit from firing. How long the connection lasted (none
/// is over 2 s if a limit cut it), and the server's metrics.
async fn trickle_behind_an_unread_response<'a>(
    writes: impl IntoIterator<Item = &'a [u8]>,
) -> (Duration, ServeMetrics) {
    let s = server()
        .await
        .header_read_timeout(ms(200))
        .keep_alive_timeout(ms(300))
        .idle_timeout(ms(400));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"POST /late-body HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(ms(100)).await;
    tcp.write_all(b"x").await.unwrap(); // the body, after the response was buffered
    tokio::time::sleep(ms(100)).await;
    let start = Instant::now();
    for bytes in writes {
        if metrics.active() == 0 || tcp.write_all(bytes).await.is_err() {
            break;
        }
        tokio::time::sleep(ms(100)).await;
    }
    assert_eq!(metrics.active(), 0, "still open: {metrics:?}");
    task.abort();
    (start.elapsed(), metrics)
}

/// A next head trickled behind a response the client does not read is cut at the
/// header-read limit, which may not wait for that response there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_trickled_behind_an_unread_response_is_cut_at_the_header_read_limit() {
    let head = b"GET / HTTP/1.1\r\nx-trickle: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let (lasted, metrics) = trickle_behind_an_unread_response(head.chunks(1)).await;
    assert!(lasted < Duration::from_secs(2), "{lasted:?}");
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 1, "{metrics:?}");
}

/// Empty lines trickled there (no head) are cut too: at the header-read limit the late body's
/// byte started (it cannot be told from a head), else at the keep-alive limit; neither may
/// wait for that response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_lines_trickled_behind_an_unread_response_are_cut() {
    let lines = std::iter::repeat_n(&b"\r\n"[..], 40);
    let (lasted, metrics) = trickle_behind_an_unread_response(lines).await;
    assert!(lasted < Duration::from_secs(2), "{lasted:?}");
    let cut = metrics.closed(CloseReason::HeaderRead) + metrics.closed(CloseReason::KeepAlive);
    assert_eq!(cut, 1, "{metrics:?}");
}

/// A request whose body its handler reads after answering, sent whole, does not get its
/// response cut while the client reads it promptly: hyper reads that body while the
/// response goes out, and the header-read limit (which cannot tell it from a next head)
/// counts from the last time the response's write stopped waiting. (A client that drains
/// the send buffer more slowly than the limit can be cut there, as documented: about 4 MB
/// arrive at 64 KiB every 10 ms under this 100 ms limit.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_read_late_does_not_cut_a_response_read_promptly() {
    let s = server()
        .await
        .header_read_timeout(ms(100))
        .keep_alive_timeout(Duration::from_secs(5))
        .idle_timeout(Duration::from_secs(5));
    let (addr, metrics, task) = start(s);
    let (mut rd, mut wr) = TcpStream::connect(addr).await.unwrap().into_split();
    let body = 256 << 10;
    let mut request =
        format!("POST /late-body HTTP/1.1\r\nhost: x\r\ncontent-length: {body}\r\n\r\n")
            .into_bytes();
    request.resize(request.len() + body, b'b');
    let writer = tokio::spawn(async move {
        wr.write_all(&request).await.unwrap();
        wr
    });
    // The response: its 64 MiB body, after a head of more than 40 bytes (status line and
    // content-length alone).
    let whole = (64 << 20) + 40;
    let mut buf = vec![0; 64 << 10];
    let mut got = 0;
    let until = Instant::now() + Duration::from_secs(30);
    while got < whole {
        assert!(Instant::now() < until, "{got} bytes; {metrics:?}");
        tokio::time::sleep(ms(2)).await; // a prompt reader
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    // Whole (the body's bytes, which cannot be told from a next head, may close the
    // connection at the header-read limit after it, as documented).
    assert!(got >= whole, "{got} bytes; {metrics:?}");
    drop(writer.await.unwrap());
    task.abort();
}

/// A silent connection (no byte at all) is cut by the idle limit too.
#[tokio::test]
async fn a_silent_client_is_cut_at_the_idle_limit() {
    let s = server().await.idle_timeout(ms(100));
    let (addr, metrics, task) = start(s);
    // From before the connect: the idle clock starts at the accept, which may come first.
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut tcp).await;
    let took = start.elapsed();
    assert!(took >= ms(100), "{took:?}");
    assert!(
        took < Duration::from_secs(3),
        "cut long after the limit: {took:?}"
    );
    closed(&metrics, CloseReason::Idle).await;
    task.abort();
}

/// A keep-alive connection that goes quiet after a request is cut at the idle limit, and
/// counted so: hyper ends an HTTP/1 connection whose read fails between requests as if the
/// client had closed it, which must not make the close `Completed`.
#[tokio::test]
async fn a_keep_alive_connection_gone_quiet_is_counted_idle() {
    let s = server().await.idle_timeout(ms(200));
    let (addr, metrics, task) = start(s);
    answered_then_closed(addr, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
    closed(&metrics, CloseReason::Idle).await;
    assert_eq!(metrics.closed(CloseReason::Completed), 0, "{metrics:?}");
    task.abort();
}

/// At its maximum age, an HTTP/1 connection answers its request in flight with
/// `Connection: close` and closes.
#[tokio::test]
async fn max_age_drains_http1_with_connection_close() {
    let s = server().await.max_connection_age(ms(100));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /slow/300 HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let res = read_response(&mut tcp).await;
    assert!(
        res.to_ascii_lowercase().contains("connection: close"),
        "{res}"
    );
    until_closed(&mut tcp).await;
    closed(&metrics, CloseReason::MaxAge).await;
    task.abort();
}

/// The maximum age, and the shutdown timeout counted from it, cut an HTTP/1 response streamed
/// as fast as the client reads it (small frames, always ready: hyper writes them for as long
/// as the client reads, spending its task's whole cooperative budget at every poll): the
/// connection's limits do not wait for budget that hyper, polled first in the same task,
/// spends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_age_cuts_a_response_streamed_as_fast_as_it_is_read() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app = tower::service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Endless(Bytes::from_static(
            b"0123456789abcdef",
        ))))
    });
    let s = serve(listener, app)
        .max_connection_age(ms(300))
        .shutdown_timeout(ms(300));
    let addr = s.local_addr().unwrap();
    let metrics = s.metrics();
    let task = tokio::spawn(s.into_future());
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let start = Instant::now();
    let mut buf = vec![0; 1 << 20];
    let mut read = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => read += n,
            Err(_) => panic!("the response stalled: {metrics:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still streaming after 5 s ({read} bytes), limits 300 + 300 ms: {metrics:?}"
        );
    }
    assert!(read > 0, "nothing was streamed");
    closed(&metrics, CloseReason::ShutdownTimeout).await;
    task.abort();
}

/// At its maximum age, an HTTP/2 connection gets GOAWAY: the stream in flight finishes, then the
/// connection closes.
#[tokio::test]
async fn max_age_drains_http2_with_goaway() {
    let s = server().await.max_connection_age(ms(100));
    let (addr, metrics, task) = start(s);
    let (_send, res, conn) = h2_get(addr, "http://x/slow/300").await;
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("not closed")
        .unwrap()
        .unwrap();
    closed(&metrics, CloseReason::MaxAge).await;
    task.abort();
}

/// HTTP/2: an idle connection is closed at the keep-alive limit (GOAWAY); the header-read limit
/// does not apply.
#[tokio::test]
async fn http2_idle_connection_gets_keep_alive_not_header_read() {
    let s = server()
        .await
        .header_read_timeout(ms(50))
        .keep_alive_timeout(ms(300));
    let (addr, metrics, task) = start(s);
    let (_send, res, conn) = h2_get(addr, "http://x/slow/100").await;
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    let idle = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("not closed")
        .unwrap()
        .unwrap();
    // The server's clock started before the client had the body: a loose lower bound.
    assert!(idle.elapsed() >= ms(150), "{:?}", idle.elapsed());
    closed(&metrics, CloseReason::KeepAlive).await;
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 0);
    task.abort();
}

/// HTTP/2: a response whose body hyper has handed to h2 whole, but which flow control lets out
/// only as a slow client reads it, is still in flight: the keep-alive limit neither drains
/// nor cuts the connection under it.
#[tokio::test]
async fn http2_keep_alive_waits_for_a_response_held_by_flow_control() {
    let s = server().await.keep_alive_timeout(ms(300));
    let (addr, metrics, task) = start(s);
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let res = send
        .send_request(
            Request::get("http://x/kib/512")
                .body(Empty::<Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    // A slow reader: 16 KiB frames, 40 ms apart, about 1.3 s in all.
    let mut body = res.into_body();
    let reader = tokio::spawn(async move {
        let mut got = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("cut after {got} bytes: {e}"))?;
            got += frame.into_data().map_or(0, |d| d.len());
            tokio::time::sleep(ms(40)).await;
        }
        Ok::<_, String>(got)
    });
    // Well past the keep-alive limit, the response still going out: not drained, the
    // connection takes a new stream (a drain's GOAWAY would refuse it).
    tokio::time::sleep(ms(700)).await;
    let another = Request::get("http://x/")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(5), send.send_request(another))
        .await
        .expect("no answer to a new stream")
        .unwrap_or_else(|e| panic!("a new stream refused under the response: {e}; {metrics:?}"));
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    let got = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the slow reader never finished")
        .unwrap();
    assert_eq!(got, Ok(512 << 10), "{metrics:?}");
    drop(send);
    let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
    task.abort();
}

/// HTTP/2 frame types.
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;

/// Sends the HTTP/2 client preface and an empty SETTINGS frame, as a raw client opens.
async fn h2_preface(tcp: &mut TcpStream) {
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tcp.write_all(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])
        .await
        .unwrap();
}

/// A raw HTTP/2 client that opens no stream: it sends the preface and empty SETTINGS, acks the
/// server's SETTINGS (and its PINGs, if `ack_pings`), and returns the types of the frames it
/// received until the server closed the connection.
async fn h2_frames_until_closed(addr: SocketAddr, ack_pings: bool) -> Vec<u8> {
    let (frames, _) = h2_timed_frames_until_closed(addr, ack_pings).await;
    frames.into_iter().map(|(ty, _)| ty).collect()
}

/// As [`h2_frames_until_closed`], with when each frame and the close arrived, counted from
/// just before the connect.
async fn h2_timed_frames_until_closed(
    addr: SocketAddr,
    ack_pings: bool,
) -> (Vec<(u8, Duration)>, Duration) {
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    h2_preface(&mut tcp).await;
    let mut types = Vec::new();
    let mut buf = Vec::new();
    let read = async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            // Whole frames: a 9-byte header (24-bit length, type, flags, stream), then payload.
            while buf.len() >= 9 {
                let len =
                    usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let (ty, ack) = (buf[3], buf[4] & 1 == 1);
                types.push((ty, start.elapsed()));
                if ty == SETTINGS && !ack {
                    let _ = tcp.write_all(&[0, 0, 0, SETTINGS, 1, 0, 0, 0, 0]).await;
                }
                if ty == PING && !ack && ack_pings {
                    let mut pong = vec![0, 0, 8, PING, 1, 0, 0, 0, 0];
                    pong.extend_from_slice(&buf[9..9 + len]);
                    let _ = tcp.write_all(&pong).await;
                }
                buf.drain(..9 + len);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the server never closed the HTTP/2 connection");
    (types, start.elapsed())
}

/// HTTP/2 is told from HTTP/1 with the keep-alive limit alone (no header-read limit): an idle
/// HTTP/2 connection gets its GOAWAY, not a bare close.
#[tokio::test]
async fn http2_keep_alive_sends_goaway_without_a_header_read_limit() {
    let s = server().await.keep_alive_timeout(ms(200));
    let (addr, metrics, task) = start(s);
    let frames = h2_frames_until_closed(addr, true).await;
    assert!(frames.contains(&GOAWAY), "no GOAWAY: frames {frames:?}");
    closed(&metrics, CloseReason::KeepAlive).await;
    task.abort();
}

/// The GOAWAY sent at the keep-alive limit starts a drain with a keep-alive period of its own
/// (counted from the drain's start, not from when the connection fell idle): a client that
/// never acknowledges it is closed one more period after the GOAWAY, not at once.
#[tokio::test]
async fn http2_keep_alive_goaway_gets_a_keep_alive_period_of_its_own() {
    let limit = ms(300);
    let s = server().await.keep_alive_timeout(limit);
    let (addr, metrics, task) = start(s);
    let (frames, closed_at) = h2_timed_frames_until_closed(addr, false).await;
    let goaway_at = frames
        .iter()
        .find(|(ty, _)| *ty == GOAWAY)
        .unwrap_or_else(|| panic!("no GOAWAY: frames {frames:?}"))
        .1;
    // Idle from the accept, which the client's clock starts just before.
    assert!(
        goaway_at >= limit * 9 / 10 && goaway_at < limit + Duration::from_secs(3),
        "GOAWAY not at the keep-alive limit: {goaway_at:?}"
    );
    let held = closed_at - goaway_at;
    assert!(
        held >= limit * 6 / 10,
        "closed {held:?} after the GOAWAY, not a keep-alive period"
    );
    closed(&metrics, CloseReason::KeepAlive).await;
    assert_eq!(metrics.closed(CloseReason::Error), 0, "{metrics:?}");
    task.abort();
}

/// On the signal: the listener closes (a new connection is refused), the request in flight
/// finishes, and the server resolves.
#[tokio::test]
async fn graceful_shutdown_finishes_requests_and_refuses_new_connections() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server().await.with_graceful_shutdown(async move {
        let _ = stopped.await;
    });
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /slow/300?mark=graceful HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    in_flight("graceful").await;
    stop.send(()).unwrap();
    tokio::time::sleep(ms(50)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "still listening during the drain"
    );
    let res = read_response(&mut tcp).await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    assert_eq!(metrics.closed(CloseReason::Shutdown), 1, "{metrics:?}");
    assert!(TcpStream::connect(addr).await.is_err());
}

/// Slowloris against a graceful shutdown without a shutdown timeout: a request head begun
/// before the signal still has the header-read limit, so it cannot hold the drain open.
#[tokio::test]
async fn graceful_shutdown_still_cuts_a_partial_head_at_the_header_read_limit() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server()
        .await
        .header_read_timeout(ms(300))
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
    let (addr, metrics, task) = start(s);
    let started = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n") // never finished
        .await
        .unwrap();
    accepted(&metrics).await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the partial head holds the drain open")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= ms(300),
        "cut before the header-read limit: {took:?}"
    );
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 1, "{metrics:?}");
    until_closed(&mut tcp).await;
}

/// The drain at the maximum age does not lift the header-read limit either.
#[tokio::test]
async fn max_age_drain_still_cuts_a_partial_head_at_the_header_read_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(400))
        .max_connection_age(ms(100));
    let (addr, metrics, task) = start(s);
    let started = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n") // never finished
        .await
        .unwrap();
    until_closed(&mut tcp).await;
    let took = started.elapsed();
    assert!(
        took >= ms(400),
        "cut before the header-read limit: {took:?}"
    );
    closed(&metrics, CloseReason::HeaderRead).await;
    assert_eq!(metrics.closed(CloseReason::MaxAge), 0, "{metrics:?}");
    task.abort();
}

/// An HTTP/2 client that never answers the GOAWAY's ping cannot hold a graceful shutdown open
/// (without a shutdown timeout): with nothing in flight, the drain is closed one keep-alive
/// period after it began.
#[tokio::test]
async fn http2_drain_never_acknowledged_ends_at_the_keep_alive_limit() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server()
        .await
        .keep_alive_timeout(ms(300))
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
    let (addr, metrics, task) = start(s);
    let client = tokio::spawn(h2_frames_until_closed(addr, false));
    accepted(&metrics).await;
    stop.send(()).unwrap();
    let signalled = Instant::now();
    let frames = client.await.unwrap();
    assert!(frames.contains(&GOAWAY), "no GOAWAY: frames {frames:?}");
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    let took = signalled.elapsed();
    assert!(took >= ms(250), "the drain was cut early: {took:?}");
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 1, "{metrics:?}");
}

/// A connection that has sent nothing yet, closed by the graceful shutdown, counts as closed by
/// the shutdown, not as an error (hyper-util ends its wait for the first bytes with an error).
#[tokio::test]
async fn a_silent_connection_closed_by_the_graceful_shutdown_counts_as_shutdown() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server().await.with_graceful_shutdown(async move {
        let _ = stopped.await;
    });
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    accepted(&metrics).await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    until_closed(&mut tcp).await;
    assert_eq!(metrics.closed(CloseReason::Shutdown), 1, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Error), 0, "{metrics:?}");
}

/// Likewise at the maximum age: a connection that has sent nothing counts as `MaxAge`.
#[tokio::test]
async fn a_silent_connection_at_its_maximum_age_counts_as_max_age() {
    let s = server().await.max_connection_age(ms(100));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut tcp).await;
    closed(&metrics, CloseReason::MaxAge).await;
    assert_eq!(metrics.closed(CloseReason::Error), 0, "{metrics:?}");
    task.abort();
}

/// The shutdown timeout cuts what is still open, counted from the signal.
#[tokio::test]
async fn shutdown_timeout_cuts_the_rest() {
    shutdown_timeout_cuts_a_request_on(|s| s, "cut", ms(100), async {}).await;
}

/// Starts the server `setup` makes of the test server, a request that takes a minute (marked
/// `mark`), then a graceful shutdown with a `limit`, with `during_the_drain` run after the
/// signal: the limit cuts the request, and the server resolves without a panic.
async fn shutdown_timeout_cuts_a_request_on(
    setup: impl FnOnce(Serve<App>) -> Serve<App>,
    mark: &str,
    limit: Duration,
    during_the_drain: impl std::future::Future<Output = ()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = setup(server().await)
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .shutdown_timeout(limit);
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(format!("GET /slow/60000?mark={mark} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    in_flight(mark).await;
    let started = Instant::now();
    stop.send(()).unwrap();
    during_the_drain.await;
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .expect("the server panicked")
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= limit && took < Duration::from_secs(5),
        "cut after {took:?}"
    );
    assert_eq!(
        metrics.closed(CloseReason::ShutdownTimeout),
        1,
        "{metrics:?}"
    );
    until_closed(&mut tcp).await;
}

/// The shutdown timeout holds when the runtime's default timer shuts down during the drain
/// (which resolves the sleeps on it): it goes on on the runtime's new default timer, rather
/// than cutting the requests still in flight at once.
#[tokio::test]
async fn shutdown_timeout_holds_after_the_default_timer_shuts_down() {
    let shut_down_mid_drain = async {
        tokio::time::sleep(ms(50)).await; // the server now waits for its shutdown timeout
        tokio_timing_wheel::Timer::current().shutdown();
    };
    shutdown_timeout_cuts_a_request_on(|s| s, "cutafter", ms(600), shut_down_mid_drain).await;
}

/// Limits of `Duration::MAX` mean "never": no deadline overflows. The requests are answered
/// (an HTTP/2 keep-alive interval of `Duration::MAX` sends no pings rather than overflowing
/// hyper's ping deadline), the idle connections stay open, and the shutdown drains them.
#[tokio::test]
async fn limits_of_duration_max_never_expire() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server()
        .await
        .header_read_timeout(Duration::MAX)
        .keep_alive_timeout(Duration::MAX)
        .max_connection_age(Duration::MAX)
        .http2_keep_alive_interval(Duration::MAX)
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .shutdown_timeout(Duration::MAX);
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let res = read_response(&mut tcp).await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res}");
    let (_send, res, conn) = h2_get(addr, "http://x/").await;
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    // Idle a while: the ping timer is scheduled once the connection has nothing to do.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(metrics.active(), 2, "{metrics:?}");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    until_closed(&mut tcp).await;
    tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("the HTTP/2 connection was not closed")
        .unwrap()
        .unwrap();
    assert_eq!(metrics.closed(CloseReason::Shutdown), 2, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Error), 0, "{metrics:?}");
}

/// A handler that panics (under HTTP/1, hyper polls it on the connection's task, which it
/// unwinds) still has its connection counted closed, as an error: `active()` is back to zero.
#[tokio::test]
async fn a_panicking_handler_still_counts_its_connection_closed() {
    let (addr, metrics, task) = start(server().await);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /panic HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    until_closed(&mut tcp).await;
    closed(&metrics, CloseReason::Error).await;
    assert_eq!(metrics.accepted(), 1);
    assert_eq!(metrics.active(), 0, "{metrics:?}");
    task.abort();
}

/// Connections whose tasks are dropped with their runtime are counted closed (as errors):
/// the counters never show a connection open that no task serves.
#[test]
fn connections_dropped_with_their_runtime_are_counted_closed() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (metrics, tcp) = rt.block_on(async {
        let (addr, metrics, _task) = start(server().await);
        let tcp = TcpStream::connect(addr).await.unwrap();
        accepted(&metrics).await;
        (metrics, tcp)
    });
    assert_eq!(metrics.active(), 1, "{metrics:?}");
    drop(rt);
    assert_eq!(metrics.active(), 0, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Error), 1, "{metrics:?}");
    drop(tcp);
}

#[tokio::test]
#[should_panic(expected = "non-zero")]
async fn a_zero_limit_is_rejected() {
    let _ = server().await.idle_timeout(Duration::ZERO);
}

#[test]
fn serve_is_send_and_static() {
    fn spawnable<T: IntoFuture + Send + 'static>(_: Option<T>)
    where
        T::IntoFuture: Send + 'static,
    {
    }
    spawnable::<Serve<App>>(None);
}

/// How many panics of a full timer this process has seen (any thread), counted by a panic
/// hook installed once; other panics go to the previous hook as before.
fn full_timer_panics() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.to_string().contains("timer is full") {
                COUNT.fetch_add(1, SeqCst);
            }
            previous(info);
        }));
    });
    COUNT.load(SeqCst)
}

/// On an explicit timer with `max_pending` that is full, a server with the limit `limit` sets
/// closes a new connection at once (counted as an error), and its task does not panic.
async fn a_full_timer_closes_a_connection_limited_by(limit: fn(Serve<App>) -> Serve<App>) {
    let before = full_timer_panics();
    let timer = tokio_timing_wheel::Timer::builder()
        .max_pending(1)
        .build()
        .unwrap();
    let _held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let (addr, metrics, task) = start(limit(server().await.timer(timer.clone())));
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let took = until_closed(&mut tcp).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    closed(&metrics, CloseReason::Error).await;
    assert_eq!(
        full_timer_panics(),
        before,
        "the connection's task panicked"
    );
    task.abort();
}

/// A connection whose header-read limit needs a timer a full timer cannot give is closed.
#[tokio::test]
async fn a_full_timer_closes_the_connection_without_a_panic() {
    a_full_timer_closes_a_connection_limited_by(|s| s.header_read_timeout(Duration::from_secs(5)))
        .await;
}

/// A connection idle limit on a full timer fails the connection's I/O (closing it) rather
/// than panicking in its task.
#[tokio::test]
async fn a_full_timer_fails_the_idle_limit_without_a_panic() {
    a_full_timer_closes_a_connection_limited_by(|s| s.idle_timeout(Duration::from_secs(5))).await;
}

/// The shutdown timeout holds on a full explicit timer (the server's own timer falls back to
/// the runtime's default one): the server neither panics nor waits for ever.
#[tokio::test]
async fn shutdown_timeout_on_a_full_timer_still_cuts_the_rest() {
    let timer = tokio_timing_wheel::Timer::builder()
        .max_pending(1)
        .build()
        .unwrap();
    let _held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    shutdown_timeout_cuts_a_request_on(|s| s.timer(timer.clone()), "fullcut", ms(100), async {})
        .await;
}

/// CPU time this thread has used (user and system), from `/proc` (Linux), in clock ticks.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // After the command's closing parenthesis: state is field 3; utime, stime are 14, 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Once the runtime's default timer is shut down (which resolves the sleeps on it), a
/// connection waiting on a limit goes on waiting, on the runtime's new default timer, rather
/// than polling its resolved sleep in a busy loop until the limit; and the limit still holds.
#[tokio::test]
async fn a_connection_waits_calmly_after_the_default_timer_shuts_down() {
    let s = server().await.keep_alive_timeout(Duration::from_secs(1));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tokio::time::sleep(ms(20)).await; // the connection now waits for its keep-alive limit
    let started = Instant::now();
    tokio_timing_wheel::Timer::current().shutdown();
    let before = thread_cpu_ticks();
    tokio::time::sleep(ms(300)).await;
    let spent = thread_cpu_ticks() - before;
    assert!(
        spent < 10,
        "the connection's task spun: {spent} ticks of CPU in 300 ms"
    );
    until_closed(&mut tcp).await;
    let idle = started.elapsed();
    assert!(
        idle >= ms(600),
        "closed before the keep-alive limit: {idle:?}"
    );
    closed(&metrics, CloseReason::KeepAlive).await;
    task.abort();
}

/// On an explicit timer that is shut down, a connection waiting on a limit is closed (its
/// limits cannot be timed any more), rather than polling its resolved sleep in a busy loop.
#[tokio::test]
async fn a_connection_of_a_shut_down_explicit_timer_is_closed() {
    let timer = tokio_timing_wheel::Timer::builder().build().unwrap();
    let s = server()
        .await
        .timer(timer.clone())
        .keep_alive_timeout(Duration::from_secs(5));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tokio::time::sleep(ms(20)).await;
    timer.shutdown();
    let took = until_closed(&mut tcp).await;
    assert!(took < Duration::from_secs(2), "{took:?}");
    closed(&metrics, CloseReason::Error).await;
    task.abort();
}

/// Eight pings through an echo tunnel, 75 ms apart (600 ms in all: past a 150 ms limit), each
/// echoed within 5 s.
async fn echo_through_the_tunnel<I>(io: &mut I, metrics: &ServeMetrics)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    for _ in 0..8 {
        io.write_all(b"ping").await.unwrap();
        let mut buf = [0; 4];
        tokio::time::timeout(Duration::from_secs(5), io.read_exact(&mut buf))
            .await
            .expect("no echo")
            .unwrap_or_else(|e| panic!("tunnel cut: {e}; {metrics:?}"));
        assert_eq!(&buf, b"ping");
        tokio::time::sleep(ms(75)).await;
    }
}

/// As with `axum::serve`, HTTP/2's extended CONNECT (RFC 8441, WebSockets over HTTP/2) is
/// enabled: a CONNECT with a `:protocol` reaches the service, and its tunnel, busy, is not
/// taken for an idle connection by the keep-alive limit.
#[tokio::test]
async fn http2_extended_connect_tunnel_outlives_the_keep_alive_limit() {
    let s = server().await.keep_alive_timeout(ms(150));
    let (addr, metrics, task) = start(s);
    let (mut send, res, _conn) = h2_get(addr, "http://x/").await;
    assert_eq!(res.status(), StatusCode::OK);
    let mut req = Request::connect("http://x/tunnel")
        .body(Empty::<Bytes>::new())
        .unwrap();
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    let res = send
        .send_request(req)
        .await
        .expect("extended CONNECT refused");
    assert_eq!(res.status(), StatusCode::OK);
    let mut io = TokioIo::new(hyper::upgrade::on(res).await.unwrap());
    echo_through_the_tunnel(&mut io, &metrics).await;
    assert_eq!(metrics.active(), 1, "{metrics:?}");
    task.abort();
}

/// An HTTP/1 CONNECT answered with success is an upgrade: counted `Completed` at its answer,
/// its tunnel, busy, goes on past the keep-alive limit, which no longer applies to it.
#[tokio::test]
async fn http1_connect_tunnel_outlives_the_keep_alive_limit() {
    let s = server().await.keep_alive_timeout(ms(150));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"CONNECT x:443 HTTP/1.1\r\nhost: x:443\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            tcp.read(&mut byte).await.unwrap(),
            1,
            "closed before the answer"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    echo_through_the_tunnel(&mut tcp, &metrics).await;
    closed(&metrics, CloseReason::Completed).await;
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 0, "{metrics:?}");
    assert_eq!(metrics.active(), 0, "{metrics:?}");
    task.abort();
}

/// A connection whose HTTP/2 tunnel has ended stays in flight, and the server's HTTP/2
/// keep-alive pings (which its client answers) are reads and writes: neither the keep-alive
/// nor the idle limit closes it. Its maximum age still does, with the shutdown timeout.
#[tokio::test]
async fn http2_connection_after_a_tunnel_is_closed_at_its_maximum_age_despite_pings() {
    let s = server()
        .await
        .keep_alive_timeout(ms(150))
        .idle_timeout(ms(300))
        .http2_keep_alive_interval(ms(100))
        .max_connection_age(ms(1_000))
        .shutdown_timeout(ms(300));
    let (addr, metrics, task) = start(s);
    let start = Instant::now();
    let (mut send, res, _conn) = h2_get(addr, "http://x/").await;
    assert_eq!(res.status(), StatusCode::OK);
    let mut req = Request::connect("http://x/tunnel")
        .body(Empty::<Bytes>::new())
        .unwrap();
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    let res = send.send_request(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut io = TokioIo::new(hyper::upgrade::on(res).await.unwrap());
    io.write_all(b"ping").await.unwrap();
    let mut buf = [0; 4];
    io.read_exact(&mut buf).await.unwrap();
    drop(io); // the tunnel ends
    let until = Instant::now() + Duration::from_secs(10);
    while metrics.active() != 0 {
        assert!(Instant::now() < until, "never closed: {metrics:?}");
        tokio::time::sleep(ms(20)).await;
    }
    let closed_at = start.elapsed();
    assert!(
        closed_at >= ms(1_000),
        "closed at {closed_at:?}: {metrics:?}"
    );
    // At its maximum age, drained or (past the shutdown timeout) cut: about 1-1.3 s.
    assert!(
        closed_at < ms(3_000),
        "closed at {closed_at:?}: {metrics:?}"
    );
    assert_eq!(
        metrics.closed(CloseReason::MaxAge) + metrics.closed(CloseReason::ShutdownTimeout),
        1,
        "{metrics:?}"
    );
    task.abort();
}

/// Sends `first` (the start of a request: too short for hyper-util to tell HTTP/1 from HTTP/2),
/// starts the graceful shutdown, then sends `rest`: the drain waits for the first request, as
/// it does for a partial head, and answers it.
async fn graceful_shutdown_waits_for_the_first_bytes(first: &[u8], rest: &[u8]) -> String {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server()
        .await
        .header_read_timeout(Duration::from_secs(5))
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(first).await.unwrap();
    accepted(&metrics).await;
    // The connection has read its first bytes.
    tokio::time::sleep(ms(100)).await;
    stop.send(()).unwrap();
    tokio::time::sleep(ms(100)).await;
    let _ = tcp.write_all(rest).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out)).await;
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    assert_eq!(metrics.closed(CloseReason::Error), 0, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Shutdown), 1, "{metrics:?}");
    String::from_utf8_lossy(&out).into_owned()
}

/// A request line's first byte, `P` (`POST`, `PUT`), is also the HTTP/2 preface's: the drain
/// still waits for the rest of the first request.
#[tokio::test]
async fn graceful_shutdown_waits_for_a_first_request_begun_with_p() {
    let res = graceful_shutdown_waits_for_the_first_bytes(
        b"P",
        b"UT / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res:?}");
}

/// Likewise for a request line begun with something else, which tells HTTP/1 at once.
#[tokio::test]
async fn graceful_shutdown_waits_for_a_first_request_line_begun() {
    let res =
        graceful_shutdown_waits_for_the_first_bytes(b"GET / HT", b"TP/1.1\r\nhost: x\r\n\r\n")
            .await;
    assert!(res.starts_with("HTTP/1.1 200"), "{res:?}");
}

/// And for part of the HTTP/2 preface: once it is whole, the connection gets its GOAWAY.
#[tokio::test]
async fn graceful_shutdown_waits_for_a_partial_http2_preface() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = server().await.with_graceful_shutdown(async move {
        let _ = stopped.await;
    });
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n")
        .await
        .unwrap();
    accepted(&metrics).await;
    tokio::time::sleep(ms(100)).await;
    stop.send(()).unwrap();
    tokio::time::sleep(ms(100)).await;
    assert_eq!(metrics.active(), 1, "closed at once: {metrics:?}");
    let _ = tcp.write_all(b"\r\n").await;
    // The server's frames (9-byte headers), up to its GOAWAY (type 7).
    let mut out = Vec::new();
    let mut buf = [0; 1024];
    let goaway = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut frames = Vec::new();
            let mut b = &out[..];
            while b.len() >= 9 {
                let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
                frames.push(b[3]);
                b = &b[(9 + len).min(b.len())..];
            }
            if frames.contains(&7) {
                return true;
            }
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    });
    assert!(goaway.await.unwrap(), "closed without a GOAWAY: {out:?}");
    drop(tcp);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server did not resolve")
        .unwrap()
        .unwrap();
    assert_eq!(metrics.closed(CloseReason::Shutdown), 1, "{metrics:?}");
}

/// The drain at the maximum age waits for a first request begun with `P` too.
#[tokio::test]
async fn max_age_waits_for_a_first_request_begun_with_p() {
    let s = server().await.max_connection_age(ms(100));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"P").await.unwrap();
    tokio::time::sleep(ms(300)).await;
    let _ = tcp
        .write_all(b"UT / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out))
        .await
        .expect("not closed after its response")
        .unwrap();
    let res = String::from_utf8_lossy(&out);
    assert!(res.starts_with("HTTP/1.1 200"), "{res:?}");
    closed(&metrics, CloseReason::MaxAge).await;
    task.abort();
}

/// Empty lines before a request line (RFC 9112 §2.2: a server ignores them) are no request
/// head: a keep-alive client that sends one and then nothing is closed at the keep-alive
/// limit, not at the header-read limit.
#[tokio::test]
async fn an_empty_line_between_requests_is_bounded_by_the_keep_alive_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(100))
        .keep_alive_timeout(ms(600));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tokio::time::sleep(ms(50)).await;
    tcp.write_all(b"\r\n").await.unwrap();
    let idle = until_closed(&mut tcp).await;
    assert!(
        idle >= ms(400),
        "closed before the keep-alive limit: {idle:?}"
    );
    closed(&metrics, CloseReason::KeepAlive).await;
    assert_eq!(metrics.closed(CloseReason::HeaderRead), 0, "{metrics:?}");
    task.abort();
}

/// The request after an empty line is served, and its head still has the header-read limit.
#[tokio::test]
async fn a_head_after_an_empty_line_has_the_header_read_limit() {
    let s = server()
        .await
        .header_read_timeout(ms(200))
        .keep_alive_timeout(Duration::from_secs(5));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tcp.write_all(b"\r\n").await.unwrap();
    tokio::time::sleep(ms(50)).await;
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut tcp).await;
    tcp.write_all(b"\r\nGET / HTTP/1.1\r\n").await.unwrap();
    let took = until_closed(&mut tcp).await;
    assert!(took < Duration::from_secs(3), "cut too late: {took:?}");
    closed(&metrics, CloseReason::HeaderRead).await;
    task.abort();
}

/// A server whose every request is an HTTP/1 upgrade (`101`, `Upgrade: echo`) to an echo
/// protocol; the error that ended each echo is sent on the channel.
async fn upgrade_server() -> (
    Serve<
        impl tower::Service<
                Request<Incoming>,
                Response = Response<Empty<Bytes>>,
                Error = Infallible,
                Future = impl Send,
            > + Clone
            + Send
            + 'static,
    >,
    tokio::sync::mpsc::UnboundedReceiver<std::io::ErrorKind>,
) {
    let (ended, ends) = tokio::sync::mpsc::unbounded_channel();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app = tower::service_fn(move |req: Request<Incoming>| {
        let ended = ended.clone();
        async move {
            tokio::spawn(async move {
                let mut io = TokioIo::new(hyper::upgrade::on(req).await.unwrap());
                let mut buf = [0; 64];
                let end = loop {
                    match io.read(&mut buf).await {
                        Ok(0) => break std::io::ErrorKind::UnexpectedEof,
                        Ok(n) => {
                            if let Err(e) = io.write_all(&buf[..n]).await {
                                break e.kind();
                            }
                        }
                        Err(e) => break e.kind(),
                    }
                };
                let _ = ended.send(end);
            });
            let res = Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Empty::new())
                .unwrap();
            Ok::<_, Infallible>(res)
        }
    });
    (serve(listener, app), ends)
}

/// Connects and upgrades: the socket, past the `101`'s head.
async fn upgraded(addr: SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0];
        tcp.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
    tcp
}

async fn echo(tcp: &mut TcpStream) {
    tcp.write_all(b"ping").await.unwrap();
    let mut buf = [0; 4];
    tokio::time::timeout(Duration::from_secs(5), tcp.read_exact(&mut buf))
        .await
        .expect("no echo")
        .unwrap();
    assert_eq!(&buf, b"ping");
}

/// An HTTP/1 upgrade hands the connection to the application: it is counted closed
/// (`Completed`) then, once; the keep-alive and header-read limits no longer apply to it, and
/// the graceful shutdown neither waits for it nor cuts it (as with `axum::serve`).
#[tokio::test]
async fn an_upgraded_connection_is_counted_completed_and_left_to_the_application() {
    let (s, _ends) = upgrade_server().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let s = s
        .header_read_timeout(ms(100))
        .keep_alive_timeout(ms(100))
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .shutdown_timeout(ms(100));
    let metrics = s.metrics();
    let addr = s.local_addr().unwrap();
    let task = tokio::spawn(s.into_future());
    let mut tcp = upgraded(addr).await;
    echo(&mut tcp).await;
    closed(&metrics, CloseReason::Completed).await;
    assert_eq!(metrics.active(), 0, "{metrics:?}");
    tokio::time::sleep(ms(300)).await;
    echo(&mut tcp).await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the server waited for the upgraded connection")
        .unwrap()
        .unwrap();
    tokio::time::sleep(ms(300)).await;
    echo(&mut tcp).await;
    assert_eq!(metrics.accepted(), 1, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Completed), 1, "{metrics:?}");
    assert_eq!(metrics.active(), 0, "{metrics:?}");
}

/// The idle limit stays on an upgraded connection's I/O: quiet for that long, its reads fail
/// with `TimedOut` in the application, and nothing more is counted.
#[tokio::test]
async fn an_upgraded_connection_keeps_the_idle_limit() {
    let (s, mut ends) = upgrade_server().await;
    let s = s.idle_timeout(ms(300));
    let metrics = s.metrics();
    let addr = s.local_addr().unwrap();
    let task = tokio::spawn(s.into_future());
    let mut tcp = upgraded(addr).await;
    // Busy: an exchange every 150 ms keeps it, past the limit in all.
    let mut last_exchange = Instant::now();
    for _ in 0..4 {
        echo(&mut tcp).await;
        last_exchange = Instant::now();
        tokio::time::sleep(ms(150)).await;
    }
    let end = tokio::time::timeout(Duration::from_secs(10), ends.recv())
        .await
        .expect("the quiet upgraded connection was never cut")
        .unwrap();
    assert_eq!(end, std::io::ErrorKind::TimedOut);
    // The server's last activity came a little before this side saw the echo: a margin.
    let quiet = last_exchange.elapsed();
    assert!(
        quiet >= ms(250),
        "cut early: {quiet:?} after the last exchange"
    );
    until_closed(&mut tcp).await;
    assert_eq!(metrics.closed(CloseReason::Completed), 1, "{metrics:?}");
    assert_eq!(metrics.closed(CloseReason::Idle), 0, "{metrics:?}");
    assert_eq!(metrics.active(), 0, "{metrics:?}");
    task.abort();
}

/// An HTTP/2 client that opens no stream and never reads, flooding PINGs: the server's PONGs
/// fill the socket and its write waits, but no response goes out, so the keep-alive limit
/// ("HTTP/2: no open stream for `limit`") still closes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_ping_flood_never_read_is_closed_at_the_keep_alive_limit() {
    let s = server().await.keep_alive_timeout(ms(300));
    let (addr, metrics, task) = start(s);
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut tcp = sock.connect(addr).await.unwrap();
    h2_preface(&mut tcp).await;
    let mut pings = Vec::new();
    for _ in 0..4096 {
        pings.extend_from_slice(&[0, 0, 8, PING, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    }
    let flood = tokio::spawn(async move {
        // Never reads: the PONGs back up until the server's write waits.
        while tcp.write_all(&pings).await.is_ok() {}
    });
    let until = Instant::now() + Duration::from_secs(5);
    while metrics.active() > 0 || metrics.accepted() == 0 {
        assert!(
            Instant::now() < until,
            "held past the keep-alive limit: {metrics:?}"
        );
        tokio::time::sleep(ms(20)).await;
    }
    assert_eq!(metrics.closed(CloseReason::KeepAlive), 1, "{metrics:?}");
    flood.abort();
    task.abort();
}

/// HTTP/2: a response that waits for a client that reads nothing at all (its window open, the
/// socket full) is still going out: the idle limit closes the connection, not the keep-alive
/// limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_response_waiting_on_a_client_that_never_reads_is_cut_at_the_idle_limit() {
    let s = server()
        .await
        .keep_alive_timeout(ms(150))
        .idle_timeout(ms(800));
    let (addr, metrics, task) = start(s);
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS: INITIAL_WINDOW_SIZE = 2^31 - 1; the connection window opened as far.
    out.extend([
        0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff,
    ]);
    out.extend([0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0, 0]);
    // HEADERS (END_STREAM | END_HEADERS) for GET http://x/big on stream 1.
    let block = [0x82, 0x86, 0x04, 4, b'/', b'b', b'i', b'g', 0x01, 1, b'x'];
    out.extend([0, 0, block.len() as u8, 0x1, 0x5, 0, 0, 0, 1]);
    out.extend(block);
    tcp.write_all(&out).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while metrics.active() > 0 || metrics.accepted() == 0 {
        assert!(Instant::now() < until, "never closed: {metrics:?}");
        tokio::time::sleep(ms(20)).await;
    }
    assert_eq!(metrics.closed(CloseReason::Idle), 1, "{metrics:?}");
    drop(tcp);
    task.abort();
}
