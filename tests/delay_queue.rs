//! Integration tests for `DelayQueue` in paused time: the intents of tokio-util's delay-queue
//! tests (order, remove, reset earlier and later, refill after empty, wake on an earlier
//! insert, peek), what is better here (exact and far deadlines, wakes, no allocation per
//! expiry, one timer registration), and a proptest against a `BTreeMap` model.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use proptest::prelude::*;
use tokio::time::{self, Instant};
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::delay_queue::{DelayQueue, Expired, Key};
use tokio_timing_wheel::Timer;

mod common;
use common::alloc::allocations;
use common::{ms, panic_message, paused_runtime, settle, step};

#[global_allocator]
static ALLOC: common::alloc::Counting = common::alloc::Counting;

const YEAR: Duration = Duration::from_secs(365 * 86_400);

macro_rules! poll {
    ($queue:ident) => {
        $queue.enter(|cx, mut queue| queue.poll_expired(cx))
    };
}

macro_rules! assert_ready_some {
    ($e:expr) => {{
        match assert_ready!($e) {
            Some(v) => v,
            None => panic!("the queue is empty"),
        }
    }};
}

type Queue<T> = task::Spawn<DelayQueue<T>>;

fn queue<T>() -> Queue<T> {
    task::spawn(DelayQueue::new())
}

/// Takes out the one item due now (panics if none is).
fn drain_one<T>(q: &mut DelayQueue<T>) -> T {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match q.poll_expired(&mut cx) {
        Poll::Ready(Some(e)) => e.into_inner(),
        _ => panic!("nothing due"),
    }
}

/// Takes out every item due now (never waiting), in the order they come.
fn drain<T>(queue: &mut DelayQueue<T>) -> Vec<Expired<T>> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut out = Vec::new();
    while let Poll::Ready(Some(item)) = queue.poll_expired(&mut cx) {
        out.push(item);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn items_due_now_or_in_the_past_come_out_at_once() {
    let mut q = queue();
    let now = Instant::now();
    q.insert_at("now", now);
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "now");
    assert!(assert_ready!(poll!(q)).is_none());

    step(ms(10)).await;
    for name in ["1", "2", "3"] {
        q.insert_at(name, now); // 10 ms in the past
    }
    let mut got: Vec<_> = (0..3)
        .map(|_| assert_ready_some!(poll!(q)).into_inner())
        .collect();
    assert!(assert_ready!(poll!(q)).is_none());
    got.sort_unstable();
    assert_eq!(got, ["1", "2", "3"]);
}

#[tokio::test(start_paused = true)]
async fn a_short_delay_wakes_the_task_at_its_deadline() {
    let mut q = queue();
    let now = Instant::now();
    q.insert_at("foo", now + ms(5));
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert!(!q.is_woken());
    assert_pending!(poll!(q));
    step(ms(4)).await;
    assert!(q.is_woken());
    let item = assert_ready_some!(poll!(q));
    assert_eq!((*item.get_ref(), item.deadline()), ("foo", now + ms(5)));
    assert!(assert_ready!(poll!(q)).is_none());
}

/// Each item comes out exactly at its deadline (stepping 1 ms at a time); the queue may also
/// be woken where a far item moves down the wheel, but then has nothing to give.
#[tokio::test(start_paused = true)]
async fn items_come_out_in_order_each_at_its_deadline() {
    let long = 262_144 + 9 * 4096;
    let delays = [1000, 2, 234, long, 60, 10];
    let mut q = queue();
    let start = Instant::now();
    for d in delays {
        q.insert_at(d, start + ms(d));
    }
    assert_pending!(poll!(q));
    let mut spurious = 0;
    for elapsed in 1..=1200 {
        step(ms(1)).await;
        if delays.contains(&elapsed) {
            assert!(q.is_woken(), "not woken at {elapsed} ms");
            assert_eq!(assert_ready_some!(poll!(q)).into_inner(), elapsed);
            assert_pending!(poll!(q));
        } else if q.is_woken() {
            spurious += 1;
            assert_pending!(poll!(q), "an item before its deadline at {elapsed} ms");
        }
    }
    assert!(spurious <= 4, "{spurious} wakes with nothing due");
    assert_eq!(q.len(), 1);
    assert_eq!(q.peek().map(|k| q.deadline(&k)), Some(start + ms(long)));
}

#[tokio::test(start_paused = true)]
async fn removed_items_never_come_out() {
    let mut q = queue();
    let key = q.insert_at("foo", Instant::now() + ms(5));
    assert_pending!(poll!(q));
    assert_eq!(q.remove(&key).into_inner(), "foo");
    assert!(q.is_woken(), "removing the last item wakes the task");
    step(ms(10)).await;
    assert!(assert_ready!(poll!(q)).is_none());

    // An item already due but not yet taken out can be removed too.
    let now = Instant::now();
    step(ms(10)).await;
    let key = q.insert_at("bar", now);
    assert_eq!(q.remove(&key).into_inner(), "bar");
    assert!(q.is_empty());

    // Of two items due in the same slot, take one out, remove the other.
    let now = Instant::now();
    let k1 = q.insert_at("one", now + ms(64));
    let k2 = q.insert_at("two", now + ms(64));
    step(ms(80)).await;
    let first = assert_ready_some!(poll!(q)).key();
    let other = if first == k1 { k2 } else { k1 };
    q.remove(&other);
    assert!(assert_ready!(poll!(q)).is_none());
}

#[tokio::test(start_paused = true)]
async fn reset_later_delays_the_item_and_is_never_early() {
    let mut q = queue();
    let now = Instant::now();
    let key = q.insert_at("foo", now + ms(5));
    assert_pending!(poll!(q));
    step(ms(1)).await;
    q.reset_at(&key, now + ms(10));
    assert_eq!(q.deadline(&key), now + ms(10));
    assert_pending!(poll!(q));
    step(ms(7)).await; // 8 ms: past the old deadline, which may wake the task for nothing
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert!(!q.is_woken());
    step(ms(1)).await; // 10 ms
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "foo");
    assert!(assert_ready!(poll!(q)).is_none());
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_wakes_the_task_in_time() {
    // Far later, then earlier than the first deadline (tokio#849).
    let mut q = queue();
    let now = Instant::now();
    step(ms(1)).await;
    let key = q.insert_at("foo", now + ms(200));
    assert_pending!(poll!(q));
    step(ms(3)).await;
    q.reset_at(&key, now + ms(50));
    assert!(q.is_woken(), "an earlier reset wakes the waiting task");
    assert_pending!(poll!(q));
    step(ms(20)).await;
    q.reset_at(&key, now + ms(40));
    assert_pending!(poll!(q));
    step(ms(15)).await; // 39 ms
    assert!(!q.is_woken());
    step(ms(1)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).deadline(), now + ms(40));
}

#[tokio::test(start_paused = true)]
async fn reset_into_the_past_wakes_and_comes_out_at_once() {
    let mut q = queue();
    let key = q.insert("foo", ms(10_000));
    assert_pending!(poll!(q));
    assert!(!q.is_woken());
    step(ms(200)).await;
    q.reset_at(&key, Instant::now() - ms(100));
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "foo");
    assert!(assert_ready!(poll!(q)).is_none());
}

#[tokio::test(start_paused = true)]
async fn an_item_inserted_expired_can_be_reset_into_the_future() {
    step(ms(1000)).await;
    let mut q = queue();
    let now = Instant::now();
    let key = q.insert_at("foo", now - ms(100));
    q.reset_at(&key, now + ms(100));
    q.reset_at(&key, now + ms(50));
    assert_eq!(q.len(), 1);
    assert_pending!(poll!(q));
    step(ms(49)).await;
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "foo");
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn resets_of_several_items_keep_deadline_order() {
    let mut q = queue();
    let now = Instant::now();
    let one = q.insert_at("one", now + ms(200));
    let two = q.insert_at("two", now + ms(250));
    assert_pending!(poll!(q));
    q.reset_at(&one, now + ms(300));
    q.reset_at(&two, now + ms(350));
    q.reset_at(&one, now + ms(400));
    step(ms(310)).await;
    assert_pending!(poll!(q));
    step(ms(40)).await;
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "two");
    assert_pending!(poll!(q));
    step(ms(50)).await;
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "one");
    assert!(assert_ready!(poll!(q)).is_none());

    // Either item reset earlier than the other comes out first; the first one moved later
    // lets the second come out at its own deadline.
    for (moved, earlier, expect) in [(0, true, "one"), (1, true, "two"), (0, false, "two")] {
        let now = Instant::now();
        let keys = [
            q.insert_at("one", now + ms(200)),
            q.insert_at("two", now + ms(250)),
        ];
        assert_pending!(poll!(q));
        q.reset_at(&keys[moved], now + ms(if earlier { 100 } else { 300 }));
        step(ms(if earlier { 100 } else { 250 })).await;
        assert!(q.is_woken());
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), expect);
        q.clear();
    }
}

#[tokio::test(start_paused = true)]
async fn inserting_an_earlier_item_wakes_the_waiting_task() {
    let mut q = queue();
    let now = Instant::now();
    q.insert_at("one", now + ms(200));
    assert_pending!(poll!(q));
    q.insert_at("later", now + ms(300));
    assert!(!q.is_woken(), "a later item needs no wake");
    q.insert_at("two", now + ms(100));
    assert!(q.is_woken(), "an earlier item wakes the task at once");
    assert_pending!(poll!(q));
    // (The task may be woken where the item moves down the wheel, at 64 ms, for nothing.)
    step(ms(99)).await;
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "two");

    // An item in the past, inserted while the task waits, comes out at once.
    assert_pending!(poll!(q));
    q.insert_at("past", now + ms(40));
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "past");
}

#[tokio::test(start_paused = true)]
async fn the_queue_refills_after_it_empties() {
    let mut q = queue();
    let now = Instant::now();
    for name in ["1", "2", "3"] {
        q.insert_at(name, now + ms(100));
    }
    assert_pending!(poll!(q));
    step(ms(100)).await;
    assert!(q.is_woken());
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(assert_ready_some!(poll!(q)).into_inner());
        q.insert_at("later", now + ms(500)); // inserts between items taken out
    }
    got.sort_unstable();
    assert_eq!(got, ["1", "2", "3"]);
    assert_eq!(q.len(), 3);
    assert_pending!(poll!(q));

    // Emptied, then filled again: the stream goes on.
    q.clear();
    assert!(q.is_woken(), "clear wakes the task");
    assert!(assert_ready!(poll!(q)).is_none());
    q.insert("again", ms(5));
    assert!(q.is_woken(), "an insert into an empty queue wakes its task");
    assert_pending!(poll!(q));
    step(ms(5)).await;
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "again");
}

#[tokio::test]
async fn polling_an_emptied_queue_gives_none() {
    // Real time, as in tokio-util's test.
    let mut q = queue();
    let key = q.insert(0, Duration::from_secs(10));
    assert_pending!(poll!(q));
    q.remove(&key);
    assert!(assert_ready!(poll!(q)).is_none());
}

#[tokio::test(start_paused = true)]
async fn peek_names_the_item_that_comes_out_next() {
    let mut q = queue();
    let now = Instant::now();
    let foo = q.insert_at("foo", now + ms(5));
    let bar = q.insert_at("bar", now);
    let baz = q.insert_at("baz", now + ms(10));
    assert_eq!(q.peek(), Some(bar));
    step(ms(6)).await;
    assert_eq!(q.peek(), Some(bar));
    assert_eq!(assert_ready_some!(poll!(q)).key(), bar);
    assert_eq!(q.peek(), Some(foo));
    assert_eq!(assert_ready_some!(poll!(q)).key(), foo);
    assert_eq!(q.peek(), Some(baz));
    assert_pending!(poll!(q));
    step(ms(5)).await;
    assert_eq!(q.peek(), Some(baz));
    assert_eq!(assert_ready_some!(poll!(q)).key(), baz);
    assert_eq!(q.peek(), None);

    // Items sharing a slot of a higher level, and one moved later (it stays in its early
    // slot until that comes): peek still names the earliest.
    let now = Instant::now();
    let early = q.insert_at("early", now + ms(100));
    let late = q.insert_at("late", now + ms(120));
    assert_eq!(q.peek(), Some(early));
    q.reset_at(&early, now + ms(130));
    assert_eq!(q.peek(), Some(late));
    step(ms(125)).await;
    assert_eq!(assert_ready_some!(poll!(q)).key(), late);
    assert_eq!(q.peek(), Some(early));
}

/// Items sharing a deadline come out in any order: `peek` names one of them, and the next item
/// out has its deadline (which of them, `peek` does not predict).
#[tokio::test(start_paused = true)]
async fn peek_among_equal_deadlines_gives_the_deadline_not_the_order() {
    let mut q = queue();
    let now = Instant::now();
    q.insert_at("a", now + ms(10));
    let b = q.insert_at("b", now + ms(5));
    q.reset_at(&b, now + ms(10));
    step(ms(10)).await;
    let mut out = Vec::new();
    while let Some(key) = q.peek() {
        let peeked = q.deadline(&key);
        let item = assert_ready_some!(poll!(q));
        assert_eq!(item.deadline(), peeked);
        out.push(item.into_inner());
    }
    out.sort_unstable();
    assert_eq!((out, q.len()), (vec!["a", "b"], 0));
}

#[tokio::test(start_paused = true)]
async fn deadlines_are_exact_and_far_ones_saturate_instead_of_panicking() {
    let mut q = queue();
    let now = Instant::now();
    let odd = now + Duration::from_nanos(1_234_567);
    let k_odd = q.insert_at("odd", odd);
    let k_3y = q.insert("three years", 3 * YEAR); // tokio-util panics past 2^36 ms
    let far = now + 1000 * YEAR; // beyond the wheel's 584 years: waits forever
    let k_far = q.insert_at("a millennium", far);
    let k_max = q.insert("Duration::MAX", Duration::MAX); // about 30 years
    assert_eq!(q.deadline(&k_odd), odd, "not rounded to a millisecond");
    assert_eq!(q.deadline(&k_3y), now + 3 * YEAR);
    assert_eq!(q.deadline(&k_far), far);
    assert!(q.deadline(&k_max) >= now + 29 * YEAR);

    step(ms(2)).await;
    let item = assert_ready_some!(poll!(q));
    assert_eq!((item.key(), item.deadline()), (k_odd, odd));
    step(2 * YEAR).await;
    assert_pending!(poll!(q));
    step(YEAR).await;
    let item = assert_ready_some!(poll!(q));
    assert_eq!((item.key(), item.deadline()), (k_3y, now + 3 * YEAR));
    step(30 * YEAR).await;
    assert_eq!(assert_ready_some!(poll!(q)).key(), k_max);
    assert_pending!(poll!(q));
    assert_eq!(q.peek(), Some(k_far));

    // A queue that has lived past 2^36 ms still takes new items (tokio-util's regression).
    let mut q2 = DelayQueue::new();
    for _ in 0..2 {
        time::advance(ms(1 << 35)).await;
        q2.insert(0, ms(0));
        q2.next().await;
    }
    q2.insert(1, ms(1));
    assert_eq!(q2.next().await.unwrap().into_inner(), 1);
}

/// Paused time can run past the queue's clock horizon (about 438 years after its first insert):
/// the items beyond it never come out (nor would new ones), and the queue waits instead of
/// spinning.
#[tokio::test(start_paused = true)]
async fn a_clock_past_the_horizon_neither_spins_nor_loses_items() {
    let mut q = task::spawn(DelayQueue::new());
    let now = Instant::now();
    let never = q.insert_at("never", now + 1000 * YEAR);
    q.insert_at("soon", now + ms(5));
    time::advance(999 * YEAR).await;
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "soon");
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert!(!q.is_woken(), "waits, for nothing will ever be due");
    assert_pending!(poll!(q));
    assert_eq!(q.peek(), Some(never));
    assert_eq!(q.remove(&never).deadline(), now + 1000 * YEAR);
    assert!(q.is_woken() && assert_ready!(poll!(q)).is_none());
}

#[tokio::test(start_paused = true)]
async fn keys_are_never_confused_after_their_slot_is_reused() {
    let mut q = DelayQueue::new();
    let old = q.insert("old", ms(10));
    q.remove(&old);
    let new = q.insert("new", ms(10));
    assert_ne!(old, new);
    assert!(q.try_remove(&old).is_none());
    type Attempt = fn(&mut DelayQueue<&'static str>, Key);
    let attempts: [Attempt; 3] = [
        |q, key| {
            q.remove(&key);
        },
        |q, key| q.reset(&key, ms(1)),
        |q, key| {
            let _ = q.deadline(&key);
        },
    ];
    for attempt in attempts {
        let err = catch_unwind(AssertUnwindSafe(|| attempt(&mut q, old))).unwrap_err();
        assert!(panic_message(&*err).contains("names no item"));
    }
    assert_eq!(q.len(), 1);

    // An expired item's key is stale too.
    let item = q.next().await.unwrap();
    assert_eq!(item.key(), new);
    let newer = q.insert("newer", ms(10));
    assert!(q.try_remove(&new).is_none());
    assert_eq!(q.remove(&newer).into_inner(), "newer");
}

#[tokio::test(start_paused = true)]
async fn a_queue_is_a_stream_in_deadline_order() {
    let start = Instant::now();
    let mut q = DelayQueue::with_capacity(16);
    for (name, at) in [("c", 30), ("a", 10), ("d", 40), ("b", 20)] {
        q.insert_at(name, start + ms(at));
    }
    let got: Vec<_> = q
        .by_ref()
        .take(4)
        .map(|e| (e.into_inner(), Instant::now() - start))
        .collect()
        .await;
    assert_eq!(
        got,
        [("a", ms(10)), ("b", ms(20)), ("c", ms(30)), ("d", ms(40))]
    );
    assert!(q.next().await.is_none(), "an empty queue ends the stream");
}

#[tokio::test(start_paused = true)]
async fn one_timer_registration_for_the_whole_queue() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let mut q = timer.delay_queue_with_capacity(1000);
    let start = Instant::now();
    for i in 0..1000u64 {
        q.insert_at(i, start + ms(1 + i % 97));
    }
    let mut last = start;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        let item = q.next().await.unwrap();
        // In deadline order, never early, and at the deadline (paused time on 1 ms steps).
        assert!(item.deadline() >= last, "out of deadline order");
        assert_eq!(
            Instant::now(),
            item.deadline(),
            "handed out at its deadline"
        );
        assert!(seen.insert(*item.get_ref()), "handed out twice");
        last = item.deadline();
        assert!(timer.pending() <= 1);
    }
    assert!(q.next().await.is_none());
    assert_eq!(timer.pending(), 0, "an empty queue holds no registration");
}

#[tokio::test(start_paused = true)]
async fn moving_the_head_later_touches_neither_wheel_nor_timer() {
    let timer = Timer::builder().build().unwrap();
    let mut q = task::spawn(timer.delay_queue());
    let now = Instant::now();
    let head = q.insert_at("head", now + ms(10));
    q.insert_at("next", now + ms(50));
    assert_pending!(poll!(q));
    let before = timer.metrics();
    q.reset_at(&head, now + ms(100));
    let next = q.peek().unwrap();
    assert_eq!(q.remove(&next).into_inner(), "next");
    assert_eq!(
        timer.metrics(),
        before,
        "the registration stays where it is"
    );
    assert!(!q.is_woken());
    // The next poll moves the registration to the new head: nothing wakes the task at the
    // old one, 10 ms; the item comes at 100 ms.
    assert_pending!(poll!(q));
    step(ms(10)).await;
    assert!(!q.is_woken(), "woken at the old head with nothing due");
    step(ms(89)).await;
    assert_pending!(poll!(q));
    step(ms(1)).await;
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "head");
}

/// Taking expired items out allocates nothing (tokio-util boxes a new `Sleep` at each
/// pass). Checked in release builds: a poll that re-arms the queue for a head already due
/// runs the timer's firing pass inline, and in debug builds that pass checks the wheel's
/// invariants, which allocates.
#[tokio::test(start_paused = true)]
async fn expiring_items_allocates_nothing() {
    // Round 0 warms the queue up, round 1 the timer's wheel (a level it never needed while
    // every head was less than a tick away); round 2 is measured.
    let mut q = task::spawn(DelayQueue::with_capacity(10_000));
    for round in 0..3 {
        let start = Instant::now();
        for i in 0..10_000u64 {
            q.insert_at(i, start + Duration::from_micros(1 + i * 37 % 20_000));
        }
        let mut polls = 0;
        let mut taken = 0;
        while taken < 10_000 {
            let before = allocations();
            while let Poll::Ready(Some(_)) = poll!(q) {
                taken += 1;
            }
            polls += allocations() - before;
            step(ms(1)).await;
        }
        if round == 2 && !cfg!(debug_assertions) {
            assert_eq!(polls, 0, "allocations while taking 10k items out");
        }
    }

    let mut q = DelayQueue::with_capacity(1000);
    for round in 0..3 {
        let start = Instant::now();
        for i in 0..1000u64 {
            q.insert_at(i, start + ms(1 + i % 50));
        }
        let before = allocations();
        for _ in 0..1000 {
            q.next().await.unwrap();
        }
        if round == 2 && !cfg!(debug_assertions) {
            assert_eq!(allocations() - before, 0, "allocations in 1000 expiries");
        }
    }
}

/// After its timer shuts down, a queue goes on on Tokio's timer: its items come out on time,
/// without a spin. The same for a queue that held its slot (`try_delay_queue`), which gives
/// it back; and `try_delay_queue` on the shut-down timer answers the error.
#[tokio::test(start_paused = true)]
async fn after_a_shutdown_items_still_come_out_on_time_without_spinning() {
    use tokio_timing_wheel::TimerError;

    for reserved in [false, true] {
        let (timer, queue) = if reserved {
            let timer = Timer::builder().max_pending(1).build().unwrap();
            let queue = timer.try_delay_queue().unwrap();
            (timer, queue)
        } else {
            let timer = Timer::builder().build().unwrap();
            let queue = timer.delay_queue();
            (timer, queue)
        };
        let mut q = task::spawn(queue);
        let now = Instant::now();
        q.insert_at("a", now + ms(10));
        q.insert_at("b", now + ms(20));
        assert_pending!(poll!(q));
        timer.shutdown();
        settle().await;
        assert_eq!(
            timer.pending(),
            0,
            "reserved {reserved}: the slot is given back"
        );
        assert_pending!(
            poll!(q),
            "reserved {reserved}: the shutdown is not an expiry"
        );
        settle().await;
        assert!(
            !q.is_woken(),
            "reserved {reserved}: nothing wakes it before the next item: no spin"
        );
        step(ms(10)).await;
        assert!(q.is_woken(), "reserved {reserved}");
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "a");
        assert_pending!(poll!(q));
        step(ms(10)).await;
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "b");
        assert!(format!("{:?}", *q).contains("len: 0"));
        assert_eq!(
            timer.try_delay_queue::<u8>().unwrap_err(),
            TimerError::Shutdown
        );
    }
}

#[test]
fn everything_but_a_waiting_poll_works_outside_a_runtime() {
    let mut q = DelayQueue::new();
    let a = q.insert("a", ms(10));
    let b = q.insert_at("b", Instant::now() + ms(5));
    q.reset(&a, ms(1));
    assert_eq!(q.peek(), Some(a));
    assert_eq!(q.len(), 2);
    assert_eq!(q.remove(&b).into_inner(), "b");
    q.shrink_to_fit();

    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    std::thread::sleep(ms(2));
    assert_eq!(drain(&mut q).len(), 1, "a due item needs no timer");
    assert!(matches!(q.poll_expired(&mut cx), Poll::Ready(None)));

    q.insert("c", Duration::from_secs(60));
    let err = catch_unwind(AssertUnwindSafe(|| q.poll_expired(&mut cx))).unwrap_err();
    assert!(
        panic_message(&*err).contains("Tokio 1.x runtime"),
        "{}",
        panic_message(&*err)
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_timer_panics_when_the_queue_has_to_wait() {
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let _holds_the_slot = timer.try_sleep(Duration::from_secs(60)).unwrap();
    let mut q = task::spawn(timer.delay_queue());
    q.insert("x", ms(10));
    let err = catch_unwind(AssertUnwindSafe(|| poll!(q))).unwrap_err();
    assert!(panic_message(&*err).contains("timer is full"));
}

#[tokio::test(start_paused = true)]
async fn send_sync_unpin_and_bounded_debug() {
    fn assert_traits<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    assert_traits::<DelayQueue<u64>>();
    assert_traits::<Expired<String>>();
    fn assert_key<T: Copy + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync>() {}
    assert_key::<Key>();

    let mut q = task::spawn(DelayQueue::new());
    for i in 0..10_000u64 {
        q.insert(format!("item {i} with a long description"), ms(1 + i));
    }
    assert_pending!(poll!(q));
    let printed = format!("{:?}", *q);
    assert!(printed.len() < 200, "{} bytes: {printed}", printed.len());
    assert!(printed.contains("len: 10000"), "{printed}");
}

// The model: a `BTreeMap` of pending items by `(deadline, id)`.

#[derive(Debug, Clone)]
enum Op {
    /// Insert at now + this many microseconds (negative: in the past), or far away.
    Insert(i64),
    /// Insert with `insert(value, Duration)`.
    InsertAfter(u64),
    Remove(usize),
    Reset(usize, i64),
    /// Advance time by this many microseconds, then take out everything due.
    Advance(u64),
    /// Advance time to exactly an item's deadline (or one nanosecond before it), then take
    /// out everything due.
    AdvanceTo(usize, bool),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    let offset = prop_oneof![
        6 => -2_000i64..300_000,
        2 => 0i64..5_000,
        1 => Just(0i64),
        1 => Just(i64::MAX), // beyond the horizon: never comes out
        1 => 0i64..(3 * 365 * 86_400_000_000), // up to three years
    ];
    prop_oneof![
        6 => offset.clone().prop_map(Op::Insert),
        1 => (0u64..200_000).prop_map(Op::InsertAfter),
        2 => any::<usize>().prop_map(Op::Remove),
        3 => (any::<usize>(), offset).prop_map(|(i, o)| Op::Reset(i, o)),
        4 => prop_oneof![0u64..1_000, 0u64..100_000, 0u64..(400 * 86_400_000_000)]
            .prop_map(Op::Advance),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(i, exact)| Op::AdvanceTo(i, exact)),
        1 => Just(Op::Clear),
    ]
}

/// The model of one item: its deadline, and the queue time when it was (re)filed: an item
/// whose deadline the queue had already gone past comes out at once, ahead of the rest.
#[derive(Debug, Clone, Copy)]
struct Model {
    deadline: Instant,
    filed_at: Instant,
}

impl Model {
    fn order(&self) -> Instant {
        self.deadline.max(self.filed_at)
    }
}

/// `now` plus `micros` (minus, if negative); `i64::MAX` means `far`, beyond the wheel's
/// horizon (about 584 years), where every deadline is the same: never.
fn at(now: Instant, micros: i64, far: Instant) -> Instant {
    match micros {
        i64::MAX => far,
        0.. => now + Duration::from_micros(micros as u64),
        _ => now - Duration::from_micros(micros.unsigned_abs()),
    }
}

fn run_model(ops: Vec<Op>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        time::advance(Duration::from_secs(1)).await; // room for deadlines in the past
        let mut q = DelayQueue::new();
        let mut by_deadline: BTreeMap<(Instant, u64), Key> = BTreeMap::new();
        let mut items: HashMap<u64, Model> = HashMap::new();
        let mut keys: Vec<(Key, u64)> = Vec::new();
        // The latest time the queue read the clock at: where its wheel stands.
        let mut queue_time = Instant::now();
        let far = queue_time + 1000 * YEAR;
        for (id, op) in ops.into_iter().enumerate() {
            let id = id as u64;
            let now = Instant::now();
            match op {
                Op::Insert(offset) => {
                    let deadline = at(now, offset, far);
                    let key = q.insert_at(id, deadline);
                    by_deadline.insert((deadline, id), key);
                    items.insert(
                        id,
                        Model {
                            deadline,
                            filed_at: queue_time,
                        },
                    );
                    keys.push((key, id));
                }
                Op::InsertAfter(micros) => {
                    if q.is_empty() {
                        queue_time = now; // an insert into an empty queue starts it at now
                    }
                    let deadline = now + Duration::from_micros(micros);
                    let key = q.insert(id, Duration::from_micros(micros));
                    assert_eq!(q.deadline(&key), deadline);
                    by_deadline.insert((deadline, id), key);
                    items.insert(
                        id,
                        Model {
                            deadline,
                            filed_at: queue_time,
                        },
                    );
                    keys.push((key, id));
                }
                Op::Remove(i) if !keys.is_empty() => {
                    let (key, kid) = keys[i % keys.len()];
                    let removed = q.try_remove(&key);
                    match items.remove(&kid) {
                        Some(m) => {
                            let e = removed.expect("a pending item is removed");
                            assert_eq!(
                                (e.key(), e.deadline(), *e.get_ref()),
                                (key, m.deadline, kid)
                            );
                            by_deadline.remove(&(m.deadline, kid));
                        }
                        None => assert!(removed.is_none(), "a stale key removed something"),
                    }
                }
                Op::Reset(i, offset) if !keys.is_empty() => {
                    let (key, kid) = keys[i % keys.len()];
                    if let Some(m) = items.get_mut(&kid) {
                        let deadline = at(now, offset, far);
                        q.reset_at(&key, deadline);
                        by_deadline.remove(&(m.deadline, kid));
                        by_deadline.insert((deadline, kid), key);
                        *m = Model {
                            deadline,
                            filed_at: queue_time,
                        };
                    }
                }
                Op::Advance(_) | Op::AdvanceTo(..) => {
                    let by = match op {
                        Op::Advance(micros) => Duration::from_micros(micros),
                        Op::AdvanceTo(i, exact) => {
                            let target = by_deadline
                                .keys()
                                .nth(i % by_deadline.len().max(1))
                                .map_or(now, |&(d, _)| if d == far { now } else { d });
                            let target = if exact {
                                target
                            } else {
                                target - Duration::from_nanos(1)
                            };
                            target.saturating_duration_since(now)
                        }
                        _ => unreachable!(),
                    };
                    time::advance(by).await;
                    let now = Instant::now();
                    let got = drain(&mut q);
                    queue_time = now;
                    let mut last = None;
                    for e in &got {
                        let m = items.remove(e.get_ref()).expect("an item comes out once");
                        assert!(e.deadline() <= now, "early");
                        assert_eq!(e.deadline(), m.deadline, "deadline kept exactly");
                        assert!(last <= Some(m.order()), "out of order: {got:?}");
                        last = Some(m.order());
                        by_deadline.remove(&(m.deadline, *e.get_ref()));
                    }
                    assert!(
                        by_deadline.range(..=(now, u64::MAX)).next().is_none(),
                        "a due item was not handed out"
                    );
                }
                Op::Clear => {
                    q.clear();
                    by_deadline.clear();
                    items.clear();
                }
                _ => {}
            }
            assert_eq!(q.len(), items.len());
            match q.peek() {
                None => assert!(items.is_empty()),
                Some(key) => {
                    let first = items.values().map(Model::order).min();
                    let kid = keys.iter().find(|(k, _)| *k == key).expect("a known key").1;
                    assert_eq!(
                        Some(items[&kid].order()),
                        first,
                        "peek is not the next item"
                    );
                    assert_eq!(q.deadline(&key), items[&kid].deadline);
                }
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]

    #[test]
    fn delay_queue_matches_a_btreemap_model(ops in proptest::collection::vec(op(), 1..200)) {
        run_model(ops);
    }
}

#[tokio::test(start_paused = true)]
async fn a_later_reset_wakes_nobody_until_the_new_deadline() {
    let start = Instant::now();
    let mut q = queue();
    let key = q.insert_at("foo", start + ms(5));
    assert_pending!(poll!(q));
    time::sleep(ms(1)).await;
    q.reset_at(&key, start + ms(10));
    assert!(!q.is_woken(), "a later reset needs no wake");
    assert_pending!(poll!(q));
    time::sleep_until(start + ms(9)).await;
    assert!(!q.is_woken(), "nothing is due at the old deadline");
    time::sleep_until(start + ms(10)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "foo");
}

/// The queue's alarm moves on its next poll, not at the reset or removal: a queue left
/// unpolled wakes its task once at the old deadline (tokio-util's moves its timer at once and
/// wakes nobody then); that poll finds nothing due and waits for the new head, quietly.
#[tokio::test(start_paused = true)]
async fn a_later_reset_or_removal_not_polled_since_wakes_once_at_the_old_deadline() {
    for remove in [false, true] {
        let start = Instant::now();
        let mut q = queue();
        let key = q.insert_at("a", start + ms(10));
        q.insert_at("b", start + ms(20));
        assert_pending!(poll!(q));
        if remove {
            q.remove(&key);
        } else {
            q.reset_at(&key, start + ms(30));
        }
        assert!(!q.is_woken(), "nothing woken at once");
        time::sleep_until(start + ms(10)).await;
        assert!(q.is_woken(), "the alarm still goes off at the old deadline");
        assert_pending!(poll!(q));
        time::sleep_until(start + ms(19)).await;
        assert!(!q.is_woken(), "woken again before anything was due");
        time::sleep_until(start + ms(20)).await;
        assert!(q.is_woken());
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "b");
    }
}

#[tokio::test(start_paused = true)]
async fn a_far_head_wakes_nobody_at_its_bucket_boundary() {
    // 100 ms lies beyond level 0 (64 ticks of about 1 ms): the wheel cascades it on the way,
    // but the task is woken only when the item is due.
    for far in [100, 234, 1000, 300_000] {
        let start = Instant::now();
        let mut q = queue();
        q.insert_at(far, start + ms(far));
        assert_pending!(poll!(q));
        time::sleep_until(start + ms(far - 1)).await;
        assert!(!q.is_woken(), "{far} ms: woken before anything was due");
        assert_pending!(poll!(q));
        time::sleep_until(start + ms(far)).await;
        assert!(q.is_woken(), "{far} ms");
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), far);
    }
}

#[tokio::test(start_paused = true)]
async fn a_lazily_refiled_item_wakes_nobody_at_its_old_slot() {
    let start = Instant::now();
    let mut q = queue();
    let key = q.insert_at("x", start + ms(100));
    assert_pending!(poll!(q));
    time::sleep_until(start + ms(80)).await;
    q.reset_at(&key, start + ms(120));
    assert_pending!(poll!(q));
    time::sleep_until(start + ms(119)).await;
    assert!(!q.is_woken());
    time::sleep_until(start + ms(120)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "x");
}

#[tokio::test(start_paused = true)]
async fn compact_gives_memory_back_and_keeps_every_key() {
    let start = Instant::now();
    let mut q = DelayQueue::new();
    let keys: Vec<Key> = (0..100u32)
        .map(|i| q.insert_at(i, start + ms(10 + u64::from(i))))
        .collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 10 != 0 {
            q.remove(k);
        }
    }
    assert_eq!(q.len(), 10);
    q.compact();
    assert_eq!(q.capacity(), 10, "storage exactly as large as the items");
    // Removed keys still name nothing; kept ones still name their item.
    assert!(q.try_remove(&keys[1]).is_none());
    assert_eq!(q.deadline(&keys[20]), start + ms(30));
    q.reset_at(&keys[20], start + ms(5));
    assert_eq!(q.remove(&keys[10]).into_inner(), 10);
    // Items come out in deadline order with their original keys, after a second compaction
    // and new inserts.
    let new = q.insert_at(1000, start + ms(1));
    q.compact();
    time::sleep(ms(200)).await;
    let out: Vec<(Key, u32)> = drain(&mut q)
        .into_iter()
        .map(|e| (e.key(), e.into_inner()))
        .collect();
    let mut want = vec![(new, 1000), (keys[20], 20), (keys[0], 0)];
    want.extend((3..10).map(|i| (keys[i * 10], i as u32 * 10)));
    assert_eq!(out, want);
    assert!(
        q.try_remove(&keys[20]).is_none(),
        "expired keys name nothing"
    );
    q.compact();
    assert_eq!(q.capacity(), 0);
}

/// `with_capacity(n)` holds room for exactly `n` items, as tokio-util's (its slab is made
/// with that capacity), also for the small sizes a growth policy would round up; `reserve`
/// makes room for at least what it is asked.
#[test]
fn with_capacity_holds_exactly_what_it_was_asked_for() {
    for n in [0, 1, 2, 3, 10, 1000] {
        let q = DelayQueue::<u32>::with_capacity(n);
        assert_eq!(q.capacity(), n, "with_capacity({n})");
    }
    let mut q = DelayQueue::<u32>::with_capacity(2);
    q.reserve(7);
    assert!(q.capacity() >= 7);
}

#[tokio::test(start_paused = true)]
async fn every_past_deadline_counts_as_due_and_comes_out_in_deadline_order() {
    let mut q = queue();
    let start = Instant::now();
    let keys: Vec<Key> = (0..4).map(|i| q.insert_at(i, start + ms(100))).collect();
    time::sleep(ms(10)).await;
    // The queue reads the clock here (10 ms), then time moves on without it (20 ms).
    assert_pending!(poll!(q));
    time::sleep(ms(10)).await;
    let now = Instant::now();
    // Two of these are before the queue's last clock reading, two after: all are past.
    for (key, ago) in keys.iter().zip([3, 12, 1, 15]) {
        q.reset_at(key, now - ms(ago));
    }
    let out: Vec<u32> = drain(&mut q).into_iter().map(Expired::into_inner).collect();
    assert_eq!(out, [3, 1, 0, 2], "deadline order: 15, 12, 3 and 1 ms ago");

    // Inserted into the past, before and after the last clock reading, likewise.
    let mut q = queue();
    q.insert_at(99, Instant::now() + ms(50));
    time::sleep(ms(10)).await;
    assert_pending!(poll!(q));
    time::sleep(ms(20)).await;
    let now = Instant::now();
    for ago in [3, 15, 1, 25] {
        q.insert_at(ago, now - ms(u64::from(ago)));
    }
    let out: Vec<u32> = drain(&mut q).into_iter().map(Expired::into_inner).collect();
    assert_eq!(out, [25, 15, 3, 1]);
}

/// Deadlines already past when the queue first reads the clock keep their order too (the
/// queue's clock started at its first insert, and every instant before that read as that
/// start: they tied, and `peek` named whichever came first).
#[tokio::test(start_paused = true)]
async fn deadlines_past_before_the_first_insert_come_out_in_deadline_order() {
    time::advance(ms(100)).await;
    let now = Instant::now();
    let mut q = queue();
    q.insert_at("1 ms ago", now - ms(1));
    q.insert_at("7 ms ago", now - ms(7));
    q.insert_at("3 ms ago", now - ms(3));
    let head = q.peek().expect("items are due");
    assert_eq!(q.deadline(&head), now - ms(7), "peek names the earliest");
    let out: Vec<&str> = drain(&mut q).into_iter().map(Expired::into_inner).collect();
    assert_eq!(out, ["7 ms ago", "3 ms ago", "1 ms ago"]);
}

/// An item whose deadline is exactly its bucket's start, left due when a poll took out the
/// one before it, must not overtake an earlier deadline inserted since (due items waited on a
/// first-come list there, served before the deadline-ordered ones).
#[tokio::test(start_paused = true)]
async fn an_item_left_due_does_not_overtake_an_earlier_deadline_inserted_since() {
    let tick = Duration::from_nanos(1 << 20); // the queue's wheel tick
    let start = Instant::now();
    let mut q = queue();
    q.insert_at("a", start + tick * 8);
    q.insert_at("b", start + tick * 8);
    time::advance(tick * 8).await;
    let first = drain_one(&mut q);
    assert_eq!(first, "a");
    q.insert_at("c", Instant::now() - ms(1)); // due before b
    let out: Vec<&str> = drain(&mut q).into_iter().map(Expired::into_inner).collect();
    assert_eq!(out, ["c", "b"], "deadline order");
}

/// With Tokio's `test-util` each paused runtime keeps its own clock. A queue whose timer is
/// on a runtime whose clock is an hour ahead of the one it is polled on sees its alarm go off
/// at once, long before its item is due by the clock it reads: it then waits on the current
/// runtime's Tokio timer, rather than spin (the poll looped for ever), and hands the item out
/// on time by that clock. The same for a queue that holds its slot (`try_delay_queue`), and
/// for a first item beyond the far future (30 years), whose alarm is set short of it, with
/// the timer's clock past that alarm too (that alarm's going off was taken for an early
/// alarm of the same clock, and the poll spun).
#[test]
fn an_alarm_on_a_clock_ahead_of_the_queues_neither_spins_nor_hands_out_early() {
    const YEAR: u64 = 365 * 86_400;
    for reserved in [false, true] {
        alarm_on_a_clock_ahead(reserved, Duration::from_secs(3600), ms(300));
        alarm_on_a_clock_ahead(
            reserved,
            Duration::from_secs(31 * YEAR),
            Duration::from_secs(35 * YEAR),
        );
    }
}

fn alarm_on_a_clock_ahead(reserved: bool, ahead_by: Duration, after: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ahead = paused_runtime();
        ahead.block_on(time::advance(ahead_by));
        let timer = ahead.block_on(async { Timer::builder().build().unwrap() });
        let polled = paused_runtime();
        let waited = polled.block_on(async {
            let mut q = if reserved {
                timer.try_delay_queue().unwrap()
            } else {
                timer.delay_queue()
            };
            let start = Instant::now();
            q.insert("a", after);
            assert_eq!(q.next().await.unwrap().into_inner(), "a");
            // Moved to Tokio's timer, the queue (still alive) holds no slot of the timer's.
            assert_eq!(timer.pending(), 0, "reserved {reserved}: a slot still held");
            start.elapsed()
        });
        let _ = tx.send(waited);
    });
    let waited = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| {
            panic!("reserved {reserved}, {after:?}: the queue's poll spun or hung")
        });
    assert_eq!(waited, after, "reserved {reserved}: on time by its clock");
}

/// After an idle spell the timer's wheel time is that of its last pass, so the queue's
/// registration a tick ahead lands a level up: that level is kept, and expiring after idle
/// gaps allocates nothing once warm (checked in release builds, see
/// `expiring_items_allocates_nothing`).
#[tokio::test(start_paused = true)]
async fn expiring_after_idle_gaps_allocates_nothing() {
    let mut q = DelayQueue::with_capacity(16);
    let mut allocated = 0;
    for round in 0..40 {
        time::sleep(ms(500)).await; // idle: nothing registered anywhere
        let before = allocations();
        q.insert("job", ms(1));
        assert_eq!(q.next().await.unwrap().into_inner(), "job");
        if round >= 5 {
            allocated += allocations() - before;
        }
    }
    if !cfg!(debug_assertions) {
        assert_eq!(allocated, 0, "allocations in 35 expiries after idle gaps");
    }
}

/// A queue made by `new` waits on its runtime's default timer; that runtime goes: polled on
/// another runtime, its items come out there, on time, none lost.
#[test]
fn after_its_runtime_is_gone_a_queue_goes_on_on_the_current_runtime() {
    let first = paused_runtime();
    let mut q = DelayQueue::new();
    first.block_on(async {
        let now = Instant::now();
        q.insert_at("a", now + ms(5));
        q.insert_at("b", now + ms(1_000));
        assert_eq!(q.next().await.unwrap().into_inner(), "a");
        let mut t = task::spawn(&mut q);
        assert_pending!(t.poll_next());
    });
    drop(first);
    let second = paused_runtime();
    second.block_on(async {
        let start = Instant::now();
        let key = q.insert_at("c", start + ms(20));
        assert_eq!(q.deadline(&key), start + ms(20));
        let c = q.next().await.unwrap();
        assert_eq!((c.into_inner(), start.elapsed()), ("c", ms(20)));
        // "b" was due at the first runtime's clock: long past on this one's.
        assert_eq!(q.next().await.unwrap().into_inner(), "b");
        assert!(q.next().await.is_none());
    });
}

/// An empty queue answers `Ready(None)` whatever the task's cooperative budget, as
/// tokio-util's does (its queue spends budget only through its timer); a queue with items
/// spends one unit per item, so a drained burst yields to the worker's other tasks.
#[tokio::test(start_paused = true)]
async fn an_empty_queue_answers_none_even_out_of_budget() {
    let mut queue: DelayQueue<u32> = DelayQueue::new();
    let mut task = task::spawn(());
    common::exhaust_budget();
    assert!(matches!(
        task.enter(|cx, _| queue.poll_expired(cx)),
        Poll::Ready(None)
    ));
    queue.insert(1, Duration::ZERO);
    assert!(
        task.enter(|cx, _| queue.poll_expired(cx)).is_pending(),
        "an item out of budget waits for the task's next turn"
    );
}

/// On a timer with `max_pending`, the queue's one registration keeps its slot when the first
/// deadline moves later: it used to be taken off the wheel and filed again, and a waker
/// dropped in between (the one the queue was last polled with before) could take the freed
/// slot, so the queue's own poll then panicked on a timer it had been within.
#[tokio::test(start_paused = true)]
async fn the_queue_keeps_its_slot_when_its_first_deadline_moves_later() {
    use std::sync::{Arc, Mutex};
    use std::task::{Wake, Waker};
    use tokio_timing_wheel::Sleep;

    /// A waker whose destructor registers a sleep on the timer (taking any free slot).
    struct TakesASlot {
        timer: Timer,
        taken: Arc<Mutex<Vec<Sleep>>>,
    }
    impl Wake for TakesASlot {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for TakesASlot {
        fn drop(&mut self) {
            if let Ok(sleep) = self.timer.try_sleep(Duration::from_secs(3600)) {
                self.taken.lock().unwrap().push(sleep);
            }
        }
    }

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let taken = Arc::new(Mutex::new(Vec::new()));
    let mut q = timer.delay_queue();
    let key = q.insert("x", ms(10));
    let first = Waker::from(Arc::new(TakesASlot {
        timer: timer.clone(),
        taken: taken.clone(),
    }));
    assert!(q
        .poll_expired(&mut Context::from_waker(&first))
        .is_pending());
    assert_eq!(timer.pending(), 1, "the queue's slot");
    drop(first); // the queue and the wheel hold the last clones
    q.reset(&key, ms(50));
    let mut q = task::spawn(q);
    let polled = catch_unwind(AssertUnwindSafe(|| q.poll_next()));
    assert!(polled.is_ok(), "the queue's poll panicked");
    assert_pending!(polled.unwrap());
    assert!(
        taken.lock().unwrap().is_empty(),
        "the queue's slot was taken"
    );
    step(ms(10)).await;
    assert!(!q.is_woken(), "woken at the old deadline with nothing due");
    assert_pending!(q.poll_next());
    step(ms(40)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready!(q.poll_next()).unwrap().into_inner(), "x");
}

/// `Timer::try_delay_queue` takes the queue's one slot when the queue is made and keeps it,
/// empty or not, until the queue is dropped: a full timer answers an error there, never a
/// panic at a later poll.
#[tokio::test(start_paused = true)]
async fn a_try_delay_queue_takes_its_slot_at_once_and_keeps_it_for_life() {
    use tokio_timing_wheel::TimerError;

    let timer = Timer::builder().max_pending(1).build().unwrap();
    let mut q = task::spawn(timer.try_delay_queue::<&str>().unwrap());
    assert_eq!(timer.pending(), 1, "taken when the queue is made");
    let full = TimerError::Full { max_pending: 1 };
    assert_eq!(timer.try_delay_queue::<u8>().unwrap_err(), full);
    assert_eq!(timer.try_sleep(ms(1)).unwrap_err(), full);

    let now = Instant::now();
    q.insert_at("a", now + ms(10));
    q.insert_at("b", now + ms(10));
    q.insert_at("c", now + ms(30));
    assert_pending!(poll!(q));
    step(ms(9)).await;
    assert!(!q.is_woken());
    step(ms(1)).await;
    assert!(q.is_woken());
    let mut first = vec![
        assert_ready_some!(poll!(q)).into_inner(),
        assert_ready_some!(poll!(q)).into_inner(),
    ];
    first.sort();
    assert_eq!(first, ["a", "b"]);
    assert_pending!(poll!(q));
    assert_eq!(timer.try_sleep(ms(1)).unwrap_err(), full, "between items");
    step(ms(20)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "c");
    assert!(assert_ready!(poll!(q)).is_none());
    assert_eq!(timer.pending(), 1, "kept while the queue is empty");
    assert_eq!(timer.try_sleep(ms(1)).unwrap_err(), full);

    // Emptied while a poll waits: the entry waits for nothing, and wakes nobody.
    let key = q.insert("d", ms(5));
    assert_pending!(poll!(q));
    q.remove(&key);
    assert!(
        q.is_woken(),
        "removing the last item wakes the waiting task"
    );
    assert!(assert_ready!(poll!(q)).is_none());
    step(ms(50)).await;
    assert!(!q.is_woken(), "woken with nothing in the queue");
    assert_eq!(timer.pending(), 1);

    // Refilled, it waits again in the same slot.
    q.insert("e", ms(5));
    assert_pending!(poll!(q));
    step(ms(5)).await;
    assert!(q.is_woken());
    assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "e");

    drop(q);
    assert_eq!(timer.pending(), 0, "the drop gives the slot back");
    assert!(timer.try_delay_queue::<u8>().is_ok());
}

/// Once a `try_delay_queue` has nothing to wait for (emptied, or cleared), its timer entry
/// waits past the horizon holding no task's waker, as a plain queue's timer holds none: the
/// task that last waited is not kept alive by the timer, and a shutdown then wakes nobody.
#[tokio::test(start_paused = true)]
async fn a_try_delay_queue_with_nothing_to_wait_for_holds_no_waker() {
    use common::CountingWaker;
    use std::sync::Arc;
    use std::task::Waker;

    for reserved in [false, true] {
        let timer = Timer::builder().max_pending(1).build().unwrap();
        let mut q = if reserved {
            timer.try_delay_queue().unwrap()
        } else {
            timer.delay_queue()
        };
        let first = Arc::new(CountingWaker::default());
        let second = Arc::new(CountingWaker::default());
        let (w1, w2) = (Waker::from(first.clone()), Waker::from(second.clone()));
        // The first task waits for the item, is woken and takes it out.
        q.insert("a", ms(10));
        assert!(q.poll_expired(&mut Context::from_waker(&w1)).is_pending());
        step(ms(10)).await;
        assert_eq!(first.count(), 1, "reserved {reserved}");
        let item = q.poll_expired(&mut Context::from_waker(&w1));
        assert!(matches!(item, Poll::Ready(Some(_))));
        drop(w1);
        // The queue moves to a second task, which finds it empty.
        let mut cx2 = Context::from_waker(&w2);
        assert!(matches!(q.poll_expired(&mut cx2), Poll::Ready(None)));
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "reserved {reserved}: the first task's waker is still held"
        );
        // Cleared while the second waits: then nothing holds its waker but the queue.
        q.insert("b", ms(10));
        assert!(q.poll_expired(&mut cx2).is_pending());
        let woken = second.count();
        q.clear();
        assert_eq!(
            second.count(),
            woken + 1,
            "reserved {reserved}: the clear wakes it"
        );
        timer.shutdown();
        settle().await;
        assert_eq!(
            second.count(),
            woken + 1,
            "reserved {reserved}: a shutdown woke a queue with nothing to wait for"
        );
    }
}

/// A seeded comparison: a `try_delay_queue` on a one-slot timer against a plain queue on an
/// unbounded timer, given the same inserts (due, past, hours away, beyond the horizon),
/// resets, removes, clears, `compact`s and `shrink_to_fit`s, polled by two tasks by turns in
/// paused time: the same items come out at the same instants, the same tasks are woken, an
/// item that comes out to a queue left waiting was preceded by a wake (unless the poll came
/// within the timer's 2 ms of its deadline, before the wake could), and throughout the
/// reserved queue holds its slot (another registration finds the timer full).
/// `TRY_QUEUE_SEEDS` sets how many scripts run.
#[test]
fn a_try_delay_queue_behaves_as_a_plain_one() {
    use tokio_timing_wheel::TimerError;

    let seeds: u64 = std::env::var("TRY_QUEUE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    for seed in 0..seeds {
        let rt = paused_runtime();
        rt.block_on(async move {
            let mut rng = common::XorShift::new(seed);
            let mut next = move |n: u64| rng.below(n);
            let unbounded = Timer::builder().build().unwrap();
            let bounded = Timer::builder().max_pending(1).build().unwrap();
            let mut plain = unbounded.delay_queue::<u64>();
            let mut reserved = bounded.try_delay_queue::<u64>().unwrap();
            let mut tasks_p = [task::spawn(()), task::spawn(())];
            let mut tasks_r = [task::spawn(()), task::spawn(())];
            let mut live: Vec<(u64, Key, Key)> = Vec::new();
            // The task whose poll left the queues waiting, if the last round ended so.
            let mut waiting: Option<usize> = None;
            for id in 0..200u64 {
                let when = |next: &mut dyn FnMut(u64) -> u64| match next(12) {
                    0 => Instant::now() - Duration::from_micros(next(5000)),
                    1 => Instant::now() + 600 * YEAR,
                    2 => Instant::now() + Duration::from_secs(3600),
                    _ => Instant::now() + Duration::from_micros(next(40_000)),
                };
                match next(14) {
                    0..=3 => {
                        let at = when(&mut next);
                        live.push((id, plain.insert_at(id, at), reserved.insert_at(id, at)));
                    }
                    4 | 5 if !live.is_empty() => {
                        let (_, kp, kr) = live[next(live.len() as u64) as usize];
                        let at = when(&mut next);
                        plain.reset_at(&kp, at);
                        reserved.reset_at(&kr, at);
                    }
                    6 if !live.is_empty() => {
                        let (_, kp, kr) = live.swap_remove(next(live.len() as u64) as usize);
                        assert_eq!(
                            plain.remove(&kp).into_inner(),
                            reserved.remove(&kr).into_inner()
                        );
                    }
                    7 if next(8) == 0 => {
                        plain.clear();
                        reserved.clear();
                        live.clear();
                    }
                    8 => {
                        plain.compact();
                        reserved.compact();
                    }
                    9 => {
                        plain.shrink_to_fit();
                        reserved.shrink_to_fit();
                    }
                    _ => {
                        step(Duration::from_micros(next(15_000))).await;
                        let woken_p: Vec<bool> = tasks_p.iter().map(|t| t.is_woken()).collect();
                        let woken_r: Vec<bool> = tasks_r.iter().map(|t| t.is_woken()).collect();
                        assert_eq!(woken_p, woken_r, "seed {seed}: woken differently");
                        let waiting_before = waiting;
                        let t = next(2) as usize;
                        let mut first = None;
                        loop {
                            let p = tasks_p[t].enter(|cx, _| plain.poll_expired(cx));
                            let r = tasks_r[t].enter(|cx, _| reserved.poll_expired(cx));
                            match (p, r) {
                                (Poll::Ready(Some(p)), Poll::Ready(Some(r))) => {
                                    assert_eq!(
                                        (p.get_ref(), p.deadline()),
                                        (r.get_ref(), r.deadline()),
                                        "seed {seed}"
                                    );
                                    live.retain(|(i, _, _)| i != p.get_ref());
                                    first = first.or(Some(p.deadline()));
                                }
                                (Poll::Ready(None), Poll::Ready(None)) => {
                                    waiting = None;
                                    break;
                                }
                                (Poll::Pending, Poll::Pending) => {
                                    waiting = Some(t);
                                    break;
                                }
                                (p, r) => panic!("seed {seed}: plain {p:?}, reserved {r:?}"),
                            }
                        }
                        if let (Some(w), Some(first)) = (waiting_before, first) {
                            // Items came out of a queue left waiting, its task not woken: only
                            // because this poll came before the wake could (the timer wakes
                            // within its 1 ms tick, plus Tokio's 1 ms rounding of its alarm).
                            let late = Instant::now().saturating_duration_since(first);
                            assert!(woken_p[w] || late < ms(2), "seed {seed}: no wake, {late:?}");
                        }
                    }
                }
                assert_eq!(
                    bounded.try_sleep(ms(1)).unwrap_err(),
                    TimerError::Full { max_pending: 1 },
                    "seed {seed}: the slot was given up"
                );
            }
        });
    }
}

/// Deadlines years before the queue's first insert keep their order too: an item 20 years
/// back comes out before one 15 years back, whatever order they were inserted in (a clock
/// reaching back only nine years made both its origin, a tie).
#[tokio::test(start_paused = true)]
async fn deadlines_decades_back_come_out_in_deadline_order() {
    let now = Instant::now();
    let (Some(twenty), Some(fifteen)) = (now.checked_sub(20 * YEAR), now.checked_sub(15 * YEAR))
    else {
        return; // this platform's instants do not reach that far back
    };
    let mut q = DelayQueue::new();
    q.insert_at("15 years back", fifteen);
    q.insert_at("20 years back", twenty);
    q.insert_at("1 s back", now - Duration::from_secs(1));
    let order: Vec<_> = drain(&mut q).into_iter().map(|e| e.into_inner()).collect();
    assert_eq!(order, ["20 years back", "15 years back", "1 s back"]);
}

/// `compact` leaves the queue holding what its items need, whatever it held before: the
/// queues every burst of expiring items passes through, and the key maps of an earlier
/// compaction, are given back too; and `shrink_to_fit` gives back the burst's queues of an
/// emptied queue.
#[tokio::test(start_paused = true)]
async fn compact_gives_back_what_a_past_burst_and_compaction_held() {
    use common::alloc::live_bytes;

    /// A queue holding one item an hour away, compacted: what it needs.
    fn lean() -> DelayQueue<u64> {
        let mut q = DelayQueue::new();
        q.insert(0, Duration::from_secs(3600));
        q.compact();
        q
    }
    let base = live_bytes();
    let fresh = lean();
    let needed = live_bytes() - base;
    drop(fresh);

    let base = live_bytes();
    let mut q = DelayQueue::new();
    // A burst of items due together, taken out: each passes through the queue's wheel.
    for i in 0..4000u64 {
        q.insert(i, ms(5));
    }
    time::advance(ms(5)).await;
    for _ in 0..4000 {
        q.next().await.unwrap();
    }
    assert!(q.next().await.is_none());
    // A compaction that moves many items (their keys are mapped), then all but one go.
    let keys: Vec<Key> = (0..4000u64)
        .map(|i| q.insert(i, Duration::from_secs(7200 + i)))
        .collect();
    for k in keys.iter().step_by(2) {
        q.remove(k);
    }
    q.compact();
    for k in keys.iter().skip(1).step_by(2) {
        q.remove(k);
    }
    drop(keys);
    q.shrink_to_fit();
    let emptied = live_bytes() - base;
    q.insert(0, Duration::from_secs(3600));
    q.compact();
    let held = live_bytes() - base;
    assert!(
        held <= needed + 1024,
        "compacted to one item, the queue holds {held} bytes; a fresh one {needed}"
    );
    q.clear();
    q.shrink_to_fit();
    assert!(
        live_bytes() - base <= needed + 1024,
        "emptied and shrunk, the queue holds {} bytes (before the compaction: {emptied})",
        live_bytes() - base
    );
}

/// `compact` moves only the items beyond the room they need, into the vacancies, as
/// tokio-util's does: a queue with no vacancy is left holding no more than before (no key maps
/// for items that did not move), one with half its items removed holds less, and the keys of
/// the items that stayed, and of those that moved, still name them.
#[tokio::test(start_paused = true)]
async fn compact_moves_only_what_it_must() {
    use common::alloc::live_bytes;
    const N: u64 = 10_000;

    let start = Instant::now();
    let due = |i: u64| start + Duration::from_secs(60 + i);
    let mut q = DelayQueue::with_capacity(N as usize);
    let keys: Vec<Key> = (0..N)
        .map(|i| q.insert(i, Duration::from_secs(60 + i)))
        .collect();
    assert_eq!(q.capacity(), q.len());
    let before = live_bytes();
    q.compact();
    let grown = live_bytes() - before;
    assert!(
        grown <= 0,
        "compacting a queue with no vacancy grew it by {grown} bytes"
    );
    assert_eq!(q.deadline(&keys[7]), due(7));
    assert_eq!(q.remove(&keys[N as usize - 1]).into_inner(), N - 1);
    assert_eq!(q.remove(&keys[0]).into_inner(), 0);

    // Half removed (the even items; the odd ones beyond the new length move down).
    for k in keys.iter().skip(2).step_by(2) {
        q.remove(k);
    }
    let before = live_bytes();
    q.compact();
    let grown = live_bytes() - before;
    assert!(
        grown < 0,
        "compacting a half-empty queue grew it by {grown} bytes"
    );
    assert_eq!(q.capacity(), q.len());
    // Every key left names its item; they come out in deadline order.
    for i in (1..N - 1).step_by(2) {
        assert_eq!(q.deadline(&keys[i as usize]), due(i), "the key of item {i}");
    }
    time::advance(Duration::from_secs(60 + N)).await;
    let mut order = Vec::new();
    while let Some(e) = q.next().await {
        order.push(e.into_inner());
    }
    let expected: Vec<u64> = (1..N - 1).step_by(2).collect();
    assert_eq!(order, expected);
}

/// After its timer shuts down, a queue that has nothing left to wait for (cleared, or its
/// last item removed) leaves nothing on Tokio's timer: it wakes nobody at the deadline it
/// waited for, and a paused clock does not advance to it, as before the shutdown.
#[tokio::test(start_paused = true)]
async fn after_a_shutdown_an_emptied_queue_wakes_nobody_at_its_old_deadline() {
    for clear in [true, false] {
        let timer = Timer::builder().build().unwrap();
        let mut q = task::spawn(timer.delay_queue());
        let key = q.insert("a", ms(10));
        assert_pending!(poll!(q));
        timer.shutdown();
        settle().await;
        assert_pending!(poll!(q), "clear {clear}: waits on Tokio's timer now");
        if clear {
            q.clear();
        } else {
            q.remove(&key);
        }
        assert!(q.is_woken(), "clear {clear}");
        assert!(assert_ready!(poll!(q)).is_none());
        let emptied = Instant::now();
        // Idle: a paused clock advances to the next timer, if any is left.
        common::idle_on_another_thread().await;
        assert_eq!(
            Instant::now(),
            emptied,
            "clear {clear}: a timer is left for an empty queue"
        );
        step(ms(10)).await;
        assert!(
            !q.is_woken(),
            "clear {clear}: woken at the old deadline with nothing in the queue"
        );
        // Refilled, it waits on Tokio's timer again, on time.
        q.insert("b", ms(5));
        assert_pending!(poll!(q));
        step(ms(5)).await;
        assert!(q.is_woken(), "clear {clear}");
        assert_eq!(assert_ready_some!(poll!(q)).into_inner(), "b");
    }
}

/// An item reset again and again between polls to deadlines in the current tick (or already
/// passed), beside another waiting there, holds no more memory however many the resets.
#[tokio::test(start_paused = true)]
async fn resets_within_the_current_tick_between_polls_hold_bounded_memory() {
    let mut q = queue();
    let first = q.insert(0u32, Duration::from_micros(300));
    let moved = q.insert(1, Duration::from_micros(600));
    assert_pending!(poll!(q));
    let mut held = Vec::new();
    for round in 0..4u64 {
        let before = common::alloc::live_bytes();
        for i in 0..50_000u64 {
            let at = match i % 3 {
                0 => Duration::from_micros(400 + i % 100),
                1 => Duration::ZERO, // already passed
                _ => Duration::from_micros(700),
            };
            q.reset(&moved, at);
        }
        held.push(common::alloc::live_bytes() - before);
        assert!(
            held[round as usize] < 64 * 1024,
            "round {round}: {held:?} bytes held by 50 000 resets of one item"
        );
    }
    q.reset(&moved, Duration::from_micros(700));
    time::advance(ms(1)).await;
    let out: Vec<Key> = drain(&mut q).iter().map(Expired::key).collect();
    assert_eq!(out, [first, moved]);
    assert!(assert_ready!(poll!(q)).is_none(), "the queue is empty");
}

/// A second model, for wakeups: two tasks take turns polling the queue between operations
/// (inserts, removals, resets earlier and later, `compact`, `shrink_to_fit`, `clear`, a
/// shutdown of the queue's timer), on queues of the default timer, of a bounded timer and of a
/// 10 ms-tick timer, with deadlines in milliseconds, microseconds or nanoseconds. Whenever
/// time moves past an item's deadline while a task waits on the queue, that task has been
/// woken: the queue's alarm is never set later than its first item, whatever changed since
/// the wait began (the first deadline is kept between waits). Items come out once, never
/// early, with their own key and deadline.
mod wakes {
    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Insert at now + this many units (negative: in the past).
        Insert(i64),
        /// Insert with `insert(value, Duration)`, this many units.
        InsertAfter(u64),
        Remove(usize),
        Reset(usize, i64),
        /// Advance time by this many units.
        Advance(u64),
        /// Advance time to an item's deadline.
        AdvanceTo(usize),
        /// Poll with the first task (`false`) or the second (`true`) until it waits.
        Poll(bool),
        Compact,
        Shrink,
        Clear,
        Shutdown,
    }

    fn op() -> impl Strategy<Value = Op> {
        let offset = prop_oneof![
            6 => -20i64..400,
            2 => 0i64..5,
            1 => 0i64..200_000,
            1 => 0i64..20_000_000_000,
        ];
        prop_oneof![
            6 => offset.clone().prop_map(Op::Insert),
            1 => (0u64..300).prop_map(Op::InsertAfter),
            3 => any::<usize>().prop_map(Op::Remove),
            3 => (any::<usize>(), offset).prop_map(|(i, o)| Op::Reset(i, o)),
            3 => prop_oneof![0u64..3, 0u64..100, 0u64..100_000, 0u64..5_000_000_000]
                .prop_map(Op::Advance),
            2 => any::<usize>().prop_map(Op::AdvanceTo),
            4 => any::<bool>().prop_map(Op::Poll),
            2 => Just(Op::Compact),
            1 => Just(Op::Shrink),
            1 => Just(Op::Clear),
            1 => Just(Op::Shutdown),
        ]
    }

    fn run(kind: u8, unit: Duration, ops: Vec<Op>) {
        let units = |n: u64| Duration::from_nanos(unit.as_nanos() as u64 * n);
        let at = |now: Instant, off: i64| {
            let step = units(off.unsigned_abs());
            if off >= 0 {
                now + step
            } else {
                now - step
            }
        };
        paused_runtime().block_on(async move {
            time::advance(Duration::from_secs(100)).await;
            let bounded = Timer::builder().max_pending(4).build().unwrap();
            let coarse = Timer::builder().tick(ms(10)).build().unwrap();
            let mut tasks = [task::spawn(()), task::spawn(())];
            let mut q = match kind {
                0 => DelayQueue::new(),
                1 => bounded.try_delay_queue().unwrap(),
                _ => coarse.delay_queue(),
            };
            let mut items: HashMap<u64, Instant> = HashMap::new();
            let mut keys: Vec<(Key, u64)> = Vec::new();
            // The task that polled last, if it is waiting.
            let mut waiting: Option<usize> = None;
            for (id, op) in ops.into_iter().enumerate() {
                let id = id as u64;
                let now = Instant::now();
                match op {
                    Op::Insert(off) => {
                        let deadline = at(now, off);
                        keys.push((q.insert_at(id, deadline), id));
                        items.insert(id, deadline);
                    }
                    Op::InsertAfter(n) => {
                        keys.push((q.insert(id, units(n)), id));
                        items.insert(id, now + units(n));
                    }
                    Op::Remove(i) if !keys.is_empty() => {
                        let (key, kid) = keys[i % keys.len()];
                        let removed = q.try_remove(&key);
                        match items.remove(&kid) {
                            Some(d) => {
                                let e = removed.expect("a pending item removed");
                                assert_eq!((e.key(), e.deadline(), *e.get_ref()), (key, d, kid));
                            }
                            None => assert!(removed.is_none(), "a stale key removed something"),
                        }
                    }
                    Op::Reset(i, off) if !keys.is_empty() => {
                        let (key, kid) = keys[i % keys.len()];
                        if items.contains_key(&kid) {
                            let deadline = at(now, off);
                            q.reset_at(&key, deadline);
                            items.insert(kid, deadline);
                        }
                    }
                    Op::Advance(_) | Op::AdvanceTo(_) => {
                        let by = match op {
                            Op::Advance(n) => units(n),
                            Op::AdvanceTo(i) => {
                                let mut ds: Vec<Instant> = items.values().copied().collect();
                                ds.sort();
                                ds.get(i % ds.len().max(1))
                                    .map_or(Duration::ZERO, |&d| d.saturating_duration_since(now))
                            }
                            _ => unreachable!(),
                        };
                        time::advance(by).await;
                        settle().await;
                        let now = Instant::now();
                        // The alarm is a Tokio sleep: Tokio's millisecond grid allowed.
                        if let Some(t) = waiting {
                            if items.values().any(|&d| d + ms(1) <= now) {
                                assert!(
                                    tasks[t].is_woken(),
                                    "lost wakeup: an item is due and the waiting task was not woken"
                                );
                            }
                        }
                    }
                    Op::Poll(second) => {
                        let t = usize::from(second);
                        let now = Instant::now();
                        loop {
                            match tasks[t].enter(|cx, _| q.poll_expired(cx)) {
                                Poll::Ready(Some(e)) => {
                                    let d = items.remove(e.get_ref()).expect("handed out once");
                                    assert_eq!(d, e.deadline());
                                    assert!(d <= now, "handed out early");
                                    let key =
                                        keys.iter().find(|(_, i)| i == e.get_ref()).unwrap().0;
                                    assert_eq!(key, e.key(), "the wrong key");
                                }
                                Poll::Ready(None) => {
                                    assert!(items.is_empty(), "None while items remain");
                                    waiting = None;
                                    break;
                                }
                                Poll::Pending => {
                                    assert!(
                                        !items.values().any(|&d| d <= now),
                                        "Pending while an item is due"
                                    );
                                    waiting = Some(t);
                                    break;
                                }
                            }
                        }
                    }
                    Op::Compact => q.compact(),
                    Op::Shrink => q.shrink_to_fit(),
                    Op::Clear => {
                        q.clear();
                        if let (Some(t), false) = (waiting, items.is_empty()) {
                            assert!(tasks[t].is_woken(), "clear woke no one");
                        }
                        items.clear();
                    }
                    Op::Shutdown => {
                        bounded.shutdown();
                        coarse.shutdown();
                    }
                    _ => {}
                }
                assert_eq!(q.len(), items.len());
                match q.peek() {
                    Some(key) => {
                        let kid = keys.iter().find(|(k, _)| *k == key).expect("a known key").1;
                        assert_eq!(Some(items[&kid]), items.values().min().copied(), "peek");
                    }
                    None => assert!(items.is_empty()),
                }
            }
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(128),
            ..ProptestConfig::default()
        })]

        #[test]
        fn a_waiting_task_is_woken_once_an_item_is_due(
            kind in 0u8..3,
            unit in prop_oneof![Just(ms(1)), Just(Duration::from_micros(1)), Just(Duration::from_nanos(1))],
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            run(kind, unit, ops);
        }
    }
}
