//! Per-operation cost of a timer that never fires, ours against the peers, with divan.
//!
//! ```sh
//! cargo bench --bench timers
//! ```
//!
//! - `register_cancel/*`: one `timeout(5 s, f)` whose future `f` is pending on the first poll
//!   and ready on the second, polled by hand inside a current-thread runtime: the first poll
//!   registers the timer, the second completes and removes it (the RPC that answers in
//!   time). No scheduler is involved, so this is the timer's own cost plus one clock read.
//!   The polls happen outside any task; our default-timer lookup (`Handle::try_current()`
//!   and a per-thread cache) is the same there as inside one. One warm-up operation runs
//!   before timing, so the default timer's creation is not measured.
//! - `reset_later/*`: moving an already registered 30 s sleep 1 ms later (idle-connection
//!   timers pushed back on activity).
//!
//! The suite in `benches/compare/` (`cargo run --release -p compare`) measures whole workloads on
//! a multi-thread runtime.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use divan::Bencher;
use futures::task::noop_waker;
use tokio::time::Instant;

fn main() {
    divan::main();
}

/// Pending on the first poll, ready on the second.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Builds a timeout around `PendingOnce`, polls it twice (register, then complete and
/// cancel), inside a runtime context.
fn register_cancel<T: Future>(b: Bencher<'_, '_>, make: impl Fn(PendingOnce) -> T) {
    let rt = runtime();
    let _guard = rt.enter();
    let waker: Waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let once = |cx: &mut Context<'_>| {
        let mut t = std::pin::pin!(make(PendingOnce(false)));
        assert!(t.as_mut().poll(cx).is_pending());
        assert!(t.as_mut().poll(cx).is_ready());
    };
    // Creates our default timer (and warms every peer) outside the measurement; without it
    // divan sees one slow first sample and falls back to one iteration per sample.
    once(&mut cx);
    b.bench_local(|| once(&mut cx));
}

mod register_cancel {
    use super::*;

    const FIVE_S: Duration = Duration::from_secs(5);

    #[divan::bench]
    fn ours(b: Bencher<'_, '_>) {
        register_cancel(b, |f| tokio_timing_wheel::timeout(FIVE_S, f));
    }

    #[divan::bench]
    fn tokio_time(b: Bencher<'_, '_>) {
        register_cancel(b, |f| tokio::time::timeout(FIVE_S, f));
    }

    #[divan::bench]
    fn pingora_fast_timeout(b: Bencher<'_, '_>) {
        register_cancel(b, |f| {
            pingora_timeout::fast_timeout::fast_timeout(FIVE_S, f)
        });
    }

    #[divan::bench]
    fn futures_timer(b: Bencher<'_, '_>) {
        use futures::FutureExt;
        register_cancel(b, |f| {
            futures::future::select(f, futures_timer::Delay::new(FIVE_S)).map(|_| ())
        });
    }

    #[divan::bench]
    fn async_io(b: Bencher<'_, '_>) {
        use futures::FutureExt;
        register_cancel(b, |f| {
            futures::future::select(f, async_io::Timer::after(FIVE_S)).map(|_| ())
        });
    }
}

mod reset_later {
    use super::*;

    /// Registers one 30 s sleep, then measures `reset` to a deadline 1 ms later each time.
    fn bench<S: Future>(
        b: Bencher<'_, '_>,
        make: impl Fn() -> S,
        reset: impl Fn(Pin<&mut S>, Instant),
    ) {
        let rt = runtime();
        let _guard = rt.enter();
        let waker: Waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut s = Box::pin(make());
        assert!(s.as_mut().poll(&mut cx).is_pending());
        let mut at = Instant::now() + Duration::from_secs(30);
        b.bench_local(|| {
            at += Duration::from_millis(1);
            reset(s.as_mut(), at);
        });
    }

    #[divan::bench]
    fn ours(b: Bencher<'_, '_>) {
        bench(
            b,
            || tokio_timing_wheel::sleep_wheel(Duration::from_secs(30)),
            |s, at| s.reset(at),
        );
    }

    #[divan::bench]
    fn tokio_time(b: Bencher<'_, '_>) {
        bench(
            b,
            || tokio::time::sleep(Duration::from_secs(30)),
            |s, at| s.reset(at),
        );
    }
}
