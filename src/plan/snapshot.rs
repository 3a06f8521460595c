//! What flotilla knows about one namespace when it reconciles it: what its watches show and what
//! it remembers from earlier reconciles. A plain value; taking one makes no request.

use crate::object::packed::Packed;
use crate::object::{ObjectKey, Watched};
use crate::render::NamespaceInput;
use crate::status::Health;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{Selector, SelectorExt};
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub name: String,
    /// The Namespace, if it exists.
    pub namespace: Option<NamespaceState>,
    /// What this instance stamped for the namespace, wherever it lives.
    pub stamped: Vec<Watched>,
    /// The resourceVersion of its NamespaceWorker, if it has one.
    pub worker_version: Option<String>,
    /// The revision the rollout pins it to: a new pin is a change like any other.
    pub revision: String,
    /// Objects found in sync by earlier reconciles, at the version they were found at.
    pub verified: super::VerifiedObjects,
    /// The fingerprint (and deadline) it was last found settled with.
    pub settled: Option<Settled>,
    /// Rendered keys at which the watches show nothing at all: neither an object stamped for
    /// this namespace nor one flotilla did not stamp. Known only for names that are watched;
    /// filled in once the templates are rendered.
    pub vacant: HashSet<ObjectKey>,
    /// Its Workflows by instanceid label: a change is news for its NamespaceWorker.
    pub workflows: crate::workflows::Seen,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceState {
    /// What its templates see of it.
    pub input: NamespaceInput,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Its labels match the selector and it is not terminating.
    pub opted_in: bool,
}

impl NamespaceState {
    /// A Namespace's metadata as the operator and the CLI see it, judged by `selector`.
    pub fn of(meta: &ObjectMeta, selector: &Selector) -> NamespaceState {
        let labels = meta.labels.clone().unwrap_or_default();
        NamespaceState {
            opted_in: meta.deletion_timestamp.is_none() && selector.matches(&labels),
            input: NamespaceInput {
                name: meta.name.clone().unwrap_or_default(),
                labels,
                annotations: meta.annotations.clone().unwrap_or_default(),
            },
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        }
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
/// and every stamped object's (uid and version), the revision it is pinned to, and its
/// Workflows' counts.
pub fn fingerprint(snapshot: &Snapshot) -> u64 {
    let mut versions: Vec<&Watched> = snapshot.stamped.iter().collect();
    versions.sort_by(|a, b| a.key.cmp(&b.key));
    let mut hasher = DefaultHasher::new();
    let namespace_version = snapshot
        .namespace
        .as_ref()
        .and_then(|ns| ns.resource_version.as_deref());
    namespace_version.hash(&mut hasher);
    snapshot.worker_version.hash(&mut hasher);
    snapshot.revision.hash(&mut hasher);
    snapshot.workflows.hash(&mut hasher);
    for watched in versions {
        (&watched.key, &watched.uid, &watched.resource_version).hash(&mut hasher);
    }
    hasher.finish()
}
