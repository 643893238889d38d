//! `IdleTimeout`: idle streams fail at their limit, never before; activity keeps them open.
//!
//! Paused time over `tokio::io::duplex` is the deterministic part; one test runs on real TCP
//! sockets over loopback.

mod common;

use std::io;
use std::time::Duration;

use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, assert_ready_err, task};
use tokio_timing_wheel::{IdleTimeout, Timer};

use common::{ms, settle, step};

fn assert_timed_out<T: std::fmt::Debug>(r: io::Result<T>) {
    let err = r.expect_err("the stream should have timed out");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
}

/// A stream of ours and its peer, ours under an idle limit of `limit`.
fn pair(limit: Duration) -> (IdleTimeout<DuplexStream>, DuplexStream) {
    let (ours, peer) = duplex(64);
    (IdleTimeout::new(ours, limit), peer)
}

#[tokio::test(start_paused = true)]
async fn an_idle_peer_is_cut_off_at_the_limit_never_before() {
    let (mut conn, _peer) = pair(ms(1000));
    let mut buf = [0u8; 8];
    let mut read = task::spawn(conn.read(&mut buf));
    assert_pending!(read.poll());
    step(ms(999)).await;
    assert_pending!(read.poll(), "cut off 1 ms early");
    step(ms(1)).await;
    assert!(read.is_woken(), "the pending read is woken at the deadline");
    assert_timed_out(assert_ready!(read.poll()));
    drop(read);
    assert!(conn.is_timed_out());
}

#[tokio::test(start_paused = true)]
async fn an_idle_peer_is_cut_off_exactly_at_the_limit_when_awaited() {
    let (mut conn, _peer) = pair(ms(1500));
    let start = Instant::now();
    assert_timed_out(conn.read_u8().await);
    assert_eq!(start.elapsed(), ms(1500));
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_trickles_a_byte_every_half_limit_is_never_cut_off() {
    let (mut conn, mut peer) = pair(ms(1000));
    let sender = tokio::spawn(async move {
        for i in 0..40u8 {
            tokio::time::sleep(ms(500)).await;
            peer.write_all(&[i]).await.unwrap();
        }
        peer // kept open, silent
    });
    for i in 0..40u8 {
        assert_eq!(conn.read_u8().await.unwrap(), i, "byte {i}");
    }
    let last = Instant::now();
    // Now silent: cut off one limit after the last byte.
    assert_timed_out(conn.read_u8().await);
    assert_eq!(last.elapsed(), ms(1000));
    drop(sender.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn writing_does_not_keep_a_read_idle_stream_open() {
    let (ours, mut peer) = duplex(1024);
    let mut conn = IdleTimeout::builder()
        .read_idle(ms(1000))
        .write_idle(ms(10_000))
        .build(ours);
    let start = Instant::now();
    let (mut reader, mut writer) = tokio::io::split(&mut conn);
    let writes = async {
        // We write every 100 ms; the peer reads it all but never answers.
        let mut n = 0;
        while writer.write_all(b"x").await.is_ok() {
            n += 1;
            tokio::time::sleep(ms(100)).await;
        }
        n
    };
    let drain = async {
        let mut sink = [0u8; 64];
        while peer.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    };
    let read = async {
        let r = reader.read_u8().await;
        (r, start.elapsed())
    };
    let ((read, at), n, ()) = tokio::join!(read, writes, async {
        tokio::select! { () = drain => {}, () = tokio::time::sleep(ms(3000)) => {} }
    });
    assert_timed_out(read);
    assert_eq!(at, ms(1000), "the read limit passes at 1 s");
    assert_eq!(n, 10, "writes at 0, 100, ..., 900 ms succeed, then fail");
    assert!(conn.is_timed_out());
}

#[tokio::test(start_paused = true)]
async fn reading_does_not_keep_a_write_idle_stream_open() {
    let (ours, mut peer) = duplex(1024);
    let mut conn = IdleTimeout::builder()
        .read_idle(ms(10_000))
        .write_idle(ms(1000))
        .build(ours);
    let start = Instant::now();
    tokio::spawn(async move {
        // The peer talks every 100 ms; we never answer.
        while peer.write_all(b"x").await.is_ok() {
            tokio::time::sleep(ms(100)).await;
        }
    });
    let mut n = 0;
    let err = loop {
        match conn.read_u8().await {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), ms(1000), "the write limit passes at 1 s");
    assert_eq!(n, 10, "reads at 0, 100, ..., 900 ms succeed");
}

#[tokio::test(start_paused = true)]
async fn a_write_after_the_limit_is_refused_before_sending_anything() {
    let (ours, mut peer) = duplex(64);
    let mut conn = IdleTimeout::builder().write_idle(ms(1000)).build(ours);
    conn.write_all(b"early").await.unwrap();
    step(ms(999)).await;
    conn.write_all(b"in time").await.unwrap();
    step(ms(1000)).await;
    assert_timed_out(conn.write_all(b"late").await);
    conn.shutdown()
        .await
        .expect("shutdown still works after a timeout");
    let mut got = Vec::new();
    peer.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"earlyin time");
}

#[tokio::test(start_paused = true)]
async fn a_write_pending_on_a_peer_that_reads_nothing_is_woken_to_fail() {
    let (ours, _peer) = duplex(8);
    let mut conn = IdleTimeout::new(ours, ms(500));
    conn.write_all(&[0; 8]).await.unwrap(); // fills the pipe
    let mut write = task::spawn(conn.write_all(b"more"));
    assert_pending!(write.poll());
    step(ms(499)).await;
    assert_pending!(write.poll());
    step(ms(1)).await;
    assert!(write.is_woken());
    assert_timed_out(assert_ready!(write.poll()));
}

#[tokio::test(start_paused = true)]
async fn once_timed_out_every_read_and_write_fails_even_with_data_waiting() {
    let (mut conn, mut peer) = pair(ms(100));
    assert_timed_out(conn.read_u8().await);
    peer.write_all(b"too late").await.unwrap();
    assert_timed_out(conn.read_u8().await);
    assert_timed_out(conn.write_all(b"x").await);
    assert_timed_out(conn.flush().await);
}

#[tokio::test(start_paused = true)]
async fn data_that_arrived_unread_past_the_limit_does_not_revive_the_stream() {
    let (mut conn, mut peer) = pair(ms(100));
    peer.write_all(b"x").await.unwrap();
    step(ms(150)).await; // nobody reads for longer than the limit
    let mut read = task::spawn(conn.read_u8());
    assert_ready_err!(read.poll());
}

#[tokio::test(start_paused = true)]
async fn an_explicit_timer_holds_one_timer_while_a_read_waits() {
    let timer = Timer::builder().build().unwrap();
    let (ours, mut peer) = duplex(64);
    let mut conn = IdleTimeout::builder()
        .idle(ms(1000))
        .timer(timer.clone())
        .build(ours);
    assert_eq!(
        timer.pending(),
        0,
        "nothing in the wheel before a read waits"
    );
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    assert_eq!(timer.pending(), 1);
    step(ms(500)).await;
    peer.write_all(b"a").await.unwrap();
    assert_eq!(assert_ready!(read.poll()).unwrap(), b'a');
    drop(read);
    // The deadline moved to 1500 ms without touching the wheel: the old timer stays put and
    // fires at 1000 ms with nobody waiting (the lazy reset).
    assert_eq!(conn.deadline(), Some(Instant::now() + ms(1000)));
    assert_eq!(timer.pending(), 1);
    step(ms(500)).await;
    assert_eq!(timer.pending(), 0);
    // The next read that waits re-files it for the new deadline, and fails there.
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    assert_eq!(timer.pending(), 1);
    step(ms(499)).await;
    assert_pending!(read.poll());
    step(ms(1)).await;
    assert_timed_out(assert_ready!(read.poll()));
    drop(read);
    assert_eq!(timer.pending(), 0);

    // Dropping a stream whose read waits frees its timer.
    let (ours, _peer) = duplex(64);
    let mut conn = IdleTimeout::builder()
        .idle(ms(1000))
        .timer(timer.clone())
        .build(ours);
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    drop(read);
    assert_eq!(timer.pending(), 1);
    drop(conn);
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn after_the_default_timer_shut_down_an_active_stream_still_waits_its_limit() {
    let (mut conn, mut peer) = pair(ms(1000));
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    step(ms(500)).await;
    peer.write_all(b"a").await.unwrap();
    assert_eq!(assert_ready!(read.poll()).unwrap(), b'a');
    drop(read);

    // Nothing waits when the runtime's default timer shuts down; later timers go to a new one.
    Timer::current().shutdown();
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll(), "active 0 ms ago: not idle");
    step(ms(999)).await;
    assert_pending!(read.poll());
    step(ms(1)).await;
    assert_timed_out(assert_ready!(read.poll()));
}

#[tokio::test(start_paused = true)]
async fn without_limits_it_never_times_out_and_zero_times_out_at_once() {
    let (ours, _peer) = duplex(64);
    let mut forever = IdleTimeout::builder().build(ours);
    assert_eq!(forever.deadline(), None);
    let mut read = task::spawn(forever.read_u8());
    assert_pending!(read.poll());
    step(Duration::from_secs(3600)).await;
    assert_pending!(read.poll());
    drop(read);

    let (mut zero, _peer) = pair(Duration::ZERO);
    let mut read = task::spawn(zero.read_u8());
    assert_timed_out(assert_ready!(read.poll()));

    let (mut huge, _peer) = pair(Duration::MAX);
    assert!(huge.deadline().unwrap() > Instant::now() + Duration::from_secs(86_400 * 365));
    let mut read = task::spawn(huge.read_u8());
    assert_pending!(read.poll());
    settle().await;
    assert_pending!(read.poll());
}

#[test]
fn it_can_be_built_outside_a_runtime_and_debug_is_short() {
    let (ours, _peer) = duplex(64);
    let conn = IdleTimeout::new(ours, ms(10));
    let text = format!("{conn:?}");
    assert!(text.starts_with("IdleTimeout"), "{text}");
    assert!(text.len() < 600, "{} bytes: {text}", text.len());
}

/// Real sockets: a silent client is cut off at the limit (never before, generously bounded
/// after), while one that trickles a byte every sixth of the limit stays connected (a stall
/// of the test's threads short of five sixths of the limit does not cut it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_loopback_tcp_a_silent_client_is_cut_off_and_a_trickling_one_is_not() {
    const LIMIT: Duration = Duration::from_millis(600);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            outcomes.push(tokio::spawn(async move {
                let start = Instant::now();
                let mut conn = IdleTimeout::new(tcp, LIMIT);
                let mut got = 0;
                let r = loop {
                    match conn.read_u8().await {
                        Ok(_) => got += 1,
                        Err(e) => break Err(e),
                    }
                    if got == 8 {
                        break Ok(());
                    }
                };
                (r, got, start.elapsed())
            }));
        }
        let mut results = Vec::new();
        for o in outcomes {
            results.push(o.await.unwrap());
        }
        results
    });
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut trickler = tokio::net::TcpStream::connect(addr).await.unwrap();
    for _ in 0..8 {
        tokio::time::sleep(LIMIT / 6).await;
        trickler.write_all(b"x").await.unwrap();
    }
    let results = server.await.unwrap();
    let (silent_r, _, silent_t) = results.iter().find(|(r, _, _)| r.is_err()).unwrap();
    let (_, trickled, _) = results.iter().find(|(r, _, _)| r.is_ok()).unwrap();
    assert_eq!(
        silent_r.as_ref().unwrap_err().kind(),
        io::ErrorKind::TimedOut
    );
    assert!(*silent_t >= LIMIT, "cut off early: {silent_t:?}");
    assert!(*silent_t < LIMIT * 10, "cut off far too late: {silent_t:?}");
    assert_eq!(*trickled, 8);
    // The server closed the silent connection: the client sees end of stream.
    let mut rest = Vec::new();
    assert_eq!(silent.read_to_end(&mut rest).await.unwrap(), 0);
}

/// On a full explicit timer (`max_pending`), a read that must wait fails with an I/O error
/// carrying the timer's error instead of panicking; the stream has not timed out, and once a
/// slot is free the next wait takes it.
#[tokio::test(start_paused = true)]
async fn a_wait_on_a_full_timer_fails_with_the_timers_error() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let held = timer.try_sleep(Duration::from_secs(3600)).unwrap();
    let (ours, mut peer) = duplex(64);
    let mut conn = IdleTimeout::builder()
        .idle(ms(100))
        .timer(timer.clone())
        .build(ours);
    let mut buf = [0; 4];
    let err = conn.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Other, "{err:?}");
    assert_eq!(
        err.get_ref()
            .and_then(|e| e.downcast_ref::<tokio_timing_wheel::TimerError>()),
        Some(&tokio_timing_wheel::TimerError::Full { max_pending: 1 }),
        "{err:?}"
    );
    assert!(!IdleTimeout::is_idle_error(&err));
    drop(held);
    peer.write_all(b"ping").await.unwrap();
    conn.read_exact(&mut buf).await.unwrap();
    let mut read = task::spawn(conn.read(&mut buf));
    assert_pending!(read.poll());
    assert_eq!(timer.pending(), 1);
}

/// A read that waited and was given up (a `select!` that took another branch), then the
/// runtime's default timer shut down while nothing waited: the next read waits out the rest
/// of its limit on the new default timer, as any wait after the shutdown does, instead of
/// failing at once on the old timer's stale timer.
#[tokio::test(start_paused = true)]
async fn a_read_given_up_before_the_default_timer_shut_down_still_waits_its_limit() {
    let (mut conn, _peer) = pair(ms(1000));
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    drop(read); // given up, no activity
    step(ms(400)).await;

    Timer::current().shutdown();
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll(), "idle 400 ms of 1000: not timed out");
    step(ms(599)).await;
    assert_pending!(read.poll());
    step(ms(1)).await;
    assert_timed_out(assert_ready!(read.poll()));
}

/// A read waiting when its timer shuts down is woken: on an explicit timer it fails as timed
/// out; on the runtime's default timer it waits out its limit on the new default timer.
#[tokio::test(start_paused = true)]
async fn a_read_waiting_when_its_timer_shuts_down_is_woken() {
    let timer = Timer::builder().build().unwrap();
    let (ours, _peer) = duplex(64);
    let mut conn = IdleTimeout::builder()
        .idle(ms(1000))
        .timer(timer.clone())
        .build(ours);
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    step(ms(400)).await;
    timer.shutdown();
    assert!(read.is_woken());
    assert_timed_out(assert_ready!(read.poll()));
    drop(read);
    assert!(conn.is_timed_out());

    let (mut conn, _peer) = pair(ms(1000));
    let mut read = task::spawn(conn.read_u8());
    assert_pending!(read.poll());
    step(ms(400)).await;
    Timer::current().shutdown();
    assert!(read.is_woken());
    assert_pending!(read.poll(), "idle 400 ms of 1000");
    step(ms(599)).await;
    assert_pending!(read.poll());
    step(ms(1)).await;
    assert!(read.is_woken());
    assert_timed_out(assert_ready!(read.poll()));
}

/// A stream that accepts writes but whose flush and shutdown never complete: a TLS stream
/// or a buffered writer whose peer has stopped reading.
#[derive(Debug)]
struct StuckFlush;

impl tokio::io::AsyncRead for StuckFlush {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        _buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl tokio::io::AsyncWrite for StuckFlush {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Pending
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Pending // flushes first, as a TLS stream or a `BufWriter` does
    }
}

/// A shutdown that waits on a peer that reads nothing times out like a flush, rather than
/// holding the connection open forever.
#[tokio::test(start_paused = true)]
async fn a_shutdown_waiting_on_a_peer_that_reads_nothing_times_out() {
    let mut conn = IdleTimeout::new(StuckFlush, ms(1000));
    conn.write_all(b"bye").await.unwrap();
    let mut shutdown = task::spawn(conn.shutdown());
    assert_pending!(shutdown.poll());
    step(ms(999)).await;
    assert_pending!(shutdown.poll(), "cut off 1 ms early");
    step(ms(1)).await;
    assert!(shutdown.is_woken());
    let err = assert_ready_err!(shutdown.poll());
    assert!(IdleTimeout::is_idle_error(&err), "{err:?}");
    drop(shutdown);
    assert!(conn.is_timed_out());
    // Past the limit, a shutdown is still forwarded, and fails at once if it would wait.
    let mut again = task::spawn(conn.shutdown());
    assert_timed_out(assert_ready!(again.poll()));
}

/// An adapter that wraps the idle error in an I/O error of its own (`io::Error::new(kind, e)`,
/// as stream adapters often do) still has it told from a transport error: std's
/// `io::Error::source()` skips the error it wraps, so the chain must be walked through
/// `get_ref()`.
#[tokio::test(start_paused = true)]
async fn an_idle_error_rewrapped_in_an_io_error_is_still_told_apart() {
    let (mut conn, _peer) = pair(ms(100));
    let err = conn.read_u8().await.unwrap_err();
    assert!(IdleTimeout::is_idle_error(&err));
    let rewrapped = io::Error::new(err.kind(), err);
    assert!(IdleTimeout::is_idle_error(&rewrapped));
    let twice = io::Error::other(rewrapped);
    assert!(IdleTimeout::is_idle_error(&twice));
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(twice);
    assert!(IdleTimeout::is_idle_error(&*boxed));
    let transport = io::Error::new(io::ErrorKind::TimedOut, io::Error::other("kernel"));
    assert!(!IdleTimeout::is_idle_error(&transport));
}

/// An idle limit is a timeout: a firing pass wakes it after the sleeps due with it (see the
/// crate's "Wake order"), so a connection's cut-off is not queued behind a burst. A
/// current-thread runtime runs tasks in the order they are woken, which shows that order.
#[tokio::test(start_paused = true)]
async fn a_pass_wakes_an_idle_limit_after_the_sleeps_due_with_it() {
    use std::sync::{Arc, Mutex};
    use tokio_timing_wheel::sleep_wheel_until;

    Timer::current(); // the timer's time starts now
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (mut conn, _peer) = pair(Duration::from_micros(100_050));
    let idle = {
        let order = order.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 8];
            assert_timed_out(conn.read(&mut buf).await);
            order.lock().unwrap().push("idle");
        })
    };
    // After a pass at 95 ms, sleeps due at 100.1-100.3 ms, a few ticks ahead.
    tokio_timing_wheel::sleep_wheel(ms(95)).await;
    let shorts: Vec<_> = (0..3)
        .map(|i| {
            let order = order.clone();
            let at = start + Duration::from_micros(100_100 + 100 * i);
            tokio::spawn(async move {
                sleep_wheel_until(at).await;
                order.lock().unwrap().push("short");
            })
        })
        .collect();
    idle.await.unwrap();
    for s in shorts {
        s.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), ["short", "short", "short", "idle"]);
}
