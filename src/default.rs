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
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache::EMPTY) };
}

/// Tasks remembered per thread as belonging to the cached runtime.
const KNOWN_TASKS: usize = 8;

/// This thread's shard of one runtime's default timer, and tasks known to run on that runtime.
///
/// Finding the current runtime costs `Handle::try_current()`, which clones and drops the
/// runtime's handle: two atomic operations on a cache line every worker shares. A task never
/// changes runtime and task ids are unique in the process, so once a task id has been seen on
/// the cached runtime, calls from that task skip the handle altogether.
struct Cache {
    runtime: Option<(Id, Arc<Shard>)>,
    tasks: [Option<tokio::task::Id>; KNOWN_TASKS],
    next: usize,
}

impl Cache {
    const EMPTY: Cache = Cache {
        runtime: None,
        tasks: [None; KNOWN_TASKS],
        next: 0,
    };

    /// The cached shard, if the current task is known to belong to its runtime.
    fn by_task(&self, task: Option<tokio::task::Id>) -> Option<Arc<Shard>> {
        let task = task?;
        let (_, shard) = self.runtime.as_ref()?;
        if self.tasks.contains(&Some(task)) && !shard.common.is_shutdown() {
            Some(shard.clone())
        } else {
            None
        }
    }

    /// The cached shard, if it belongs to runtime `id`; remembers `task` as running there.
    fn by_runtime(&mut self, id: Id, task: Option<tokio::task::Id>) -> Option<Arc<Shard>> {
        let shard = match &self.runtime {
            Some((cid, shard)) if *cid == id && !shard.common.is_shutdown() => shard.clone(),
            _ => return None,
        };
        if task.is_some() {
            self.tasks[self.next] = task;
            self.next = (self.next + 1) % KNOWN_TASKS;
        }
        Some(shard)
    }

    fn set(&mut self, id: Id, shard: Arc<Shard>, task: Option<tokio::task::Id>) {
        *self = Cache::EMPTY;
        self.runtime = Some((id, shard));
        self.tasks[0] = task;
        self.next = 1;
    }
}

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
    let task = tokio::task::try_id();
    if let Some(shard) = CACHE.with(|c| c.borrow().by_task(task)) {
        return shard;
    }
    let handle = match Handle::try_current() {
        Ok(h) => h,
        Err(_) => panic!("{}", NO_RUNTIME),
    };
    let id = handle.id();
    if let Some(shard) = CACHE.with(|c| c.borrow_mut().by_runtime(id, task)) {
        return shard;
    }
    let timer = current_timer(handle);
    let shard = timer.inner().shard().clone();
    CACHE.with(|c| c.borrow_mut().set(id, shard.clone(), task));
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
