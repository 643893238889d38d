//! Workload "hyper-idle" of the side-by-side suite: idle hyper connections on the wheel
//! (`HyperTimer`) against hyper-util's `TokioTimer`, and a tower timeout on every request.
//!
//! This file is a module of the suite, not a bench target of its own: the suite includes it
//! with `mod hyper_idle;` and calls [`run`]. It assumes of the crate that includes it:
//!
//! - `crate::alloc::allocated() -> usize`: the bytes currently allocated, from the suite's
//!   counting global allocator;
//! - dependencies `tokio` (rt-multi-thread, net, io-util, time), `hyper` (server, http1),
//!   `hyper-util` (tokio, server, http1, service), `http-body-util`, `bytes`, `tower`
//!   (timeout, util) and `tokio-timing-wheel` with features `hyper` and `tower`.
//!
//! What it measures, each timer in the same process and run:
//!
//! 1. **Held connections.** N clients each send an incomplete request head and wait; the
//!    hyper HTTP/1 server holds each connection with a 60 s header-read timeout (one timer
//!    per connection). Memory per connection (everything the process allocated for it:
//!    client and server sockets, hyper's connection, the timer), and the process's CPU ticks
//!    (`/proc/self/stat` utime + stime) over a few idle seconds.
//! 2. **Cut off.** The same with a 1 s header-read timeout: how late after its deadline each
//!    connection is closed (server side, from just before hyper starts the connection to
//!    `serve_connection` returning), p50 / p99 / max, and how many closed early (none may).
//! 3. **Load.** Keep-alive clients send requests back to back over loopback through a tower
//!    timeout of 10 s on each request: requests/s with tower's `TimeoutLayer`
//!    (`tokio::time`) and with ours, both with `TokioTimer` for hyper, and ours with
//!    `HyperTimer` as well. Medians of interleaved repetitions.
//!
//! N is 10 000 (50 000 where the limits allow; `quick`: 200). Every connection costs two
//! file descriptors here (client and server are in this process), and a process cannot
//! raise its own limit without `libc`, so N is capped to what `ulimit -n` allows; the
//! output says when it was. Raise it with `ulimit -n` in the shell (up to `ulimit -Hn`).
//! Loopback only: one listener per 20 000 connections, so client ports never run out.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_timing_wheel::hyper::HyperTimer;
use tower::ServiceBuilder;

/// The suite's allocation counter (see the module docs).
fn allocated() -> usize {
    crate::alloc::allocated()
}

/// Runs the workload and prints its tables (Markdown).
pub fn run(quick: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(run_async(quick));
}

async fn run_async(quick: bool) {
    let wanted: &[usize] = if quick { &[200] } else { &[10_000, 50_000] };
    let fd_limit = open_files_limit();
    let most = fd_limit.map_or(usize::MAX, |l| l.saturating_sub(256) / 2);
    let mut sizes: Vec<usize> = wanted.iter().map(|&n| n.min(most)).collect();
    sizes.dedup();
    if wanted.iter().any(|&n| n > most) {
        println!(
            "hyper-idle: N capped at {most}: two descriptors per connection (client and \
             server in one process) and `ulimit -n` is {}; raise it (up to `ulimit -Hn`) for \
             more.\n",
            fd_limit.unwrap_or(0)
        );
    }
    let idle_window = if quick {
        ms(500)
    } else {
        Duration::from_secs(3)
    };
    let cut_after = if quick {
        ms(300)
    } else {
        Duration::from_secs(1)
    };

    for &n in &sizes {
        // Warm-up: creates the runtime's default wheel and lets the runtime's, the wheel's
        // and the allocator's pools grow to N connections once, so that neither measured
        // timer pays for that alone.
        for timer in [Timer::Wheel, Timer::Tokio] {
            let _ = hold(n, timer, Duration::from_secs(60), Duration::ZERO).await;
        }
        let mut held = Vec::new();
        let mut cut = Vec::new();
        for timer in [Timer::Wheel, Timer::Tokio] {
            held.push((
                timer,
                hold(n, timer, Duration::from_secs(60), idle_window).await,
            ));
            cut.push((timer, cut_off(n, timer, cut_after).await));
        }
        println!(
            "### hyper-idle: {n} connections with an incomplete request head, header-read \
             timeout 60 s\n"
        );
        println!(
            "| hyper timer | bytes per connection (all of it) | CPU ticks over {:?} idle |",
            idle_window
        );
        println!("|---|---:|---:|");
        for (timer, h) in &held {
            println!(
                "| {} | {:.0} | {} |",
                timer.name(),
                h.bytes_per_conn,
                h.idle_ticks.map_or("n/a".into(), |t| t.to_string())
            );
        }
        if let [(_, ours), (_, tokio)] = &held[..] {
            println!(
                "\nDifference per connection (ours - Tokio's): {:+.0} bytes.\n",
                ours.bytes_per_conn - tokio.bytes_per_conn
            );
        }
        println!(
            "### hyper-idle: {n} connections cut off by a {cut_after:?} header-read timeout\n"
        );
        println!("| hyper timer | deadline to close p50 | p99 | max | closed early |");
        println!("|---|---:|---:|---:|---:|");
        for (timer, c) in &cut {
            println!(
                "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
                timer.name(),
                c.p50_ms,
                c.p99_ms,
                c.max_ms,
                c.early
            );
        }
        println!();
    }
    load(quick).await;
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Timer {
    Wheel,
    Tokio,
}

impl Timer {
    fn name(self) -> &'static str {
        match self {
            Timer::Wheel => "`HyperTimer` (wheel)",
            Timer::Tokio => "hyper-util `TokioTimer`",
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Counters the server's connection tasks keep.
#[derive(Default)]
struct Stats {
    started: AtomicUsize,
    finished: AtomicUsize,
    /// Per connection: seconds from the header-read deadline to the close (negative: early).
    late: Mutex<Vec<f64>>,
}

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Listeners for `n` connections: one per 20 000, so client ports never run out.
async fn listeners(n: usize) -> (Vec<TcpListener>, Vec<SocketAddr>) {
    let mut ls = Vec::new();
    for _ in 0..n.div_ceil(20_000).max(1) {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        ls.push(l);
    }
    let addrs = ls.iter().map(|l| l.local_addr().unwrap()).collect();
    (ls, addrs)
}

/// Serves every listener: HTTP/1 with `header_timeout` on `timer`; each connection records
/// how late after its deadline it ended in `stats`.
fn serve(
    listeners: Vec<TcpListener>,
    timer: Timer,
    header_timeout: Duration,
    stats: &Arc<Stats>,
) -> Vec<JoinHandle<()>> {
    listeners
        .into_iter()
        .map(|listener| {
            let stats = Arc::clone(stats);
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let stats = Arc::clone(&stats);
                    tokio::spawn(async move {
                        stats.started.fetch_add(1, Relaxed);
                        let start = Instant::now();
                        let mut builder = http1::Builder::new();
                        builder.header_read_timeout(header_timeout);
                        match timer {
                            Timer::Wheel => builder.timer(HyperTimer::new()),
                            Timer::Tokio => builder.timer(TokioTimer::new()),
                        };
                        let io = TokioIo::new(tcp);
                        let _ = builder.serve_connection(io, service_fn(hello)).await;
                        let late = start.elapsed().as_secs_f64() - header_timeout.as_secs_f64();
                        stats.late.lock().unwrap().push(late);
                        stats.finished.fetch_add(1, Relaxed);
                    });
                }
            })
        })
        .collect()
}

/// Opens `n` client connections, 64 at a time, each sending an incomplete request head.
/// (With 256 at a time, every batch here waited about 1 s: some SYNs were dropped on
/// loopback and retransmitted after the initial 1 s timeout.)
async fn open_clients(addrs: &[SocketAddr], n: usize, clients: &mut Vec<TcpStream>) {
    let mut next = 0;
    while next < n {
        let batch: Vec<_> = (next..n.min(next + 64))
            .map(|i| {
                let addr = addrs[i % addrs.len()];
                tokio::spawn(async move {
                    let mut tcp = TcpStream::connect(addr).await?;
                    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await?;
                    Ok::<_, io::Error>(tcp)
                })
            })
            .collect();
        next += batch.len();
        for task in batch {
            clients.push(task.await.unwrap().expect("connect over loopback"));
        }
    }
}

/// Waits (up to `limit`) until `done()`; whether it became true.
async fn wait_until(done: impl Fn() -> bool, limit: Duration) -> bool {
    let give_up = Instant::now() + limit;
    while !done() {
        if Instant::now() > give_up {
            return false;
        }
        tokio::time::sleep(ms(10)).await;
    }
    true
}

struct Held {
    bytes_per_conn: f64,
    idle_ticks: Option<u64>,
}

/// Phase 1: `n` connections held open; memory per connection and CPU over `idle`.
async fn hold(n: usize, timer: Timer, header_timeout: Duration, idle: Duration) -> Held {
    let (ls, addrs) = listeners(n).await;
    let stats = Arc::new(Stats::default());
    let mut clients = Vec::with_capacity(n);
    stats.late.lock().unwrap().reserve(n);
    let before = allocated();
    let accept = serve(ls, timer, header_timeout, &stats);
    open_clients(&addrs, n, &mut clients).await;
    let all_started =
        wait_until(|| stats.started.load(Relaxed) == n, Duration::from_secs(60)).await;
    assert!(all_started, "the server accepted only some connections");
    tokio::time::sleep(ms(200)).await; // every connection polled, its timer armed
    let after = allocated();
    let ticks_before = cpu_ticks();
    tokio::time::sleep(idle).await;
    let idle_ticks = cpu_ticks().zip(ticks_before).map(|(a, b)| a - b);
    for task in accept {
        task.abort();
    }
    drop(clients);
    wait_until(
        || stats.finished.load(Relaxed) == n,
        Duration::from_secs(60),
    )
    .await;
    Held {
        bytes_per_conn: after.saturating_sub(before) as f64 / n as f64,
        idle_ticks,
    }
}

struct CutOff {
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    early: usize,
}

/// Phase 2: `n` connections cut off by a `timeout` header-read timeout; lateness.
async fn cut_off(n: usize, timer: Timer, timeout: Duration) -> CutOff {
    let (ls, addrs) = listeners(n).await;
    let stats = Arc::new(Stats::default());
    let accept = serve(ls, timer, timeout, &stats);
    let mut clients = Vec::with_capacity(n);
    open_clients(&addrs, n, &mut clients).await;
    let all_done = wait_until(
        || stats.finished.load(Relaxed) == n,
        timeout + Duration::from_secs(60),
    )
    .await;
    assert!(all_done, "some connections were never cut off");
    for task in accept {
        task.abort();
    }
    drop(clients);
    let mut late = std::mem::take(&mut *stats.late.lock().unwrap());
    late.sort_by(f64::total_cmp);
    let at = |q: f64| late[((late.len() - 1) as f64 * q).round() as usize] * 1e3;
    CutOff {
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
        early: late.iter().filter(|&&l| l < 0.0).count(),
    }
}

/// The process's user + system CPU time in clock ticks (`/proc/self/stat`), if readable.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14,
    // stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The soft limit on open files (`/proc/self/limits`), if readable.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[derive(Clone, Copy, Debug)]
enum Layer {
    /// tower's own `TimeoutLayer` (on `tokio::time`), hyper on `TokioTimer`.
    Tower,
    /// Ours, hyper on `TokioTimer`: only the request timeout differs from `Tower`.
    Ours,
    /// Ours, hyper on `HyperTimer`: every timer on the wheel.
    OursAll,
}

impl Layer {
    fn name(self) -> &'static str {
        match self {
            Layer::Tower => "tower `TimeoutLayer` (tokio::time) | `TokioTimer`",
            Layer::Ours => "our `TimeoutLayer` (wheel) | `TokioTimer`",
            Layer::OursAll => "our `TimeoutLayer` (wheel) | `HyperTimer`",
        }
    }
}

/// Phase 3: requests/s of keep-alive clients through a 10 s tower timeout per request.
async fn load(quick: bool) {
    let (conns, window, reps) = if quick {
        (8, ms(300), 1)
    } else {
        (64, Duration::from_secs(2), 3)
    };
    let layers = [Layer::Tower, Layer::Ours, Layer::OursAll];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); layers.len()];
    for _ in 0..reps {
        for (i, &layer) in layers.iter().enumerate() {
            rates[i].push(requests_per_sec(layer, conns, window).await);
        }
    }
    println!(
        "### hyper-idle: loopback load, {conns} keep-alive connections, a 10 s tower timeout \
         on each request ({window:?} per run, median of {reps})\n"
    );
    println!("| request timeout | hyper timer | requests/s | vs tower |");
    println!("|---|---|---:|---:|");
    let medians: Vec<f64> = rates
        .iter_mut()
        .map(|r| {
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        })
        .collect();
    for (layer, rate) in layers.iter().zip(&medians) {
        println!(
            "| {} | {:.0} | {:.2}x |",
            layer.name(),
            rate,
            rate / medians[0]
        );
    }
    println!();
}

async fn requests_per_sec(layer: Layer, conns: usize, window: Duration) -> f64 {
    const TIMEOUT: Duration = Duration::from_secs(10);
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let io = TokioIo::new(tcp);
                let mut builder = http1::Builder::new();
                let app = ServiceBuilder::new().service_fn(hello);
                let _ = match layer {
                    Layer::Tower => {
                        let svc = ServiceBuilder::new()
                            .layer(tower::timeout::TimeoutLayer::new(TIMEOUT))
                            .service(app);
                        builder.timer(TokioTimer::new());
                        builder
                            .serve_connection(io, TowerToHyperService::new(svc))
                            .await
                    }
                    Layer::Ours | Layer::OursAll => {
                        let svc = ServiceBuilder::new()
                            .layer(tokio_timing_wheel::tower::TimeoutLayer::new(TIMEOUT))
                            .service(app);
                        if matches!(layer, Layer::OursAll) {
                            builder.timer(HyperTimer::new());
                        } else {
                            builder.timer(TokioTimer::new());
                        }
                        builder
                            .serve_connection(io, TowerToHyperService::new(svc))
                            .await
                    }
                };
            });
        }
    });
    let start = Instant::now();
    let stop = start + window;
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            tokio::spawn(async move {
                let mut tcp = TcpStream::connect(addr)
                    .await
                    .expect("connect over loopback");
                let mut buf = vec![0u8; 4096];
                let mut done = 0u64;
                while Instant::now() < stop {
                    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                        .await
                        .unwrap();
                    let mut got = 0;
                    // One response at a time, each ending with its body "hello".
                    while !buf[..got].ends_with(b"hello") {
                        let n = tcp.read(&mut buf[got..]).await.unwrap();
                        assert!(n > 0, "the server closed a keep-alive connection");
                        got += n;
                    }
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for c in clients {
        total += c.await.unwrap();
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    server.abort();
    rate
}
