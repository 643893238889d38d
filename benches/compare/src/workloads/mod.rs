//! The registry of workloads: one module each, run in the order listed here.

use crate::report::Summary;

/// What every workload is given.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// Tiny sizes, for the CI smoke run.
    pub(crate) quick: bool,
    /// Repetitions of every measurement (interleaving the systems); the tables give medians.
    pub(crate) reps: usize,
    /// Worker threads of the multi-thread runtimes (`--workers`, 2 by default).
    pub(crate) workers: usize,
    /// The "many tasks" count of the throughput workloads (`--tasks`, 8 by default).
    pub(crate) tasks: usize,
}

impl Ctx {
    /// `full`, or `quick` with `--quick`.
    pub(crate) fn size<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// One workload: its `--only` name, a line about it, and its runner, which prints its tables
/// and adds its rows to the summary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Workload {
    /// Its `--only` name, and its name in the summary.
    pub(crate) name: &'static str,
    /// One line: what it measures.
    pub(crate) about: &'static str,
    /// Prints its tables (its `##` heading is printed for it) and adds its summary rows.
    pub(crate) run: fn(&Ctx, &mut Summary),
}

// Each workload's module defines `pub(crate) const WORKLOAD: Workload`. The modules are declared
// here, outside any macro, so that rustfmt sees them; a module left out of `ALL` fails the build
// (its `WORKLOAD` is never used, and warnings are errors in CI).
pub(crate) mod blocked_worker;
pub(crate) mod cross_worker;
pub(crate) mod delay_queue;
pub(crate) mod delayed;
pub(crate) mod fire;
pub(crate) mod fire_load;
pub(crate) mod hyper_idle;
pub(crate) mod idle;
pub(crate) mod interval;
pub(crate) mod lone;
pub(crate) mod memory;
pub(crate) mod repoll;
pub(crate) mod reset;
pub(crate) mod rpc;
pub(crate) mod rpc_situations;
pub(crate) mod same_tick;
pub(crate) mod saturated;
pub(crate) mod service;

/// Every workload, in the order they run: the registry.
pub(crate) const ALL: &[Workload] = &[
    rpc::WORKLOAD,
    rpc_situations::WORKLOAD,
    repoll::WORKLOAD,
    reset::WORKLOAD,
    fire::WORKLOAD,
    fire_load::WORKLOAD,
    same_tick::WORKLOAD,
    saturated::WORKLOAD,
    blocked_worker::WORKLOAD,
    cross_worker::WORKLOAD,
    memory::WORKLOAD,
    delayed::WORKLOAD,
    idle::WORKLOAD,
    lone::WORKLOAD,
    interval::WORKLOAD,
    delay_queue::WORKLOAD,
    hyper_idle::WORKLOAD,
    service::WORKLOAD,
];

/// The workload called `name`.
pub(crate) fn find(name: &str) -> Option<&'static Workload> {
    ALL.iter().find(|w| w.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for w in ALL {
            assert_eq!(ALL.iter().filter(|x| x.name == w.name).count(), 1);
            assert_eq!(find(w.name).map(|f| f.about), Some(w.about));
            assert!(!w.about.is_empty());
        }
        assert!(find("no-such-workload").is_none());
    }
}
