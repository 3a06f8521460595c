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
mod written;

use crate::config::Config;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::render::Renderer;
use crate::status::{self, Health};
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
    /// Namespaces with nothing to do until something about them changes.
    settled: Mutex<settled::Settled>,
}

/// An object verified in sync at a resourceVersion; for a Deployment, its health then (which
/// the worker's status is computed from). Whether it was rendered the same since is not kept:
/// the hash annotation the watch shows at that version tells.
struct Verified {
    resource_version: String,
    /// Boxed: one object in nine is a Deployment, and the cache holds every object.
    health: Option<Box<Health>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic mid-insert into a plain map; the map is still usable.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Context {
    /// If `key` was verified at the version the watch shows: the Deployment's health then
    /// (`Some(None)` for other kinds, or before its controller looked at it).
    fn verified_at(
        &self,
        key: &ObjectKey,
        watched_version: Option<&str>,
    ) -> Option<Option<Health>> {
        let rv = watched_version?;
        let verified = lock(&self.verified);
        let entry = verified.get(key).filter(|e| e.resource_version == rv)?;
        Some(entry.health.as_deref().cloned())
    }

    /// Remembers `live` as in sync with `object`; returns its health if it is a Deployment.
    fn verified(&self, object: &Stamped, live: Option<&serde_json::Value>) -> Option<Health> {
        let live = live?;
        let health = Some(live)
            .filter(|_| object.key.kind == Kind::Deployment)
            .and_then(status::availability);
        if let Some(rv) = live["metadata"]["resourceVersion"].as_str() {
            let entry = Verified {
                resource_version: rv.to_owned(),
                health: health.clone().map(Box::new),
            };
            lock(&self.verified).insert(object.key.clone(), entry);
        }
        health
    }

    fn forget(&self, key: &ObjectKey) {
        lock(&self.verified).remove(key);
    }
}
