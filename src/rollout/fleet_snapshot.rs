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

/// A status this leader wrote, with the Fleet as the watch showed it when the write was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenStatus {
    pub uid: String,
    /// The Fleet's resourceVersion before the write.
    pub over: Option<String>,
    pub status: FleetStatus,
}

impl WrittenStatus {
    /// This write's status while the watch still shows `fleet` as it was before it, else `None`:
    /// once the watch has moved on, to this write or to any write after it, the watched status
    /// is what stands, so a status that landed later (a deposed leader's) is seen and corrected.
    pub fn unseen_by(&self, fleet: &Fleet) -> Option<FleetStatus> {
        let uid = fleet.metadata.uid.as_deref().unwrap_or_default();
        let unmoved = uid == self.uid && fleet.metadata.resource_version == self.over;
        unmoved.then(|| self.status.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(uid: &str, resource_version: &str, message: &str) -> Fleet {
        let mut fleet = Fleet::new("flotilla", Default::default());
        fleet.metadata.uid = Some(uid.into());
        fleet.metadata.resource_version = Some(resource_version.into());
        fleet.status = Some(FleetStatus {
            message: message.into(),
            ..Default::default()
        });
        fleet
    }

    #[test]
    fn a_written_status_stands_only_until_the_watch_moves_past_the_fleet_it_was_written_over() {
        let written = WrittenStatus {
            uid: "u1".into(),
            over: Some("10".into()),
            status: FleetStatus {
                message: "ours".into(),
                ..Default::default()
            },
        };
        // (watched uid, watched resourceVersion, watched message) -> status compared with
        let cases = [
            ("u1", "10", "before ours", Some("ours")),
            ("u1", "11", "ours", None),
            ("u1", "12", "a deposed leader's", None),
            ("u2", "10", "another Fleet", None),
        ];
        for (uid, rv, message, expected) in cases {
            let got = written.unseen_by(&fleet(uid, rv, message));
            let got = got.as_ref().map(|s| s.message.as_str());
            assert_eq!(got, expected, "watch at {uid}/{rv} showing {message:?}");
        }
    }
}
