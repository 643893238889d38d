//! The default timer of each Tokio runtime, created on first use, and a per-thread cache of
//! this thread's shard of it, so the free functions cost no global lock.

use std::cell::RefCell;
use std::sync::Mutex;

use tokio::runtime::{Handle, Id};

use crate::loom::Arc;
use crate::shard::Shard;
use crate::timer::{Builder, Timer};

/// Default timers by runtime. Entries of shut-down timers are purged on the next miss.
static REGISTRY: Mutex<Vec<(Id, Timer)>> = Mutex::new(Vec::new());

thread_local! {
    static CACHE: RefCell<Option<(Id, Arc<Shard>)>> = const { RefCell::new(None) };
}

// Finding the current runtime costs `Handle::try_current()`, which clones and drops the
// runtime's handle. A cache keyed by task id would skip it, but a task id does not pin the
// runtime: inside `block_in_place`, a task can enter another runtime (`block_on`, `enter`)
// and the same task id would then map to the wrong timer, whose driver may never run.

const NO_RUNTIME: &str = "tokio-timing-wheel: this function must be called from the context of \
    a Tokio 1.x runtime (there is no runtime on this thread); use it inside a runtime, or build \
    a Timer with Timer::builder() inside one and call its methods";

/// This thread's shard of the current runtime's default timer.
///
/// # Panics
///
/// Outside a Tokio runtime, or if the runtime has no time driver.
#[track_caller]
pub(crate) fn current_shard() -> Arc<Shard> {
    let handle = match Handle::try_current() {
        Ok(h) => h,
        Err(_) => panic!("{}", NO_RUNTIME),
    };
    let id = handle.id();
    let cached = CACHE.with(|c| match &*c.borrow() {
        Some((cid, shard)) if *cid == id && !shard.common.is_shutdown() => Some(shard.clone()),
        _ => None,
    });
    if let Some(shard) = cached {
        return shard;
    }
    let timer = current_timer(handle);
    let shard = timer.inner().shard().clone();
    CACHE.with(|c| *c.borrow_mut() = Some((id, shard.clone())));
    shard
}

/// The current runtime's default timer, creating it if needed.
#[track_caller]
pub(crate) fn current_timer(handle: Handle) -> Timer {
    let id = handle.id();
    let mut registry = REGISTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    registry.retain(|(_, t)| !t.is_shutdown());
    if let Some((_, t)) = registry.iter().find(|(rid, _)| *rid == id) {
        return t.clone();
    }
    let timer = match Builder::default().build_on(handle) {
        Ok(t) => t,
        Err(e) => panic!("tokio-timing-wheel: cannot create the default timer: {e}"),
    };
    tracing::debug!(runtime = %id, "default timer created");
    registry.push((id, timer.clone()));
    timer
}

impl Timer {
    /// The default timer of the current Tokio runtime, the one the free functions use
    /// (created on first use: 1 ms tick, 64 buckets per level, no limit).
    ///
    /// Shutting it down resolves the futures already registered on it (see
    /// [`Timer::shutdown`]); the next free-function call on that runtime then creates a new
    /// default timer, so later `sleep_wheel`/`timeout` calls keep working.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or if the runtime has no time driver.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_timing_wheel::{sleep_wheel, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut s = tokio_test::task::spawn(sleep_wheel(Duration::from_secs(5)));
    /// assert!(s.poll().is_pending()); // registered on first poll
    /// assert_eq!(Timer::current().pending(), 1);
    /// drop(s); // cancelled
    /// assert_eq!(Timer::current().pending(), 0);
    /// # }
    /// ```
    #[track_caller]
    pub fn current() -> Timer {
        match Handle::try_current() {
            Ok(h) => current_timer(h),
            Err(_) => panic!("{}", NO_RUNTIME),
        }
    }
}
