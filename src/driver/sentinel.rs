//! The sentinel: a task that waits, without ever waking, for as long as its timer lives, so
//! that the timer learns of its runtime's shutdown: the runtime drops every task before it
//! shuts its time driver down, and the sentinel's drop shuts the timer down, resolving every
//! pending future, before the alarm (a Tokio sleep) could be fired with an error or polled on a
//! dead driver.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use super::Driver;
use crate::loom::lock_std;

/// Spawns the sentinel of `driver` on its runtime. On a runtime already shutting down the
/// task is dropped at once, which shuts the timer down.
pub(super) fn spawn(driver: &Arc<Driver>) {
    let (tx, rx) = oneshot::channel();
    *lock_std(&driver.sentinel) = Some(tx);
    drop(driver.runtime.spawn(Sentinel {
        driver: Arc::downgrade(driver),
        ended: rx,
        done: false,
    }));
}

/// Pending until the driver goes and drops the sender (a shutdown of the timer keeps it: the
/// timer must still learn of its runtime's shutdown, see `fallback`).
struct Sentinel {
    driver: Weak<Driver>,
    ended: oneshot::Receiver<()>,
    done: bool,
}

impl Future for Sentinel {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match Pin::new(&mut self.ended).poll(cx) {
            Poll::Ready(_) => {
                self.done = true;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Dropped unfinished: the runtime is shutting down (or dropped the task at spawn).
        if let Some(driver) = self.driver.upgrade() {
            tracing::debug!("the timer's runtime is shutting down: shutting the timer down");
            driver.on_runtime_gone();
            // If it is the runtime's default timer, the registry lets go of it.
            crate::timer::default::forget(driver.runtime_id());
        }
    }
}
