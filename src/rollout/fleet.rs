//! The Fleet resource: one per flotilla instance, cluster-scoped, named after the instance.
//! Its spec is the admin's say over rollouts (pause, undo), its status the rollout as
//! `kubectl get fleet` shows it.

use super::plan::{Counts, Phase, State};
use crate::status::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "flotilla.dev",
    version = "v1alpha1",
    kind = "Fleet",
    doc = "The rollout of one flotilla instance's revisions across its namespaces; named after the instance.",
    status = "FleetStatus",
    derive = "PartialEq",
    printcolumn(
        name = "Stable",
        type_ = "integer",
        json_path = ".status.stableRevision"
    ),
    printcolumn(
        name = "Target",
        type_ = "integer",
        json_path = ".status.targetRevision"
    ),
    printcolumn(name = "Updated", type_ = "string", json_path = ".status.updated"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(name = "Failed", type_ = "string", json_path = ".status.failed"),
    printcolumn(name = "Asleep", type_ = "string", json_path = ".status.asleep"),
    printcolumn(name = "Running", type_ = "string", json_path = ".status.budget.inUse"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Message", type_ = "string", json_path = ".status.message")
)]
#[serde(rename_all = "camelCase")]
pub struct FleetSpec {
    /// Hold the rollout where it is (`flotilla rollout pause`); false resumes it.
    #[serde(default)]
    pub paused: bool,
    /// Roll out this revision number instead of the newest (`flotilla rollout undo`). Cleared
    /// when a newer revision is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Lets this many namespaces opting out at once be reaped, past the brake on mass reaping
    /// (`flotilla rollout resume` sets it to what `status.reapHeld` shows). Cleared once none
    /// is left opting out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_reaping: Option<u64>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    pub phase: Phase,
    /// The revision the last complete rollout reached, by number and hash.
    pub stable_revision: i64,
    pub stable_hash: String,
    pub target_revision: i64,
    pub target_hash: String,
    /// Out of the fleet: applied at the target, healthy there, failed there (`n/total`).
    pub updated: String,
    pub ready: String,
    pub failed: String,
    /// Out of the fleet: whose controller sleeps (`n/total`).
    #[serde(default)]
    pub asleep: String,
    pub total: i64,
    /// The namespaces that failed at the target.
    #[serde(default)]
    pub failed_namespaces: Vec<String>,
    /// How many namespaces opting out wait for `flotilla rollout resume` to be reaped.
    #[serde(default)]
    pub reap_held: u64,
    /// What is going on and, when it is stuck, what to do.
    pub message: String,
    pub conditions: Vec<Condition>,
    /// The fleet's budget of running Workflows (`fleetParallelism`); left out without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStatus>,
}

/// The fleet's budget as the leader last shared it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    /// `fleetParallelism`.
    pub limit: u32,
    /// Workflows running across the fleet, as `running/limit`.
    pub in_use: String,
    pub running: u32,
    /// Live Workflows not running yet: waiting for a share, or for their controller.
    pub waiting: u32,
    /// What the namespaces hold: their shares, or what they run where that is more.
    pub held: u32,
}

impl From<crate::budget::Usage> for BudgetStatus {
    fn from(usage: crate::budget::Usage) -> BudgetStatus {
        BudgetStatus {
            limit: usage.budget,
            in_use: format!("{}/{}", usage.running, usage.budget),
            running: usage.running,
            waiting: usage.waiting,
            held: usage.held,
        }
    }
}

impl FleetStatus {
    /// The rollout state this status records (all but what is moving, kept in memory only).
    pub fn state(&self) -> State {
        State {
            stable: self.stable_hash.clone(),
            target: self.target_hash.clone(),
            phase: self.phase,
            failed: self.failed_namespaces.iter().cloned().collect(),
            admitted: Default::default(),
        }
    }
}

/// The status recording `state`: `number` gives a revision's number by hash, `message` what the
/// step decided in words, `since` the transition time kept while the phase stays the same.
pub fn status(
    state: &State,
    counts: &Counts,
    number: impl Fn(&str) -> i64,
    message: String,
    previous: Option<&FleetStatus>,
    now: &str,
) -> FleetStatus {
    let of = |n: usize| format!("{n}/{}", counts.total);
    let complete = state.phase == Phase::Complete;
    let since = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == "Complete"))
        .filter(|c| (c.status == "True") == complete)
        .map_or(now.to_string(), |c| c.last_transition_time.clone());
    FleetStatus {
        phase: state.phase,
        stable_revision: number(&state.stable),
        stable_hash: state.stable.clone(),
        target_revision: number(&state.target),
        target_hash: state.target.clone(),
        updated: of(counts.updated),
        ready: of(counts.ready),
        failed: of(counts.failed),
        asleep: of(counts.asleep),
        total: i64::try_from(counts.total).unwrap_or(i64::MAX),
        failed_namespaces: state.failed.iter().cloned().collect(),
        reap_held: 0,
        budget: None,
        conditions: vec![Condition {
            type_: "Complete".into(),
            status: if complete { "True" } else { "False" }.into(),
            reason: format!("{:?}", state.phase),
            message: message.clone(),
            last_transition_time: since,
        }],
        message,
    }
}
