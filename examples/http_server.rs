//! An HTTP/1 server whose timers all run on the wheel: hyper's header-read timeout on
//! `HyperTimer`, each connection under `IdleTimeout`, and a tower `TimeoutLayer` on every
//! request.
//!
//! ```sh
//! cargo run --release -p examples --example http_server                  # serves for 60 s
//! cargo run --release -p examples --example http_server -- --seconds 300
//! cargo run --release -p examples --example http_server -- --self-test    # CI's smoke run
//! ```
//!
//! It listens on 127.0.0.1 only (port 3000, or any free port if that one is taken), prints
//! how to reach it, and stops after `--seconds` or on Ctrl-C. `--self-test` starts it on a
//! free port with short limits, runs a few requests against it (a normal one, one too slow
//! for the tower timeout, a silent client cut off by `IdleTimeout`, a slowloris client
//! trickling its header cut off by hyper's header-read timeout, keep-alive), prints what
//! happened and exits non-zero if anything is off.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_timing_wheel::hyper::HyperTimer;
use tokio_timing_wheel::tower::TimeoutLayer;
use tokio_timing_wheel::IdleTimeout;
use tower::{BoxError, ServiceBuilder};

/// The server's limits.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// hyper: the whole request head must arrive within this (slowloris protection); also
    /// how long an idle keep-alive connection waits for its next request.
    header_read: Duration,
    /// `IdleTimeout`: a connection with no read and no write for this long is closed.
    idle: Duration,
    /// tower: a response must be ready within this, or the client gets 408.
    request: Duration,
    /// How long `/slow` takes (longer than `request`).
    slow: Duration,
}

const SERVE: Limits = Limits {
    header_read: Duration::from_secs(10),
    idle: Duration::from_secs(60),
    request: Duration::from_secs(1),
    slow: Duration::from_secs(3),
};

/// Short limits, the idle limit under the header-read timeout so that each cuts off a client
/// of its own: a silent one (idle) and one trickling its header (header-read timeout).
const SELF_TEST: Limits = Limits {
    header_read: Duration::from_millis(1500),
    idle: Duration::from_millis(400),
    request: Duration::from_millis(200),
    slow: Duration::from_secs(2),
};

type Body = Full<Bytes>;

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}

/// The application: `/` answers at once, `/slow` too late.
async fn route(request: Request<Incoming>, slow: Duration) -> Result<Response<Body>, BoxError> {
    match request.uri().path() {
        "/" => Ok(text(StatusCode::OK, "hello from the wheel\n")),
        "/slow" => {
            tokio::time::sleep(slow).await;
            Ok(text(StatusCode::OK, "too late to be seen\n"))
        }
        _ => Ok(text(StatusCode::NOT_FOUND, "not found\n")),
    }
}

/// Turns the tower timeout's error into a response, as axum's `HandleErrorLayer` recipes do.
fn to_response(result: Result<Response<Body>, BoxError>) -> Result<Response<Body>, BoxError> {
    Ok(match result {
        Ok(response) => response,
        Err(e) if e.is::<tower::timeout::error::Elapsed>() => {
            text(StatusCode::REQUEST_TIMEOUT, "request timed out\n")
        }
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n"),
    })
}

/// Accepts connections forever, each on its own task.
async fn serve(listener: TcpListener, limits: Limits) {
    // Built once, cloned per connection; each sleep goes to the runtime's default wheel.
    let timer = HyperTimer::new();
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                eprintln!("accept failed: {e}");
                continue;
            }
        };
        let service = ServiceBuilder::new()
            .map_result(to_response)
            .layer(TimeoutLayer::new(limits.request))
            .service_fn(move |request| route(request, limits.slow));
        let io = TokioIo::new(IdleTimeout::new(tcp, limits.idle));
        let builder = http1::Builder::new()
            .timer(timer.clone())
            .header_read_timeout(limits.header_read)
            .clone();
        tokio::spawn(async move {
            let service = TowerToHyperService::new(service);
            if let Err(e) = builder.serve_connection(io, service).await {
                // Timeouts end up here: hyper's header-read timeout, or the IdleTimeout.
                let cause = std::error::Error::source(&e)
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                eprintln!("connection closed: {e}{cause}");
            }
        });
    }
}

/// Binds 127.0.0.1:`port`, or any free port if that one is taken.
async fn bind(port: u16) -> std::io::Result<TcpListener> {
    match TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => Ok(l),
        Err(_) => TcpListener::bind("127.0.0.1:0").await,
    }
}

/// Sends `request` on a new connection and reads until the server closes it: the first
/// response's status code (0 if none came), how many responses with that status came, and how
/// long after connecting the connection was closed.
async fn exchange(addr: SocketAddr, request: &str) -> std::io::Result<(u16, usize, Duration)> {
    let start = Instant::now();
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer).await; // a reset counts as closed
    let status = status_of(&answer);
    let head = format!("HTTP/1.1 {status} ");
    let responses = String::from_utf8_lossy(&answer)
        .matches(head.as_str())
        .count();
    Ok((status, responses, start.elapsed()))
}

/// Sends a request head one byte every `pace` (a slowloris client): how long after
/// connecting the server closed the connection.
async fn slowloris(addr: SocketAddr, pace: Duration) -> std::io::Result<Duration> {
    let start = Instant::now();
    let tcp = TcpStream::connect(addr).await?;
    let (mut reader, mut writer) = tcp.into_split();
    let trickle = async move {
        for byte in b"GET / HTTP/1.1\r\nx-padding: "
            .iter()
            .chain([b'x'; 1000].iter())
        {
            tokio::time::sleep(pace).await;
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
        }
    };
    let mut answer = Vec::new();
    tokio::select! {
        () = trickle => {}
        _ = reader.read_to_end(&mut answer) => {}
    }
    Ok(start.elapsed())
}

/// The status code of an HTTP/1 response, 0 if there is none.
fn status_of(answer: &[u8]) -> u16 {
    String::from_utf8_lossy(answer)
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Runs a few requests against a server with the self-test limits; `Err` names what failed.
async fn self_test(addr: SocketAddr) -> Result<(), String> {
    let l = SELF_TEST;
    let check = |ok: bool, what: String| {
        println!("  [{}] {what}", if ok { "ok" } else { "FAIL" });
        if ok {
            Ok(())
        } else {
            Err(what)
        }
    };
    let io = |e: std::io::Error| e.to_string();

    let (status, _, _) = exchange(
        addr,
        "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await
    .map_err(io)?;
    check(status == 200, format!("GET / answered {status}"))?;

    let (status, _, took) = exchange(
        addr,
        "GET /slow HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await
    .map_err(io)?;
    check(
        status == 408 && took >= l.request && took < l.slow,
        format!(
            "GET /slow answered {status} after {took:?} (tower timeout {:?})",
            l.request
        ),
    )?;

    let (status, _, took) = exchange(addr, "GET / HTTP/1.1\r\nhost: x\r\n")
        .await
        .map_err(io)?;
    check(
        status == 0 && took >= l.idle && took < l.header_read,
        format!(
            "a silent client (incomplete header) was cut off after {took:?} by the \
             IdleTimeout ({:?})",
            l.idle
        ),
    )?;

    let pace = l.idle / 2;
    let took = slowloris(addr, pace).await.map_err(io)?;
    check(
        took >= l.header_read && took < l.header_read * 4,
        format!(
            "a client trickling its header (a byte every {pace:?}) was cut off after \
             {took:?} by hyper's header-read timeout ({:?})",
            l.header_read
        ),
    )?;

    let (status, responses, took) = exchange(
        addr,
        "GET / HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await
    .map_err(io)?;
    check(
        status == 200 && responses == 2 && took >= l.idle && took < l.header_read,
        format!(
            "{responses} of 2 keep-alive requests served, then the idle connection closed \
             after {took:?} by the IdleTimeout"
        ),
    )?;
    Ok(())
}

fn arg_value(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--self-test") {
        let listener = bind(0).await?;
        let addr = listener.local_addr()?;
        println!("http_server self-test on http://{addr}/ with {SELF_TEST:?}");
        tokio::spawn(serve(listener, SELF_TEST));
        let outcome = tokio::time::timeout(Duration::from_secs(30), self_test(addr))
            .await
            .unwrap_or_else(|_| Err("the self-test took over 30 s".into()));
        return match outcome {
            Ok(()) => {
                println!("self-test passed");
                Ok(())
            }
            Err(what) => Err(format!("self-test failed: {what}").into()),
        };
    }

    let port = arg_value(&args, "--port").unwrap_or(3000);
    let seconds = arg_value(&args, "--seconds").unwrap_or(60);
    let listener = bind(u16::try_from(port)?).await?;
    let addr = listener.local_addr()?;
    println!("serving on http://{addr}/ for {seconds} s (Ctrl-C stops it), limits {SERVE:?}");
    println!("  curl -i http://{addr}/          # 200 at once");
    println!("  curl -i http://{addr}/slow      # 408 from the tower timeout after 1 s");
    println!(
        "  (printf 'GET / HTTP/1.1\\r\\n'; sleep 15) | nc {} {}   # header cut off after 10 s",
        addr.ip(),
        addr.port()
    );
    tokio::select! {
        () = serve(listener, SERVE) => {}
        () = tokio::time::sleep(Duration::from_secs(seconds)) => println!("time is up"),
        _ = tokio::signal::ctrl_c() => println!("interrupted"),
    }
    Ok(())
}
