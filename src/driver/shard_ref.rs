//! A timer future's reference to its shard, recycled by threads so that making and dropping
//! a timeout does not move the shard's reference count between workers.
//!
//! Every timer future keeps an `Arc` to its shard (it must reach it to cancel when dropped,
//! also after every `Timer` handle is gone). Cloning it on the worker that makes the future
//! and dropping it on the worker that drops the future move the count's cache line between
//! the two with every timeout, when work stealing has moved the future (measured at about
//! 24 ns a timeout), and cost two atomic read-modify-writes even on one thread.
//!
//! For the default timer of a multi-thread runtime (whose lifetime is its runtime's, and
//! whose workers end with it), a [`ShardRef`] dropped in a task on a thread the shard's
//! futures are made on goes to that thread's spares, and the next future made there takes
//! it back: no count is touched. One dropped in a task elsewhere joins a batch that is handed
//! back, [`BATCH`] at a time, to the shard (beside its inbox of cancels), where the making
//! thread takes up to [`HOME_KEPT`] once its own spares run out: one lock per batch instead
//! of a moved line per timeout. What a thread keeps is bounded ([`HOME_KEPT`], [`BATCH`]),
//! and so is what a shard holds handed back ([`RETURNED_KEPT`]); a shard drops what it holds
//! when it shuts down, and a thread drops its spares of a shut-down shard at its next
//! recycling. A thread that runs no task (a plain thread, or one blocking on a runtime)
//! drops its references at once, so it never keeps a runtime that has gone (its handle, and
//! the resources the handle holds) alive.
//!
//! Explicit [`Timer`](crate::Timer)s, freed when their handles and futures are gone, and a
//! current-thread runtime's default timer, whose tasks run on a thread that outlives it,
//! keep plain references.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use super::shard::Shard;

/// The references to its home shard a thread keeps for the futures it makes next.
pub(crate) const HOME_KEPT: usize = 64;
/// References to another thread's shard are handed back this many at a time.
pub(crate) const BATCH: usize = 64;
/// The most references a shard holds handed back; a batch beyond it is dropped (each drop
/// then touches the count, as without recycling).
pub(crate) const RETURNED_KEPT: usize = 1024;

/// A counted reference to a shard, recycled on drop if the shard is a default timer's.
pub(crate) struct ShardRef(Option<Arc<Shard>>);

/// A thread's recycled references (see the module docs).
struct Spares {
    /// References to one shard this thread makes futures on, for the next ones it makes.
    home: Vec<Arc<Shard>>,
    /// References to one shard of other threads, to be handed back to it.
    away: Vec<Arc<Shard>>,
    /// Spares of a shard this thread no longer makes futures on, to be dropped.
    stale: Vec<Arc<Shard>>,
}

thread_local! {
    static SPARES: RefCell<Spares> = const {
        RefCell::new(Spares {
            home: Vec::new(),
            away: Vec::new(),
            stale: Vec::new(),
        })
    };
}

impl ShardRef {
    /// A reference to `shard`: one of this thread's spares if it has one, else a clone.
    #[inline]
    pub(crate) fn to(shard: &Arc<Shard>) -> ShardRef {
        if shard.recycles_refs() {
            if let Some(spare) = take_spare(shard) {
                return ShardRef(Some(spare));
            }
        }
        ShardRef(Some(shard.clone()))
    }
}

impl From<Arc<Shard>> for ShardRef {
    fn from(shard: Arc<Shard>) -> ShardRef {
        ShardRef(Some(shard))
    }
}

impl std::ops::Deref for ShardRef {
    type Target = Arc<Shard>;

    #[inline]
    fn deref(&self) -> &Arc<Shard> {
        match &self.0 {
            Some(shard) => shard,
            None => unreachable!("taken only on drop"),
        }
    }
}

impl fmt::Debug for ShardRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardRef").finish_non_exhaustive()
    }
}

impl Drop for ShardRef {
    #[inline]
    fn drop(&mut self) {
        if let Some(shard) = self.0.take() {
            if shard.recycles_refs() {
                recycle(shard);
            }
        }
    }
}

/// One of this thread's spare references to `shard`, taking back (some of) the ones other
/// threads handed to it if the thread has none.
#[inline]
fn take_spare(shard: &Arc<Shard>) -> Option<Arc<Shard>> {
    SPARES
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let s = &mut *s;
            match s.home.last() {
                Some(last) if Arc::ptr_eq(last, shard) => return s.home.pop(),
                // Another shard's (a runtime gone): set aside, to be dropped at this
                // thread's next recycling (not here, where the caller may hold a borrow
                // that a shard's drop could need).
                Some(_) => s.stale.append(&mut s.home),
                None => {}
            }
            if !shard.has_returned_refs() {
                return None;
            }
            shard.take_returned(&mut s.home);
            s.home.pop()
        })
        .ok()
        .flatten()
}

/// Keeps `shard` for a future this thread makes next if the thread makes futures on it and
/// has room, else adds it to the batch to hand back. Only on a thread running a Tokio task
/// (a runtime's worker, usually), which ends with its runtime: a plain thread, or one that
/// blocks on a runtime, drops its references, so it never keeps a runtime gone alive. A
/// shut-down shard is dropped, with this thread's spares of it.
fn recycle(shard: Arc<Shard>) {
    if tokio::task::try_id().is_none() {
        return;
    }
    let _ = SPARES.try_with(move |s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return; // re-entered from a drop below: `shard` is dropped plainly
        };
        let s = &mut *s;
        if !s.stale.is_empty() {
            s.stale.clear();
        }
        if s.away.last().is_some_and(|last| last.is_shutdown()) {
            s.away.clear(); // a runtime gone: they cannot be handed back
        }
        if shard.is_shutdown() {
            for spares in [&mut s.home, &mut s.away] {
                if spares.last().is_some_and(|last| last.is_shutdown()) {
                    spares.clear();
                }
            }
            return;
        }
        if shard.is_home() && s.home.len() < HOME_KEPT {
            match s.home.last() {
                Some(last) if !Arc::ptr_eq(last, &shard) => {
                    let stale = std::mem::replace(&mut s.home, vec![shard]);
                    drop(stale); // not ours to hand back: another timer's, or a dead runtime's
                }
                _ => s.home.push(shard),
            }
            return;
        }
        if s.home.last().is_some_and(|last| last.is_shutdown()) {
            s.home.clear(); // a runtime gone: none of its spares will be taken again
        }
        if s.away.last().is_some_and(|last| !Arc::ptr_eq(last, &shard)) {
            hand_back(&mut s.away);
        }
        s.away.push(shard);
        if s.away.len() >= BATCH {
            hand_back(&mut s.away);
        }
    });
}

/// Hands the references in `away` (all to one shard) back to it, through the last of them,
/// which is then dropped, as are those the shard does not take (shut down, or holding
/// enough): `away` is left empty.
fn hand_back(away: &mut Vec<Arc<Shard>>) {
    if let Some(through) = away.pop() {
        through.give_back(away);
        away.clear();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::future::Future;
    use std::time::Duration;

    use super::*;
    use crate::driver::shard::this_thread_shard;
    use crate::timer::default::{current_shard, current_timer};
    use crate::Sleep;

    /// A multi-thread runtime of one worker (whose default timer recycles references).
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap()
    }

    /// Runs `f` as a task of `rt` (on its worker).
    fn in_task<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        rt.block_on(async { tokio::spawn(f).await.unwrap() })
    }

    fn sleep() -> Sleep {
        crate::sleep_wheel(Duration::from_secs(1))
    }

    /// Drops `value` in a task on a new thread that does not file into `shard` (threads take
    /// the next shard index as they first ask for one, so the next thread's differs).
    fn drop_in_a_task_elsewhere<T: Send + 'static>(shard: &Shard, value: T) {
        let (index, count) = shard.place();
        let mut value = Some(value);
        for _ in 0..2 {
            let v = value.take();
            value = std::thread::spawn(move || {
                if this_thread_shard(count) == index {
                    return v; // back, to try another thread
                }
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async move { tokio::spawn(async move { drop(v) }).await.unwrap() });
                None
            })
            .join()
            .unwrap();
            if value.is_none() {
                return;
            }
        }
        panic!("two threads in a row filed into one shard");
    }

    #[test]
    fn a_default_timers_reference_is_reused_by_the_worker_that_dropped_it() {
        in_task(&runtime(), async {
            drop(sleep()); // leaves a spare
            let shard = current_shard();
            let count = Arc::strong_count(&shard);
            for _ in 0..100 {
                let sleep = sleep();
                assert!(Arc::ptr_eq(sleep.shard(), &shard));
                assert_eq!(Arc::strong_count(&shard), count, "cloned, not reused");
                drop(sleep);
                assert_eq!(Arc::strong_count(&shard), count, "not kept");
            }
        });
    }

    #[test]
    fn references_are_plain_clones_for_an_explicit_timer_a_current_thread_runtime_or_a_plain_thread(
    ) {
        fn check(make: &dyn Fn() -> Sleep, shard: &Arc<Shard>) {
            let count = Arc::strong_count(shard);
            let sleep = make();
            assert_eq!(Arc::strong_count(shard), count + 1);
            drop(sleep);
            assert_eq!(Arc::strong_count(shard), count, "kept by the thread");
        }
        in_task(&runtime(), async move {
            let timer = crate::Timer::builder().build().unwrap();
            check(&|| timer.sleep(Duration::from_secs(1)), timer.shard());
        });
        let current_thread = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        current_thread.block_on(async {
            tokio::spawn(async { check(&sleep, &current_shard()) })
                .await
                .unwrap();
        });
        // Made in a task of a multi-thread runtime, dropped on a thread that runs no task.
        let rt = runtime();
        let (made, shard) = in_task(&rt, async { (sleep(), current_shard()) });
        let count = Arc::strong_count(&shard);
        std::thread::spawn(move || drop(made)).join().unwrap();
        assert_eq!(
            Arc::strong_count(&shard),
            count - 1,
            "kept by a plain thread"
        );
    }

    #[test]
    fn references_dropped_elsewhere_go_back_in_batches_and_are_reused() {
        let rt = runtime();
        let (shard, sleeps) = in_task(&rt, async {
            let sleeps: Vec<_> = (0..BATCH).map(|_| sleep()).collect();
            (current_shard(), sleeps)
        });
        let count = Arc::strong_count(&shard);
        drop_in_a_task_elsewhere(&shard, sleeps);
        // The batch went back but the one it was handed through.
        assert_eq!(shard.returned_len(), BATCH - 1);
        assert_eq!(Arc::strong_count(&shard), count - 1);
        // The worker takes them back when it has no spare of its own.
        in_task(&rt, async move {
            let sleep = sleep();
            assert_eq!(shard.returned_len(), 0, "taken back");
            assert_eq!(Arc::strong_count(&shard), count - 1, "cloned, not reused");
            drop(sleep);
        });
    }

    #[test]
    fn a_shard_holds_a_bounded_number_handed_back_and_none_once_shut_down() {
        let rt = runtime();
        let batches = RETURNED_KEPT / (BATCH - 1) + 3;
        let (timer, sleeps) = in_task(&rt, async move {
            // Held, so that the registry's purge of shut-down timers leaves the count alone.
            let timer = current_timer(tokio::runtime::Handle::current());
            (
                timer,
                (0..batches * BATCH).map(|_| sleep()).collect::<Vec<_>>(),
            )
        });
        let shard = sleeps[0].shard().clone();
        let count = Arc::strong_count(&shard);
        drop_in_a_task_elsewhere(&shard, sleeps);
        let held = shard.returned_len();
        assert!(held <= RETURNED_KEPT, "{held} handed back");
        assert!(held > RETURNED_KEPT - BATCH, "{held} handed back");
        assert_eq!(Arc::strong_count(&shard), count - batches * BATCH + held);
        timer.shutdown();
        assert_eq!(shard.returned_len(), 0, "kept by a shut-down shard");
        assert_eq!(Arc::strong_count(&shard), count - batches * BATCH);
        // Nor taken back after: the references of a shut-down shard are dropped.
        let mut late = vec![shard.clone(), shard.clone()];
        shard.give_back(&mut late);
        assert_eq!(late.len(), 2);
        assert_eq!(shard.returned_len(), 0);
    }

    #[test]
    fn a_workers_spares_of_a_runtime_gone_are_dropped_at_its_next_drop() {
        let worker = runtime();
        let gone = runtime();
        let (made,) = in_task(&gone, async { (sleep(),) }); // a `Sleep` made in a task
        let shard = Arc::downgrade(made.shard());
        in_task(&worker, async move { drop(made) }); // kept by the worker
        assert!(shard.upgrade().is_some());
        drop(gone); // shuts its default timer down
        in_task(&worker, async { drop(sleep()) });
        assert!(shard.upgrade().is_none(), "a shut-down shard kept alive");
    }

    #[test]
    fn spares_of_a_shut_down_default_timer_do_not_stop_a_worker_taking_its_successors_back() {
        let rt = runtime();
        let (old, sleeps) = in_task(&rt, async {
            drop(sleep()); // leaves a spare
            let old = current_shard();
            old.driver().shutdown(); // the next call makes a new default timer
            (
                Arc::downgrade(&old),
                (0..BATCH).map(|_| sleep()).collect::<Vec<_>>(),
            )
        });
        let shard = sleeps[0].shard().clone();
        drop_in_a_task_elsewhere(&shard, sleeps);
        assert_eq!(shard.returned_len(), BATCH - 1);
        in_task(&rt, async move {
            let sleep = sleep();
            assert_eq!(shard.returned_len(), 0, "not taken back");
            drop(sleep);
        });
        assert!(old.upgrade().is_none(), "a shut-down shard kept alive");
    }
}
