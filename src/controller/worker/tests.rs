//! A NamespaceWorker's status write against a scripted API (tower-test): the requests it makes,
//! and the version the reference it returns carries, which a settled reconcile fingerprints.

use super::*;
use crate::status::Phase;
use crate::testing::{exchange, serve};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const INSTANCE: &str = "fleet";
const STATUS_PATH: &str = "/apis/flotilla.dev/v1alpha1/namespaceworkers/team-a/status";

fn status(message: &str) -> WorkerStatus {
    WorkerStatus {
        phase: Phase::Progressing,
        message: message.into(),
        revision: "43fda9d807afc526".into(),
        ..WorkerStatus::default()
    }
}

fn worker(rv: &str, status: &WorkerStatus) -> NamespaceWorker {
    let mut worker = worker_object("team-a", Some("namespace-uid".into()), INSTANCE);
    worker.metadata.resource_version = Some(rv.into());
    worker.metadata.uid = Some("worker-uid".into());
    worker.status = Some(status.clone());
    worker
}

/// Writes `new` over the worker the watch shows at version 41 with status `old`, against an
/// API that expects a status PATCH only if `patched` is given (answered with it) and nothing
/// else. Returns the reference written and the PATCH bodies received.
async fn write(
    old: &WorkerStatus,
    new: &WorkerStatus,
    patched: Option<NamespaceWorker>,
) -> (Option<ObjectReference>, Vec<Value>) {
    let script = patched
        .map(|answer| {
            let answer = serde_json::to_value(answer).unwrap();
            exchange(Method::PATCH, STATUS_PATH, &[]).answer(StatusCode::OK, answer)
        })
        .into_iter()
        .collect();
    let (client, server) = serve(script);
    let memory = Memory::default();
    let workers = Workers {
        client: &client,
        field_manager: "flotilla",
        instance: INSTANCE,
        memory: &memory,
    };
    let watched = super::watched(&WorkerView::from(worker("41", old)), "team-a", INSTANCE);
    let written = workers
        .write("team-a", None, Some(&watched), Some(old), new, || {
            Some("41".into())
        })
        .await
        .expect("no API error");
    drop(client);
    (written, server.await.unwrap())
}

#[tokio::test]
async fn an_unchanged_status_costs_no_request_and_refers_to_the_worker_at_its_watched_version() {
    let same = status("0/1 replicas ready");
    let (written, bodies) = write(&same, &same, None).await;
    assert!(bodies.is_empty());
    let written = written.expect("the worker is ours");
    assert_eq!(
        (written.name.as_deref(), written.resource_version.as_deref()),
        (Some("team-a"), Some("41"))
    );
}

#[tokio::test]
async fn a_changed_status_is_one_patch_and_refers_to_the_worker_at_the_version_written() {
    let (old, new) = (status("0/1 replicas ready"), status("1/1 replicas ready"));
    let (written, bodies) = write(&old, &new, Some(worker("42", &new))).await;
    // A merge patch: the fields without a value are removed (a share no longer given, say).
    let mut body = json!({ "status": new });
    for key in [
        "revisionSince",
        "failedRevision",
        "image",
        "workflowsIgnored",
        "share",
    ] {
        body["status"][key] = serde_json::Value::Null;
    }
    assert_eq!(bodies, vec![body]);
    let written = written.expect("the worker is ours");
    assert_eq!(written.resource_version.as_deref(), Some("42"));
    assert_eq!(written.kind.as_deref(), Some("NamespaceWorker"));
}
