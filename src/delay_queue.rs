//! A queue of values that come out when their deadline passes, keyed for removal and reset:
//! the wheel's drop-in replacement for tokio-util's `DelayQueue`.
//!
//! ```
//! use std::time::Duration;
//! use futures::StreamExt;
//! use tokio_timing_wheel::delay_queue::DelayQueue;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // Idle sessions: each expires 30 s after its last activity.
//! let mut idle = DelayQueue::new();
//! let alice = idle.insert("alice", Duration::from_secs(30));
//! let bob = idle.insert("bob", Duration::from_secs(30));
//! tokio::time::sleep(Duration::from_secs(20)).await;
//! idle.reset(&alice, Duration::from_secs(30)); // alice did something
//! let first = idle.next().await.unwrap();
//! assert_eq!((first.key(), first.into_inner()), (bob, "bob"));
//! let second = idle.next().await.unwrap();
//! assert_eq!(second.into_inner(), "alice");
//! # }
//! ```
//!
//! # How it works, and how it differs from tokio-util's
//!
//! The items live in a hierarchical timing wheel of the queue's own (the crate's pure wheel:
//! no lock, as the queue is used through `&mut self`), and the queue holds one registration
//! on a [`Timer`] for the earliest of them, moved when that changes. So:
//!
//! - a deadline is kept exactly: [`DelayQueue::deadline`] and [`Expired::deadline`] return
//!   the very instant given (tokio-util rounds to its 1 ms tick);
//! - deadlines of any distance are accepted and far ones saturate (about 30 years for
//!   `Duration::MAX`); tokio-util panics past 2^36 ms (about two years);
//! - resetting an item to a later deadline costs no relink (it is re-filed when its old slot
//!   comes), and neither does moving the head later: the queue's one timer registration
//!   moves on the next poll;
//! - the waiting task is woken only when an item is due (or the queue changes so that one
//!   may be): never at a bucket boundary of the queue's wheel, nor at the old deadline of an
//!   item reset later or removed, once the queue has been polled since. Until that poll the
//!   queue's alarm stays where it was: a queue left unpolled wakes its task once at the old
//!   deadline of the item it waited for, with nothing due (tokio-util's moves its timer at
//!   the reset or removal, which wakes the task then if the wheel slot it waits on next has
//!   already begun);
//! - handing out an item allocates nothing (tokio-util boxes a new `Sleep` at each pass);
//! - a poll that finds nothing due reads the clock, to hand out an item whose exact deadline
//!   has passed before the queue's timer fires: one clock reading and a look at the alarm
//!   while nothing has changed (tokio-util's reads none there);
//! - inserting an item due before the one the waiting task waits for, resetting one to such
//!   a deadline, [`clear`](DelayQueue::clear) and removing the last item wake the task waiting
//!   on the queue (a reset to a later deadline wakes nothing at once; see above for its old
//!   deadline);
//! - [`peek`](DelayQueue::peek) names an item with the earliest deadline, so the next item
//!   out has its deadline (it is that item unless others share the deadline: ties come out in
//!   any order);
//! - [`DelayQueue::new`] and every method but [`poll_expired`](DelayQueue::poll_expired) work
//!   outside a runtime: the default timer is looked up the first time a poll has to wait.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use tokio::time::Instant;

use crate::clock::{deadline_after, Clock};
use crate::driver::shard::Shard;
use crate::error::TimerError;
use crate::fallback::TokioSleep;
use crate::loom::lock_std;
use crate::sleep::Sleep;
use crate::timer::Timer;
use crate::wheel::{self, PeekCache, Wheel};

/// Width of a level-0 bucket of a queue's wheel, about 1 ms: a power of two of nanoseconds,
/// so placing an item takes shifts, not divisions (deadlines are kept exactly regardless).
const TICK: Duration = Duration::from_nanos(1 << 20);

/// Buckets per level of a queue's wheel.
const WHEEL_SIZE: usize = 64;

/// A queue of values that each come out once their deadline has passed.
///
/// Insert with [`insert`](DelayQueue::insert) or [`insert_at`](DelayQueue::insert_at), which
/// return a [`Key`]; take expired values out with
/// [`poll_expired`](DelayQueue::poll_expired) or as a [`Stream`] of [`Expired`] items; use the
/// key to [`remove`](DelayQueue::remove) a value or [`reset`](DelayQueue::reset) its
/// deadline. The API and semantics are tokio-util's; see the [module](self) for what is
/// better here.
///
/// Values come out in deadline order, never before their deadline. A value whose deadline
/// had already passed when it was inserted or reset is ready at once; every value whose
/// deadline has passed counts as due alike, so due values come out in deadline order too
/// (items reset to 3, 7 and 1 ms ago come out the one of 7 ms ago first, then 3, then 1), ties
/// in any order. (The queue's clock reaches about 146 years back from its first insert, and
/// about 438 years ahead: deadlines further back come out first, in any order among
/// themselves; deadlines further ahead never come out.) When the queue is empty, the stream
/// yields `None` (and may yield values again after more inserts).
///
/// # Panics
///
/// [`poll_expired`](DelayQueue::poll_expired) (and the stream) panics if it has to wait and
/// the queue, made by [`new`](DelayQueue::new), finds no Tokio runtime with a time driver on
/// the thread (the default timer is looked up then), or if the queue's timer was built with
/// [`max_pending`](crate::Builder::max_pending) and is full ([`Timer::try_delay_queue`]
/// takes the queue's slot when it is made, or returns the error). If the timer shuts down, the
/// queue waits on Tokio's own timer from then on, rather than stopping: the timer's
/// runtime's while it lives; once that runtime has shut down, the Tokio timer of the runtime
/// current where the queue is polled (so polling it outside any runtime then panics, as
/// above). A queue made by [`new`](DelayQueue::new) whose runtime has gone keeps items and
/// keys and goes on that way on another runtime. (With Tokio's `test-util` each paused runtime
/// keeps a clock of its own, and the queue keeps one timeline: a queue read by several such
/// clocks, moved between paused runtimes or filled outside them, hands out by whichever
/// clock it reads, and an item may then come out before its deadline as another clock reads
/// it; a queue whose timer is on a runtime whose clock is behind the one it is polled by
/// waits by the timer's clock, so its items come out late by the difference. A build
/// without `test-util` has one clock.)
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tokio_timing_wheel::DelayQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let mut retries = DelayQueue::new();
/// retries.insert("b", Duration::from_millis(200));
/// retries.insert("a", Duration::from_millis(100));
/// while let Some(item) = std::future::poll_fn(|cx| retries.poll_expired(cx)).await {
///     println!("retry {} at {:?}", item.get_ref(), item.deadline() - start);
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(200));
/// # }
/// ```
pub struct DelayQueue<T> {
    wheel: Wheel<Slot<T>>,
    /// Converts instants to the wheel's time (nanoseconds); started by the first insert.
    clock: Option<Clock>,
    /// The wheel time of the latest clock reading: what is due at it is handed out without
    /// reading the clock again.
    seen: u64,
    alarm: HeadSleep,
    /// The wheel time the alarm was set for when a poll last had to wait (`u64::MAX`: none).
    armed: u64,
    /// The instant the alarm was set for then (`None`: none).
    armed_at: Option<Instant>,
    /// The earliest deadline of the items (wheel time), while known: `None` once a change may
    /// have moved it. Finding it may walk the buckets that start before it (lazily re-filed
    /// items included), so it is kept between polls rather than found again at every poll
    /// that waits, and found again from `peeked`, which a walk leaves sorted.
    head: Option<u64>,
    /// The waker of the latest poll: woken when an insert or reset comes before `armed`,
    /// and when the queue is emptied.
    waker: Option<Waker>,
    /// Keys moved by [`compact`](DelayQueue::compact): the user's key to the wheel's, and
    /// back. Empty (no lookup cost beyond a length check) until a compaction moves an item.
    remap: HashMap<wheel::Key, wheel::Key>,
    unmap: HashMap<wheel::Key, wheel::Key>,
    /// What [`peek`](DelayQueue::peek) and the search for the first deadline found, kept for
    /// the next: a loop that peeks and removes, or that moves the first item later each time,
    /// walks a crowded bucket a bounded number of times, not once per step. Behind a lock (not
    /// a `RefCell`) so the queue stays `Sync`; `peek` takes it, a poll reaches it by `&mut`.
    peeked: Mutex<PeekCache>,
}

/// A value and the instant it was given, exactly.
struct Slot<T> {
    value: T,
    deadline: Instant,
}

/// The queue's one registration on a timer, for the earliest item.
enum HeadSleep {
    /// The current runtime's default timer, not looked up yet.
    Default,
    Wheel(Sleep),
    /// A queue made by [`Timer::try_delay_queue`]: a persistent entry holding its timer slot
    /// for the queue's life.
    Reserved(Reserved),
    /// The timer shut down: Tokio's timer stands in.
    Tokio(TokioSleep),
}

/// The alarm of a queue made by [`Timer::try_delay_queue`]: a persistent wheel entry, as an
/// `Interval`'s, filed when the queue is made. When it fires it parks, keeping its key and
/// its `max_pending` slot; a poll that waits files it again, and an empty queue parks it past
/// the horizon, where it waits for nothing. Only a shutdown (or the queue's drop) takes it.
#[derive(Debug)]
struct Reserved {
    shard: Arc<Shard>,
    key: wheel::Key,
    /// The instant the entry is filed for; `None`: past the horizon, or parked after firing
    /// for an instant the queue has since been told has come.
    filed_for: Option<Instant>,
    /// The waker the entry holds (a no-op placeholder until a poll waits).
    waker: Waker,
}

impl Reserved {
    /// Takes the slot: files the entry past the horizon.
    fn file(shard: Arc<Shard>) -> Result<Reserved, TimerError> {
        let waker = futures::task::noop_waker();
        let key = shard.register_persistent_unreachable(waker.clone())?;
        Ok(Reserved {
            shard,
            key,
            filed_for: None,
            waker,
        })
    }

    /// Waits for `at`: `Ready` once the entry has fired for it. `None` if the timer shut
    /// down (the entry is then drained, or about to be).
    fn poll_until(&mut self, at: Instant, cx: &mut Context<'_>) -> Option<Poll<()>> {
        if self.shard.is_shutdown() {
            return None;
        }
        let same_waker = self.waker.will_wake(cx.waker());
        if self.filed_for != Some(at) {
            // Filed for another instant, or parked: file it for `at`, with this task's
            // waker (a deadline already reached fires on the next pass).
            if !self
                .shard
                .reschedule_persistent_at(self.key, at, cx.waker())
            {
                return None;
            }
            self.filed_for = Some(at);
        } else {
            match self.shard.poll_persistent(self.key, cx.waker()) {
                Some(false) => {}
                Some(true) => {
                    // Fired for `at`, and parked: its waker is spent. The next wait files
                    // it again, even for the same instant.
                    self.filed_for = None;
                    return Some(Poll::Ready(()));
                }
                None => return None,
            }
        }
        if !same_waker {
            self.waker = cx.waker().clone();
        }
        Some(Poll::Pending)
    }

    /// Nothing to wait for: parks the entry past the horizon, keeping the slot. (A shutdown
    /// that took it is noticed by the next poll.) It keeps no task's waker there, as a plain
    /// queue's timer keeps none: the task that waited last is not held alive by the timer,
    /// and a shutdown wakes nobody.
    fn disarm(&mut self) {
        let noop = futures::task::noop_waker();
        if self.filed_for.take().is_some() {
            self.shard.park_persistent(self.key, &noop);
        }
        // (Parked after firing, the entry holds a no-op already.)
        self.waker = noop;
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.shard.cancel(self.key);
    }
}

/// A handle to an item of a [`DelayQueue`], returned by the inserts.
///
/// Once its item is removed or has expired, a key never names another item of that queue,
/// even one stored in the same place. Keys are not told apart between queues, as tokio-util's
/// are not: a key used with another queue than the one that gave it may name an item of that
/// queue (one inserted at the same point in its history), which `remove`, `reset` or
/// `deadline` then act on. Keep each key with its queue.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_timing_wheel::DelayQueue;
///
/// let mut queue = DelayQueue::new(); // no runtime needed until a poll waits
/// let key = queue.insert(1, Duration::from_secs(1));
/// assert_eq!(queue.remove(&key).into_inner(), 1);
/// let other = queue.insert(2, Duration::from_secs(1)); // may reuse the slot, never the key
/// assert_ne!(key, other);
/// assert!(queue.try_remove(&key).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(wheel::Key);

/// An item taken out of a [`DelayQueue`]: its value, its deadline and its key.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::StreamExt;
/// use tokio_timing_wheel::DelayQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut queue = DelayQueue::new();
/// let key = queue.insert(String::from("job"), Duration::from_millis(5));
/// let deadline = queue.deadline(&key);
/// let mut item = queue.next().await.unwrap();
/// assert_eq!((item.key(), item.deadline()), (key, deadline));
/// item.get_mut().push_str(" done");
/// assert_eq!(item.get_ref(), "job done");
/// assert_eq!(item.into_inner(), "job done");
/// # }
/// ```
#[derive(Debug)]
pub struct Expired<T> {
    value: T,
    deadline: Instant,
    key: Key,
}

impl<T> Expired<T> {
    /// The value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("x", Duration::from_secs(1));
    /// assert_eq!(*queue.remove(&key).get_ref(), "x");
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// The value, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(1, Duration::from_secs(1));
    /// let mut item = queue.remove(&key);
    /// *item.get_mut() += 1;
    /// assert_eq!(item.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The value, taken out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(vec![1, 2], Duration::from_secs(1));
    /// assert_eq!(queue.remove(&key).into_inner(), [1, 2]);
    /// ```
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The item's deadline: exactly the instant it was inserted or last reset with.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let at = Instant::now() + Duration::from_nanos(1_234_567); // not a whole millisecond
    /// let key = queue.insert_at((), at);
    /// assert_eq!(queue.remove(&key).deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key the item had in the queue (it names nothing there any more).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert((), Duration::from_secs(1));
    /// assert_eq!(queue.remove(&key).key(), key);
    /// ```
    pub fn key(&self) -> Key {
        self.key
    }
}

impl<T> DelayQueue<T> {
    /// An empty queue on the current runtime's default timer, looked up the first time a poll
    /// has to wait: creating one (and inserting, removing, resetting) needs no runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let queue: DelayQueue<u32> = DelayQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_alarm(HeadSleep::Default, 0)
    }

    /// An empty queue with room for `capacity` items before it reallocates, on the current
    /// runtime's default timer (see [`new`](DelayQueue::new)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let queue: DelayQueue<u32> = DelayQueue::with_capacity(1000);
    /// assert!(queue.capacity() >= 1000);
    /// ```
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue::with_alarm(HeadSleep::Default, capacity)
    }

    fn with_alarm(alarm: HeadSleep, capacity: usize) -> DelayQueue<T> {
        let mut wheel = Wheel::with_tick(WHEEL_SIZE, TICK.as_nanos() as u64);
        // The queue's memory is the owner's to give back (`shrink_to_fit`), as in tokio-util.
        wheel.keep_capacity();
        // Every deadline already passed counts as due alike, whatever the queue's last clock
        // reading: due items come out in deadline order.
        wheel.order_due();
        wheel.reserve_exact(capacity);
        DelayQueue {
            wheel,
            clock: None,
            seen: 0,
            alarm,
            armed: u64::MAX,
            armed_at: None,
            head: None,
            waker: None,
            remap: HashMap::new(),
            unmap: HashMap::new(),
            peeked: Mutex::new(PeekCache::default()),
        }
    }

    /// Inserts `value`, to come out once `timeout` has elapsed; a timeout too large to add
    /// (such as `Duration::MAX`) means about 30 years.
    ///
    /// If the new item comes before the one the waiting task waits for, that task is woken.
    ///
    /// # Panics
    ///
    /// If the queue already holds about four billion items.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// queue.insert("later", Duration::from_secs(2));
    /// queue.insert("sooner", Duration::from_secs(1));
    /// queue.insert("in ten years", Duration::from_secs(10 * 365 * 86_400)); // no panic
    /// assert_eq!(queue.next().await.unwrap().into_inner(), "sooner");
    /// assert_eq!(queue.next().await.unwrap().into_inner(), "later");
    /// # }
    /// ```
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        let now = Instant::now();
        if self.wheel.is_empty() {
            // Start the wheel's time at now, so the item is filed in the lowest level it can
            // be (the wheel's time otherwise stays where the last poll left it).
            self.observe(now);
            let _none = self.wheel.poll(self.seen);
        }
        self.insert_at(value, deadline_after(now, timeout))
    }

    /// Inserts `value`, to come out once `deadline` has passed (at once if it has already).
    ///
    /// The deadline is kept exactly; deadlines centuries away wait forever rather than
    /// panic. If the new item comes before the one the waiting task waits for, that task is
    /// woken.
    ///
    /// # Panics
    ///
    /// If the queue already holds about four billion items.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let at = Instant::now() + Duration::from_micros(1500);
    /// let key = queue.insert_at("job", at);
    /// assert_eq!(queue.deadline(&key), at);
    /// assert_eq!(queue.next().await.unwrap().into_inner(), "job");
    /// assert!(Instant::now() >= at); // never early
    /// # }
    /// ```
    #[track_caller]
    pub fn insert_at(&mut self, value: T, deadline: Instant) -> Key {
        let units = self.clock().deadline_to_units(deadline);
        let key = match self.wheel.insert(units, Slot { value, deadline }) {
            Ok(key) => key,
            Err(_) => {
                panic!("tokio-timing-wheel: a DelayQueue holds at most about four billion items")
            }
        };
        self.note_filed(key);
        self.head = self.head.map(|h| h.min(units));
        self.wake_if_before(units);
        Key(key)
    }

    /// Removes the item of `key`, returning it.
    ///
    /// Removing the last item wakes the waiting task (the stream then yields `None`).
    ///
    /// # Panics
    ///
    /// If `key` names no item in the queue (it was removed or has expired already); use
    /// [`try_remove`](DelayQueue::try_remove) to get `None` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("session", Duration::from_secs(30));
    /// assert_eq!(queue.remove(&key).into_inner(), "session");
    /// assert!(queue.is_empty());
    /// ```
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        match self.try_remove(key) {
            Some(item) => item,
            None => panic!(
                "tokio-timing-wheel: DelayQueue::remove: {key:?} names no item in this queue \
                 (removed or expired already); use try_remove to handle that"
            ),
        }
    }

    /// Removes the item of `key`, returning it, or `None` if the key names no item in the
    /// queue (removed or expired already).
    ///
    /// Removing the last item wakes the waiting task (the stream then yields `None`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("session", Duration::from_secs(30));
    /// assert!(queue.try_remove(&key).is_some());
    /// assert!(queue.try_remove(&key).is_none());
    /// ```
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        let slot = self.wheel.remove(self.internal(key))?;
        self.forget(key);
        self.forget_head(slot.deadline);
        if self.wheel.is_empty() {
            self.wake();
        }
        Some(Expired {
            value: slot.value,
            deadline: slot.deadline,
            key: *key,
        })
    }

    /// Moves the item of `key` to come out once `timeout` has elapsed from now (see
    /// [`reset_at`](DelayQueue::reset_at)).
    ///
    /// # Panics
    ///
    /// If `key` names no item in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut idle = DelayQueue::new();
    /// let conn = idle.insert("conn-1", Duration::from_secs(30));
    /// tokio::time::sleep(Duration::from_secs(10)).await;
    /// idle.reset(&conn, Duration::from_secs(30)); // activity: 30 s from now
    /// idle.next().await;
    /// assert_eq!(start.elapsed(), Duration::from_secs(40));
    /// # }
    /// ```
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        self.reset_at(key, deadline_after(Instant::now(), timeout));
    }

    /// Moves the item of `key` to come out once `deadline` has passed.
    ///
    /// Moving it later costs no relink: the item stays where it is in the wheel and is
    /// re-filed when its old slot comes. Moving it earlier than the item the waiting task
    /// waits for (or into the past) wakes that task. Moving that item later moves the queue's
    /// timer on the next poll, not at once: if the queue is not polled before the old
    /// deadline, its task is woken once then, finds nothing due and waits again (tokio-util's
    /// queue moves its timer here and wakes nobody). Removing it does the same.
    ///
    /// # Panics
    ///
    /// If `key` names no item in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("x", Duration::from_secs(60));
    /// queue.reset_at(&key, start + Duration::from_secs(5));
    /// assert_eq!(queue.next().await.unwrap().deadline(), start + Duration::from_secs(5));
    /// # }
    /// ```
    #[track_caller]
    pub fn reset_at(&mut self, key: &Key, deadline: Instant) {
        let inner = self.internal(key);
        let Some(slot) = self.wheel.get_mut(inner) else {
            panic!("tokio-timing-wheel: DelayQueue::reset: {key:?} names no item in this queue (removed or expired already)");
        };
        let old = std::mem::replace(&mut slot.deadline, deadline);
        let units = self.started_clock().deadline_to_units(deadline);
        self.wheel.reschedule(inner, units);
        self.note_filed(inner);
        self.forget_head(old);
        self.head = self.head.map(|h| h.min(units));
        self.wake_if_before(units);
    }

    /// The deadline of the item of `key`: exactly the instant it was inserted or last reset
    /// with.
    ///
    /// # Panics
    ///
    /// If `key` names no item in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let at = Instant::now() + Duration::from_nanos(999);
    /// let key = queue.insert_at((), at);
    /// assert_eq!(queue.deadline(&key), at);
    /// ```
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        match self.wheel.get(self.internal(key)) {
            Some(slot) => slot.deadline,
            None => panic!(
                "tokio-timing-wheel: DelayQueue::deadline: {key:?} names no item in this queue"
            ),
        }
    }

    /// The key of an item with the earliest deadline, without taking it out or waiting. `None`
    /// if the queue is empty.
    ///
    /// The next item out has that deadline, and is that item unless others share the deadline:
    /// items with equal deadlines come out in any order, which `peek` does not predict.
    ///
    /// A peek looks at the queue's earliest slots and keeps what it found sorted (the earliest
    /// 1,024 items, or an eighth of a larger walk), so the next peeks, after removals,
    /// hand-outs, inserts and resets, look at nothing more until that runs out, or until more
    /// than 1,024 inserts and resets earlier than what it left out have come since: a loop
    /// that peeks and removes touches each item a few times in all, however many share a
    /// slot. (tokio-util's `peek` costs a look at each level, but names the head of the
    /// earliest slot's list, not always an earliest item.)
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// assert_eq!(queue.peek(), None);
    /// let _a = queue.insert("a", Duration::from_secs(10));
    /// let b = queue.insert("b", Duration::from_secs(5));
    /// let _c = queue.insert("c", Duration::from_secs(15));
    /// assert_eq!(queue.peek(), Some(b));
    /// ```
    pub fn peek(&self) -> Option<Key> {
        let found = self.wheel.peek_cached(&mut lock_std(&self.peeked));
        found.map(|k| self.external(k))
    }

    /// Keeps what `peek` found up to date with the item of wheel key `key`, just filed.
    fn note_filed(&mut self, key: wheel::Key) {
        let peeked = self
            .peeked
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        peeked.note_filed(&self.wheel, key);
    }

    /// Number of items in the queue (expired ones not yet taken out included).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// queue.insert((), Duration::from_secs(1));
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Whether the queue holds no item.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let queue = DelayQueue::<()>::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.wheel.is_empty()
    }

    /// How many items the queue can hold without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let queue = DelayQueue::<()>::with_capacity(64);
    /// assert!(queue.capacity() >= 64);
    /// ```
    pub fn capacity(&self) -> usize {
        self.wheel.capacity()
    }

    /// Makes room for at least `additional` more items without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::<u8>::new();
    /// queue.reserve(100);
    /// assert!(queue.capacity() >= 100);
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        self.wheel.reserve(additional);
    }

    /// Removes every item (their keys name nothing from then on) and wakes the waiting task,
    /// whose stream then yields `None`. Memory is kept for reuse; see
    /// [`shrink_to_fit`](DelayQueue::shrink_to_fit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(1, Duration::from_secs(1));
    /// queue.clear();
    /// assert!(queue.is_empty() && queue.try_remove(&key).is_none());
    /// ```
    pub fn clear(&mut self) {
        let had_items = !self.wheel.is_empty();
        self.wheel.clear();
        self.forget_peeked();
        self.head = None;
        self.remap = HashMap::new();
        self.unmap = HashMap::new();
        self.disarm();
        if had_items {
            self.wake();
        }
    }

    /// Gives back the memory not needed by the items in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::with_capacity(10_000);
    /// queue.insert(1, Duration::from_secs(1));
    /// queue.shrink_to_fit();
    /// assert!(queue.capacity() < 10_000);
    /// ```
    pub fn shrink_to_fit(&mut self) {
        self.wheel.shrink_to_fit();
        self.shrink_maps();
        self.forget_peeked();
    }

    /// Gives back every byte the items do not need, as tokio-util's `compact`: the items'
    /// storage becomes exactly as large as their number ([`capacity`](DelayQueue::capacity) is
    /// then [`len`](DelayQueue::len)), the items beyond it moving into the vacancies, the
    /// others staying where they are. Keys stay valid: the key of an item moved still names
    /// it (and is the one its [`Expired`] carries), and a key of an item gone before still
    /// names nothing. Costs O(capacity); deadlines and the waiting task are unaffected.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// let mut queue = DelayQueue::new();
    /// let keys: Vec<_> = (0..1000).map(|i| queue.insert(i, Duration::from_secs(1))).collect();
    /// for k in &keys[1..] {
    ///     queue.remove(k);
    /// }
    /// queue.compact();
    /// assert_eq!(queue.capacity(), 1);
    /// assert_eq!(queue.remove(&keys[0]).into_inner(), 0);
    /// ```
    pub fn compact(&mut self) {
        for (from, to) in self.wheel.compact() {
            let user = self.unmap.remove(&from).unwrap_or(from);
            if user == to {
                self.remap.remove(&user);
            } else {
                self.remap.insert(user, to);
                self.unmap.insert(to, user);
            }
        }
        self.shrink_maps();
        self.forget_peeked();
    }

    /// Gives back what [`peek`](DelayQueue::peek) kept (it walks again next time).
    fn forget_peeked(&mut self) {
        *self
            .peeked
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = PeekCache::default();
    }

    /// Gives back what the compaction key maps hold beyond their entries (an earlier
    /// compaction's, whose items have left since).
    fn shrink_maps(&mut self) {
        if self.remap.is_empty() {
            self.remap = HashMap::new();
            self.unmap = HashMap::new();
        } else {
            self.remap.shrink_to_fit();
            self.unmap.shrink_to_fit();
        }
    }

    /// The wheel's key for the user's `key` (they differ only after a compaction).
    fn internal(&self, key: &Key) -> wheel::Key {
        if self.remap.is_empty() {
            return key.0;
        }
        self.remap.get(&key.0).copied().unwrap_or(key.0)
    }

    /// The user's key for the wheel's `key`.
    fn external(&self, key: wheel::Key) -> Key {
        if self.unmap.is_empty() {
            return Key(key);
        }
        Key(self.unmap.get(&key).copied().unwrap_or(key))
    }

    /// The item of `key` left the queue: drops its compaction mapping, if any.
    fn forget(&mut self, key: &Key) {
        if self.remap.is_empty() {
            return;
        }
        if let Some(inner) = self.remap.remove(&key.0) {
            self.unmap.remove(&inner);
        }
    }

    /// Takes out the next item whose deadline has passed: `Ready(Some(item))`, or `Pending`
    /// (the waker of `cx` is woken when one is due, or when the queue changes so that it
    /// should look again), or `Ready(None)` if the queue is empty.
    ///
    /// Items already due come out without a clock read each: a burst of expired items costs
    /// one wheel step per item, and allocates nothing. Each item spends a unit of the task's
    /// cooperative budget, as a Tokio `Sleep` that completes does (tokio-util's queue spends
    /// one, through the Tokio sleep it polls, for an item that comes out of its wheel, and
    /// none for one inserted already due): out of budget, a queue with items answers
    /// `Pending` and wakes the task for its next turn, so a long burst yields to the worker's
    /// other tasks. An empty queue answers `Ready(None)` whatever the budget.
    ///
    /// A poll that finds nothing due, as a task makes at every wake (a `select!` over the
    /// queue and a channel), reads the clock once and does no work in the queue's wheel while
    /// the queue is as the last wait left it (inserts and resets later than its first item
    /// leave it so); after a change that may move the first deadline, the next wait finds it
    /// again, from what the last walk of the buckets that can hold it kept (the earliest
    /// eighth of the items it saw, in order), so items moved later one by one (connections
    /// active in turn) cost a walk now and then, not one each. tokio-util's queue reads no clock
    /// there (it hands items out only when its timer fires, at its 1 ms tick): this one hands
    /// out an item as soon as a poll finds its exact deadline passed.
    ///
    /// # Panics
    ///
    /// If it has to wait and the queue (made by [`new`](DelayQueue::new) or
    /// [`with_capacity`](DelayQueue::with_capacity)) finds no Tokio runtime with a time driver
    /// on this thread; or if the queue's timer was built with
    /// [`max_pending`](crate::Builder::max_pending) and is full (never for a queue made by
    /// [`Timer::try_delay_queue`], which holds its slot).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::future::poll_fn;
    /// use tokio_timing_wheel::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// queue.insert("a", Duration::from_millis(1));
    /// let item = poll_fn(|cx| queue.poll_expired(cx)).await;
    /// assert_eq!(item.unwrap().into_inner(), "a");
    /// assert!(poll_fn(|cx| queue.poll_expired(cx)).await.is_none()); // empty
    /// # }
    /// ```
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if self.wheel.is_empty() {
            // Nothing to hand out: `Ready(None)` whatever the budget, as tokio-util's.
            return self.poll_expired_inner(cx);
        }
        // One unit of the task's cooperative budget per item (tokio-util's spends one through
        // its sleep, for an item out of its wheel): a burst of expired items yields to the
        // worker's other tasks.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let poll = self.poll_expired_inner(cx);
        if poll.is_ready() {
            coop.made_progress();
        }
        poll
    }

    fn poll_expired_inner(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        // The instant of the alarm that went off in this poll, if one did.
        let mut went_off = None;
        // The queue as the last wait left it (the first deadline is the one the alarm is set
        // for) and the clock short of that deadline: nothing can be due, and the alarm tells
        // whether to look again. One clock reading and no wheel work, for the polls a task
        // makes at every wake (a `select!` loop over the queue and a channel, say).
        if let (Some(at), true) = (self.armed_at, self.head == Some(self.armed)) {
            let now = Instant::now();
            if now < at {
                if self.poll_alarm(at, cx).is_pending() {
                    return Poll::Pending;
                }
                went_off = Some(at);
            }
        }
        loop {
            if let Some(item) = self.take_due() {
                return Poll::Ready(Some(item));
            }
            if self.wheel.is_empty() {
                self.disarm();
                return Poll::Ready(None);
            }
            let before = self.seen;
            let now = Instant::now();
            if self.observe(now) > before {
                if let Some(item) = self.take_due() {
                    return Poll::Ready(Some(item));
                }
            }
            if went_off.is_some_and(|at| now < at) {
                // The alarm went off, yet the clock this queue reads (the current runtime's)
                // has not reached its instant: possible only where runtimes keep paused
                // clocks of their own (Tokio's `test-util`), with the alarm's timer on another
                // runtime, whose clock is ahead. Wait by the queue's clock from now on, on the
                // current runtime's Tokio timer, rather than spin. (That covers an alarm
                // clamped to the far future too, for a first item farther away still.)
                self.wait_here();
            }
            // Nothing is due: wait for the first item's exact deadline, not the start of its
            // bucket (the alarm wakes the task, so it must go off only when an item is due;
            // a cascade or an item re-filed lazily is done by the poll that hands the item
            // out). That is after `seen` (all before it was handed out above), so once the
            // alarm has gone off, the next clock reading is past `seen` and the wheel moves
            // on: this loop cannot spin.
            // (Known, it is after `seen`: everything due by then was handed out above.)
            let head = match self.head {
                Some(head) if head > self.seen => head,
                _ => {
                    let peeked = self
                        .peeked
                        .get_mut()
                        .unwrap_or_else(PoisonError::into_inner);
                    let head = self
                        .wheel
                        .next_deadline_cached(peeked)
                        .expect("a non-empty queue waits for an item");
                    self.head = Some(head);
                    head
                }
            };
            if head == u64::MAX {
                // Only items beyond the clock's horizon (about 438 years from the first
                // insert) are left: they never come out. Wait for a change to the queue.
                self.disarm();
                return Poll::Pending;
            }
            let at = self.started_clock().units_to_instant(head, now);
            if self.poll_alarm(at, cx).is_pending() {
                self.armed = head;
                self.armed_at = Some(at);
                return Poll::Pending;
            }
            // (An alarm for the far future, `at` clamped short of the first deadline, may go
            // off before it, and the loop then simply waits again.)
            went_off = Some(at);
        }
    }

    /// An item due at `deadline` left the queue or moved: if it may have been the first, the
    /// first deadline is no longer known.
    fn forget_head(&mut self, deadline: Instant) {
        if let (Some(head), Some(clock)) = (self.head, &self.clock) {
            if clock.deadline_to_units(deadline) <= head {
                self.head = None;
            }
        }
    }

    /// Moves the alarm onto the current runtime's Tokio timer (see `poll_expired_inner`).
    fn wait_here(&mut self) {
        let shard = match &self.alarm {
            HeadSleep::Default => return,
            HeadSleep::Wheel(sleep) => sleep.shard().clone(),
            // Its slot is given back (the queue's drop would give it back anyway).
            HeadSleep::Reserved(alarm) => alarm.shard.clone(),
            HeadSleep::Tokio(sleep) => sleep.shard().clone(),
        };
        // Its deadline is set by the next poll (`poll_until`).
        self.alarm = HeadSleep::Tokio(TokioSleep::here(Instant::now(), &shard));
    }

    /// Hands out an item due at `self.seen`, if any.
    fn take_due(&mut self) -> Option<Expired<T>> {
        let e = self.wheel.poll(self.seen)?;
        if self.head == Some(e.deadline) {
            self.head = None;
        }
        let key = self.external(e.key);
        self.forget(&key);
        Some(Expired {
            value: e.value.value,
            deadline: e.value.deadline,
            key,
        })
    }

    /// Waits on the timer for `at`, moving the registration there if needed (later is free).
    fn poll_alarm(&mut self, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.alarm {
                HeadSleep::Default => {
                    let shard = crate::timer::default::current_shard_of_task();
                    self.alarm = HeadSleep::Wheel(Sleep::new(shard, at));
                }
                HeadSleep::Wheel(sleep) => {
                    let mut sleep = Pin::new(sleep);
                    if sleep.deadline() != at {
                        // Later: re-registered now, as a lazy reset would wake the task at
                        // the old deadline with nothing due. Not on a timer with a limit,
                        // whose reset moves the entry at once and keeps its slot: filed
                        // again, it would give the slot up in between (to a waker dropped
                        // then, say), and could find the timer full.
                        if at > sleep.deadline() && !sleep.shard().is_bounded() {
                            sleep.disarm();
                        }
                        sleep.as_mut().reset(at);
                    }
                    let ready = sleep.as_mut().poll(cx).is_ready();
                    if !(ready && sleep.is_shutdown()) {
                        return if ready {
                            Poll::Ready(())
                        } else {
                            Poll::Pending
                        };
                    }
                    let shard = sleep.shard().clone();
                    self.alarm = HeadSleep::Tokio(TokioSleep::new(at, &shard));
                }
                HeadSleep::Reserved(alarm) => match alarm.poll_until(at, cx) {
                    Some(poll) => return poll,
                    // Shut down: wait on Tokio's timer, as a `Sleep` cut short does (the
                    // entry, and its slot, go with the alarm).
                    None => {
                        let shard = alarm.shard.clone();
                        self.alarm = HeadSleep::Tokio(TokioSleep::new(at, &shard));
                    }
                },
                HeadSleep::Tokio(sleep) => return sleep.poll_until(at, cx),
            }
        }
    }

    /// Removes the timer registration (nothing to wait for).
    fn disarm(&mut self) {
        match &mut self.alarm {
            HeadSleep::Wheel(sleep) => sleep.disarm(),
            HeadSleep::Reserved(alarm) => alarm.disarm(),
            // After a shutdown: Tokio's sleep would otherwise wake the task at its old
            // deadline with nothing in the queue.
            HeadSleep::Tokio(sleep) => sleep.disarm(),
            HeadSleep::Default => {}
        }
        self.armed = u64::MAX;
        self.armed_at = None;
    }

    /// Wakes the task that polled last, if a change at wheel time `units` comes before what
    /// it waits for.
    fn wake_if_before(&mut self, units: u64) {
        if units < self.armed {
            self.wake();
        }
    }

    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    /// The clock, started now if this is the first use (the wheel's time then moves to the
    /// first reading, so the first items are filed in the lowest level they can be).
    #[inline]
    fn clock(&mut self) -> &Clock {
        if self.clock.is_none() {
            self.start_clock();
        }
        self.started_clock()
    }

    /// Starts the clock (see [`clock`](Self::clock)).
    #[cold]
    fn start_clock(&mut self) {
        let clock = Clock::reaching_back(TICK);
        self.seen = clock.now_to_units(Instant::now());
        debug_assert!(self.wheel.is_empty(), "items before the clock started");
        let _none = self.wheel.poll(self.seen);
        self.clock = Some(clock);
    }

    /// Reads the clock (`now`): the queue's time moves on to it (never back). Returns the
    /// queue's time.
    fn observe(&mut self, now: Instant) -> u64 {
        let units = self.clock().now_to_units(now);
        self.seen = self.seen.max(units);
        self.seen
    }

    /// The clock, which the first insert started.
    fn started_clock(&self) -> &Clock {
        self.clock
            .as_ref()
            .expect("an item was inserted, which started the clock")
    }
}

impl Timer {
    /// An empty [`DelayQueue`] whose single timer registration is on this timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(10).build().unwrap();
    /// let mut queue = timer.delay_queue();
    /// for i in 0..1000 {
    ///     queue.insert(i, Duration::from_millis(i));
    /// }
    /// assert_eq!(queue.next().await.unwrap().into_inner(), 0);
    /// assert_eq!(queue.next().await.unwrap().into_inner(), 1);
    /// assert!(timer.pending() <= 1, "a thousand items, one timer slot");
    /// # }
    /// ```
    pub fn delay_queue<T>(&self) -> DelayQueue<T> {
        self.delay_queue_with_capacity(0)
    }

    /// An empty [`DelayQueue`] on this timer, with room for `capacity` items before it
    /// reallocates.
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().build().unwrap();
    /// let queue = timer.delay_queue_with_capacity::<u64>(100);
    /// assert!(queue.capacity() >= 100);
    /// # }
    /// ```
    pub fn delay_queue_with_capacity<T>(&self, capacity: usize) -> DelayQueue<T> {
        let sleep = Sleep::new(self.shard().clone(), Instant::now());
        DelayQueue::with_alarm(HeadSleep::Wheel(sleep), capacity)
    }

    /// Like [`delay_queue`](Timer::delay_queue), but takes the queue's one timer slot now and
    /// returns an error when the timer is full or shut down: on a timer built with
    /// [`max_pending`](crate::Builder::max_pending) the queue then never panics for want of a
    /// slot, as it holds its slot for its whole life, empty or not (a queue from
    /// `delay_queue` takes a slot when a poll has to wait, and panics if it finds none; it
    /// gives the slot back when its wait fires or a later poll finds nothing to wait for, so a
    /// queue emptied by `remove` and not polled again keeps it until its old deadline).
    ///
    /// If the timer shuts down, the queue gives its slot back and waits on Tokio's timer from
    /// then on, as any queue does (see [`DelayQueue`], "Panics"); so it does if it is polled
    /// by a paused clock behind the timer's (Tokio's `test-util`, several runtimes).
    ///
    /// # Errors
    ///
    /// [`TimerError::Full`] if the timer has `max_pending` timers pending;
    /// [`TimerError::Shutdown`] if it has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use tokio_timing_wheel::{Timer, TimerError};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(1).build().unwrap();
    /// let mut leases = timer.try_delay_queue().unwrap();
    /// assert_eq!(timer.pending(), 1, "its slot, taken at once");
    /// let full = timer.try_sleep(Duration::from_secs(1));
    /// assert_eq!(full.unwrap_err(), TimerError::Full { max_pending: 1 });
    /// leases.insert("a", Duration::from_secs(10));
    /// assert_eq!(leases.next().await.unwrap().into_inner(), "a");
    /// assert_eq!(timer.pending(), 1, "kept while the queue is empty");
    /// drop(leases);
    /// assert_eq!(timer.pending(), 0);
    /// # }
    /// ```
    pub fn try_delay_queue<T>(&self) -> Result<DelayQueue<T>, TimerError> {
        self.try_delay_queue_with_capacity(0)
    }

    /// Like [`delay_queue_with_capacity`](Timer::delay_queue_with_capacity), but takes the
    /// queue's one timer slot now (see [`try_delay_queue`](Timer::try_delay_queue)).
    ///
    /// # Errors
    ///
    /// As [`try_delay_queue`](Timer::try_delay_queue).
    ///
    /// # Examples
    ///
    /// ```
    /// use tokio_timing_wheel::{Timer, TimerError};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(1).build().unwrap();
    /// let queue = timer.try_delay_queue_with_capacity::<u64>(100).unwrap();
    /// assert!(queue.capacity() >= 100);
    /// let second = timer.try_delay_queue_with_capacity::<u64>(100);
    /// assert_eq!(second.unwrap_err(), TimerError::Full { max_pending: 1 });
    /// # }
    /// ```
    pub fn try_delay_queue_with_capacity<T>(
        &self,
        capacity: usize,
    ) -> Result<DelayQueue<T>, TimerError> {
        let alarm = Reserved::file(self.shard().clone())?;
        Ok(DelayQueue::with_alarm(HeadSleep::Reserved(alarm), capacity))
    }
}

impl<T> Default for DelayQueue<T> {
    fn default() -> DelayQueue<T> {
        DelayQueue::new()
    }
}

// The queue holds no self-references; values are never pinned.
impl<T> Unpin for DelayQueue<T> {}

impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// As [`DelayQueue::poll_expired`].
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}

/// Bounded: the number of items and what the queue waits on; never the items or the timer.
impl<T> std::fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waits_on = match (&self.alarm, self.armed) {
            (_, u64::MAX) => None,
            (HeadSleep::Tokio(_), _) => Some("tokio (the timer shut down, or reads another clock)"),
            _ => Some("the wheel"),
        };
        let waits_until = match (&self.clock, waits_on) {
            (Some(clock), Some(_)) => Some(clock.units_to_instant(self.armed, Instant::now())),
            _ => None,
        };
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("waits_on", &waits_on)
            .field("waits_until", &waits_until)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poll that waits keeps the first deadline: polling again, inserting or moving items
    /// later, or inserting an earlier one walks no item, however many share the first
    /// bucket (a `select!` loop polls the queue at every wake of its task); once the first
    /// item leaves, the next wait finds the first deadline again, from what the first walk
    /// kept. Items still come out in deadline order.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_poll_keeps_the_first_deadline() {
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_secs(30) + Duration::from_micros(us);
        let keys: Vec<Key> = (0..1000u64).map(|i| q.insert_at(i, at(i))).collect();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        assert!(q.poll_expired(&mut cx).is_pending());
        let walked = |q: &DelayQueue<u64>| lock_std(&q.peeked).walked();
        let walks = walked(&q);
        assert!(
            walks >= 1000,
            "the first wait walks the first bucket: {walks}"
        );
        let units =
            |q: &DelayQueue<u64>, t: Instant| q.clock.as_ref().unwrap().deadline_to_units(t);
        assert_eq!(q.armed, units(&q, at(0)));

        for _ in 0..100 {
            assert!(q.poll_expired(&mut cx).is_pending());
        }
        q.insert_at(1000, start + Duration::from_secs(60));
        q.reset_at(&keys[500], start + Duration::from_secs(40));
        assert!(q.poll_expired(&mut cx).is_pending());
        let early = q.insert_at(2000, start + Duration::from_secs(10));
        assert!(q.poll_expired(&mut cx).is_pending());
        assert_eq!(q.armed, units(&q, start + Duration::from_secs(10)));
        assert_eq!(
            walked(&q),
            walks,
            "a wait with the first deadline known walked the items"
        );

        q.remove(&early);
        assert!(q.poll_expired(&mut cx).is_pending());
        assert_eq!(q.armed, units(&q, at(0)), "found again");
        assert_eq!(walked(&q), walks, "found again from what the walk kept");
        q.reset_at(&keys[0], at(1) + Duration::from_nanos(500));
        assert!(q.poll_expired(&mut cx).is_pending());
        assert_eq!(
            q.armed,
            units(&q, at(1)),
            "the first moved later: found again"
        );

        tokio::time::advance(Duration::from_secs(30) + Duration::from_micros(3)).await;
        let mut out = Vec::new();
        while let Poll::Ready(Some(e)) = q.poll_expired(&mut cx) {
            out.push(e.into_inner());
            if out.len() == 3 {
                break;
            }
        }
        assert_eq!(out, [1, 0, 2]);
        assert!(q.poll_expired(&mut cx).is_ready(), "item 3 is due");
        assert!(q.poll_expired(&mut cx).is_pending());
        assert_eq!(q.armed, units(&q, at(4)));
    }

    /// Idle connections active in turn (heartbeats): each activity moves the item the queue
    /// waits for 30 s later, and the task polls the queue at each wake. Finding the first
    /// deadline again walks the crowded buckets once in a while, not once per move: a walk
    /// per move made a round of n activities cost n² item visits (64 M for 8,000
    /// connections). The queue still waits for the right item throughout.
    #[tokio::test(start_paused = true)]
    async fn connections_active_in_turn_do_not_walk_every_item_each_time() {
        let n = 8_000u64;
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let period = Duration::from_secs(1);
        let keys: Vec<Key> = (0..n)
            .map(|i| {
                let at = start + Duration::from_secs(29) + period.mul_f64(i as f64 / n as f64);
                q.insert_at(i, at)
            })
            .collect();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        assert!(q.poll_expired(&mut cx).is_pending());
        let before = lock_std(&q.peeked).walked();
        for round in 0..2 {
            for (i, key) in keys.iter().enumerate() {
                tokio::time::advance(period / n as u32).await;
                q.reset(key, Duration::from_secs(30));
                assert!(q.poll_expired(&mut cx).is_pending());
                // The first deadline is the next item's (all of them, in the second round).
                let next = keys[(i + 1) % keys.len()];
                let first = q
                    .clock
                    .as_ref()
                    .unwrap()
                    .deadline_to_units(q.deadline(&next));
                assert_eq!(q.armed, first, "round {round}, item {i}: waits for another");
            }
        }
        let walked = lock_std(&q.peeked).walked() - before;
        // A walk keeps the earliest eighth sorted: about 16 walks of n for 2n moves.
        assert!(
            walked <= 20 * n,
            "{walked} item visits for {} moves of the first item",
            2 * n
        );
    }

    /// A loop that peeks and removes, over items crowded in one slot of the wheel (a burst of
    /// 30 s timeouts given within a millisecond), walks each item a few times in all, where a
    /// peek that walked the slot each time walked n²/2 of them; and names them in deadline
    /// order, resets and inserts between peeks included.
    #[test]
    fn peeks_between_removals_walk_a_crowded_slot_a_few_times() {
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let n = 20_000u64;
        let at =
            |i: u64| start + Duration::from_secs(30) + Duration::from_nanos(i * 7919 % 1_000_000);
        let mut keys: HashMap<Key, u64> = (0..n).map(|i| (q.insert_at(i, at(i)), i)).collect();
        let mut last = start;
        let mut peeks = 0;
        while let Some(key) = q.peek() {
            let deadline = q.deadline(&key);
            assert!(deadline >= last, "peek {peeks}: out of deadline order");
            if peeks % 4999 == 0 {
                let min = keys.keys().map(|k| q.deadline(k)).min();
                assert_eq!(Some(deadline), min, "peek {peeks}: not the earliest");
            }
            last = deadline;
            peeks += 1;
            if peeks % 1000 == 0 {
                // A reset of the next item a little later, and an insert earlier than all.
                let (&next, _) = keys.iter().find(|(k, _)| **k != key).unwrap();
                q.reset_at(&next, q.deadline(&next) + Duration::from_nanos(3));
                let early = q.insert_at(n + peeks, deadline);
                keys.insert(early, n + peeks);
                assert_eq!(q.deadline(&q.peek().unwrap()), deadline, "the early insert");
            }
            keys.remove(&key);
            q.remove(&key);
        }
        assert!(keys.is_empty());
        let walked = lock_std(&q.peeked).walked();
        assert!(walked <= 16 * n, "{walked} items walked for {peeks} peeks");
    }

    /// A queue peeked once, then filled and emptied many times over without another peek,
    /// keeps no record of every item it saw (the filings noted since a walk are bounded), and
    /// its next peek is still right. (A cold review found the first version keeping them all:
    /// memory without bound, and inserts that slowed as it grew.)
    #[test]
    fn a_queue_peeked_once_keeps_bounded_room_through_many_inserts() {
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let far = q.insert_at(u64::MAX, start + Duration::from_secs(3600));
        assert_eq!(q.peek(), Some(far));
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut kept = vec![far];
        for i in 0..100_000u64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let at = start + Duration::from_secs(1) + Duration::from_nanos(s % 1_000_000_000);
            let key = q.insert_at(i, at);
            if i % 10_000 == 9_999 {
                kept.push(key);
            } else {
                q.remove(&key);
            }
        }
        let room = lock_std(&q.peeked).room();
        assert!(room <= 4 * 1024, "the cache holds room for {room} entries");
        let earliest = kept.iter().map(|k| q.deadline(k)).min();
        assert_eq!(q.peek().map(|k| q.deadline(&k)), earliest);
    }

    /// What a peek over a crowded slot keeps is a fraction of the slot, not its walk's whole
    /// room, and a `clear` gives it back.
    #[test]
    fn a_big_peek_keeps_room_for_what_it_keeps() {
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let n = 100_000u64;
        for i in 0..n {
            q.insert_at(
                i,
                start + Duration::from_secs(30) + Duration::from_nanos(i * 7919 % 1_000_000),
            );
        }
        assert!(q.peek().is_some());
        let room = lock_std(&q.peeked).room();
        assert!(
            room <= 2 * (n as usize / 8),
            "room for {room} entries after one peek"
        );
        q.clear();
        assert_eq!(
            lock_std(&q.peeked).room(),
            0,
            "clear keeps the cache's room"
        );
    }

    /// Moving items later leaves them where they are in the queue's wheel: no bucket is
    /// created (no heap push) until their old slots come; moving them earlier does relink.
    #[test]
    fn a_later_reset_costs_no_relink() {
        let mut q = DelayQueue::new();
        let start = Instant::now();
        let keys: Vec<Key> = (0..1000u64)
            .map(|i| q.insert_at(i, start + Duration::from_millis(100 + i)))
            .collect();
        let before = q.wheel.stats();
        for (i, key) in keys.iter().enumerate() {
            q.reset_at(key, start + Duration::from_secs(3600 + i as u64));
        }
        assert_eq!(
            q.wheel.stats(),
            before,
            "a later reset touched the wheel's buckets"
        );
        assert_eq!(q.peek(), Some(keys[0]));
        assert_eq!(q.deadline(&keys[0]), start + Duration::from_secs(3600));

        q.reset_at(&keys[999], start + Duration::from_millis(50));
        assert!(
            q.wheel.stats().heap_pushes > before.heap_pushes,
            "an earlier one relinks"
        );
        assert_eq!(q.peek(), Some(keys[999]));
    }
}
