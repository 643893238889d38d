//! Helpers shared by the integration tests: a PRNG, settling on paused time, wakers, and such.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio_timing_wheel::Sleep;

pub(crate) mod alloc;
pub(crate) mod differential;

/// `n` milliseconds.
pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A current-thread runtime whose clock starts paused.
pub(crate) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// The yields [`settle`] and [`step`] make.
pub(crate) const SETTLE_YIELDS: usize = 20;

/// The fewer yields `sleep.rs` and `timeout.rs` settle with, for [`settle_for`] and [`step_for`].
pub(crate) const SHORT_SETTLE_YIELDS: usize = 16;

/// Lets the tasks the timer woke or spawned (and its sentinel) run, without moving time
/// ([`SETTLE_YIELDS`] yields).
pub(crate) async fn settle() {
    settle_for(SETTLE_YIELDS).await;
}

/// Yields to the runtime `yields` times, without moving time.
pub(crate) async fn settle_for(yields: usize) {
    for _ in 0..yields {
        tokio::task::yield_now().await;
    }
}

/// Advances paused time by `d`, then lets the driver run ([`settle`]).
pub(crate) async fn step(d: Duration) {
    step_for(d, SETTLE_YIELDS).await;
}

/// Advances paused time by `d`, then yields `yields` times ([`settle_for`]).
pub(crate) async fn step_for(d: Duration, yields: usize) {
    tokio::time::advance(d).await;
    settle_for(yields).await;
}

/// Lets the runtime idle for a moment of real time, waiting on another thread: in paused
/// time, Tokio then auto-advances its clock to the next timer it holds, if any.
pub(crate) async fn idle_on_another_thread() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let other = std::thread::spawn(move || {
        std::thread::sleep(ms(20));
        let _ = tx.send(());
    });
    rx.await.unwrap();
    other.join().unwrap();
}

/// Sets its flag when dropped: held by a future, it tells whether that future was dropped.
pub(crate) struct SetOnDrop(pub(crate) Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// A small deterministic PRNG (xorshift64*), so the tests need no extra dependency.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator seeded with `seed | 1` (xorshift must not start at zero; odd seeds are kept
    /// as they are).
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The next number modulo `n` (`n` must not be zero).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A waker that counts its wakes.
#[derive(Debug, Default)]
pub(crate) struct CountingWaker(AtomicUsize);

impl CountingWaker {
    /// The wakes so far.
    pub(crate) fn count(&self) -> usize {
        self.0.load(SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Polls `sleep` once with `waker`, outside the task's cooperative budget: a test polling
/// thousands of sleeps by hand in one go is not a task that should be made to yield (a due
/// `Sleep` whose task is out of budget answers `Pending` and wakes the task at once).
pub(crate) fn poll_with(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    let mut unconstrained = tokio::task::unconstrained(Pin::new(sleep));
    Pin::new(&mut unconstrained).poll(&mut Context::from_waker(waker))
}

/// Spends what is left of the current task's cooperative budget (nothing outside a runtime's
/// budget, which is unlimited).
pub(crate) fn exhaust_budget() {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut spent = 0;
    while tokio::task::coop::has_budget_remaining() && spent < 10_000 {
        match tokio::task::coop::poll_proceed(&mut cx) {
            Poll::Ready(restore) => restore.made_progress(),
            Poll::Pending => break,
        }
        spent += 1;
    }
}

/// The message of a panic payload (a `String` or a `&str`), or `""` for any other payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        String::new()
    }
}

/// A minimal executor for a plain thread: polls `f`, parking the thread between wakes.
pub(crate) fn block_on_plain_thread<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Runs `f` on its own thread and fails if it does not finish within `limit` (a hang becomes a
/// test failure instead of a stuck test run). A panic in `f` is passed on.
pub(crate) fn with_watchdog<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let body = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(limit) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match body.join() {
            Ok(out) => out,
            Err(payload) => std::panic::resume_unwind(payload),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("hang: not finished within {limit:?}")
        }
    }
}

/// A multi-thread runtime of `workers` workers on Tokio's unstable alt timer.
#[cfg(tokio_unstable)]
pub(crate) fn alt_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .enable_alt_timer()
        .build()
        .unwrap()
}

/// A tracing subscriber that hands each event to `F` (tracing's `Subscriber`, no extra
/// dependency): for tests that read what the crate logs, or that run code where a
/// subscriber's would run.
pub(crate) struct OnEvent<F>(pub(crate) F);

impl<F: Fn(&tracing::Event<'_>) + Send + Sync + 'static> tracing::Subscriber for OnEvent<F> {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        (self.0)(event)
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl<F: Fn(&tracing::Event<'_>) + Send + Sync + 'static> OnEvent<F> {
    /// Installs the subscriber for this thread (a current-thread runtime's tasks run on it)
    /// while the guard lives.
    pub(crate) fn install(f: F) -> tracing::subscriber::DefaultGuard {
        // With a single dispatcher alive, tracing computes a call site first hit on another
        // thread from that thread's default alone (nobody: `never`, cached for every thread):
        // a second one, kept for good, makes it ask every dispatcher alive, this one included.
        static SECOND: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
        SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new()));
        let guard = tracing::subscriber::set_default(OnEvent(f));
        // Other tests' threads, with no subscriber, may have cached that nobody listens.
        tracing::callsite::rebuild_interest_cache();
        guard
    }
}
