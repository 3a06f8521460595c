//! A process's peak RSS and CPU time, from /proc.

pub use crate::common::cpu_seconds;
use crate::common::{stat_fields, ticks_per_second};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

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

/// CPU seconds so far, and the peak RSS in MiB or why there is no reading.
pub type Reading = (Option<f64>, Result<f64, String>);

/// CPU seconds and peak RSS of one process over one scenario; `pid` is why there is none if
/// the process to measure was not found.
pub struct Usage {
    pid: Result<u32, String>,
    cpu0: f64,
}

impl Usage {
    pub fn start(pid: Result<u32, String>) -> Usage {
        if let Ok(pid) = pid
            && !reset_peak(pid)
        {
            eprintln!(
                "bench: cannot reset VmHWM of {pid} (not root?): peak RSS is since its start"
            );
        }
        let cpu0 = pid.as_ref().ok().and_then(|p| cpu_seconds(*p));
        Usage {
            pid,
            cpu0: cpu0.unwrap_or(0.0),
        }
    }

    /// From the process's start, for a process started for this scenario.
    pub fn since_start(pid: Result<u32, String>) -> Usage {
        Usage { pid, cpu0: 0.0 }
    }

    pub fn read(&self) -> Reading {
        let pid = match &self.pid {
            Ok(pid) => *pid,
            Err(why) => return (None, Err(why.clone())),
        };
        let rss = peak_rss_mib(pid).ok_or_else(|| format!("/proc/{pid}/status unreadable"));
        (cpu_seconds(pid).map(|c| c - self.cpu0), rss)
    }
}

/// `root` if it runs `exe`, else its first descendant that does: a wrapper (`strace -f`,
/// heaptrack) runs the program it measures as a child.
pub fn running(root: u32, exe: &Path) -> Option<u32> {
    let exe = exe.canonicalize().ok()?;
    let runs = |pid: u32| {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| {
            let p = p.to_string_lossy();
            Path::new(p.trim_end_matches(" (deleted)")) == exe
        })
    };
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // The field after the state: the parent's pid.
        if let Some(parent) = stat_fields(pid).and_then(|f| f.get(1).copied()) {
            children.entry(parent as u32).or_default().push(pid);
        }
    }
    let mut next = VecDeque::from([root]);
    while let Some(pid) = next.pop_front() {
        if runs(pid) {
            return Some(pid);
        }
        next.extend(children.get(&pid).into_iter().flatten());
    }
    None
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
