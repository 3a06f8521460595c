//! Who was busy during a scenario, and the waits before one: until the machine is idle (nothing
//! but the bench's own processes running), and until the cluster is quiet (no writes).

use crate::cluster::{self, Flotilla};
use crate::{metrics, procstat};
use kube::Client;
use std::time::{Duration, Instant};

/// Marks a scenario during which other processes took a share of the machine.
pub const DISTURBED: &str = " <- OTHER PROCESSES TOOK CPU: this result is disturbed";

/// Who was busy during a scenario: the control plane's processes, flotilla, the machine as a
/// whole (other processes on it, say a build, make a result worthless), and where the API
/// server's request time went.
pub struct Probe {
    procs: Vec<(&'static str, u32, f64)>,
    own0: f64,
    machine: procstat::MachineCpu,
    latencies: metrics::Latencies,
}

fn control_plane_pids() -> Vec<(&'static str, u32)> {
    let state = cluster::state_dir();
    ["kube-apiserver", "etcd", "kube-controller-manager"]
        .into_iter()
        .filter_map(|name| {
            let pid = std::fs::read_to_string(state.join(format!("{name}.pid"))).ok()?;
            Some((name, pid.trim().parse().ok()?))
        })
        .collect()
}

impl Probe {
    pub async fn start(client: &Client) -> Probe {
        let procs = control_plane_pids()
            .into_iter()
            .map(|(name, pid)| (name, pid, procstat::cpu_seconds(pid).unwrap_or(0.0)))
            .collect();
        Probe {
            procs,
            own0: procstat::own_cpu_seconds(),
            latencies: metrics::Latencies::read(client).await,
            machine: procstat::MachineCpu::read(),
        }
    }

    /// Also counts flotilla's processes (started now, or running: their CPU from now on).
    pub fn flotilla(&mut self, flotilla: &Flotilla, started_now: bool) {
        for (name, pid) in flotilla.pids() {
            let cpu0 = if started_now {
                0.0
            } else {
                procstat::cpu_seconds(pid).unwrap_or(0.0)
            };
            self.procs.push((name, pid, cpu0));
        }
    }

    /// Call right at the end of the scenario's window of `seconds`.
    pub async fn finish(&self, client: &Client, seconds: f64) -> String {
        let machine = procstat::MachineCpu::read();
        let (busy, total) = machine.since(&self.machine);
        let steal = machine.steal_since(&self.machine);
        let latencies = metrics::Latencies::read(client)
            .await
            .since(&self.latencies);
        let mut ours = procstat::own_cpu_seconds() - self.own0;
        let mut parts = Vec::new();
        for (name, pid, cpu0) in &self.procs {
            let cpu = procstat::cpu_seconds(*pid).unwrap_or(0.0) - cpu0;
            ours += cpu;
            parts.push(format!(
                "{name} {cpu:.1} s ({:.0}%)",
                100.0 * cpu / seconds.max(0.001)
            ));
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let others = (busy - ours).max(0.0);
        let warning = if others > 0.1 * total { DISTURBED } else { "" };
        format!(
            "CPU: {}, bench {:.1} s; machine busy {:.0}% of {cores} cores, steal {:.0}%, \
             other processes {:.0}%{warning}; {latencies}",
            parts.join(", "),
            procstat::own_cpu_seconds() - self.own0,
            100.0 * busy / total.max(0.001),
            100.0 * steal / total.max(0.001),
            100.0 * others / total.max(0.001),
        )
    }
}

/// Waits (at most `max`) until processes other than the bench's own (and `flotilla`'s) use
/// under 10% of the machine for 3 s, so that a build or test run elsewhere does not distort a
/// timed scenario.
pub async fn wait_idle(max: Duration, flotilla: Option<&Flotilla>) -> String {
    let start = Instant::now();
    let mut pids: Vec<u32> = control_plane_pids().into_iter().map(|(_, p)| p).collect();
    pids.extend(flotilla.into_iter().flat_map(|f| f.pids()).map(|(_, p)| p));
    let ours = |pids: &[u32]| -> f64 {
        procstat::own_cpu_seconds()
            + pids
                .iter()
                .filter_map(|p| procstat::cpu_seconds(*p))
                .sum::<f64>()
    };
    loop {
        let (m0, o0) = (procstat::MachineCpu::read(), ours(&pids));
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (busy, total) = procstat::MachineCpu::read().since(&m0);
        let others = (busy - (ours(&pids) - o0)).max(0.0) / total.max(0.001);
        if others < 0.1 {
            return String::new();
        }
        if start.elapsed() >= max {
            let msg = format!(
                "machine not idle after {:.0} s (other processes {:.0}%); measuring anyway",
                start.elapsed().as_secs_f64(),
                100.0 * others
            );
            eprintln!("bench: {msg}");
            return format!("{msg}; ");
        }
    }
}

/// Waits until the API server has served no write request for 5 s (to any resource but Leases:
/// flotilla renews its leader Lease all the time), or `max`. Returns the time waited and whether
/// it got quiet.
pub async fn wait_quiet(client: &Client, max: Duration) -> (f64, bool) {
    let start = Instant::now();
    let writes = || async { metrics::total(&metrics::writes_except(client, &["leases"]).await) };
    let mut last = writes().await;
    let mut still_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = writes().await;
        if now != last {
            last = now;
            still_since = Instant::now();
        }
        if still_since.elapsed() >= Duration::from_secs(5) {
            return (start.elapsed().as_secs_f64(), true);
        }
        if start.elapsed() >= max {
            return (start.elapsed().as_secs_f64(), false);
        }
    }
}
