//! Delayed tasks: `spawn_after` / `spawn_at`, the `DelayedTask` handle and `DelayedError`.
//!
//! A delayed task's future waits inside the wheel, not as a Tokio task: the wheel entry's
//! waker is the task cell itself, and waking it spawns the future onto the runtime. The cell's
//! state moves exactly once from `WAITING` to `STARTED` (the driver fired it) or to
//! `CANCELLED` (the handle cancelled it), so a task runs at most once and `cancel` reports
//! truthfully whether it stopped it.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::Arc;
use std::task::{ready, Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;

use crate::clock::sleep_deadline;
use crate::driver::shard::Shard;
use crate::error::{DelayedError, TimerError};
use crate::loom::{lock, lock_std, AtomicU8, Mutex};
use crate::timer::Timer;
use crate::wheel::Key;

/// Runs `future` as a Tokio task once `duration` has elapsed, on the current runtime's default
/// timer.
///
/// Until its deadline the future is not a Tokio task: it waits, boxed with its handle, inside
/// the wheel, and costs no wakeup. At the deadline it is spawned onto the runtime. A zero
/// duration spawns it at once; one over about 30 years means 30 years, as a Tokio sleep's
/// does (since Tokio 1.54). A panic in the task is caught and handed to whoever awaits the
/// [`DelayedTask`]; it never reaches the timer.
///
/// # Cancellation
///
/// [`DelayedTask::cancel`] stops the task if it has not started. Dropping the handle does
/// *not* cancel it (like [`tokio::task::JoinHandle`]).
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver (`enable_time()`); and, as
/// [`Timer::spawn_after`] does when full, if the calling thread's shard of the default timer
/// (which has no [`max_pending`](crate::Builder::max_pending)) already holds the most timers
/// a wheel can index (about 4 billion). A shut-down default timer does not panic: the task
/// resolves with the shutdown error.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::spawn_after;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let retry = spawn_after(Duration::from_millis(200), async { "retried" });
/// assert_eq!(retry.await.unwrap(), "retried");
///
/// let job = spawn_after(Duration::from_secs(60), async { unreachable!() });
/// assert!(job.cancel());
/// assert!(job.await.unwrap_err().is_cancelled());
/// # }
/// ```
#[track_caller]
pub fn spawn_after<F>(duration: Duration, future: F) -> DelayedTask<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let shard = crate::timer::default::current_shard();
    let deadline = sleep_deadline(shard.now(), duration);
    default_timer_task(
        DelayedTask::new(shard, deadline, duration.is_zero(), future),
        deadline,
    )
}

/// Runs `future` as a Tokio task at `deadline`, on the current runtime's default timer.
///
/// See [`spawn_after`]; a deadline already passed spawns the future at once.
///
/// # Cancellation
///
/// [`DelayedTask::cancel`] stops the task if it has not started; dropping the handle does not.
///
/// # Panics
///
/// As [`spawn_after`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::spawn_at;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let at = Instant::now() + Duration::from_secs(1);
/// let t = spawn_at(at, async move { Instant::now() >= at });
/// assert!(t.await.unwrap());
/// # }
/// ```
#[track_caller]
pub fn spawn_at<F>(deadline: Instant, future: F) -> DelayedTask<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let shard = crate::timer::default::current_shard();
    default_timer_task(DelayedTask::new(shard, deadline, true, future), deadline)
}

/// The handle [`spawn_after`] and [`spawn_at`] return: on a shut-down default timer, a task
/// already resolved with the shutdown error; on a shard holding the most a wheel can index, a
/// panic, as [`Timer::spawn_after`] does, rather than a task that says its timer shut down.
#[track_caller]
fn default_timer_task<T: Send + 'static>(
    task: Result<DelayedTask<T>, TimerError>,
    deadline: Instant,
) -> DelayedTask<T> {
    match task {
        Ok(task) => task,
        Err(TimerError::Shutdown) => DelayedTask::shut_down(deadline),
        Err(e) => panic!("tokio-timing-wheel: cannot schedule a delayed task: {e}"),
    }
}

const WAITING: u8 = 0;
const STARTED: u8 = 1;
const CANCELLED: u8 = 2;
/// Resolved without running because the timer shut down: no transition is left.
const RESOLVED: u8 = 3;

/// The part of a task cell that does not depend on the future's type.
pub(crate) struct Header<T> {
    state: AtomicU8,
    slot: Mutex<Slot<T>>,
}

struct Slot<T> {
    result: Option<Result<T, DelayedError>>,
    waiter: Option<Waker>,
    /// The result was handed to the handle.
    taken: bool,
}

impl<T> Header<T> {
    pub(crate) fn new() -> Header<T> {
        Header::with_state(WAITING)
    }

    fn with_state(state: u8) -> Header<T> {
        Header {
            state: AtomicU8::new(state),
            slot: Mutex::new(Slot {
                result: None,
                waiter: None,
                taken: false,
            }),
        }
    }

    /// `WAITING -> STARTED`; true for the one caller that wins.
    pub(crate) fn try_start(&self) -> bool {
        self.leave_waiting(STARTED)
    }

    /// `WAITING -> RESOLVED` (the timer shut down); true for the one caller that wins.
    fn try_resolve(&self) -> bool {
        self.leave_waiting(RESOLVED)
    }

    /// `WAITING -> CANCELLED`; true for the one caller that wins.
    pub(crate) fn try_cancel(&self) -> bool {
        self.leave_waiting(CANCELLED)
    }

    /// The one transition out of `WAITING`, to `to`: true for the one caller that wins.
    fn leave_waiting(&self, to: u8) -> bool {
        self.state
            .compare_exchange(WAITING, to, AcqRel, std::sync::atomic::Ordering::Acquire)
            .is_ok()
    }

    /// Stores the outcome (the first one wins) and wakes the handle's waiter.
    ///
    /// Never unwinds: it runs inside a shutdown's drain (which must go on to drop the
    /// future), in the spawned task, and at a cancel. The waiter's waker and an
    /// outcome nobody will take (the handle was dropped) are user code, dropped and woken
    /// inside a catch, as Tokio does for a `JoinHandle`'s waker and a detached task's output.
    pub(crate) fn complete(&self, result: Result<T, DelayedError>) {
        let waiter = {
            let mut slot = lock(&self.slot);
            if slot.result.is_some() || slot.taken {
                drop(slot);
                drop_result_contained(Some(result));
                return;
            }
            slot.result = Some(result);
            slot.waiter.take()
        };
        if let Some(w) = waiter {
            if crate::driver::panicked(move || w.wake()) {
                tracing::error!(
                    "the waker of a task awaiting a delayed task panicked when woken; contained"
                );
            }
        }
    }

    /// The handle is dropped: lets go of the waker of whoever awaited it, and of the outcome
    /// if it is there (a later one is dropped by [`complete`](Self::complete)), its
    /// destructor's panic contained, as Tokio's `JoinHandle` drop does.
    fn detach(&self) {
        let (waiter, result) = {
            let mut slot = lock(&self.slot);
            slot.taken = true;
            (slot.waiter.take(), slot.result.take())
        };
        drop(waiter); // user code: outside the lock, in the dropper (as Tokio's)
        drop_result_contained(result);
    }

    fn is_finished(&self) -> bool {
        let slot = lock(&self.slot);
        slot.result.is_some() || slot.taken
    }

    /// The outcome if it is there; otherwise registers `cx`'s waker. A waker's clone and drop
    /// are user code: they run outside the lock, so a clone that blocks holds up nobody
    /// completing the task (a shutdown's drain, the worker that ran it), nor `is_finished`.
    fn poll_result(&self, cx: &mut Context<'_>) -> Poll<Result<T, DelayedError>> {
        {
            let mut slot = lock(&self.slot);
            if let Some(r) = slot.result.take() {
                slot.taken = true;
                return Poll::Ready(r);
            }
            assert!(!slot.taken, "DelayedTask polled after it completed");
            if matches!(&slot.waiter, Some(w) if w.will_wake(cx.waker())) {
                return Poll::Pending;
            }
        }
        let new = cx.waker().clone();
        let mut slot = lock(&self.slot);
        if let Some(r) = slot.result.take() {
            // Completed meanwhile (its waiter, if any, already woken): `new` is not needed.
            slot.taken = true;
            drop(slot);
            drop(new);
            return Poll::Ready(r);
        }
        let old = slot.waiter.replace(new);
        drop(slot);
        drop(old); // user code: outside the lock
        Poll::Pending
    }
}

/// What a handle needs from a task cell, with the future's type erased.
trait ErasedCell<T>: Send + Sync {
    fn header(&self) -> &Header<T>;
    /// Drops the future without running it (after a successful cancel).
    fn discard(&self);
}

/// A delayed task: the header, and the future until it is spawned.
struct TaskCell<F: Future> {
    header: Header<F::Output>,
    future: std::sync::Mutex<Option<F>>,
    /// Keeps the shard (and the timer) alive while the task waits in its wheel: a
    /// fire-and-forget task needs no handle.
    shard: Arc<Shard>,
}

impl<F> ErasedCell<F::Output> for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn header(&self) -> &Header<F::Output> {
        &self.header
    }

    fn discard(&self) {
        drop_contained(self.take_future());
    }
}

impl<F: Future> TaskCell<F> {
    fn take_future(&self) -> Option<F> {
        lock_std(&self.future).take()
    }
}

impl<F> Wake for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// The wheel fired the entry (or shutdown drained it).
    fn wake(self: Arc<Self>) {
        if self.shard.is_shutdown() {
            if self.header.try_resolve() {
                // The future first, then the handle, as at a cancel and as Tokio drops a
                // task's future before its `JoinHandle` resolves: whoever the handle wakes
                // finds what the future held released. Both are user code, each contained.
                drop_contained(self.take_future());
                self.header.complete(Err(DelayedError::shutdown()));
            }
            return;
        }
        if !self.header.try_start() {
            return; // cancelled first
        }
        let Some(fut) = self.take_future() else {
            return;
        };
        let shard = self.shard.clone();
        let guard = CompleteOnDrop(Some(self as Arc<dyn ErasedCell<F::Output>>));
        // One capture, the future before the guard (a tuple drops its fields in order): if
        // the runtime drops the task unpolled, the future goes before the handle resolves, as
        // for a Tokio task. (Once polled, `fut` lives in the awaited temporary below, declared
        // after `guard`, so it is dropped first too.)
        let task = (fut, guard);
        shard.runtime().spawn(async move {
            let (fut, mut guard) = task;
            // `fut` is consumed inside the caught block, so a panic while dropping it after it
            // completed is caught too (and reported as a panic, not as a shutdown). Passing
            // `fut` itself, as clippy suggests, would drop it outside the catch.
            #[allow(clippy::redundant_async_block)]
            let out = AssertUnwindSafe(async move { fut.await })
                .catch_unwind()
                .await;
            if let Some(cell) = guard.0.take() {
                cell.header().complete(out.map_err(DelayedError::panic));
            }
        });
    }
}

/// Drops a delayed task's future that will never run, containing a panic in its destructor
/// (user code), which is logged.
fn drop_contained<F>(fut: Option<F>) {
    if crate::driver::panicked(move || drop(fut)) {
        tracing::error!("a delayed task's future panicked while being dropped unrun");
    }
}

/// Drops the outcome of a delayed task nobody will take (its output, or a panic's payload:
/// user code), containing a panic in its destructor, which is logged.
fn drop_result_contained<T>(result: Option<Result<T, DelayedError>>) {
    if result.is_some() && crate::driver::panicked(move || drop(result)) {
        tracing::error!("a delayed task's output panicked while being dropped; contained");
    }
}

/// Resolves the handle with the shutdown error if the spawned task is dropped unfinished
/// (the runtime shut down before or while running it).
struct CompleteOnDrop<T>(Option<Arc<dyn ErasedCell<T>>>);

impl<T> Drop for CompleteOnDrop<T> {
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.header().complete(Err(DelayedError::shutdown()));
        }
    }
}

/// A header with no future, for tasks refused by a shut-down timer.
struct Finished<T>(Header<T>);

impl<T: Send> ErasedCell<T> for Finished<T> {
    fn header(&self) -> &Header<T> {
        &self.0
    }

    fn discard(&self) {}
}

/// A handle to a delayed task, returned by [`spawn_after`], [`spawn_at`] and their
/// [`Timer`] equivalents.
///
/// Awaiting it yields the task's output, or a [`DelayedError`] saying whether it was
/// cancelled, panicked, or was stopped by a shutdown (of its timer before it started, or of
/// its runtime). Dropping the handle does not cancel the task.
///
/// As with Tokio's `JoinHandle`, the handle resolves (and [`is_finished`](DelayedTask::is_finished)
/// turns true) only once the task's future has been dropped, whatever the outcome: whatever it
/// held (a permit, a lock guard, a connection) is released by then.
#[must_use = "dropping a DelayedTask does not cancel it; keep it to cancel or await the result"]
pub struct DelayedTask<T> {
    cell: Arc<dyn ErasedCell<T>>,
    /// Where the task waits, while it may still be cancelled.
    registration: Option<(Arc<Shard>, Key)>,
    /// When it is (or was) due to start.
    deadline: Instant,
}

impl<T> fmt::Debug for DelayedTask<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayedTask")
            .field("deadline", &self.deadline)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> DelayedTask<T> {
    /// Files `future` to be spawned at `deadline`. `check_clock`: the deadline may already have
    /// passed (it was given as an `Instant`); without it (now + a non-zero duration), a
    /// deadline that passes before filing is still caught by the wheel's own time (and, on a
    /// full timer, by the clock).
    pub(crate) fn new<F>(
        shard: Arc<Shard>,
        deadline: Instant,
        check_clock: bool,
        future: F,
    ) -> Result<DelayedTask<T>, TimerError>
    where
        F: Future<Output = T> + Send + 'static,
    {
        if shard.is_shutdown() {
            // Before allocating the cell. The future never runs: its destructor (user code) is
            // contained, as at a cancel or a shutdown's drain.
            drop_contained(Some(future));
            return Err(TimerError::Shutdown);
        }
        let cell = Arc::new(TaskCell {
            header: Header::new(),
            future: std::sync::Mutex::new(Some(future)),
            shard: shard.clone(),
        });
        let registration =
            match shard.register_at(deadline, check_clock, || Waker::from(cell.clone())) {
                Ok(Some(key)) => Some((shard, key)),
                Ok(None) => {
                    // Due already: start it now.
                    Waker::from(cell.clone()).wake();
                    None
                }
                Err(e) => {
                    // Refused (full, or shut down meanwhile): the future never runs.
                    drop_contained(cell.take_future());
                    return Err(e);
                }
            };
        Ok(DelayedTask {
            cell,
            registration,
            deadline,
        })
    }

    /// A task that has already resolved with the shutdown error (and cannot be cancelled).
    pub(crate) fn shut_down(deadline: Instant) -> DelayedTask<T> {
        let header = Header::with_state(RESOLVED);
        header.complete(Err(DelayedError::shutdown()));
        DelayedTask {
            cell: Arc::new(Finished(header)),
            registration: None,
            deadline,
        }
    }
}

impl<T> DelayedTask<T> {
    /// Stops the task if it has not started yet: its future is dropped without running,
    /// its timer is removed from the wheel at once, and awaiting the handle yields a
    /// cancelled [`DelayedError`].
    ///
    /// Returns `true` only for the call that stopped a task that would otherwise have run.
    /// Once the task has started (or finished, or was already cancelled), or if its timer has
    /// shut down (the task then resolves with the shutdown error, never runs), it returns
    /// `false` and changes nothing: a running task is not interrupted. A call racing a
    /// shutdown of the timer may win the task from it: it then returns `true`. Either way the
    /// task never runs, and `cancel()` returns `true` exactly when the handle resolves
    /// cancelled ([`DelayedError::is_cancelled`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::spawn_after;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let lease_renewal = spawn_after(Duration::from_secs(10), async {});
    /// assert!(lease_renewal.cancel());
    /// assert!(!lease_renewal.cancel(), "exactly once");
    /// # }
    /// ```
    pub fn cancel(&self) -> bool {
        let header = self.cell.header();
        if let Some((shard, _)) = &self.registration {
            if shard.is_shutdown() {
                // The shutdown resolves the task (or already did): nothing to stop.
                return false;
            }
        }
        if !header.try_cancel() {
            return false;
        }
        if let Some((shard, key)) = &self.registration {
            // Dropping the returned waker drops the wheel's reference to the cell.
            drop(shard.cancel(*key));
        }
        self.cell.discard();
        header.complete(Err(DelayedError::cancelled()));
        true
    }

    /// The instant the task starts at (or started at, or would have): the deadline it was
    /// spawned with, or the latest one given to [`reset`](DelayedTask::reset).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::spawn_at;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let at = Instant::now() + Duration::from_secs(10);
    /// let task = spawn_at(at, async {});
    /// assert_eq!(task.deadline(), at);
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the start of a task that is still waiting to `deadline`, without cancelling and
    /// spawning it again: a lease renewed, a retry pushed back. Returns `true` if the task
    /// waits for the new deadline; `false` (and nothing changes but
    /// [`deadline`](DelayedTask::deadline)) if it has already started, finished, been
    /// cancelled, or its timer shut down, or if its deadline has come: a firing pass has
    /// taken it out of the wheel to start it, and it starts soon after (a
    /// [`cancel`](DelayedTask::cancel) made in between still stops it).
    ///
    /// A later deadline within the time its wheel slot covers costs one comparison under the
    /// shard's lock: the task stays where it is and is re-filed lazily when that slot comes.
    /// A later one beyond it, or an earlier one, relinks it (O(1)), so the timer's passes
    /// no longer count on the old slot. (If the task was the timer's earliest, the wakeup
    /// already set for it stays: one pass at the old deadline that finds nothing, as after a
    /// cancel.) One already passed starts it on the timer's next pass (and, in the timer's
    /// [`Lateness`](crate::Lateness), counts as late from the reset, not from the past
    /// deadline). On a timer built with
    /// [`max_pending`](crate::Builder::max_pending) the task keeps its slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::spawn_after;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// // A lease expires in 30 s unless renewed.
    /// let mut expiry = spawn_after(Duration::from_secs(30), async { Instant::now() });
    /// tokio::time::sleep(Duration::from_secs(10)).await;
    /// assert!(expiry.reset(Instant::now() + Duration::from_secs(30))); // renewed
    /// let expired_at = (&mut expiry).await.unwrap();
    /// assert_eq!(expired_at - start, Duration::from_secs(40));
    /// assert!(!expiry.reset(Instant::now() + Duration::from_secs(30)), "ran already");
    /// # }
    /// ```
    pub fn reset(&mut self, deadline: Instant) -> bool {
        let old = std::mem::replace(&mut self.deadline, deadline);
        let Some((shard, key)) = &self.registration else {
            return false;
        };
        if shard.is_shutdown() || self.cell.header().state.load(Acquire) != WAITING {
            return false;
        }
        // An earlier deadline already passed is due at once: filed for now, so the timer's
        // lateness counts from this reset, not from a deadline in the past (or from the
        // timer's start). A later one reads no clock.
        let due = if deadline < old {
            deadline.max(shard.now())
        } else {
            deadline
        };
        shard.reschedule_at(*key, due)
    }

    /// Whether the task has finished: it ran to completion or panicked, was cancelled, or
    /// will never run because the timer shut down.
    pub fn is_finished(&self) -> bool {
        self.cell.header().is_finished()
    }
}

impl<T> Future for DelayedTask<T> {
    type Output = Result<T, DelayedError>;

    /// # Panics
    ///
    /// If polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // One unit of the cooperative budget, as Tokio's `JoinHandle`.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let poll = self.cell.header().poll_result(cx);
        if poll.is_ready() {
            coop.made_progress();
        }
        poll
    }
}

// As Tokio's `JoinHandle`: a panic caught around a use of the handle leaves nothing half
// done (the cell's locks ignore poisoning, and each update is made whole under one).
impl<T> std::panic::UnwindSafe for DelayedTask<T> {}
impl<T> std::panic::RefUnwindSafe for DelayedTask<T> {}

impl<T> Drop for DelayedTask<T> {
    /// Detaches the task (it still runs) and, as Tokio's `JoinHandle` does, lets go of the
    /// waker of whoever awaited the handle (it would otherwise keep that task alive, and be
    /// woken for nothing, until the delayed task finished, possibly years later) and drops an
    /// output nobody took, now or when the task finishes, a panic in its destructor contained
    /// (logged) rather than reaching whoever dropped the handle.
    fn drop(&mut self) {
        self.cell.header().detach();
    }
}

/// The delayed tasks of a [`Timer`]; they live here, beside the future they build, so that `Timer`
/// knows nothing of the futures built on it.
impl Timer {
    /// Runs `future` as a Tokio task once `duration` has elapsed (see
    /// [`spawn_after`]).
    ///
    /// # Panics
    ///
    /// If the timer is full. Use [`try_spawn_after`](Timer::try_spawn_after) to get an error
    /// instead. A shut-down timer does not panic: the task resolves with the shutdown error.
    #[track_caller]
    pub fn spawn_after<F>(&self, duration: Duration, future: F) -> DelayedTask<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_after(duration, future) {
            Ok(task) => task,
            Err(e) => panic!(
                "tokio-timing-wheel: cannot schedule a delayed task: {e}; \
                 use Timer::try_spawn_after to handle this"
            ),
        }
    }

    /// Runs `future` as a Tokio task at `deadline` (see [`spawn_at`]).
    ///
    /// # Panics
    ///
    /// As [`spawn_after`](Timer::spawn_after).
    #[track_caller]
    pub fn spawn_at<F>(&self, deadline: Instant, future: F) -> DelayedTask<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_at(deadline, future) {
            Ok(task) => task,
            Err(e) => panic!(
                "tokio-timing-wheel: cannot schedule a delayed task: {e}; \
                 use Timer::try_spawn_at to handle this"
            ),
        }
    }

    /// Like [`spawn_after`](Timer::spawn_after), but returns an error when the timer is full.
    /// On a shut-down timer it returns a task that has already resolved with the shutdown
    /// error, as [`spawn_after`](Timer::spawn_after) does.
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] if the timer was built with [`max_pending`](crate::Builder::max_pending)
    /// and that many timers are pending (without a limit: if the calling thread's shard holds
    /// the most a wheel can index), unless the deadline has passed by then (a task due
    /// starts at once and needs no slot, as a zero `duration`'s); `future` is dropped
    /// without running (a panic in its destructor is contained and logged, as when a task
    /// is cancelled). Never [`TimerError::Shutdown`]: see above.
    pub fn try_spawn_after<F>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(
            sleep_deadline(self.now(), duration),
            duration.is_zero(),
            future,
        )
    }

    /// Like [`spawn_at`](Timer::spawn_at), but returns an error when the timer is full.
    /// On a shut-down timer it returns a task that has already resolved with the shutdown
    /// error, as [`spawn_at`](Timer::spawn_at) does.
    ///
    /// # Errors
    ///
    /// As [`try_spawn_after`](Timer::try_spawn_after): [`TimerError::Full`] only.
    pub fn try_spawn_at<F>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(deadline, true, future)
    }

    fn try_spawn<F>(
        &self,
        deadline: Instant,
        check_clock: bool,
        future: F,
    ) -> Result<DelayedTask<F::Output>, TimerError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shard = self.shard().clone();
        match DelayedTask::new(shard, deadline, check_clock, future) {
            Err(TimerError::Shutdown) => Ok(DelayedTask::shut_down(deadline)),
            other => other,
        }
    }
}

#[cfg(test)]
mod loom_tests {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;

    #[cfg(loom)]
    use loom::thread;
    #[cfg(not(loom))]
    use std::thread;

    use super::Header;
    use crate::error::DelayedError;
    use crate::loom::{model, AtomicUsize};

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
}
