//! The driver: the runtime glue that fires a timer's wheels on time, from inside Tokio's own
//! timer processing rather than from a task.
//!
//! A timer owns one Tokio sleep, the [alarm](alarm::Alarm), set for the earliest work of any
//! of its shards (the earliest first deadline of its buckets: see `Wheel::next_expiration`)
//! and polled with the driver's own waker. Tokio fires it where it fires its own timers: in a
//! worker's park or maintenance (every 61 polls on a busy worker), or in the current-thread
//! scheduler's equivalent. The wake runs the firing pass right there: it locks
//! one shard at a time, takes a bounded batch of due entries, releases the lock and wakes them
//! (collect under the lock, wake after it, as async-io does), then sets the alarm for the next
//! earliest work. No task is scheduled on the way, so a saturated runtime delays our timers
//! exactly as much as Tokio's own, and a blocked worker holds up only its own tasks. (A driver
//! task, woken like any other, waited behind every runnable task, twice: once itself, then
//! again for each task it woke.)
//!
//! Registrations arm the alarm earlier when they create an earlier bucket; whoever needs work
//! done (Tokio's wake, a registration, shutdown) asks through the [arming protocol](arm), which
//! elects one runner at a time, so passes never run concurrently or re-enter. Idle, the alarm
//! is dropped: no wakeups. Because the alarm is a Tokio timer, paused time and auto-advance
//! drive the wheel deterministically.
//!
//! Lifetime: the driver lives while a [`Timer`](crate::Timer) handle, a future, or a pending
//! delayed task refers to one of its shards. A sentinel task parked on the runtime shuts the
//! timer down when the runtime drops it, before Tokio's time driver goes: every pending future
//! resolves.
//!
//! Re-polls: a one-shot future embeds a [`TimerEntry`](entry::TimerEntry) (its shard, key,
//! deadline in wheel time, and the identity of the waker the wheel holds). Each shard
//! publishes, under its lock and before a pass hands out any entry, the wheel time it fires
//! through; a re-poll whose deadline is later and whose waker is the registered one answers
//! `Pending` from two atomic loads (that time and the shutdown flag), as Tokio's
//! `AtomicWaker::register_by_ref` does, and anything else takes the lock. Why no wakeup is
//! lost and no waker identity can be recycled is argued at `TimerEntry::poll` and modelled in
//! `loom_tests.rs`.
//!
//! Layers: the wheel, the clock and the errors at the bottom; this driver above them; `Timer`
//! (`src/timer/`) above the driver; the futures above `Timer`, each reaching the driver only
//! through its shard's [entry API](entry), in `tokio::time::Instant`s; the integrations on top.

pub(crate) mod alarm;
pub(crate) mod arm;
pub(crate) mod entry;

#[cfg(test)]
mod loom_tests;
mod sentinel;
pub(crate) mod shard;
pub(crate) mod shard_ref;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Relaxed, SeqCst};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Wake, Waker};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use self::alarm::{Alarm, Set};
use self::arm::{Arm, PASS};
use self::shard::Shard;
use crate::clock::{self, Clock};
use crate::error::TimerError;
use crate::lateness::{LatenessCounters, PassLateness};
use crate::loom::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex};

/// The shared state of one timer: its clock, the alarm, the arming protocol, the shutdown
/// flag, the `max_pending` accounting, and (weakly) its shards.
pub(crate) struct Driver {
    clock: Clock,
    arm: Arm,
    alarm: Mutex<Alarm>,
    /// Wakes this driver (through a weak reference): the waker the alarm is polled with.
    waker: Waker,
    /// Weak, so the shards (held by handles, futures and pending delayed tasks) keep the
    /// driver alive and not the other way round.
    shards: OnceLock<Box<[Weak<Shard>]>>,
    shutdown: AtomicBool,
    /// The wheel time when the timer shut down: a future whose deadline is at or before it
    /// elapsed; one whose deadline is later was cut short by the shutdown.
    shutdown_at: AtomicU64,
    /// How late fired entries were, added to once per pass.
    pub(crate) lateness: LatenessCounters,
    /// The runtime shut down (or refused the alarm while shutting down): its time driver
    /// must not be used again; see [`runtime_gone`](Self::runtime_gone).
    runtime_gone: AtomicBool,
    /// `usize::MAX` means unlimited (and `reserved` is never touched).
    max_pending: usize,
    reserved: AtomicUsize,
    /// The runtime whose time driver fires the alarm and onto which delayed tasks spawn.
    runtime: Handle,
    /// `runtime`'s id, and whether runtimes' clocks can differ in this build (Tokio's
    /// `test-util`): then every clock read of this timer must be one of `runtime`'s.
    runtime_id: tokio::runtime::Id,
    clocks_can_pause: bool,
    /// Firing passes, for [`TimerMetrics`](crate::TimerMetrics).
    passes: std::sync::atomic::AtomicU64,
    /// The wheel time the last pass fired through. Only the runner writes and reads it (the
    /// arming protocol hands the role over), so it needs no ordering of its own.
    passed_through: std::sync::atomic::AtomicU64,
    /// Dropped with the driver: lets the sentinel task end. Kept through a shutdown of the
    /// timer, so that the timer still learns of its runtime's: what falls back on Tokio's
    /// timer (see `fallback`) must then move to another runtime's.
    sentinel: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// The runner's wakers to wake, kept between passes so a pass allocates nothing.
    batch: Mutex<Wakers>,
}

/// The wakers of a pass, in the order it wakes them.
///
/// Under load the order of a pass's wakes decides which timers' tasks run soon. A pass runs
/// where Tokio fires its own timers, on a worker, so each wake pushes a task onto that worker's
/// queue (256 tasks). When a burst fills it, Tokio keeps the older half and moves the newer
/// half, with the task being pushed, to the tail of the global queue, behind every task queued
/// there: of a burst, the tasks woken while the queue's first half had room and those woken
/// after its last overflow run soon, the rest wait for the backlog.
///
/// So a pass wakes timers that waited in a level above the first (set further ahead than that
/// level's span, 64 ticks: long sleeps, leases) as each batch is taken; short ones (sleeps of a
/// few ticks, such as a backend's latency) once every shard is done; and timeouts (entries a
/// `Timeout` filed: a deadline that ends work the caller has stopped waiting for) after those,
/// last, where the queue keeps them. Up to [`LATER_MAX`] wakers wait for the end of the pass;
/// past that, the rest are woken with the long ones. (Tokio's wheel wakes a slot's entries in
/// the order they reached it, those cascaded from above first; timeouts and long sleeps then
/// share the front of the burst.)
#[derive(Debug, Default)]
pub(crate) struct Wakers {
    /// Woken after each lock hold.
    pub(crate) now: Vec<Waker>,
    /// Short timers: woken at the end of the pass.
    pub(crate) later: Vec<Waker>,
    /// Timeouts: woken at the end of the pass, after `later`.
    pub(crate) last: Vec<Waker>,
}

impl Wakers {
    /// Files a fired timer's waker by its kind (see the type's documentation).
    #[inline]
    pub(crate) fn push(&mut self, waker: Waker, long: bool, timeout: bool) {
        let list = if self.later.len() + self.last.len() >= LATER_MAX {
            &mut self.now
        } else if timeout {
            &mut self.last
        } else if long {
            &mut self.now
        } else {
            &mut self.later
        };
        list.push(waker);
    }

    /// Wakes what waits for the end of the pass, in order.
    pub(crate) fn wake_held(&mut self) {
        wake_all(&mut self.later);
        wake_all(&mut self.last);
    }
}

/// At most this many wakers (short timers and timeouts) wait for the end of a pass (16 bytes
/// each).
pub(crate) const LATER_MAX: usize = 4096;

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("tick", &self.clock.tick())
            .field("shutdown", &self.is_shutdown())
            .finish_non_exhaustive()
    }
}

/// The driver's waker: Tokio fired the alarm.
struct AlarmWaker(Weak<Driver>);

impl Wake for AlarmWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(driver) = self.0.upgrade() {
            driver.kick(PASS);
        }
    }
}

/// Units of work (entries handed out or cascaded, heap items popped) per shard lock hold.
pub(crate) const BATCH: usize = 1024;

/// What [`Shard::fire_due`] did.
#[derive(Debug, Default)]
pub(crate) struct FireReport {
    pub(crate) entries: usize,
    /// How late the entries fired were.
    pub(crate) lateness: PassLateness,
    pub(crate) cascades: u64,
    /// The shard's next expiration after the pass.
    pub(crate) next: Option<u64>,
}

impl Driver {
    /// A driver and its shards, not started: no sentinel task yet (see
    /// [`start`](Self::start)), the alarm unarmed.
    pub(crate) fn new(
        tick: Duration,
        wheel_size: usize,
        shards: usize,
        max_pending: usize,
        batch_drops: bool,
        runtime: Handle,
    ) -> (Arc<Driver>, Box<[Arc<Shard>]>) {
        let clock = {
            let _guard = runtime.enter(); // the origin on the runtime's clock
            Clock::new(tick)
        };
        let driver = Arc::new_cyclic(|weak| Driver {
            clock,
            arm: Arm::new(),
            alarm: Mutex::new(Alarm::default()),
            waker: Waker::from(Arc::new(AlarmWaker(weak.clone()))),
            shards: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            shutdown_at: AtomicU64::new(u64::MAX),
            runtime_gone: AtomicBool::new(false),
            lateness: LatenessCounters::default(),
            max_pending,
            reserved: AtomicUsize::new(0),
            runtime_id: runtime.id(),
            clocks_can_pause: clock::clocks_can_pause(),
            runtime,
            passes: std::sync::atomic::AtomicU64::new(0),
            passed_through: std::sync::atomic::AtomicU64::new(0),
            sentinel: std::sync::Mutex::new(None),
            batch: Mutex::new(Wakers::default()),
        });
        let shards: Box<[Arc<Shard>]> = (0..shards)
            .map(|index| {
                let shard = Shard::new(wheel_size, driver.clone(), index, shards, batch_drops);
                Arc::new(shard)
            })
            .collect();
        let weak = shards.iter().map(Arc::downgrade).collect();
        driver
            .shards
            .set(weak)
            .unwrap_or_else(|_| unreachable!("set once, here"));
        (driver, shards)
    }

    /// Spawns the sentinel task that shuts the timer down with its runtime.
    pub(crate) fn start(self: &Arc<Self>) {
        sentinel::spawn(self);
    }

    /// The current instant on the clock of the timer's runtime.
    ///
    /// Without Tokio's `test-util` every runtime reads the same monotonic clock, and this is
    /// `Instant::now()`. With it, a runtime may have a paused clock of its own, and the
    /// caller may be on another runtime (or on no runtime: a plain thread polling a `Sleep`
    /// with `block_on`), whose clock says something else: then the timer's runtime is entered
    /// for the read. Every deadline, every pass and every `is_elapsed` of a timer reads its
    /// own runtime's clock, so mixing runtimes can neither fire early nor make a pass spin.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        if !self.clocks_can_pause {
            return Instant::now();
        }
        self.now_on_runtime()
    }

    /// [`now`](Self::now), except that once the timer's runtime is gone it reads the current
    /// runtime's clock: the clock of the Tokio timer that what falls back on one then waits on
    /// (see `fallback`). Without `test-util` every runtime reads the same clock, and this is
    /// [`now`](Self::now).
    #[inline]
    pub(crate) fn now_where_waiting(&self) -> Instant {
        if !self.clocks_can_pause {
            return Instant::now();
        }
        if self.runtime_gone() {
            return Instant::now(); // the current runtime's clock
        }
        self.now_on_runtime()
    }

    /// [`now`](Self::now) in a build whose runtimes can pause their clocks: out of line, so
    /// that the common path above inlines into its callers.
    ///
    /// On a thread whose Tokio context is already destroyed (a runtime kept in a thread-local,
    /// dropped as its thread exits: its timer shuts down there), no runtime can be entered to
    /// read its clock: the time of the timer's last pass stands in, a time no later than now,
    /// so nothing is taken for due before its deadline.
    #[cold]
    #[inline(never)]
    fn now_on_runtime(&self) -> Instant {
        match Handle::try_current() {
            Ok(current) if current.id() == self.runtime_id => Instant::now(),
            Err(e) if e.is_thread_local_destroyed() => {
                self.clock.at_units(self.passed_through.load(Relaxed))
            }
            _ => {
                let _guard = self.runtime.enter();
                Instant::now()
            }
        }
    }

    /// Whether the timer's runtime has shut down (not just the timer): Tokio's timer there
    /// refuses sleeps, so what falls back on Tokio's timer must use another runtime's.
    #[inline]
    pub(crate) fn runtime_gone(&self) -> bool {
        self.runtime_gone.load(SeqCst)
    }

    /// The runtime is shutting down: then the timer shuts down.
    pub(crate) fn on_runtime_gone(&self) {
        self.runtime_gone.store(true, SeqCst);
        self.shutdown();
    }

    /// The id of the timer's runtime.
    pub(crate) fn runtime_id(&self) -> tokio::runtime::Id {
        self.runtime_id
    }

    /// The width of a level-0 bucket.
    pub(crate) fn tick(&self) -> Duration {
        self.clock.tick()
    }

    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(SeqCst)
    }

    /// After shutdown: whether a deadline at wheel time `units` had been reached when the
    /// timer shut down (so a future drained by the shutdown had in fact elapsed).
    pub(crate) fn elapsed_before_shutdown(&self, units: u64) -> bool {
        units <= self.shutdown_at.load(SeqCst)
    }

    pub(crate) fn passes(&self) -> u64 {
        self.passes.load(Relaxed)
    }

    /// Takes a `max_pending` slot for a new registration.
    ///
    /// A compare-and-swap that takes a slot only while one is free: a refusal never counts,
    /// even for a moment, as a slot taken (an add undone after the check would make a
    /// registration racing it refused with a slot free).
    #[inline]
    pub(crate) fn reserve(&self) -> Result<(), TimerError> {
        if self.max_pending == usize::MAX {
            return Ok(());
        }
        let max = self.max_pending;
        match self
            .reserved
            .fetch_update(AcqRel, Relaxed, |n| (n < max).then_some(n + 1))
        {
            Ok(_) => Ok(()),
            // Full as it shuts down (its flag set, its drain not yet done giving the slots
            // back): the shutdown is the answer that lasts.
            Err(_) if self.is_shutdown() => Err(TimerError::Shutdown),
            Err(_) => {
                tracing::debug!(max_pending = max, "timer full: registration rejected");
                Err(TimerError::Full { max_pending: max })
            }
        }
    }

    /// Gives back `n` slots taken by [`reserve`](Self::reserve).
    #[inline]
    pub(crate) fn release(&self, n: usize) {
        if self.max_pending != usize::MAX && n > 0 {
            self.reserved.fetch_sub(n, AcqRel);
        }
    }

    /// Whether the timer has a `max_pending` limit.
    #[inline]
    pub(crate) fn is_bounded(&self) -> bool {
        self.max_pending != usize::MAX
    }

    #[cfg(test)]
    pub(crate) fn reserved(&self) -> usize {
        self.reserved.load(SeqCst)
    }

    /// A registration just made `head` new work of its shard, whose lock it still holds: if
    /// the alarm is set later than that (or not at all), asks for it to be re-armed. Returns
    /// whether the caller became the runner: then, after releasing the shard's lock, it must
    /// call [`run`](Self::run).
    #[inline]
    pub(crate) fn on_new_head(&self, head: u64) -> bool {
        self.arm.lower(head)
    }

    /// Whether the driver is armed to wake (and pass) no later than wheel time `at`.
    #[inline]
    pub(crate) fn armed_by(&self, at: u64) -> bool {
        self.arm.armed_by(at)
    }

    /// Asks for `work`; if no other thread is the runner, does it (and whatever else is asked
    /// meanwhile) on this thread, or, where this thread cannot read the runtime's clock, has
    /// a task of the runtime do it (see [`run`](Self::run)).
    pub(crate) fn kick(&self, work: u8) {
        if !self.arm.request(work) {
            return; // the runner will see it
        }
        self.run();
    }

    /// Does the work asked for (and whatever else is asked meanwhile) as the runner: for the
    /// thread [`kick`](Self::kick) or [`on_new_head`](Self::on_new_head) made the runner.
    /// A pass asked where this thread cannot read the runtime's clock goes, with the role and
    /// the rest of the work, to a task of the runtime.
    pub(crate) fn run(&self) {
        // Whatever unwinds out of the work (nothing should: user code is contained), the
        // runner role is given up, so the timer is never left without one.
        let runner = RunnerGuard(&self.arm);
        while let Some(work) = self.arm.next_work() {
            if self.is_shutdown() {
                continue; // shutdown disarmed the alarm; nothing is left to fire
            }
            if work & PASS != 0 && self.clock_unreadable_here() {
                // A pass here would count from the last pass's time (see `now_on_runtime`),
                // while Tokio's sleep, on the runtime's clock, may say the alarm is due:
                // passing and re-arming here again and again would find nothing new, for
                // ever. The role and the work go to the runtime, whose task passes there.
                drop(runner); // gives the role up, the work kept (`Arm::abandon`)
                self.wake_on_runtime();
                return;
            }
            if work & PASS != 0 {
                self.pass();
            }
            self.rearm();
        }
        // `next_work` gave the role up with its last answer.
        std::mem::forget(runner);
    }

    /// Sets the alarm for the armed time. Runner only.
    fn rearm(&self) {
        let at = self.arm.armed();
        let (instant, due) = if at == u64::MAX {
            // The instant is unused (and reading the clock could panic where Tokio's context
            // is destroyed, with a paused clock in the process).
            (self.clock.at_units(0), false)
        } else {
            let now = self.now();
            let instant = self.clock.units_to_instant(at, now);
            // Tokio rounds its sleeps up to its next millisecond, so the alarm set for an
            // instant already passed may wait for that millisecond. Work due by the wheel's
            // own time (filed after the pass that reached it: a delayed task reset into the
            // past, an interval's tick filed as time moved past it) gets its pass at once,
            // and so does any passed instant where clocks can pause: a paused clock driven by
            // `advance` may never reach that millisecond. Otherwise the wait (under a
            // millisecond: Tokio's resolution) batches the work a running clock brings into
            // one pass per millisecond, as Tokio's own timers are fired.
            let due = at <= self.passed_through.load(Relaxed)
                || (self.clocks_can_pause && instant <= now);
            (instant, due)
        };
        let mut alarm = lock(&self.alarm);
        // Checked under the alarm's lock: shutdown disarms under it, and after that the Tokio
        // sleep (whose runtime may be shutting down) must not be touched again.
        if self.is_shutdown() {
            return;
        }
        let set = alarm.set(at, instant, due, &self.waker, &self.runtime);
        drop(alarm);
        match set {
            Set::Waiting => {}
            Set::Due => self.arm.add(PASS),
            // Tokio's runtime is going: resolve everything now (its sentinel task may not
            // have been dropped yet, with Tokio's alt timer).
            Set::Refused => {
                tracing::debug!("Tokio refused the timer's alarm: its runtime is shutting down");
                self.on_runtime_gone();
            }
            // A thread exiting, its Tokio context gone: a task of the runtime wakes the driver
            // there, where the pass it makes sets the alarm. (A runtime shutting down drops
            // the task, and shuts the timer down itself.)
            Set::NoContext => self.wake_on_runtime(),
        }
    }

    /// Whether a pass on this thread cannot read the runtime's clock: where clocks can pause
    /// and Tokio's context here is destroyed (a thread exiting).
    fn clock_unreadable_here(&self) -> bool {
        self.clocks_can_pause && alarm::no_context_here()
    }

    /// Has a task of the timer's runtime wake the driver, whose pass then runs there.
    fn wake_on_runtime(&self) {
        let waker = self.waker.clone();
        drop(self.runtime.spawn(async move { waker.wake() }));
    }

    /// Fires everything due now in every shard, then publishes the earliest expiration left.
    /// Runner only.
    fn pass(&self) {
        let now = self.clock.now_to_units(self.now());
        self.passes.fetch_add(1, Relaxed);
        self.passed_through.store(now, Relaxed);
        self.arm.begin_pass();
        let mut next: Option<u64> = None;
        let mut total = FireReport::default();
        // Only the runner passes, so this lock is never contended; wakers run while it is
        // held, but a waker can only ask for work, never become the runner (see `kick`).
        let mut wakers = lock(&self.batch);
        for shard in self.shards() {
            shard.fire_due(now, &mut wakers, &mut total);
            if let Some(h) = total.next.take() {
                next = Some(next.map_or(h, |n| n.min(h)));
            }
        }
        wakers.wake_held();
        drop(wakers);
        if total.entries > 0 {
            self.lateness.add(&total.lateness);
        }
        if total.entries > 0 || total.cascades > 0 {
            tracing::trace!(
                fired = total.entries,
                cascades = total.cascades,
                now,
                "timer pass"
            );
        }
        self.arm.commit(next);
    }

    /// The shards that still exist (a shard nothing refers to holds no entry).
    fn shards(&self) -> impl Iterator<Item = Arc<Shard>> + '_ {
        self.shards
            .get()
            .into_iter()
            .flatten()
            .filter_map(Weak::upgrade)
    }

    /// Shuts the timer down: refuses new registrations, disarms the alarm, then removes every
    /// pending entry and wakes it (sleeps and timeouts resolve; delayed tasks resolve with the
    /// shutdown error). Idempotent. The sentinel task waits on: an `Interval` or `DelayQueue`
    /// of the timer goes on with Tokio's timer on the timer's runtime, and must hear when
    /// that runtime shuts down too.
    pub(crate) fn shutdown(&self) {
        let now = self.clock.now_to_units(self.now());
        self.shutdown_at.fetch_min(now, SeqCst);
        if self.shutdown.swap(true, SeqCst) {
            return;
        }
        // Waits for a runner that is setting the alarm; later ones see the flag under the lock.
        lock(&self.alarm).disarm();
        let mut drained = 0;
        for shard in self.shards() {
            let mut wakers = shard.drain();
            drained += wakers.len();
            self.release(wakers.len());
            wake_all(&mut wakers);
        }
        tracing::debug!(drained, "timer shut down");
    }

    /// The wheel time the alarm is set for, if it is set and has not fired.
    #[cfg(test)]
    pub(crate) fn alarm_set_for(&self) -> Option<u64> {
        lock(&self.alarm).set_for()
    }

    /// Plays Tokio firing the alarm: under loom the fake alarm records it; either way the
    /// driver's wake runs.
    #[cfg(test)]
    pub(crate) fn fire_alarm(&self) {
        #[cfg(loom)]
        lock(&self.alarm).fire();
        self.kick(PASS);
    }
}

/// Gives up the runner role, the work kept for the next runner, when dropped: if the
/// runner's work unwinds, or when `run` hands the work to the runtime.
struct RunnerGuard<'a>(&'a arm::Arm);

impl Drop for RunnerGuard<'_> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Wakes and drops every waker, containing panics (user code must not take the pass down,
/// nor unwind into Tokio's driver, which runs it).
pub(crate) fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        if panicked(move || w.wake()) {
            tracing::error!("a waker panicked while the timer fired it; the timer carries on");
        }
    }
}

/// Runs `f` (user code), containing a panic: returns whether it panicked. The panic's payload
/// is user code too (its destructor may panic), so it is dropped inside a catch as well; a
/// payload whose drop panicked in turn is leaked rather than dropped again.
pub(crate) fn panicked(f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => false,
        Err(payload) => {
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(again);
            }
            true
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::arm::REARM;
    use super::*;

    /// Work that unwinds out of the runner (nothing in the crate should: user code is
    /// contained) still gives up the runner role, and leaves a pass for the next runner: the
    /// timer is never stuck with a runner that is gone.
    #[test]
    fn the_runner_role_is_given_up_when_its_work_unwinds() {
        let arm = Arm::new();
        assert!(arm.request(REARM), "first request: runner");
        let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _runner = RunnerGuard(&arm);
            let _ = arm.next_work();
            panic!("the runner's work unwinds (on purpose)");
        }));
        assert!(unwound.is_err());
        assert!(arm.request(0), "the next request becomes the runner");
        assert_eq!(
            arm.next_work(),
            Some(PASS | REARM),
            "and makes up the lost pass"
        );
        assert_eq!(arm.next_work(), None);
    }

    /// A waker that counts its wakes and, on its first, runs `then`.
    struct OnWake<F: Fn() + Send + Sync>(AtomicUsize, F);

    impl<F: Fn() + Send + Sync + 'static> Wake for OnWake<F> {
        fn wake(self: Arc<Self>) {
            if self.0.fetch_add(1, SeqCst) == 0 {
                (self.1)();
            }
        }
    }

    /// Work filed already due while the pass made for earlier due work runs (a waker of that
    /// pass, or another thread, files it into a shard the pass has done with) gets a pass of
    /// its own at once, as the first did: not when Tokio fires the alarm the first one left
    /// set for the same wheel time, at its next millisecond, which a paused clock driven by
    /// `advance` may never reach.
    #[test]
    fn due_work_filed_during_the_pass_for_due_work_gets_its_pass_without_time_moving() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let (driver, shards) = Driver::new(
                Duration::from_millis(1),
                64,
                1,
                usize::MAX,
                false,
                Handle::current(),
            );
            driver.start();
            let shard = shards[0].clone();
            // A pass between two of Tokio's milliseconds: the wheel's time is now 0.5 ms.
            tokio::time::advance(Duration::from_micros(500)).await;
            driver.kick(PASS);
            let passed = driver.passed_through.load(Relaxed);
            assert!(passed >= 500_000);
            let second = Arc::new(OnWake(AtomicUsize::new(0), || {}));
            let (s, w) = (shard.clone(), Waker::from(second.clone()));
            // Filed already due: its pass comes at once, and its waker files more due work.
            let first = Arc::new(OnWake(AtomicUsize::new(0), move || {
                s.register_persistent(1, w.clone()).unwrap();
            }));
            shard
                .register_persistent(1, Waker::from(first.clone()))
                .unwrap();
            assert_eq!(first.0.load(SeqCst), 1, "the first due work got its pass");
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert_eq!(
                second.0.load(SeqCst),
                1,
                "the second waits for the clock to move"
            );
            driver.shutdown();
        });
    }

    #[test]
    fn a_payload_that_panics_on_drop_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("this payload panics when dropped (on purpose)");
            }
        }
        assert!(panicked(|| std::panic::panic_any(Bomb)));
        assert!(!panicked(|| {}));
    }
}
