//! Integration tests for `timeout`, `timeout_at`, `Timeout` and `Elapsed`.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use tokio_timing_wheel::{timeout, timeout_at, Elapsed, Timer};

mod common;
use common::{ms, panic_message, step_for, SHORT_SETTLE_YIELDS};

const MS: Duration = Duration::from_millis(1);

fn pending_now() -> usize {
    Timer::current().pending()
}

/// A future that counts its polls and completes on the `ready_at`-th one (never wakes itself).
#[derive(Debug)]
struct PollCounter {
    polls: usize,
    ready_at: usize,
}

impl Future for PollCounter {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.polls >= self.ready_at {
            Poll::Ready(self.polls)
        } else {
            Poll::Pending
        }
    }
}

#[tokio::test(start_paused = true)]
async fn ready_inner_is_ok_even_with_zero_duration_and_registers_nothing() {
    let mut t = task::spawn(timeout(Duration::ZERO, async { 7 }));
    assert_ready_eq!(t.poll(), Ok(7));
    assert_eq!(pending_now(), 0, "a ready future must not touch the wheel");

    let mut t = task::spawn(timeout(Duration::ZERO, std::future::ready("now")));
    assert_ready_eq!(t.poll(), Ok("now"));
    assert_eq!(pending_now(), 0);

    assert_eq!(timeout(Duration::ZERO, async { 1 }).await, Ok(1));
}

#[tokio::test(start_paused = true)]
async fn ready_inner_is_ok_even_with_a_deadline_in_the_past() {
    let past = Instant::now() - Duration::from_secs(1);
    let mut t = task::spawn(timeout_at(past, std::future::ready(5)));
    assert_eq!(t.deadline(), past);
    assert_ready_eq!(t.poll(), Ok(5));
    assert_eq!(pending_now(), 0, "a ready future must not touch the wheel");

    // A pending future with a past deadline errs at once, also without registering.
    let mut t = task::spawn(timeout_at(past, std::future::pending::<()>()));
    let err = assert_ready!(t.poll()).unwrap_err();
    assert!(!err.is_shutdown());
    assert_eq!(pending_now(), 0);
}

#[tokio::test(start_paused = true)]
async fn pending_inner_errs_exactly_at_the_deadline() {
    let start = Instant::now();
    let d = Duration::from_millis(100);
    let mut t = task::spawn(timeout(d, std::future::pending::<()>()));
    assert_eq!(t.deadline(), start + d);
    assert_pending!(t.poll());
    assert_eq!(
        pending_now(),
        1,
        "registered once the inner future is pending"
    );

    step_for(d - MS, SHORT_SETTLE_YIELDS).await;
    assert!(!t.is_woken(), "woken a millisecond early");
    assert_pending!(t.poll(), "elapsed a millisecond early");

    step_for(MS - Duration::from_micros(1), SHORT_SETTLE_YIELDS).await;
    assert_pending!(t.poll(), "elapsed a microsecond early");

    step_for(Duration::from_micros(1), SHORT_SETTLE_YIELDS).await;
    assert!(t.is_woken(), "not woken at the deadline");
    let err = assert_ready!(t.poll()).unwrap_err();
    assert!(!err.is_shutdown());
    assert_eq!(start.elapsed(), d);
    assert_eq!(pending_now(), 0);

    // Awaited: the same, with auto-advance.
    let start = Instant::now();
    let r = timeout(Duration::from_millis(250), std::future::pending::<u8>()).await;
    assert!(r.is_err());
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed <= Duration::from_millis(251),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn inner_completing_before_the_deadline_is_ok_and_removes_the_entry() {
    let start = Instant::now();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        tx.send(9u32).unwrap();
    });
    let r = timeout(Duration::from_millis(100), rx).await;
    assert_eq!(r, Ok(Ok(9)));
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    assert_eq!(pending_now(), 0, "the timer entry must be gone");

    // An inner future driven by time, too.
    let r = timeout(
        Duration::from_millis(100),
        tokio::time::sleep(Duration::from_millis(40)),
    )
    .await;
    assert_eq!(r, Ok(()));
    assert_eq!(pending_now(), 0);

    // Nothing fires later for the finished timeouts: at most one stale wakeup of the driver
    // (it stays armed for the first deadline), then none at all.
    let before = Timer::current().metrics().passes;
    step_for(Duration::from_secs(1), SHORT_SETTLE_YIELDS).await;
    let after = Timer::current().metrics().passes;
    assert!(after <= before + 1, "{before} -> {after} firing passes");
    step_for(Duration::from_secs(86_400), SHORT_SETTLE_YIELDS).await;
    assert_eq!(Timer::current().metrics().passes, after);
}

#[tokio::test(start_paused = true)]
async fn timer_entry_is_removed_when_the_inner_future_completes_before_drop() {
    // Documented: "The timer is registered only when the future first returns Pending, and
    // removed when it completes or the Timeout is dropped."
    let (tx, rx) = oneshot::channel();
    let mut t = task::spawn(timeout(Duration::from_secs(10), rx));
    assert_pending!(t.poll());
    assert_eq!(pending_now(), 1);
    tx.send(3u8).unwrap();
    assert!(t.is_woken());
    assert_ready_eq!(t.poll(), Ok(Ok(3)));
    assert_eq!(
        pending_now(),
        0,
        "the Timeout completed, but its timer is still in the wheel"
    );
    drop(t);
    assert_eq!(pending_now(), 0);
}

#[tokio::test(start_paused = true)]
async fn inner_output_wins_when_both_are_ready() {
    // The inner future is polled first: ready at the deadline still means Ok.
    let d = Duration::from_millis(50);
    let mut t = task::spawn(timeout(d, tokio::time::sleep(d)));
    assert_pending!(t.poll());
    step_for(d, SHORT_SETTLE_YIELDS).await;
    assert_ready_eq!(t.poll(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_timeout_cancels_its_entry() {
    let mut t = task::spawn(timeout(
        Duration::from_secs(60),
        std::future::pending::<()>(),
    ));
    assert_eq!(pending_now(), 0, "nothing registered before the first poll");
    assert_pending!(t.poll());
    assert_eq!(pending_now(), 1);
    drop(t);
    assert_eq!(pending_now(), 0);

    // Many at once.
    let mut many: Vec<_> = (0..100u64)
        .map(|i| {
            task::spawn(timeout(
                Duration::from_millis(10 + i),
                std::future::pending::<()>(),
            ))
        })
        .collect();
    for t in &mut many {
        assert_pending!(t.poll());
    }
    assert_eq!(pending_now(), 100);
    many.truncate(40);
    assert_eq!(pending_now(), 40);
    drop(many);
    assert_eq!(pending_now(), 0);
}

fn assert_send_sync_clone_eq<T: Send + Sync + Clone + PartialEq + 'static>() {}
fn assert_error<T: std::error::Error + std::fmt::Debug + std::fmt::Display>() {}

#[tokio::test(start_paused = true)]
async fn elapsed_implements_the_usual_traits() {
    assert_send_sync_clone_eq::<Elapsed>();
    assert_error::<Elapsed>();

    let err: Elapsed = timeout(MS, std::future::pending::<()>()).await.unwrap_err();
    assert!(!err.is_shutdown());
    assert!(!format!("{err:?}").is_empty());
    let shown = err.to_string();
    assert!(!shown.is_empty());
    let copy = err.clone();
    assert_eq!(copy, err);

    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), shown);

    let io = std::io::Error::from(err);
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(io.to_string(), shown);
    let inner = io.get_ref().expect("the io::Error wraps the Elapsed");
    assert_eq!(inner.downcast_ref::<Elapsed>(), Some(&copy));
}

#[tokio::test(start_paused = true)]
async fn get_ref_get_mut_get_pin_mut_and_into_inner() {
    let mut t = task::spawn(timeout(
        Duration::from_secs(1),
        PollCounter {
            polls: 0,
            ready_at: 100,
        },
    ));
    assert_eq!(t.get_ref().polls, 0);
    assert_pending!(t.poll());
    assert_pending!(t.poll());
    assert_eq!(t.get_ref().polls, 2);
    assert_eq!(pending_now(), 1);

    t.get_mut().polls = 10;
    assert_eq!(t.get_ref().polls, 10);
    Pin::new(&mut *t).get_pin_mut().ready_at = 12;
    assert_eq!(t.get_ref().ready_at, 12);
    assert_pending!(t.poll());
    assert_ready_eq!(t.poll(), Ok(12));
    drop(t);

    // into_inner hands the inner future back and removes the timer.
    let mut t = task::spawn(timeout(
        Duration::from_secs(1),
        PollCounter {
            polls: 0,
            ready_at: 3,
        },
    ));
    assert_pending!(t.poll());
    assert_eq!(pending_now(), 1);
    let mut inner = t.into_inner().into_inner();
    assert_eq!(pending_now(), 0, "into_inner removes the timer");
    assert_eq!(inner.polls, 1);
    let mut inner = task::spawn(&mut inner);
    assert_pending!(inner.poll());
    assert_ready_eq!(inner.poll(), 3);
}

/// A type that is not a future but turns into one.
struct Answer(u32);

impl IntoFuture for Answer {
    type Output = u32;
    type IntoFuture = std::future::Ready<u32>;

    fn into_future(self) -> Self::IntoFuture {
        std::future::ready(self.0)
    }
}

/// Turns into a future that never completes.
struct Never;

impl IntoFuture for Never {
    type Output = ();
    type IntoFuture = std::future::Pending<()>;

    fn into_future(self) -> Self::IntoFuture {
        std::future::pending()
    }
}

#[tokio::test(start_paused = true)]
async fn into_future_inputs_are_accepted() {
    assert_eq!(timeout(Duration::from_secs(1), Answer(42)).await, Ok(42));
    let at = Instant::now() + Duration::from_secs(1);
    assert_eq!(timeout_at(at, Answer(7)).await, Ok(7));
    assert!(timeout(Duration::from_millis(5), Never).await.is_err());
    let timer = Timer::builder().build().unwrap();
    assert_eq!(
        timer.timeout(Duration::from_secs(1), Answer(1)).await,
        Ok(1)
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_resolves_pending_and_new_timeouts_with_a_shutdown_error() {
    let timer = Timer::builder().build().unwrap();
    let mut t = task::spawn(timer.timeout(Duration::from_secs(3600), std::future::pending::<()>()));
    assert_pending!(t.poll());
    assert_eq!(timer.pending(), 1);
    assert!(!timer.is_shutdown());

    timer.shutdown();
    assert!(timer.is_shutdown());
    assert!(t.is_woken(), "shutdown must wake the pending timeout");
    let err = assert_ready!(t.poll()).unwrap_err();
    assert!(err.is_shutdown());
    assert!(!err.to_string().is_empty());
    assert_eq!(timer.pending(), 0);

    // New timeouts on the shut-down timer resolve at once.
    let mut t = task::spawn(timer.timeout(Duration::from_secs(3600), std::future::pending::<()>()));
    let err = assert_ready!(t.poll()).unwrap_err();
    assert!(err.is_shutdown());
    let r = timer
        .timeout(Duration::from_secs(3600), std::future::pending::<()>())
        .await;
    assert!(r.unwrap_err().is_shutdown());
    // A ready inner future still wins.
    assert_eq!(
        timer.timeout(Duration::from_secs(1), async { 3 }).await,
        Ok(3)
    );
    // Calling it again does nothing.
    timer.shutdown();
    assert_eq!(timer.pending(), 0);

    // The default timer is unaffected.
    let r = timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
    assert!(!r.unwrap_err().is_shutdown());
}

#[tokio::test(start_paused = true)]
async fn duration_max_timeout_stays_pending_without_panicking() {
    let mut t = task::spawn(timeout(Duration::MAX, std::future::pending::<()>()));
    assert_pending!(t.poll());
    step_for(Duration::from_secs(86_400 * 1000), SHORT_SETTLE_YIELDS).await;
    assert_pending!(t.poll());
    assert_eq!(pending_now(), 1);
}

#[test]
fn timeout_outside_a_runtime_panics_mentioning_tokio() {
    let err = std::panic::catch_unwind(|| drop(timeout(Duration::from_secs(1), async {})))
        .expect_err("timeout outside a runtime must panic");
    let msg = panic_message(&*err);
    assert!(msg.contains("Tokio"), "panic message: {msg:?}");
}

/// Unlike Tokio's, whose overflowing deadline sets no timer, a `Duration::MAX` timeout takes
/// one (so that a shutdown resolves it): outside a runtime it panics as any other timeout does.
#[test]
fn a_duration_max_timeout_outside_a_runtime_panics_too() {
    let err = std::panic::catch_unwind(|| drop(timeout(Duration::MAX, async {})))
        .expect_err("a Duration::MAX timeout outside a runtime must panic");
    let msg = panic_message(&*err);
    assert!(msg.contains("Tokio"), "panic message: {msg:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_stress_every_timeout_accounted_and_none_early() {
    const TASKS: usize = 8;
    const PER_TASK: usize = 10_000;
    /// Timeouts in flight at once per task.
    const BATCH: usize = 500;

    #[derive(Default)]
    struct Counts {
        ok: AtomicUsize,
        elapsed: AtomicUsize,
        wrong: AtomicUsize,
        early: AtomicUsize,
        max_late_us: AtomicU64,
    }

    async fn one(i: usize, counts: Arc<Counts>) {
        match i % 4 {
            // Never finishes: a short timeout of 1..5 ms must elapse, never early.
            0 | 2 => {
                let d = Duration::from_millis(1 + (i / 4 % 5) as u64);
                let start = Instant::now();
                let t = timeout(d, std::future::pending::<()>());
                let deadline = t.deadline();
                let r = t.await;
                let now = Instant::now();
                match r {
                    Err(e) if !e.is_shutdown() => {
                        counts.elapsed.fetch_add(1, SeqCst);
                        if now < deadline || now.duration_since(start) < d {
                            counts.early.fetch_add(1, SeqCst);
                        }
                        let late = now.saturating_duration_since(deadline).as_micros() as u64;
                        counts.max_late_us.fetch_max(late, SeqCst);
                    }
                    _ => {
                        counts.wrong.fetch_add(1, SeqCst);
                    }
                }
            }
            // Finishes soon: answered by another task through a oneshot.
            1 => {
                let (tx, rx) = oneshot::channel();
                tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    let _ = tx.send(i);
                });
                match timeout(Duration::from_secs(30), rx).await {
                    Ok(Ok(v)) if v == i => counts.ok.fetch_add(1, SeqCst),
                    _ => counts.wrong.fetch_add(1, SeqCst),
                };
            }
            // Finishes soon: pending once, then ready.
            _ => {
                let r = timeout(Duration::from_secs(30), async {
                    tokio::task::yield_now().await;
                    i
                })
                .await;
                match r {
                    Ok(v) if v == i => counts.ok.fetch_add(1, SeqCst),
                    _ => counts.wrong.fetch_add(1, SeqCst),
                };
            }
        }
    }

    let counts = Arc::new(Counts::default());
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|n| {
            let counts = counts.clone();
            tokio::spawn(async move {
                for batch in (0..PER_TASK).step_by(BATCH) {
                    let futs =
                        (batch..batch + BATCH).map(|i| one(n * PER_TASK + i, counts.clone()));
                    futures::future::join_all(futs).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = started.elapsed();

    let total = TASKS * PER_TASK;
    let ok = counts.ok.load(SeqCst);
    let elapsed = counts.elapsed.load(SeqCst);
    assert_eq!(counts.wrong.load(SeqCst), 0, "unexpected outcomes");
    assert_eq!(ok + elapsed, total, "every timeout accounted for");
    assert_eq!(ok, total / 2);
    assert_eq!(elapsed, total / 2);
    assert_eq!(counts.early.load(SeqCst), 0, "timeouts fired early");
    let max_late = Duration::from_micros(counts.max_late_us.load(SeqCst));
    assert!(
        max_late < Duration::from_secs(2),
        "a timeout was {max_late:?} late"
    );
    assert_eq!(Timer::current().pending(), 0, "entries left in the wheel");
    eprintln!("stress: {total} timeouts in {took:?}, max lateness {max_late:?}");
}

/// Review finding: a timeout that elapsed at its deadline said `is_shutdown()` when first
/// polled after `Timer::shutdown()`. Only a timeout the shutdown cut short says so.
#[tokio::test(start_paused = true)]
async fn a_timeout_that_elapsed_before_shutdown_is_not_a_shutdown_error() {
    let timer = Timer::builder().build().unwrap();
    let mut elapsed = task::spawn(timer.timeout(ms(10), std::future::pending::<()>()));
    let mut cut_short = task::spawn(timer.timeout(ms(10_000), std::future::pending::<()>()));
    assert_pending!(elapsed.poll());
    assert_pending!(cut_short.poll());
    tokio::time::advance(ms(20)).await;
    timer.shutdown();
    let e = assert_ready!(elapsed.poll()).unwrap_err();
    assert!(!e.is_shutdown(), "it reached its deadline: {e}");
    assert_eq!(e.to_string(), "deadline has elapsed");
    let e = assert_ready!(cut_short.poll()).unwrap_err();
    assert!(e.is_shutdown(), "the shutdown cut it short: {e}");
}

/// An inner future that spends its task's whole budget every poll (it yields to Tokio's
/// scheduler, never completes) does not keep its timeout from firing: the deadline is checked
/// outside the budget, as Tokio's `Timeout` does. Real time: a task that never idles keeps
/// paused time from moving. Bounded by Tokio's own timeout, so a regression fails the test
/// rather than spinning it for ever.
#[tokio::test]
async fn a_future_that_spends_the_task_budget_still_times_out() {
    let busy = async {
        loop {
            tokio::task::consume_budget().await;
        }
    };
    let started = Instant::now();
    let ours = tokio::time::timeout(Duration::from_secs(10), timeout(ms(1), busy))
        .await
        .expect("the busy future kept its timeout from firing for 10 s");
    assert!(ours.is_err());
    assert!(started.elapsed() >= ms(1), "elapsed early");
}

/// A waiting timeout re-polled by its task answers `Pending` without consulting the budget:
/// out of budget, no wake for a poll that would find it still waiting, and it still fires at
/// its deadline.
#[tokio::test(start_paused = true)]
async fn a_waiting_timeout_re_polled_out_of_budget_is_pending_without_a_wake() {
    let counter = Arc::new(common::CountingWaker::default());
    let waker = std::task::Waker::from(counter.clone());
    let start = Instant::now();
    let mut t = Box::pin(timeout(ms(10), std::future::pending::<()>()));
    let poll = |t: &mut Pin<Box<tokio_timing_wheel::Timeout<std::future::Pending<()>>>>| {
        t.as_mut().poll(&mut Context::from_waker(&waker))
    };
    assert!(poll(&mut t).is_pending()); // registered
    common::exhaust_budget();
    for _ in 0..10 {
        assert!(poll(&mut t).is_pending());
    }
    tokio::task::yield_now().await; // a wake Tokio defers comes now
    assert_eq!(counter.count(), 0, "woken for polls that find it waiting");
    step_for(ms(10), SHORT_SETTLE_YIELDS).await;
    assert_eq!(counter.count(), 1, "the deadline's wake");
    assert!(matches!(poll(&mut t), Poll::Ready(Err(_))));
    assert_eq!(start.elapsed(), ms(10));
}

/// A waiting timeout re-polled by its task answers from a look at its timer taken before it
/// polls the inner future; if the timer fires while the future is polled (here the future
/// shuts the timer down, which resolves every pending timer), the task is woken, and the next
/// poll gives the timer's answer: nothing is lost between the look and the answer.
#[tokio::test(start_paused = true)]
async fn a_timer_that_fires_while_the_future_is_polled_wakes_the_task() {
    let timer = Timer::builder().build().unwrap();
    let inside = timer.clone();
    let mut polls = 0;
    let fut = std::future::poll_fn(move |_| {
        polls += 1;
        if polls == 2 {
            inside.shutdown(); // fires the timer around this very future
        }
        Poll::<()>::Pending
    });
    let mut t = task::spawn(timer.timeout(Duration::from_secs(3600), fut));
    assert_pending!(t.poll()); // registered
    assert!(!t.is_woken());
    assert_pending!(t.poll()); // looked at the timer (waiting), then the future shut it down
    assert!(t.is_woken(), "the firing woke the task");
    let err = assert_ready!(t.poll()).unwrap_err();
    assert!(err.is_shutdown());
}

/// The inner futures of `timeouts_answer_as_tokios_whatever_the_budget`.
#[derive(Debug)]
enum Inner {
    /// Ready with `n` once woken `n` times: each `Pending` wakes its task at once.
    AfterWakes { n: usize, woken: usize },
    /// Never ready, never wakes.
    Pending,
    /// Never ready: spends its task's budget (`consume_budget`) until there is none left.
    Busy,
}

impl Future for Inner {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        match &mut *self {
            Inner::AfterWakes { n, woken } if woken == n => Poll::Ready(*n),
            Inner::AfterWakes { woken, .. } => {
                *woken += 1;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Inner::Pending => Poll::Pending,
            Inner::Busy => loop {
                ready!(std::pin::pin!(tokio::task::consume_budget()).poll(cx));
            },
        }
    }
}

/// Differential: our `Timeout` and Tokio's, around the same inner future (one ready after a
/// few wakes, a pending one, one that spends the whole budget), driven side by side through the
/// same script (polls in budget, out of it and unconstrained; paused time advanced to the
/// deadline; zero durations), answer alike at every step: `Pending`, `Ok` or `Err`, and as
/// many wakes of each one's own waker. Except where ours is meant to be better: out of budget,
/// a poll whose delay registers or finds it waiting answers `Pending` without the wake Tokio's
/// `Sleep` makes (asserted as ours no worse).
#[tokio::test(start_paused = true)]
async fn timeouts_answer_as_tokios_whatever_the_budget() {
    use common::differential::{Budget::*, Referee, Rel::*};
    use std::task::Poll::{Pending, Ready};
    let after = |n| Inner::AfterWakes { n, woken: 0 };
    let mut r = Referee::default();
    let mut ours = Box::pin(timeout(ms(10), Inner::Pending));
    let mut theirs = Box::pin(tokio::time::timeout(ms(10), Inner::Pending));
    macro_rules! poll {
        ($rel:ident, $budget:ident, $what:expr $(=> $expect:expr)?) => {{
            let ours_answer = r.poll(0, ours.as_mut(), $budget).await;
            let theirs_answer = r.poll(1, theirs.as_mut(), $budget).await;
            let answers = [
                ours_answer.map(|a| a.map_err(drop)),
                theirs_answer.map(|a| a.map_err(drop)),
            ];
            let answer = r.judge($rel, $what, Some(answers), None).await.unwrap();
            $(assert_eq!(answer, $expect, "{}", $what);)?
            let _ = answer;
        }};
    }
    macro_rules! wait {
        ($rel:ident, $what:expr) => {{
            step_for(ms(10), SHORT_SETTLE_YIELDS).await;
            r.judge::<()>($rel, $what, None, None).await;
        }};
    }
    macro_rules! fresh {
        ($d:expr, $inner:expr) => {{
            r = Referee::default();
            ours = Box::pin(timeout($d, $inner));
            theirs = Box::pin(tokio::time::timeout($d, $inner));
        }};
    }
    const ERR: Poll<Result<usize, ()>> = Ready(Err(()));

    // Tokio's delay consults the budget first, and wakes the task for a poll that finds it
    // waiting (or, on the first poll, for the next poll to register): ours need not.
    poll!(Same, Has, "pending: first poll" => Pending);
    poll!(Same, Has, "pending: re-poll");
    poll!(NoWorse, Spent, "pending: re-poll out of budget");
    poll!(Same, Unconstrained, "pending: re-poll unconstrained");
    wait!(Same, "pending: the deadline");
    poll!(Same, Spent, "pending: due, out of budget: woken to yield" => Pending);
    poll!(Same, Has, "pending: due" => ERR);
    fresh!(ms(10), Inner::Pending);
    poll!(NoWorse, Spent, "pending: first poll out of budget");
    assert_eq!(r.woken(0), 0, "registered out of budget without a wake");
    wait!(NoWorse, "pending: deadline, first poll unbudgeted");
    // Ours registered without a wake: its one wake is the deadline's.
    assert_eq!(
        r.woken(0),
        1,
        "the deadline woke the timeout registered out of budget"
    );
    poll!(Same, Has, "pending: due, polled" => ERR);

    fresh!(ms(10), after(3));
    poll!(Same, Has, "3 wakes: first poll");
    poll!(NoWorse, Spent, "3 wakes: second poll, out of budget");
    poll!(Same, Unconstrained, "3 wakes: third poll, unconstrained");
    poll!(Same, Has, "3 wakes: ready" => Ready(Ok(3)));
    fresh!(ms(10), after(1));
    poll!(Same, Has, "1 wake: first poll");
    wait!(Same, "1 wake: the deadline");
    poll!(Same, Spent, "1 wake: due, inner first" => Ready(Ok(1)));

    // Busy: a deadline checked even when the inner future spent the budget (unconstrained).
    fresh!(ms(10), Inner::Busy);
    poll!(Same, Has, "busy: first poll");
    // (Tokio defers its delay's wake with the one `consume_budget` made: one wake in all.)
    poll!(NoWorse, Spent, "busy: re-poll out of budget");
    wait!(Same, "busy: the deadline");
    poll!(Same, Has, "busy: due" => ERR);
    fresh!(ms(10), Inner::Busy);
    poll!(Same, Has, "busy: first poll");
    wait!(Same, "busy: the deadline");
    poll!(Same, Spent, "busy: due, out of budget: woken to yield" => Pending);
    poll!(Same, Has, "busy: due, polled" => ERR);

    // Zero durations: the inner future first, then the elapsed delay, which spends budget.
    fresh!(Duration::ZERO, Inner::Pending);
    poll!(Same, Spent, "zero: first poll out of budget" => Pending);
    poll!(Same, Has, "zero: polled again" => ERR);
    for budget in [Has, Spent, Unconstrained] {
        fresh!(Duration::ZERO, after(0));
        poll!(Same, budget, "zero, ready inner" => Ready(Ok(0)));
    }
    for budget in [Has, Unconstrained] {
        fresh!(Duration::ZERO, Inner::Pending);
        poll!(Same, budget, "zero, pending inner" => ERR);
    }
}

/// As Tokio's: a duration too large to add to now sets no deadline, so the timeout never
/// elapses, however far (paused) time moves; in paused time Tokio's clock is not made to jump
/// to a far "deadline" either.
#[tokio::test(start_paused = true)]
async fn a_duration_too_large_to_add_never_elapses_as_in_tokio() {
    let years = Duration::from_secs(86_400 * 365);
    let mut ours = task::spawn(timeout(Duration::MAX, std::future::pending::<()>()));
    let mut theirs = task::spawn(tokio::time::timeout(
        Duration::MAX,
        std::future::pending::<()>(),
    ));
    let timer = Timer::builder().build().unwrap();
    let mut explicit = task::spawn(timer.timeout(Duration::MAX, std::future::pending::<()>()));
    let tried = timer.try_timeout(Duration::MAX, std::future::pending::<()>());
    let mut tried = task::spawn(tried.unwrap());
    assert_pending!(ours.poll());
    assert_pending!(theirs.poll());
    assert_pending!(explicit.poll());
    assert_pending!(tried.poll());
    for _ in 0..4 {
        step_for(years * 10, SHORT_SETTLE_YIELDS).await;
        assert_pending!(theirs.poll());
        assert_pending!(ours.poll(), "elapsed after {:?}", Instant::now());
        assert_pending!(explicit.poll());
        assert_pending!(tried.poll());
    }
    // A shutdown still resolves them.
    timer.shutdown();
    assert!(assert_ready!(explicit.poll()).unwrap_err().is_shutdown());
    assert!(assert_ready!(tried.poll()).unwrap_err().is_shutdown());
}

/// A timeout that never elapses needs no wakeup: as with Tokio's, an idle paused runtime
/// waiting on something else (here, another thread) keeps its clock where it is, rather than
/// auto-advancing through the wheel's far buckets to the timer's horizon (about 584 years),
/// past which the timer's later sleeps could never fire. (Real time only lets the runtime idle.)
#[tokio::test(start_paused = true)]
async fn a_timeout_that_never_elapses_does_not_move_paused_time() {
    let start = Instant::now();
    let timer = Timer::builder().build().unwrap();
    let mut ours = task::spawn(timeout(Duration::MAX, std::future::pending::<()>()));
    let mut explicit = task::spawn(timer.timeout(Duration::MAX, std::future::pending::<()>()));
    assert_pending!(ours.poll());
    assert_pending!(explicit.poll());
    common::idle_on_another_thread().await;
    assert_eq!(Instant::now(), start, "paused time moved with nothing due");
    assert_pending!(ours.poll());
    assert_pending!(explicit.poll());
    // The timers still work.
    let now = Instant::now();
    tokio_timing_wheel::sleep_wheel(ms(1)).await;
    timer.sleep(ms(1)).await;
    assert_eq!(Instant::now(), now + ms(2));
    assert_eq!(
        Timer::current().pending(),
        1,
        "the never-elapsing timeout holds its entry"
    );
    timer.shutdown();
    assert!(assert_ready!(explicit.poll()).unwrap_err().is_shutdown());
    drop(ours);
    assert_eq!(Timer::current().pending(), 0);
}

/// Under a backlog Tokio's worker queue keeps the tasks woken after a burst overflowed it, and
/// sends most of the burst to the back of its global queue: a pass wakes the timers due in it
/// long ones first, short ones next, and timeouts (however they were made) last, so a timeout's
/// task, which ends work its caller stopped waiting for, is not queued behind the burst. A
/// current-thread runtime runs tasks in the order they are woken, which shows that order.
#[tokio::test(start_paused = true)]
async fn a_pass_wakes_timeouts_after_the_sleeps_due_with_them() {
    use std::sync::Mutex;
    use tokio_timing_wheel::{sleep_wheel, sleep_wheel_until};

    let timer = Timer::current(); // the timer's time starts now
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let record = |what: &'static str, done: Pin<Box<dyn Future<Output = ()> + Send>>| {
        let order = order.clone();
        tokio::spawn(async move {
            done.await;
            order.lock().unwrap().push(what);
        })
    };
    let at = move |us: u64| start + Duration::from_micros(us);
    let never = std::future::pending::<()>;
    // Filed 100 ms ahead: all four in a level above the first.
    let long = record("long", Box::pin(sleep_wheel_until(at(100_500))));
    let t1 = record(
        "timeout",
        Box::pin(async move {
            timeout(Duration::from_micros(100_050), never())
                .await
                .unwrap_err();
        }),
    );
    let t2 = record(
        "try_timeout",
        Box::pin(async move {
            let t = timer.try_timeout(Duration::from_micros(100_250), never());
            t.unwrap().await.unwrap_err();
        }),
    );
    let t3 = record(
        "timeout_at",
        Box::pin(async move {
            timeout_at(at(100_450), never()).await.unwrap_err();
        }),
    );
    // A pass at 95 ms brings the wheel's time there: sleeps filed then for 100.1-100.4 ms are
    // a few ticks ahead, in the first level.
    sleep_wheel(Duration::from_millis(95)).await;
    let shorts: Vec<_> = (0..4)
        .map(|i| record("short", Box::pin(sleep_wheel_until(at(100_100 + 100 * i)))))
        .collect();
    for task in [long, t1, t2, t3].into_iter().chain(shorts) {
        task.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        [
            "long",
            "short",
            "short",
            "short",
            "short",
            "timeout",
            "try_timeout",
            "timeout_at"
        ]
    );
    assert!(
        Instant::now() <= start + Duration::from_millis(101),
        "one pass, at 101 ms"
    );
}
