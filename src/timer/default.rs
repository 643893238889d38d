//! The default timer of each Tokio runtime, created on first use, and a per-thread cache of
//! this thread's shard of it, so the free functions cost no global lock.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use tokio::runtime::{Handle, Id, RuntimeFlavor};

use super::builder::Builder;
use super::Timer;
use crate::driver::shard::Shard;
use crate::loom::lock_std;

/// Default timers by runtime. Entries of shut-down timers are purged on the next miss, and a
/// runtime's entry as it shuts down ([`forget`]).
static REGISTRY: Mutex<Vec<(Id, Timer)>> = Mutex::new(Vec::new());

thread_local! {
    static CACHE: RefCell<Option<(Id, Arc<Shard>)>> = const { RefCell::new(None) };
    /// This thread's shard for the tasks that looked it up here, by task id (direct-mapped).
    static BY_TASK: RefCell<[TaskSlot; TASK_SLOTS]> =
        const { RefCell::new([const { None }; TASK_SLOTS]) };
}

/// A task that looked its shard up on this thread, and the shard.
type TaskSlot = Option<(tokio::task::Id, Arc<Shard>)>;

/// Entries of the per-task cache: enough for the tasks one worker usually interleaves.
const TASK_SLOTS: usize = 64;

// Finding the current runtime costs `Handle::try_current()`, which clones and drops the
// runtime's handle: an atomic increment and decrement on a line every worker of the runtime
// touches, the largest cost of a timeout on a busy multi-thread runtime after the clock read.
// `current_shard_of_task` skips it for a task that looked its shard up before on this
// thread: a task runs on one runtime for life. That is only the current runtime if the task
// has not entered another one (`Handle::enter`, or `block_on` inside `block_in_place` or
// `spawn_blocking`); there the timer is the task's runtime's, where Tokio's would be the
// entered one's. So only the timers of runtimes whose workers drive them (multi-thread) are
// cached: whichever runtime's it is, that timer fires while its runtime lives, and shuts down
// (resolving its futures) when it goes. A current-thread runtime's timer runs only inside its
// `block_on`, and is always looked up by the current runtime.

pub(crate) const NO_RUNTIME: &str =
    "tokio-timing-wheel: this function must be called from the context of \
    a Tokio 1.x runtime (there is no runtime on this thread); use it inside a runtime, or build \
    a Timer with Timer::builder() inside one and call its methods";

/// This thread's shard of the current runtime's default timer.
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver.
#[track_caller]
pub(crate) fn current_shard() -> Arc<Shard> {
    let handle = match Handle::try_current() {
        Ok(h) => h,
        Err(_) => panic!("{}", NO_RUNTIME),
    };
    shard_of(handle)
}

/// This thread's shard of `handle`'s default timer, through the one-entry cache.
#[track_caller]
fn shard_of(handle: Handle) -> Arc<Shard> {
    let id = handle.id();
    // `try_with`: a timer may be made as this thread's locals are destroyed (a task dropped
    // with a runtime kept in one, after Tokio's context), the cache already gone: it is then
    // skipped, as Tokio's own timers work there.
    let cached = CACHE
        .try_with(|c| match &*c.borrow() {
            Some((cid, shard)) if *cid == id && !shard.is_shutdown() => Some(shard.clone()),
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(shard) = cached {
        return shard;
    }
    let timer = current_timer(handle);
    let shard = timer.shard().clone();
    // The entry replaced may hold a shard's last reference, whose drop drops the wakers left
    // in its wheel (user code, which may look its shard up here): after the borrow.
    let replaced = CACHE.try_with(|c| c.replace(Some((id, shard.clone()))));
    drop(replaced);
    shard
}

/// [`current_shard`] for the timer futures (sleeps, timeouts, intervals, delay queues): the
/// same shard, found by the current task's id when this thread has seen the task before (see
/// the comment above `TASK_SLOTS`). Delayed tasks use [`current_shard`]: their futures are
/// spawned on the timer's runtime, which must be the current one.
///
/// # Panics
///
/// As [`current_shard`].
#[track_caller]
#[inline(always)]
pub(crate) fn current_shard_of_task() -> Arc<Shard> {
    if !task_cache_enabled() {
        return current_shard();
    }
    let Some(task) = tokio::task::try_id() else {
        return current_shard();
    };
    let slot = task_slot(task);
    // `try_with`, as in `shard_of`: a task dropped as this thread's locals are destroyed.
    let cached = BY_TASK
        .try_with(|c| match &c.borrow()[slot] {
            Some((id, shard)) if *id == task && !shard.is_shutdown() => Some(shard.clone()),
            _ => None,
        })
        .ok()
        .flatten();
    match cached {
        Some(shard) => shard,
        None => shard_of_task_missed(task, slot),
    }
}

/// [`current_shard_of_task`] when this thread's cache has no shard for `task` (in `slot`): the
/// runtime lookup, cached for the task's next timers if its runtime's workers drive it.
#[track_caller]
#[inline(never)]
fn shard_of_task_missed(task: tokio::task::Id, slot: usize) -> Arc<Shard> {
    let handle = match Handle::try_current() {
        Ok(h) => h,
        Err(_) => panic!("{}", NO_RUNTIME),
    };
    let driven_by_workers = handle.runtime_flavor() != RuntimeFlavor::CurrentThread;
    let shard = shard_of(handle);
    if driven_by_workers {
        // Dropped after the borrow, as in `shard_of`.
        let replaced = BY_TASK.try_with(|c| c.borrow_mut()[slot].replace((task, shard.clone())));
        drop(replaced);
    }
    shard
}

/// Whether the per-task cache is used: not where runtimes may keep paused clocks of their own
/// (Tokio's `test-util`), as a task's cached timer, found on its multi-thread runtime, would
/// then run on another clock than the runtime it enters (a paused current-thread runtime's
/// `block_on` inside `block_in_place`); those builds are tests, which need exact semantics
/// more than the nanoseconds.
fn task_cache_enabled() -> bool {
    #[cfg(test)]
    if FORCE_TASK_CACHE.with(std::cell::Cell::get) {
        return true;
    }
    !crate::clock::clocks_can_pause()
}

#[cfg(test)]
thread_local! {
    /// Turns the per-task cache on in this crate's unit tests, which build Tokio with
    /// `test-util` (set on each worker thread by the runtime's `on_thread_start`).
    static FORCE_TASK_CACHE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The slot of `task` in `BY_TASK`. Task ids are a counter: their low bits spread tasks over
/// the slots.
fn task_slot(task: tokio::task::Id) -> usize {
    /// Keeps the `u64` a task id hashes as.
    #[derive(Default)]
    struct Raw(u64);
    impl Hasher for Raw {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 = self.0.rotate_left(8) ^ u64::from(*b);
            }
        }
        fn write_u64(&mut self, n: u64) {
            self.0 ^= n;
        }
    }
    let mut h = Raw::default();
    task.hash(&mut h);
    h.finish() as usize % TASK_SLOTS
}

/// The current runtime's default timer, creating it if needed.
///
/// The registry's lock is held for its own bookkeeping only: the timer is built, the entries
/// of shut-down timers are dropped and the creation is logged after it, as all of that may
/// run user code (a tracing subscriber, which may use the default timer itself; a waker left
/// in a dropped timer's wheel) or shut a timer down (a runtime refusing the timer's task
/// drops it inside `Handle::spawn`, and the timer then leaves the registry, see [`forget`]).
/// Two threads that miss at once may both build one: the first registered is the runtime's,
/// and the other, never handed out, is shut down.
#[track_caller]
pub(crate) fn current_timer(handle: Handle) -> Timer {
    let id = handle.id();
    let (found, purged) = {
        let mut registry = lock_std(&REGISTRY);
        let purged = purge(&mut registry);
        let found = registry
            .iter()
            .find(|(rid, _)| *rid == id)
            .map(|(_, t)| t.clone());
        (found, purged)
    };
    drop(purged);
    if let Some(timer) = found {
        return timer;
    }
    let built = match Builder::default().for_runtime(&handle).build_on(handle) {
        Ok(t) => t,
        Err(e) => panic!("tokio-timing-wheel: cannot create the default timer: {e}"),
    };
    let (timer, spare, purged) = {
        let mut registry = lock_std(&REGISTRY);
        let purged = purge(&mut registry);
        match registry.iter().find(|(rid, _)| *rid == id) {
            Some((_, t)) => (t.clone(), Some(built), purged),
            // Its runtime is shutting down (it refused the timer's sentinel, or dropped it
            // since): its `forget` has come and gone, so the entry would keep the timer and
            // the runtime's handle until some other lookup. A shutdown that comes later
            // finds the entry, as `forget` waits for this lock.
            None if built.is_shutdown() => (built, None, purged),
            None => {
                registry.push((id, built.clone()));
                (built, None, purged)
            }
        }
    };
    drop(purged);
    match spare {
        Some(spare) => spare.shutdown(), // another thread registered one first
        None => tracing::debug!(runtime = %id, "default timer created"),
    }
    timer
}

/// Takes the entries of shut-down timers out of the registry, to be dropped after its lock.
fn purge(registry: &mut Vec<(Id, Timer)>) -> Vec<(Id, Timer)> {
    let mut purged = Vec::new();
    let mut i = 0;
    while i < registry.len() {
        if registry[i].1.is_shutdown() {
            purged.push(registry.swap_remove(i));
        } else {
            i += 1;
        }
    }
    purged
}

/// Takes runtime `id`'s default timer out of the registry: its runtime is shutting down, and
/// the entry would keep the timer and the runtime's handle (its I/O driver's descriptors, ...)
/// until some runtime's next lookup. Skipped where the registry stays busy through a few yields
/// of this thread: its holder could be waiting for this runtime. The next lookup purges the
/// entry then.
pub(crate) fn forget(id: Id) {
    // Bounded: never a blocking lock, whose holder could be waiting for this runtime.
    let mut attempts = 0;
    let mut registry = loop {
        match REGISTRY.try_lock() {
            Ok(registry) => break registry,
            Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if attempts < FORGET_ATTEMPTS => {
                attempts += 1;
                std::thread::yield_now();
            }
            Err(std::sync::TryLockError::WouldBlock) => return,
        }
    };
    let at = registry.iter().position(|(rid, _)| *rid == id);
    let removed = at.map(|at| registry.swap_remove(at));
    drop(registry);
    drop(removed); // the timer's last reference may go here: after the lock
}

/// How many times [`forget`] finds the registry busy before it leaves the entry to the next
/// lookup (a lookup holds the lock for microseconds).
const FORGET_ATTEMPTS: u32 = 100;

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    fn runtime(multi_thread: bool) -> tokio::runtime::Runtime {
        let mut b = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        b.worker_threads(2)
            .enable_time()
            .on_thread_start(|| FORCE_TASK_CACHE.with(|f| f.set(true)))
            .build()
            .unwrap()
    }

    /// What this thread's cache holds for the current task, if anything.
    fn cached() -> Option<Arc<Shard>> {
        let task = tokio::task::try_id()?;
        BY_TASK.with(|c| match &c.borrow()[task_slot(task)] {
            Some((id, shard)) if *id == task => Some(shard.clone()),
            _ => None,
        })
    }

    #[test]
    fn a_task_on_a_multi_thread_runtime_finds_its_shard_in_the_cache() {
        let rt = runtime(true);
        rt.block_on(async {
            tokio::spawn(async {
                FORCE_TASK_CACHE.with(|f| f.set(true));
                assert!(cached().is_none(), "nothing cached before the first lookup");
                let first = current_shard_of_task();
                let by_runtime = current_shard();
                assert!(Arc::ptr_eq(&first, &by_runtime), "the runtime's shard");
                let again = current_shard_of_task();
                assert!(Arc::ptr_eq(&again, &first));
                let hit = cached().expect("cached after the first lookup");
                assert!(Arc::ptr_eq(&hit, &first));
            })
            .await
            .unwrap();
        });
    }

    #[test]
    fn a_current_thread_runtimes_timer_is_never_cached() {
        let rt = runtime(false);
        FORCE_TASK_CACHE.with(|f| f.set(true));
        rt.block_on(async {
            tokio::spawn(async {
                let shard = current_shard_of_task();
                assert!(Arc::ptr_eq(&shard, &current_shard()));
                assert!(
                    cached().is_none(),
                    "a current-thread runtime's timer was cached"
                );
            })
            .await
            .unwrap();
        });
        FORCE_TASK_CACHE.with(|f| f.set(false));
    }

    /// A task dropped as its thread's locals are destroyed (its runtime kept in one) may look
    /// its timer up, the per-task cache destroyed already: skipped, not a panic.
    #[test]
    fn a_task_dropped_after_the_per_task_cache_finds_its_timer() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        static DONE: AtomicBool = AtomicBool::new(false);
        static HAD_TASK: AtomicBool = AtomicBool::new(false);
        thread_local! {
            static RT: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
        }
        struct Cleanup;
        impl Drop for Cleanup {
            fn drop(&mut self) {
                HAD_TASK.store(tokio::task::try_id().is_some(), SeqCst);
                drop(current_shard_of_task());
                DONE.store(true, SeqCst);
            }
        }
        std::thread::spawn(|| {
            FORCE_TASK_CACHE.with(|f| f.set(true));
            // Tokio's context, then the runtime, then the caches (first used in `block_on`):
            // destroyed in the reverse order.
            let _ = Handle::try_current();
            RT.with(|r| *r.borrow_mut() = Some(runtime(false)));
            RT.with(|r| {
                r.borrow().as_ref().unwrap().block_on(async {
                    tokio::spawn(async {
                        drop(current_shard_of_task());
                        let _cleanup = Cleanup;
                        std::future::pending::<()>().await
                    });
                    tokio::task::yield_now().await;
                })
            });
        })
        .join()
        .expect("the thread ends without a panic");
        assert!(
            HAD_TASK.load(SeqCst),
            "dropped as a task: the per-task path"
        );
        assert!(DONE.load(SeqCst), "the destructor ran to its end");
    }

    /// Whether the registry holds a default timer of runtime `id`.
    fn registered(id: Id) -> bool {
        lock_std(&REGISTRY).iter().any(|(rid, _)| *rid == id)
    }

    #[test]
    fn a_dropped_runtimes_default_timer_leaves_the_registry() {
        for multi_thread in [true, false] {
            let rt = runtime(multi_thread);
            let id = rt.handle().id();
            rt.block_on(async {
                tokio::spawn(async { crate::sleep_wheel(Duration::from_millis(1)).await })
                    .await
                    .unwrap();
            });
            assert!(registered(id));
            drop(rt);
            assert!(
                !registered(id),
                "the registry keeps a dropped runtime's timer (and its handle)"
            );
        }
    }

    /// A default timer first looked up while its runtime shuts down (from the drop of one of
    /// its tasks) is shut down at once, its sentinel refused: it must not stay registered,
    /// holding the runtime's handle after the runtime is gone.
    #[test]
    fn a_default_timer_made_as_its_runtime_shuts_down_is_not_kept() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        // Counted here, not asserted in the destructor: Tokio catches a panic in a task's
        // drop at shutdown, so an assertion there could never fail the test.
        static LOOKED_UP: AtomicUsize = AtomicUsize::new(0);
        static FOUND_SHUT_DOWN: AtomicUsize = AtomicUsize::new(0);
        struct LooksUpOnDrop(Handle);
        impl Drop for LooksUpOnDrop {
            fn drop(&mut self) {
                let timer = current_timer(self.0.clone());
                if timer.is_shutdown() {
                    FOUND_SHUT_DOWN.fetch_add(1, SeqCst);
                }
                LOOKED_UP.fetch_add(1, SeqCst);
            }
        }
        for (runs, multi_thread) in [true, false].into_iter().enumerate() {
            let rt = runtime(multi_thread);
            let id = rt.handle().id();
            let on_drop = LooksUpOnDrop(rt.handle().clone());
            rt.spawn(async move {
                let _on_drop = on_drop;
                std::future::pending::<()>().await;
            });
            drop(rt);
            assert_eq!(
                LOOKED_UP.load(SeqCst),
                runs + 1,
                "the task's drop looked its timer up, to the end"
            );
            assert_eq!(
                FOUND_SHUT_DOWN.load(SeqCst),
                runs + 1,
                "a timer looked up as its runtime shuts down is shut down at once"
            );
            assert!(
                !registered(id),
                "the registry keeps a dropped runtime's timer (and its handle)"
            );
        }
    }

    /// Threads that find no default timer at once may each build one, outside the registry's
    /// lock: every one of them is handed the same timer, the first registered.
    #[test]
    fn threads_racing_to_create_the_default_timer_get_the_same_one() {
        for _ in 0..20 {
            let rt = runtime(true);
            let handle = rt.handle().clone();
            let barrier = Arc::new(std::sync::Barrier::new(4));
            let timers: Vec<Timer> = (0..4)
                .map(|_| {
                    let (handle, barrier) = (handle.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        current_timer(handle)
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect();
            let _guard = rt.enter();
            let first = timers[0].shard().clone();
            for timer in &timers {
                assert!(!timer.is_shutdown(), "a shut-down spare handed out");
                assert!(
                    Arc::ptr_eq(timer.driver(), first.driver()),
                    "two default timers"
                );
            }
            assert!(Arc::ptr_eq(Timer::current().driver(), first.driver()));
        }
    }

    #[test]
    fn a_shut_down_timer_is_not_handed_out_from_the_cache() {
        let rt = runtime(true);
        rt.block_on(async {
            tokio::spawn(async {
                FORCE_TASK_CACHE.with(|f| f.set(true));
                let first = current_shard_of_task();
                assert!(cached().is_some());
                first.driver().shutdown();
                let next = current_shard_of_task();
                assert!(!Arc::ptr_eq(&next, &first), "a shut-down timer handed out");
                assert!(!next.is_shutdown());
            })
            .await
            .unwrap();
        });
    }
}
