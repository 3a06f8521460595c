//! Keeping each namespace's NamespaceWorker: created on opt-in, status written only when it
//! changed, deleted on reap.

use super::Context;
use crate::ownership::{self, Owner};
use crate::status::{NamespaceWorker, WorkerStatus, worker_object};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};

/// Makes sure the worker exists and carries `status`. Returns the worker, or `None` when the
/// name is taken by a NamespaceWorker this instance did not create (left alone, logged).
pub async fn write(
    ctx: &Context,
    namespace: &str,
    namespace_uid: Option<String>,
    status: &WorkerStatus,
) -> kube::Result<Option<NamespaceWorker>> {
    let api: Api<NamespaceWorker> = Api::all(ctx.client.clone());
    // What the status is now: as the watch shows it, or as this process wrote it a moment ago
    // (the watch not showing that yet must not cause the same write again).
    let (mut worker, current) = match ctx.stores.worker(namespace) {
        Some(worker) => ((*worker).clone(), ctx.stores.worker_status(namespace)),
        None => {
            let params = PostParams {
                field_manager: Some(ctx.config.field_manager.clone()),
                ..PostParams::default()
            };
            let object = worker_object(namespace, namespace_uid, &ctx.config.instance);
            let worker = match api.create(&params, &object).await {
                Ok(created) => created,
                // Created by us a moment ago (the watch has not caught up), or by someone else.
                Err(kube::Error::Api(e)) if e.code == 409 => api.get(namespace).await?,
                Err(e) => return Err(e),
            };
            let current = worker.status.clone();
            (worker, current)
        }
    };
    if ownership::owner(worker.metadata.labels.as_ref(), &ctx.config.instance)
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
            field_manager: Some(ctx.config.field_manager.clone()),
            ..PatchParams::default()
        };
        let patch = serde_json::json!({ "status": status });
        worker = api
            .patch_status(namespace, &params, &Patch::Merge(&patch))
            .await?;
        ctx.stores.wrote_worker(&worker);
    }
    Ok(Some(worker))
}

/// Deletes the worker of a reaped namespace, if this instance has one.
pub async fn remove(ctx: &Context, namespace: &str) -> kube::Result<bool> {
    let Some(worker) = ctx.stores.worker(namespace) else {
        return Ok(false);
    };
    let api: Api<NamespaceWorker> = Api::all(ctx.client.clone());
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: worker.uid(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(namespace, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.is_not_found() || e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The reference Events use for a worker.
pub fn reference(worker: &NamespaceWorker) -> k8s_openapi::api::core::v1::ObjectReference {
    worker.object_ref(&())
}
