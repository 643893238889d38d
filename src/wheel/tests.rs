//! Deterministic unit tests of the wheel, and a proptest against the naive model.

use proptest::prelude::*;

use super::entry::NIL;
use super::level::{split, Divider};
use super::naive::Naive;
use super::persist::{Copied, Persistence};
use super::{Key, PeekCache, Step, Wheel};

/// Polls everything due at `now`, checking invariants after each step.
fn drain(wheel: &mut Wheel<u64>, now: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some(e) = wheel.poll(now) {
        wheel.assert_invariants();
        out.push((e.deadline, e.value));
    }
    wheel.assert_invariants();
    out
}

/// Advances one tick at a time from the wheel's time to `to`, recording the tick of each expiry.
fn tick_to(wheel: &mut Wheel<u64>, to: u64) -> Vec<(u64, u64, u64)> {
    let mut fired = Vec::new();
    for t in wheel.now()..=to {
        for (d, v) in drain(wheel, t) {
            fired.push((t, d, v));
        }
    }
    fired
}

/// Runs like the driver: jump to the next expiration until `value` comes out; returns the tick
/// it came out at and the number of heap pops it took.
fn jump_until_fired(wheel: &mut Wheel<u64>) -> (u64, u64) {
    let pops = wheel.stats().heap_pops;
    loop {
        let t = wheel.next_expiration().expect("an entry is pending");
        if let Some(e) = wheel.poll(t) {
            assert!(wheel.poll(t).is_none());
            assert!(e.deadline <= t);
            return (t, wheel.stats().heap_pops - pops);
        }
    }
}

#[test]
fn level_boundaries_size_64() {
    for (deadline, levels) in [(1, 1), (63, 1), (64, 2), (4095, 2), (4096, 3), (262_143, 3)] {
        let mut w = Wheel::new(64);
        let key = w.insert(deadline, deadline).unwrap();
        assert_eq!(w.levels(), levels, "deadline {deadline}");
        w.assert_invariants();
        assert!(
            drain(&mut w, deadline - 1).is_empty(),
            "early at {deadline}"
        );
        assert_eq!(drain(&mut w, deadline), vec![(deadline, deadline)]);
        assert!(!w.contains(key));
        assert!(w.is_empty());
    }
}

#[test]
fn boundaries_fire_on_their_tick_when_stepping() {
    let mut w = Wheel::new(64);
    for d in [63, 64, 65, 4095, 4096, 4097] {
        w.insert(d, d).unwrap();
    }
    let fired = tick_to(&mut w, 5000);
    let expected: Vec<_> = [63, 64, 65, 4095, 4096, 4097]
        .into_iter()
        .map(|d| (d, d, d))
        .collect();
    assert_eq!(fired, expected);
}

#[test]
fn overflow_level_is_created_once_and_reused() {
    let mut w = Wheel::new(64);
    w.insert(100, 1).unwrap();
    assert_eq!(w.levels(), 2);
    w.insert(200, 2).unwrap();
    w.insert(4000, 3).unwrap();
    assert_eq!(w.levels(), 2, "same overflow level reused");
    w.insert(5000, 4).unwrap();
    assert_eq!(w.levels(), 3);
    w.assert_invariants();
    assert_eq!(drain(&mut w, 5000).len(), 4);
    // Empty levels are released once time has moved on, except the lowest three, kept for
    // reuse: a timer filed again and again a level up (an interval longer than 64 ticks)
    // allocates nothing. Above them, an emptied level goes.
    assert_eq!(w.levels(), 3);
    w.insert(5000 + (1 << 25), 5).unwrap();
    assert_eq!(w.levels(), 5);
    assert_eq!(drain(&mut w, 5000 + (1 << 25)).len(), 1);
    assert_eq!(w.levels(), 3);
    w.shrink_to_fit();
    assert_eq!(w.levels(), 0, "given back on demand");
}

#[test]
fn levels_are_released_when_the_furthest_entry_goes() {
    let mut w = Wheel::new(64);
    w.insert(10, 1).unwrap();
    let far = w.insert(1 << 30, 2).unwrap();
    assert_eq!(w.levels(), 6);
    w.remove(far).unwrap();
    assert!(drain(&mut w, 5).is_empty());
    // The far bucket's heap item is still queued: its level stays until that item pops (so a
    // recreated level never gets a duplicate item), or until memory is given back explicitly.
    assert_eq!(w.levels(), 6);
    w.shrink_to_fit();
    w.assert_invariants();
    assert_eq!(w.levels(), 1, "only level 0 is still needed");
}

/// Register/remove cycles with driver passes in between (the RPC pattern) must not grow the
/// bucket heap: a helper found duplicates pushed after levels were released under live items.
#[test]
fn register_remove_cycles_do_not_grow_the_bucket_heap() {
    let mut w = Wheel::new(64);
    let mut now = 0;
    for _ in 0..10_000 {
        let k = w.insert(now + 3_600_000, 1).unwrap();
        w.remove(k).unwrap();
        now += 1;
        assert!(drain(&mut w, now).is_empty());
    }
    assert!(w.stats().heap_pushes <= 2, "{:?}", w.stats());
    w.assert_invariants();
}

/// The heap item of a bucket emptied by a removal survives the wheel emptying. A first entry
/// reports its own bucket; a second, nearer one joining the survivor must report too, or a
/// driver armed for the first misses it (the proptest found this: armed for 32, due at 16).
#[test]
fn a_bucket_that_survived_an_empty_wheel_reports_every_entry_that_joins_it() {
    let mut wheel: Wheel<u64> = Wheel::new(4);
    let k = wheel.insert(16, 1).unwrap();
    assert_eq!(wheel.take_new_head(), Some(16));
    wheel.remove(k).unwrap();
    assert_eq!(wheel.next_expiration(), None);
    wheel.insert(35, 2).unwrap(); // level 2, expiring at 32
    wheel.insert(17, 3).unwrap(); // the survivor, expiring at 16
    assert_eq!(wheel.take_new_head(), Some(17));
    assert_eq!(wheel.next_expiration(), Some(17), "its first deadline");
    // Once an answer has counted every heap item, joining a bucket reports nothing.
    wheel.insert(18, 4).unwrap();
    assert_eq!(wheel.take_new_head(), None);
    assert_eq!(drain(&mut wheel, 18), [(17, 3), (18, 4)]);
}

#[test]
fn top_level_reaches_u64_max() {
    let mut w = Wheel::new(64);
    let key = w.insert(u64::MAX, 7).unwrap();
    assert_eq!(w.levels(), super::level::Geometry::new(64, 1).max_levels);
    w.assert_invariants();
    assert!(drain(&mut w, u64::MAX - 1).is_empty());
    assert!(w.contains(key));
    assert_eq!(drain(&mut w, u64::MAX), vec![(u64::MAX, 7)]);

    // Near the end of time too, with a small wheel (many levels).
    let mut w = Wheel::new(2);
    w.insert(u64::MAX - 3, 1).unwrap();
    assert!(drain(&mut w, u64::MAX - 4).is_empty());
    w.insert(u64::MAX, 2).unwrap();
    assert_eq!(drain(&mut w, u64::MAX - 3), vec![(u64::MAX - 3, 1)]);
    assert_eq!(drain(&mut w, u64::MAX), vec![(u64::MAX, 2)]);
}

#[test]
fn insert_in_the_past_comes_out_on_next_poll() {
    let mut w = Wheel::new(64);
    assert!(drain(&mut w, 1000).is_empty());
    w.insert(5, 1).unwrap();
    w.insert(1000, 2).unwrap();
    w.insert(1001, 3).unwrap();
    assert_eq!(w.next_expiration(), Some(1000));
    // Even a poll with an older time hands out what is already due.
    assert_eq!(drain(&mut w, 0), vec![(5, 1), (1000, 2)]);
    assert_eq!(drain(&mut w, 1001), vec![(1001, 3)]);
}

#[test]
fn remove_then_advance_yields_nothing() {
    let mut w = Wheel::new(64);
    let a = w.insert(10, 1).unwrap();
    let b = w.insert(5000, 2).unwrap();
    assert_eq!(w.remove(a), Some(1));
    assert_eq!(w.remove(b), Some(2));
    assert_eq!(w.remove(a), None, "second remove");
    assert!(w.is_empty());
    assert_eq!(
        w.next_expiration(),
        None,
        "an empty wheel has nothing to wake for"
    );
    assert!(drain(&mut w, 10_000).is_empty());
}

#[test]
fn new_head_is_reported_when_it_can_move_the_next_expiration() {
    let mut w = Wheel::new(64);
    let a = w.insert(6000, 1).unwrap();
    assert_eq!(
        w.take_new_head(),
        Some(6000),
        "first bucket, at its first deadline"
    );
    let b = w.insert(6001, 2).unwrap();
    assert_eq!(
        w.take_new_head(),
        None,
        "joining a waiting bucket moves nothing"
    );
    w.insert(10, 3).unwrap();
    assert_eq!(w.take_new_head(), Some(10), "an earlier bucket");
    assert_eq!(drain(&mut w, 10).len(), 1);
    w.remove(a).unwrap();
    w.remove(b).unwrap();
    // Empty now: its next expiration is None, so joining the surviving bucket is news.
    assert_eq!(w.next_expiration(), None);
    w.insert(6002, 4).unwrap();
    assert_eq!(
        w.take_new_head(),
        Some(6002),
        "the first entry of an empty wheel"
    );
    assert_eq!(w.next_expiration(), Some(6002));
    w.insert(1, 5).unwrap();
    assert_eq!(w.take_new_head(), Some(10), "a due entry, due now");
    // Two new heads between calls: the earlier is reported.
    w.insert(70_000, 6).unwrap();
    w.insert(20, 7).unwrap();
    assert_eq!(w.take_new_head(), Some(20));
    w.assert_invariants();
}

/// An owner that polls at each `next_expiration` answer, as a driver does: the answers it
/// polled at, and what each poll handed out.
fn drive(wheel: &mut Wheel<u64>) -> Vec<(u64, Vec<(u64, u64)>)> {
    let mut polls = Vec::new();
    while let Some(t) = wheel.next_expiration() {
        polls.push((t, drain(wheel, t)));
    }
    polls
}

/// A lone entry costs its owner one wake, at its deadline: not one at its bucket's start (a
/// coarse tick's, or a higher level's for a cascade) and another at the deadline.
#[test]
fn a_lone_entry_is_polled_for_once_at_its_deadline() {
    // Within a coarse tick: its bucket starts at 10.
    let mut w = Wheel::with_tick(64, 10);
    w.insert(18, 1).unwrap();
    assert_eq!(w.take_new_head(), Some(18));
    assert_eq!(drive(&mut w), [(18, vec![(18, 1)])]);
    // Two levels up: its bucket starts at 4096, the cascade happens in the same poll.
    let mut w = Wheel::new(64);
    w.insert(6000, 2).unwrap();
    assert_eq!(drive(&mut w), [(6000, vec![(6000, 2)])]);
    // Several entries: one poll per deadline, none at a bucket's start.
    let mut w = Wheel::with_tick(64, 10);
    for (d, v) in [(15, 1), (37, 2), (700, 3), (705, 4), (50_000, 5)] {
        w.insert(d, v).unwrap();
    }
    let polled: Vec<u64> = drive(&mut w).into_iter().map(|(t, _)| t).collect();
    assert_eq!(polled, [15, 37, 700, 705, 50_000]);
}

/// A bucket of a lower level can start with a higher one's slot, or inside it, and hold an
/// earlier first deadline than that one's: the wake is the earliest first deadline of the
/// buckets that start before it (never later, which would miss it; nor at a bucket's start
/// where nothing is due, which costs a pass for nothing).
#[test]
fn the_wake_is_the_first_deadline_of_buckets_starting_before_it() {
    // Starting together: level 1 (80..120), and level 0 (80..90), filed later.
    let mut w = Wheel::with_tick(4, 10);
    w.insert(100, 1).unwrap(); // level 1 (the slot of 80..120), first deadline 100
    assert_eq!(w.next_expiration(), Some(100));
    assert!(drain(&mut w, 50).is_empty()); // the level-0 window is now 50..90
    w.insert(85, 2).unwrap(); // level 0, the bucket of 80..90
    assert_eq!(w.take_new_head(), Some(85));
    assert_eq!(
        w.next_expiration(),
        Some(85),
        "not 80, where nothing is due"
    );
    assert_eq!(drive(&mut w), [(85, vec![(85, 2)]), (100, vec![(100, 1)])]);
    // Starting inside it: level 1 (80..120), and level 0 (90..100), filed later.
    let mut w = Wheel::with_tick(4, 10);
    w.insert(110, 1).unwrap();
    assert!(drain(&mut w, 60).is_empty()); // the level-0 window is now 60..100
    w.insert(95, 2).unwrap();
    assert_eq!(
        w.next_expiration(),
        Some(95),
        "neither 110 (late) nor 90 (empty)"
    );
    assert_eq!(drive(&mut w), [(95, vec![(95, 2)]), (110, vec![(110, 1)])]);
    // Past the buckets it looks at, the next one's start bounds the wake: lone entries moved
    // lazily far later (a plain wheel), each alone in a level-1 bucket.
    let mut w = Wheel::new(64);
    let keys: Vec<_> = (1..=6).map(|i| w.insert(64 * i, i).unwrap()).collect();
    for &k in &keys {
        assert!(w.reschedule(k, 100_000));
    }
    let fifth = 64 * (super::flush::WAKE_LOOKS as u64 + 1);
    assert_eq!(w.next_expiration(), Some(fifth));
    w.assert_invariants();
}

/// An entry filed before the promised wake reports it, even into a bucket already counted,
/// and so does one moved earlier within its bucket.
#[test]
fn an_entry_before_the_promise_reports_even_in_a_counted_bucket() {
    let mut w = Wheel::new(64);
    let a = w.insert(100, 1).unwrap(); // level 1, the bucket of 64..128
    assert_eq!(w.next_expiration(), Some(100));
    w.insert(80, 2).unwrap(); // the same bucket
    assert_eq!(w.take_new_head(), Some(80));
    w.insert(90, 3).unwrap(); // the same bucket, after the promise: nothing to report
    assert_eq!(w.take_new_head(), None);
    assert_eq!(w.next_expiration(), Some(80));
    assert!(w.reschedule(a, 70)); // stays in its bucket (lazily), but earlier than 80
    assert_eq!(w.take_new_head(), Some(70));
    assert_eq!(w.next_expiration(), Some(70));
    assert_eq!(
        drive(&mut w),
        [
            (70, vec![(70, 1)]),
            (80, vec![(80, 2)]),
            (90, vec![(90, 3)])
        ]
    );
}

#[test]
fn stale_keys_are_never_confused_after_slot_reuse() {
    let mut w = Wheel::new(64);
    let old = w.insert(10, 1).unwrap();
    w.remove(old).unwrap();
    let new = w.insert(10, 2).unwrap();
    assert_eq!(old.index, new.index, "slot reused");
    assert_ne!(old, new);
    assert_eq!(w.remove(old), None);
    assert!(!w.reschedule(old, 3));
    assert_eq!(w.deadline(old), None);
    assert_eq!(w.deadline(new), Some(10));
    // The key handed out on expiry is the entry's own, and is stale afterwards.
    let expired = w.poll(10).expect("due");
    assert_eq!((expired.key, expired.value), (new, 2));
    assert_eq!(w.remove(new), None);
}

/// On a wheel that relinks later moves, a later deadline within the slot of the entry's
/// bucket is re-filed lazily, when the bucket expires; one beyond it relinks at once, so the
/// old bucket, left empty, asks for no wake of its own.
#[test]
fn reschedule_later_is_lazy_within_its_bucket_and_fires_at_the_new_deadline() {
    let mut w = Wheel::new(64);
    w.relink_later();
    let key = w.insert(100, 1).unwrap(); // level 1: the bucket of 64..128
    let pushes = w.stats().heap_pushes;
    assert!(w.reschedule(key, 120));
    assert_eq!(
        w.stats().heap_pushes,
        pushes,
        "no relink for a later deadline in the same bucket"
    );
    // Alone in its bucket, it moves the bucket's first deadline with it.
    assert_eq!(w.next_expiration(), Some(120));
    let other = w.insert(110, 2).unwrap();
    assert!(w.reschedule(key, 125));
    assert!(w.remove(other).is_some());
    // Not alone, it leaves the first deadline behind (110, gone since): early, never late.
    assert_eq!(w.next_expiration(), Some(110));
    assert!(w.reschedule(key, 10_000));
    assert_eq!(w.deadline(key), Some(10_000));
    w.assert_invariants();
    assert_eq!(
        w.next_expiration(),
        Some(10_000),
        "the old bucket is left empty, not waited for"
    );
    assert!(drain(&mut w, 9_999).is_empty());
    assert_eq!(drain(&mut w, 10_000), vec![(10_000, 1)]);
}

#[test]
fn reschedule_earlier_relinks() {
    let mut w = Wheel::new(64);
    let key = w.insert(10_000, 1).unwrap();
    assert!(w.reschedule(key, 70));
    w.assert_invariants();
    assert!(drain(&mut w, 69).is_empty());
    assert_eq!(drain(&mut w, 70), vec![(70, 1)]);

    // Earlier but within the same high-level bucket: stays, and still fires on time.
    let key = w.insert(4096 * 3 + 500, 2).unwrap();
    assert!(w.reschedule(key, 4096 * 3 + 10));
    assert!(drain(&mut w, 4096 * 3 + 9).is_empty());
    assert_eq!(drain(&mut w, 4096 * 3 + 10), vec![(4096 * 3 + 10, 2)]);

    // To the past: due at once.
    let key = w.insert(20_000, 3).unwrap();
    assert!(w.reschedule(key, 1));
    assert_eq!(w.next_expiration(), Some(w.now()));
    let now = w.now();
    assert_eq!(drain(&mut w, now), vec![(1, 3)]);
}

/// The intent of Kafka's TimerTest: tasks at delays 0..4, pairs at 10..99, singles at
/// 100..499 all fire exactly once, on their tick and in deadline order.
#[test]
fn kafka_timer_test_intents() {
    let mut w = Wheel::new(64);
    let mut expected = Vec::new();
    let mut id = 0;
    let mut add = |w: &mut Wheel<u64>, d: u64| {
        w.insert(d, id).unwrap();
        expected.push((d, id));
        id += 1;
    };
    for d in 0..4 {
        add(&mut w, d);
    }
    for d in 10..100 {
        add(&mut w, d);
        add(&mut w, d);
    }
    for d in 100..500 {
        add(&mut w, d);
    }
    let fired = tick_to(&mut w, 600);
    assert_eq!(fired.len(), expected.len(), "each fires exactly once");
    for &(t, d, _) in &fired {
        assert_eq!(t, d, "fired on its own tick");
    }
    assert!(fired.windows(2).all(|p| p[0].1 <= p[1].1), "deadline order");
    let mut ids: Vec<_> = fired.iter().map(|f| f.2).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), expected.len());
}

#[test]
fn wide_buckets_hand_out_entries_at_their_exact_deadline() {
    // Buckets of 1024 units (a timer's are one tick wide: 1 ms is 1 000 000 units, nanoseconds).
    let mut w = Wheel::with_tick(64, 1024);
    for d in [1500, 1024, 2047, 2048, 70_000, 5_000_000] {
        w.insert(d, d).unwrap();
    }
    w.assert_invariants();
    let mut fired = Vec::new();
    while let Some(t) = w.next_expiration() {
        for e in w.advance(t) {
            assert!(e.deadline <= t, "never early");
            fired.push((t, e.deadline));
        }
        w.assert_invariants();
    }
    // Driven by next_expiration, each entry comes out exactly at its own deadline, not at the
    // start or end of its bucket.
    let expected: Vec<_> = [1024, 1500, 2047, 2048, 70_000, 5_000_000]
        .into_iter()
        .map(|d| (d, d))
        .collect();
    assert_eq!(fired, expected);

    // Inside the current bucket: due exactly at its deadline.
    let mut w = Wheel::with_tick(64, 1024);
    assert!(drain(&mut w, 100).is_empty());
    w.insert(600, 1).unwrap();
    assert_eq!(w.next_expiration(), Some(600));
    assert!(drain(&mut w, 599).is_empty());
    assert_eq!(drain(&mut w, 600), vec![(600, 1)]);
}

#[test]
fn far_entry_costs_few_heap_pops() {
    for deadline in [1 << 30, (1 << 30) - 1, (1 << 30) + 12_345, 1 << 40] {
        let mut w = Wheel::new(64);
        w.insert(deadline, 1).unwrap();
        let levels = w.levels() as u64;
        let (at, pops) = jump_until_fired(&mut w);
        assert_eq!(at, deadline);
        assert!(pops <= levels + 1, "{pops} pops for {levels} levels");
    }
}

#[test]
fn driver_style_jumps_fire_every_entry_on_time() {
    let mut w = Wheel::new(64);
    let deadlines = [5, 64, 300, 4095, 4096, 70_000, 1 << 24, (1 << 24) + 1];
    for &d in &deadlines {
        w.insert(d, d).unwrap();
    }
    let mut fired = Vec::new();
    while let Some(t) = w.next_expiration() {
        for e in w.advance(t) {
            assert_eq!(e.deadline, t, "jumped exactly to the deadline");
            fired.push(e.deadline);
        }
        w.assert_invariants();
    }
    assert_eq!(fired, deadlines);
}

#[test]
fn small_wheels_work() {
    for size in [2, 4, 8, 1024] {
        let mut w = Wheel::new(size);
        for d in (1..2000).step_by(37) {
            w.insert(d, d).unwrap();
        }
        let fired = tick_to(&mut w, 2000);
        assert!(fired.iter().all(|&(t, d, _)| t == d));
        assert_eq!(fired.len(), (1..2000).step_by(37).count());
    }
}

#[test]
#[should_panic(expected = "power of two")]
fn rejects_size_not_power_of_two() {
    let _ = Wheel::<()>::new(48);
}

#[test]
#[should_panic(expected = "power of two")]
fn rejects_size_one() {
    let _ = Wheel::<()>::new(1);
}

#[test]
fn emptied_wheel_gives_back_memory() {
    let mut w = Wheel::new(64);
    let keys: Vec<Key> = (0..100_000).map(|i| w.insert(10 + i, i).unwrap()).collect();
    assert!(w.capacity() >= 100_000);
    for k in keys {
        w.remove(k).unwrap();
    }
    assert_eq!(w.capacity(), 0);
    assert_eq!(w.next_expiration(), None);
}

/// The deadline an operation relative to the wheel's own time names: `now` plus its delta
/// (`*Near`) or minus its age (`*Past`).
fn relative_to(op: &Op, now: u64) -> u64 {
    match *op {
        Op::InsertNear(delta) | Op::RescheduleNear(_, delta) => now.saturating_add(delta),
        Op::InsertPast(ago) | Op::ReschedulePast(_, ago) => now.saturating_sub(ago),
        ref other => unreachable!("not relative to the wheel's time: {other:?}"),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    InsertPersistent(u64),
    Remove(usize),
    /// Removes every entry still pending: the wheel empties with its buckets' heap items left
    /// behind, which the next entries may join.
    RemoveAll,
    Reschedule(usize, u64),
    /// Inserts a one-shot entry at `u64::MAX`, the deadline time never reaches, as a shard
    /// files it: in no bucket.
    InsertUnreachable,
    /// Inserts a persistent entry at `u64::MAX`, as a shard files an interval's tick there.
    InsertPersistentUnreachable,
    /// Moves an entry to `u64::MAX` as a shard does: in no bucket.
    RescheduleUnreachable(usize),
    Advance(u64),
    /// Advances with a small work budget, possibly stopping part-way through a pass: other
    /// operations then run on a wheel in the middle of a flush.
    PartialAdvance(u64, usize),
    /// Gives back spare memory (`Timer::shrink_to_fit`), possibly in the middle of a flush.
    ShrinkToFit,
    /// Inserts an entry due this long before the wheel's time (only for a wheel that orders
    /// due entries: another hands them out in the order they came).
    InsertPast(u64),
    /// Moves an entry to this long before the wheel's time (likewise).
    ReschedulePast(usize, u64),
    /// Inserts `n` entries at `delta` from now plus an offset of the given pattern
    /// ([`burst_offset`]): a crowd of entries in one tick, or a few.
    Burst {
        delta: u64,
        n: usize,
        pattern: u8,
        seed: u64,
    },
    /// Moves every entry into a new slab (`DelayQueue::compact`), the keys remapped.
    Compact,
    /// A driver's pass with a small budget: on `Done` it asks `next_expiration` and arms for
    /// the answer (as a shard's pass does); on `Yield` it leaves the wheel mid-pass.
    Pass(u64, usize),
    /// Advances far, up to a time near `u64::MAX` (one short of it, as a driver's clock).
    AdvanceFar(u64),
    /// Inserts an entry this many units after the wheel's own time (which lags the test's
    /// after a pass cut short): into the current tick, the due list or the imminent queues.
    InsertNear(u64),
    /// Moves an entry to this many units after the wheel's own time, whatever list it is on.
    RescheduleNear(usize, u64),
    /// Files a persistent entry that fired again (the `i`th parked one), this many units
    /// after the wheel's own time, or before it (`ago`): an interval re-armed behind time.
    Rearm {
        i: usize,
        ahead: u64,
        ago: u64,
    },
    /// A pass (as [`Op::Pass`]) to the next boundary of a level's buckets, seen from the
    /// wheel's own time, plus or minus one unit (`nudge` 0, 1 or 2): where the cascades of
    /// higher levels land.
    PassToBoundary {
        level: u32,
        nudge: u8,
        budget: usize,
    },
    /// Asks `next_deadline`, the exact earliest deadline a `DelayQueue` waits for.
    NextDeadline,
    /// Drops every entry, keeping the wheel's time and memory (`DelayQueue::clear`): every
    /// key handed out before goes stale, and the wheel takes new entries after.
    Clear,
    /// Takes every entry out with its value (a shard's shutdown): exactly the pending ones
    /// come back, and every key handed out before goes stale.
    DrainAll,
    /// Makes room for this many more entries (`DelayQueue::reserve`).
    Reserve(usize),
    /// Inserts an entry marked as a timeout (or not): the mark comes back when it fires.
    InsertAs(u64, bool),
    /// Asks `next_expiration`, as a driver arming for it, then passes (as [`Op::Pass`]) to
    /// the answer with the given budget.
    DriveNext(usize),
    /// A deadline (or advance target) on a level boundary: `k` buckets of level
    /// `level` above the wheel's own time's bucket start (`rel`) or above 0, plus `nudge - 2`.
    AtBoundary {
        what: u8,
        i: usize,
        level: u32,
        k: u64,
        nudge: u8,
        rel: bool,
    },
}

/// The offset of the `i`th entry of a burst: all tied (pattern 0), rising with ties (1), or
/// scattered over a small window (2).
fn burst_offset(pattern: u8, seed: u64, i: usize) -> u64 {
    let i = i as u64;
    match pattern {
        0 => 0,
        1 => i / (1 + seed % 3) * (seed % 5),
        _ => i.wrapping_mul(7919).wrapping_add(seed) % (1 + seed % 2000),
    }
}

fn burst(max: usize) -> impl Strategy<Value = Op> {
    (
        prop_oneof![0u64..70, 0u64..5_000, 0u64..300_000],
        1..max,
        0u8..3,
        any::<u64>(),
    )
        .prop_map(|(delta, n, pattern, seed)| Op::Burst {
            delta,
            n,
            pattern,
            seed,
        })
}

fn op() -> impl Strategy<Value = Op> {
    // Deltas span every level of a size-4 and size-64 wheel, plus the extremes.
    let delta = prop_oneof![
        4 => 0u64..70,
        3 => 0u64..5_000,
        2 => 0u64..300_000,
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ];
    let advance = prop_oneof![0u64..10, 0u64..200, 0u64..100_000];
    prop_oneof![
        4 => delta.clone().prop_map(Op::Insert),
        1 => delta.clone().prop_map(Op::InsertPersistent),
        1 => (delta.clone(), any::<bool>()).prop_map(|(d, t)| Op::InsertAs(d, t)),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => Just(Op::RemoveAll),
        2 => (any::<usize>(), delta).prop_map(|(i, d)| Op::Reschedule(i, d)),
        1 => Just(Op::InsertUnreachable),
        1 => Just(Op::InsertPersistentUnreachable),
        1 => any::<usize>().prop_map(Op::RescheduleUnreachable),
        3 => advance.clone().prop_map(Op::Advance),
        2 => (advance, 1usize..8).prop_map(|(by, b)| Op::PartialAdvance(by, b)),
        1 => Just(Op::ShrinkToFit),
        1 => burst(40),
    ]
}

/// Few operations, crowds of entries: bursts of thousands in one tick, removed from, advanced
/// through part of the way and with small budgets.
fn crowd_op() -> impl Strategy<Value = Op> {
    let advance = prop_oneof![0u64..10, 0u64..2_000, 0u64..100_000];
    prop_oneof![
        2 => burst(3_000),
        1 => (0u64..5_000).prop_map(Op::Insert),
        3 => any::<usize>().prop_map(Op::Remove),
        1 => (any::<usize>(), 0u64..5_000).prop_map(|(i, d)| Op::Reschedule(i, d)),
        2 => advance.clone().prop_map(Op::Advance),
        3 => (advance, 1usize..2_000).prop_map(|(by, b)| Op::PartialAdvance(by, b)),
        1 => Just(Op::ShrinkToFit),
    ]
}

/// [`op`], plus what it never does: deadlines just after the wheel's own time (the current
/// tick, mid-pass), small-budget passes that re-arm on `Done`, jumps near `u64::MAX`, and
/// `compact`.
fn edge_op() -> impl Strategy<Value = Op> {
    let near = prop_oneof![0u64..3, 0u64..70, 0u64..2_000];
    prop_oneof![
        8 => op(),
        1 => Just(Op::Compact),
        1 => prop_oneof![0usize..4, 0usize..5_000].prop_map(Op::Reserve),
        3 => (prop_oneof![0u64..10, 0u64..3_000], 1usize..4).prop_map(|(by, b)| Op::Pass(by, b)),
        1 => prop_oneof![any::<u64>(), (u64::MAX - 5_000)..u64::MAX].prop_map(Op::AdvanceFar),
        2 => near.clone().prop_map(Op::InsertNear),
        3 => (any::<usize>(), near).prop_map(|(i, d)| Op::RescheduleNear(i, d)),
    ]
}

/// [`edge_op`], plus deadlines already past, for a wheel that orders due entries.
fn ordered_edge_op() -> impl Strategy<Value = Op> {
    with_past(edge_op())
}

/// [`op`], plus deadlines already past, for a wheel that orders due entries.
fn ordered_op() -> impl Strategy<Value = Op> {
    with_past(op())
}

/// `base`, plus deadlines already past: inserted, moved there, or a fired persistent entry
/// filed again there.
fn with_past(base: impl Strategy<Value = Op>) -> impl Strategy<Value = Op> {
    let ago = prop_oneof![0u64..70, 0u64..5_000];
    prop_oneof![
        6 => base,
        1 => ago.clone().prop_map(Op::InsertPast),
        1 => (any::<usize>(), ago).prop_map(|(i, a)| Op::ReschedulePast(i, a)),
    ]
}

/// What [`edge_op`] never makes: fired persistent entries filed again at, before or just
/// after the wheel's time, passes ending on (or one unit either side of) a bucket boundary
/// of a higher level, `next_deadline`, and deadlines already past on any wheel.
fn rare_op() -> impl Strategy<Value = Op> {
    let small = prop_oneof![Just(0u64), 0u64..3, 0u64..70, 0u64..5_000];
    prop_oneof![
        8 => with_past(edge_op()),
        2 => (any::<usize>(), small.clone(), small).prop_map(|(i, ahead, ago)| Op::Rearm {
            i,
            ahead,
            ago,
        }),
        3 => (0u32..4, 0u8..3, prop_oneof![1usize..3, 1usize..40, Just(usize::MAX)])
            .prop_map(|(level, nudge, budget)| Op::PassToBoundary {
                level,
                nudge,
                budget,
            }),
        2 => Just(Op::NextDeadline),
        1 => Just(Op::Clear),
        1 => Just(Op::DrainAll),
    ]
}

/// Operations on level boundaries (exact multiples of a level's bucket width, one unit
/// either side), near `u64::MAX`, and driver-style passes to each `next_expiration`.
fn boundary_op() -> impl Strategy<Value = Op> {
    let b = (
        0u8..5,
        any::<usize>(),
        0u32..12,
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(63),
            Just(64),
            Just(65),
            0u64..200
        ],
        0u8..7,
        any::<bool>(),
    )
        .prop_map(|(what, i, level, k, nudge, rel)| Op::AtBoundary {
            what,
            i,
            level,
            k,
            nudge,
            rel,
        });
    prop_oneof![
        6 => b,
        4 => prop_oneof![Just(usize::MAX), 1usize..5].prop_map(Op::DriveNext),
        4 => rare_op(),
        1 => burst(100),
    ]
}

/// The width of a bucket of `level` on a wheel of `size` buckets and `tick`, saturated.
fn level_width(size: usize, tick: u64, level: u32) -> u64 {
    (size as u64)
        .checked_pow(level)
        .and_then(|w| w.checked_mul(tick))
        .unwrap_or(u64::MAX)
}

fn run_model(size: usize, tick: u64, ops: Vec<Op>) {
    run_model_on(size, tick, ops, Mode::Plain);
}

/// [`run_model`] on a wheel set up as a timer's shards are (see [`Mode::Staging`]) or not.
fn run_model_staging(size: usize, tick: u64, ops: Vec<Op>, staging: bool) {
    let mode = if staging { Mode::Staging } else { Mode::Plain };
    run_model_on(size, tick, ops, mode);
}

/// How the modelled wheel is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Plain,
    /// Stages recent entries and relinks later moves beyond their bucket's slot, as a
    /// timer's shards do.
    Staging,
    /// Hands entries due at once out in deadline order, as a `DelayQueue`'s wheel does.
    OrderedDue,
}

fn run_model_on(size: usize, tick: u64, ops: Vec<Op>, mode: Mode) {
    let mut wheel: Wheel<u64, Copied> = Wheel::persistent(size, tick);
    match mode {
        Mode::Plain => {}
        Mode::Staging => {
            wheel.stage_recent();
            wheel.relink_later();
        }
        // As a `DelayQueue`'s wheel: its slab's slots are reused at once, whatever its size.
        Mode::OrderedDue => {
            wheel.order_due();
            wheel.keep_capacity();
        }
    }
    let mut model = Naive::default();
    let mut keys: Vec<(Key, u64)> = Vec::new();
    // Kept across the operations, as a `DelayQueue` keeps it; told of the inserts and
    // reschedules below as the queue tells it (the other filings it must notice itself).
    let mut peeked = PeekCache::default();
    let mut now = 0u64;
    // What a driver arms for: every reported head, and the next expiration after each pass.
    let mut armed = u64::MAX;
    // An entry was filed before the wheel's time on a wheel whose due list is first come:
    // until a pass is done, entries due at once may come out of deadline order.
    let mut unordered = false;
    // The entries inserted marked as timeouts (`insert_as`).
    let mut timeouts = std::collections::HashSet::new();
    for (id, op) in ops.into_iter().enumerate() {
        let id = id as u64;
        let op = match op {
            Op::AtBoundary {
                what,
                i,
                level,
                k,
                nudge,
                rel,
            } => {
                let width = level_width(size, tick, level);
                let base = if rel { wheel.now() / width * width } else { 0 };
                let at = base
                    .saturating_add(width.saturating_mul(k))
                    .saturating_add(u64::from(nudge))
                    .saturating_sub(2);
                let at = if nudge == 5 { u64::MAX - 1 } else { at };
                let at = if nudge == 6 { u64::MAX } else { at };
                match what {
                    0 => Op::Insert(at.saturating_sub(now)),
                    1 => Op::Reschedule(i, at.saturating_sub(now)),
                    2 => Op::AdvanceFar(at),
                    3 => Op::Pass(at.saturating_sub(now), i % 5 + 1),
                    _ => Op::PartialAdvance(at.saturating_sub(now), i % 7 + 1),
                }
            }
            Op::DriveNext(budget) => {
                wheel.take_new_head();
                armed = wheel.next_expiration().unwrap_or(u64::MAX);
                let t = armed.min(u64::MAX - 1);
                Op::Pass(t.saturating_sub(now), budget)
            }
            Op::PassToBoundary {
                level,
                nudge,
                budget,
            } => {
                let width = level_width(size, tick, level);
                let boundary = (wheel.now() / width)
                    .saturating_add(1)
                    .saturating_mul(width);
                let target = match nudge {
                    0 => boundary,
                    1 => boundary - 1,
                    _ => boundary.saturating_add(1),
                };
                Op::Pass(target.saturating_sub(now), budget)
            }
            Op::InsertPast(_) | Op::ReschedulePast(..) if mode != Mode::OrderedDue => {
                unordered = true;
                op
            }
            Op::Rearm { ago, .. } if mode != Mode::OrderedDue && ago > 0 => {
                unordered = true;
                op
            }
            op => op,
        };
        match op {
            Op::Insert(delta) => {
                let deadline = now.saturating_add(delta);
                let key = wheel.insert(deadline, id).unwrap();
                peeked.note_filed(&wheel, key);
                model.insert(id, deadline);
                keys.push((key, id));
            }
            Op::InsertPersistent(delta) => {
                let deadline = now.saturating_add(delta);
                let key = wheel.insert_persistent(deadline, id).unwrap();
                peeked.note_filed(&wheel, key);
                model.insert_persistent(id, deadline);
                keys.push((key, id));
            }
            Op::InsertAs(delta, timeout) => {
                let deadline = now.saturating_add(delta);
                let key = wheel.insert_as(deadline, id, timeout).unwrap();
                peeked.note_filed(&wheel, key);
                model.insert(id, deadline);
                keys.push((key, id));
                if timeout {
                    timeouts.insert(id);
                }
            }
            Op::Burst {
                delta,
                n,
                pattern,
                seed,
            } => {
                for i in 0..n {
                    let deadline = now
                        .saturating_add(delta)
                        .saturating_add(burst_offset(pattern, seed, i));
                    let id = 1 << 40 | id << 16 | i as u64;
                    let key = wheel.insert(deadline, id).unwrap();
                    peeked.note_filed(&wheel, key);
                    model.insert(id, deadline);
                    keys.push((key, id));
                }
            }
            Op::Remove(i) if !keys.is_empty() => {
                let (key, id) = keys[i % keys.len()];
                assert_eq!(wheel.remove(key).is_some(), model.remove(id));
            }
            Op::RemoveAll => {
                for &(key, id) in &keys {
                    assert_eq!(wheel.remove(key).is_some(), model.remove(id));
                }
                assert!(wheel.is_empty());
            }
            Op::InsertUnreachable => {
                let key = wheel.insert_unreachable(id).unwrap();
                peeked.note_filed(&wheel, key); // parked: noted, and left out
                model.insert_unreachable(id);
                keys.push((key, id));
            }
            Op::InsertPersistentUnreachable => {
                let key = wheel.insert_persistent_unreachable(id).unwrap();
                model.insert_persistent_unreachable(id);
                keys.push((key, id));
            }
            Op::RescheduleUnreachable(i) if !keys.is_empty() => {
                let (key, id) = keys[i % keys.len()];
                assert_eq!(
                    wheel.reschedule_unreachable(key),
                    model.reschedule_unreachable(id)
                );
            }
            Op::Reschedule(i, delta) if !keys.is_empty() => {
                let (key, id) = keys[i % keys.len()];
                let deadline = now.saturating_add(delta);
                assert_eq!(
                    wheel.reschedule(key, deadline),
                    model.reschedule(id, deadline)
                );
                peeked.note_filed(&wheel, key);
            }
            Op::Advance(by) => {
                // One short of `u64::MAX`, as a driver's clock (unreachable entries stay).
                now = now.saturating_add(by).min(u64::MAX - 1);
                let mut got: Vec<_> = wheel
                    .advance(now)
                    .map(|e| {
                        assert!(e.deadline <= now, "early");
                        assert_eq!(e.parked, model.is_persistent(e.value));
                        assert_eq!(e.timeout, timeouts.contains(&e.value), "timeout mark");
                        (e.deadline, e.value)
                    })
                    .collect();
                // Handed out in deadline order (every deadline here is at or after the time it
                // was set, so even entries due at once share the earliest deadline).
                assert!(
                    unordered || got.windows(2).all(|p| p[0].0 <= p[1].0),
                    "deadline order at advance to {now}: {got:?}"
                );
                unordered = false;
                got.sort_unstable();
                assert_eq!(got, model.advance(now), "expiries at advance to {now}");
                wheel.take_new_head(); // the pass arms for what it finds
                let exact = exact_next_expiration(&wheel);
                armed = wheel.next_expiration().unwrap_or(u64::MAX);
                assert_eq!(exact.unwrap_or(u64::MAX), armed, "the pruning-free reading");
            }
            Op::PartialAdvance(by, budget) => {
                now = now.saturating_add(by).min(u64::MAX - 1);
                let mut budget = budget;
                let mut last = 0;
                while let Step::Fired(e) = wheel.poll_within(now, &mut budget) {
                    assert!(e.deadline <= now, "early");
                    assert!(
                        unordered || e.deadline >= last,
                        "deadline order within a pass"
                    );
                    last = e.deadline;
                    assert_eq!(e.parked, model.is_persistent(e.value));
                    assert_eq!(e.timeout, timeouts.contains(&e.value), "timeout mark");
                    assert_eq!(model.fire(e.value), Some(e.deadline), "fired once, on time");
                    if wheel.len() <= 512 {
                        wheel.assert_invariants();
                    }
                }
            }
            Op::ShrinkToFit => wheel.shrink_to_fit(),
            Op::Compact => {
                let len = wheel.len();
                let moved: std::collections::HashMap<Key, Key> =
                    wheel.compact().into_iter().collect();
                // Only the entries beyond the new length move, each into a vacancy below it,
                // keeping its generation; the others keep their keys.
                for (from, to) in &moved {
                    assert!(from.index as usize >= len && (to.index as usize) < len);
                    assert_eq!(from.generation, to.generation);
                }
                let mut beyond = 0;
                for (key, _) in keys.iter_mut() {
                    if !wheel.contains(*key) && !moved.contains_key(key) {
                        continue; // gone before (the model tracks the live ones)
                    }
                    beyond += usize::from(key.index as usize >= len);
                    if let Some(&to) = moved.get(key) {
                        *key = to;
                    }
                    assert!(wheel.contains(*key), "a live entry's key names it");
                }
                assert_eq!(
                    moved.len(),
                    beyond,
                    "compact moves exactly what lies beyond"
                );
            }
            Op::Pass(by, budget) => {
                now = now.saturating_add(by).min(u64::MAX - 1);
                let mut budget = budget;
                let mut last = 0;
                let done = loop {
                    match wheel.poll_within(now, &mut budget) {
                        Step::Fired(e) => {
                            assert!(e.deadline <= now, "early");
                            assert!(
                                unordered || e.deadline >= last,
                                "deadline order within a pass"
                            );
                            last = e.deadline;
                            assert_eq!(e.parked, model.is_persistent(e.value));
                            assert_eq!(e.timeout, timeouts.contains(&e.value), "timeout mark");
                            assert_eq!(model.fire(e.value), Some(e.deadline), "fired once");
                        }
                        Step::Done => break true,
                        Step::Yield => break false,
                    }
                };
                if done {
                    unordered = false;
                    assert_eq!(wheel.now(), now, "a pass done is at the time polled for");
                    // Nothing due is left behind.
                    assert!(
                        model.advance(now).is_empty(),
                        "a pass done left entries due at {now}"
                    );
                    // As a shard's pass: arm for the answer, drop the reports.
                    armed = wheel.next_expiration().unwrap_or(u64::MAX);
                    wheel.take_new_head();
                    // A pass done leaves nothing due at its own time: a driver that arms for
                    // the answer never spins.
                    assert!(
                        armed > now,
                        "next expiration {armed} not after a pass done at {now}"
                    );
                }
            }
            Op::AdvanceFar(to) => {
                now = now.max(to.min(u64::MAX - 1));
                let mut got: Vec<_> = wheel
                    .advance(now)
                    .map(|e| {
                        assert!(e.deadline <= now, "early");
                        assert_eq!(e.timeout, timeouts.contains(&e.value), "timeout mark");
                        (e.deadline, e.value)
                    })
                    .collect();
                assert!(
                    unordered || got.windows(2).all(|p| p[0].0 <= p[1].0),
                    "deadline order"
                );
                unordered = false;
                got.sort_unstable();
                assert_eq!(got, model.advance(now), "expiries at advance to {now}");
                wheel.take_new_head();
                armed = wheel.next_expiration().unwrap_or(u64::MAX);
            }
            Op::InsertNear(_) | Op::InsertPast(_) => {
                let deadline = relative_to(&op, wheel.now());
                let key = wheel.insert(deadline, id).unwrap();
                peeked.note_filed(&wheel, key);
                model.insert(id, deadline);
                keys.push((key, id));
            }
            Op::RescheduleNear(i, _) | Op::ReschedulePast(i, _) if !keys.is_empty() => {
                let (key, id) = keys[i % keys.len()];
                let deadline = relative_to(&op, wheel.now());
                assert_eq!(
                    wheel.reschedule(key, deadline),
                    model.reschedule(id, deadline)
                );
                peeked.note_filed(&wheel, key);
            }
            Op::Rearm { i, ahead, ago } => {
                let parked: Vec<_> = keys
                    .iter()
                    .filter(|&&(key, _)| wheel.is_parked(key))
                    .copied()
                    .collect();
                if let Some(&(key, id)) = parked.get(i % parked.len().max(1)) {
                    let deadline = wheel.now().saturating_add(ahead).saturating_sub(ago);
                    assert!(wheel.reschedule(key, deadline));
                    assert!(model.reschedule(id, deadline));
                }
            }
            Op::Clear => {
                wheel.clear();
                model.clear();
                unordered = false;
                for &(key, _) in &keys {
                    assert!(!wheel.contains(key), "a key left valid by clear");
                }
            }
            Op::DrainAll => {
                let mut drained = wheel.drain_all();
                drained.sort_unstable();
                assert_eq!(drained, model.ids(), "drained exactly the pending entries");
                model.clear();
                unordered = false;
                assert!(wheel.is_empty());
                for &(key, _) in &keys {
                    assert!(!wheel.contains(key), "a key left valid by drain_all");
                }
            }
            Op::Reserve(additional) => {
                let before = wheel.capacity();
                wheel.reserve(additional);
                assert!(
                    wheel.capacity() >= wheel.len() + additional,
                    "reserved room"
                );
                assert!(wheel.capacity() >= before, "reserve never shrinks");
            }
            Op::NextDeadline => {
                let busy = !wheel.due.is_empty() || wheel.flushing.is_some();
                let got = wheel.next_deadline();
                // The cached answer (what a `DelayQueue` asks, with the cache kept by the
                // peeks and the filings noted since) is the walk's.
                assert_eq!(
                    wheel.next_deadline_cached(&mut peeked),
                    got,
                    "next deadline, cached"
                );
                if busy && model.earliest().is_some() {
                    assert_eq!(got, Some(wheel.now()), "next deadline with work at hand");
                } else {
                    assert_eq!(got, model.earliest(), "next deadline");
                }
            }
            _ => {}
        }
        if let Some(head) = wheel.take_new_head() {
            armed = armed.min(head);
        }
        // The wheel's own record of the promised wake, which staging relies on.
        assert_eq!(wheel.promise, armed, "the promised wake");
        // The driver wakes by the time the first waiting entry is due (one filed already
        // past is due at once, at the wheel's time).
        if let Some(next) = model.earliest().map(|d| d.max(wheel.now())) {
            assert!(
                armed <= next,
                "a driver armed for {armed} would miss {next}"
            );
        }
        wheel.assert_invariants();
        assert_eq!(wheel.len(), model.len());
        check_peek(&wheel, &model);
        check_peek_cached(&wheel, &mut peeked);
        for &(key, id) in &keys {
            assert_eq!(wheel.is_parked(key), model.is_parked(id), "parked {id}");
            // A live key names its own value, a stale one nothing.
            let live = model.contains(id).then_some(id);
            assert_eq!(wheel.get(key).copied(), live, "get {id}");
            assert_eq!(wheel.get_mut(key).map(|v| *v), live, "get_mut {id}");
        }
    }
}

/// What `next_expiration` would answer, read without pruning the heap: the earliest bucket
/// that holds entries (as `bucket_wake` reads it), imminent entry's deadline, or the wheel's
/// time when entries are due.
fn exact_next_expiration<P: Persistence<u64>>(wheel: &Wheel<u64, P>) -> Option<u64> {
    if wheel.entries.len() == wheel.parked_len {
        return None;
    }
    if !wheel.due.is_empty() || wheel.flushing.is_some() {
        return Some(wheel.now);
    }
    // The earliest live bucket's first deadline, or the next live bucket's expiration if
    // sooner (with two buckets of the earliest expiration, that expiration).
    let mut live: Vec<(u64, u64)> = wheel
        .heap
        .iter()
        .filter_map(|(exp, id)| {
            let (level, slot) = split(id);
            let b = &wheel.levels.get(level)?.buckets[slot];
            (b.queued && b.expiration == exp && !b.list.is_empty()).then_some((exp, b.first))
        })
        .collect();
    live.sort_unstable();
    // As `bucket_wake` looks: in expiration order, while a bucket expires before the best.
    let mut wake = None::<u64>;
    for (i, &(exp, first)) in live.iter().enumerate() {
        let best = wake.unwrap_or(u64::MAX);
        if exp >= best {
            break;
        }
        if i == super::flush::WAKE_LOOKS {
            wake = Some(exp);
            break;
        }
        wake = Some(best.min(first));
    }
    let bucket = wake;
    let mut staged = None::<u64>;
    let mut idx = wheel.staged.head;
    while idx != NIL {
        let d = wheel.entries[idx as usize].deadline;
        staged = Some(staged.map_or(d, |s| s.min(d)));
        idx = wheel.entries[idx as usize].next;
    }
    let mut imminent = None::<u64>;
    let mut idx = wheel.imminent.list.head;
    while idx != NIL {
        let d = wheel.entries[idx as usize].deadline;
        imminent = Some(imminent.map_or(d, |s| s.min(d)));
        idx = wheel.entries[idx as usize].next;
    }
    [bucket, imminent, staged].into_iter().flatten().min()
}

/// `peek` names a waiting entry: one already due, or one with the model's earliest deadline.
fn check_peek<P: Persistence<u64>>(wheel: &Wheel<u64, P>, model: &Naive) {
    match wheel.peek() {
        None => assert_eq!(model.earliest(), None, "peek missed a waiting entry"),
        Some(key) => {
            assert!(!wheel.is_parked(key), "peek named a parked entry");
            let d = wheel.deadline(key).expect("peek names a live entry");
            // With nothing on the due list (handed out first, first come), the earliest.
            if d > wheel.now() || wheel.due.is_empty() {
                assert_eq!(Some(d), model.earliest(), "peek is not the earliest");
            }
        }
    }
}

/// `peek_cached` gives `peek`'s answer: the same due entry, or an entry with the same deadline.
fn check_peek_cached<P: Persistence<u64>>(wheel: &Wheel<u64, P>, cache: &mut PeekCache) {
    let cached = wheel.peek_cached(cache);
    let fresh = wheel.peek();
    if !wheel.due.is_empty() {
        assert_eq!(cached, fresh, "peek_cached: not the due list's head");
        return;
    }
    let deadline = |key: Option<Key>| key.map(|k| wheel.deadline(k).expect("a live entry"));
    assert_eq!(
        deadline(cached),
        deadline(fresh),
        "peek_cached: not the earliest"
    );
    if let Some(key) = cached {
        assert!(!wheel.is_parked(key), "peek_cached named a parked entry");
    }
    // Asked again with nothing changed, it walks nothing.
    let walked = cache.walked();
    assert_eq!(wheel.peek_cached(cache), cached);
    assert_eq!(cache.walked(), walked, "a second peek walked again");
}

/// The case the proptest shrank the survivor-bucket miss to (see
/// `a_bucket_that_survived_an_empty_wheel_reports_every_entry_that_joins_it`), kept so every
/// run replays it.
#[test]
fn model_regression_survivor_bucket_after_an_empty_wheel() {
    let ops = vec![
        Op::Insert(16),
        Op::Remove(0),
        Op::Remove(0),
        Op::Advance(0),
        Op::Burst {
            delta: 3,
            n: 7,
            pattern: 2,
            seed: 6522285709972068096,
        },
    ];
    run_model(4, 1, ops);
}

/// `compact` filed every entry anew by its deadline: an unreachable one (on the parked list,
/// asking for no wakeup) went into a top-level bucket, where it asked for cascades and `peek`
/// named it, and a persistent one that had fired was filed to fire again.
#[test]
fn compact_keeps_parked_entries_parked() {
    let mut wheel: Wheel<u64, Copied> = Wheel::persistent(4, 1);
    let unreachable = wheel.insert_unreachable(1).unwrap();
    let fired = wheel.insert_persistent(5, 2).unwrap();
    let waiting = wheel.insert(10, 3).unwrap();
    let got: Vec<_> = wheel.advance(5).map(|e| e.value).collect();
    assert_eq!(got, [2]);
    assert!(wheel.is_parked(fired));
    let expected = wheel.next_expiration();
    wheel.take_new_head();
    let moved: std::collections::HashMap<Key, Key> = wheel.compact().into_iter().collect();
    wheel.assert_invariants();
    assert!(moved.is_empty(), "no vacancy: nothing moves");
    assert!(wheel.is_parked(fired), "a fired entry stays parked");
    assert!(!wheel.is_parked(unreachable));
    assert_eq!(wheel.deadline(unreachable), Some(u64::MAX));
    assert_eq!(wheel.peek(), Some(waiting));
    assert_eq!(wheel.take_new_head(), None, "nothing new to report");
    assert_eq!(wheel.next_expiration(), expected);
    let got: Vec<_> = wheel.advance(u64::MAX - 1).map(|e| e.value).collect();
    assert_eq!(got, [3], "neither parked entry fires");
    assert_eq!(wheel.next_expiration(), None);
    assert_eq!(wheel.len(), 2);
}

/// An entry inserted as a timeout comes out marked as one, whatever the level it waited in,
/// rescheduled and compacted alike; other entries never are. (The driver wakes timeouts last
/// in a pass.)
#[test]
fn an_entry_inserted_as_a_timeout_comes_out_marked() {
    let mut wheel: Wheel<u64> = Wheel::new(4);
    let gone = wheel.insert(1, 0).unwrap();
    let near = wheel.insert_as(2, 1, true).unwrap();
    wheel.insert(3, 3).unwrap();
    wheel.insert(41, 4).unwrap();
    let far = wheel.insert_as(40, 2, true).unwrap();
    assert_eq!(wheel.remove(gone), Some(0));
    assert!(wheel.reschedule(near, 5));
    let moved: std::collections::HashMap<Key, Key> = wheel.compact().into_iter().collect();
    assert_eq!(moved.len(), 1, "the last entry moves into the vacancy");
    assert!(wheel.reschedule(moved[&far], 39));
    wheel.assert_invariants();
    let got: Vec<_> = wheel.advance(100).map(|e| (e.value, e.timeout)).collect();
    assert_eq!(got, [(3, false), (1, true), (2, true), (4, false)]);
}

/// What the proptest shrank the case above to, on a staging wheel: the unreachable entry,
/// filed into a bucket, lowered the promised wake below the driver's.
#[test]
fn model_regression_compact_keeps_an_unreachable_entry_out_of_the_buckets() {
    run_model_staging(4, 1, vec![Op::InsertUnreachable, Op::Compact], true);
    // Compacting relinks what was linked before: it must not lower the promised wake.
    run_model_staging(
        4,
        1,
        vec![
            Op::InsertPersistentUnreachable,
            Op::PartialAdvance(27249, 1),
            Op::RescheduleNear(0, 31),
            Op::InsertUnreachable,
            Op::Insert(31),
            Op::InsertNear(31),
            Op::RescheduleNear(7943829936730935352, 63),
            Op::Compact,
        ],
        true,
    );
    run_model(
        2,
        8,
        vec![Op::Insert(0), Op::RescheduleUnreachable(0), Op::Compact],
    );
}

/// The case the proptest shrank a panic to: a pass cut short by its budget in the middle of
/// a level-1 bucket, every entry removed, then `shrink_to_fit` released the level of the
/// bucket the wheel was still flushing, and the next pass indexed a level that was gone.
#[test]
fn model_regression_shrink_to_fit_in_the_middle_of_a_flush() {
    let ops = vec![
        Op::Insert(4096),
        Op::Insert(0),
        Op::Insert(2208),
        Op::PartialAdvance(2208, 6),
        Op::RemoveAll,
        Op::ShrinkToFit,
        Op::Advance(0),
    ];
    run_model(4, 1, ops);
}

proptest! {
    // PROPTEST_CASES raises the count for long runs (see the README's fuzzing note).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn matches_naive_model_size_64(ops in proptest::collection::vec(op(), 1..300)) {
        run_model(64, 1, ops);
    }

    #[test]
    fn matches_naive_model_size_4(ops in proptest::collection::vec(op(), 1..300)) {
        run_model(4, 1, ops);
    }

    /// Buckets wider than the time unit: entries must still come out exactly when time
    /// reaches their deadline, never at their bucket's start or end.
    #[test]
    fn matches_naive_model_wide_buckets(ops in proptest::collection::vec(op(), 1..300)) {
        run_model(64, 8, ops);
    }

    #[test]
    fn matches_naive_model_size_4_wide_buckets(ops in proptest::collection::vec(op(), 1..300)) {
        run_model(4, 32, ops);
    }

    /// Ticks that are not a power of two of the time unit (a 10 ms tick counted in
    /// nanoseconds, say): placement divides by the tick, handing out stays exact.
    #[test]
    fn matches_naive_model_odd_ticks(
        tick in prop_oneof![Just(3u64), Just(7), Just(1000), 2u64..5000],
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        run_model(8, tick, ops);
    }

    /// Thousands of entries in one tick (tied, rising, scattered), as a burst of timers for
    /// one instant makes them: handed out in deadline order, a budget at a time.
    #[test]
    fn matches_naive_model_crowded_ticks(
        tick in prop_oneof![Just(1u64), Just(1000), Just(1 << 10), 2u64..5000],
        ops in proptest::collection::vec(crowd_op(), 1..16),
    ) {
        run_model(64, tick, ops);
    }

    /// The same models on wheels that stage recent entries (a timer's shards): placed late,
    /// they come out as if placed at once.
    #[test]
    fn matches_naive_model_staging(ops in proptest::collection::vec(op(), 1..300)) {
        run_model_staging(64, 1, ops, true);
    }

    #[test]
    fn matches_naive_model_staging_size_4_odd_ticks(
        tick in prop_oneof![Just(1u64), Just(7), Just(1000), 2u64..5000],
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        run_model_staging(4, tick, ops, true);
    }

    /// The models on a wheel that hands entries due at once out in deadline order (a
    /// `DelayQueue`'s), crowded ticks included.
    #[test]
    fn matches_naive_model_ordered_due(
        tick in prop_oneof![Just(1u64), Just(7), Just(1 << 10), 2u64..5000],
        ops in proptest::collection::vec(ordered_op(), 1..300),
    ) {
        run_model_on(64, tick, ops, Mode::OrderedDue);
    }

    #[test]
    fn matches_naive_model_ordered_due_crowded_ticks(
        tick in prop_oneof![Just(1u64), Just(1 << 10), 2u64..5000],
        ops in proptest::collection::vec(crowd_op(), 1..16),
    ) {
        run_model_on(4, tick, ops, Mode::OrderedDue);
    }

    #[test]
    fn matches_naive_model_staging_crowded_ticks(
        tick in prop_oneof![Just(1u64), Just(1000), 2u64..5000],
        ops in proptest::collection::vec(crowd_op(), 1..16),
    ) {
        run_model_staging(64, tick, ops, true);
    }

    /// The operations [`op`] never makes (see [`edge_op`]), on the smallest wheel (one tick
    /// wide or more), a staging one and an ordering one.
    #[test]
    fn matches_naive_model_edges_size_2(
        tick in prop_oneof![Just(1u64), Just(8), 2u64..5000],
        ops in proptest::collection::vec(edge_op(), 1..300),
    ) {
        run_model(2, tick, ops);
    }

    #[test]
    fn matches_naive_model_edges_staging(
        tick in prop_oneof![Just(1u64), Just(7), 2u64..5000],
        ops in proptest::collection::vec(edge_op(), 1..300),
    ) {
        run_model_staging(4, tick, ops, true);
    }

    #[test]
    fn matches_naive_model_edges_ordered_due(
        tick in prop_oneof![Just(1u64), Just(7), 2u64..5000],
        ops in proptest::collection::vec(ordered_edge_op(), 1..300),
    ) {
        run_model_on(4, tick, ops, Mode::OrderedDue);
    }

    /// What [`edge_op`] never makes either (see [`rare_op`]), on every kind of wheel.
    #[test]
    fn matches_naive_model_rare_ops(
        size in prop_oneof![Just(2usize), Just(4), Just(64)],
        tick in prop_oneof![Just(1u64), Just(8), Just(7), 2u64..5000],
        mode in prop_oneof![Just(Mode::Plain), Just(Mode::Staging), Just(Mode::OrderedDue)],
        ops in proptest::collection::vec(rare_op(), 1..300),
    ) {
        run_model_on(size, tick, ops, mode);
    }

    /// Crowded ticks compacted, passed through to a bucket boundary, asked for their next
    /// deadline, and filed into behind the wheel's time.
    #[test]
    fn matches_naive_model_rare_ops_crowded(
        size in prop_oneof![Just(2usize), Just(64)],
        tick in prop_oneof![Just(1u64), Just(1 << 10), 2u64..5000],
        mode in prop_oneof![Just(Mode::Plain), Just(Mode::Staging), Just(Mode::OrderedDue)],
        ops in proptest::collection::vec(
            prop_oneof![
                3 => crowd_op(),
                1 => Just(Op::Compact),
                1 => rare_op(),
            ],
            1..16,
        ),
    ) {
        run_model_on(size, tick, ops, mode);
    }

    /// Deadlines and pass targets on level boundaries, near `u64::MAX`, with ticks up to
    /// `u64::MAX`, and passes to each `next_expiration` answer, as a driver makes them.
    #[test]
    fn boundaries_extreme_ticks_and_driven_passes_match_the_model(
        size in prop_oneof![Just(2usize), Just(8), Just(32), Just(64), Just(128), Just(512), Just(1 << 11), Just(1 << 14), Just(1 << 16)],
        tick in prop_oneof![Just(1u64), Just(7), Just(1 << 20), Just(1_000_000), Just(u64::MAX), Just(u64::MAX - 1), Just(1 << 63), Just((1 << 63) + 1), any::<u64>().prop_map(|t| t.max(1))],
        mode in prop_oneof![Just(Mode::Plain), Just(Mode::Staging), Just(Mode::OrderedDue)],
        ops in proptest::collection::vec(boundary_op(), 1..200),
    ) {
        run_model_on(size, tick, ops, mode);
    }

    #[test]
    fn divider_matches_hardware_division(
        d in prop_oneof![1u64..10_000, any::<u64>().prop_map(|d| d.max(1))],
        x in prop_oneof![any::<u64>(), 0u64..1_000_000],
    ) {
        prop_assert_eq!(Divider::new(d).div(x), x / d);
    }
}

#[test]
fn divider_is_exact_at_the_edges() {
    let divisors = [
        1u64,
        2,
        3,
        7,
        1000,
        1_000_000,
        10_000_000,
        999_983,
        u64::MAX / 3,
        u64::MAX,
    ];
    for d in divisors {
        let div = Divider::new(d);
        let mut xs = vec![0, 1, d - 1, d, d.saturating_add(1), u64::MAX, u64::MAX - 1];
        for k in 1..200u64 {
            let m = k.saturating_mul(d);
            xs.extend([m - 1, m, m.saturating_add(1)]);
        }
        for x in xs {
            assert_eq!(div.div(x), x / d, "{x} / {d}");
        }
    }
}

/// Issue: cancelled timers made a far timer wake the driver. Buckets emptied by removals stay
/// in the heap, but `next_expiration` skips them and names the live bucket.
#[test]
fn next_expiration_skips_buckets_emptied_by_removals() {
    let mut w = Wheel::with_tick(64, 1_000_000); // 1 ms ticks in nanoseconds
    let keys: Vec<Key> = (1..=10_000u64)
        .map(|ms| w.insert(ms * 1_000_000, ms).unwrap())
        .collect();
    let hour = 3_600_000 * 1_000_000u64;
    w.insert(hour, 0).unwrap();
    for k in keys {
        w.remove(k).unwrap();
    }
    let next = w.next_expiration().unwrap();
    assert!(
        next > 10_000 * 1_000_000,
        "armed for an emptied bucket: {next}"
    );
    assert!(next <= hour);
    w.assert_invariants();
    // Driven by next_expiration, the hour-long entry, alone now, costs one wakeup.
    assert_eq!(next, hour, "its bucket's first deadline");
    let mut wakeups = 0;
    while let Some(t) = w.next_expiration() {
        wakeups += 1;
        if drain(&mut w, t).contains(&(hour, 0)) {
            break;
        }
    }
    assert_eq!(wakeups, 1, "{wakeups} wakeups");
}

/// Issue: a registration could wait for a whole cascade under the shard lock. A bucket of
/// 100k entries is moved down at most `budget` entries per call, and the wheel stays usable
/// (insert, remove, reschedule) between calls.
#[test]
fn a_huge_cascade_is_done_a_bounded_amount_at_a_time() {
    let mut w = Wheel::new(64);
    let n = 100_000u64;
    // All in one level-2 bucket: deadlines 8192..8192+n spread over ticks 8192..12287.
    let keys: Vec<Key> = (0..n)
        .map(|i| w.insert(8192 + i % 4096, i).unwrap())
        .collect();
    assert_eq!(w.levels(), 3);
    let mut fired = Vec::new();
    let mut yields = 0;
    let mut budget = 1024;
    let mut extra = None;
    loop {
        match w.poll_within(12_287, &mut budget) {
            Step::Fired(e) => fired.push(e.value),
            Step::Done => break,
            Step::Yield => {
                yields += 1;
                budget = 1024;
                w.assert_invariants();
                if yields == 3 {
                    // Mid-cascade: remove one, move one earlier, insert one.
                    assert!(w.remove(keys[5]).is_some());
                    assert!(w.reschedule(keys[6], 8192));
                    extra = Some(w.insert(9000, n).unwrap());
                }
            }
        }
    }
    assert!(
        yields >= n as usize / 1024,
        "{yields} yields for {n} entries"
    );
    assert!(!w.contains(extra.unwrap()));
    assert_eq!(
        fired.len(),
        n as usize,
        "every entry once, the removed one not"
    );
    assert!(!fired.contains(&5));
    assert!(fired.contains(&n));
    w.assert_invariants();
    assert!(w.is_empty());
}

#[test]
fn persistent_entries_park_when_they_fire_and_can_be_filed_again() {
    let mut w: Wheel<u64, Copied> = Wheel::persistent(64, 10);
    let k = w.insert_persistent(50, 7u64).unwrap();
    let other = w.insert(60, 8).unwrap();
    assert_eq!(w.next_expiration(), Some(50));
    let e = w.poll(55).unwrap();
    assert_eq!((e.key, e.deadline, e.value, e.parked), (k, 50, 7, true));
    assert!(w.is_parked(k) && w.contains(k));
    assert_eq!(w.len(), 2, "a parked entry still counts");
    assert_eq!(
        w.next_expiration(),
        Some(60),
        "a parked entry is not waited for"
    );
    assert!(w.poll(70).is_some_and(|e| e.key == other && !e.parked));
    assert_eq!(w.next_expiration(), None, "only a parked entry left");
    assert!(w.reschedule(k, 120));
    assert!(!w.is_parked(k));
    assert_eq!(w.next_expiration(), Some(120));
    assert!(w.poll(119).is_none());
    assert!(w.poll(120).is_some_and(|e| e.key == k && e.parked));
    assert_eq!(w.remove(k), Some(7));
    assert!(w.is_empty() && !w.contains(k));
    w.assert_invariants();
}

/// Found in review: a level-1 bucket expiring at the same time as the level-0 bucket just
/// flushed must be flushed before the imminent entries are handed out.
#[test]
fn ties_between_levels_keep_deadline_order() {
    let mut w = Wheel::with_tick(64, 4);
    w.insert(257, 1).unwrap(); // level 1, bucket expiring at 256
    assert!(drain(&mut w, 10).is_empty());
    w.insert(259, 2).unwrap(); // level 0, bucket expiring at 256 too
    assert_eq!(drain(&mut w, 300), vec![(257, 1), (259, 2)]);
}

#[test]
fn crowded_wide_bucket_hands_out_each_entry_in_order() {
    // 20k distinct deadlines inside one 2^20-unit bucket, handed out one deadline at a time,
    // as a driver woken for each would: every step pops from the imminent queues instead of
    // scanning the whole bucket (which made this quadratic).
    let mut w = Wheel::with_tick(64, 1 << 20);
    let n = 20_000u64;
    for i in 0..n {
        w.insert((1 << 20) + 1 + (i * 7919) % n, i).unwrap();
    }
    let mut last = 0;
    let mut count = 0;
    while let Some(t) = w.next_expiration() {
        for e in w.advance(t) {
            assert!(e.deadline >= last, "deadline order");
            assert!(e.deadline <= t);
            last = e.deadline;
            count += 1;
        }
    }
    assert_eq!(count, n);
}

/// A burst in one tick, registered in deadline order (ties and rising deadlines), waits on
/// the sorted run, not the heap; it comes out in order, a budget at a time, and the queues
/// give their memory back once it is out.
#[test]
fn a_crowded_tick_queues_in_a_sorted_run_and_gives_its_memory_back() {
    let tick = 1 << 20;
    let mut w = Wheel::with_tick(64, tick);
    let n = 100_000u64;
    let base = 5 * tick;
    for i in 0..n {
        w.insert(base + 10 + i / 3, i).unwrap();
    }
    // One entry out of order: it alone goes to the heap.
    w.insert(base + 5, n).unwrap();
    // Time reaches the tick before the entries' deadlines: all of them wait as imminent.
    assert!(w.poll(base + 1).is_none());
    assert_eq!(w.imminent.sizes().0 + w.imminent.sizes().1, n as usize + 1);
    assert_eq!(
        w.imminent.sizes().1,
        1,
        "only the out-of-order entry in the heap"
    );
    w.assert_invariants();
    let mut out = Vec::new();
    let mut budget = 1024;
    loop {
        match w.poll_within(base + tick - 1, &mut budget) {
            Step::Fired(e) => out.push(e.deadline),
            Step::Yield => budget = 1024,
            Step::Done => break,
        }
    }
    assert_eq!(out.len(), n as usize + 1);
    assert!(out.windows(2).all(|p| p[0] <= p[1]), "deadline order");
    assert_eq!(out[0], base + 5);
    let (run, heap, capacity) = w.imminent.sizes();
    assert_eq!((run, heap), (0, 0));
    assert!(
        capacity < 1000,
        "the burst's memory is given back: {capacity}"
    );
    w.assert_invariants();

    // A burst cancelled while it waits in the current tick gives its memory back too.
    assert!(w.poll(base + 3 * tick).is_none());
    let at = w.now() + 1;
    let keys: Vec<Key> = (0..n).map(|i| w.insert(at + i / 4, i).unwrap()).collect();
    assert!(
        w.imminent.sizes().2 >= n as usize,
        "the burst waits as imminent"
    );
    for k in keys {
        assert!(w.remove(k).is_some());
    }
    assert!(w.imminent.sizes().2 < 1000, "a cancelled burst's memory");
    w.assert_invariants();
}

/// The imminent queues keep room for a burst of up to a few thousand entries when they empty
/// (the next burst then allocates nothing), but `shrink_to_fit` and `compact` give it back.
#[test]
fn shrink_to_fit_and_compact_give_back_the_imminent_queues() {
    let tick = 1 << 20;
    for compact in [false, true] {
        let mut w = Wheel::with_tick(64, tick);
        assert!(w.poll(5 * tick + 1).is_none());
        let at = w.now() + 1;
        // Out of order, so both the run and the heap grow.
        for i in 0..3000u64 {
            w.insert(at + (i * 7919) % 1000, i).unwrap();
        }
        let mut out = 0;
        while w.poll(6 * tick).is_some() {
            out += 1;
        }
        assert_eq!(out, 3000);
        assert!(w.imminent.sizes().2 >= 1000, "kept for the next burst");
        let later = w.insert(9 * tick, 0).unwrap();
        if compact {
            w.compact();
        } else {
            w.shrink_to_fit();
        }
        assert_eq!(w.imminent.sizes().2, 0, "compact {compact}");
        w.assert_invariants();
        assert!(w.contains(later) || compact);
        assert_eq!(drain(&mut w, 9 * tick).len(), 1);
    }
}

/// A loop that peeks and removes, over entries crowded in one bucket (one tick, or one slot
/// of the second level), sees them in deadline order and walks each entry a few times in all:
/// a peek that walked the bucket every time walked n²/2 entries (200 million here).
#[test]
fn a_peek_and_remove_loop_over_a_crowded_bucket_walks_each_entry_a_few_times() {
    let tick = 1_000_000;
    for (from, spread) in [(5 * tick, tick), (2_000 * tick, 64 * tick)] {
        let mut w: Wheel<u64> = Wheel::with_tick(64, tick);
        w.order_due();
        let n = 20_000u64;
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut deadlines = Vec::new();
        for i in 0..n {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let d = from + s % spread;
            w.insert(d, i).unwrap();
            deadlines.push(d);
        }
        deadlines.sort_unstable();
        let mut cache = PeekCache::default();
        let mut seen = 0;
        while let Some(key) = w.peek_cached(&mut cache) {
            assert_eq!(
                w.deadline(key),
                Some(deadlines[seen]),
                "peek {seen}: not the earliest"
            );
            assert!(w.remove(key).is_some());
            seen += 1;
            if seen % 997 == 0 {
                // An insert now and then, earlier than everything left: noted, not walked.
                let walked = cache.walked();
                let early = w.insert(deadlines[seen] - 1, n).unwrap();
                cache.note_filed(&w, early);
                assert_eq!(w.peek_cached(&mut cache), Some(early));
                assert_eq!(
                    cache.walked(),
                    walked,
                    "a noted insert made the cache again"
                );
                w.remove(early);
            }
        }
        assert_eq!(seen, n as usize);
        assert!(
            cache.walked() <= 16 * n,
            "{} entries walked for {n} peeks",
            cache.walked()
        );
    }
}

/// Peeks now and then, between operations of every kind, some filings not noted: each answer
/// is a fresh walk's (several noted filings, removals and passes between two peeks; the model
/// runs peek after every operation). Seeded; a cold review's fuzz, kept.
#[test]
fn peek_cached_matches_a_fresh_walk_with_sparse_peeks() {
    sparse_peeks(0x1234_5678_9abc_def1, 600, 300, None);
}

/// As above, with bursts of 1,100 to 1,600 noted filings now and then, so that a walk finds
/// more than the cache keeps (1,024 entries, or an eighth) and the filings noted between two
/// peeks overflow what it notes (1,024), making the next peek walk again.
#[test]
fn peek_cached_matches_a_fresh_walk_past_what_it_keeps_and_notes() {
    sparse_peeks(0x0f1e_2d3c_4b5a_6978, 40, 200, Some(12));
}

/// `rounds` of `steps` random operations with sparse peeks, each checked against a fresh walk;
/// with `burst`, one step in `burst` (on average) files a burst of 1,100 to 1,600 entries.
fn sparse_peeks(seed: u64, rounds: u64, steps: u64, burst: Option<u64>) {
    let mut s = seed;
    let mut rnd = move |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    for round in 0..rounds {
        let tick = [1u64, 7, 1000][(round % 3) as usize];
        let size = [2usize, 4, 64][(round / 3 % 3) as usize];
        let mut w: Wheel<u64> = Wheel::with_tick(size, tick);
        if round % 2 == 0 {
            w.order_due();
        }
        let mut cache = PeekCache::default();
        let mut keys: Vec<Key> = Vec::new();
        let span = [50u64, 5_000, 5_000_000][rnd(3) as usize];
        for step in 0..steps {
            let now = w.now();
            if burst.is_some_and(|b| rnd(b) == 0) {
                for _ in 0..1_100 + rnd(500) {
                    let k = w.insert(now + rnd(span), step).unwrap();
                    cache.note_filed(&w, k);
                    keys.push(k);
                }
            }
            match rnd(10) {
                0..=3 => {
                    let d = if rnd(20) == 0 {
                        u64::MAX
                    } else {
                        now + rnd(span)
                    };
                    let k = w.insert(d, step).unwrap();
                    if rnd(30) != 0 {
                        cache.note_filed(&w, k);
                    }
                    keys.push(k);
                }
                4 | 5 if !keys.is_empty() => {
                    let k = keys.swap_remove(rnd(keys.len() as u64) as usize);
                    w.remove(k);
                }
                6 if !keys.is_empty() => {
                    let k = keys[rnd(keys.len() as u64) as usize];
                    let d = if rnd(2) == 0 {
                        now + rnd(span)
                    } else {
                        // Earlier, by a little, or back where it was.
                        w.deadline(k).map_or(now, |d| d.saturating_sub(rnd(3)))
                    };
                    w.reschedule(k, d);
                    if rnd(30) != 0 {
                        cache.note_filed(&w, k);
                    }
                }
                7 => {
                    let mut budget = rnd(4) as usize + 1;
                    let _ = w.poll_within(now + rnd(span / 4 + 1), &mut budget);
                }
                8 => {
                    let to = now + rnd(span / 4 + 1);
                    while w.poll(to).is_some() {}
                }
                _ => {}
            }
            keys.retain(|&k| w.contains(k));
            if rnd(5) == 0 {
                let cached = w.peek_cached(&mut cache);
                let fresh = w.peek();
                if w.due.is_empty() {
                    let deadline = |k: Option<Key>| k.map(|k| w.deadline(k).unwrap());
                    assert_eq!(
                        deadline(cached),
                        deadline(fresh),
                        "round {round} step {step}"
                    );
                } else {
                    assert_eq!(
                        cached, fresh,
                        "round {round} step {step}: the due list's head"
                    );
                }
            }
        }
    }
}

/// Entries filed without a word to the cache (a compaction files every entry anew and moves
/// some keys; an insert not noted) make it walk again, and it finds them.
#[test]
fn peek_cached_notices_filings_it_was_not_told_of() {
    let mut w: Wheel<u64> = Wheel::with_tick(64, 1);
    let mut cache = PeekCache::default();
    let gone = w.insert(70, 9).unwrap();
    let a = w.insert(50, 0).unwrap();
    assert_eq!(w.peek_cached(&mut cache), Some(a));
    let b = w.insert(20, 1).unwrap(); // not noted
    assert_eq!(w.peek_cached(&mut cache), Some(b));
    assert_eq!(w.remove(gone), Some(9));
    let moved: std::collections::HashMap<Key, Key> = w.compact().into_iter().collect();
    assert_eq!(
        w.peek_cached(&mut cache),
        Some(moved[&b]),
        "a compacted key"
    );
    assert!(
        w.reschedule(a, 10),
        "an entry that did not move keeps its key"
    ); // not noted
    assert_eq!(w.peek_cached(&mut cache), Some(a));
    w.clear();
    assert_eq!(w.peek_cached(&mut cache), None);
}

#[test]
fn peek_finds_the_earliest_entry_even_behind_a_lazy_reschedule() {
    let mut w = Wheel::new(64);
    assert_eq!(w.peek(), None);
    let a = w.insert(100, 1u64).unwrap();
    let b = w.insert(5_000, 2).unwrap();
    assert_eq!(w.peek(), Some(a));
    // Moving `a` later is lazy: it stays in its early bucket, yet `b` is now the earliest.
    assert!(w.reschedule(a, 10_000));
    assert_eq!(w.peek(), Some(b));
    // An entry already due comes first.
    let c = w.insert(0, 3).unwrap();
    assert_eq!(w.peek(), Some(c));
    assert_eq!(w.poll(0).map(|e| e.key), Some(c));
    assert_eq!(w.peek(), Some(b));
}

#[test]
fn clear_keeps_memory_and_time_and_never_reuses_a_key() {
    let mut w = Wheel::new(64);
    let keys: Vec<Key> = (0..100).map(|i| w.insert(1_000 + i, i).unwrap()).collect();
    assert!(drain(&mut w, 500).is_empty());
    let cap = w.capacity();
    w.clear();
    w.assert_invariants();
    assert!(w.is_empty() && w.capacity() == cap && w.now() == 500);
    let fresh = w.insert(600, 7).unwrap();
    assert!(keys.iter().all(|&k| !w.contains(k) && k != fresh));
    assert_eq!(w.get(fresh), Some(&7));
    assert_eq!(drain(&mut w, 600), vec![(600, 7)]);
}

#[test]
fn keep_capacity_holds_the_slab_when_the_wheel_empties() {
    let mut w = Wheel::new(64);
    w.keep_capacity();
    w.reserve(10_000);
    let cap = w.capacity();
    assert!(cap >= 10_000);
    let k = w.insert(5, 1u64).unwrap();
    assert_eq!(w.remove(k), Some(1));
    assert_eq!(w.capacity(), cap, "kept although empty");
    w.shrink_to_fit();
    assert!(w.capacity() < cap, "given back on demand");
}

/// A timer filed again and again more than 64 ticks ahead (a 100-tick interval), and one
/// filed a tick ahead after an idle spell that left the wheel's time behind, allocate no level
/// anew each time.
#[test]
fn a_timer_refiled_a_level_up_reuses_its_level() {
    let mut w = Wheel::new(64);
    let mut now = 0;
    let first = w.insert(0, 0).unwrap();
    w.remove(first);
    let capacity = w.capacity();
    for _ in 0..100 {
        let k = w.insert(now + 100, 1).unwrap();
        assert_eq!(w.levels(), 2);
        now += 100;
        assert_eq!(drain(&mut w, now).len(), 1);
        assert!(!w.contains(k));
        assert_eq!(w.levels(), 2, "level 1 is kept for the next period");
        assert_eq!(w.capacity(), capacity, "the entry's slot reused");
    }
    // Idle spells: the owner's clock moves on 1,000 ticks with nothing filed, so the wheel's
    // time stays at its last poll, and a timer a tick ahead of the clock lands a level up.
    for _ in 0..100 {
        let clock = now + 1_000;
        let k = w.insert(clock + 1, 2).unwrap();
        assert_eq!(w.levels(), 2, "a tick ahead after idling: level 1");
        now = clock + 1;
        assert_eq!(drain(&mut w, now).len(), 1);
        assert!(!w.contains(k));
        assert_eq!(w.levels(), 2, "level 1 is kept after the idle spell");
        assert_eq!(w.capacity(), capacity, "the entry's slot reused");
    }
}

/// `next_deadline` sees the entries waiting in the current tick whichever queue holds them:
/// those that arrived in deadline order wait on the sorted run, not the heap, and a queue
/// whose head lives only there must not be taken for one with nothing pending.
#[test]
fn next_deadline_sees_imminent_entries_on_the_sorted_run() {
    let tick = 1 << 20;
    let mut w = Wheel::with_tick(64, tick);
    let base = 5 * tick;
    let first = w.insert(base + 10, 0).unwrap();
    w.insert(base + 20, 1).unwrap();
    w.insert(base + 30, 2).unwrap();
    assert!(w.poll(base + 1).is_none());
    assert_eq!(w.imminent.sizes().1, 0, "in order: nothing in the heap");
    assert_eq!(w.next_deadline(), Some(base + 10));
    // The run's head goes stale: the next live one is found.
    assert!(w.remove(first).is_some());
    assert_eq!(w.next_deadline(), Some(base + 20));
    // One out of order joins the heap and is the earliest.
    w.insert(base + 15, 3).unwrap();
    assert_eq!(w.next_deadline(), Some(base + 15));
    w.assert_invariants();
}

/// A staging wheel (a timer's shard) keeps entries for after the promised wake out of the
/// buckets: one removed before the next poll was never placed (no heap push, no level work),
/// one still there is placed by the poll and comes out at its deadline.
#[test]
fn a_staging_wheel_places_recent_entries_only_when_polled() {
    let mut w: Wheel<u64> = Wheel::with_tick(64, 1);
    w.stage_recent();
    // Nothing promised yet: the first entry is placed, and reported.
    let first = w.insert(5_000, 0).unwrap();
    assert_eq!(w.stats().staged, 0);
    let promised = w
        .take_new_head()
        .expect("the first entry reports its bucket");
    assert!(promised <= 5_000);
    // Later entries wait on the staging list: no report, no new bucket.
    let pushes = w.stats().heap_pushes;
    let a = w.insert(5_001, 1).unwrap();
    let b = w.insert(900_000, 2).unwrap();
    assert_eq!(w.stats().staged, 2);
    assert_eq!(
        w.stats().heap_pushes,
        pushes,
        "staged entries push no bucket"
    );
    assert_eq!(w.take_new_head(), None, "nothing new to wake for");
    w.assert_invariants();
    // An entry before the promised wake is placed at once.
    let early = w.insert(promised - 1, 3).unwrap();
    assert_eq!(w.stats().staged, 2);
    let sooner = w.take_new_head().expect("an earlier bucket is reported");
    assert!(sooner < promised);
    // Removed while staged: gone, as from a bucket.
    assert_eq!(w.remove(a), Some(1));
    assert!(!w.contains(a));
    w.assert_invariants();
    // The next answer places what is staged first.
    assert_eq!(w.next_expiration(), Some(sooner));
    assert_eq!(w.staged_len, 0);
    w.assert_invariants();
    assert_eq!(drain(&mut w, promised - 1), vec![(promised - 1, 3)]);
    assert!(w.contains(first) && w.contains(b) && !w.contains(early));
    assert!(drain(&mut w, 4_999).is_empty());
    assert_eq!(drain(&mut w, 5_000), vec![(5_000, 0)]);
    assert_eq!(drain(&mut w, 900_000), vec![(900_000, 2)]);
    assert!(w.is_empty());
}

/// A poll places staged entries before time moves, so one due by then comes out in deadline
/// order with the rest; moving a staged entry before the promised wake places it.
#[test]
fn a_poll_places_staged_entries_before_moving_time() {
    let mut w: Wheel<u64> = Wheel::with_tick(64, 1);
    w.stage_recent();
    w.insert(100, 0).unwrap();
    let promised = w.take_new_head().unwrap();
    let late = w.insert(150, 1).unwrap();
    w.insert(120, 2).unwrap();
    assert_eq!(w.stats().staged, 2);
    // Moved later: stays staged; moved before the promised wake: placed, and reported.
    assert!(w.reschedule(late, 160));
    assert_eq!(w.staged_len, 1 + 1);
    assert!(w.reschedule(late, promised - 1));
    assert_eq!(w.staged_len, 1);
    assert!(w.take_new_head().is_some_and(|h| h < promised));
    w.assert_invariants();
    // One late poll hands out all three in deadline order.
    assert_eq!(
        drain(&mut w, 1_000),
        vec![(promised - 1, 1), (100, 0), (120, 2)]
    );
}

/// The staging list holds at most `STAGE_MAX` entries: beyond, the oldest is placed, so a
/// poll places a bounded number.
#[test]
fn the_staging_list_is_bounded_and_places_its_oldest_first() {
    use super::stage::STAGE_MAX;
    let mut w: Wheel<u64> = Wheel::with_tick(64, 1);
    w.stage_recent();
    w.insert(10_000, 0).unwrap();
    w.take_new_head();
    let keys: Vec<Key> = (1..=STAGE_MAX as u64 + 10)
        .map(|i| w.insert(10_000 + i, i).unwrap())
        .collect();
    assert_eq!(w.staged_len, STAGE_MAX);
    assert_eq!(w.stats().staged, STAGE_MAX as u64 + 10);
    // The ten oldest were placed to make room; the newest are still staged.
    let head = w.staged.head;
    assert_eq!(w.entries[head as usize].value, 11, "the oldest left first");
    w.assert_invariants();
    for k in &keys[..5] {
        w.remove(*k).unwrap();
    }
    let mut budget = 7;
    assert!(matches!(w.poll_within(0, &mut budget), Step::Yield));
    assert_eq!(
        w.staged_len,
        STAGE_MAX - 7,
        "one unit of work per entry placed"
    );
    w.assert_invariants();
    let out = drain(&mut w, 20_000);
    assert_eq!(out.len(), STAGE_MAX + 10 + 1 - 5);
    assert!(out.windows(2).all(|p| p[0].0 <= p[1].0), "deadline order");
}

/// A wheel that does not stage (a `DelayQueue`'s) places every entry at once.
#[test]
fn a_wheel_without_staging_places_every_entry() {
    let mut w: Wheel<u64> = Wheel::with_tick(64, 1);
    w.insert(100, 0).unwrap();
    w.take_new_head();
    for i in 1..100 {
        w.insert(100 + i, i).unwrap();
    }
    assert_eq!(w.stats().staged, 0);
    assert_eq!(w.staged_len, 0);
}

/// What the proptest shrank a missed wake to: with no wake promised (the wheel emptied and
/// answered `None`), an entry at the horizon (`u64::MAX`) is no later than "never" and must
/// still be placed, and reported, at once.
#[test]
fn model_regression_nothing_is_staged_without_a_promised_wake() {
    let ops = vec![
        Op::Insert(u64::MAX),
        Op::Advance(0),
        Op::Remove(0),
        Op::Advance(0),
        Op::Insert(u64::MAX),
        Op::PartialAdvance(0, 1),
    ];
    run_model_staging(64, 1, ops, true);
}

/// An imminent entry removed (a timeout whose call answered within its last tick) must not
/// leave `next_expiration` naming its deadline: the owner would wake for nothing.
#[test]
fn next_expiration_skips_imminent_entries_removed() {
    let mut w = Wheel::with_tick(64, 1000);
    let early = w.insert(1500, 1).unwrap();
    w.insert(1800, 2).unwrap();
    assert!(drain(&mut w, 1000).is_empty());
    assert_eq!(w.next_expiration(), Some(1500));
    w.remove(early).unwrap();
    assert_eq!(w.next_expiration(), Some(1800));
    // Moved later within the tick: likewise.
    let k = w.insert(1600, 3).unwrap();
    assert_eq!(w.next_expiration(), Some(1600));
    assert!(w.reschedule(k, 1900));
    assert_eq!(w.next_expiration(), Some(1800));
    w.assert_invariants();
    assert_eq!(drain(&mut w, 1900), [(1800, 2), (1900, 3)]);
}

/// An entry moved again and again within the current tick (or, on an ordered-due wheel, to
/// deadlines already passed) between polls, beside others waiting there, leaves a queue item
/// behind each time: the queues must stay bounded by the entries waiting, whether the moves
/// go to new deadlines, back to the same one, or away to a later tick and back.
#[test]
fn moves_within_the_current_tick_keep_the_imminent_queues_bounded() {
    let tick = 1 << 20;
    for ordered in [false, true] {
        let mut w = Wheel::with_tick(64, tick);
        if ordered {
            w.order_due();
        }
        let base = 5 * tick;
        assert!(w.poll(base + 100).is_none());
        let first = w.insert(base + 200, 0u64).unwrap();
        let moved = w.insert(base + 300, 1).unwrap();
        let past = if ordered { base } else { base + 101 };
        for i in 0..100_000u64 {
            let deadline = match i % 4 {
                0 => base + 400 + i % 1000,
                1 => base + 400 + i % 1000, // the same again
                2 => 9 * tick,              // away to a later tick
                _ => past + i % 50,         // and back (already passed, when ordered)
            };
            assert!(w.reschedule(moved, deadline));
            let (run, heap, _) = w.imminent.sizes();
            assert!(
                run + heap <= 200,
                "ordered {ordered}: {run} + {heap} queue items for 2 entries after {i} moves"
            );
        }
        w.assert_invariants();
        assert!(w.reschedule(moved, base + 250));
        let out = drain(&mut w, base + tick - 1);
        assert_eq!(out, vec![(base + 200, 0), (base + 250, 1)]);
        assert!(!w.contains(first) && !w.contains(moved));
        assert_eq!(w.imminent.sizes().0 + w.imminent.sizes().1, 0);
    }
}

/// The case the proptest shrank a missed filing to: a reschedule of a stale key filed
/// nothing, and the cache, told of it, took the persistent insert before it (not told of) for
/// it.
#[test]
fn model_regression_peek_cache_told_of_a_reschedule_that_filed_nothing() {
    let ops = vec![
        Op::Insert(0),
        Op::Insert(0),
        Op::Insert(0),
        Op::Burst {
            delta: 0,
            n: 2,
            pattern: 0,
            seed: 0,
        },
        Op::Insert(0),
        Op::Insert(3056),
        Op::InsertUnreachable,
        Op::Burst {
            delta: 0,
            n: 1,
            pattern: 0,
            seed: 0,
        },
        Op::InsertUnreachable,
        Op::Insert(0),
        Op::Advance(0),
        Op::Insert(3056),
        Op::Insert(1),
        Op::PartialAdvance(1, 3),
        Op::InsertPersistent(6),
        Op::Reschedule(4498551827859517408, 0),
        Op::Advance(0),
    ];
    run_model_staging(64, 1, ops, true);
}
