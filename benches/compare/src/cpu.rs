//! CPU time from `/proc`: of the process, of named threads, and of the other processes.
//!
//! Linux only; elsewhere every figure reads as 0. Most figures are in `USER_HZ` ticks (10 ms);
//! those in nanoseconds come from a thread's `schedstat` (the kernel brings a running thread's
//! figure up to date at its scheduler ticks, a few ms), falling back to ticks without it.

use std::fs;
use std::path::Path;

/// `/proc` reports CPU time in USER_HZ ticks, 100 per second on Linux.
pub(crate) const TICK_MS: u64 = 10;

/// utime + stime, in ticks, from a `/proc/.../stat` line.
fn stat_ticks(stat: &str) -> u64 {
    // The command name, in parentheses, may hold spaces: count fields after the last ')'.
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    let field = |k: usize| fields.get(k - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// CPU ticks of the whole process.
pub(crate) fn process_ticks() -> u64 {
    stat_ticks(&fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// CPU time of the thread whose `/proc` directory is `task`, in ns.
fn task_cpu_ns(task: &Path) -> u64 {
    // "time on the CPU (ns) time waiting to run (ns) timeslices"
    let schedstat = fs::read_to_string(task.join("schedstat")).ok();
    match schedstat
        .as_deref()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
    {
        Some(ns) => ns,
        None => {
            let ticks = stat_ticks(&fs::read_to_string(task.join("stat")).unwrap_or_default());
            ticks * TICK_MS * 1_000_000
        }
    }
}

/// CPU time of the calling thread (where a `current_thread` runtime's `block_on` runs all its
/// tasks), in ns.
pub(crate) fn current_thread_cpu_ns() -> u64 {
    task_cpu_ns(Path::new("/proc/thread-self"))
}

/// CPU time of this process's threads whose name starts with `prefix`, in ns (see
/// [`thread_ticks`] for the names).
pub(crate) fn thread_cpu_ns(prefix: &str) -> u64 {
    named_threads(prefix).map(|t| task_cpu_ns(&t)).sum()
}

/// The `/proc` directories of this process's threads whose name starts with `prefix`.
fn named_threads(prefix: &str) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .map(|t| t.path())
        .filter(move |t| fs::read_to_string(t.join("comm")).is_ok_and(|c| c.starts_with(prefix)))
}

/// CPU ticks of this process's threads whose name starts with `prefix` (Linux keeps the first
/// 15 bytes of a thread's name: a longer `prefix` never matches).
pub(crate) fn thread_ticks(prefix: &str) -> u64 {
    named_threads(prefix)
        .map(|t| stat_ticks(&fs::read_to_string(t.join("stat")).unwrap_or_default()))
        .sum()
}

/// The machine's busy CPU ticks and this process's, at one moment: timings taken while other
/// processes keep the CPUs busy are noisy, so each workload says how busy they kept them.
#[derive(Debug)]
pub(crate) struct Load {
    machine: u64,
    own: u64,
    at: std::time::Instant,
}

impl Load {
    /// Now.
    pub(crate) fn now() -> Load {
        // "cpu  user nice system idle iowait irq softirq steal ...": all but idle and iowait.
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|&k| f.get(k)).sum();
        Load {
            machine: busy,
            own: process_ticks(),
            at: std::time::Instant::now(),
        }
    }

    /// How much of the machine's CPUs other processes kept busy since `self`, in percent.
    pub(crate) fn others_since(&self) -> f64 {
        let now = Load::now();
        let others = (now.machine.saturating_sub(self.machine))
            .saturating_sub(now.own.saturating_sub(self.own));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let capacity = self.at.elapsed().as_secs_f64() * (1000 / TICK_MS) as f64 * cpus as f64;
        others as f64 / capacity * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::stat_ticks;

    #[test]
    fn stat_lines_with_spaces_in_the_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        let line = "42 (a b) c) S 1 42 42 0 -1 4194560 10 0 0 0 7 5 0 0 20 0";
        assert_eq!(stat_ticks(line), 12);
        assert_eq!(stat_ticks(""), 0);
    }

    #[test]
    fn a_busy_thread_counts_its_cpu_time() {
        let named = std::thread::Builder::new().name("cpu-test-spin".into());
        let ns = named
            .spawn(|| {
                let (before, spin) = (super::current_thread_cpu_ns(), std::time::Instant::now());
                while spin.elapsed() < std::time::Duration::from_millis(50) {
                    std::hint::black_box(spin.elapsed());
                }
                let mine = super::current_thread_cpu_ns() - before;
                (mine, super::thread_cpu_ns("cpu-test-spin"))
            })
            .unwrap()
            .join()
            .unwrap();
        // Where there is a /proc (Linux), some of the 50 ms of spinning counts however busy the
        // machine, and the thread's total by name includes it.
        if std::path::Path::new("/proc/thread-self").exists() {
            assert!(ns.0 > 0, "no CPU time counted");
            assert!(ns.1 >= ns.0, "{ns:?}");
        }
    }
}
