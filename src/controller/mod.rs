//! The operator loop: watches feed a work queue of namespace names; workers reconcile them.

pub mod events;
mod index;
mod queue;
mod reconcile;
mod run;
mod settled;
mod taken;
mod watches;
mod worker;

use crate::config::Config;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::render::Renderer;
use crate::status::WorkerStatus;
use crate::telemetry::Metrics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use watches::Stores;

pub use reconcile::Outcome;
pub use run::{RunOptions, run};

/// Everything a reconcile needs. Nothing global.
pub struct Context {
    client: kube::Client,
    config: Config,
    renderer: Renderer,
    stores: Stores,
    events: events::Events,
    metrics: Arc<Metrics>,
    /// Objects known to match their rendered content at a given resourceVersion. While the
    /// watch still shows that version and the hash is unchanged, no request is needed at all.
    verified: Mutex<HashMap<ObjectKey, Verified>>,
    /// The status last written per namespace: fresher than the watch right after a write.
    statuses: Mutex<HashMap<String, WorkerStatus>>,
    /// Namespaces with nothing to do until something about them changes.
    settled: Mutex<settled::Settled>,
}

/// An object verified in sync at a resourceVersion; for workloads, the health fields then read
/// (their status decides the worker's health). Whether it was rendered the same since is not
/// kept: the hash annotation the watch shows at that version tells.
struct Verified {
    resource_version: String,
    workload: Option<Arc<serde_json::Value>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic mid-insert into a plain map; the map is still usable.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the worker's health is computed from: a few fields instead of the whole Deployment, so a
/// large fleet's cache stays small.
fn health_fields(deployment: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"generation": deployment["metadata"]["generation"]},
        "spec": {"replicas": deployment["spec"]["replicas"]},
        "status": deployment["status"],
    })
}

impl Context {
    /// If `key` was verified at the version the watch shows: the workload's health fields, if
    /// it is one (`Some(None)` for other kinds).
    fn verified_at(
        &self,
        key: &ObjectKey,
        watched_version: Option<&str>,
    ) -> Option<Option<Arc<serde_json::Value>>> {
        let rv = watched_version?;
        let verified = lock(&self.verified);
        let entry = verified.get(key).filter(|e| e.resource_version == rv)?;
        Some(entry.workload.clone())
    }

    fn verified(&self, object: &Stamped, live: Option<Arc<serde_json::Value>>) {
        let Some(rv) = live
            .as_ref()
            .and_then(|l| l["metadata"]["resourceVersion"].as_str())
        else {
            return;
        };
        let workload = live
            .as_ref()
            .filter(|_| object.key.kind == Kind::Deployment)
            .map(|live| Arc::new(health_fields(live)));
        let entry = Verified {
            resource_version: rv.to_owned(),
            workload,
        };
        lock(&self.verified).insert(object.key.clone(), entry);
    }

    fn forget(&self, key: &ObjectKey) {
        lock(&self.verified).remove(key);
    }

    fn previous_status(&self, namespace: &str) -> Option<WorkerStatus> {
        lock(&self.statuses)
            .get(namespace)
            .cloned()
            .or_else(|| self.stores.worker(namespace)?.status.clone())
    }

    fn remember_status(&self, namespace: &str, status: &WorkerStatus) {
        lock(&self.statuses).insert(namespace.to_string(), status.clone());
    }

    fn forget_status(&self, namespace: &str) {
        lock(&self.statuses).remove(namespace);
    }
}
