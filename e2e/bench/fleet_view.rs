//! The writes of flotilla's fleet view for one freshly stamped namespace, done the cheapest way
//! the API allows: create its NamespaceWorker, write its status (a status subresource cannot be
//! written on create), publish one `Applied` Event. The "limit + fleet view" baseline adds these
//! to the bare client's applies, so that the API server's limit for flotilla's whole output is
//! measured too.

use flotilla::object::Stamped;
use flotilla::status::{self, NamespaceWorker, Observation};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
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
        workload: None,
        revision,
        now: Timestamp::from_second(Timestamp::now().as_second())
            .unwrap_or_else(|_| Timestamp::now()),
        degraded_after: Duration::from_secs(600),
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
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    events
        .create(
            &PostParams::default(),
            &applied(&worker.object_ref(&()), objects.len(), revision),
        )
        .await?;
    Ok(())
}

fn applied(regarding: &ObjectReference, created: usize, revision: &str) -> Event {
    let now = Timestamp::now();
    let name = regarding.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        reason: Some("Applied".into()),
        message: Some(format!(
            "created {created}, updated 0 objects at revision {revision}"
        )),
        type_: Some("Normal".into()),
        source: Some(EventSource {
            component: Some("flotilla".into()),
            host: None,
        }),
        reporting_component: Some("flotilla".into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}
