//! A process's peak RSS and CPU time, from /proc.

pub use crate::common::cpu_seconds;
use crate::common::{stat_fields, ticks_per_second};

/// cutime + cstime: CPU of waited-for children (the script baseline's kubectl and flotilla).
pub fn children_cpu_seconds(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    Some((f[13] + f[14]) as f64 / ticks_per_second())
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// VmHWM: peak resident set size (since start or the last [`reset_peak`]), in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmHWM:").map(|k| k as f64 / 1024.0)
}

/// Resets VmHWM to the current RSS, so that a scenario's peak is its own (root only).
pub fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// CPU seconds and peak RSS of one process over one scenario.
pub struct Usage {
    pid: u32,
    cpu0: f64,
}

impl Usage {
    pub fn start(pid: u32) -> Usage {
        if !reset_peak(pid) {
            eprintln!(
                "bench: cannot reset VmHWM of {pid} (not root?): peak RSS is since its start"
            );
        }
        Usage {
            pid,
            cpu0: cpu_seconds(pid).unwrap_or(0.0),
        }
    }

    /// From the process's start, for a process started for this scenario.
    pub fn since_start(pid: u32) -> Usage {
        Usage { pid, cpu0: 0.0 }
    }

    /// (CPU seconds, peak RSS MiB) so far.
    pub fn read(&self) -> (Option<f64>, Option<f64>) {
        (
            cpu_seconds(self.pid).map(|c| c - self.cpu0),
            peak_rss_mib(self.pid),
        )
    }
}

/// The whole machine's CPU time (from /proc/stat), to tell a saturated machine from a slow
/// request path.
pub struct MachineCpu {
    busy: u64,
    total: u64,
    steal: u64,
}

impl MachineCpu {
    pub fn read() -> MachineCpu {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let fields: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let get = |i: usize| fields.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        let (idle, steal) = (get(3) + get(4), get(7));
        let total: u64 = (0..8).map(get).sum();
        MachineCpu {
            busy: total - idle - steal,
            total,
            steal,
        }
    }

    /// Busy and elapsed machine CPU seconds (all cores) since `before`.
    pub fn since(&self, before: &MachineCpu) -> (f64, f64) {
        let ticks = ticks_per_second();
        (
            (self.busy - before.busy) as f64 / ticks,
            (self.total - before.total) as f64 / ticks,
        )
    }

    pub fn steal_since(&self, before: &MachineCpu) -> f64 {
        (self.steal - before.steal) as f64 / ticks_per_second()
    }
}

/// CPU seconds of the bench process and of its waited-for children.
pub fn own_cpu_seconds() -> f64 {
    let me = std::process::id();
    cpu_seconds(me).unwrap_or(0.0) + children_cpu_seconds(me).unwrap_or(0.0)
}
