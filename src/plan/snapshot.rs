//! What flotilla knows about one namespace when it reconciles it: what its watches show, what it
//! remembers from earlier reconciles, and the config in force as it bears on the namespace. A
//! plain value; taking one makes no request.

use crate::membership::{self, Membership};
use crate::object::Watched;
use crate::object::packed::Packed;
use crate::render::{NamespaceInput, Renderer};
use crate::status::{Health, WorkerStatus};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::Selector;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything one reconcile decides from, read once from the watches, flotilla's memory and the
/// config in force, and not changed after: the decision ([`super::decide`]), the plan and the
/// status are computed from it alone.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub name: String,
    /// The Namespace, if it exists, and whether it is in the fleet, opts out or is terminating.
    pub namespace: Option<NamespaceState>,
    /// What this instance stamped for the namespace, wherever it lives.
    pub stamped: Vec<Watched>,
    /// Its NamespaceWorker as the watch shows it, if it has one.
    pub worker: Option<WorkerState>,
    /// The worker's status as flotilla last wrote it, while the watch does not show it yet;
    /// otherwise as the watch shows it. It tells the revision last applied.
    pub previous: Option<WorkerStatus>,
    /// The revision the rollout pins it to: a new pin is a change like any other.
    pub revision: String,
    /// The templates at that revision, compiled under the config in force; `None` if that
    /// revision is not kept or does not compile.
    pub renderer: Option<Arc<Renderer>>,
    /// The config in force's `degradedAfterSeconds`.
    pub degraded_after: Duration,
    /// Objects found in sync by earlier reconciles, at the version they were found at.
    pub verified: super::VerifiedObjects,
    /// The fingerprint (and deadline) it was last found settled with.
    pub settled: Option<Settled>,
    /// Its Workflows by instanceid label: a change is news for its NamespaceWorker.
    pub workflows: crate::workflows::Seen,
    /// Since when its live Workflows are as they are, as far as this process knows.
    pub idle_since: Timestamp,
    /// Its CronWorkflows' schedules.
    pub crons: super::Crons,
    /// The config in force's `sleep` (`None`: nothing sleeps), and its rollout's soak.
    pub sleep: Option<crate::sleep::Policy>,
    pub soak: Duration,
    /// Now, by the wall clock: what sleeping is decided at.
    pub now: Timestamp,
    /// Its share of the fleet's budget (crate::budget), also in `namespace`'s input: `None`
    /// without a budget.
    pub share: Option<u32>,
}

impl Snapshot {
    /// The revision its objects were last applied at, as its worker's status says.
    pub fn applied(&self) -> Option<&str> {
        applied(self.previous.as_ref())
    }
}

/// The revision a worker's status says was applied last (none before the first apply).
pub fn applied(status: Option<&WorkerStatus>) -> Option<&str> {
    status
        .map(|s| s.revision.as_str())
        .filter(|revision| !revision.is_empty())
}

/// A NamespaceWorker as the watch shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerState {
    /// It at the version watched: what its Events are about.
    pub reference: ObjectReference,
    /// Created by this instance for this namespace. One that is not is left alone.
    pub ours: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceState {
    /// What its templates see of it.
    pub input: NamespaceInput,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Whether it is in the fleet, opts out, or is being deleted.
    pub membership: Membership,
}

impl NamespaceState {
    /// A Namespace's metadata as the operator and the CLI see it, judged by `selector`.
    pub fn of(meta: &ObjectMeta, selector: &Selector) -> NamespaceState {
        NamespaceState {
            membership: membership::of(meta, selector),
            input: NamespaceInput {
                name: meta.name.clone().unwrap_or_default(),
                labels: meta.labels.clone().unwrap_or_default(),
                annotations: meta.annotations.clone().unwrap_or_default(),
                share: None,
            },
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        }
    }

    /// In the fleet: flotilla stamps its objects.
    pub fn opted_in(&self) -> bool {
        self.membership == Membership::Member
    }
}

/// An object in sync at a resourceVersion; for a Deployment, its health then (which the
/// NamespaceWorker's status is computed from). Whether it was rendered the same since is not
/// kept: the hash annotation the watch shows at that version tells.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub resource_version: Packed,
    /// Boxed: one object in nine is a Deployment, and every object is remembered.
    pub health: Option<Box<Health>>,
}

/// A namespace found fully in sync: until what the watches show of it changes (or the deadline
/// of a status transition passes), a reconcile has nothing to do, not even render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub fingerprint: u64,
    pub until: Option<Instant>,
}

/// What the watches show of a namespace, as a number: its resourceVersion, its NamespaceWorker's
/// (`worker_version`: as the snapshot shows it, or as written since) and every stamped object's
/// (uid and version), the revision it is pinned to, and its Workflows' counts.
/// The fingerprint of a reap that deleted nothing (every delete refused): never that of a sync
/// (no worker's resourceVersion reads so), so a member settled in sync that a selector edit opts
/// out is not taken as settled in its reap.
pub fn reap_fingerprint(snapshot: &Snapshot) -> u64 {
    fingerprint(snapshot, Some("reaped, nothing deleted"))
}

pub fn fingerprint(snapshot: &Snapshot, worker_version: Option<&str>) -> u64 {
    let mut versions: Vec<&Watched> = snapshot.stamped.iter().collect();
    versions.sort_by(|a, b| a.key.cmp(&b.key));
    let mut hasher = DefaultHasher::new();
    let namespace_version = snapshot
        .namespace
        .as_ref()
        .and_then(|ns| ns.resource_version.as_deref());
    namespace_version.hash(&mut hasher);
    worker_version.hash(&mut hasher);
    snapshot.revision.hash(&mut hasher);
    snapshot.workflows.hash(&mut hasher);
    snapshot.crons.hash(&mut hasher);
    snapshot.sleep.hash(&mut hasher);
    snapshot.share.hash(&mut hasher);
    for watched in versions {
        (&watched.key, &watched.uid, &watched.resource_version).hash(&mut hasher);
    }
    hasher.finish()
}
