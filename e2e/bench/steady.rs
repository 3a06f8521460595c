//! The steady state: a converged fleet that nothing changes, watched for a while with at least
//! one full resync in the window. flotilla must write nothing then but its Lease renewals; those
//! must be there, or the audit log was not read, or does not hold the whole window.

use crate::audit::{Actor, Window};
use crate::cluster::Flotilla;
use crate::metrics;
use crate::phase::{Phase, Scenario};
use crate::probe::{Probe, wait_quiet};
use crate::procstat::Usage;
use crate::report::{self, Row, Target};
use crate::setup::{DEGRADED_AFTER_SECONDS, RESYNC_SECONDS};
use flotilla::config::Config;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

/// What the steady-state target is judged on.
pub struct Steady {
    /// Writes by flotilla in the window, Lease renewals left out (audit log).
    pub writes: u64,
    /// All of flotilla's writes, by resource and verb.
    described: String,
    /// How the Lease renewals cover the window, or why the audit log cannot vouch for it.
    coverage: Result<String, String>,
    /// Writes to stamped kinds and namespaces in the window, by anyone (apiserver_request_total).
    apiserver: BTreeMap<String, u64>,
    seconds: u64,
}

impl Steady {
    pub fn target(&self) -> Target {
        let coverage = match &self.coverage {
            Ok(how) => how.clone(),
            Err(why) => format!("NO PROOF THE WINDOW WAS READ: {why}"),
        };
        Target {
            what: "zero writes at steady state".into(),
            pass: self.coverage.is_ok() && self.writes == 0,
            detail: format!(
                "flotilla made {} writes but Lease renewals in {} s (audit log; all its writes: {}); \
                 {coverage}; the API server saw {} writes to stamped kinds + namespaces from anyone \
                 (metrics: {})",
                self.writes,
                self.seconds,
                self.described,
                metrics::total(&self.apiserver),
                report::verbs(&self.apiserver)
            ),
        }
    }
}

pub async fn run(phase: &mut Phase<'_>, flotilla: &mut Flotilla, config: &Config) -> (Row, Steady) {
    let bench = phase.bench;
    let admin = &phase.cluster.admin;
    eprintln!(
        "bench: steady state: waiting for a quiet cluster (at most {} s)",
        bench.quiet_max.as_secs()
    );
    let (waited, quiet) = wait_quiet(admin, bench.quiet_max).await;
    eprintln!("bench: steady state: {} s window", bench.steady_secs);
    phase.audit.take();
    let m0 = metrics::writes(admin, Some(&metrics::STAMPED_AND_NAMESPACES)).await;
    let usage = Usage::start(flotilla.process());
    let mut probe = Probe::start(admin).await;
    probe.flotilla(flotilla, false);
    let (log0, w0, t0) = (flotilla.log_len(), Instant::now(), SystemTime::now());
    tokio::time::sleep(Duration::from_secs(bench.steady_secs)).await;
    let (log1, w1, t1) = (flotilla.log_len(), Instant::now(), SystemTime::now());
    let cp = probe.finish(admin, (w1 - w0).as_secs_f64()).await;
    let m1 = metrics::writes(admin, Some(&metrics::STAMPED_AND_NAMESPACES)).await;
    let used = usage.read();
    flotilla.assert_running();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = phase.audit.take();
    let steady = Steady {
        writes: window.writes_but_renewals(Actor::Flotilla),
        described: window.describe_writes(Actor::Flotilla),
        coverage: covered(&window, (t0, t1), config),
        apiserver: metrics::delta(&m1, &m0),
        seconds: bench.steady_secs,
    };
    let resyncs: Vec<String> = (1..)
        .map(|k| flotilla.started + Duration::from_secs(k * RESYNC_SECONDS))
        .take_while(|t| *t < w1)
        .filter(|t| *t >= w0)
        .map(|t| format!("+{:.0} s", (t - w0).as_secs_f64()))
        .collect();
    let in_sync = flotilla.count_log(log0, log1, "in sync");
    let notes = vec![
        format!(
            "writes by flotilla but Lease renewals (audit): {}; all its writes: {}; {}; API server \
             writes to stamped kinds + namespaces (apiserver_request_total): {} ({})",
            steady.writes,
            steady.described,
            steady.coverage.as_ref().unwrap_or_else(|why| why),
            metrics::total(&steady.apiserver),
            report::verbs(&steady.apiserver),
        ),
        format!(
            "writes by kube-controller-manager in the window (audit): {} ({})",
            window.writes_of(Actor::ControllerManager),
            window.describe_writes(Actor::ControllerManager)
        ),
        format!(
            "cluster {} after waiting {waited:.0} s; full resync (every {RESYNC_SECONDS} s) at {} into the window; \
             {in_sync} 'in sync' reconciles logged in the window; degradedAfterSeconds is \
             {DEGRADED_AFTER_SECONDS} (with no kubelet every worker would otherwise turn Degraded \
             300 s after its Deployment appeared: a status write of a real change); {cp}",
            if quiet {
                "quiet (no writes but Lease renewals for 5 s)"
            } else {
                "NOT quiet (BENCH_QUIET_MAX_SECONDS reached)"
            },
            if resyncs.is_empty() {
                "-".to_string()
            } else {
                resyncs.join(", ")
            },
        ),
    ];
    let scenario = Scenario {
        name: "flotilla steady state",
        objects: phase.fleet_keys.len(),
        seconds: (w1 - w0).as_secs_f64(),
        throughput: false,
    };
    (phase.row(scenario, used, &window, notes), steady)
}

/// Whether flotilla's Lease renewals cover the window from `t0` to `t1`, never further apart than
/// the Lease lasts: then the audit log was read and holds the whole window (a leader that went
/// that long without renewing would have lost the Lease anyway).
fn covered(
    window: &Window,
    (t0, t1): (SystemTime, SystemTime),
    config: &Config,
) -> Result<String, String> {
    if let Some(gap) = &window.gap {
        return Err(format!("the audit log is incomplete: {gap}"));
    }
    if !config.leader_election.enabled {
        return Err("leader election is off in the bench's config: no Lease renewals".into());
    }
    let lease = config.leader_election.lease_duration_seconds as f64;
    let time = |t: SystemTime| Timestamp::try_from(t).expect("a time after 1970");
    let (from, to) = (time(t0), time(t1));
    let mut renewals: Vec<Timestamp> = window
        .renewals
        .iter()
        .copied()
        .filter(|t| (from..=to).contains(t))
        .collect();
    if renewals.is_empty() {
        return Err(
            "no Lease renewal by flotilla in the window: the audit log was not read or does not cover it"
                .into(),
        );
    }
    renewals.sort();
    let points: Vec<Timestamp> = std::iter::once(from)
        .chain(renewals.iter().copied())
        .chain(std::iter::once(to))
        .collect();
    let longest = points
        .windows(2)
        .map(|p| p[1].duration_since(p[0]).as_secs_f64())
        .fold(0.0, f64::max);
    if longest > lease {
        return Err(format!(
            "{} Lease renewals by flotilla in the window, but {longest:.1} s without one, longer \
             than the Lease's {lease:.0} s: the audit log misses part of the window, or flotilla \
             stalled",
            renewals.len()
        ));
    }
    Ok(format!(
        "{} Lease renewals by flotilla cover the window, at most {longest:.1} s apart",
        renewals.len()
    ))
}
