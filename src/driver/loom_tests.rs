//! Loom model tests of the races that matter (run with `RUSTFLAGS="--cfg loom"`).
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test --release --lib loom_
//! ```
//!
//! Each model runs real crate code (the driver signal, the delayed-task state machine, a
//! shard's registration and the timer's shutdown) under the interleavings loom explores, with
//! at most three preemptions per execution (loom's recommended bound: bugs that need more are
//! rare, and the unbounded search of the two-registration model takes minutes).

use std::sync::atomic::Ordering::SeqCst;
use std::task::Waker;
use std::time::Duration;

use futures::task::noop_waker;
use loom::thread;

use crate::delayed_task::Header;
use crate::driver::clock::Clock;
use crate::driver::shard::{Common, Shard};
use crate::driver::signal::Signal;
use crate::driver::Inner;
use crate::error::DelayedError;
use crate::loom::{Arc, AtomicBool, AtomicUsize, Mutex};

/// Runs `f` under loom with a bounded number of preemptions.
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// The driver's side of one pass, as `Driver::pass` does it: unarm, read every shard's head
/// under its lock, arm for the earliest. Returns the tick it will sleep until.
fn driver_pass(signal: &Signal, heads: &[Mutex<Option<u64>>]) -> Option<u64> {
    signal.begin_pass();
    let next = heads.iter().filter_map(|h| *h.lock().unwrap()).min();
    signal.commit(next)
}

/// A registration that creates a new head races with a driver pass. The driver was armed for
/// tick 3 (it is in the pass that fires tick 3), so the registration of tick 5 sees an armed
/// time earlier than its own and would not notify on its own account: the protocol must still
/// leave the driver sleeping no later than 5, or notified. Then a quiet pass re-arms for the
/// true next head (not a stale earlier one).
#[test]
fn loom_registration_vs_driver_going_to_sleep() {
    model(|| {
        let signal = Arc::new(Signal::new());
        assert_eq!(signal.commit(Some(3)), Some(3));
        let heads = Arc::new([Mutex::new(None)]);

        let (s, h) = (signal.clone(), heads.clone());
        let registrar = thread::spawn(move || {
            *h[0].lock().unwrap() = Some(5);
            s.on_new_head(5);
        });
        let sleep_until = driver_pass(&signal, &heads[..]);
        registrar.join().unwrap();

        let notified = signal.poll_notified(&noop_waker());
        assert!(
            notified || sleep_until.is_some_and(|t| t <= 5),
            "lost wakeup: driver sleeps until {sleep_until:?} without a notification"
        );
        // Tick 5 fires; the next head is 50. A quiet pass arms exactly for it.
        *heads[0].lock().unwrap() = Some(50);
        assert_eq!(
            driver_pass(&signal, &heads[..]),
            Some(50),
            "re-armed for the real head"
        );
        assert!(
            !signal.on_new_head(60),
            "a later head does not wake the driver"
        );
        assert!(signal.on_new_head(40), "an earlier head does");
    });
}

/// Two registrations into two shards race with a pass; the driver ends up armed no later
/// than the earliest head, or notified.
#[test]
fn loom_two_registrations_vs_pass() {
    model(|| {
        let signal = Arc::new(Signal::new());
        let heads: Arc<[Mutex<Option<u64>>; 2]> = Arc::new([Mutex::new(None), Mutex::new(None)]);
        let mut threads = Vec::new();
        for (i, t) in [(0usize, 30u64), (1, 20)] {
            let (s, h) = (signal.clone(), heads.clone());
            threads.push(thread::spawn(move || {
                *h[i].lock().unwrap() = Some(t);
                s.on_new_head(t);
            }));
        }
        let sleep_until = driver_pass(&signal, &heads[..]);
        for t in threads {
            t.join().unwrap();
        }
        let notified = signal.poll_notified(&noop_waker());
        assert!(notified || sleep_until.is_some_and(|t| t <= 20));
    });
}

/// `DelayedTask::cancel` racing with the driver firing the task: exactly one wins, and the
/// handle sees the matching outcome.
#[test]
fn loom_cancel_vs_fire_exactly_once() {
    model(|| {
        let header = Arc::new(Header::<u32>::new());
        let ran = Arc::new(AtomicUsize::new(0));

        let (h, r) = (header.clone(), ran.clone());
        let driver = thread::spawn(move || {
            if h.try_start() {
                r.fetch_add(1, SeqCst);
                h.complete(Ok(7));
                true
            } else {
                false
            }
        });
        let cancelled = header.try_cancel();
        if cancelled {
            header.complete(Err(DelayedError::cancelled()));
        }
        let started = driver.join().unwrap();

        assert!(cancelled ^ started, "exactly one of cancel and fire wins");
        assert_eq!(
            ran.load(SeqCst),
            usize::from(started),
            "runs iff cancel lost"
        );
        assert!(
            !header.try_cancel() && !header.try_start(),
            "no second transition"
        );
    });
}

fn model_timer() -> (Arc<Inner>, tokio::runtime::Runtime) {
    // A runtime only to have a Handle; nothing is spawned on it inside the model.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let common = Arc::new(Common {
        clock: Clock::new(Duration::from_millis(1)),
        signal: Signal::new(),
        shutdown: AtomicBool::new(false),
        detached: AtomicBool::new(false),
        max_pending: 1,
        reserved: AtomicUsize::new(0),
        runtime: rt.handle().clone(),
        wakeups: std::sync::atomic::AtomicU64::new(0),
    });
    let shard = Arc::new(Shard::new(64, common.clone()));
    (
        Arc::new(Inner {
            shards: vec![shard].into_boxed_slice(),
            common,
        }),
        rt,
    )
}

/// Registration racing with shutdown: the entry is either refused or drained by shutdown,
/// never left behind, and the slot it reserved is given back either way.
#[test]
fn loom_register_vs_shutdown() {
    let waker: Waker = noop_waker();
    model(move || {
        let (inner, _rt) = model_timer();
        let i = inner.clone();
        let w = waker.clone();
        let registrar =
            thread::spawn(move || i.shards[0].register(50, w).is_ok_and(|k| k.is_some()));
        inner.shutdown();
        let registered = registrar.join().unwrap();

        assert_eq!(
            inner.pending(),
            0,
            "nothing left behind (registered: {registered})"
        );
        assert_eq!(inner.common.reserved.load(SeqCst), 0, "slot given back");
        // After shutdown, registration is refused.
        assert!(inner.shards[0].register(60, noop_waker()).is_err());
    });
}

/// Rescheduling a timer earlier races with the driver firing what is due: the entry fires
/// exactly once, and only if its deadline (old or new) had been reached.
#[test]
fn loom_reset_vs_fire() {
    model(|| {
        let (inner, _rt) = model_timer();
        let shard = inner.shards[0].clone();
        let key = shard.register(50, noop_waker()).unwrap().unwrap();

        let s = shard.clone();
        let resetter = thread::spawn(move || s.reschedule(key, 10));
        // The driver fires what is due at tick 10.
        let fired_by_driver = shard.lock().poll(10).is_some();
        let rescheduled = resetter.join().unwrap();

        if fired_by_driver {
            assert!(rescheduled, "only the earlier deadline is due at tick 10");
        }
        // Whatever the order, a later pass at 10 finds nothing left to fire twice, and at
        // 50 everything has fired exactly once.
        let fired_later = shard.lock().poll(50).is_some();
        assert!(fired_by_driver ^ fired_later, "fires exactly once");
    });
}

/// A registration racing with a driver pass over its shard: the entry is fired by this pass
/// (it was due), or it is still pending and the driver either sleeps no later than its tick or
/// has been notified. Runs the real `Shard::register` and the driver's pass order.
#[test]
fn loom_register_vs_fire() {
    model(|| {
        let (inner, _rt) = model_timer();
        let shard = inner.shards[0].clone();
        // The driver is armed for tick 3 and passes at tick 3 while tick 5 is registered.
        assert_eq!(inner.common.signal.commit(Some(3)), Some(3));

        let s = shard.clone();
        let registrar = thread::spawn(move || s.register(5, noop_waker()).unwrap());

        inner.common.signal.begin_pass();
        let (fired, next) = {
            let mut wheel = shard.lock();
            let fired = wheel.poll(3).is_some();
            (fired, wheel.next_expiration())
        };
        let sleep_until = inner.common.signal.commit(next);
        let key = registrar
            .join()
            .unwrap()
            .expect("tick 5 is ahead of the wheel");

        assert!(!fired, "nothing is due at tick 3");
        assert!(shard.contains(key), "still pending");
        let notified = inner.common.signal.poll_notified(&noop_waker());
        assert!(
            notified || sleep_until.is_some_and(|t| t <= 5),
            "registered entry missed: driver sleeps until {sleep_until:?}"
        );
        // The next pass at tick 5 fires it, exactly once.
        assert!(shard.lock().poll(5).is_some());
        assert!(shard.lock().poll(5).is_none());
    });
}
