//! A timer future's reference to its shard, dropped in batches on other threads than the
//! shard's, so that making and dropping a timeout does not move the shard's reference count
//! between workers.
//!
//! A sleep (and so a timeout) keeps an `Arc` to its shard (it must reach it to cancel when
//! dropped, also after every `Timer` handle is gone). When work stealing moved the future,
//! its clone on the worker that made it and its drop on the worker that dropped it moved the
//! count's cache line between the two with every timeout (about 24 ns a timeout, measured).
//!
//! For the default timer of a multi-thread runtime (whose lifetime is its runtime's, and
//! whose workers end with it), a [`ShardRef`] dropped in a task on a thread that does not
//! file into its shard is held back, with the others that thread drops for the same shard,
//! and the [`BATCH`] are dropped together: the line moves once to the dropping thread and
//! once back for the whole batch. A thread holds back the references of one shard, fewer
//! than [`BATCH`], and drops them when it holds back one of another shard, or once that
//! shard is shut down, at its next drop of this kind. The shard's own threads, and a thread
//! that runs no task (a plain thread, or one blocking on a runtime outside its tasks), drop
//! at once.
//!
//! A thread that holds references back is running a task: usually a worker of the timer's
//! runtime, which ends with it. A task of another runtime (a current-thread runtime's, a
//! `LocalSet`'s, a blocking task) that drops this timer's sleeps may hold back up to
//! [`BATCH`] - 1 references to one shard; if the timer's runtime is dropped meanwhile, they
//! keep its drained timer and its runtime handle (and what that holds, such as the I/O
//! driver) until the thread next holds a reference back, or ends, as the thread's cache of
//! the default timer it last looked up (`timer::default`) may too.
//!
//! Explicit [`Timer`](crate::Timer)s, freed when their handles and futures are gone, and a
//! current-thread runtime's default timer, whose futures are made and dropped on the thread
//! that blocks on it, keep plain references.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use super::shard::Shard;

/// References held back are dropped this many at a time.
pub(crate) const BATCH: usize = 64;

/// A counted reference to a shard, held back on drop (see the module docs).
pub(crate) struct ShardRef(Option<Arc<Shard>>);

thread_local! {
    /// References to one shard of other threads, held back to be dropped together.
    static HELD: RefCell<Vec<Arc<Shard>>> = const { RefCell::new(Vec::new()) };
}

impl From<Arc<Shard>> for ShardRef {
    #[inline]
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
            None => taken(),
        }
    }
}

/// Out of line, so that the many inlined derefs stay small.
#[cold]
#[inline(never)]
fn taken() -> ! {
    unreachable!("a ShardRef's reference is taken only on drop")
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
            if shard.batches_drops() && !shard.is_home() {
                hold_back(shard);
            }
        }
    }
}

/// Holds `shard` back on this thread, to be dropped with the next references to the same
/// shard this thread drops: all of them once they are [`BATCH`], earlier if one of another
/// shard comes or the shard is shut down. Dropped at once on a thread running no task.
#[inline(never)]
fn hold_back(shard: Arc<Shard>) {
    if tokio::task::try_id().is_none() {
        return;
    }
    let _ = HELD.try_with(move |held| {
        // A drop below may re-enter (the last reference to a shard): it finds the list
        // borrowed, and drops its reference at once.
        let Ok(mut held) = held.try_borrow_mut() else {
            return;
        };
        if held
            .last()
            .is_some_and(|last| !Arc::ptr_eq(last, &shard) || last.is_shutdown())
        {
            held.clear();
        }
        if shard.is_shutdown() {
            return;
        }
        held.push(shard);
        if held.len() >= BATCH {
            held.clear(); // keeps the buffer
        }
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::future::Future;
    use std::time::Duration;

    use super::*;
    use crate::driver::shard::this_thread_shard;
    use crate::timer::default::current_shard;
    use crate::Sleep;

    /// A multi-thread runtime of one worker (whose default timer's references are held back
    /// on other threads).
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

    /// Runs `f` on a new thread that files into none of `shards` (threads take the next
    /// shard index as they first ask for one, so a few threads on, one differs), in a task
    /// there if `task`, then ends the thread.
    fn elsewhere<T: Send + 'static>(shards: &[&Shard], task: bool, value: T, f: fn(T)) {
        let places: Vec<_> = shards.iter().map(|s| s.place()).collect();
        let mut value = Some(value);
        for _ in 0..8 {
            let v = value.take();
            let places = places.clone();
            value = std::thread::spawn(move || {
                if places.iter().any(|&(i, n)| this_thread_shard(n) == i) {
                    return v; // back, to try another thread
                }
                let v = v.expect("a value");
                if !task {
                    f(v);
                    return None;
                }
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async move { tokio::spawn(async move { f(v) }).await.unwrap() });
                None
            })
            .join()
            .unwrap();
            if value.is_none() {
                return;
            }
        }
        panic!("eight threads in a row filed into one of the shards");
    }

    /// [`elsewhere`], in a task.
    fn in_a_task_elsewhere<T: Send + 'static>(shards: &[&Shard], value: T, f: fn(T)) {
        elsewhere(shards, true, value, f);
    }

    /// How many references to `shard` this thread holds back.
    fn held(shard: &Arc<Shard>) -> usize {
        HELD.with(|h| h.borrow().iter().filter(|s| Arc::ptr_eq(s, shard)).count())
    }

    #[test]
    fn references_dropped_on_another_thread_are_dropped_in_batches() {
        let rt = runtime();
        let (shard, sleeps) = in_task(&rt, async {
            let sleeps: Vec<_> = (0..2 * BATCH + 5).map(|_| sleep()).collect();
            (current_shard(), sleeps)
        });
        let count = Arc::strong_count(&shard);
        in_a_task_elsewhere(&[&shard], (shard.clone(), sleeps), |(shard, mut sleeps)| {
            let count = Arc::strong_count(&shard);
            for dropped in 1..=2 * BATCH + 5 {
                drop(sleeps.pop());
                assert_eq!(held(&shard), dropped % BATCH, "after {dropped} drops");
                assert_eq!(
                    Arc::strong_count(&shard),
                    count - dropped + dropped % BATCH,
                    "after {dropped} drops"
                );
            }
        });
        // The thread's end dropped what it held.
        assert_eq!(Arc::strong_count(&shard), count - 2 * BATCH - 5);
    }

    #[test]
    fn references_are_dropped_at_once_on_their_shards_thread_a_plain_thread_or_for_another_timer() {
        /// Drops `sleep` (of `shard`) on another thread than `shard`'s, in a task if `task`,
        /// and checks there (before the thread ends and drops what it holds) that its
        /// reference went at once.
        fn dropped_elsewhere(sleep: Sleep, shard: Arc<Shard>, task: bool) {
            elsewhere(&[&shard.clone()], task, (sleep, shard), |(sleep, shard)| {
                let count = Arc::strong_count(&shard);
                drop(sleep);
                assert_eq!(Arc::strong_count(&shard), count - 1, "held back");
            });
        }
        // On the thread that files into the shard.
        in_task(&runtime(), async {
            let shard = current_shard();
            let count = Arc::strong_count(&shard);
            drop(sleep());
            assert_eq!(Arc::strong_count(&shard), count, "held back");
        });
        // An explicit timer's, on another thread.
        let rt = runtime();
        let (made, shard) = in_task(&rt, async {
            let timer = crate::Timer::builder().build().unwrap();
            (timer.sleep(Duration::from_secs(1)), timer.shard().clone())
        });
        dropped_elsewhere(made, shard, true);
        // A current-thread runtime's default timer's, on another thread.
        let current_thread = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (made, shard) = current_thread.block_on(async {
            tokio::spawn(async { (sleep(), current_shard()) })
                .await
                .unwrap()
        });
        dropped_elsewhere(made, shard, true);
        // A multi-thread runtime's default timer's, on a thread that runs no task.
        let (made, shard) = in_task(&rt, async { (sleep(), current_shard()) });
        dropped_elsewhere(made, shard, false);
    }

    #[test]
    fn references_held_back_go_when_one_of_another_shard_comes_or_their_shard_shuts_down() {
        let (first, second) = (runtime(), runtime());
        let made = |rt| in_task(rt, async { (sleep(), sleep(), current_shard()) });
        let (a1, a2, a) = made(&first);
        let (b1, b2, b) = made(&second);
        in_a_task_elsewhere(
            &[&a.clone(), &b.clone()],
            (a1, a2, b1, b2, a, b),
            |(a1, a2, b1, b2, a, b)| {
                let count = (Arc::strong_count(&a), Arc::strong_count(&b));
                drop(a1);
                assert_eq!(held(&a), 1);
                assert_eq!(Arc::strong_count(&a), count.0);
                drop(b1); // one of another shard: the first's go
                assert_eq!((held(&a), held(&b)), (0, 1));
                assert_eq!(Arc::strong_count(&a), count.0 - 1);
                b.driver().shutdown();
                drop(a2); // the second's, shut down, go
                assert_eq!((held(&a), held(&b)), (1, 0));
                assert_eq!(Arc::strong_count(&b), count.1 - 1);
                a.driver().shutdown();
                drop(b2); // a shut-down shard's: dropped at once, as are those held of one
                assert_eq!((held(&a), held(&b)), (0, 0));
                assert_eq!(Arc::strong_count(&a), count.0 - 2);
                assert_eq!(Arc::strong_count(&b), count.1 - 2);
            },
        );
    }
}
