//! Floors to measure timers against, not timers: [`FloorTimeout`], the least work a timer
//! shared between threads does for a timeout it never fires, [`FloorAround`], that timer put
//! around a future as a timeout is, and [`CheckedOnce`], ours with its re-polls skipped.
//!
//! A timer that never fires early computes its deadline from the clock; one whose cancelled
//! entries leave at once (their memory, and the waker that keeps a task alive) must reach the
//! registering thread's structure from whichever thread drops the future. [`FloorTimeout`]
//! does exactly that and nothing more: one `tokio::time::Instant::now()` and an addition, then,
//! on first poll, a waker clone and an insert into a slab behind the registering thread's lock,
//! and on drop, that lock again (taken from the dropping thread) and the removal. No wheel, no
//! ordering, no firing, no limit, no shutdown, no reference count: its shards are statics, a
//! thread's found through a thread-local index. A real timer does all of this and more, so its
//! cost cannot fall below this one's in the same harness, however it is built, as long as a
//! cancel frees its entry at once.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use slab::Slab;
use tokio::time::Instant;

/// Shards, each on lines of its own, handed to threads in turn.
const SHARDS: usize = 64;

#[repr(align(128))]
struct Shard(Mutex<Slab<(Instant, Waker)>>);

static FLOOR_SHARDS: [Shard; SHARDS] = [const { Shard(Mutex::new(Slab::new())) }; SHARDS];
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SHARD: Cell<Option<&'static Shard>> = const { Cell::new(None) };
}

/// The registering thread's shard.
fn my_shard() -> &'static Shard {
    MY_SHARD.with(|s| match s.get() {
        Some(shard) => shard,
        None => {
            let shard = &FLOOR_SHARDS[NEXT_SHARD.fetch_add(1, Relaxed) % SHARDS];
            s.set(Some(shard));
            shard
        }
    })
}

/// A future that never completes (as a timeout around a pending future that is cancelled),
/// registered as described in the module documentation; or, made with `fires`, one that files
/// nothing, is pending at its first poll and ready with `true` at the next (the harness hands
/// it over and its consumer polls it again, as it awaits a timer's fired timeouts; no entry and
/// no firing, which only lowers the floor). Such a one arranges no wake-up: it is for a harness
/// that polls it again unasked.
pub(crate) struct FloorTimeout {
    deadline: Instant,
    fires: bool,
    /// For one that fires: whether its first poll has been.
    polled: bool,
    registered: Option<(&'static Shard, usize)>,
}

impl FloorTimeout {
    pub(crate) fn new(duration: Duration, fires: bool) -> FloorTimeout {
        FloorTimeout {
            deadline: Instant::now() + duration,
            fires,
            polled: false,
            registered: None,
        }
    }
}

impl Future for FloorTimeout {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.fires {
            if self.polled {
                return Poll::Ready(true);
            }
            self.polled = true;
            return Poll::Pending;
        }
        if self.registered.is_none() {
            let shard = my_shard();
            let key = shard
                .0
                .lock()
                .unwrap()
                .insert((self.deadline, cx.waker().clone()));
            self.registered = Some((shard, key));
        }
        Poll::Pending
    }
}

impl Drop for FloorTimeout {
    fn drop(&mut self) {
        if let Some((shard, key)) = self.registered.take() {
            let entry = shard.0.lock().unwrap().remove(key);
            drop(entry); // the waker, after the lock
        }
    }
}

/// [`FloorTimeout`] around a future, as a timeout is: the future is polled first, the floor's
/// entry is filed on the first poll that finds it pending (re-polls cost nothing more) and
/// removed when the future completes or this is dropped. Never times out: the floor of a
/// timeout that does not fire, in the harness that times ours.
pub(crate) struct FloorAround<F> {
    inner: F,
    timer: Option<FloorTimeout>,
}

impl<F> FloorAround<F> {
    pub(crate) fn new(duration: Duration, inner: F) -> FloorAround<F> {
        FloorAround {
            inner,
            timer: Some(FloorTimeout::new(duration, false)),
        }
    }
}

impl<F: Future + Unpin> Future for FloorAround<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = &mut *self;
        if let Poll::Ready(v) = Pin::new(&mut me.inner).poll(cx) {
            me.timer = None; // removed now, as a timeout's timer is
            return Poll::Ready(Ok(v));
        }
        if let Some(timer) = &mut me.timer {
            let _ = Pin::new(timer).poll(cx); // files the entry once; never ready
        }
        Poll::Pending
    }
}

/// Ours with its re-polls skipped: `timeout`'s `Sleep` (the same registration on the first
/// poll, the same cancel on drop), but every later poll goes to the inner future alone, never
/// to the timer. Not a timeout (past its first poll it can never time out): what a re-polled
/// timeout of ours would cost if a re-poll cost nothing, a floor for the re-polls' share.
#[derive(Debug)]
pub(crate) struct CheckedOnce<F> {
    inner: F,
    sleep: tokio_timing_wheel::Sleep,
    checked: bool,
}

impl<F> CheckedOnce<F> {
    pub(crate) fn new(duration: Duration, inner: F) -> CheckedOnce<F> {
        CheckedOnce {
            inner,
            sleep: tokio_timing_wheel::sleep_wheel(duration),
            checked: false,
        }
    }
}

impl<F: Future + Unpin> Future for CheckedOnce<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = &mut *self;
        if let Poll::Ready(v) = Pin::new(&mut me.inner).poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if !me.checked {
            me.checked = true;
            if Pin::new(&mut me.sleep).poll(cx).is_ready() {
                return Poll::Ready(Err(()));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    /// Runs `f` on a current-thread runtime with time, on this thread.
    fn block_on<F: Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(f)
    }

    /// How many entries this thread's floor shard holds.
    fn filed() -> usize {
        my_shard().0.lock().unwrap().len()
    }

    #[test]
    fn a_floor_timeout_is_filed_on_first_poll_and_removed_on_drop() {
        block_on(async {
            let before = filed();
            let mut t = Box::pin(FloorTimeout::new(Duration::from_secs(5), false));
            assert!(crate::poll::poll_once(t.as_mut()).await.is_pending());
            assert!(crate::poll::poll_once(t.as_mut()).await.is_pending());
            assert_eq!(filed(), before + 1, "filed once");
            drop(t);
            assert_eq!(filed(), before, "removed on drop");
            let mut fired = pin!(FloorTimeout::new(Duration::from_millis(1), true));
            assert!(crate::poll::poll_once(fired.as_mut()).await.is_pending());
            assert_eq!(filed(), before, "a firing one is not filed");
            let again = crate::poll::poll_once(fired.as_mut()).await;
            assert_eq!(again, Poll::Ready(true), "ready at its second poll");
        });
    }

    #[test]
    fn floor_around_files_once_when_pending_and_removes_when_done() {
        block_on(async {
            let before = filed();
            let mut ready = FloorAround::new(Duration::from_secs(5), std::future::ready(7));
            assert_eq!(
                crate::poll::poll_once(Pin::new(&mut ready)).await,
                Poll::Ready(Ok(7))
            );
            assert_eq!(filed(), before, "ready at once: not filed");
            let mut f = FloorAround::new(Duration::from_secs(5), crate::poll::PendingTimes(2));
            assert!(crate::poll::poll_once(Pin::new(&mut f)).await.is_pending());
            assert!(crate::poll::poll_once(Pin::new(&mut f)).await.is_pending());
            assert_eq!(filed(), before + 1, "filed once");
            assert_eq!(
                crate::poll::poll_once(Pin::new(&mut f)).await,
                Poll::Ready(Ok(()))
            );
            assert_eq!(filed(), before, "removed when done");
        });
    }

    #[test]
    fn checked_once_registers_on_first_poll_never_checks_again_and_cancels_on_drop() {
        block_on(async {
            let timer = tokio_timing_wheel::Timer::current();
            let before = timer.pending();
            let mut f = CheckedOnce::new(Duration::from_secs(5), crate::poll::PendingTimes(1));
            assert!(crate::poll::poll_once(Pin::new(&mut f)).await.is_pending());
            assert_eq!(timer.pending(), before + 1, "registered on the first poll");
            drop(f);
            assert_eq!(timer.pending(), before, "cancelled on drop");
            let mut f = CheckedOnce::new(Duration::from_millis(1), crate::poll::PendingTimes(2));
            assert!(crate::poll::poll_once(Pin::new(&mut f)).await.is_pending());
            // Past the deadline, a timeout would answer `Elapsed`: this one no longer looks.
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert!(crate::poll::poll_once(Pin::new(&mut f)).await.is_pending());
            assert_eq!(
                crate::poll::poll_once(Pin::new(&mut f)).await,
                Poll::Ready(Ok(()))
            );
        });
    }
}
