//! flotilla: a meta-operator that stamps out one namespaced Argo workflow-controller per
//! opted-in namespace, keeps it in sync, and reaps it on opt-out.
//!
//! Data flows one way: Namespace event -> snapshot of what the watches know -> render (pure)
//! -> plan (pure) -> execute (the only I/O) -> status (pure) -> the NamespaceWorker.

pub mod admission;
pub mod budget;
pub mod client;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod cron_workflows;
pub mod diff;
pub mod kinds;
pub mod lease;
pub mod membership;
pub mod object;
pub mod overrides;
pub mod ownership;
pub mod plan;
pub mod rbac;
pub mod render;
pub mod rollout;
pub mod selector;
pub mod sleep;
pub mod status;
pub mod sync;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod version;
pub mod workflows;
pub mod yaml_error;
