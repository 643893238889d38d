//! `HyperTimer`: hyper's `rt::Timer` on the wheel, alone in paused time and under a real
//! hyper server on loopback.
#![cfg(feature = "hyper")]

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::rt::Timer as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::hyper::HyperTimer;
use tokio_timing_wheel::Timer;

use common::{ms, step};

/// The address of the boxed sleep, to check that `reset` keeps the same one.
fn address(sleep: &Pin<Box<dyn hyper::rt::Sleep>>) -> *const () {
    let r: &dyn hyper::rt::Sleep = &**sleep;
    (r as *const dyn hyper::rt::Sleep).cast()
}

#[tokio::test(start_paused = true)]
async fn now_is_tokio_clock_and_sleep_until_takes_its_instants() {
    let timer = HyperTimer::new();
    let start = timer.now();
    assert_eq!(Instant::from_std(start), Instant::now());
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(
        timer.now() - start,
        Duration::from_secs(3600),
        "paused time"
    );

    let deadline = timer.now() + Duration::from_secs(5);
    let begun = Instant::now();
    timer.sleep_until(deadline).await;
    assert_eq!(begun.elapsed(), Duration::from_secs(5));
    assert_eq!(timer.now(), deadline);
}

#[tokio::test(start_paused = true)]
async fn sleep_completes_at_its_duration_never_before() {
    let timer = HyperTimer::new();
    let mut sleep = task::spawn(timer.sleep(ms(250)));
    assert_pending!(sleep.poll());
    step(ms(249)).await;
    assert_pending!(sleep.poll());
    step(ms(1)).await;
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_moves_the_same_boxed_sleep_later_and_earlier() {
    let timer = HyperTimer::new();
    let start = timer.now();
    let mut sleep = timer.sleep(Duration::from_secs(10));
    let before = address(&sleep);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());

    timer.reset(&mut sleep, start + Duration::from_secs(30));
    assert_eq!(
        address(&sleep),
        before,
        "reset must move the sleep in place"
    );
    let mut sleep = task::spawn(sleep);
    step(Duration::from_secs(29)).await;
    assert_pending!(sleep.poll(), "still waiting for the later deadline");
    step(Duration::from_secs(1)).await;
    assert_ready!(sleep.poll());

    // Earlier, and after completion: the same box again.
    let mut sleep = sleep.into_inner();
    let again = timer.now() + ms(100);
    timer.reset(&mut sleep, again);
    assert_eq!(address(&sleep), before);
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    step(ms(100)).await;
    assert_ready!(sleep.poll());
}

/// A sleep of another timer, which never completes by itself.
struct Foreign;

impl Future for Foreign {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl hyper::rt::Sleep for Foreign {}

#[tokio::test(start_paused = true)]
async fn reset_replaces_a_sleep_that_is_not_ours() {
    let timer = HyperTimer::new();
    let mut sleep: Pin<Box<dyn hyper::rt::Sleep>> = Box::pin(Foreign);
    assert!(sleep.is::<Foreign>());
    timer.reset(&mut sleep, timer.now() + ms(50));
    assert!(!sleep.is::<Foreign>(), "replaced, not silently kept");
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    step(ms(50)).await;
    assert_ready!(sleep.poll(), "the new deadline holds");
}

#[tokio::test(start_paused = true)]
async fn sleeps_of_an_explicit_timer_count_in_its_pending() {
    let wheel = Timer::builder().tick(ms(10)).build().unwrap();
    let timer = HyperTimer::from(wheel.clone());
    let mut sleeps: Vec<_> = (1..=3)
        .map(|i| task::spawn(timer.sleep(Duration::from_secs(i))))
        .collect();
    for s in &mut sleeps {
        assert_pending!(s.poll());
    }
    assert_eq!(wheel.pending(), 3);
    assert_eq!(Timer::current().pending(), 0, "none on the default timer");
    let mut until = task::spawn(timer.sleep_until(timer.now() + Duration::from_secs(9)));
    assert_pending!(until.poll());
    assert_eq!(wheel.pending(), 4);
    drop(sleeps);
    drop(until);
    assert_eq!(wheel.pending(), 0, "dropping hyper's sleeps cancels them");
}

#[tokio::test(start_paused = true)]
async fn reset_after_the_default_timer_shut_down_waits_as_a_new_sleep_would() {
    let timer = HyperTimer::new();
    let mut sleep = task::spawn(timer.sleep(ms(10)));
    assert_pending!(sleep.poll());
    let old = Timer::current();
    old.shutdown();
    assert_pending!(
        sleep.poll(),
        "the pending sleep goes on, on the new default timer"
    );

    // Later sleeps go to the runtime's new default timer, and so does a reset one (hyper
    // resets an HTTP/2 connection's keep-alive sleep after every pong).
    let deadline = timer.now() + ms(100);
    let mut fresh = task::spawn(timer.sleep_until(deadline));
    let mut sleep = sleep.into_inner();
    timer.reset(&mut sleep, deadline);
    let mut sleep = task::spawn(sleep);
    assert_pending!(fresh.poll());
    assert_pending!(sleep.poll(), "a new deadline, on a working timer");
    step(ms(99)).await;
    assert_pending!(fresh.poll());
    assert_pending!(sleep.poll());
    step(ms(1)).await;
    assert_ready!(fresh.poll());
    assert_ready!(sleep.poll());
    assert!(!Timer::current().is_shutdown());
}

/// hyper cannot tell a sleep cut short by a shutdown from one whose deadline came: a sleep of
/// the runtime's default timer pending when that timer shuts down (a header-read timeout, or
/// an HTTP/2 keep-alive waiting for its pong) goes on, on the runtime's new default timer, and
/// completes at its deadline, not at the shutdown.
#[tokio::test(start_paused = true)]
async fn a_pending_sleep_outlives_a_shutdown_of_the_default_timer() {
    let timer = HyperTimer::new();
    let start = timer.now();
    let mut by_duration = task::spawn(timer.sleep(ms(100)));
    let mut by_instant = task::spawn(timer.sleep_until(start + ms(100)));
    assert_pending!(by_duration.poll());
    assert_pending!(by_instant.poll());
    step(ms(30)).await;
    Timer::current().shutdown();
    assert!(by_duration.is_woken() && by_instant.is_woken());
    assert_pending!(by_duration.poll(), "not at the shutdown, 70 ms early");
    assert_pending!(by_instant.poll(), "not at the shutdown, 70 ms early");
    assert_eq!(Timer::current().pending(), 2, "on the new default timer");
    step(ms(69)).await;
    assert_pending!(by_duration.poll());
    assert_pending!(by_instant.poll());
    step(ms(1)).await;
    assert!(by_duration.is_woken() && by_instant.is_woken());
    assert_ready!(by_duration.poll());
    assert_ready!(by_instant.poll());
    assert_eq!(timer.now(), start + ms(100));

    // An explicit timer has no successor: its sleeps complete at the shutdown.
    let wheel = Timer::builder().build().unwrap();
    let explicit = HyperTimer::from(wheel.clone());
    let mut sleep = task::spawn(explicit.sleep(ms(100)));
    assert_pending!(sleep.poll());
    wheel.shutdown();
    assert_ready!(sleep.poll());
}

/// After an explicit timer's shutdown, a sleep made or reset on it would complete at once,
/// and hyper would take that for its deadline: a header-read timeout closing every new
/// connection at once, hyper-util's pool idle task (which resets its sleep each time it
/// completes) spinning. They wait on Tokio's timer instead, to the deadline, on a timer with
/// or without `max_pending`.
#[tokio::test(start_paused = true)]
async fn sleeps_made_or_reset_after_an_explicit_timers_shutdown_wait_for_their_deadline() {
    for bounded in [false, true] {
        let mut builder = Timer::builder();
        if bounded {
            builder = builder.max_pending(8);
        }
        let wheel = builder.build().unwrap();
        let timer = HyperTimer::from(wheel.clone());
        let mut pending = task::spawn(timer.sleep(ms(100)));
        assert_pending!(pending.poll());
        wheel.shutdown();
        assert_ready!(
            pending.poll(),
            "pending at the shutdown: completes, as a Sleep does"
        );

        let start = timer.now();
        let mut by_duration = task::spawn(timer.sleep(ms(100)));
        let mut by_instant = task::spawn(timer.sleep_until(start + ms(100)));
        // The completed sleep, reset as hyper-util's pool idle task does.
        let mut reset = pending.into_inner();
        timer.reset(&mut reset, start + ms(50));
        let mut reset = task::spawn(reset);
        assert_pending!(by_duration.poll(), "bounded: {bounded}");
        assert_pending!(by_instant.poll(), "bounded: {bounded}");
        assert_pending!(reset.poll(), "bounded: {bounded}");
        step(ms(49)).await;
        assert_pending!(reset.poll());
        step(ms(1)).await;
        assert_ready!(reset.poll());

        // Reset again, as the pool idle task does after each round: a new wait, not a spin.
        let mut again = reset.into_inner();
        timer.reset(&mut again, timer.now() + ms(50));
        let mut again = task::spawn(again);
        assert_pending!(again.poll());
        step(ms(49)).await;
        assert_pending!(by_duration.poll());
        assert_pending!(by_instant.poll());
        assert_pending!(again.poll());
        step(ms(1)).await;
        assert_ready!(by_duration.poll());
        assert_ready!(by_instant.poll());
        assert_ready!(again.poll());
        assert_eq!(timer.now(), start + ms(100));
        assert_eq!(wheel.pending(), 0);
    }
}

#[test]
fn built_outside_a_runtime_clone_send_sync_and_short_debug() {
    fn assert_traits<T: Clone + Send + Sync + std::fmt::Debug + 'static>(_: &T) {}
    let timer = HyperTimer::new();
    assert_traits(&timer);
    assert_eq!(
        format!("{timer:?}"),
        "HyperTimer { timer: runtime default }"
    );
}

// ---- a real hyper server on loopback ---------------------------------------------------

const HEADER_TIMEOUT: Duration = Duration::from_millis(400);

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// An HTTP/1 server whose header-read timeout runs on `timer`; serves until dropped.
async fn serve(timer: HyperTimer) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let timer = timer.clone();
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .timer(timer)
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(tcp), service_fn(hello))
                    .await;
            });
        }
    });
    (addr, server)
}

/// Connects, sends `request`, then reads until the server closes: what it answered, and how
/// long after connecting (before the server can start its timer) the connection was closed.
async fn exchange(addr: SocketAddr, request: &[u8]) -> (String, Duration) {
    let sent = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer).await; // a reset counts as closed too
    (
        String::from_utf8_lossy(&answer).into_owned(),
        sent.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hyper_server_cuts_slow_headers_at_the_timeout_and_serves_complete_requests() {
    let wheel = Timer::builder().build().unwrap();
    let (addr, server) = serve(HyperTimer::from(wheel.clone())).await;
    let slow = (0..100).map(|_| tokio::spawn(exchange(addr, b"GET / HTTP/1.1\r\nhost: x\r\n")));
    let slow: Vec<_> = slow.collect();
    let complete: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(exchange(
                addr,
                b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            ))
        })
        .collect();
    for c in complete {
        let (answer, _) = c.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
    }
    tokio::time::sleep(HEADER_TIMEOUT / 2).await;
    assert!(
        wheel.pending() >= 1,
        "the slow clients' timers are in the wheel"
    );
    for s in slow {
        let (answer, closed_after) = s.await.unwrap();
        assert!(
            closed_after >= HEADER_TIMEOUT,
            "cut off early: {closed_after:?}"
        );
        assert!(
            closed_after < HEADER_TIMEOUT * 10,
            "cut off far too late: {closed_after:?}"
        );
        // hyper answers a header timeout with 408 or just closes; it never serves it.
        assert!(!answer.contains("200 OK"), "{answer}");
    }
    let metrics = wheel.metrics();
    assert!(metrics.heap_pushes > 0, "hyper's timers went to our wheel");
    assert!(metrics.passes > 0, "and fired from it");
    assert_eq!(wheel.pending(), 0, "every timer left the wheel");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_one_timeout_after_its_last_response() {
    let (addr, server) = serve(HyperTimer::new()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut last_sent = Instant::now();
    for _ in 0..3 {
        // The server starts the timer for the next request's header once it has answered
        // this one, after this instant.
        last_sent = Instant::now();
        tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tcp.read(&mut buf).await.unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
        tokio::time::sleep(HEADER_TIMEOUT / 4).await; // idle, but well within the timeout
    }
    let mut rest = Vec::new();
    let _ = tcp.read_to_end(&mut rest).await;
    let closed_after = last_sent.elapsed();
    assert!(
        closed_after >= HEADER_TIMEOUT,
        "closed early: {closed_after:?}"
    );
    assert!(
        closed_after < HEADER_TIMEOUT * 10,
        "closed far too late: {closed_after:?}"
    );
    server.abort();
}

/// A `sleep` first polled only after its deadline returns `Pending` with the task already
/// woken and completes on the next poll, no time passing; a `sleep_until` completes on the
/// first poll, as hyper-util's `TokioTimer` does.
#[tokio::test(start_paused = true)]
async fn a_sleep_first_polled_late_completes_on_the_next_poll_and_sleep_until_on_the_first() {
    let timer = HyperTimer::new();
    let mut sleep = task::spawn(timer.sleep(ms(10)));
    let mut until = task::spawn(timer.sleep_until(timer.now() + ms(10)));
    tokio::time::advance(ms(20)).await;
    let late = Instant::now();
    assert_ready!(until.poll());
    assert_pending!(sleep.poll());
    assert!(sleep.is_woken(), "woken at once, not at a later tick");
    assert_ready!(sleep.poll());
    assert_eq!(late.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn on_a_full_timer_sleeps_wait_on_tokios_timer_and_return_to_the_wheel_at_a_reset() {
    let wheel = Timer::builder().max_pending(1).build().unwrap();
    let timer = HyperTimer::from(wheel.clone());
    let hold = wheel.try_sleep(Duration::from_secs(3600)).unwrap();

    // hyper's timers cannot report an error: made on the full timer, they wait on Tokio's.
    let start = timer.now();
    let mut sleep = task::spawn(timer.sleep(ms(10)));
    let mut until = task::spawn(timer.sleep_until(start + ms(20)));
    assert_pending!(sleep.poll());
    assert_pending!(until.poll());
    assert_eq!(wheel.pending(), 1, "the wheel holds no more than its limit");
    step(ms(9)).await;
    assert_pending!(sleep.poll(), "never early");
    step(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    step(ms(9)).await;
    assert_pending!(until.poll());
    step(ms(1)).await;
    assert_ready!(until.poll());

    // Reset while still full: on Tokio's timer again, in the same box.
    let mut sleep = sleep.into_inner();
    let address_before = address(&sleep);
    timer.reset(&mut sleep, timer.now() + ms(30));
    assert_eq!(address(&sleep), address_before, "re-armed in place");
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    assert_eq!(wheel.pending(), 1);
    step(ms(29)).await;
    assert_pending!(sleep.poll());
    step(ms(1)).await;
    assert_ready!(sleep.poll());

    // A slot free at the next reset: the sleep is back on the wheel.
    drop(hold);
    let mut sleep = sleep.into_inner();
    timer.reset(&mut sleep, timer.now() + ms(40));
    assert_eq!(wheel.pending(), 1, "the reset took the free slot");
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    step(ms(40)).await;
    assert_ready!(sleep.poll());
    assert_eq!(wheel.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_wheel_sleep_reset_when_the_timer_is_full_waits_on_tokios_timer() {
    let wheel = Timer::builder().max_pending(1).build().unwrap();
    let timer = HyperTimer::from(wheel.clone());
    let mut sleep = task::spawn(timer.sleep(ms(10)));
    assert_pending!(sleep.poll());
    assert_eq!(wheel.pending(), 1, "on the wheel while a slot was free");
    step(ms(10)).await;
    assert_ready!(sleep.poll());
    let _hold = wheel.try_sleep(Duration::from_secs(3600)).unwrap();

    // hyper resets an HTTP/2 keep-alive sleep for its next ping: the timer is full.
    let mut sleep = sleep.into_inner();
    timer.reset(&mut sleep, timer.now() + ms(50));
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll(), "no panic: it waits");
    step(ms(49)).await;
    assert_pending!(sleep.poll());
    step(ms(1)).await;
    assert_ready!(sleep.poll());
}

/// A sleep that waits on Tokio's timer (its explicit timer was full), reset through a
/// `HyperTimer::new()`, goes to the runtime's default timer, and then outlives that timer's
/// shutdown as every default-timer sleep does rather than completing 90 ms early.
#[tokio::test(start_paused = true)]
async fn a_full_timers_sleep_reset_onto_the_default_timer_outlives_its_shutdown() {
    let wheel = Timer::builder().max_pending(1).build().unwrap();
    let full = HyperTimer::from(wheel.clone());
    let _hold = wheel.try_sleep(Duration::from_secs(3600)).unwrap();
    let mut sleep = full.sleep(ms(10));

    let default = HyperTimer::new();
    default.reset(&mut sleep, default.now() + ms(100));
    let mut sleep = task::spawn(sleep);
    assert_pending!(sleep.poll());
    assert_eq!(Timer::current().pending(), 1, "on the default timer");
    step(ms(10)).await;
    Timer::current().shutdown();
    assert_pending!(sleep.poll(), "not at the shutdown, 90 ms early");
    step(ms(89)).await;
    assert_pending!(sleep.poll());
    step(ms(1)).await;
    assert_ready!(sleep.poll());
}

/// A `HyperTimer` that counts what hyper asks of it: `sleep`, `sleep_until`, `reset`.
#[derive(Clone)]
struct Counting(
    HyperTimer,
    std::sync::Arc<[std::sync::atomic::AtomicUsize; 3]>,
);

impl hyper::rt::Timer for Counting {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.1[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.sleep(d)
    }
    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.1[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.sleep_until(deadline)
    }
    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, deadline: std::time::Instant) {
        self.1[2].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.reset(sleep, deadline)
    }
    fn now(&self) -> std::time::Instant {
        self.0.now()
    }
}

/// What the docs say of hyper's HTTP/1 header-read timeout: a new `sleep_until` for every
/// request head on a keep-alive connection (hyper drops it once the head is read), not a reset
/// of one sleep.
#[tokio::test(start_paused = true)]
async fn an_http1_keep_alive_connection_makes_a_header_read_sleep_per_request() {
    use std::sync::atomic::Ordering::SeqCst;
    let counts = std::sync::Arc::new(Default::default());
    let timer = Counting(HyperTimer::new(), std::sync::Arc::clone(&counts));
    let (ours, mut peer) = tokio::io::duplex(4096);
    let conn = tokio::spawn(
        http1::Builder::new()
            .timer(timer)
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(TokioIo::new(ours), service_fn(hello)),
    );
    for _ in 0..3 {
        peer.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let n = peer.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).ends_with("hello"));
    }
    let counted = [0, 1, 2].map(|i| counts[i].load(SeqCst));
    conn.abort();
    let [sleeps, untils, resets] = counted;
    assert_eq!((sleeps, resets), (0, 0), "sleep_until {untils}");
    // One per request head, and one for the next head it waits for when the counts are read.
    assert!((3..=4).contains(&untils), "one per request head: {untils}");
}
