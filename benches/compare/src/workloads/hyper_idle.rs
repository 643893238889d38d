//! hyper-idle: idle hyper connections whose header-read timer runs on the wheel (`HyperTimer`)
//! or on Tokio's (hyper-util's `TokioTimer`), and a tower timeout on every request of a load.
//!
//! A hyper HTTP/1 server and its clients in this process, over loopback, on a multi-thread
//! runtime (`--workers`); one `http1::Builder` per connection with a header-read timeout, so one
//! timer per connection, that timer wrapped in a recorder of the deadlines hyper gives it
//! (`sleep_until`, `reset`; no allocation, the same for both). Each measurement on a fresh
//! runtime, first warmed up with 64 connections; the systems interleaved, medians:
//!
//! 1. **held**: N clients each send an incomplete request head and wait; the server holds every
//!    connection under a 60 s header-read timeout. Bytes allocated per connection (the counting
//!    allocator, [`crate::alloc`], from before the first connect until every connection's timer
//!    is armed: both sockets, hyper's connection, its task, the timer), then the CPU time of the
//!    runtime's threads over 2 s of idle (`/proc/self/task/*/schedstat`; the summary calls two
//!    figures level when both stay under 0.1% of one CPU over that spell, fractions of a
//!    millisecond whose ratio is noise).
//! 2. **cut off**: the same with a 1 s header-read timeout, which closes every connection (the
//!    first while later ones still connect): time from the deadline hyper set to
//!    `serve_connection` returning in the connection's task, p50 / p99 / max, and how many
//!    closed before their deadline (none may).
//! 3. **load**: 64 keep-alive clients send requests back to back, one at a time each, for 2 s,
//!    through a tower timeout of 10 s per request: requests/s with tower's `TimeoutLayer`
//!    (`tokio::time`) and with ours (`tokio_timing_wheel::tower::TimeoutLayer`), hyper on
//!    `TokioTimer` in both, and ours with `HyperTimer` as well (every timer on the wheel).
//!
//! N is 10 000 and 50 000 (`--quick`: 200 connections, shorter windows). Client and server
//! live in this process, so a connection takes two file descriptors: a size beyond what the soft
//! `ulimit -n` leaves (after the descriptors already open and a reserve) is capped to it, the
//! output saying so, and a size whose connections still fail (the limit, ephemeral ports, the
//! listen backlog) is skipped, its rows saying why. Raise the limit with `ulimit -n` (up to
//! `ulimit -Hn`). One listener per 20 000 connections, so that client ports never run out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::rt::{Sleep, Timer};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_timing_wheel::hyper::HyperTimer;
use tower::ServiceBuilder;

use super::{Ctx, Workload};
use crate::alloc::Meter;
use crate::cpu::thread_cpu_ns;
use crate::lateness::lateness_stats;
use crate::report::{
    interleaved, print_table, rate, ratio, ratio_above_noise, ratios, unmeasured_row, Reps, Summary,
};
use crate::rt::{run_task, Flavor};

pub(crate) const WORKLOAD: Workload = Workload {
    name: "hyper-idle",
    about: "10k idle hyper connections: bytes, idle CPU, header-timeout lateness; tower req/s",
    run,
};

/// Connections opened at once (with 256, SYNs were dropped on loopback and retried after 1 s).
const CONNECT_BATCH: usize = 64;
/// Connections per listener, so that the client ports of one destination never run out.
const PER_LISTENER: usize = 20_000;
/// Descriptors left to the rest of the process beyond those open when a size is chosen.
const FD_RESERVE: usize = 64;
/// The warm-up's connections, opened and closed on each fresh runtime before measuring.
const WARM_UP: usize = 64;
/// The tower timeout of the load.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The held connections' header-read timeout: far beyond the measurement.
const HELD_TIMEOUT: Duration = Duration::from_secs(60);

/// The timer hyper gets for its header-read timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    Tokio,
}

const SYSTEMS: [System; 2] = [System::Ours, System::Tokio];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "ours: HyperTimer",
            System::Tokio => "hyper-util TokioTimer",
        }
    }

    /// Names the runtime's threads (at most 15 bytes: see `thread_ticks`).
    fn thread_name(self) -> &'static str {
        match self {
            System::Ours => "hyper-ours",
            System::Tokio => "hyper-tokio",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The server and its clients
// ---------------------------------------------------------------------------------------------

/// What a run's server records, shared by its connection tasks and their timers.
#[derive(Debug)]
struct Probe {
    /// The time origin of `deadlines` and of the close times.
    base: std::time::Instant,
    /// Per connection (in accept order): its header-read deadline in ns after `base`, 0 until
    /// hyper sets one.
    deadlines: Vec<AtomicU64>,
    accepted: AtomicUsize,
    /// Connections whose header-read timer hyper has set.
    armed: AtomicUsize,
    finished: AtomicUsize,
    /// Per finished connection: ns from its deadline to its close (negative: early).
    late: Mutex<Vec<i64>>,
    /// Why a listener stopped accepting, if one did.
    accept_error: Mutex<Option<String>>,
}

impl Probe {
    /// A probe for `n` connections, its storage allocated now (before any meter starts).
    fn new(n: usize) -> Arc<Probe> {
        Arc::new(Probe {
            base: std::time::Instant::now(),
            deadlines: (0..n).map(|_| AtomicU64::new(0)).collect(),
            accepted: AtomicUsize::new(0),
            armed: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            late: Mutex::new(Vec::with_capacity(n)),
            accept_error: Mutex::new(None),
        })
    }

    fn ns_since_base(&self, at: std::time::Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn accept_error(&self) -> Option<String> {
        self.accept_error.lock().unwrap().clone()
    }
}

/// The timer under test, recording the deadline hyper sets on connection `conn`.
struct Recorded<T> {
    inner: T,
    probe: Arc<Probe>,
    conn: usize,
}

impl<T> Recorded<T> {
    fn record(&self, deadline: std::time::Instant) {
        if let Some(slot) = self.probe.deadlines.get(self.conn) {
            let ns = self.probe.ns_since_base(deadline).max(1);
            if slot.swap(ns, Relaxed) == 0 {
                self.probe.armed.fetch_add(1, Relaxed);
            }
        }
    }
}

impl<T: Timer> Timer for Recorded<T> {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn Sleep>> {
        self.record(deadline);
        self.inner.sleep_until(deadline)
    }

    fn now(&self) -> std::time::Instant {
        self.inner.now()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: std::time::Instant) {
        self.record(new_deadline);
        self.inner.reset(sleep, new_deadline);
    }
}

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Binds enough loopback listeners for `n` connections.
async fn listeners(n: usize) -> Result<(Vec<TcpListener>, Vec<SocketAddr>), String> {
    let mut ls = Vec::new();
    for _ in 0..n.div_ceil(PER_LISTENER).max(1) {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind 127.0.0.1: {e}"))?;
        ls.push(l);
    }
    let addrs = ls.iter().filter_map(|l| l.local_addr().ok()).collect();
    Ok((ls, addrs))
}

/// Serves every listener: HTTP/1, one builder per connection with a header-read timeout of
/// `header_timeout` on `system`'s timer (recorded in `probe`); each connection's task records
/// when it ended.
fn serve(
    listeners: Vec<TcpListener>,
    system: System,
    header_timeout: Duration,
    probe: &Arc<Probe>,
) -> Vec<JoinHandle<()>> {
    listeners
        .into_iter()
        .map(|listener| {
            let probe = Arc::clone(probe);
            tokio::spawn(async move {
                loop {
                    let tcp = match listener.accept().await {
                        Ok((tcp, _)) => tcp,
                        Err(e) => {
                            *probe.accept_error.lock().unwrap() = Some(format!("accept: {e}"));
                            return;
                        }
                    };
                    let conn = probe.accepted.fetch_add(1, Relaxed);
                    let probe = Arc::clone(&probe);
                    tokio::spawn(async move {
                        let mut builder = http1::Builder::new();
                        builder.header_read_timeout(header_timeout);
                        let probe2 = Arc::clone(&probe);
                        match system {
                            System::Ours => builder.timer(Recorded {
                                inner: HyperTimer::new(),
                                probe: probe2,
                                conn,
                            }),
                            System::Tokio => builder.timer(Recorded {
                                inner: TokioTimer::new(),
                                probe: probe2,
                                conn,
                            }),
                        };
                        let served = builder.serve_connection(TokioIo::new(tcp), service_fn(hello));
                        let _ = served.await;
                        let closed = probe.ns_since_base(std::time::Instant::now());
                        if let Some(d) = probe.deadlines.get(conn) {
                            let deadline = d.load(Relaxed);
                            if deadline != 0 {
                                let late = closed as i64 - deadline as i64;
                                probe.late.lock().unwrap().push(late);
                            }
                        }
                        probe.finished.fetch_add(1, Relaxed);
                    });
                }
            })
        })
        .collect()
}

/// Opens `n` client connections, [`CONNECT_BATCH`] at a time, each sending an incomplete
/// request head, into `clients`. Stops at the first failure, saying why.
async fn open_clients(
    addrs: &[SocketAddr],
    n: usize,
    clients: &mut Vec<TcpStream>,
) -> Result<(), String> {
    let mut next = 0;
    while next < n {
        let batch: Vec<_> = (next..n.min(next + CONNECT_BATCH))
            .map(|i| {
                let addr = addrs[i % addrs.len()];
                tokio::spawn(async move {
                    let mut tcp = TcpStream::connect(addr).await?;
                    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await?;
                    Ok::<_, std::io::Error>(tcp)
                })
            })
            .collect();
        next += batch.len();
        let mut failed = None;
        for task in batch {
            match task.await.expect("a connecting task panicked") {
                Ok(tcp) => clients.push(tcp),
                Err(e) => failed = failed.or(Some(format!("connect: {e}"))),
            }
        }
        if let Some(why) = failed {
            return Err(why);
        }
    }
    Ok(())
}

/// Waits until `count()` reaches `n`: an error if a listener failed, or after `limit`.
async fn wait_for(
    probe: &Probe,
    what: &str,
    count: impl Fn(&Probe) -> usize,
    n: usize,
    limit: Duration,
) -> Result<(), String> {
    let give_up = std::time::Instant::now() + limit;
    loop {
        let c = count(probe);
        if c >= n {
            return Ok(());
        }
        if let Some(why) = probe.accept_error() {
            return Err(why);
        }
        if std::time::Instant::now() > give_up {
            return Err(format!(
                "only {c} of {n} connections {what} after {limit:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A server whose connections are held or cut off, and its clients.
struct Run {
    probe: Arc<Probe>,
    accept: Vec<JoinHandle<()>>,
    clients: Vec<TcpStream>,
    addrs: Vec<SocketAddr>,
}

impl Run {
    /// Binds and serves, for `n` connections (no client yet).
    async fn start(n: usize, system: System, header_timeout: Duration) -> Result<Run, String> {
        let (ls, addrs) = listeners(n).await?;
        let probe = Probe::new(n);
        Ok(Run {
            accept: serve(ls, system, header_timeout, &probe),
            probe,
            clients: Vec::with_capacity(n),
            addrs,
        })
    }

    /// Opens the `n` clients and waits until every connection's timer is armed.
    async fn connect(&mut self, n: usize) -> Result<(), String> {
        open_clients(&self.addrs, n, &mut self.clients).await?;
        let limit = Duration::from_secs(30) + Duration::from_millis(n as u64);
        let armed = |p: &Probe| p.armed.load(Relaxed);
        wait_for(&self.probe, "had their timer armed", armed, n, limit).await
    }

    /// Closes the clients and waits (briefly) for the server's side to end.
    async fn close(self) {
        for task in &self.accept {
            task.abort();
        }
        let opened = self.clients.len();
        drop(self.clients);
        let finished = |p: &Probe| p.finished.load(Relaxed);
        let _ = wait_for(
            &self.probe,
            "ended",
            finished,
            opened,
            Duration::from_secs(30),
        )
        .await;
    }
}

/// Opens and closes [`WARM_UP`] connections (at most `n`, the size measured next): the
/// runtime's and the timer's first allocations.
async fn warm_up(system: System, n: usize) -> Result<(), String> {
    let n = n.min(WARM_UP);
    let mut run = Run::start(n, system, HELD_TIMEOUT).await?;
    let connected = run.connect(n).await;
    run.close().await;
    connected
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: held and cut-off connections
// ---------------------------------------------------------------------------------------------

/// `[bytes per connection, runtime-thread CPU ms over idle]` for `n` held connections.
fn held(system: System, workers: usize, n: usize, idle: Duration) -> Result<[f64; 2], String> {
    let name = system.thread_name();
    let rt = Flavor::MultiThread.runtime(workers, name);
    run_task(rt, async move {
        warm_up(system, n).await?;
        let mut run = Run::start(n, system, HELD_TIMEOUT).await?;
        let meter = Meter::start();
        let connected = run.connect(n).await;
        let bytes = meter.net();
        drop(meter);
        if let Err(why) = connected {
            run.close().await;
            return Err(why);
        }
        let cpu0 = thread_cpu_ns(name);
        tokio::time::sleep(idle).await;
        let cpu = thread_cpu_ns(name).saturating_sub(cpu0) as f64 / 1e6;
        run.close().await;
        Ok([bytes.max(0) as f64 / n as f64, cpu])
    })
}

/// `[p50, p99, max (µs), closed early]` from the deadline to the close of `n` connections cut
/// off by a `timeout` header-read timeout.
fn cut_off(
    system: System,
    workers: usize,
    n: usize,
    timeout: Duration,
) -> Result<[f64; 4], String> {
    let rt = Flavor::MultiThread.runtime(workers, system.thread_name());
    run_task(rt, async move {
        warm_up(system, n).await?;
        let mut run = Run::start(n, system, timeout).await?;
        let connected = run.connect(n).await;
        let limit = timeout + Duration::from_secs(30);
        let finished = |p: &Probe| p.finished.load(Relaxed);
        let ended = match connected {
            Ok(()) => wait_for(&run.probe, "were cut off", finished, n, limit).await,
            Err(why) => Err(why),
        };
        let late = std::mem::take(&mut *run.probe.late.lock().unwrap());
        run.close().await;
        ended.map(|()| lateness_stats(&late))
    })
}

// ---------------------------------------------------------------------------------------------
// 3: load through a tower timeout
// ---------------------------------------------------------------------------------------------

/// The request timeout and hyper's timer of the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// tower's `TimeoutLayer` (on `tokio::time`), hyper on `TokioTimer`.
    Tower,
    /// Ours, hyper on `TokioTimer`: only the request timeout differs from `Tower`.
    Ours,
    /// Ours, hyper on `HyperTimer`: every timer on the wheel.
    OursAll,
}

const LAYERS: [Layer; 3] = [Layer::Tower, Layer::Ours, Layer::OursAll];

impl Layer {
    fn name(self) -> &'static str {
        match self {
            Layer::Tower => "tower TimeoutLayer, hyper on TokioTimer",
            Layer::Ours => "ours: TimeoutLayer, hyper on TokioTimer",
            Layer::OursAll => "ours: TimeoutLayer, hyper on HyperTimer",
        }
    }

    /// Serves one connection with this layer's timeout and timer.
    async fn serve(self, tcp: TcpStream) {
        let io = TokioIo::new(tcp);
        let mut builder = http1::Builder::new();
        if self == Layer::OursAll {
            builder.timer(HyperTimer::new());
        } else {
            builder.timer(TokioTimer::new());
        }
        let app = ServiceBuilder::new().service_fn(hello);
        let _ = if self == Layer::Tower {
            let svc = ServiceBuilder::new()
                .layer(tower::timeout::TimeoutLayer::new(REQUEST_TIMEOUT))
                .service(app);
            builder
                .serve_connection(io, TowerToHyperService::new(svc))
                .await
        } else {
            let svc = ServiceBuilder::new()
                .layer(tokio_timing_wheel::tower::TimeoutLayer::new(
                    REQUEST_TIMEOUT,
                ))
                .service(app);
            builder
                .serve_connection(io, TowerToHyperService::new(svc))
                .await
        };
    }

    /// Requests per second of `conns` keep-alive clients over `window`, on a fresh runtime.
    fn requests_per_sec(
        self,
        workers: usize,
        conns: usize,
        window: Duration,
    ) -> Result<f64, String> {
        let rt = Flavor::MultiThread.runtime(workers, "hyper-load");
        run_task(rt, async move {
            let (mut ls, addrs) = listeners(1).await?;
            let listener = ls.pop().expect("one listener");
            let server = tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    tokio::spawn(self.serve(tcp));
                }
            });
            let addr = addrs[0];
            let start = std::time::Instant::now();
            let stop = start + window;
            let clients: Vec<_> = (0..conns)
                .map(|_| tokio::spawn(requests_until(addr, stop)))
                .collect();
            let mut total = 0;
            let mut failed = None;
            for c in clients {
                match c.await.expect("a client task panicked") {
                    Ok(done) => total += done,
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            let elapsed = start.elapsed();
            server.abort();
            match failed {
                Some(why) => Err(why),
                None => Ok(total as f64 / elapsed.as_secs_f64()),
            }
        })
    }
}

/// One keep-alive client: requests one at a time until `stop`; how many were answered.
async fn requests_until(addr: SocketAddr, stop: std::time::Instant) -> Result<u64, String> {
    let io = |e: std::io::Error| format!("load client: {e}");
    let mut tcp = TcpStream::connect(addr).await.map_err(io)?;
    let mut buf = vec![0u8; 4096];
    let mut done = 0u64;
    while std::time::Instant::now() < stop {
        tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .map_err(io)?;
        // Each response ends with its body, "hello".
        let mut got = 0;
        while !buf[..got].ends_with(b"hello") {
            let n = tcp.read(&mut buf[got..]).await.map_err(io)?;
            if n == 0 || got + n == buf.len() {
                return Err("load client: the server closed or garbled a response".into());
            }
            got += n;
        }
        done += 1;
    }
    Ok(done)
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// The soft limit on open files, from `/proc/self/limits`.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Descriptors this process has open now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// The sizes to measure: `wanted`, each capped to the connections the descriptor limit leaves
/// room for (two descriptors each), repeats dropped; says which were capped or skipped.
fn sizes(wanted: &[usize]) -> Vec<usize> {
    let Some(limit) = open_files_limit() else {
        return wanted.to_vec();
    };
    let open = open_fds();
    let room = limit.saturating_sub(open + FD_RESERVE) / 2;
    let mut out: Vec<usize> = Vec::new();
    let mut notes = Vec::new();
    for &n in wanted {
        let m = n.min(room);
        if m == n {
            out.push(n);
        } else if m > 0 && !out.contains(&m) {
            out.push(m);
            notes.push(format!("N = {n} measured at {m}"));
        } else {
            notes.push(format!("N = {n} skipped"));
        }
    }
    if !notes.is_empty() {
        println!(
            "`ulimit -n` is {limit}: room for {room} connections (two descriptors each, client \
             and server being in this process, beside the {open} open now and a reserve of \
             {FD_RESERVE}), so {}. Raise it (up to `ulimit -Hn`) for more.\n",
            notes.join(", ")
        );
    }
    out
}

/// [`interleaved`] for measurements that may fail: a system that fails is not asked again,
/// and its result is the reason.
fn interleaved_or_why<S: PartialEq, const K: usize>(
    reps: usize,
    systems: &[S],
    mut measure: impl FnMut(&S) -> Result<[f64; K], String>,
) -> Vec<Result<Reps<K>, String>> {
    let mut why: Vec<String> = systems.iter().map(|_| String::new()).collect();
    let got = interleaved(reps, systems, |sys| {
        measure(sys)
            .map_err(|e| {
                let k = systems.iter().position(|s| s == sys).expect("one of them");
                why[k] = e;
            })
            .ok()
    });
    got.into_iter()
        .zip(why)
        .map(|(r, why)| r.ok_or(why))
        .collect()
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let wanted = ctx.size(&[10_000, 50_000][..], &[200][..]);
    let idle = ctx.size(Duration::from_secs(2), Duration::from_millis(300));
    let cut_after = ctx.size(Duration::from_secs(1), Duration::from_millis(300));
    let conns = ctx.size(64, 8);
    let window = ctx.size(Duration::from_secs(2), Duration::from_millis(300));
    let w = ctx.workers;
    println!(
        "A hyper HTTP/1 server and its clients on one {} runtime, over loopback; one timer per \
         connection (hyper's header-read timeout).\n",
        Flavor::MultiThread.label(w)
    );
    let sizes = sizes(wanted);
    if sizes.is_empty() {
        for metric in ["bytes per held connection", "header-read deadline to close"] {
            summary.add_unmeasured(metric, System::Tokio.name(), "skipped: `ulimit -n` too low");
        }
    }
    for n in sizes {
        held_tables(ctx, summary, n, idle);
        cut_off_tables(ctx, summary, n, cut_after);
    }
    load_table(ctx, summary, conns, window);
}

fn held_tables(ctx: &Ctx, summary: &mut Summary, n: usize, idle: Duration) {
    println!("### {n} held connections (incomplete request heads, header-read timeout 60 s)\n");
    let w = ctx.workers;
    let reps = interleaved_or_why(ctx.reps, &SYSTEMS, |&sys| held(sys, w, n, idle));
    let bytes = |x: f64| format!("{x:.0}");
    let ours = reps[0].as_ref().ok().map(|r| r.medians());
    let rows: Vec<_> = SYSTEMS
        .iter()
        .zip(&reps)
        .map(|(sys, r)| match r {
            Ok(r) => vec![
                sys.name().to_string(),
                r.shown(0, bytes),
                match (sys, ours) {
                    (System::Tokio, Some(o)) => ratio(o[0], r.median(0), false),
                    _ => "-".to_string(),
                },
                format!("{:.1}", r.median(1)),
            ],
            Err(why) => unmeasured_row(sys.name(), 4, why),
        })
        .collect();
    let idle_cpu = format!("runtime CPU ms over {idle:?} idle");
    print_table(
        &[
            "hyper timer",
            "bytes per connection",
            "ours vs it",
            &idle_cpu,
        ],
        &rows,
    );
    let peer = System::Tokio.name();
    let metric = format!("bytes per held connection, N = {n}");
    let (Some(ours), Ok(theirs)) = (ours, &reps[1]) else {
        summary.add_unmeasured(&metric, peer, "failed");
        return;
    };
    let theirs = theirs.medians();
    println!(
        "Per connection, ours allocates {:+.0} bytes against Tokio's timer (both sockets, \
         hyper's connection and its task included).\n",
        ours[0] - theirs[0]
    );
    summary.add(&metric, peer, [ours[0], theirs[0]], false, |x| {
        format!("{x:.0} B")
    });
    // Both runtimes sleep through the idle spell: their CPU is fractions of a millisecond, whose
    // ratio moves 3x from run to run. Under 0.1% of one CPU over the spell, call it level.
    let ms = |x: f64| format!("{x:.1} ms");
    let noise_ms = idle.as_secs_f64(); // 0.1% of 1,000 ms a second
    summary.add_text(
        &format!("runtime CPU over {idle:?} idle, N = {n}"),
        &ms(ours[1]),
        peer,
        &ms(theirs[1]),
        &ratio_above_noise(ours[1], theirs[1], false, noise_ms, ms),
    );
}

fn cut_off_tables(ctx: &Ctx, summary: &mut Summary, n: usize, timeout: Duration) {
    println!("### {n} connections cut off by a {timeout:?} header-read timeout\n");
    let w = ctx.workers;
    let reps = interleaved_or_why(ctx.reps, &SYSTEMS, |&sys| cut_off(sys, w, n, timeout));
    let ms = |x: f64| format!("{:.2}", x / 1e3);
    let ours = reps[0].as_ref().ok().map(|r| r.medians_but_max(&[3]));
    let rows: Vec<_> = SYSTEMS
        .iter()
        .zip(&reps)
        .map(|(sys, r)| match r {
            Ok(r) => {
                let m = r.medians_but_max(&[3]);
                vec![
                    sys.name().to_string(),
                    r.shown(0, ms),
                    r.shown(1, ms),
                    r.shown(2, ms),
                    format!("{:.0}", m[3]),
                    match (sys, ours) {
                        (System::Tokio, Some(o)) => ratios(&o[..3], &m[..3], false),
                        _ => "-".to_string(),
                    },
                ]
            }
            Err(why) => unmeasured_row(sys.name(), 6, why),
        })
        .collect();
    print_table(
        &[
            "hyper timer",
            "deadline to close p50 ms",
            "p99 ms",
            "max ms",
            "closed early (must be 0)",
            "ours vs it (p50 / p99 / max)",
        ],
        &rows,
    );
    let peer = System::Tokio.name();
    let metric = format!("header-read deadline to close p50 / p99 / max, N = {n}");
    let (Some(ours), Ok(theirs)) = (ours, &reps[1]) else {
        summary.add_unmeasured(&metric, peer, "failed");
        return;
    };
    let theirs = theirs.medians_but_max(&[3]);
    summary.add_all(&metric, peer, &ours[..3], &theirs[..3], false, |x| {
        format!("{:.2} ms", x / 1e3)
    });
    summary.add_text(
        &format!("connections closed before the deadline (must be 0), N = {n}"),
        &format!("{:.0}", ours[3]),
        peer,
        &format!("{:.0}", theirs[3]),
        if ours[3] == 0.0 { "none" } else { "EARLY" },
    );
}

fn load_table(ctx: &Ctx, summary: &mut Summary, conns: usize, window: Duration) {
    println!(
        "### Load: {conns} keep-alive clients for {window:?}, a {REQUEST_TIMEOUT:?} tower \
         timeout on each request\n"
    );
    let w = ctx.workers;
    let reps = interleaved_or_why(ctx.reps, &LAYERS, |layer| {
        layer.requests_per_sec(w, conns, window).map(|r| [r])
    });
    let tower = reps[0].as_ref().ok().map(|r| r.median(0));
    let rows: Vec<_> = LAYERS
        .iter()
        .zip(&reps)
        .map(|(layer, r)| match r {
            Ok(r) => vec![
                layer.name().to_string(),
                r.shown(0, rate),
                match (layer, tower) {
                    (Layer::Tower, _) | (_, None) => "-".to_string(),
                    (_, Some(t)) => ratio(r.median(0), t, true),
                },
            ],
            Err(why) => unmeasured_row(layer.name(), 3, why),
        })
        .collect();
    print_table(
        &["request timeout, hyper timer", "requests/s", "vs tower's"],
        &rows,
    );
    let peer = Layer::Tower.name();
    for layer in [Layer::Ours, Layer::OursAll] {
        let metric = format!("requests/s, {}", layer.name());
        match (&reps[layer as usize], tower) {
            (Ok(r), Some(t)) => summary.add(&metric, peer, [r.median(0), t], true, rate),
            _ => summary.add_unmeasured(&metric, peer, "failed"),
        }
    }
}
