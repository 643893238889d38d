//! The Tokio runtimes the workloads run on, Tokio's alternative timer included when built in.
//!
//! Tokio's per-worker "alt timer" (`Builder::enable_alt_timer`) exists only when Tokio is
//! compiled with `--cfg tokio_unstable`. Build the suite that way, in its own target directory
//! so that the ordinary build stays cached, to add its rows:
//!
//! ```sh
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!     cargo run --release -p compare
//! ```
//!
//! Everything is then compiled with that flag, this crate and ours included; Tokio's default
//! paths stay as they are, but take figures from one build when comparing rows.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};

/// What the rows of a system that needs Tokio's alt timer say in a build without it.
pub(crate) const ALT_TIMER_MISSING: &str = "n/a (build with RUSTFLAGS=\"--cfg tokio_unstable\")";

/// Whether this build has Tokio's alternative timer.
pub(crate) const ALT_TIMER: bool = cfg!(tokio_unstable);

/// A kind of runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// The multi-thread runtime with the workers given on the command line (2 by default).
    MultiThread,
    /// The same, with Tokio's per-worker alternative timer.
    MultiThreadAltTimer,
    /// Tokio's `current_thread` runtime.
    CurrentThread,
}

impl Flavor {
    /// Builds a runtime of this flavour, with `workers` workers if it has several, its threads
    /// named `name`; `None` for the alt timer in a build without it.
    pub(crate) fn build(self, workers: usize, name: &str) -> Option<Runtime> {
        let mut builder = match self {
            Flavor::MultiThread | Flavor::MultiThreadAltTimer => {
                let mut b = Builder::new_multi_thread();
                b.worker_threads(workers);
                b
            }
            Flavor::CurrentThread => Builder::new_current_thread(),
        };
        builder.thread_name(name).enable_all();
        if self == Flavor::MultiThreadAltTimer && !enable_alt_timer(&mut builder) {
            return None;
        }
        Some(builder.build().expect("cannot build a Tokio runtime"))
    }

    /// Like [`build`](Self::build), for flavours every build has.
    pub(crate) fn runtime(self, workers: usize, name: &str) -> Runtime {
        self.build(workers, name)
            .expect("this runtime flavour is in every build")
    }

    /// "2-worker multi-thread", "current_thread", ...
    pub(crate) fn label(self, workers: usize) -> String {
        match self {
            Flavor::MultiThread => format!("{workers}-worker multi-thread"),
            Flavor::MultiThreadAltTimer => format!("{workers}-worker multi-thread, alt timer"),
            Flavor::CurrentThread => "current_thread".to_string(),
        }
    }
}

#[cfg(tokio_unstable)]
fn enable_alt_timer(builder: &mut Builder) -> bool {
    builder.enable_alt_timer();
    true
}

#[cfg(not(tokio_unstable))]
fn enable_alt_timer(_: &mut Builder) -> bool {
    false
}

/// Runs `fut` as a task of `rt` (on a worker thread, where a server's code runs, rather than on
/// the thread that calls `block_on`), waits for it, and drops the runtime.
pub(crate) fn run_task<F>(rt: Runtime, fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let out =
        rt.block_on(async move { tokio::spawn(fut).await.expect("a benchmark task panicked") });
    drop(rt);
    out
}
