//! Faults end in documented outcomes, never a hang or an abort.
//!
//! One module per kind of fault:
//!
//! - [`wakers`]: misbehaving wakers (panicking, blocking, calling back into the timer, dropped
//!   while they use it);
//! - [`lifetime`]: a runtime shut down or dropped under pending timers, timer handles dropped
//!   under a pending timeout, a task visiting another runtime;
//! - [`panics_on_drop`]: delayed tasks whose futures panic when dropped;
//! - [`bad_input`]: bad input not covered by the other test files.
//!
//! Where a hang is the failure mode, the test is bounded by `tokio::time::timeout` (on paused
//! time it then fails at once) or by a watchdog thread on the real clock ([`with_watchdog`]).
//! Run one kind with `cargo test --test faults wakers::`.

use std::sync::Once;

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod lifetime;
mod panics_on_drop;
mod wakers;

use common::{paused_runtime, with_watchdog};

/// Keeps the panics these tests cause on purpose (their messages say "on purpose") out of the
/// output; any other panic is reported as usual.
fn quiet_intended_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or_default();
            if !msg.contains("(on purpose)") {
                report(info);
            }
        }));
    });
}

fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
