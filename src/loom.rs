//! Sync types used by the crate, swapped for loom's under `--cfg loom` so model tests can
//! explore their interleavings.
//!
//! Only the atomics and mutexes are swapped: they are where the races are. Reference counts
//! stay `std::sync::Arc` (loom's has no `Weak`, which the driver's ownership needs).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize},
    Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize},
    Mutex, MutexGuard,
};

/// Locks a mutex, ignoring poisoning: no code holding one of the crate's locks can panic
/// half-way through an update (user code never runs under them).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(loom))]
    {
        lock_std(m)
    }
}

/// Locks a mutex if no other thread holds it (ignoring poisoning as [`lock`] does); `None`
/// if it is held.
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        #[cfg(not(loom))]
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(_) => None,
    }
}

/// Locks a `std` mutex (one the models need not explore), ignoring poisoning as [`lock`]
/// does.
pub(crate) fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs a model test: `f` under loom (bounded preemptions), or once without loom.
#[cfg(test)]
pub(crate) fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    #[cfg(loom)]
    {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(f);
    }
    #[cfg(not(loom))]
    f();
}
