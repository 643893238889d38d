//! Throughput of a timeout around a future, awaited in a loop by some tasks on a fresh
//! runtime, optionally beside tasks that keep workers busy: the measurement shared by the
//! timeout workloads (`rpc-timeout`, re-polled timeouts, other runtime situations).

use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use crate::rt::Flavor;

/// How long a busy task spins between two yields.
pub(crate) const SPIN: Duration = Duration::from_micros(100);

/// One measurement: `n` operations over `tasks` tasks on a fresh runtime, after `warmup`
/// operations, with `spinners` tasks looping `{ spin SPIN; yield_now }` meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loop {
    pub(crate) flavor: Flavor,
    pub(crate) workers: usize,
    pub(crate) tasks: usize,
    pub(crate) n: usize,
    pub(crate) warmup: usize,
    pub(crate) spinners: usize,
}

impl Loop {
    /// Operations per second: each operation awaits `wrap(inner())`. `setup` runs inside the
    /// runtime and returns `wrap`; `None` if this build has no such runtime.
    pub(crate) fn run<I, S, M, F>(&self, inner: fn() -> I, setup: S) -> Option<f64>
    where
        I: Send + 'static,
        S: FnOnce() -> M + Send + 'static,
        M: Fn(I) -> F + Clone + Send + 'static,
        F: Future + Send + 'static,
    {
        self.run_counting_parks(inner, setup).map(|(ops, _)| ops)
    }

    /// [`run`](Self::run), with the number of times the runtime's workers parked during the
    /// timed operations (Tokio's `worker_park_count`, summed over the workers), per 1,000
    /// operations: how often an idle worker went to sleep and was woken again.
    pub(crate) fn run_counting_parks<I, S, M, F>(
        &self,
        inner: fn() -> I,
        setup: S,
    ) -> Option<(f64, f64)>
    where
        I: Send + 'static,
        S: FnOnce() -> M + Send + 'static,
        M: Fn(I) -> F + Clone + Send + 'static,
        F: Future + Send + 'static,
    {
        let rt = self.flavor.build(self.workers, "ops-bench")?;
        let Loop {
            tasks,
            n,
            warmup,
            spinners,
            ..
        } = *self;
        let (elapsed, parks) = rt.block_on(async move {
            let stop = spawn_busy(spinners, SPIN);
            let wrap = setup();
            ops(tasks, warmup, inner, wrap.clone()).await;
            let parks_before = parks();
            let start = std::time::Instant::now();
            ops(tasks, n, inner, wrap).await;
            let elapsed = start.elapsed();
            let parks = parks() - parks_before;
            stop.store(true, Relaxed);
            (elapsed, parks)
        });
        drop(rt);
        let done = (n / tasks * tasks) as f64;
        Some((done / elapsed.as_secs_f64(), parks as f64 * 1000.0 / done))
    }
}

/// How many times the current runtime's workers have parked, all workers together.
fn parks() -> u64 {
    let metrics = tokio::runtime::Handle::current().metrics();
    (0..metrics.num_workers())
        .map(|w| metrics.worker_park_count(w))
        .sum()
}

/// Spawns `n` tasks that loop `{ spin for spin; yield_now }` until the flag returned is set
/// (or the runtime drops them at a yield).
pub(crate) fn spawn_busy(n: usize, spin: Duration) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..n {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(Relaxed) {
                let t = std::time::Instant::now();
                while t.elapsed() < spin {
                    std::hint::spin_loop();
                }
                tokio::task::yield_now().await;
            }
        });
    }
    stop
}

async fn ops<I, M, F>(tasks: usize, n: usize, inner: fn() -> I, wrap: M)
where
    I: Send + 'static,
    M: Fn(I) -> F + Clone + Send + 'static,
    F: Future + Send + 'static,
{
    let per_task = n / tasks;
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let wrap = wrap.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    black_box(wrap(inner()).await);
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("a benchmark task panicked");
    }
}
