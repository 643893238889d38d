//! Whether this build compiled Tokio's `test-util` feature in (it must not have).
//!
//! With `test-util`, every `tokio::time::Instant::now()` goes through the paused-clock check
//! (the runtime's clock, behind a mutex), so a suite built that way measures something users
//! do not run. Cargo unifies features within one build, so `cargo clippy --workspace
//! --all-targets` compiles this crate with the root package's dev-dependency features; a run
//! (`cargo run --release -p compare`) builds it alone, without them. `main` checks.
//!
//! The check: `Builder::start_paused` exists only with `test-util`. Method resolution prefers an
//! inherent method over a trait method of the same name, so the call below reaches Tokio's
//! method when the feature is on and this module's stand-in otherwise, and the returned type
//! says which.

use tokio::runtime::Builder;

/// The stand-in's answer: Tokio's `start_paused` is not compiled in.
// Unused, and never constructed, in a build with `test-util`.
#[allow(dead_code)]
struct Absent;

/// Implemented for `Builder`: reached only when Tokio has no inherent `start_paused`.
#[allow(dead_code)]
trait StandIn {
    fn start_paused(&mut self, _: bool) -> Absent;
}

impl StandIn for Builder {
    fn start_paused(&mut self, _: bool) -> Absent {
        Absent
    }
}

/// Tells which `start_paused` answered.
trait Answer {
    fn test_util(&self) -> bool;
}

impl Answer for Absent {
    fn test_util(&self) -> bool {
        false
    }
}

impl Answer for &mut Builder {
    fn test_util(&self) -> bool {
        true
    }
}

/// Whether Tokio's `test-util` feature is compiled into this build.
pub(crate) fn enabled() -> bool {
    let mut builder = Builder::new_current_thread();
    builder.start_paused(false).test_util()
}
