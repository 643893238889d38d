//! CPU time from `/proc`: of the process, of named threads, and of the other processes.
//!
//! Linux only; elsewhere every figure reads as 0.

use std::fs;

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

/// CPU ticks of this process's threads whose name starts with `prefix`.
pub(crate) fn thread_ticks(prefix: &str) -> u64 {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
        .map(|t| stat_ticks(&fs::read_to_string(t.path().join("stat")).unwrap_or_default()))
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
}
