//! A Kafka-style hierarchical timing wheel for Tokio: timeouts, sleeps and delayed tasks by
//! the million, registered and cancelled on per-thread shards rather than behind one lock.
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use tokio_timing_wheel::{sleep_wheel, spawn_after, timeout};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // An RPC under a deadline: the timer is registered only if the call is not ready at once,
//! // and removed in O(1) when it answers in time.
//! let reply = timeout(Duration::from_millis(500), async { "pong" }).await;
//! assert_eq!(reply, Ok("pong"));
//!
//! // A sleep.
//! sleep_wheel(Duration::from_millis(20)).await;
//!
//! // A delayed job: it runs in 1 s, unless `retry.cancel()` stops it before then.
//! let retry = spawn_after(Duration::from_secs(1), async { 1 + 1 });
//! assert_eq!(retry.await.unwrap(), 2);
//! let job = spawn_after(Duration::from_secs(1), async { unreachable!() });
//! assert!(job.cancel(), "it will never run");
//! # }
//! ```
//!
//! The free functions ([`sleep_wheel`], [`sleep_wheel_until`], [`timeout`](fn@timeout),
//! [`timeout_at`], [`spawn_after`], [`spawn_at`], [`interval`](fn@interval), [`interval_at`])
//! and [`DelayQueue::new`] use a default [`Timer`] (1 ms tick, 64 buckets per level, no
//! limit) created lazily for each Tokio runtime, so two runtimes never share a driver. Build a
//! [`Timer`] with [`Timer::builder`] to choose the tick, wheel size or a `max_pending` limit.
//!
//! The timer futures find the default timer through a per-thread cache keyed by task, so a
//! task on a multi-thread runtime pays no runtime lookup after its first timer on a thread.
//! One consequence, in corners Tokio discourages: a task of a multi-thread runtime that
//! enters another runtime (`block_on` inside `block_in_place`, `Handle::enter`), or a
//! `LocalSet` driven by one multi-thread runtime and then by another, may use the timer of
//! the multi-thread runtime it first used on that thread, where `tokio::time` would use the
//! runtime entered. That timer's own workers fire it while it lives; if that runtime shuts
//! down first, its pending timers resolve as shut down, and later calls find the current
//! runtime's timer. Builds with Tokio's `test-util` feature, where a runtime may keep a
//! paused clock of its own, skip the cache. [`spawn_after`]/[`spawn_at`] never use it, in any
//! build: they always find the current runtime's timer, and spawn on the current runtime.
//!
//! # Migrating from `tokio::time` and tokio-util
//!
//! [`time`] mirrors `tokio::time`: `use tokio::time::{sleep, timeout, Instant, ...}` becomes
//! `use tokio_timing_wheel::time::{sleep, timeout, Instant, ...}`, and tokio-util's
//! `DelayQueue` becomes [`DelayQueue`]. Tokio's and tokio-util's own timer tests pass with
//! only those imports changed, with two accepted differences: deadlines here are exact, so a
//! timer whose deadline falls between two of Tokio's 1 ms ticks may complete up to a tick
//! earlier than Tokio's would (never before its deadline); and moving the `DelayQueue` item
//! the task waits for to a later deadline, or removing it, moves the queue's timer on its next
//! poll rather than at once: the move wakes nothing (tokio-util's wakes the task if the wheel
//! slot it waits on next has already begun, and one of its tests asserts that wake), and
//! a queue not polled before the old deadline wakes its task once then with nothing due,
//! where tokio-util's does not. The [`time`] module's docs list every difference, also
//! those no such test meets: its migration table gives each tokio, tokio-util, hyper-util,
//! tower, tower-http, axum and tonic name, its counterpart here, and what differs in
//! behaviour or cost, and the notes below the table the rest.
//!
//! For the periodic and keyed halves of a service's timers, [`Interval`] replaces
//! `tokio::time::Interval` (same semantics, one wheel entry for its life, plus
//! [`Interval::set_period`]) and [`DelayQueue`] replaces tokio-util's `DelayQueue` (same API,
//! exact deadlines, no panic on far ones, no allocation per expiry): switching is a change of
//! imports.
//!
//! # Services
//!
//! With the `server`, `http` and `grpc` features, every timer a hyper, axum or tonic service
//! runs can live on the wheel: `server::serve` serves a tower service (an `axum::Router` as
//! is) with header-read, keep-alive, idle, age and shutdown limits in one call;
//! the `http` module has tower-http's 408 `TimeoutLayer` and body timeouts; the `grpc` module
//! honours and propagates `grpc-timeout` deadlines. The `hyper` and `tower` features have
//! `HyperTimer` and a drop-in for `tower::timeout`. These modules are named after the crates
//! they serve: after a glob import (`use tokio_timing_wheel::*`) a path such as
//! `hyper::rt::Timer` or `tower::ServiceExt` is ambiguous; import the names you use, or write
//! the crate's path as `::hyper`.
//!
//! # Guarantees
//!
//! - **Never early.** A timer fires at or after its deadline: deadlines and the current time
//!   are compared to the nanosecond (the tick only sorts timers into buckets).
//! - **On time.** Deadlines are kept to the nanosecond, so in virtual time (paused Tokio time)
//!   a timer fires at its deadline whatever the wheel's tick (a deadline off Tokio's own 1 ms
//!   grid, at the grid's next step, which is when Tokio wakes the wheel; with the paused clock
//!   itself off the grid, after a sub-millisecond `advance`, Tokio steps whole milliseconds from
//!   where it stands, up to 1 ms later, as for its own sleeps; see
//!   [`TimerMetrics::lateness`]); on a real clock, as soon as Tokio's own timer (1 ms
//!   resolution) allows, plus scheduling delay. Timers fire where Tokio fires its
//!   own, inside the worker's park or maintenance, so a saturated runtime delays their firing
//!   no more than `tokio::time`'s. The tasks they wake then wait in Tokio's run queues: when a
//!   burst of wakes overflows a worker's queue, Tokio keeps its older half and the tasks woken
//!   after the last overflow, and sends the rest behind the backlog, so the order of a pass's
//!   wakes decides who waits (see **Wake order**: timeouts come last). Measured with 300k calls
//!   spawned at once (the suite's `saturated` workload, six runs): timed-out calls' tasks
//!   run 1.5-2.2x sooner after their deadline than with `tokio::time`, completed calls' as
//!   soon (1.10x sooner to 1.09x later); run after a burst of a million sleeps in the same
//!   process, which leaves the allocator warm and the queues shorter, timed-out calls' are
//!   level to 2.75x sooner and completed calls' from 1.63x sooner to 1.63x later: those
//!   timers fire on time (within 0.25 ms of Tokio's), and the wait is in the run queues; part
//!   of it is the burst's extra CPU (the wheel's entries live in its slab, not in the tasks,
//!   and miss the cache more).
//! - **Wake order.** A pass takes the timers due at it shard by shard, each shard's in
//!   deadline order, and wakes those filed further ahead than the first level's span
//!   (`wheel_size` ticks past the wheel's time then, 64 by default: long sleeps, leases; a
//!   timer once filed so keeps the mark when reset) as it takes them; then, once every shard
//!   is done, the short ones; then, last, the timeouts: a [`Timeout`]'s (so the tower,
//!   tower-http and gRPC layers' too), and the limits of [`IdleTimeout`], of the `http`
//!   feature's body timeouts and of the `server` feature's connections (the sleeps hyper asks
//!   a `HyperTimer` for are sleeps: it does not say which are timeouts). Up to 4096 wakes wait
//!   for the end of the pass; past that, the rest are woken as they are taken. A `Sleep`
//!   [reset](Sleep::reset) to a later deadline (without a `max_pending` limit) keeps its place
//!   at the deadline it was filed for until it fires there, so it may be woken ahead of
//!   timers due before its new deadline.
//! - **Where wakers run.** A firing pass runs where Tokio fires its own timers, in its time
//!   driver, when the timer's alarm (a Tokio sleep) fires, with one exception: a registration
//!   or reset that must re-arm the alarm does so on its own thread, and if a pass is due then
//!   (work filed for a time already passed, or the alarm fired meanwhile) it runs that pass
//!   there, waking the tasks it fires from inside the call (a `poll`, a `reset`,
//!   [`spawn_after`], ...), which Tokio's own timer never does. With Tokio's wakers this only
//!   schedules tasks; a waker of your own must not block on a lock that the code registering a
//!   timer may hold. A cancel never runs a pass. A shutdown ([`Timer::shutdown`], or a
//!   registration that finds the runtime shutting down) wakes every pending timer's task on the
//!   calling thread.
//! - **Exactly once.** A delayed task either runs once or is cancelled once
//!   ([`DelayedTask::cancel`] returns `true` only for the call that stopped it).
//! - **Bad input gets an answer**: zero and past deadlines complete on the first poll;
//!   `Duration::MAX` and other overflowing deadlines saturate (the duration of a sleep,
//!   interval period or delayed task is capped at 30 years, as Tokio 1.54 caps its sleeps'; a
//!   timeout of a duration too large to add never elapses, as Tokio's) and never panic on
//!   the overflow;
//!   a full timer returns [`TimerError::Full`] from the `try_*` methods (every waiting timer
//!   takes a slot, a timeout that never elapses too: a shutdown must resolve it); a panicking
//!   delayed task is caught and reported as [`DelayedError::is_panic`].
//! - **Shutdown resolves everything** (see [`Timer::shutdown`]): pending sleeps complete,
//!   timeouts return [`Elapsed`] with [`Elapsed::is_shutdown`], delayed tasks resolve with
//!   [`DelayedError::is_shutdown`]. The same happens when the runtime shuts down. A sleep's
//!   or timeout's deadline reached before the shutdown still counts as elapsed; a delayed
//!   task not yet started when the timer shut down never runs, even if its deadline had
//!   passed.
//! - **Re-polls are cheap.** A pending sleep or timeout polled again by the same task (a
//!   request timeout at every wake of its handler) reads two atomics, as Tokio's does: no lock,
//!   no reference count. A new task's waker is swapped in under the shard's lock.
//! - **Cancels free at once, and never wait.** Dropping a pending sleep or timeout removes it
//!   from the wheel, freeing its memory and its `max_pending` slot. Two drops are handed over
//!   to the timer's shard instead (unless a firing pass may have reached the timer's deadline;
//!   then the drop waits for the lock): at once the timer can never fire, leaves
//!   [`Timer::pending`] and frees its slot. A drop on another thread than the one that created
//!   the future (work stealing moved it) while a firing pass is due within 10 ms of the last:
//!   its memory, with the waker it holds, is reclaimed by that pass or the shard's next
//!   registration. A drop that finds the shard's lock held by another thread: by the shard's
//!   next registration or the timer's next pass. A drop never runs a pass or wakes anything.
//! - **Idle costs nothing**: with no timer pending the timer holds no Tokio sleep once the
//!   wakeup it had set has come (a cancel, kept cheap, leaves it set: one pass that finds
//!   nothing, at most, after the last timer goes); a timer alone, an hour away or a
//!   millisecond, costs one firing pass, at its deadline (its cascades down the levels happen
//!   in that pass, or in passes other timers make), and wakes the runtime as often as Tokio's
//!   own sleep (the alarm is a Tokio sleep, which Tokio's wheel cascades as its own).
//! - **Horizon.** A timer counts nanoseconds since it was built in a `u64`: deadlines more than
//!   584 years after that never fire (rather than fire early).
//!
//! # Design
//!
//! The data structure is a hierarchical timing wheel (Varghese & Lauck; Kafka's
//! `TimingWheel`), kept apart from the runtime glue in `src/wheel/`, which knows nothing of
//! Tokio and counts time in `u64` units (nanoseconds, for a timer):
//!
//! - level 0 has `wheel_size` buckets one tick wide; level `k + 1`'s tick is level `k`'s span;
//!   overflow levels are created lazily, bottom-up, and released when empty;
//! - entries keep their exact deadline; when time reaches a level-0 bucket, its entries not yet
//!   due wait on a list kept in deadline order, and the driver sleeps until the earliest of
//!   them, so a timer fires at its deadline rather than at its bucket's end; entries that
//!   arrive in deadline order (a bucket holds them in registration order, so a burst of
//!   timers for one instant does) are queued at the end of a sorted run, with no heap
//!   operation: each of a million timers due in one tick costs O(1);
//! - the work of one step is bounded (entries handed out or cascaded, heap items popped), so a
//!   bucket of a million entries cascades a batch at a time and never holds a lock long;
//! - entries live in a slab and are chained into buckets through slab indices, so insert,
//!   cancel and reschedule are O(1); a later deadline is re-filed lazily (on a timer, only
//!   within its bucket's slot);
//! - every non-empty bucket has an item in a min-heap keyed by its expiration, so time jumps
//!   straight to the next expiring bucket; expired higher-level buckets cascade down. A bucket
//!   also keeps the earliest deadline filed into it, and the driver sleeps until the earliest
//!   of those among the buckets that start before it: the pass then pops and cascades
//!   every bucket expired by its time, so a bucket's start costs no wakeup of its own (past
//!   four buckets that start before it, the next one's start bounds the wake; a timer
//!   removed beside others may leave its deadline as an early wake);
//! - a timer's wheels stage recent entries: a one-shot entry whose deadline is at or after the
//!   time its shard last told the driver to wake by (the driver is armed no later) joins a
//!   short list (at most 512, oldest placed first) instead of a bucket, and the next pass
//!   places it before time moves, so a timeout cancelled before then (an RPC answered in
//!   time) costs no placement at all. Nothing is staged while the shard has no wake pending.
//!
//! The runtime glue:
//!
//! - **Shards.** A [`Timer`] holds several wheels ("shards", by default four per CPU), each
//!   behind its own mutex. A thread always registers into the same shard, so workers
//!   registering and cancelling at high rates do not contend with each other; a future
//!   remembers its shard and cancels there. This is what Tokio's single driver lock
//!   (tokio#6504, tokio#7226) cannot do. On a busy timer a cancel from another thread (work
//!   stealing moved the future to another worker) hands its key to the shard's inbox rather
//!   than take the lock and write the wheel lines the shard's own worker is writing, as does
//!   a cancel that finds the lock taken; whoever takes the lock next, the shard's worker
//!   registering or the pass due, removes it before filing or firing anything.
//! - **Finding the default timer.** The free functions look up the current runtime's timer
//!   once per task and thread (a task's later timers skip the runtime-handle clone, whose
//!   reference count every worker touches); see the note under the quick start. A sleep or
//!   timeout keeps a counted reference to its shard; for a multi-thread runtime's default
//!   timer, a worker that drops other workers' (work stealing) holds their references back
//!   and drops them 64 at a time, so a timeout made on one worker and dropped on another
//!   does not move the count's cache line between them with every timeout.
//! - **Firing, where Tokio fires its own timers.** A timer owns one Tokio sleep, the alarm, set
//!   for the earliest work of any shard and polled with the timer's own waker, not a task's.
//!   Tokio fires it in a worker's park or maintenance (every 61 polls on a busy worker), and
//!   the wake runs the firing pass right there: one shard at a time, a bounded batch of due
//!   entries per lock hold, wakers woken after the lock is released, a panicking waker
//!   caught; then the alarm is set for the next earliest work. No task is scheduled on the
//!   way, so under load our timers wait as long as Tokio's own (a driver task would wait
//!   behind every runnable task, and the tasks it wakes would wait again), and a blocked
//!   worker holds up only its own tasks. Because the alarm is a Tokio timer, paused time and
//!   auto-advance drive the wheel; with nothing pending there is no alarm at all.
//! - **Arming.** A registration moves the alarm only when it creates a bucket earlier than the
//!   armed time (one atomic load otherwise). Tokio's wake and such registrations ask for the
//!   driver's work through a small protocol that elects one runner at a time, which does it on
//!   its own thread (re-setting the alarm; a pass too if the alarm is already due), so passes
//!   never overlap or re-enter; loom models check that no registration is left without a
//!   wakeup (`src/driver/loom_tests.rs`).
//! - **Lifetime.** Each timer parks one task on its runtime that never wakes; when the runtime
//!   shuts down it drops that task first, and its drop shuts the timer down, resolving every
//!   pending future, before Tokio's time driver goes. References held back (above) are held
//!   only by threads running tasks, usually the runtime's workers, which end with it. A
//!   task of another runtime (a current-thread runtime's, a `LocalSet`'s, a blocking task)
//!   that dropped this runtime's sleeps may keep, after this runtime is dropped, its
//!   drained timer and its handle until its thread next holds a reference back, or ends, as
//!   the per-thread caches of the default timer may too: the one last looked up, and, on a
//!   thread where a task entered another multi-thread runtime (`block_on` inside
//!   `spawn_blocking` or `block_in_place`), up to 64 entries of the per-task cache, each until
//!   a later task's lookup on that thread takes its place.
//! - **Delayed tasks** wait inside the wheel, not as Tokio tasks: the wheel entry's waker is
//!   the task cell, and firing it spawns the future. Cancellation is one compare-and-swap plus
//!   an O(1) removal that frees the future at once.
// The lint levels (missing_docs, unreachable_pub, ...) are set once, in Cargo.toml's
// [lints.rust], for every target; only what holds for the library alone is set here.
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]
// `Option::is_none_or` (Rust 1.82) could replace the wheel's few `map_or(true, ..)` calls;
// they read as well, so clippy's suggestion is turned off.
#![allow(clippy::unnecessary_map_or)]

mod clock;
pub mod delay_queue;
mod delayed_task;
mod driver;
mod error;
mod fallback;
mod interval;
mod lateness;
mod loom;
mod sleep;
pub mod time;
mod timeout;
mod timer;
mod wheel;

mod integrations;

#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub use crate::integrations::grpc;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use crate::integrations::http;
#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub use crate::integrations::hyper;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use crate::integrations::server;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use crate::integrations::tower;

#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;

/// Whether this build's Tokio has its `test-util` feature compiled in (then every
/// `tokio::time::Instant::now()` pays for the paused-clock check). For the benchmark suite,
/// which refuses to measure such a build; not part of the API.
#[doc(hidden)]
pub fn tokio_has_test_util() -> bool {
    crate::clock::clocks_can_pause()
}

/// The README's Rust examples, compiled as doc tests so they cannot drift from the API. They
/// use the `server` and `http` features, so they run with those (CI runs `--all-features`).
#[cfg(all(doctest, feature = "server", feature = "http"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use crate::delay_queue::DelayQueue;
pub use crate::delayed_task::{spawn_after, spawn_at, DelayedTask};
pub use crate::error::{BuildError, DelayedError, Elapsed, TimerError};
pub use crate::integrations::idle::{IdleTimeout, IdleTimeoutBuilder};
pub use crate::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use crate::lateness::Lateness;
pub use crate::sleep::{sleep_wheel, sleep_wheel_until, Sleep};
pub use crate::timeout::{timeout, timeout_at, Timeout};
pub use crate::timer::builder::Builder;
pub use crate::timer::metrics::TimerMetrics;
pub use crate::timer::Timer;
