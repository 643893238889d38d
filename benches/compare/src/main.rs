//! Side-by-side benchmarks of `tokio-timing-wheel` ("ours") against Tokio's own timer and other
//! timer crates, each workload with all its systems in one process.
//!
//! ```sh
//! cargo run --release -p compare                      # everything: about 7 minutes on 2 cores
//! cargo run --release -p compare -- --quick           # tiny sizes, the CI smoke run (< 60 s)
//! cargo run --release -p compare -- --only fire-load --only reset   # some workloads
//! cargo run --release -p compare -- --list            # the workloads, one line each
//! cargo run --release -p compare -- --workers 16 --tasks 64         # a bigger machine
//! # Tokio's per-worker "alt timer" rows (n/a otherwise), in a target directory of their own:
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable cargo run --release -p compare
//! ```
//!
//! This is a crate of its own, a member of the library's workspace, so that it builds Tokio as a
//! user's release build does. An example of the library would inherit its dev-dependency
//! features, Tokio's `test-util` among them, which sends every `Instant::now()` through the
//! paused-clock check; `main` refuses to run if that feature is compiled in.
//!
//! # Method
//!
//! Every measurement is repeated (3 times by default) interleaving the systems (a b c a b c),
//! each in a fresh runtime, and the tables give the median of each figure, most with the spread
//! ("±4%": half the range of the repetitions, in percent of the median). Ratios are written
//! from our side, "N x better" or "N x worse" (throughput: ours / peer; costs and latencies:
//! peer / ours). Each workload prints Markdown tables and says how busy other processes kept
//! the CPUs meanwhile; a summary table of every comparison ends the run.
//!
//! # Workloads
//!
//! `--only` names, in the order they run; each module's `//!` documentation (in
//! `src/workloads/`, the name with `_` for `-`) says what it measures and how:
//!
//! - `rpc-timeout`: a timeout registered and cancelled per RPC, 1 and 8 tasks; the timer's
//!   cost in ns and in clock reads (one `Instant::now()` timed directly).
//! - `rpc-situations`: the same operation with idle workers, with the other workers kept busy,
//!   on one worker, and on `current_thread`: which situation a ratio of rpc-timeout holds in.
//! - `repoll`: a timeout around a future woken 8 times before it is ready (a timer polled
//!   again while registered), 1 and 8 tasks.
//! - `reset`: idle timeouts pushed back on activity, as a connection does it (clock read, reset,
//!   poll) and the reset alone.
//! - `fire`: lateness of 200k sleeps on an idle runtime.
//! - `fire-load`: lateness of 10k sleeps registered while idle, under N tasks that spin and
//!   yield, on the multi-thread and `current_thread` runtimes.
//! - `same-tick`: 1M and 300k sleeps due at one instant: when the last wakes, and how long a
//!   Tokio 1 ms ticker beside them stalls.
//! - `blocked-worker`: lateness of every other task's timers while one task blocks its worker.
//! - `cross-worker`: timeouts registered on one worker and cancelled or fired on another.
//! - `memory`: bytes per pending sleep.
//! - `delayed`: 1M delayed tasks, half cancelled: CPU, issue time, peak memory.
//! - `idle`: CPU and firing passes with 100k timers pending 1 h away.
//! - `lone`: sleeps of 3.3, 15.7 and 100.3 ms one at a time: the runtime's wakeups (parks) per
//!   sleep, our firing passes, lateness; on the default tick, a 10 ms tick, and Tokio's.
//! - `interval`: 10k intervals x 100 ticks of 10 ms: CPU per tick, beside a no-timer floor.
//! - `delay-queue`: 1M inserts, 1M resets and 500k removes; expiry throughput; bytes per item.
//! - `hyper-idle`: 10k idle hyper connections, the header-read timer on the wheel or on
//!   Tokio's: bytes and idle CPU per connection, deadline-to-close lateness; and requests/s
//!   through a tower timeout.
//! - `service`: an HTTP service end to end, K = 0, 1, 8 back-end calls per request each under a
//!   timeout, with request, header-read and idle timeouts: ours (`server::serve`,
//!   `http::TimeoutLayer`, `timeout`) against the stock stack (hyper-util's `TokioTimer`,
//!   tower-http's `TimeoutLayer`, `tokio::time::timeout`) and the same service with no timer:
//!   requests/s, p50/p99 latency, server CPU per request and the timers' share of it.
//!
//! # Adding a workload
//!
//! 1. Write `src/workloads/NAME.rs`: a `//!` comment saying what it measures and how, and
//!    `pub(crate) const WORKLOAD: Workload = Workload { name: "NAME", about: "...", run };` where
//!    `fn run(ctx: &Ctx, summary: &mut Summary)` prints the workload's description and tables
//!    (its `##` heading is printed for it) and adds its summary rows.
//! 2. In `src/workloads/mod.rs`, declare it (`pub(crate) mod NAME;`) and add `NAME::WORKLOAD`
//!    to `ALL`, the registry, where its place sets when it runs: that line makes it part of the
//!    full run, `--only` and `--list` (a declared module missing from `ALL` fails the build).
//!
//! The shared pieces: [`report`] (interleaved repetitions, medians, ratios, tables, the summary),
//! [`rt`] (runtime flavours, Tokio's alt timer when built in), [`ops`] (a timeout's
//! throughput in a loop, beside busy tasks if asked), [`sleep_systems`] (the sleeps
//! compared, for measurements generic over them), [`lateness`] (tasks that record how late
//! their sleep woke them), [`poll`] (polling by hand), [`alloc`] (a counting
//! allocator), [`cpu`] (CPU time from `/proc`). Sizes live in each workload, full and `--quick`
//! side by side (`ctx.size(full, quick)`); keep the quick ones tiny, CI runs them.

mod alloc;
mod cpu;
mod floor;
mod lateness;
mod ops;
mod poll;
mod report;
mod rt;
mod sleep_systems;
mod workloads;

use crate::cpu::Load;
use crate::report::{print_table, Summary};
use crate::workloads::{Ctx, Workload};

const USAGE: &str = "usage: cargo run --release -p compare -- [--quick] [--only NAME]... \
[--workers N] [--tasks N] [--reps N] [--list]";

/// What the command line asked for.
#[derive(Debug)]
struct Args {
    ctx: Ctx,
    only: Vec<&'static Workload>,
    list: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        ctx: Ctx {
            quick: false,
            reps: 3,
            workers: 2,
            tasks: 8,
        },
        only: Vec::new(),
        list: false,
    };
    let mut args = args.into_iter();
    let number = |flag: &str, value: Option<String>| -> Result<usize, String> {
        value
            .as_deref()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{flag} takes a positive number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => out.ctx.quick = true,
            "--list" => out.list = true,
            "--workers" => out.ctx.workers = number("--workers", args.next())?,
            "--tasks" => out.ctx.tasks = number("--tasks", args.next())?,
            "--reps" => out.ctx.reps = number("--reps", args.next())?,
            "--only" => {
                let names = args.next().ok_or("--only takes a workload name")?;
                // `--only a,b` as well as `--only a --only b`.
                for name in names.split(',') {
                    let w = workloads::find(name)
                        .ok_or_else(|| format!("no workload called {name:?} (see --list)"))?;
                    if !out.only.iter().any(|o| o.name == w.name) {
                        out.only.push(w);
                    }
                }
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(out)
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("{why}");
            }
            eprintln!("{USAGE}\n{}", workload_list());
            std::process::exit(2);
        }
    };
    if args.list {
        print!("{}", workload_list());
        return;
    }
    if tokio_timing_wheel::tokio_has_test_util() {
        eprintln!(
            "Tokio's test-util feature is compiled into this build (feature unification with \
             the library's dev-dependencies?), so every Instant::now() pays for the paused-clock \
             check: these would not be the figures users get. Build the suite alone: \
             cargo run --release -p compare"
        );
        std::process::exit(3);
    }
    let ctx = &args.ctx;
    // In the registry's order, whatever the order on the command line.
    let selected: Vec<&Workload> = workloads::ALL
        .iter()
        .filter(|w| args.only.is_empty() || args.only.iter().any(|o| o.name == w.name))
        .collect();

    println!(
        "# tokio-timing-wheel vs peers{}\n",
        if ctx.quick { " (--quick)" } else { "" }
    );
    println!(
        "{} CPUs; {}-worker multi-thread runtimes; median of {} interleaved runs; \"Nx \
         better/worse\" is ours against the peer.\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        ctx.workers,
        ctx.reps,
    );
    println!(
        "Build: {}; Tokio test-util off; Tokio alt timer {}.\n",
        if cfg!(debug_assertions) {
            "DEBUG (figures meaningless: use --release)"
        } else {
            "release"
        },
        if rt::ALT_TIMER {
            "built in (--cfg tokio_unstable)"
        } else {
            "not built in (its rows read n/a)"
        }
    );

    let begin = std::time::Instant::now();
    let whole_run = Load::now();
    let mut summary = Summary::default();
    for w in selected {
        println!("## {}\n", w.name);
        let load = Load::now();
        summary.workload(w.name);
        (w.run)(ctx, &mut summary);
        println!(
            "_Other processes kept {:.0}% of the CPUs busy during this workload._\n",
            load.others_since()
        );
    }

    println!("## Summary\n");
    print_table(&Summary::HEADERS, summary.rows());
    println!(
        "total time: {:.1} s; other processes kept {:.0}% of the CPUs busy meanwhile",
        begin.elapsed().as_secs_f64(),
        whole_run.others_since()
    );
}

/// Every workload's name and line.
fn workload_list() -> String {
    let mut out = String::from("workloads (--only NAME, several allowed):\n");
    for w in workloads::ALL {
        out += &format!("  {:<15} {}\n", w.name, w.about);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse_args;

    fn args(line: &str) -> Result<super::Args, String> {
        parse_args(line.split_whitespace().map(String::from))
    }

    #[test]
    fn the_command_line() {
        let a = args("--quick --only fire,reset --only fire --workers 16 --tasks 64").unwrap();
        assert!(a.ctx.quick);
        assert_eq!((a.ctx.workers, a.ctx.tasks, a.ctx.reps), (16, 64, 3));
        let names: Vec<_> = a.only.iter().map(|w| w.name).collect();
        assert_eq!(names, ["fire", "reset"]);
        assert!(args("--only nope").is_err());
        assert!(args("--workers 0").is_err());
        assert!(args("--bogus").is_err());
        assert!(args("").unwrap().only.is_empty());
    }
}
