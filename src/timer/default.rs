//! The default timer of each Tokio runtime, created on first use, and a per-thread cache of
//! this thread's shard of it, so the free functions cost no global lock.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use tokio::runtime::{Handle, Id};

use super::builder::Builder;
use super::Timer;
use crate::driver::shard::Shard;
use crate::loom::lock_std;

/// Default timers by runtime. Entries of shut-down timers are purged on the next miss.
static REGISTRY: Mutex<Vec<(Id, Timer)>> = Mutex::new(Vec::new());

thread_local! {
    static CACHE: RefCell<Option<(Id, Arc<Shard>)>> = const { RefCell::new(None) };
}

// Finding the current runtime costs `Handle::try_current()`, which clones and drops the
// runtime's handle. A cache keyed by task id would skip it, but a task id does not pin the
// runtime: inside `block_in_place`, a task can enter another runtime (`block_on`, `enter`)
// and the same task id would then map to the wrong timer, whose driver may never run.

pub(crate) const NO_RUNTIME: &str =
    "tokio-timing-wheel: this function must be called from the context of \
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
        Some((cid, shard)) if *cid == id && !shard.is_shutdown() => Some(shard.clone()),
        _ => None,
    });
    if let Some(shard) = cached {
        return shard;
    }
    let timer = current_timer(handle);
    let shard = timer.shard().clone();
    CACHE.with(|c| *c.borrow_mut() = Some((id, shard.clone())));
    shard
}

/// The current runtime's default timer, creating it if needed.
#[track_caller]
pub(crate) fn current_timer(handle: Handle) -> Timer {
    let id = handle.id();
    let mut registry = lock_std(&REGISTRY);
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
