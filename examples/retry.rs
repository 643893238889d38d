//! Retrying a failed registration with exponential back-off and jitter, as Dubbo's
//! `FailbackRegistry` does on its timing wheel.
//!
//! ```sh
//! cargo run --release -p examples --example retry    # about 1 s
//! ```
//!
//! A service registry that is down for a while: each provider's registration fails, and a
//! retry is scheduled on the wheel with [`spawn_after`](tokio_timing_wheel::spawn_after), its
//! delay doubling from 20 ms up to 320 ms, each with up to 25% random jitter (so that a
//! thousand providers do not retry in lockstep). A provider shut down while its retry waits
//! cancels it with [`DelayedTask::cancel`](tokio_timing_wheel::DelayedTask::cancel), which
//! says truthfully whether it stopped it.
//!
//! It asserts its own outcome: every live provider ends registered, no retry came before its
//! back-off, and the cancelled provider never registered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{spawn_after, DelayedTask};

const BASE: Duration = Duration::from_millis(20);
const MAX: Duration = Duration::from_millis(320);
const PROVIDERS: usize = 200;

/// A registry that refuses every registration until `up_at`.
struct Registry {
    up_at: Instant,
    registered: Mutex<Vec<String>>,
}

impl Registry {
    fn register(&self, name: &str) -> Result<(), &'static str> {
        if Instant::now() < self.up_at {
            return Err("registry unavailable");
        }
        self.registered.lock().unwrap().push(name.to_owned());
        Ok(())
    }
}

/// The back-off before retry `attempt` (1-based), with up to 25% jitter added.
fn backoff(attempt: u32, rng: &mut u64) -> Duration {
    let base = BASE.saturating_mul(1 << (attempt - 1).min(16)).min(MAX);
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let jitter = base.mul_f64((*rng % 1000) as f64 / 4000.0);
    base + jitter
}

/// The failback state: each provider's pending retry, and what the retries did.
struct Failback {
    registry: Arc<Registry>,
    pending: Mutex<HashMap<String, DelayedTask<()>>>,
    /// (provider, attempt, the back-off with its jitter, how long the retry actually waited).
    log: Mutex<Vec<(String, u32, Duration, Duration)>>,
    rng: Mutex<u64>,
}

impl Failback {
    /// Registers `name`, scheduling retry `attempt` on failure.
    fn register(self: &Arc<Self>, name: String, attempt: u32) {
        if self.registry.register(&name).is_ok() {
            self.pending.lock().unwrap().remove(&name);
            return;
        }
        let delay = backoff(attempt, &mut self.rng.lock().unwrap());
        let me = self.clone();
        let scheduled = Instant::now();
        let retry_name = name.clone();
        let task = spawn_after(delay, async move {
            me.log
                .lock()
                .unwrap()
                .push((retry_name.clone(), attempt, delay, scheduled.elapsed()));
            me.register(retry_name, attempt + 1);
        });
        self.pending.lock().unwrap().insert(name, task);
    }

    /// The provider shuts down: its pending retry, if any, is cancelled.
    fn unregister(&self, name: &str) -> bool {
        match self.pending.lock().unwrap().remove(name) {
            Some(task) => task.cancel(),
            None => false,
        }
    }
}

#[tokio::main]
async fn main() {
    let start = Instant::now();
    let registry = Arc::new(Registry {
        up_at: start + Duration::from_millis(500),
        registered: Mutex::new(Vec::new()),
    });
    let failback = Arc::new(Failback {
        registry: registry.clone(),
        pending: Mutex::new(HashMap::new()),
        log: Mutex::new(Vec::new()),
        rng: Mutex::new(0x9E37_79B9_7F4A_7C15),
    });
    for i in 0..PROVIDERS {
        failback.register(format!("provider-{i}"), 1);
    }
    // One provider shuts down while its retry waits.
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(failback.unregister("provider-7"), "its retry was pending");

    // Bounded, so that a retry that never comes fails the example instead of hanging it.
    let give_up = start + Duration::from_secs(10);
    while !failback.pending.lock().unwrap().is_empty() {
        assert!(Instant::now() < give_up, "retries still pending after 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let registered = registry.registered.lock().unwrap().clone();
    let log = failback.log.lock().unwrap().clone();
    let attempts = log.iter().map(|e| e.1).max().unwrap_or(0);
    println!(
        "{} providers registered after {:?}: {} retries, up to {attempts} per provider",
        registered.len(),
        start.elapsed(),
        log.len()
    );
    assert_eq!(registered.len(), PROVIDERS - 1);
    assert!(!registered.iter().any(|n| n == "provider-7"));
    for (name, attempt, delay, waited) in &log {
        assert!(
            waited >= delay,
            "{name} retry {attempt} came after {waited:?}, before its back-off {delay:?}"
        );
    }
    assert!(attempts >= 4, "the back-off doubled a few times");
    println!("ok");
}
