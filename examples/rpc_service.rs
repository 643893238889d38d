//! An RPC-style service on the timing wheel: run this first.
//!
//! ```sh
//! cargo run --release -p examples --example rpc_service            # 100k requests in flight
//! cargo run --release -p examples --example rpc_service -- 1000000  # or any other number
//! ```
//!
//! What it does, all on one multi-thread Tokio runtime and the default timer:
//! - sends N requests at once to a simulated backend whose latency is mostly a few
//!   milliseconds with a slow tail; each request runs under `timeout(200 ms, ...)`, so the
//!   fast ones register and cancel a timer and the slow ones time out;
//! - keeps 1000 simulated connections alive with heartbeats: each is a delayed task that
//!   re-arms itself every 50 ms (`spawn_after`), until the load is over;
//! - watches the connections with idle timers (`sleep_wheel`, `reset` on each of 50 bursts
//!   of activity 20 ms apart, expiring after 500 ms without one: 1 s of activity, so an
//!   idle timer whose reset did nothing would expire);
//! - prints a summary: outcomes, how late the timeouts fired (never early), heartbeats,
//!   and what the wheel did (firing passes, cascades), and asserts that every request is
//!   accounted for, no timeout fired early, no idle timer expired, and the heartbeats ran.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{sleep_wheel, spawn_after, timeout, Timer};

const TIMEOUT: Duration = Duration::from_millis(200);
const HEARTBEAT: Duration = Duration::from_millis(50);
const CONNECTIONS: usize = 1000;
const ACTIVITY: Duration = Duration::from_millis(20);
/// Long beside `ACTIVITY`: only a stall of the whole process for most of it (a loaded
/// machine) could let an idle timer expire between two bursts.
const IDLE: Duration = Duration::from_millis(500);
/// Bursts of activity per connection: `BURSTS * ACTIVITY` is twice `IDLE`.
const BURSTS: u32 = 50;

/// A tiny deterministic PRNG (xorshift64*), so runs are comparable.
fn rand(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Simulated backend latency: 90% within 1..20 ms, 8% within 20..150 ms, 2% far too slow.
fn latency(seed: &mut u64) -> Duration {
    let r = rand(seed) % 100;
    let ms = match r {
        0..=89 => 1 + rand(seed) % 20,
        90..=97 => 20 + rand(seed) % 130,
        _ => 1_000 + rand(seed) % 1_000,
    };
    Duration::from_millis(ms)
}

#[derive(Default)]
struct Stats {
    ok: AtomicU64,
    timed_out: AtomicU64,
    early: AtomicU64,
    late_us_max: AtomicU64,
    late_us_sum: AtomicU64,
    heartbeats: AtomicU64,
}

/// One connection's heartbeat: a delayed task that schedules the next one.
fn heartbeat(stats: Arc<Stats>, running: Arc<AtomicBool>) {
    let _next = spawn_after(HEARTBEAT, async move {
        if running.load(Relaxed) {
            stats.heartbeats.fetch_add(1, Relaxed);
            heartbeat(stats, running);
        }
    });
}

async fn request(seed: u64, stats: Arc<Stats>) {
    let mut seed = seed | 1;
    let backend = sleep_wheel(latency(&mut seed));
    let start = Instant::now();
    match timeout(TIMEOUT, backend).await {
        Ok(()) => {
            stats.ok.fetch_add(1, Relaxed);
        }
        Err(_elapsed) => {
            let waited = start.elapsed();
            if waited < TIMEOUT {
                stats.early.fetch_add(1, Relaxed);
            }
            let late = (waited.saturating_sub(TIMEOUT)).as_micros() as u64;
            stats.late_us_max.fetch_max(late, Relaxed);
            stats.late_us_sum.fetch_add(late, Relaxed);
            stats.timed_out.fetch_add(1, Relaxed);
        }
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("the argument is the number of requests"))
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(n));
}

async fn run(n: usize) {
    let stats = Arc::new(Stats::default());
    let running = Arc::new(AtomicBool::new(true));
    let wall = Instant::now();

    for _ in 0..CONNECTIONS {
        heartbeat(stats.clone(), running.clone());
    }

    // Idle detection: each connection has an idle timer that its activity pushes back. The
    // timer is polled (registered in the wheel) and reset BURSTS times; it expires only if
    // the connection looks idle for IDLE, which its activity every ACTIVITY never allows.
    let idle_watch: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            tokio::spawn(async {
                let mut idle = sleep_wheel(IDLE); // `Unpin`: no `Box::pin` needed
                for _ in 0..BURSTS {
                    tokio::select! {
                        // Activity first: on a runtime too busy to poll this task for longer
                        // than IDLE, the firing passes that run meanwhile fire the activity
                        // sleep too, and the connection was active.
                        biased;
                        () = sleep_wheel(ACTIVITY) => {
                            std::pin::Pin::new(&mut idle).reset(Instant::now() + IDLE);
                        }
                        () = &mut idle => return true,
                    }
                }
                false
            })
        })
        .collect();

    let requests: Vec<_> = (0..n as u64)
        .map(|i| {
            tokio::spawn(request(
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                stats.clone(),
            ))
        })
        .collect();
    let in_flight = Timer::current().pending();
    for r in requests {
        r.await.expect("request task");
    }
    let load_time = wall.elapsed();
    let mut idle_expired = 0;
    for watch in idle_watch {
        idle_expired += usize::from(watch.await.expect("idle watcher"));
    }
    // The heartbeats ran at least as long as the idle watchers' activity (1 s).
    running.store(false, Relaxed);
    // Let the last heartbeats see `running == false`.
    sleep_wheel(HEARTBEAT * 2).await;

    let m = Timer::current().metrics();
    let ok = stats.ok.load(Relaxed);
    let timed_out = stats.timed_out.load(Relaxed);
    let row = |label: &str, value: String| println!("  {label:<38}{value}");
    println!("rpc_service: {n} requests, timeout {TIMEOUT:?}, {CONNECTIONS} connections");
    // Only the requests whose tasks had started by then: the rest were still queued.
    row("timers pending as spawning ended:", in_flight.to_string());
    row("completed in time:", ok.to_string());
    row("timed out:", timed_out.to_string());
    row(
        "timeout lateness (mean / max):",
        format!(
            "{} us / {} us",
            stats.late_us_sum.load(Relaxed) / timed_out.max(1),
            stats.late_us_max.load(Relaxed)
        ),
    );
    row("fired early:", stats.early.load(Relaxed).to_string());
    row(
        &format!("heartbeats (every {HEARTBEAT:?}):"),
        stats.heartbeats.load(Relaxed).to_string(),
    );
    row(
        "idle timers expired (expected 0):",
        idle_expired.to_string(),
    );
    row("load finished in:", format!("{load_time:?}"));
    row(
        "wheel:",
        format!(
            "{} firing passes, {} cascades, {} bucket flushes, {} pending at the end",
            m.passes, m.cascades, m.bucket_flushes, m.pending
        ),
    );
    assert_eq!(ok + timed_out, n as u64, "every request accounted for");
    assert_eq!(stats.early.load(Relaxed), 0, "no timeout fired early");
    assert_eq!(
        idle_expired, 0,
        "no idle timer expired: each reset moved it"
    );
    // 1 s or more at one beat per 50 ms: twenty a connection on time, two even if the
    // runtime starts them 900 ms late.
    assert!(
        stats.heartbeats.load(Relaxed) >= 2 * CONNECTIONS as u64,
        "the heartbeats re-armed themselves"
    );
}
