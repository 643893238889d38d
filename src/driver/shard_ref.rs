//! A timer future's reference to its shard, recycled by threads so that making and dropping
//! a timeout does not move the shard's reference count between workers.
//!
//! Every timer future keeps an `Arc` to its shard (it must reach it to cancel when dropped,
//! also after every `Timer` handle is gone). Cloning it on the worker that makes the future
//! and dropping it on the worker that drops the future move the count's cache line between
//! the two with every timeout, when work stealing has moved the future (measured at about
//! 24 ns a timeout), and cost two atomic read-modify-writes even on one thread.
//!
//! For a default timer (whose lifetime is its runtime's: the runtime's shutdown shuts it
//! down), a [`ShardRef`] dropped on a thread the shard's futures are made on goes to that
//! thread's spares, and the next future made there takes it back: no count is touched. One
//! dropped elsewhere joins a batch that is handed back, [`BATCH`] at a time, to the shard
//! (beside its inbox of cancels), where the making thread takes the batch once its own
//! spares run out: one lock per batch instead of a moved line per timeout. What a thread
//! keeps is bounded ([`HOME_KEPT`], [`BATCH`]), and so is what a shard holds handed back
//! ([`RETURNED_KEPT`]); a shard drops what it holds when it shuts down, and a thread drops
//! its spares of a shut-down shard when it next drops a default timer's future. A thread's
//! spares keep their shard's memory (not its entries: a shutdown drains them) until then or
//! the thread's end.
//!
//! An explicit [`Timer`](crate::Timer) is freed when its handles and futures are gone, which
//! spares held by threads would defer: its futures keep plain references.

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
}

thread_local! {
    static SPARES: RefCell<Spares> = const {
        RefCell::new(Spares {
            home: Vec::new(),
            away: Vec::new(),
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

/// One of this thread's spare references to `shard`, taking back the ones other threads
/// handed to it if the thread has none.
#[inline]
fn take_spare(shard: &Arc<Shard>) -> Option<Arc<Shard>> {
    SPARES
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            match s.home.last() {
                Some(last) if Arc::ptr_eq(last, shard) => return s.home.pop(),
                // Another shard's (a runtime gone): replaced when this thread next recycles
                // (not here, where the caller may hold a borrow a dropped shard could need).
                Some(_) => return None,
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
/// has room, else adds it to the batch to hand back; drops it if it is shut down, with the
/// thread's spares of it.
fn recycle(shard: Arc<Shard>) {
    let _ = SPARES.try_with(move |s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return; // re-entered from a drop below: `shard` is dropped plainly
        };
        let s = &mut *s;
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
            s.away.clear();
        }
        s.away.push(shard);
        if s.away.len() >= BATCH {
            hand_back(&mut s.away);
            // One stays: the next batch is handed back through it.
            s.away.truncate(1);
        }
    });
}

/// Hands the references in `away` (all to one shard) back to it but one, which is left last;
/// those it cannot take (shut down, or holding enough) are left too.
fn hand_back(away: &mut Vec<Arc<Shard>>) {
    let Some(through) = away.pop() else {
        return;
    };
    through.give_back(away);
    away.insert(0, through);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::driver::shard::this_thread_shard;
    use crate::timer::default::current_shard;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// Drops `value` on a new thread that does not file into `shard` (threads take the next
    /// shard index as they first ask for one, so the next thread's differs), which then ends.
    fn drop_on_another_thread<T: Send + 'static>(shard: &Shard, value: T) {
        let (index, count) = shard.place();
        let mut value = Some(value);
        for _ in 0..2 {
            let v = value.take();
            value = std::thread::spawn(move || {
                if this_thread_shard(count) == index {
                    return v; // back, to try another thread
                }
                drop(v);
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
    fn a_default_timers_reference_is_reused_by_the_thread_that_dropped_it() {
        let rt = runtime();
        rt.block_on(async {
            drop(crate::sleep_wheel(Duration::from_secs(1))); // leaves a spare
            let shard = current_shard();
            let count = Arc::strong_count(&shard);
            for _ in 0..100 {
                let sleep = crate::sleep_wheel(Duration::from_secs(1));
                assert!(Arc::ptr_eq(sleep.shard(), &shard));
                assert_eq!(Arc::strong_count(&shard), count, "cloned, not reused");
                drop(sleep);
                assert_eq!(Arc::strong_count(&shard), count, "not kept");
            }
        });
    }

    #[test]
    fn an_explicit_timers_references_are_plain_clones() {
        let rt = runtime();
        rt.block_on(async {
            let timer = crate::Timer::builder().build().unwrap();
            let count = Arc::strong_count(timer.shard());
            let sleep = timer.sleep(Duration::from_secs(1));
            assert_eq!(Arc::strong_count(timer.shard()), count + 1);
            drop(sleep);
            assert_eq!(
                Arc::strong_count(timer.shard()),
                count,
                "kept by the thread"
            );
        });
    }

    #[test]
    fn references_dropped_elsewhere_go_back_in_batches_and_are_reused() {
        let rt = runtime();
        rt.block_on(async {
            let shard = current_shard();
            let count = Arc::strong_count(&shard);
            let sleeps: Vec<_> = (0..BATCH)
                .map(|_| crate::sleep_wheel(Duration::from_secs(1)))
                .collect();
            assert_eq!(Arc::strong_count(&shard), count + BATCH);
            drop_on_another_thread(&shard, sleeps);
            // The batch went back but the one it was handed through, which the other thread
            // kept until it ended.
            assert_eq!(shard.returned_len(), BATCH - 1);
            assert_eq!(Arc::strong_count(&shard), count + BATCH - 1);
            // This thread takes them back when it has no spare of its own.
            let sleep = crate::sleep_wheel(Duration::from_secs(1));
            assert_eq!(shard.returned_len(), 0, "taken back");
            assert_eq!(
                Arc::strong_count(&shard),
                count + BATCH - 1,
                "cloned, not reused"
            );
            drop(sleep);
        });
    }

    #[test]
    fn a_shard_holds_a_bounded_number_handed_back_and_none_once_shut_down() {
        let rt = runtime();
        rt.block_on(async {
            let shard = current_shard();
            let count = Arc::strong_count(&shard);
            let batches = RETURNED_KEPT / (BATCH - 1) + 3;
            let sleeps: Vec<_> = (0..batches * BATCH)
                .map(|_| crate::sleep_wheel(Duration::from_secs(1)))
                .collect();
            drop_on_another_thread(&shard, sleeps);
            let held = shard.returned_len();
            assert!(held >= RETURNED_KEPT, "{held} handed back");
            assert!(held < RETURNED_KEPT + BATCH, "{held} handed back");
            assert_eq!(Arc::strong_count(&shard), count + held, "the rest dropped");
            shard.driver().shutdown();
            assert_eq!(shard.returned_len(), 0, "kept by a shut-down shard");
            assert_eq!(Arc::strong_count(&shard), count);
            // Nor taken back after: the references of a shut-down shard are dropped.
            let mut late = vec![shard.clone(), shard.clone()];
            shard.give_back(&mut late);
            assert_eq!(late.len(), 2);
            assert_eq!(shard.returned_len(), 0);
        });
    }

    #[test]
    fn a_threads_spares_of_a_runtime_gone_are_dropped_at_its_next_drop() {
        let first = runtime();
        let shard = first.block_on(async {
            drop(crate::sleep_wheel(Duration::from_secs(1))); // leaves a spare
            Arc::downgrade(&current_shard())
        });
        drop(first); // shuts its default timer down
        runtime().block_on(async {
            drop(crate::sleep_wheel(Duration::from_secs(1)));
        });
        assert!(shard.upgrade().is_none(), "a shut-down shard kept alive");
    }
}
