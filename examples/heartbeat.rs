//! Heartbeats and idle connections: the periodic and the keyed halves of a service's timers.
//!
//! ```sh
//! cargo run --release -p examples --example heartbeat            # 2000 connections, about 3 s
//! cargo run --release -p examples --example heartbeat -- 20000   # or any other number
//! ```
//!
//! What it does, on one multi-thread Tokio runtime and the default timer:
//! - each simulated connection is a task that sends a heartbeat every 100 ms
//!   ([`interval`](tokio_timing_wheel::interval), `MissedTickBehavior::Skip`) and, now and
//!   then, a request; a quarter of the connections fall silent after a while;
//! - one reaper task keeps every connection's idle deadline in a
//!   [`DelayQueue`](tokio_timing_wheel::DelayQueue) keyed by connection: each request resets
//!   the connection's key to 500 ms from now, and a connection whose deadline passes is
//!   closed (its task stops);
//! - prints a summary: heartbeats and how late they ticked (never early), requests, idle
//!   connections closed (none before 500 ms without a request), and what the timer did, and
//!   asserts that nothing came early, every connection is accounted for, and every one that
//!   fell silent was closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_timing_wheel::delay_queue::Key;
use tokio_timing_wheel::{interval, sleep_wheel, DelayQueue, MissedTickBehavior, Timer};

const HEARTBEAT: Duration = Duration::from_millis(100);
const IDLE: Duration = Duration::from_millis(500);
const RUN: Duration = Duration::from_secs(3);

/// A tiny deterministic PRNG (xorshift64*), so runs are comparable.
fn rand(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[derive(Default)]
struct Stats {
    heartbeats: AtomicU64,
    late_us_max: AtomicU64,
    late_us_sum: AtomicU64,
    early: AtomicU64,
    requests: AtomicU64,
}

/// Whether connection `id` falls silent (a quarter of them do): its last request comes
/// within 2.1 s of its start (one heartbeat after it falls silent, at most), so its idle
/// deadline passes within 2.6 s, inside the run.
fn falls_silent(id: usize) -> bool {
    id % 4 == 0
}

/// One connection: heartbeats until it is closed; requests until it falls silent.
async fn connection(
    id: usize,
    requests: mpsc::UnboundedSender<usize>,
    closed: Arc<AtomicBool>,
    stats: Arc<Stats>,
) {
    let mut seed = (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // A quarter of the connections fall silent after 0.5 to 2 s; the others stay active.
    let silent_after = if falls_silent(id) {
        Duration::from_millis(500 + rand(&mut seed) % 1500)
    } else {
        Duration::MAX
    };
    let opened = Instant::now();
    let mut heartbeat = interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Skip);
    // A `Sleep` is `Unpin`: it needs no `Box::pin` to be polled by reference and reset.
    let mut next_request = sleep_wheel(Duration::from_millis(rand(&mut seed) % 300));
    while !closed.load(Relaxed) {
        tokio::select! {
            tick = heartbeat.tick() => {
                let late = Instant::now().saturating_duration_since(tick);
                if Instant::now() < tick {
                    stats.early.fetch_add(1, Relaxed);
                }
                stats.heartbeats.fetch_add(1, Relaxed);
                stats.late_us_sum.fetch_add(late.as_micros() as u64, Relaxed);
                stats.late_us_max.fetch_max(late.as_micros() as u64, Relaxed);
            }
            () = &mut next_request, if opened.elapsed() < silent_after => {
                stats.requests.fetch_add(1, Relaxed);
                let _ = requests.send(id);
                let pause = Duration::from_millis(50 + rand(&mut seed) % 300);
                std::pin::Pin::new(&mut next_request).reset(Instant::now() + pause);
            }
        }
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| {
            s.parse()
                .expect("the argument is the number of connections")
        })
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(n));
}

async fn run(n: usize) {
    let stats = Arc::new(Stats::default());
    let (tx, mut rx) = mpsc::unbounded_channel::<usize>();
    let closed: Vec<Arc<AtomicBool>> = (0..n).map(|_| Arc::default()).collect();

    // The reaper: one DelayQueue entry per connection, reset on every request.
    let reaper = {
        let closed = closed.clone();
        tokio::spawn(async move {
            let mut idle = DelayQueue::with_capacity(n);
            // Each deadline is IDLE from a clock read made after the instant kept beside it,
            // so "closed before IDLE since `last`" can only mean a deadline honoured early.
            let mut conns: HashMap<usize, (Key, Instant)> = (0..n)
                .map(|id| {
                    let now = Instant::now();
                    (id, (idle.insert(id, IDLE), now))
                })
                .collect();
            let (mut resets, mut reaped, mut early) = (0u64, 0u64, 0u64);
            let mut silent_reaped = 0u64;
            let deadline = sleep_wheel(RUN);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    Some(id) = rx.recv() => {
                        if let Some((key, last)) = conns.get_mut(&id) {
                            *last = Instant::now();
                            idle.reset(key, IDLE);
                            resets += 1;
                        }
                    }
                    Some(expired) = idle.next() => {
                        let id = expired.into_inner();
                        let (_, last) = conns.remove(&id).expect("an open connection");
                        closed[id].store(true, Relaxed);
                        reaped += 1;
                        silent_reaped += u64::from(falls_silent(id));
                        // Never before IDLE has passed since the last request seen.
                        if last.elapsed() < IDLE {
                            early += 1;
                        }
                    }
                    _ = &mut deadline => break,
                }
            }
            (resets, reaped, silent_reaped, early, idle.len())
        })
    };

    let connections: Vec<_> = (0..n)
        .map(|id| {
            tokio::spawn(connection(
                id,
                tx.clone(),
                closed[id].clone(),
                stats.clone(),
            ))
        })
        .collect();
    drop(tx);
    let (resets, reaped, silent_reaped, reaped_early, still_open) = reaper.await.expect("reaper");
    for c in &closed {
        c.store(true, Relaxed);
    }
    for c in connections {
        c.await.expect("connection task");
    }

    let m = Timer::current().metrics();
    let beats = stats.heartbeats.load(Relaxed).max(1);
    let row = |label: &str, value: String| println!("  {label:<46}{value}");
    println!(
        "heartbeat: {n} connections for {RUN:?}, heartbeat {HEARTBEAT:?}, idle after {IDLE:?}"
    );
    row("heartbeats:", stats.heartbeats.load(Relaxed).to_string());
    let (sum, max) = (
        stats.late_us_sum.load(Relaxed),
        stats.late_us_max.load(Relaxed),
    );
    row(
        "heartbeat lateness (mean / max):",
        format!("{} us / {max} us", sum / beats),
    );
    row(
        "heartbeats early (expected 0):",
        stats.early.load(Relaxed).to_string(),
    );
    row("requests:", stats.requests.load(Relaxed).to_string());
    row("idle deadlines reset:", resets.to_string());
    row("idle connections closed (about n/4):", reaped.to_string());
    let silent = (0..n).filter(|&id| falls_silent(id)).count() as u64;
    row(
        "of the connections that fell silent, closed:",
        format!("{silent_reaped} of {silent}"),
    );
    row(
        "closed before idle long enough (expected 0):",
        reaped_early.to_string(),
    );
    row("connections still open at the end:", still_open.to_string());
    let timer = format!("{} firing passes, {} pending now", m.passes, m.pending);
    row("timer:", timer);
    assert_eq!(stats.early.load(Relaxed), 0, "no heartbeat ticked early");
    assert_eq!(
        reaped_early, 0,
        "no connection closed before it was idle long enough"
    );
    assert_eq!(
        reaped + still_open as u64,
        n as u64,
        "every connection accounted for"
    );
    // Each went silent within 2 s and was idle by 2.6 s: all closed within the 3 s run (a
    // queue that never hands an item out fails here, not above).
    assert_eq!(
        silent_reaped, silent,
        "every connection that fell silent was closed"
    );
}
