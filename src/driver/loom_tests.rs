//! Model tests of the races that matter, on the crate's real code: the arming protocol
//! (`Driver::kick`, `Shard::register`, the firing pass, `Driver::shutdown`) and a shard's
//! reschedule (the delayed-task state machine's model is in `delayed_task.rs`). Only the Tokio sleep is replaced, under loom, by an
//! alarm that records the time it is set for (`alarm.rs`).
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test --release --lib loom_
//! LOOM_MAX_PREEMPTIONS=4 RUSTFLAGS="--cfg loom" cargo test --release --lib loom_
//! ```
//!
//! Under loom each model explores the interleavings with at most `LOOM_MAX_PREEMPTIONS`
//! preemptions per execution (3 when unset: loom's recommended bound; bugs that need more are
//! rare, and the unbounded search of the larger models takes minutes). Without `--cfg loom`
//! each model runs once on real threads, so plain `cargo test` exercises them too.
//!
//! The property most models check is the quiescent one: once every thread is done, if any
//! entry is pending, the alarm is set (and has not fired) no later than the earliest work of
//! any shard (its `next_expiration`), so no registration is ever left waiting without a
//! wakeup. (It may be set earlier: a registration racing with a pass can leave a time the
//! pass already handled, which costs one spurious pass.)

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

use futures::task::noop_waker;
#[cfg(loom)]
use loom::thread;
#[cfg(not(loom))]
use std::thread;

use super::entry::{Outcome, Reset, TimerEntry};
use super::shard::Shard;
use super::{Driver, FireReport, Wakers};
use crate::loom::{model, AtomicUsize};

/// One hour in wheel time (nanoseconds): far enough that nothing fires during a model.
const HOUR: u64 = 3_600_000_000_000;

/// A timer's driver and shards, built and started as `Builder::build` does, on a runtime
/// that is never driven: dropping it at the end of the model drops the sentinel task, which
/// shuts the timer down before the runtime's time driver goes (the real lifecycle).
fn timer(
    shards: usize,
    max_pending: usize,
) -> (Arc<Driver>, Box<[Arc<Shard>]>, tokio::runtime::Runtime) {
    timer_on_clock(shards, max_pending, false)
}

/// [`timer`], its runtime's clock paused at the origin: the model's wheel times (a few
/// nanoseconds) are due only at the passes it makes itself, as an alarm set for a time the
/// clock has passed makes its pass at once.
fn paused_timer(
    shards: usize,
    max_pending: usize,
) -> (Arc<Driver>, Box<[Arc<Shard>]>, tokio::runtime::Runtime) {
    timer_on_clock(shards, max_pending, true)
}

fn timer_on_clock(
    shards: usize,
    max_pending: usize,
    paused: bool,
) -> (Arc<Driver>, Box<[Arc<Shard>]>, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(paused)
        .build()
        .expect("runtime");
    let (driver, shards) = Driver::new(
        Duration::from_millis(1),
        64,
        shards,
        max_pending,
        false,
        rt.handle().clone(),
    );
    driver.start();
    (driver, shards, rt)
}

/// The earliest expiration over `shards`: what the alarm must be set for when all is quiet.
fn earliest(shards: &[Arc<Shard>]) -> Option<u64> {
    shards
        .iter()
        .filter_map(|s| s.lock().next_expiration())
        .min()
}

/// The quiescent property: with anything pending, an unfired alarm no later than its head.
fn assert_armed_in_time(driver: &Driver, shards: &[Arc<Shard>]) {
    if let Some(head) = earliest(shards) {
        let alarm = driver.alarm_set_for();
        assert!(
            alarm.is_some_and(|a| a <= head),
            "lost wakeup: head {head}, alarm {alarm:?}"
        );
    }
}

/// A registration that creates an earlier head races with a pass (Tokio firing the alarm).
/// Whichever thread ends up running the driver's work, the alarm ends set for the new head.
#[test]
fn loom_registration_vs_pass_arms_for_the_earliest_head() {
    model(|| {
        let (driver, shards, _rt) = timer(1, usize::MAX);
        shards[0].register(2 * HOUR, noop_waker()).unwrap().unwrap();
        assert_eq!(
            driver.alarm_set_for(),
            earliest(&shards),
            "armed for the first entry"
        );

        let shard = shards[0].clone();
        let registrar = thread::spawn(move || shard.register(HOUR, noop_waker()).unwrap());
        driver.fire_alarm();
        let key = registrar
            .join()
            .unwrap()
            .expect("an hour away is ahead of the wheel");

        assert!(shards[0].contains(key));
        assert!(earliest(&shards).is_some_and(|h| h <= HOUR));
        assert_armed_in_time(&driver, &shards);
    });
}

/// Found by the multi-thread stress test: a registration racing with the pass that fires its
/// entry leaves the driver armed for a time the pass handled, the time the alarm had just
/// fired for. Re-arming for it must set the Tokio sleep again (it fired), not skip it as
/// already set, or the entries left pending wait forever.
#[test]
fn loom_registration_racing_the_pass_that_fires_it_rearms_a_fired_alarm() {
    model(|| {
        let (driver, shards, _rt) = paused_timer(2, usize::MAX);
        shards[0].register(2 * HOUR, noop_waker()).unwrap().unwrap();
        // Due at once (1 ns after the origin): the alarm is set for it.
        shards[0].register(1, noop_waker()).unwrap().unwrap();
        assert_eq!(driver.alarm_set_for(), Some(1));

        let shard = shards[1].clone();
        let registrar = thread::spawn(move || {
            shard.register(1, noop_waker()).unwrap();
        });
        driver.fire_alarm();
        registrar.join().unwrap();
        assert_armed_in_time(&driver, &shards);
    });
}

/// Two registrations into two shards race with a pass; the alarm ends set for the earlier.
#[test]
fn loom_two_registrations_vs_pass() {
    model(|| {
        let (driver, shards, _rt) = timer(2, usize::MAX);
        let mut threads = Vec::new();
        for (i, at) in [(0usize, 3 * HOUR), (1, HOUR)] {
            let shard = shards[i].clone();
            threads.push(thread::spawn(move || {
                shard.register(at, noop_waker()).unwrap();
            }));
        }
        driver.fire_alarm();
        for t in threads {
            t.join().unwrap();
        }
        assert_armed_in_time(&driver, &shards);
    });
}

/// Two threads register into one shard (more threads than shards): one files an entry that
/// lowers the driver's time, the other a later one, which the shard may stage on the strength
/// of the first one's report (`Wheel::stage_recent`). Whatever the order, when a registration
/// returns the driver is already armed for its entry, or a runner is bound to arm it: the
/// first one lowers the armed time before it releases the shard's lock, so the second cannot
/// stage behind a report the driver has not heard of yet (and wait, then, for the first thread
/// to run again).
#[test]
fn loom_a_registration_staged_behind_anothers_report_finds_the_driver_armed() {
    model(|| {
        let (driver, shards, _rt) = timer(1, usize::MAX);
        shards[0].register(2 * HOUR, noop_waker()).unwrap().unwrap();
        let mut threads = Vec::new();
        for at in [HOUR, HOUR + 1] {
            let (shard, driver) = (shards[0].clone(), driver.clone());
            threads.push(thread::spawn(move || {
                shard.register(at, noop_waker()).unwrap().unwrap();
                assert!(
                    driver.armed_by(at),
                    "registered for {at}, driver armed later"
                );
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_armed_in_time(&driver, &shards);
    });
}

/// The alarm's wake (a pass) racing with a cancellation that empties the wheel: once quiet,
/// nothing is armed (idle means no wakeup), or the alarm names the live head.
#[test]
fn loom_cancel_vs_pass_leaves_no_stale_alarm() {
    model(|| {
        let (driver, shards, _rt) = timer(1, usize::MAX);
        let key = shards[0].register(HOUR, noop_waker()).unwrap().unwrap();
        let shard = shards[0].clone();
        let canceller = thread::spawn(move || shard.cancel(key).is_some());
        driver.fire_alarm();
        assert!(canceller.join().unwrap());
        // A last pass (the alarm firing for the emptied bucket) settles it.
        driver.fire_alarm();
        assert_eq!(driver.alarm_set_for(), None, "armed with nothing pending");
    });
}

/// Re-arming (a registration of an earlier head) racing with shutdown: the alarm ends
/// disarmed, nothing is left pending, every slot is given back, and later registrations are
/// refused.
#[test]
fn loom_rearm_vs_shutdown() {
    model(|| {
        let (driver, shards, _rt) = timer(1, 2);
        let shard = shards[0].clone();
        let registrar = thread::spawn(move || shard.register(HOUR, noop_waker()).is_ok());
        driver.shutdown();
        let _registered = registrar.join().unwrap();

        assert_eq!(driver.alarm_set_for(), None, "armed after shutdown");
        assert_eq!(shards[0].len(), 0, "nothing left behind");
        assert_eq!(driver.reserved(), 0, "slot given back");
        assert!(shards[0].register(HOUR, noop_waker()).is_err());
    });
}

/// Registration racing with shutdown: the entry is either refused or drained by shutdown,
/// never left behind, and the slot it reserved is given back either way.
#[test]
fn loom_register_vs_shutdown() {
    model(|| {
        let (driver, shards, _rt) = timer(1, 1);
        let shard = shards[0].clone();
        let registrar = thread::spawn(move || {
            shard
                .register(HOUR, noop_waker())
                .is_ok_and(|k| k.is_some())
        });
        driver.shutdown();
        let registered = registrar.join().unwrap();

        assert_eq!(
            shards[0].len(),
            0,
            "nothing left behind (registered: {registered})"
        );
        assert_eq!(driver.reserved(), 0, "slot given back");
    });
}

/// Rescheduling a timer earlier races with the shard's step of a pass: the entry fires
/// exactly once, and only once its deadline (old or new) has been reached.
#[test]
fn loom_reset_vs_fire() {
    model(|| {
        let (_driver, shards, _rt) = paused_timer(1, usize::MAX);
        let shard = shards[0].clone();
        let key = shard.register(50, noop_waker()).unwrap().unwrap();

        let s = shard.clone();
        let resetter = thread::spawn(move || s.reschedule(key, 10));
        let mut wakers = Wakers::default();
        let mut fired = FireReport::default();
        shard.fire_due(10, &mut wakers, &mut fired);
        let fired_by_pass = fired.entries == 1;
        let rescheduled = resetter.join().unwrap();

        if fired_by_pass {
            assert!(rescheduled, "only the earlier deadline is due at 10");
        }
        let mut fired = FireReport::default();
        shard.fire_due(50, &mut wakers, &mut fired);
        let fired_later = fired.entries == 1;
        assert!(fired_by_pass ^ fired_later, "fires exactly once");
    });
}

/// A `Sleep`'s reset to an earlier deadline (`TimerEntry::reschedule`) races with the pass
/// that reaches it, and its owner polls after the reset: the waker is woken exactly once (by
/// the pass, or by the reset that finds the deadline reached), and once the owner has seen
/// `Due` nothing is left in the wheel and the slot is free, with no later pass. (A reset that
/// filed the entry at a time a finished pass had handed out would leave it there, the owner
/// skipping the lock on the strength of that pass.)
#[test]
fn loom_entry_reset_vs_fire_leaves_nothing_behind() {
    model(|| {
        let (driver, shards, _rt) = paused_timer(1, 1);
        let shard = shards[0].clone();
        let (counter, waker) = Counter::waker();
        let mut entry = TimerEntry::new(shard.clone(), ());
        entry.register_units(50, &waker);
        let at_10 = driver.clock.at_units(10);

        let (s, d) = (shard.clone(), driver.clone());
        let resetter = thread::spawn(move || {
            let reset = entry.reschedule(at_10);
            let outcome = entry.poll(&waker, None);
            // A finished pass has given the slot back by the time it says so (the owner
            // may have skipped the lock on the strength of it).
            if s.handed_out(10) {
                assert_eq!(d.reserved(), 0, "handed out, and the slot still taken");
            }
            (entry, waker, reset, outcome)
        });
        fire(&shard, 10);
        let (mut entry, waker, reset, outcome) = resetter.join().unwrap();

        assert_ne!(reset, Reset::Gone, "pending until the reset or the pass");
        if outcome == Outcome::Pending {
            assert_eq!(reset, Reset::Filed);
            assert_eq!(
                entry.poll(&waker, None),
                Outcome::Due,
                "woken, still pending"
            );
        }
        assert_eq!(counter.wakes(), 1, "woken exactly once");
        assert_eq!(shard.lock().len(), 0, "left in the wheel");
        assert_eq!(driver.reserved(), 0, "slot kept");
    });
}

/// The interleaving of the model above that a pass wins, deterministically: a reset to a
/// deadline the wheel's time has already reached takes the entry out and wakes its waker,
/// rather than filing it where the owner, told `Due`, would leave it.
#[cfg(not(loom))]
#[test]
fn an_entry_reset_to_a_time_a_pass_has_reached_is_taken_out_and_woken() {
    let (driver, shards, _rt) = paused_timer(1, 1);
    let shard = &shards[0];
    let (counter, waker) = Counter::waker();
    let mut entry = TimerEntry::new(shard.clone(), ());
    entry.register_units(50, &waker);
    assert_eq!(fire(shard, 10), 0);
    assert_eq!(entry.reschedule(driver.clock.at_units(10)), Reset::Due);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(entry.poll(&waker, None), Outcome::Due);
    assert_eq!(shard.lock().len(), 0, "left in the wheel");
    assert_eq!(driver.reserved(), 0, "slot kept");
    assert_eq!(fire(shard, 50), 0, "fired again");
}

/// `Timer::pending` races with a cancel on one shard and a registration on another (the slot
/// the cancel freed): it counts every shard at one instant, so never both entries, and never
/// more than `max_pending`. Counted a shard at a time, it could count the first shard before
/// the cancel and the second after the registration.
#[test]
fn loom_pending_vs_cancel_and_register_on_another_shard_stays_within_max_pending() {
    model(|| {
        let (_driver, shards, _rt) = timer(2, 1);
        let key = shards[0].register(HOUR, noop_waker()).unwrap().unwrap();
        let timer = crate::Timer::from_shards(shards.clone());

        let other = shards.clone();
        let mover = thread::spawn(move || {
            assert!(other[0].cancel(key).is_some());
            other[1].register(HOUR, noop_waker()).unwrap().unwrap()
        });
        let pending = timer.pending();
        let metrics = timer.metrics().pending;
        mover.join().unwrap();

        assert!(
            pending <= 1,
            "pending() counted {pending} with max_pending 1"
        );
        assert!(
            metrics <= 1,
            "metrics().pending counted {metrics} with max_pending 1"
        );
        assert_eq!(timer.pending(), 1);
    });
}

/// A registration refused by a full timer races with a cancel that frees a slot and a
/// registration made after it: that registration is refused only if the racing one took the
/// slot. A refusal must not count, even for a moment, as a slot taken: seen by the other
/// registration, it would refuse it with a slot free (`TimerError::Full` while fewer than
/// `max_pending` timers are pending).
#[test]
fn loom_a_refused_registration_never_makes_another_refused_with_a_slot_free() {
    model(|| {
        let (_driver, shards, _rt) = timer(1, 2);
        let _held = shards[0].register(HOUR, noop_waker()).unwrap().unwrap();
        let mine = shards[0].register(HOUR, noop_waker()).unwrap().unwrap();

        let other = shards.clone();
        let racer = thread::spawn(move || other[0].register(HOUR, noop_waker()).is_ok());
        assert!(shards[0].cancel(mine).is_some());
        let again = shards[0].register(HOUR, noop_waker()).is_ok();
        let raced = racer.join().unwrap();

        assert!(
            again || raced,
            "refused with a slot free: the racing refusal held it"
        );
        assert!(!(again && raced), "max_pending 2 exceeded");
    });
}

/// The shard's step of a pass at wheel time `now`: how many entries it fired.
fn fire(shard: &Shard, now: u64) -> usize {
    let mut fired = FireReport::default();
    let mut wakers = Wakers::default();
    shard.fire_due(now, &mut wakers, &mut fired);
    // As a pass does once every shard is done.
    wakers.wake_held();
    fired.entries
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

impl Counter {
    fn waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter::default());
        (counter.clone(), Waker::from(counter))
    }

    fn wakes(&self) -> usize {
        self.0.load(SeqCst)
    }
}

/// A re-poll with the registered waker (the lock-free path) races with the pass that fires
/// the entry: `Pending` only if the waker is woken, and the poll after the wake is `Due`.
#[test]
fn loom_repoll_vs_fire_loses_no_wakeup() {
    model(|| {
        let (driver, shards, _rt) = paused_timer(1, 1);
        let shard = shards[0].clone();
        let (counter, waker) = Counter::waker();
        let mut entry = TimerEntry::new(shard.clone(), ());
        entry.register_units(10, &waker);

        let firer = thread::spawn(move || fire(&shard, 10));
        let first = entry.poll(&waker, None);
        let fired = firer.join().unwrap();

        assert_eq!(fired, 1, "the pass fires it, whatever the poll saw");
        if first == Outcome::Pending {
            assert_eq!(counter.wakes(), 1, "pending, and never woken");
            assert_eq!(
                entry.poll(&waker, None),
                Outcome::Due,
                "woken, and still pending"
            );
        }
        assert_eq!(shards[0].len(), 0, "nothing left behind");
        assert_eq!(driver.reserved(), 0, "slot given back");
    });
}

/// A re-poll with another task's waker (the locked path) races with the firing: `Pending`
/// only if the new waker is the one woken.
#[test]
fn loom_repoll_new_waker_vs_fire_loses_no_wakeup() {
    model(|| {
        let (_driver, shards, _rt) = timer(1, usize::MAX);
        let shard = shards[0].clone();
        let (_, old) = Counter::waker();
        let (counter, new) = Counter::waker();
        let mut entry = TimerEntry::new(shard.clone(), ());
        entry.register_units(10, &old);

        let firer = thread::spawn(move || {
            fire(&shard, 10);
        });
        let first = entry.poll(&new, None);
        firer.join().unwrap();

        if first == Outcome::Pending {
            assert_eq!(counter.wakes(), 1, "pending, and the new waker never woken");
            assert_eq!(entry.poll(&new, None), Outcome::Due);
        }
    });
}

/// A pass that runs before the deadline races with re-polls: never `Due` early, and the
/// entry stays filed with its waker.
#[test]
fn loom_repoll_vs_early_pass_is_never_ready_early() {
    model(|| {
        let (_driver, shards, _rt) = paused_timer(1, usize::MAX);
        let shard = shards[0].clone();
        let (counter, waker) = Counter::waker();
        let mut entry = TimerEntry::new(shard.clone(), ());
        entry.register_units(10, &waker);

        let firer = thread::spawn(move || fire(&shard, 9));
        assert_eq!(entry.poll(&waker, None), Outcome::Pending, "ready early");
        assert_eq!(firer.join().unwrap(), 0, "fired early");
        assert_eq!(entry.poll(&waker, None), Outcome::Pending, "ready early");
        assert_eq!(counter.wakes(), 0);
        assert!(entry.is_pending());
    });
}

/// A re-poll races with shutdown: `Pending` only if the shutdown has yet to drain (and wake)
/// the entry; the poll after the wake says `Shutdown`.
#[test]
fn loom_repoll_vs_shutdown_loses_no_wakeup() {
    model(|| {
        let (driver, shards, _rt) = timer(1, 1);
        let (counter, waker) = Counter::waker();
        let mut entry = TimerEntry::new(shards[0].clone(), ());
        entry.register_units(HOUR, &waker);

        let d = driver.clone();
        let stopper = thread::spawn(move || d.shutdown());
        let first = entry.poll(&waker, None);
        stopper.join().unwrap();

        assert_ne!(first, Outcome::Due, "a shutdown is not a deadline");
        if first == Outcome::Pending {
            assert_eq!(counter.wakes(), 1, "pending, and never woken");
            assert_eq!(entry.poll(&waker, None), Outcome::Shutdown);
        }
        assert_eq!(driver.reserved(), 0, "slot given back");
    });
}

/// A cancel whose `try_lock` met a holder of the wheel's lock (the shard's worker
/// registering, a pass) racing with the pass that fires the entry: the cancel either wins, and
/// the entry never fires (handed over and swept before the pass fires anything, or removed
/// under the lock), or loses, and the entry fires once; the slot is given back once and
/// nothing is left pending. The models call `hand_over` and then the locking `cancel`
/// themselves, which is what `cancel_entry` does once its `try_lock` fails: loom 0.7 never
/// makes a `try_lock` fail (its branch records no access, so no schedule puts another
/// thread's `lock` before it), so a model through `TimerEntry::cancel` would never reach the
/// hand-over.
#[test]
fn loom_contended_cancel_vs_fire_never_fires_a_cancelled_entry() {
    model(|| {
        let (driver, shards, _rt) = paused_timer(1, 1);
        let shard = shards[0].clone();
        let (counter, waker) = Counter::waker();
        let key = shard.register(10, waker).unwrap().unwrap();

        let s = shard.clone();
        let firer = thread::spawn(move || fire(&s, 10));
        let cancelled = shard.hand_over(key, 10, false) || shard.cancel(key).is_some();
        let fired = firer.join().unwrap();

        assert_eq!(cancelled, fired == 0, "cancelled or fired, exactly one");
        assert_eq!(counter.wakes(), fired, "woken only if it fired");
        assert_eq!(driver.reserved(), 0, "slot given back once");
        assert_eq!(shard.len(), 0, "nothing left pending");
    });
}

/// A contended cancel (as above) racing with a shutdown's drain: a cancelled entry is never
/// woken by the drain, one the drain took first is woken once, and the slot is given back
/// once.
#[test]
fn loom_contended_cancel_vs_shutdown() {
    model(|| {
        let (driver, shards, _rt) = timer(1, 1);
        let shard = shards[0].clone();
        let (counter, waker) = Counter::waker();
        let key = shard.register(HOUR, waker).unwrap().unwrap();

        let closer = {
            let driver = driver.clone();
            thread::spawn(move || driver.shutdown())
        };
        let cancelled = shard.hand_over(key, HOUR, false) || shard.cancel(key).is_some();
        closer.join().unwrap();

        if cancelled {
            assert_eq!(counter.wakes(), 0, "a cancelled entry woken by the drain");
        } else {
            assert_eq!(counter.wakes(), 1, "an entry the drain took not woken once");
        }
        assert_eq!(driver.reserved(), 0, "slot given back once");
        assert_eq!(shard.lock().len(), 0, "nothing left in the wheel");
    });
}

/// A cancel from another thread than the shard's, on a busy timer (a pass due soon), racing
/// with a pass: it hands over (or, if it reads the armed time while the pass runs, takes the
/// lock), the entry never fires, its slot is given back once, and a handed-over entry is
/// either swept by the pass or left with the alarm set no later than `SWEEP_WITHIN` after
/// the shard's last pass: a pass comes to sweep it even if the shard registers nothing more.
#[test]
fn loom_remote_hand_over_vs_pass_leaves_the_entry_swept_or_a_pass_due() {
    use super::shard::SWEEP_WITHIN;
    model(|| {
        let (driver, shards, _rt) = timer(1, 2);
        let shard = shards[0].clone();
        // Busy: an entry due already keeps a pass coming; the pass fires it, and then has
        // nothing to arm for but the hour.
        let (near, near_waker) = Counter::waker();
        shard.register(1, near_waker).unwrap().unwrap();
        let (counter, waker) = Counter::waker();
        let key = shard.register(HOUR, waker).unwrap().unwrap();

        let s = shard.clone();
        let canceller =
            thread::spawn(move || s.hand_over(key, HOUR, true) || s.cancel(key).is_some());
        driver.fire_alarm();
        assert!(canceller.join().unwrap(), "an hour away: cancelled");

        assert_eq!(counter.wakes(), 0, "a cancelled entry fired");
        assert_eq!(near.wakes(), 1, "the due entry fired");
        assert_eq!(shard.len(), 0, "nothing pending");
        assert_eq!(driver.reserved(), 0, "each slot given back once");
        if !shard.lock().is_empty() {
            let by = shard.fired_through.load(SeqCst) + SWEEP_WITHIN;
            let alarm = driver.alarm_set_for();
            assert!(
                alarm.is_some_and(|a| a <= by),
                "handed over and not swept, but no pass due by {by}: alarm {alarm:?}"
            );
        }
    });
}

/// Cancels from a thread that finds the wheel's lock taken are handed over, not waited for:
/// at once the entry is no longer pending and its slot is free, it never fires, and the
/// shard's next registration reclaims its memory, so a loop of them holds memory flat.
#[cfg(not(loom))]
#[test]
fn handed_over_cancels_free_the_slot_at_once_and_memory_at_the_next_registration() {
    let (driver, shards, _rt) = timer(1, 2);
    let shard = &shards[0];
    let (counter, waker) = Counter::waker();
    let mut capacity = None;
    for round in 0..1000 {
        let mut entry = TimerEntry::new(shard.clone(), ());
        entry.register_units(HOUR, &waker);
        assert_eq!(shard.len(), 1);
        let cancelled = {
            // The wheel's lock taken (as by the shard's worker registering): the cancel must
            // not wait for it (waiting here would deadlock the test).
            let held = shard.lock();
            let cancelled = entry.cancel();
            assert_eq!(held.len(), 1, "still in the wheel until swept");
            cancelled
        };
        assert!(cancelled);
        assert_eq!(shard.len(), 0, "not pending once cancelled");
        assert_eq!(driver.reserved(), 0, "slot free at once");
        // The next registration sweeps it: one entry in the wheel, the new one.
        let mut next = TimerEntry::new(shard.clone(), ());
        next.register_units(HOUR, &waker);
        assert_eq!(
            shard.lock().len(),
            1,
            "round {round}: swept by the registration"
        );
        drop(next);
        assert_eq!(shard.lock().len(), 0);
        let cap = shard.lock().capacity();
        assert!(capacity.is_none_or(|c| cap <= c), "memory grew: {cap}");
        capacity.get_or_insert(cap);
    }
    // A pass over everything fires none of them.
    assert_eq!(fire(shard, 2 * HOUR), 0);
    assert_eq!(counter.wakes(), 0, "a cancelled entry fired");
}

/// Once a pass has finished handing out everything due through an entry's time, its owner
/// learns `Due` and lets the entry go without the wheel's lock, with the same waker or
/// another, and a drop that comes before any poll takes none either: the pass took the entry
/// out and gave its slot back. An entry the pass did not reach still takes the lock.
#[cfg(not(loom))]
#[test]
fn the_owner_of_an_entry_a_finished_pass_handed_out_takes_no_lock() {
    let (driver, shards, _rt) = paused_timer(1, 8);
    let shard = &shards[0];
    let (counter, waker) = Counter::waker();
    let (_, other) = Counter::waker();
    let mut entries: Vec<_> = (0..4).map(|_| TimerEntry::new(shard.clone(), ())).collect();
    for (entry, units) in entries.iter_mut().zip([10, 10, 10, 20]) {
        entry.register_units(units, &waker);
    }
    assert_eq!(fire(shard, 10), 3);
    assert_eq!(counter.wakes(), 3);
    assert_eq!(driver.reserved(), 1, "the fired entries' slots are free");

    let before = shard.locks_taken();
    assert_eq!(entries[0].poll(&waker, None), Outcome::Due);
    assert_eq!(entries[1].poll(&other, None), Outcome::Due, "another waker");
    assert!(!entries[2].cancel(), "dropped unpolled: it was not pending");
    assert_eq!(shard.locks_taken(), before, "took the wheel's lock");
    assert_eq!(entries[0].poll(&waker, None), Outcome::Due, "polled again");

    // Filed later than the pass reached: still pending, and its cancel takes the lock.
    assert!(entries[3].cancel());
    assert!(
        shard.locks_taken() > before,
        "the lock count counts nothing"
    );
    assert_eq!(shard.len(), 0);
    assert_eq!(driver.reserved(), 0);
}

/// A cancel with the wheel's lock free, on a quiet timer (no pass due soon), removes the
/// entry at once whichever thread's shard it is: its memory and its waker go now, as nothing
/// may come to reclaim them before the entry's bucket is due. On a busy timer (a pass due
/// within `SWEEP_WITHIN` of the shard's last), a cancel from another thread than the shard's
/// is handed over (no longer pending, slot free), and that pass sweeps it. No cancel ever runs
/// a pass.
#[cfg(not(loom))]
#[test]
fn a_cancel_from_another_threads_shard_hands_over_only_with_a_pass_due() {
    use super::shard::{this_thread_shard, SWEEP_WITHIN};
    let (driver, shards, _rt) = timer(2, 4);
    let (counter, waker) = Counter::waker();
    let home = this_thread_shard(shards.len());
    for busy in [false, true] {
        let near = busy.then(|| {
            let mut near = TimerEntry::new(shards[home].clone(), ());
            near.register_units(SWEEP_WITHIN / 2, &noop_waker());
            near
        });
        for (i, shard) in shards.iter().enumerate() {
            let mut entry = TimerEntry::new(shard.clone(), ());
            entry.register_units(HOUR, &waker);
            assert_eq!(Arc::strong_count(&counter), 3, "the wheel holds a clone");
            let passes = driver.passes();
            assert!(entry.cancel());
            assert_eq!(driver.passes(), passes, "a cancel ran a pass");
            assert_eq!(
                shard.len(),
                usize::from(busy && i == home),
                "not pending once cancelled"
            );
            assert_eq!(driver.reserved(), usize::from(busy), "slot free at once");
            if !busy || i == home {
                assert_eq!(
                    Arc::strong_count(&counter),
                    2,
                    "removed at once (busy: {busy})"
                );
                continue;
            }
            assert_eq!(Arc::strong_count(&counter), 3, "handed over, not removed");
            assert_eq!(fire(shard, SWEEP_WITHIN), 0, "a cancelled entry fired");
            assert_eq!(shard.lock().len(), 0, "swept by the pass");
            assert_eq!(
                Arc::strong_count(&counter),
                2,
                "the waker dropped by the sweep"
            );
        }
        drop(near);
    }
    assert_eq!(counter.wakes(), 0, "a cancelled entry fired");
}

/// A burst of handed-over cancels grows the inbox's buffer; the sweep that takes it (here the
/// next registration's) gives all but `INBOX_KEPT` keys' worth of it back, so a burst's
/// memory does not stay with the shard.
#[cfg(not(loom))]
#[test]
fn a_burst_of_handed_over_cancels_gives_its_buffer_back_once_swept() {
    use super::shard::INBOX_KEPT;
    const BURST: usize = 10 * INBOX_KEPT;
    let (_driver, shards, _rt) = timer(1, usize::MAX);
    let shard = &shards[0];
    let keys: Vec<_> = (0..BURST)
        .map(|_| shard.register(HOUR, noop_waker()).unwrap().unwrap())
        .collect();
    for key in keys {
        assert!(shard.hand_over(key, HOUR, false));
    }
    assert_eq!(shard.len(), 0, "handed over: none pending");
    assert_eq!(shard.lock().len(), BURST, "none swept yet");
    assert!(
        shard.inbox_capacity().0 >= BURST,
        "the burst is in the inbox"
    );
    let _next = shard.register(HOUR, noop_waker()).unwrap().unwrap();
    assert_eq!(shard.lock().len(), 1, "the registration swept the burst");
    let (inbox, spare) = shard.inbox_capacity();
    assert!(
        inbox <= INBOX_KEPT && spare <= INBOX_KEPT,
        "the burst's buffer kept: inbox {inbox}, spare {spare} keys"
    );
    shard.shrink_to_fit();
    assert_eq!(shard.inbox_capacity(), (0, 0), "shrink_to_fit empties both");
}

/// The hand-over's rule, on its own (a model explores few of its interleavings): a cancel is
/// handed over only for an entry later than every pass's published time, and never after
/// shutdown; otherwise the canceller waits for the lock.
#[cfg(not(loom))]
#[test]
fn a_cancel_is_handed_over_only_for_an_entry_no_pass_has_reached() {
    let (driver, shards, _rt) = timer(1, usize::MAX);
    let shard = &shards[0];
    let key = shard.register(HOUR, noop_waker()).unwrap().unwrap();
    // As a pass at wheel time 10 publishes before it sweeps and fires.
    shard.fired_through.store(10, SeqCst);
    assert!(
        !shard.hand_over(key, 10, false),
        "an entry due in the running pass"
    );
    assert!(
        !shard.hand_over(key, 9, false),
        "an entry due in the running pass"
    );
    assert_eq!(shard.len(), 1, "not handed over, still pending");
    assert!(
        shard.hand_over(key, 11, false),
        "later than the pass: handed over"
    );
    assert_eq!(shard.len(), 0, "handed over: no longer pending");
    let other = shard.register(HOUR, noop_waker()).unwrap().unwrap();
    assert_eq!(shard.lock().len(), 1, "the registration swept the first");
    driver.shutdown();
    assert!(
        !shard.hand_over(other, HOUR, false),
        "after shutdown: the drain decides"
    );
}

/// A cancel that finds the wheel's lock taken hands the entry over to the next sweep, trusting
/// the pass its bucket's time brings to come by then. An entry past the horizon (a timeout
/// that never elapses) waits in no bucket, so on a quiet timer no pass ever comes: its cancel
/// waits for the lock instead, and its waker (holding the task) goes with it.
#[cfg(not(loom))]
#[test]
fn a_cancel_past_the_horizon_is_never_left_for_a_pass_that_never_comes() {
    let (driver, shards, _rt) = timer(1, usize::MAX);
    let shard = &shards[0];
    let (counter, waker) = Counter::waker();
    let mut entry = TimerEntry::new(shard.clone(), ());
    entry.register_units(u64::MAX, &waker);
    assert_eq!(driver.alarm_set_for(), None, "nothing to wake for");
    assert_eq!(Arc::strong_count(&counter), 3, "the wheel holds a clone");
    let held = shard.lock();
    let canceller = std::thread::spawn(move || entry.cancel());
    // A cancel that hands over returns with the lock still held; one that waits, once freed.
    let until = std::time::Instant::now() + Duration::from_millis(200);
    while !canceller.is_finished() && std::time::Instant::now() < until {
        std::thread::yield_now();
    }
    drop(held);
    assert!(canceller.join().unwrap(), "pending until cancelled");
    assert_eq!(shard.len(), 0, "not pending once cancelled");
    assert!(
        shard.lock().is_empty() || driver.alarm_set_for().is_some(),
        "left in the wheel with no pass to come and sweep it"
    );
    assert_eq!(Arc::strong_count(&counter), 2, "the waker is gone");
}
