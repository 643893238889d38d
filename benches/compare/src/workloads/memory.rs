//! memory: bytes per pending timer, the future and the timer's own structures.
//!
//! 1M pending 10-minute sleeps, each polled once (registered), on a current-thread runtime. The
//! counting allocator ([`crate::alloc`]) gives the bytes allocated per timer, including the
//! holder: ours in a `Vec<Sleep>` (inline), Tokio's in a `Vec<Pin<Box<Sleep>>>` (8-byte
//! pointer + the box; a `Vec` cannot pin its items without `unsafe`). The compared figure
//! holds both inline, as a task or a pin-projected connection holds its sleep: Tokio's is
//! the boxed count less the `Vec`'s pointer per timer, which is the holder's, not the timer's
//! (the box allocates exactly `size_of::<Sleep>()`; its registration allocates nothing).
//! "Timer structures" is what remains after subtracting the future itself: the wheel's own
//! share. Allocation is deterministic, so this runs once, not interleaved.

use std::pin::Pin;
use std::time::Duration;

use tokio_timing_wheel::{sleep_wheel, Sleep};

use super::{Ctx, Workload};
use crate::alloc::Meter;
use crate::poll::poll_noop;
use crate::report::{print_table, ratio, Summary};
use crate::rt::Flavor;

pub(crate) const WORKLOAD: Workload = Workload {
    name: "memory",
    about: "bytes per pending sleep, future and timer structures, ours vs tokio::time",
    run,
};

const SLEEP: Duration = Duration::from_secs(600);

/// Bytes allocated per timer while `n` made by `make` (each created and polled once) are held
/// in a `Vec` (its buffer counted), on a fresh current-thread runtime.
fn bytes_per_timer<T>(n: usize, mut make: impl FnMut() -> T) -> f64 {
    let rt = Flavor::CurrentThread.runtime(1, "memory-bench");
    rt.block_on(async move {
        drop(make()); // one-time setup (a default timer, a wheel) is not counted
        let meter = Meter::start();
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            held.push(make());
        }
        let bytes = meter.net();
        drop(held);
        bytes.max(0) as f64 / n as f64
    })
}

fn run(ctx: &Ctx, summary: &mut Summary) {
    let n = ctx.size(1_000_000, 50_000);
    println!("{n} pending sleeps of 10 min, each polled once.\n");
    let ours = bytes_per_timer(n, || {
        let mut s = sleep_wheel(SLEEP);
        assert!(poll_noop(Pin::new(&mut s)).is_pending());
        s
    });
    let tokio_boxed = bytes_per_timer(n, || {
        let mut s = Box::pin(tokio::time::sleep(SLEEP));
        assert!(poll_noop(s.as_mut()).is_pending());
        s
    });
    let ours_size = size_of::<Sleep>();
    let tokio_size = size_of::<tokio::time::Sleep>();
    let pointer = size_of::<Pin<Box<tokio::time::Sleep>>>();
    // Held inline: the same allocations less the `Vec`'s pointer to each box.
    let tokio = tokio_boxed - pointer as f64;
    let rows = vec![
        vec![
            "ours: Sleep".to_string(),
            ours_size.to_string(),
            format!("Vec<Sleep>: {ours_size} B inline"),
            format!("{ours:.1}"),
            format!("{:.1}", ours - ours_size as f64),
            "-".to_string(),
        ],
        vec![
            "tokio::time::Sleep".to_string(),
            tokio_size.to_string(),
            format!("inline: the {tokio_size} B box, less the Vec's pointer"),
            format!("{tokio:.1}"),
            format!("{:.1}", tokio - tokio_size as f64),
            ratio(ours, tokio, false),
        ],
        vec![
            "tokio::time::Sleep, boxed (for reference)".to_string(),
            tokio_size.to_string(),
            format!("Vec<Pin<Box<Sleep>>>: {pointer} B pointer + {tokio_size} B box"),
            format!("{tokio_boxed:.1}"),
            format!("{:.1}", tokio_boxed - (pointer + tokio_size) as f64),
            ratio(ours, tokio_boxed, false),
        ],
    ];
    print_table(
        &[
            "system",
            "size_of future",
            "held as (counted)",
            "bytes allocated per timer",
            "timer structures per timer",
            "ours vs it (bytes per timer)",
        ],
        &rows,
    );
    summary.add(
        "bytes per pending timer",
        "tokio::time::Sleep",
        [ours, tokio],
        false,
        |x| format!("{x:.1} B"),
    );
}
