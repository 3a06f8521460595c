//! The restart: flotilla stopped and started again on a converged fleet, as in a rollout of
//! flotilla itself or a new leader after a failover. The new process re-checks every namespace;
//! since nothing changed, it must only read. Timed from its start until it logs "initial sync
//! complete", then watched a while longer for late writes.

use crate::audit::Actor;
use crate::cluster::Flotilla;
use crate::converge::Startup;
use crate::phase::{Phase, Scenario};
use crate::probe::{Probe, wait_idle};
use crate::procstat::Usage;
use crate::report::{Row, Target};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long after "initial sync complete" the window stays open: reconciles it queued last.
const AFTER_SYNC: Duration = Duration::from_secs(10);

/// What the target is judged on.
pub struct Restarted {
    /// Writes by flotilla to anything but its Lease, from its start to the window's end.
    pub writes: u64,
    described: String,
    gap: Option<String>,
    pub startup: Startup,
}

impl Restarted {
    pub fn target(&self) -> Target {
        let synced = self.startup.initial_sync.is_some();
        Target {
            what: "zero writes after a restart (a new leader)".into(),
            pass: self.writes == 0 && self.gap.is_none() && synced,
            detail: match (&self.gap, synced) {
                (Some(gap), _) => format!("AUDIT LOG INCOMPLETE: {gap}"),
                (None, false) => "the new flotilla never logged 'initial sync complete'".into(),
                (None, true) => format!(
                    "{} writes but its Lease's ({}); {}",
                    self.writes,
                    self.described,
                    self.startup.describe()
                ),
            },
        }
    }
}

pub async fn run(
    phase: &mut Phase<'_>,
    flotilla: Flotilla,
    config: &Path,
) -> (Row, Flotilla, Restarted) {
    eprintln!("bench: restart");
    let bench = phase.bench;
    let idle = wait_idle(bench.idle_max, Some(&flotilla)).await;
    flotilla.stop();
    phase.audit.take();
    let mut probe = Probe::start(&phase.cluster.admin).await;
    let log = bench.work.join("flotilla-restart.log");
    let mut flotilla = Flotilla::start(&phase.cluster, config, &log);
    let deadline = Instant::now() + bench.timeout;
    let synced = loop {
        if let Some(at) = flotilla.logged_after("initial sync complete") {
            break Some(at);
        }
        flotilla.assert_running();
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    probe.flotilla(&flotilla, true);
    let usage = Usage::since_start(flotilla.process());
    tokio::time::sleep(AFTER_SYNC).await;
    let seconds = synced.unwrap_or_else(|| flotilla.started.elapsed().as_secs_f64());
    let (cp, used, window) = phase.finish(&probe, &usage, seconds).await;
    let restarted = Restarted {
        writes: window.writes_but_leases(Actor::Flotilla),
        described: window.describe_writes(Actor::Flotilla),
        gap: window.gap.clone(),
        startup: Startup::of(&flotilla, &window),
    };
    let notes = vec![format!(
        "stopped (SIGTERM) and started again with the same config on the converged fleet: from \
         process start until 'initial sync complete' ({seconds:.3} s), requests counted until \
         {} s after it; {}; writes: {}; {idle}{cp}",
        AFTER_SYNC.as_secs(),
        restarted.startup.describe(),
        restarted.described
    )];
    let scenario = Scenario {
        name: "flotilla restart",
        objects: phase.fleet_keys.len(),
        seconds,
        throughput: false,
    };
    (
        phase.row(scenario, used, &window, notes),
        flotilla,
        restarted,
    )
}
