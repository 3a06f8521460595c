//! What one turn of the rollout decides from, read once: the Fleet, who is in the fleet and how
//! their NamespaceWorkers show them, the brake's count, the kept revisions and the config in
//! force.

use super::brake::Seen;
use super::fleet::{Fleet, FleetStatus};
use super::kept::KeptRevisions;
use super::plan::{Member, State};
use super::strategy::Strategy;
use k8s_openapi::jiff::Timestamp;

/// Everything a turn decides from, read once.
#[derive(Debug, Clone)]
pub struct FleetSnapshot {
    /// The Fleet as the watch shows it (or as just created): the admin's spec, and the status
    /// last written to it.
    pub fleet: Fleet,
    /// The status this leader last wrote to this Fleet, which the watch may not show yet.
    pub written: Option<FleetStatus>,
    /// Where the last turn left the rollout.
    pub state: State,
    /// Every namespace in the fleet, as its NamespaceWorker shows it.
    pub members: Vec<Member>,
    /// The brake on mass reaping, as counted for this turn.
    pub brake: Seen,
    pub kept: KeptRevisions,
    /// The config in force: its strategy, its revision, why the files on disk are refused (if
    /// they are), and the keys that wait for a restart.
    pub strategy: Strategy,
    pub in_force: String,
    pub refused: Option<String>,
    pub waiting: Vec<&'static str>,
    /// The refusal last told in an Event.
    pub refusal_reported: Option<String>,
    /// Now on the leader's monotonic clock (`rollout::clock`), as the members' times are.
    pub now: Timestamp,
    /// Now by the wall clock: only for the times the Fleet's status shows, never compared.
    pub wall: Timestamp,
    /// The fleet's budget as last shared (`None`: no budget).
    pub budget: Option<crate::budget::Usage>,
}
