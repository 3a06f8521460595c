//! The writes of flotilla's fleet view for one freshly stamped namespace, done the cheapest way
//! the API allows: create its NamespaceWorker, write its status (a status subresource cannot be
//! written on create), publish one `Applied` Event. The "limit + fleet view" baseline adds these
//! to the bare client's applies, so that the API server's limit for flotilla's whole output is
//! measured too.

use flotilla::controller::events::{self, Reason};
use flotilla::object::Stamped;
use flotilla::status::{self, NamespaceWorker, Observation};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use std::time::Duration;

pub async fn write(
    client: &Client,
    field_manager: &str,
    instance: &str,
    namespace: &str,
    objects: &[Stamped],
    revision: &str,
) -> kube::Result<()> {
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let post = PostParams {
        field_manager: Some(field_manager.into()),
        ..PostParams::default()
    };
    let worker = workers
        .create(&post, &status::worker_object(namespace, None, instance))
        .await?;
    let seen = Observation {
        namespace,
        rendered: Ok(objects),
        conflicts: &[],
        refused: None,
        server_error: false,
        revision_unavailable: false,
        health: None,
        revision,
        // As flotilla sees the bench's cluster: Argo's CRDs are not installed there.
        workflows: &flotilla::workflows::Seen::CrdMissing,
        instance_id: Some(namespace),
        now: status::now(),
        degraded_after: Duration::from_secs(600),
        sleep: None,
        share: None,
    };
    let (worker_status, _) = status::compute(None, &seen);
    let params = PatchParams {
        field_manager: Some(field_manager.into()),
        ..PatchParams::default()
    };
    let patch = serde_json::json!({ "status": worker_status });
    workers
        .patch_status(namespace, &params, &Patch::Merge(&patch))
        .await?;
    let note = events::applied(objects.len(), 0, revision);
    let reference = worker.object_ref(&());
    let event = events::event(Reason::Applied, &note, &reference, None, Timestamp::now());
    let events: Api<Event> = Api::namespaced(client.clone(), events::EVENT_NAMESPACE);
    events.create(&PostParams::default(), &event).await?;
    Ok(())
}
