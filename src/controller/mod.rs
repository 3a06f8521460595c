//! The operator loop: watches feed a work queue of namespace names; workers reconcile them.

mod events;
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

/// An object verified at the version the watch still shows.
enum Recall {
    /// Rendered the same since: in sync. For workloads, the health fields last read.
    InSync(Option<Arc<serde_json::Value>>),
    /// Rendered differently since (its namespace's labels or annotations changed what the
    /// templates produce): flotilla's own object, to be updated without reading it first.
    Outdated,
}

struct Verified {
    resource_version: String,
    hash: String,
    /// The live object, kept for workloads (their status decides the worker's health).
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
    /// What is known of `object` without a request, from the version the watch shows.
    fn known(&self, object: &Stamped, watched_version: Option<&str>) -> Option<Recall> {
        let rv = watched_version?;
        let verified = lock(&self.verified);
        let entry = verified
            .get(&object.key)
            .filter(|e| e.resource_version == rv)?;
        Some(if entry.hash == object.hash {
            Recall::InSync(entry.workload.clone())
        } else {
            Recall::Outdated
        })
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
            hash: object.hash.clone(),
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
