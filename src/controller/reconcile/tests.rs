//! The reconcile of one namespace against a scripted API (tower-test): the exact requests of each
//! main path, and none that was not expected; what the watches show is put in their stores.

use super::super::fixture::{CONFIG_MAP, Fixture, INSTANCE, fixture, namespace, stamped_meta};
use super::super::worker_view::WorkerView;
use super::*;
use crate::kinds::Kind;
use crate::object::ObjectKey;
use crate::status::{NamespaceWorker, Phase, WorkerStatus, worker_object};
use crate::testing::{Exchange, exchange, status};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const NS: &str = "team-a";
const CM: &str = "/api/v1/namespaces/team-a/configmaps/settings";
const WORKERS: &str = "/apis/flotilla.dev/v1alpha1/namespaceworkers";
const WORKER_STATUS: &str = "/apis/flotilla.dev/v1alpha1/namespaceworkers/team-a/status";

fn settings() -> ObjectKey {
    ObjectKey {
        kind: Kind::ConfigMap,
        namespace: NS.into(),
        name: "settings".into(),
    }
}

/// A context with one ConfigMap template, the name `settings` watched (taken by another's
/// object if `taken`), expecting `script`.
fn context(taken: bool, script: Vec<Exchange>) -> Fixture {
    fixture(
        "",
        &[("cm.yaml", CONFIG_MAP)],
        &[(settings(), taken)],
        script,
    )
}

/// The ConfigMap as the API returns it at `rv`, with `data`.
fn config_map(fixture: &Fixture, rv: &str, data: Value) -> Value {
    let mut object = fixture.rendered(NS)[0].body.clone();
    object["metadata"]["resourceVersion"] = json!(rv);
    object["metadata"]["uid"] = json!("uid-settings");
    object["data"] = data;
    object
}

/// team-a's NamespaceWorker as the API returns it at `rv`.
fn worker(rv: &str, status: Option<WorkerStatus>) -> NamespaceWorker {
    let mut worker = worker_object(NS, Some("uid-team-a".into()), INSTANCE);
    worker.metadata.resource_version = Some(rv.into());
    worker.metadata.uid = Some("uid-worker".into());
    worker.status = status;
    worker
}

fn answer(worker: &NamespaceWorker) -> Value {
    serde_json::to_value(worker).unwrap()
}

/// The status the reconcile wrote to the worker (a merge patch: a null removes a field).
fn written(body: &Value) -> WorkerStatus {
    let mut status = body["status"].clone();
    if let Some(fields) = status.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    serde_json::from_value(status).expect("a status patch")
}

const CREATE: &[&str] = &["fieldManager=flotilla"];
const FORCE: &[&str] = &["fieldManager=flotilla", "force=true"];

/// The worker created and its status written: what every first sync of a namespace ends with.
fn new_worker() -> Vec<Exchange> {
    vec![
        exchange(Method::POST, WORKERS, &[])
            .answer(StatusCode::CREATED, answer(&worker("41", None))),
        exchange(Method::PATCH, WORKER_STATUS, &[])
            .answer(StatusCode::OK, answer(&worker("42", None))),
    ]
}

#[tokio::test]
async fn a_new_namespace_is_stamped_without_a_read_and_its_worker_created() {
    let script = |f: &Fixture| {
        let mut script = vec![
            exchange(Method::PATCH, CM, CREATE)
                .without(&["force"])
                .answer(StatusCode::OK, config_map(f, "8", json!({"id": NS}))),
        ];
        script.extend(new_worker());
        script
    };
    // The answers hold rendered content: rendered by a fixture of the same templates.
    let probe = context(false, Vec::new());
    let expected = script(&probe);
    drop(probe);
    let mut f = context(false, expected);
    f.shown.namespace(namespace(NS, true, false));
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!((outcome.created, outcome.wrote()), (1, true));
    assert_eq!(
        f.events.take(),
        [("Applied".to_string(), "NamespaceWorker".to_string())]
    );
    let verified = f.ctx.memory.of(NS).verified;
    assert!(
        verified
            .get(&settings())
            .is_some_and(|v| v.resource_version.is("8"))
    );
    let revision = f.revision();
    let bodies = f.requests().await;
    assert_eq!(
        bodies[0]["metadata"]["resourceVersion"], "1",
        "a create's precondition"
    );
    assert_eq!(bodies[1]["spec"]["namespace"], NS);
    let status = written(&bodies[2]);
    assert_eq!((status.phase, status.revision), (Phase::Pending, revision));
}

#[tokio::test]
async fn a_namespace_in_sync_costs_no_request_and_then_is_not_even_rendered() {
    let probe = context(false, Vec::new());
    let mut script = vec![
        exchange(Method::PATCH, CM, CREATE)
            .answer(StatusCode::OK, config_map(&probe, "8", json!({"id": NS}))),
    ];
    let stamped = probe.rendered(NS)[0].clone();
    drop(probe);
    script.extend(new_worker());
    let mut f = context(false, script);
    f.shown.namespace(namespace(NS, true, false));
    reconcile(&f.ctx, NS).await.unwrap();
    // The watches show what was written.
    f.shown
        .stamped(Kind::ConfigMap, &stamped_meta(&stamped, "8"));
    f.shown.worker(WorkerView::from(worker("42", None)));
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert!(outcome.settles(), "{outcome}");
    let settled = f.ctx.memory.of(NS).settled;
    assert!(settled.is_some(), "settled in sync");
    let again = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!(again, Outcome::default());
    assert_eq!(f.ctx.memory.of(NS).settled, settled);
    f.events.take();
    assert_eq!(f.requests().await.len(), 3, "only the first reconcile's");
}

#[tokio::test]
async fn drift_is_read_and_reverted() {
    let probe = context(false, Vec::new());
    let stamped = probe.rendered(NS)[0].clone();
    let edited = config_map(&probe, "7", json!({"id": "edited"}));
    let repaired = config_map(&probe, "9", json!({"id": NS}));
    drop(probe);
    let mut script = vec![
        exchange(Method::GET, CM, &["resourceVersion=0"]).answer(StatusCode::OK, edited),
        exchange(Method::PATCH, CM, FORCE).answer(StatusCode::OK, repaired),
    ];
    script.push(
        exchange(Method::PATCH, WORKER_STATUS, &[])
            .answer(StatusCode::OK, answer(&worker("42", None))),
    );
    let mut f = context(false, script);
    f.shown.namespace(namespace(NS, true, false));
    // flotilla's own, at the hash rendered, never verified: it could hide an edit.
    f.shown
        .stamped(Kind::ConfigMap, &stamped_meta(&stamped, "7"));
    f.shown.worker(WorkerView::from(worker("41", None)));
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!(outcome.drift_repaired, 1, "{outcome}");
    assert_eq!(
        f.events.take(),
        [("DriftRepaired".to_string(), "NamespaceWorker".to_string())]
    );
    let bodies = f.requests().await;
    assert_eq!(
        bodies[1]["data"]["id"], NS,
        "the rendered content is applied"
    );
}

#[tokio::test]
async fn a_namespace_that_opts_out_is_reaped_with_its_worker() {
    let probe = context(false, Vec::new());
    let stamped = probe.rendered(NS)[0].clone();
    drop(probe);
    let script = vec![
        exchange(Method::DELETE, CM, &[]),
        exchange(Method::DELETE, format!("{WORKERS}/{NS}"), &[])
            .answer(StatusCode::OK, answer(&worker("41", None))),
    ];
    let mut f = context(false, script);
    f.shown.namespace(namespace(NS, false, false));
    f.shown
        .stamped(Kind::ConfigMap, &stamped_meta(&stamped, "7"));
    f.shown.worker(WorkerView::from(worker("41", None)));
    f.ctx.memory.update(NS, |m| m.failures = 2);
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!(outcome.reaped, 1, "{outcome}");
    assert_eq!(
        f.events.take(),
        [("Reaped".to_string(), "Namespace".to_string())]
    );
    assert_eq!(f.ctx.memory.of(NS), Default::default(), "forgotten");
    let bodies = f.requests().await;
    assert_eq!(
        bodies[0]["preconditions"],
        json!({"uid": "uid-settings", "resourceVersion": "7"})
    );
    assert_eq!(bodies[1]["preconditions"]["uid"], "uid-worker");
}

#[tokio::test]
async fn a_name_taken_by_another_object_is_read_and_left_alone() {
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": NS, "resourceVersion": "5",
            "labels": {"app": "theirs"}}, "data": {"id": "theirs"}});
    let mut script =
        vec![exchange(Method::GET, CM, &["resourceVersion=0"]).answer(StatusCode::OK, theirs)];
    script.extend(new_worker());
    let mut f = context(true, script);
    f.shown.namespace(namespace(NS, true, false));
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!((outcome.conflicts, outcome.wrote()), (1, false));
    assert_eq!(
        f.events.take(),
        [
            ("Conflict".to_string(), "Namespace".to_string()),
            ("Conflict".to_string(), "NamespaceWorker".to_string())
        ]
    );
    let bodies = f.requests().await;
    let status = written(&bodies[2]);
    assert_eq!(status.phase, Phase::Conflict);
    assert!(
        status.objects.is_empty(),
        "theirs is not listed as flotilla's"
    );
}

#[tokio::test]
async fn a_refusal_is_the_worker_s_status_and_retried_with_backoff() {
    let quota = status(
        403,
        "Forbidden",
        "configmaps \"settings\" is forbidden: exceeded quota: no-config-maps",
    );
    let mut script = vec![exchange(Method::PATCH, CM, CREATE).answer(StatusCode::FORBIDDEN, quota)];
    script.extend(new_worker());
    let mut f = context(false, script);
    f.shown.namespace(namespace(NS, true, false));
    let outcome = reconcile(&f.ctx, NS).await.unwrap();
    assert!(outcome.refused && !outcome.settles(), "{outcome}");
    assert_eq!(f.ctx.memory.of(NS).settled, None);
    assert_eq!(
        f.events.take(),
        [
            ("ApplyFailed".to_string(), "Namespace".to_string()),
            ("ApplyFailed".to_string(), "NamespaceWorker".to_string())
        ]
    );
    let bodies = f.requests().await;
    let status = written(&bodies[2]);
    assert_eq!(status.phase, Phase::ApplyFailed);
    assert!(
        status.message.contains("exceeded quota"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn objects_for_a_namespace_that_does_not_exist_cost_one_refused_delete() {
    let probe = context(false, Vec::new());
    let stamped = probe.rendered(NS)[0].clone();
    drop(probe);
    // A name flotilla's token may not delete (README, Security): refused.
    let refused = status(403, "Forbidden", "configmaps \"settings\" is forbidden");
    let script = vec![exchange(Method::DELETE, CM, &[]).answer(StatusCode::FORBIDDEN, refused)];
    let f = context(false, script);
    // No Namespace: it does not exist.
    f.shown
        .stamped(Kind::ConfigMap, &stamped_meta(&stamped, "7"));
    let first = reconcile(&f.ctx, NS).await.unwrap();
    assert_eq!(first.reaped, 0, "{first}");
    assert!(f.ctx.memory.of(NS).settled.is_some(), "settled");
    // The next resync: nothing sent (the script holds no second request).
    let again = reconcile(&f.ctx, NS).await.unwrap();
    assert!(!again.wrote(), "{again}");
    // A change of the object: tried again.
    f.shown
        .stamped(Kind::ConfigMap, &stamped_meta(&stamped, "8"));
    let changed = f.ctx.snapshot(NS).unwrap();
    assert!(matches!(
        plan::decide(&changed, std::time::Instant::now()),
        Decision::Reap { .. }
    ));
    assert_eq!(f.requests().await.len(), 1);
}
