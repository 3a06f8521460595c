//! The fleet as the leader sees it, for alerts and the dashboard (monitoring/): NamespaceWorkers
//! by phase and the rollout's phase, counts, revisions and held reaping. Only the leader knows
//! them; a replica that does not lead exports none of these series, never stale ones.

use crate::rollout::fleet::FleetStatus;
use crate::rollout::{self, Counts};
use crate::status;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RevisionLabel {
    pub revision: &'static str,
}

/// Every NamespaceWorker phase, each exported (0 when none is in it) so that an alert's ratio
/// has both sides.
const NAMESPACE_PHASES: [status::Phase; 8] = [
    status::Phase::Pending,
    status::Phase::Progressing,
    status::Phase::Ready,
    status::Phase::Degraded,
    status::Phase::RenderFailed,
    status::Phase::ApplyFailed,
    status::Phase::Conflict,
    status::Phase::Sleeping,
];

const ROLLOUT_PHASES: [rollout::Phase; 5] = [
    rollout::Phase::Progressing,
    rollout::Phase::Paused,
    rollout::Phase::Complete,
    rollout::Phase::Failed,
    rollout::Phase::RolledBack,
];

/// A phase's label value: its name as the NamespaceWorker's status shows it.
fn namespace_phase(phase: status::Phase) -> &'static str {
    match phase {
        status::Phase::Pending => "Pending",
        status::Phase::Progressing => "Progressing",
        status::Phase::Ready => "Ready",
        status::Phase::Degraded => "Degraded",
        status::Phase::RenderFailed => "RenderFailed",
        status::Phase::ApplyFailed => "ApplyFailed",
        status::Phase::Conflict => "Conflict",
        status::Phase::Sleeping => "Sleeping",
    }
}

/// A rollout phase's label value: its name as the Fleet's status shows it.
fn rollout_phase(phase: rollout::Phase) -> &'static str {
    match phase {
        rollout::Phase::Progressing => "Progressing",
        rollout::Phase::Paused => "Paused",
        rollout::Phase::Complete => "Complete",
        rollout::Phase::Failed => "Failed",
        rollout::Phase::RolledBack => "RolledBack",
    }
}

#[derive(Default)]
pub struct FleetGauges {
    /// `flotilla_namespaces{phase}`: NamespaceWorkers in each phase.
    namespaces: Family<PhaseLabel, Gauge>,
    /// `flotilla_rollout_phase{phase}`: 1 for the Fleet's phase, 0 for the others.
    rollout_phase: Family<PhaseLabel, Gauge>,
    /// `flotilla_rollout_namespaces{state}`: the fleet (`total`), and how many are at the target
    /// revision (`updated`), healthy there (`ready`), failed there (`failed`).
    rollout_namespaces: Family<StateLabel, Gauge>,
    /// `flotilla_rollout_revision{revision}`: the `target` and `stable` revision numbers.
    revision: Family<RevisionLabel, Gauge>,
    /// `flotilla_rollout_reap_held`: namespaces opting out whose reaping waits for an admin.
    reap_held: Family<Vec<(&'static str, &'static str)>, Gauge>,
    /// `flotilla_budget{state}`: the fleet's budget of running Workflows (`limit`), and the
    /// Workflows `running` and `waiting` across the fleet, and what the namespaces `held`.
    budget: Family<StateLabel, Gauge>,
}

impl FleetGauges {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "namespaces",
            "NamespaceWorkers by phase (leader only)",
            self.namespaces.clone(),
        );
        registry.register(
            "rollout_phase",
            "1 for the Fleet's rollout phase (leader only)",
            self.rollout_phase.clone(),
        );
        registry.register(
            "rollout_namespaces",
            "Namespaces of the fleet, and at the target revision: updated, ready, failed (leader only)",
            self.rollout_namespaces.clone(),
        );
        registry.register(
            "rollout_revision",
            "The target and stable revision numbers (leader only)",
            self.revision.clone(),
        );
        registry.register(
            "rollout_reap_held",
            "Namespaces opting out whose reaping waits for `flotilla rollout resume` (leader only)",
            self.reap_held.clone(),
        );
        registry.register(
            "budget",
            "The fleet's budget of running Workflows (limit) and its running, waiting and held (leader only)",
            self.budget.clone(),
        );
    }

    /// The fleet's budget as the leader last shared it (`None`: no budget).
    pub fn record_budget(&self, usage: Option<&crate::budget::Usage>) {
        let Some(usage) = usage else {
            self.budget.clear();
            return;
        };
        for (state, n) in [
            ("limit", usage.budget),
            ("running", usage.running),
            ("waiting", usage.waiting),
            ("held", usage.held),
        ] {
            self.budget
                .get_or_create(&StateLabel { state })
                .set(i64::from(n));
        }
    }

    /// What the leader's rollout step wrote to the Fleet (`status`, from `counts`), and the
    /// phase of every NamespaceWorker.
    pub fn record(
        &self,
        status: &FleetStatus,
        counts: &Counts,
        workers: impl IntoIterator<Item = status::Phase>,
    ) {
        let mut tally = [0i64; NAMESPACE_PHASES.len()];
        for phase in workers {
            if let Some(i) = NAMESPACE_PHASES.iter().position(|p| *p == phase) {
                tally[i] += 1;
            }
        }
        for (phase, count) in NAMESPACE_PHASES.iter().zip(tally) {
            let phase = namespace_phase(*phase);
            self.namespaces
                .get_or_create(&PhaseLabel { phase })
                .set(count);
        }
        for phase in ROLLOUT_PHASES {
            let value = i64::from(phase == status.phase);
            let phase = rollout_phase(phase);
            self.rollout_phase
                .get_or_create(&PhaseLabel { phase })
                .set(value);
        }
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for (state, n) in [
            ("total", counts.total),
            ("updated", counts.updated),
            ("ready", counts.ready),
            ("failed", counts.failed),
        ] {
            let gauge = self.rollout_namespaces.get_or_create(&StateLabel { state });
            gauge.set(count(n));
        }
        for (revision, number) in [
            ("target", status.target_revision),
            ("stable", status.stable_revision),
        ] {
            let gauge = self.revision.get_or_create(&RevisionLabel { revision });
            gauge.set(number);
        }
        let held = i64::try_from(status.reap_held).unwrap_or(i64::MAX);
        self.reap_held.get_or_create(&Vec::new()).set(held);
    }

    /// A replica that stopped leading: none of these series any more.
    pub fn clear(&self) {
        self.namespaces.clear();
        self.rollout_phase.clear();
        self.rollout_namespaces.clear();
        self.revision.clear();
        self.reap_held.clear();
        self.budget.clear();
    }
}
