//! `{:?}` of every public type that can reach a timer's shared state is a short summary: it
//! never prints the wheel's contents, however many timers are pending, and never locks a
//! shard (formatting completes while another thread registers into the same shard).
//!
//! A `Sleep` or `Timeout` in a tracing span must cost a few dozen bytes, not a dump of the
//! wheel (once about 20 KB for one `Sleep` beside 1 000 pending timers).

mod common;

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio_test::{assert_pending, task};
use tokio_timing_wheel::{
    BuildError, DelayedError, Elapsed, IdleTimeout, Sleep, Timer, TimerError, TimerMetrics,
};

use common::ms;

/// Pending timers beside the values formatted: a `Debug` that walked the wheel would print
/// all of them.
const PENDING: usize = 1_000;

/// The most bytes one summary may take.
const MAX_LEN: usize = 300;

/// Formats `value` with `{:?}` and `{:#?}`, checks both are short, and returns the first.
fn short_debug(what: &str, value: &impl Debug) -> String {
    let out = format!("{value:?}");
    assert!(
        out.len() < MAX_LEN,
        "{what}: {} bytes of Debug output: {}...",
        out.len(),
        out.chars().take(MAX_LEN).collect::<String>()
    );
    let pretty = format!("{value:#?}");
    assert!(
        pretty.len() < 2 * MAX_LEN,
        "{what}: {} bytes of pretty Debug output",
        pretty.len()
    );
    out
}

/// Asserts that `out` (the Debug output of `what`) contains every one of `words`.
fn assert_mentions(what: &str, out: &str, words: &[&str]) {
    for word in words {
        assert!(out.contains(word), "{what}: `{word}` missing from {out}");
    }
}

/// A timer holding [`PENDING`] hour-long sleeps, and those sleeps.
fn crowded_timer(builder: tokio_timing_wheel::Builder) -> (Timer, Vec<Sleep>) {
    let timer = builder.build().unwrap();
    let held = (0..PENDING)
        .map(|i| {
            timer
                .try_sleep(Duration::from_secs(3_600) + ms(i as u64))
                .unwrap()
        })
        .collect();
    assert_eq!(timer.pending(), PENDING);
    (timer, held)
}

/// A stream that never has data and swallows every write: it keeps an [`IdleTimeout`]'s
/// read waiting, so its timer is in the wheel.
#[derive(Debug)]
struct Silent;

impl AsyncRead for Silent {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for Silent {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test(start_paused = true)]
async fn sleep_debug_is_its_deadline_and_state_in_every_state() {
    let (timer, _held) = crowded_timer(Timer::builder());

    let idle = timer.sleep(Duration::from_secs(10));
    let out = short_debug("an unpolled Sleep", &idle);
    assert_mentions("an unpolled Sleep", &out, &["Sleep", "deadline", "idle"]);

    let mut registered = task::spawn(timer.sleep(Duration::from_secs(10)));
    assert_pending!(registered.poll());
    let out = short_debug("a registered Sleep", &*registered);
    assert_mentions("a registered Sleep", &out, &["deadline", "registered"]);

    let mut fired = task::spawn(timer.sleep(ms(5)));
    assert_pending!(fired.poll());
    common::step(ms(5)).await;
    assert!(fired.poll().is_ready());
    let out = short_debug("a fired Sleep", &*fired);
    assert_mentions("a fired Sleep", &out, &["deadline", "elapsed"]);

    timer.shutdown();
    assert!(registered.poll().is_ready());
    let out = short_debug("a Sleep drained by shutdown", &*registered);
    assert_mentions(
        "a Sleep drained by shutdown",
        &out,
        &["deadline", "shutdown"],
    );
}

#[tokio::test(start_paused = true)]
async fn timer_timeout_and_delayed_task_debug_are_short() {
    let (timer, _held) = crowded_timer(Timer::builder());

    let out = short_debug("a Timer", &timer);
    assert_mentions("a Timer", &out, &["Timer", "tick", "shutdown"]);

    let mut timeout =
        task::spawn(timer.timeout(Duration::from_secs(10), std::future::pending::<()>()));
    assert_pending!(timeout.poll());
    let out = short_debug("a registered Timeout", &*timeout);
    assert_mentions(
        "a registered Timeout",
        &out,
        &["Timeout", "deadline", "registered"],
    );

    let delayed = timer.spawn_after(Duration::from_secs(10), async { 1 });
    let out = short_debug("a pending DelayedTask", &delayed);
    assert_mentions(
        "a pending DelayedTask",
        &out,
        &["DelayedTask", "finished: false"],
    );
    assert!(delayed.cancel());
    let out = short_debug("a cancelled DelayedTask", &delayed);
    assert_mentions("a cancelled DelayedTask", &out, &["finished: true"]);

    // The default timer, crowded too.
    let _default_held: Vec<Sleep> = (0..PENDING)
        .map(|_| {
            let mut s = task::spawn(tokio_timing_wheel::sleep_wheel(Duration::from_secs(60)));
            assert_pending!(s.poll());
            s.into_inner()
        })
        .collect();
    let out = short_debug("the default Timer", &Timer::current());
    assert_mentions("the default Timer", &out, &["tick"]);
    let mut free = task::spawn(tokio_timing_wheel::timeout(
        Duration::from_secs(10),
        std::future::pending::<()>(),
    ));
    assert_pending!(free.poll());
    short_debug("a free-function Timeout", &*free);
}

#[tokio::test(start_paused = true)]
async fn errors_metrics_and_builders_debug_are_short() {
    let (timer, _held) = crowded_timer(Timer::builder().max_pending(PENDING));

    let full = timer.try_sleep(ms(1)).unwrap_err();
    let out = short_debug("TimerError::Full", &full);
    assert_mentions("TimerError::Full", &out, &["Full"]);
    short_debug("TimerError::Shutdown", &TimerError::Shutdown);
    short_debug(
        "a BuildError",
        &BuildError::InvalidWheelSize {
            size: 100,
            max: 65536,
        },
    );
    let elapsed: Elapsed = tokio_timing_wheel::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    let out = short_debug("an Elapsed", &elapsed);
    assert_mentions("an Elapsed", &out, &["Elapsed"]);
    let out = short_debug("TimerMetrics", &timer.metrics());
    assert_mentions("TimerMetrics", &out, &["pending: 1000"]);
    short_debug("default TimerMetrics", &TimerMetrics::default());
    short_debug("a Builder", &Timer::builder().tick(ms(10)));

    let cancelled = tokio_timing_wheel::spawn_after(ms(1), async {});
    assert!(cancelled.cancel());
    let err: DelayedError = cancelled.await.unwrap_err();
    let out = short_debug("a DelayedError", &err);
    assert_mentions("a DelayedError", &out, &["Cancelled"]);

    let builder = IdleTimeout::builder()
        .read_idle(Duration::from_secs(30))
        .timer(timer.clone());
    short_debug("an IdleTimeoutBuilder", &builder);
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_debug_is_short_with_its_timer_in_the_wheel() {
    let (timer, _held) = crowded_timer(Timer::builder());
    for mut conn in [
        IdleTimeout::new(Silent, Duration::from_secs(30)),
        IdleTimeout::builder()
            .idle(Duration::from_secs(30))
            .timer(timer.clone())
            .build(Silent),
    ] {
        let mut buf = [0u8; 4];
        let mut read = task::spawn(conn.read(&mut buf));
        assert_pending!(read.poll()); // its sleep is in the wheel now
        drop(read);
        let out = short_debug("an IdleTimeout", &conn);
        assert_mentions(
            "an IdleTimeout",
            &out,
            &["IdleTimeout", "deadline", "Silent"],
        );
    }
}

/// Every `Debug` output completes and stays short while another thread keeps registering
/// into the same shard, the wheel changing under it. (That no `Debug` takes a shard's lock
/// at all is checked with every shard lock held: `debug_takes_no_shard_lock`.)
#[test]
fn debug_completes_while_another_thread_registers_into_the_same_shard() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (timer, held) = rt.block_on(async { crowded_timer(Timer::builder().shards(1)) });
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let busy = {
        let (timer, handle) = (timer.clone(), rt.handle().clone());
        let (stop, rounds) = (stop.clone(), rounds.clone());
        std::thread::spawn(move || {
            let _entered = handle.enter();
            while !stop.load(SeqCst) {
                let burst: Vec<Sleep> = (0..64)
                    .map(|i| timer.try_sleep(ms(100 + i)).unwrap())
                    .collect();
                drop(burst);
                rounds.fetch_add(1, SeqCst);
            }
        })
    };
    let _entered = rt.enter();
    let mut sleep = timer.sleep(Duration::from_secs(10));
    let waker = futures::task::noop_waker();
    assert!(Pin::new(&mut sleep)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let timeout = timer.timeout(Duration::from_secs(10), std::future::pending::<()>());
    let delayed = timer.spawn_after(Duration::from_secs(10), async {});
    // Format until the other thread has registered and cancelled many bursts meanwhile.
    let mut formatted = 0;
    while formatted < 2_000 || rounds.load(SeqCst) < 100 {
        short_debug("a Timer, the shard busy", &timer);
        short_debug("a Sleep, the shard busy", &sleep);
        short_debug("a Timeout, the shard busy", &timeout);
        short_debug("a DelayedTask, the shard busy", &delayed);
        formatted += 1;
    }
    stop.store(true, SeqCst);
    busy.join().unwrap();
    drop((held, sleep, timeout));
    assert!(delayed.cancel());
    assert_eq!(timer.pending(), 0);
}

#[cfg(feature = "hyper")]
#[tokio::test(start_paused = true)]
async fn hyper_timer_debug_is_short() {
    use tokio_timing_wheel::hyper::HyperTimer;

    let (timer, _held) = crowded_timer(Timer::builder());
    short_debug("HyperTimer::new()", &HyperTimer::new());
    let out = short_debug("a HyperTimer on a Timer", &HyperTimer::from(timer));
    assert_mentions("a HyperTimer on a Timer", &out, &["HyperTimer", "tick"]);
}

#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn tower_types_debug_is_short() {
    use tokio_timing_wheel::tower::{Timeout, TimeoutLayer};
    use tower::{service_fn, BoxError, Layer, Service};

    let (timer, _held) = crowded_timer(Timer::builder());
    let layer = TimeoutLayer::with_timer(Duration::from_secs(1), timer);
    let out = short_debug("a TimeoutLayer", &layer);
    assert_mentions("a TimeoutLayer", &out, &["TimeoutLayer", "tick"]);
    short_debug(
        "a default TimeoutLayer",
        &TimeoutLayer::new(Duration::from_secs(1)),
    );

    let mut service = layer.layer(service_fn(|()| async {
        std::future::pending::<()>().await;
        Ok::<_, BoxError>(())
    }));
    let out = short_debug("a tower Timeout", &service);
    assert_mentions("a tower Timeout", &out, &["Timeout", "timeout"]);
    short_debug(
        "a default tower Timeout",
        &Timeout::new(service_fn(|()| async { Ok::<_, BoxError>(()) }), ms(10)),
    );

    let mut response = task::spawn(Box::pin(service.call(())));
    assert_pending!(response.poll());
    let out = short_debug("a ResponseFuture", &*response);
    assert_mentions("a ResponseFuture", &out, &["ResponseFuture", "deadline"]);
}
