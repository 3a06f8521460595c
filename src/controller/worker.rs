//! A namespace's NamespaceWorker, the fleet view `kubectl get nsw` shows: created on opt-in, its
//! status written only when it changed, deleted on reap. Requests of their own, like
//! execute.rs's on stamped objects.

use super::memory::Memory;
use crate::cluster;
use crate::ownership::{self, Owner};
use crate::status::{NamespaceWorker, WorkerStatus, worker_object};
use crate::telemetry::Metrics;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use std::sync::Arc;

pub struct Workers<'a> {
    pub client: &'a Client,
    pub field_manager: &'a str,
    pub instance: &'a str,
    pub memory: &'a Memory,
    pub metrics: &'a Metrics,
}

impl Workers<'_> {
    fn api(&self) -> Api<NamespaceWorker> {
        Api::all(self.client.clone())
    }

    /// Makes sure the worker of `namespace` exists and carries `status`; `watched` is the
    /// worker as the watch shows it, `previous` its status as last written or watched. Returns
    /// the worker, or `None` when the name is taken by a NamespaceWorker this instance did not
    /// create (left alone, logged).
    pub async fn write(
        &self,
        namespace: &str,
        namespace_uid: Option<String>,
        watched: Option<Arc<NamespaceWorker>>,
        previous: Option<&WorkerStatus>,
        status: &WorkerStatus,
        watched_version: impl FnOnce() -> Option<String>,
    ) -> kube::Result<Option<NamespaceWorker>> {
        let (mut worker, current) = match watched {
            Some(worker) => ((*worker).clone(), previous.cloned()),
            None => {
                let params = PostParams {
                    field_manager: Some(self.field_manager.to_string()),
                    ..PostParams::default()
                };
                let object = worker_object(namespace, namespace_uid, self.instance);
                let created = self.api().create(&params, &object).await;
                let worker = match self.metrics.count("create", created) {
                    Ok(created) => created,
                    // Created a moment ago (the watch has not caught up), or by someone else.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        self.metrics.count("get", self.api().get(namespace).await)?
                    }
                    Err(e) => return Err(e),
                };
                let current = worker.status.clone();
                (worker, current)
            }
        };
        if ownership::owner(worker.metadata.labels.as_ref(), self.instance)
            != Owner::Stamped(namespace)
        {
            tracing::warn!(
                namespace,
                "NamespaceWorker {namespace} exists and was not created by this flotilla instance; its status is not written"
            );
            return Ok(None);
        }
        if current.as_ref() != Some(status) {
            let params = PatchParams {
                field_manager: Some(self.field_manager.to_string()),
                ..PatchParams::default()
            };
            let patch = serde_json::json!({ "status": status });
            let patched = self
                .api()
                .patch_status(namespace, &params, &Patch::Merge(&patch))
                .await;
            worker = self.metrics.count("patch", patched)?;
            if let Some(version) = worker.resource_version() {
                self.memory
                    .wrote(namespace, &version, status, watched_version);
            }
        }
        Ok(Some(worker))
    }

    /// Deletes the worker of a reaped namespace, if this instance has one (`watched`).
    pub async fn remove(
        &self,
        namespace: &str,
        watched: Option<Arc<NamespaceWorker>>,
    ) -> kube::Result<bool> {
        let Some(worker) = watched else {
            return Ok(false);
        };
        let deleted = cluster::delete_if(&self.api(), namespace, worker.uid(), None).await;
        self.metrics.count("delete", deleted)
    }
}

/// The reference Events use for a worker.
pub fn reference(worker: &NamespaceWorker) -> k8s_openapi::api::core::v1::ObjectReference {
    worker.object_ref(&())
}
