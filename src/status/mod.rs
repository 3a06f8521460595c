//! The NamespaceWorker resource and its status: the CRD type, how a status is computed from
//! what a reconcile saw (pure), and what a Deployment says of its availability.

mod compute;
mod health;
mod resource;
mod workflows;

pub use compute::{Observation, compute, followed, now};
pub use health::{Health, availability};
pub use resource::{
    Condition, NamespaceWorker, NamespaceWorkerSpec, Phase, StampedRef, WorkerStatus, worker_object,
};

#[cfg(test)]
mod tests;
