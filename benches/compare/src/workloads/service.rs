//! service: an HTTP service end to end, every timer it runs on the wheel or on Tokio's.
//!
//! A server on its own multi-thread runtime (`--workers`, threads `svc-server`), its clients on
//! another (`svc-client`), over loopback: 64 keep-alive HTTP/1 clients (`--quick`: 8) sending
//! requests back to back, one at a time each. Every request does K back-end calls, one
//! after the other, each under its own timeout (a call is pending once, then ready: the
//! timeout's timer is registered and cancelled); K = 0, 1, 8, a service fanning out. The same
//! service three ways:
//!
//! - **ours**: `server::serve` with a header-read timeout (10 s) and an idle timeout (60 s),
//!   `http::TimeoutLayer` (10 s, 408), and `tokio_timing_wheel::timeout` around each call;
//! - **stock**: hyper-util's auto connection builder (what `axum::serve` builds) on
//!   `TokioTimer` with the same header-read timeout, an idle timeout on `tokio::time` (a
//!   `Sleep` moved after activity, as ours does), tower-http's `TimeoutLayer` (10 s, 408), and
//!   `tokio::time::timeout` around each call;
//! - **no timer**: the same builder and service without any timer: the runtime's, hyper's and
//!   the service's own cost.
//!
//! Each measurement on fresh runtimes: a warm-up, then a window in which it counts requests,
//! their latency (write to last byte read, at the client) and the CPU time of the server's
//! threads (`/proc/self/task/*/schedstat`). The timers' share of server CPU per request is a
//! system's CPU per request minus the no-timer service's. Medians over `--reps` repetitions,
//! the systems interleaved.

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;

use super::{Ctx, Workload};
use crate::cpu::thread_cpu_ns;
use crate::report::{interleaved, print_table, rate, ratio, target, unmeasured_row, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "service",
    about: "an HTTP service end to end (request, header-read, idle and K back-end timeouts): \
            req/s, latency, server CPU",
    run,
};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Back-end calls per request.
const FAN_OUT: [usize; 3] = [0, 1, 8];
/// The target: the timers' share of server CPU per request, ours against stock.
const TARGET_SHARE: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    Stock,
    NoTimer,
}

const SYSTEMS: [System; 3] = [System::Ours, System::Stock, System::NoTimer];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: serve + http::TimeoutLayer + timeout",
            System::Stock => "stock: TokioTimer + tower-http + tokio::time::timeout",
            System::NoTimer => "no timer (the service alone)",
        }
    }
}

/// A back-end call: pending once (it wakes itself), then ready.
async fn call() {
    tokio::task::yield_now().await;
}

fn hello() -> Response<Full<Bytes>> {
    Response::new(Full::new(Bytes::from_static(b"hello")))
}

async fn handler_ours(k: usize) -> Result<Response<Full<Bytes>>, Infallible> {
    for _ in 0..k {
        let _ = tokio_timing_wheel::timeout(CALL_TIMEOUT, call()).await;
    }
    Ok(hello())
}

async fn handler_stock(k: usize) -> Result<Response<Full<Bytes>>, Infallible> {
    for _ in 0..k {
        let _ = tokio::time::timeout(CALL_TIMEOUT, call()).await;
    }
    Ok(hello())
}

async fn handler_plain(k: usize) -> Result<Response<Full<Bytes>>, Infallible> {
    for _ in 0..k {
        call().await;
    }
    Ok(hello())
}

/// The stock idle timeout: a connection that neither reads nor writes for `limit` fails; the
/// same scheme as ours (`IdleTimeout`: a clock read per activity, the `Sleep` moved only when
/// a read or write has to wait), on `tokio::time`.
struct TokioIdle {
    io: TcpStream,
    limit: Duration,
    last: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TokioIdle {
    fn new(io: TcpStream, limit: Duration) -> TokioIdle {
        TokioIdle {
            io,
            limit,
            last: tokio::time::Instant::now(),
            sleep: None,
        }
    }

    fn finish<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(r) => {
                self.last = tokio::time::Instant::now();
                Poll::Ready(r)
            }
            Poll::Pending => {
                let deadline = self.last + self.limit;
                let sleep = self
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if sleep.deadline() != deadline {
                    sleep.as_mut().reset(deadline);
                }
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for TokioIdle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        let poll = Pin::new(&mut me.io).poll_read(cx, buf);
        me.finish(cx, poll)
    }
}

impl AsyncWrite for TokioIdle {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        let poll = Pin::new(&mut me.io).poll_write(cx, buf);
        me.finish(cx, poll)
    }

    // Forwarded as ours (`IdleTimeout`, the server's `ConnIo`) and the no-timer service's bare
    // `TcpStream` do: without it hyper sees an I/O that cannot write vectored and switches its
    // writes to flattening every response into one buffer, a difference that is not a timer's.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        let poll = Pin::new(&mut me.io).poll_write_vectored(cx, bufs);
        me.finish(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Serves `listener` as `system` does, with `k` back-end calls per request.
async fn serve(system: System, listener: TcpListener, k: usize) {
    if system == System::Ours {
        let app = ServiceBuilder::new()
            .layer(tokio_timing_wheel::http::TimeoutLayer::new(REQUEST_TIMEOUT))
            .service_fn(move |_: Request<Incoming>| handler_ours(k));
        let _ = tokio_timing_wheel::server::serve(listener, app)
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .idle_timeout(IDLE_TIMEOUT)
            .into_future()
            .await;
        return;
    }
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if system == System::Stock {
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
    }
    while let Ok((tcp, _)) = listener.accept().await {
        let _ = tcp.set_nodelay(true);
        let builder = builder.clone();
        tokio::spawn(async move {
            if system == System::Stock {
                let app = ServiceBuilder::new()
                    .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                        StatusCode::REQUEST_TIMEOUT,
                        REQUEST_TIMEOUT,
                    ))
                    .service_fn(move |_: Request<Incoming>| handler_stock(k));
                let io = TokioIo::new(TokioIdle::new(tcp, IDLE_TIMEOUT));
                let _ = builder
                    .serve_connection_with_upgrades(io, TowerToHyperService::new(app))
                    .await;
            } else {
                let app =
                    ServiceBuilder::new().service_fn(move |_: Request<Incoming>| handler_plain(k));
                let _ = builder
                    .serve_connection_with_upgrades(
                        TokioIo::new(tcp),
                        TowerToHyperService::new(app),
                    )
                    .await;
            }
        });
    }
}

/// What the clients share: whether to count, and when to stop.
#[derive(Debug, Default)]
struct Window {
    counting: AtomicBool,
    stop: AtomicBool,
    errors: AtomicU64,
}

/// One keep-alive client: requests one at a time until told to stop; the latencies (ns) of
/// those completed while counting.
async fn client(addr: SocketAddr, window: Arc<Window>) -> Vec<u64> {
    let mut latencies = Vec::with_capacity(1 << 16);
    let Ok(mut tcp) = TcpStream::connect(addr).await else {
        window.errors.fetch_add(1, Relaxed);
        return latencies;
    };
    let _ = tcp.set_nodelay(true);
    let mut buf = vec![0u8; 4096];
    while !window.stop.load(Relaxed) {
        let start = std::time::Instant::now();
        if tcp
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .is_err()
        {
            window.errors.fetch_add(1, Relaxed);
            return latencies;
        }
        // Each response ends with its body, "hello".
        let mut got = 0;
        while !buf[..got].ends_with(b"hello") {
            match tcp.read(&mut buf[got..]).await {
                Ok(n) if n > 0 && got + n < buf.len() => got += n,
                _ => {
                    window.errors.fetch_add(1, Relaxed);
                    return latencies;
                }
            }
        }
        if window.counting.load(Relaxed) {
            latencies.push(start.elapsed().as_nanos() as u64);
        }
    }
    latencies
}

/// The `q` quantile of sorted `v`.
fn quantile(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize] as f64
}

/// `[requests/s, p50 µs, p99 µs, server CPU µs per request]` of `system` with `k` calls per
/// request, on fresh runtimes.
fn measure(
    system: System,
    k: usize,
    workers: usize,
    conns: usize,
    warm_up: Duration,
    window_len: Duration,
) -> Result<[f64; 4], String> {
    let server_rt = Flavor::MultiThread.runtime(workers, "svc-server");
    let client_rt = Flavor::MultiThread.runtime(workers, "svc-client");
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let server = server_rt.spawn(serve(system, listener, k));
    let result = client_rt.block_on(async move {
        let window = Arc::new(Window::default());
        let clients: Vec<_> = (0..conns)
            .map(|_| tokio::spawn(client(addr, Arc::clone(&window))))
            .collect();
        tokio::time::sleep(warm_up).await;
        let cpu0 = thread_cpu_ns("svc-server");
        let t0 = std::time::Instant::now();
        window.counting.store(true, Relaxed);
        tokio::time::sleep(window_len).await;
        window.counting.store(false, Relaxed);
        let elapsed = t0.elapsed();
        let cpu = thread_cpu_ns("svc-server").saturating_sub(cpu0);
        window.stop.store(true, Relaxed);
        let mut all = Vec::new();
        for c in clients {
            all.extend(c.await.expect("a client task panicked"));
        }
        let errors = window.errors.load(Relaxed);
        if errors > 0 {
            return Err(format!("{errors} clients failed"));
        }
        if all.is_empty() {
            return Err("no request completed".to_string());
        }
        all.sort_unstable();
        let n = all.len() as f64;
        Ok([
            n / elapsed.as_secs_f64(),
            quantile(&all, 0.50) / 1e3,
            quantile(&all, 0.99) / 1e3,
            cpu as f64 / 1e3 / n,
        ])
    });
    server.abort();
    drop(client_rt);
    drop(server_rt);
    result
}

/// Ours' share of server CPU against stock's, and the target's verdict. A share is a
/// difference of two measured figures: at or below zero it is inside the noise, and neither a
/// ratio nor the target can be read from it (two negative shares would divide into a
/// meaningless ratio, and any negative one would meet the target).
fn share_verdict(ours: f64, stock: f64) -> String {
    if ours > 0.0 && stock > 0.0 {
        format!(
            "{}; {}",
            ratio(ours, stock, false),
            target(
                ours <= TARGET_SHARE * stock,
                &format!("<= {TARGET_SHARE}x stock")
            )
        )
    } else {
        "n/a (a share at or below 0 is inside the noise)".to_string()
    }
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let conns = ctx.size(64, 8);
    let warm_up = ctx.size(Duration::from_millis(500), Duration::from_millis(100));
    let window = ctx.size(Duration::from_secs(2), Duration::from_millis(200));
    let w = ctx.workers;
    println!(
        "A server on a {} runtime, its {conns} keep-alive clients on another, over loopback; \
         every request does K back-end calls, each under its own timeout. Server CPU: its \
         runtime's threads over the window; the timers' share: minus the no-timer service's.\n",
        Flavor::MultiThread.label(w)
    );
    for k in FAN_OUT {
        println!("### K = {k} back-end calls per request\n");
        let reps = interleaved(ctx.reps, &SYSTEMS, |&sys| {
            match measure(sys, k, w, conns, warm_up, window) {
                Ok(figures) => Some(figures),
                Err(why) => {
                    println!("{}: {why}\n", sys.name());
                    None
                }
            }
        });
        let medians: Vec<Option<[f64; 4]>> = reps
            .iter()
            .map(|r| r.as_ref().map(|r| r.medians()))
            .collect();
        let base_cpu = medians[2].map(|m| m[3]);
        let share = |m: &[f64; 4]| base_cpu.map(|b| m[3] - b);
        let us = |x: f64| format!("{x:.1}");
        let rows: Vec<_> = SYSTEMS
            .iter()
            .zip(&reps)
            .zip(&medians)
            .map(|((sys, r), m)| match (r, m) {
                (Some(r), Some(m)) => vec![
                    sys.name().to_string(),
                    r.shown(0, rate),
                    r.shown(1, us),
                    r.shown(2, us),
                    r.shown(3, |x| format!("{x:.2}")),
                    match (sys, share(m)) {
                        (System::NoTimer, _) | (_, None) => "-".to_string(),
                        (_, Some(s)) => format!("{s:.2}"),
                    },
                ],
                _ => unmeasured_row(sys.name(), 6, "failed"),
            })
            .collect();
        print_table(
            &[
                "system",
                "requests/s",
                "p50 µs",
                "p99 µs",
                "server CPU µs/request",
                "timers' share µs/request",
            ],
            &rows,
        );
        let peer = System::Stock.name();
        let (Some(ours), Some(stock)) = (medians[0], medians[1]) else {
            summary.add_unmeasured(&format!("requests/s, K = {k}"), peer, "failed");
            continue;
        };
        summary.add_text(
            &format!("requests/s, K = {k}"),
            &rate(ours[0]),
            peer,
            &rate(stock[0]),
            &format!(
                "{}; {}",
                ratio(ours[0], stock[0], true),
                target(ours[0] >= stock[0], ">= stock")
            ),
        );
        summary.add_all(
            &format!("p50 / p99 latency, K = {k}"),
            peer,
            &ours[1..3],
            &stock[1..3],
            false,
            |x| format!("{x:.1} µs"),
        );
        if let (Some(o), Some(s)) = (share(&ours), share(&stock)) {
            summary.add_text(
                &format!("timers' share of server CPU per request, K = {k}"),
                &format!("{o:.2} µs"),
                peer,
                &format!("{s:.2} µs"),
                &share_verdict(o, s),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share_verdict;

    /// The stock idle wrapper writes as the stream under it does: hyper picks its write
    /// strategy (vectored or flattened) from `is_write_vectored`, and ours forwards it.
    #[test]
    fn the_stock_idle_wrapper_writes_vectored_as_its_stream() {
        use tokio::io::AsyncWrite;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (tcp, _) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
            let tcp = tcp.unwrap();
            let bare = tcp.is_write_vectored();
            let idle = super::TokioIdle::new(tcp, std::time::Duration::from_secs(60));
            assert_eq!(idle.is_write_vectored(), bare);
        });
    }

    #[test]
    fn a_share_in_the_noise_has_no_verdict() {
        assert_eq!(
            share_verdict(1.0, 4.0),
            "4.00x better; target met (<= 0.5x stock)"
        );
        assert_eq!(
            share_verdict(3.0, 4.0),
            "1.33x better; target missed (<= 0.5x stock)"
        );
        // Both negative would otherwise read "2.00x worse", and a negative share of ours
        // "target met".
        assert!(share_verdict(-0.2, -0.1).starts_with("n/a"));
        assert!(share_verdict(-0.2, 1.0).starts_with("n/a"));
        assert!(share_verdict(0.5, 0.0).starts_with("n/a"));
    }
}
