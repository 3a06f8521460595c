//! The NamespaceWorker resource and its status: the CRD type, how a status is computed from
//! what a reconcile saw (pure), and what a Deployment says of its availability.

mod asleep;
mod compute;
mod health;
mod observation;
mod resource;
mod workflows_ignored;

pub use asleep::{asleep_since, proven_at};
pub use compute::{compute, followed};
pub use health::{Health, availability};
pub use observation::{Observation, now};
pub use resource::{
    Condition, NamespaceWorker, NamespaceWorkerSpec, Phase, StampedRef, WorkerStatus, worker_object,
};

#[cfg(test)]
mod tests;

/// The `Applied` condition's reason for an apply the API server failed on its side (5xx).
pub const SERVER_ERROR: &str = "ServerError";
/// The `Applied` condition's reason for a render that failed only because the revision pinned
/// is not kept.
pub const REVISION_UNAVAILABLE: &str = "RevisionUnavailable";
