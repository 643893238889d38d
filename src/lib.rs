//! A Kafka-style hierarchical timing wheel for Tokio: timeouts, sleeps and delayed tasks by
//! the million, far cheaper to register and cancel than `tokio::time`.
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
//! // A delayed job that can be cancelled before it starts.
//! let retry = spawn_after(Duration::from_secs(1), async { 1 + 1 });
//! assert_eq!(retry.await.unwrap(), 2);
//! # }
//! ```
//!
//! The free functions ([`sleep_wheel`], [`sleep_wheel_until`], [`timeout`], [`timeout_at`],
//! [`spawn_after`], [`spawn_at`], [`interval`], [`interval_at`]) and [`DelayQueue::new`] use a
//! default [`Timer`] (1 ms tick, 64 buckets per level, no limit) created lazily for each Tokio
//! runtime, so two runtimes never share a driver. Build a [`Timer`] with [`Timer::builder`] to
//! choose the tick, wheel size or a `max_pending` limit.
//!
//! For the periodic and keyed halves of a service's timers, [`Interval`] replaces
//! `tokio::time::Interval` (same semantics, one wheel entry for its life, plus
//! [`Interval::set_period`]) and [`DelayQueue`] replaces tokio-util's `DelayQueue` (same API,
//! exact deadlines, no panic on far ones, no allocation per expiry): switching is a change of
//! imports.
//!
//! # Guarantees
//!
//! - **Never early.** A timer fires at or after its deadline: deadlines round up to the next
//!   tick, the current time rounds down.
//! - **On time.** Deadlines are kept to 1/1024 of a tick, so in virtual time (paused Tokio
//!   time) a timer fires at its deadline, and at most one tick late by construction; on a real
//!   clock, as soon as the Tokio timer that wakes the driver (1 ms resolution) allows, plus
//!   scheduling delay: as punctual as `tokio::time` (see the README's results).
//! - **Deadline order.** Timers registered from one thread (one shard) that are due at the
//!   same driver pass are woken in deadline order; a pass wakes shard by shard.
//! - **Exactly once.** A delayed task either runs once or is cancelled once
//!   ([`DelayedTask::cancel`] returns `true` only for the call that stopped it).
//! - **Bad input gets an answer**: zero and past deadlines complete on the first poll;
//!   `Duration::MAX` and other overflowing deadlines saturate (about 30 years) and never panic;
//!   a full timer returns [`TimerError::Full`] from the `try_*` methods; a panicking delayed
//!   task is caught and reported as [`DelayedError::is_panic`].
//! - **Shutdown resolves everything** (see [`Timer::shutdown`]): pending sleeps complete,
//!   timeouts return [`Elapsed`] with [`Elapsed::is_shutdown`], delayed tasks resolve with
//!   [`DelayedError::is_shutdown`]. The same happens when the runtime shuts down.
//! - **Idle costs nothing**: with no timer pending the driver waits on a notification only;
//!   an hour-long timer costs a handful of wakeups (one per level on its way down).
//!
//! # Design
//!
//! The data structure is a hierarchical timing wheel (Varghese & Lauck; Kafka's
//! `TimingWheel`), kept apart from the runtime glue in `src/wheel/`, which knows nothing of
//! Tokio and counts time in `u64` units (1/1024 of a tick):
//!
//! - level 0 has `wheel_size` buckets one tick wide; level `k + 1`'s tick is level `k`'s span;
//!   overflow levels are created lazily, bottom-up, and released when empty;
//! - entries keep their exact deadline; when time reaches a level-0 bucket, its entries not yet
//!   due wait on a short list, and the driver sleeps until the earliest of them, so a timer
//!   fires at its deadline rather than at its bucket's end;
//! - entries live in a slab and are chained into buckets through slab indices, so insert,
//!   cancel and reschedule are O(1); a later deadline is re-filed lazily;
//! - every non-empty bucket has an item in a min-heap keyed by its expiration, so time jumps
//!   straight to the next expiring bucket; expired higher-level buckets cascade down.
//!
//! The runtime glue:
//!
//! - **Shards.** A [`Timer`] holds several wheels ("shards", by default four per CPU), each
//!   behind its own mutex. A thread always registers into the same shard, so workers
//!   registering and cancelling at high rates do not contend with each other; a future
//!   remembers its shard and cancels there, from any thread. This is what Tokio's single
//!   driver lock (tokio#6504, #7226) cannot do.
//! - **The driver** is one Tokio task per timer. It sleeps with `tokio::time::sleep_until` on
//!   the earliest bucket of any shard, so it is driven by Tokio's clock (paused time works).
//!   Each pass locks one shard at a time, takes due entries in batches, and wakes them after
//!   releasing the lock. A panicking waker is caught.
//! - **Waking the driver.** A registration notifies the driver only when it creates a bucket
//!   earlier than the time the driver is armed for (one atomic load otherwise). Each pass
//!   first marks the driver "unarmed", then reads the shards, then arms with `fetch_min`, so a
//!   registration racing with a pass is never missed (checked by loom models).
//! - **Delayed tasks** wait inside the wheel, not as Tokio tasks: the wheel entry's waker is
//!   the task cell, and firing it spawns the future. Cancellation is one compare-and-swap plus
//!   an O(1) removal that frees the future at once.
#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    rust_2018_idioms
)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
pub mod delay_queue;
mod delayed_task;
mod driver;
mod error;
mod fallback;
mod interval;
mod loom;
mod metrics;
mod sleep;
mod timeout;
mod timer;
mod wheel;

#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;

/// The README's Rust examples, compiled as doc tests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use crate::builder::Builder;
pub use crate::delay_queue::DelayQueue;
pub use crate::delayed_task::{spawn_after, spawn_at, DelayedTask};
pub use crate::error::{BuildError, DelayedError, Elapsed, TimerError};
pub use crate::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use crate::metrics::TimerMetrics;
pub use crate::sleep::{sleep_wheel, sleep_wheel_until, Sleep};
pub use crate::timeout::{timeout, timeout_at, Timeout};
pub use crate::timer::Timer;
