//! An axum app served with `tokio_timing_wheel::server::serve`: every timeout on, every timer
//! on the wheel, one call.
//!
//! ```sh
//! cargo run --release -p examples --example axum                # serves for 60 s
//! cargo run --release -p examples --example axum -- --seconds 300
//! cargo run --release -p examples --example axum -- --self-test  # CI's smoke run
//! ```
//!
//! It listens on 127.0.0.1 only (port 3000, or any free port if that one is taken) and stops
//! gracefully after `--seconds` or on Ctrl-C. `--self-test` starts it on a free port with
//! short limits, plays the clients each limit is for (a normal request, one too slow for the
//! request timeout, a slowloris trickling its head, an idle keep-alive connection that must
//! outlive the header-read limit, a client that never reads its response), then shuts it down
//! gracefully, and exits non-zero if anything is off.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_timing_wheel::http::{RequestBodyTimeoutLayer, TimeoutLayer};
use tokio_timing_wheel::server::{serve, CloseReason, ServeMetrics};

/// The server's limits.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// A request's response must be ready within this, or the client gets 408.
    request: Duration,
    /// A request body may pause this long between frames.
    body: Duration,
    /// An HTTP/1 request head must arrive within this (slowloris protection).
    header_read: Duration,
    /// A connection with no request in flight is closed after this.
    keep_alive: Duration,
    /// A connection that neither reads nor writes is closed after this.
    idle: Duration,
    /// A connection is drained (`Connection: close`, GOAWAY) at this age.
    max_age: Duration,
    /// In-flight requests get this long after the shutdown signal.
    shutdown: Duration,
    /// How long `/slow` takes (longer than `request`).
    slow: Duration,
}

const SERVE: Limits = Limits {
    request: Duration::from_secs(10),
    body: Duration::from_secs(30),
    header_read: Duration::from_secs(10),
    keep_alive: Duration::from_secs(60),
    idle: Duration::from_secs(120),
    max_age: Duration::from_secs(3600),
    shutdown: Duration::from_secs(30),
    slow: Duration::from_secs(15),
};

/// Short limits; the keep-alive limit above the header-read one, to show they are apart.
const SELF_TEST: Limits = Limits {
    request: Duration::from_millis(200),
    body: Duration::from_millis(500),
    header_read: Duration::from_millis(300),
    keep_alive: Duration::from_millis(900),
    idle: Duration::from_millis(1500),
    max_age: Duration::from_secs(60),
    shutdown: Duration::from_millis(500),
    slow: Duration::from_secs(2),
};

fn app(slow: Duration, limits: Limits) -> Router {
    Router::new()
        .route("/", get(|| async { "hello from the wheel\n" }))
        .route(
            "/slow",
            get(move || async move {
                tokio::time::sleep(slow).await;
                "too late to be seen\n"
            }),
        )
        .route(
            "/big",
            get(|| async { "x".repeat(64 << 20) }), // more than the socket buffers hold
        )
        .layer(TimeoutLayer::new(limits.request))
        .layer(RequestBodyTimeoutLayer::new(limits.body))
}

/// Serves until `stop` resolves; what `serve` returned.
async fn run(
    listener: TcpListener,
    limits: Limits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> (ServeMetrics, tokio::task::JoinHandle<std::io::Result<()>>) {
    // The recipe: one call, every limit, every timer on the wheel.
    let server = serve(listener, app(limits.slow, limits))
        .header_read_timeout(limits.header_read)
        .keep_alive_timeout(limits.keep_alive)
        .idle_timeout(limits.idle)
        .max_connection_age(limits.max_age)
        .with_graceful_shutdown(stop)
        .shutdown_timeout(limits.shutdown);
    let metrics = server.metrics();
    (
        metrics,
        tokio::spawn(std::future::IntoFuture::into_future(server)),
    )
}

/// Binds 127.0.0.1:`port`, or any free port if that one is taken.
async fn bind(port: u16) -> std::io::Result<TcpListener> {
    match TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => Ok(l),
        Err(_) => TcpListener::bind("127.0.0.1:0").await,
    }
}

/// Writes `bytes`, then reads until the server closes: the status code (0 if none) and how
/// long after the write the close came.
async fn exchange(tcp: &mut TcpStream, bytes: &[u8]) -> std::io::Result<(u16, Duration)> {
    tcp.write_all(bytes).await?;
    let start = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let status = String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((status, start.elapsed()))
}

/// Plays each kind of client against a server with the self-test limits.
async fn self_test(addr: SocketAddr, metrics: &ServeMetrics) -> Result<(), String> {
    let l = SELF_TEST;
    let check = |ok: bool, what: String| {
        println!("  [{}] {what}", if ok { "ok" } else { "FAIL" });
        ok.then_some(()).ok_or(what)
    };
    let io = |e: std::io::Error| e.to_string();
    let connect = || async { TcpStream::connect(addr).await.map_err(io) };

    let (status, _) = exchange(
        &mut connect().await?,
        b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await
    .map_err(io)?;
    check(status == 200, format!("GET / answered {status}"))?;

    let start = Instant::now();
    let (status, _) = exchange(
        &mut connect().await?,
        b"GET /slow HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await
    .map_err(io)?;
    let took = start.elapsed();
    check(
        status == 408 && took >= l.request && took < l.slow,
        format!(
            "GET /slow answered {status} after {took:?} (request timeout {:?})",
            l.request
        ),
    )?;

    // Keep-alive: answered, then idle; closed at the keep-alive limit, not the header-read one
    // nor the idle one (the limit counts from the response's last write, a little before the
    // client's read ends).
    let (status, idle) = exchange(&mut connect().await?, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .map_err(io)?;
    check(
        status == 200
            && idle >= l.keep_alive - Duration::from_millis(50)
            && idle < l.idle
            && metrics.closed(CloseReason::KeepAlive) == 1,
        format!(
            "idle keep-alive connection closed after {idle:?} (keep-alive {:?}, header-read {:?})",
            l.keep_alive, l.header_read
        ),
    )?;

    // Slowloris: a head trickled a byte every 50 ms, cut at the header-read limit.
    let mut tcp = connect().await?;
    let start = Instant::now();
    let trickle = async {
        for b in b"GET / HTTP/1.1\r\nx-padding: ".iter().chain(&[b'x'; 200]) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if tcp.write_all(&[*b]).await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), trickle).await;
    let cut = start.elapsed();
    check(
        cut >= l.header_read && cut < l.keep_alive && metrics.closed(CloseReason::HeaderRead) >= 1,
        format!(
            "slowloris head cut after {cut:?} (header-read {:?})",
            l.header_read
        ),
    )?;

    // A client that asks for a big response and never reads it: cut at the idle limit.
    let mut tcp = connect().await?;
    tcp.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .map_err(io)?;
    let start = Instant::now();
    let until = start + Duration::from_secs(10);
    while metrics.closed(CloseReason::Idle) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cut = start.elapsed();
    check(
        metrics.closed(CloseReason::Idle) == 1 && cut >= l.idle,
        format!(
            "a client that never reads was cut after {cut:?} at the idle limit ({:?}): {metrics:?}",
            l.idle
        ),
    )?;
    drop(tcp);
    println!("  metrics: {metrics:?}");
    Ok(())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--self-test") {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (metrics, server) = run(listener, SELF_TEST, async move {
            let _ = stopped.await;
        })
        .await;
        println!("self-test against http://{addr}/ ({SELF_TEST:?})");
        let result = self_test(addr, &metrics).await;
        // Graceful shutdown: resolves, and nothing listens after.
        let _ = stop.send(());
        let done = tokio::time::timeout(Duration::from_secs(10), server).await;
        let stopped = matches!(done, Ok(Ok(Ok(()))));
        let refused = TcpStream::connect(addr).await.is_err();
        println!(
            "  [{}] graceful shutdown resolved, new connections refused",
            if stopped && refused { "ok" } else { "FAIL" }
        );
        match result {
            Ok(()) if stopped && refused => {
                println!("self-test passed");
                Ok(())
            }
            Ok(()) => Err(std::io::Error::other("graceful shutdown failed")),
            Err(what) => Err(std::io::Error::other(format!("self-test failed: {what}"))),
        }
    } else {
        let seconds: u64 = args
            .iter()
            .position(|a| a == "--seconds")
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(60);
        let listener = bind(3000).await?;
        println!(
            "serving on http://{}/ for {seconds} s (try /, /slow); Ctrl-C stops",
            listener.local_addr()?
        );
        let stop = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
            }
        };
        let (metrics, server) = run(listener, SERVE, stop).await;
        server.await.expect("server task")?;
        println!("stopped: {metrics:?}");
        Ok(())
    }
}
