//! A namespace's NamespaceWorker, the fleet view `kubectl get nsw` shows: created on opt-in, its
//! status written only when it changed, deleted on reap. Requests of their own, like
//! execute.rs's on stamped objects.

use super::memory::Memory;
use super::worker_view::WorkerView;
use crate::cluster;
use crate::ownership::{self, Owner};
use crate::plan::WorkerState;
use crate::status::{NamespaceWorker, WorkerStatus, worker_object};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};

/// The status fields left out while they have no value (`skip_serializing_if`).
const OPTIONAL: [&str; 6] = [
    "revision",
    "revisionSince",
    "failedRevision",
    "image",
    "workflowsIgnored",
    "share",
];

pub struct Workers<'a> {
    pub client: &'a Client,
    pub field_manager: &'a str,
    pub instance: &'a str,
    pub memory: &'a Memory,
}

impl Workers<'_> {
    fn api(&self) -> Api<NamespaceWorker> {
        Api::all(self.client.clone())
    }

    /// Makes sure the worker of `namespace` exists and carries `status`; `watched` is the
    /// worker as the watch shows it, `previous` its status as last written or watched, and
    /// `watched_version` the version the watch shows when the write returns. Returns a
    /// reference to the worker at its version now, or `None` when the name is taken by a
    /// NamespaceWorker this instance did not create (left alone, logged).
    pub async fn write(
        &self,
        namespace: &str,
        namespace_uid: Option<String>,
        watched: Option<&WorkerState>,
        previous: Option<&WorkerStatus>,
        status: &WorkerStatus,
        watched_version: impl FnOnce() -> Option<String>,
    ) -> kube::Result<Option<ObjectReference>> {
        let (reference, ours, current) = match watched {
            Some(worker) => (worker.reference.clone(), worker.ours, previous.cloned()),
            None => {
                let params = PostParams {
                    field_manager: Some(self.field_manager.to_string()),
                    ..PostParams::default()
                };
                let object = worker_object(namespace, namespace_uid, self.instance);
                let worker = match self.api().create(&params, &object).await {
                    Ok(created) => created,
                    // Created a moment ago (the watch has not caught up), or by someone else.
                    Err(kube::Error::Api(e)) if e.code == 409 => self.api().get(namespace).await?,
                    Err(e) => return Err(e),
                };
                let ours = ours(&worker.metadata, namespace, self.instance);
                (at_version(&worker), ours, worker.status)
            }
        };
        if !ours {
            tracing::warn!(
                namespace,
                "NamespaceWorker {namespace} exists and was not created by this flotilla instance; its status is not written"
            );
            return Ok(None);
        }
        if current.as_ref() == Some(status) {
            return Ok(Some(reference));
        }
        let params = PatchParams {
            field_manager: Some(self.field_manager.to_string()),
            ..PatchParams::default()
        };
        let mut patch = serde_json::json!({ "status": status });
        // A merge patch keeps what it leaves out: the optional fields left out are removed.
        for key in OPTIONAL {
            if let Some(status) = patch["status"].as_object_mut() {
                status.entry(key).or_insert(serde_json::Value::Null);
            }
        }
        let worker = self
            .api()
            .patch_status(namespace, &params, &Patch::Merge(&patch))
            .await?;
        if let Some(version) = worker.resource_version() {
            self.memory
                .wrote(namespace, &version, status, watched_version);
        }
        Ok(Some(at_version(&worker)))
    }

    /// Deletes the worker of a reaped namespace, if this instance has one (`watched`).
    pub async fn remove(
        &self,
        namespace: &str,
        watched: Option<&WorkerState>,
    ) -> kube::Result<bool> {
        let Some(worker) = watched else {
            return Ok(false);
        };
        let uid = worker.reference.uid.clone();
        cluster::delete_if(&self.api(), namespace, uid, None).await
    }
}

/// The worker of `namespace` as the watch shows it, to this `instance`.
pub fn watched(worker: &WorkerView, namespace: &str, instance: &str) -> WorkerState {
    WorkerState {
        reference: at_version(worker),
        ours: ours(&worker.metadata, namespace, instance),
    }
}

/// Created by `instance` for `namespace`.
fn ours(meta: &ObjectMeta, namespace: &str, instance: &str) -> bool {
    ownership::owner(meta.labels.as_ref(), instance) == Owner::Stamped(namespace)
}

/// A reference to `worker` at its version: kube's `object_ref` leaves the version out, and a
/// reconcile that settles fingerprints the worker by it (without, no namespace ever settles and
/// every resync renders the whole fleet again).
fn at_version<K: Resource<DynamicType = ()>>(worker: &K) -> ObjectReference {
    ObjectReference {
        resource_version: worker.meta().resource_version.clone(),
        ..worker.object_ref(&())
    }
}

#[cfg(test)]
mod tests;
