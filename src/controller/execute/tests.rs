//! The requests each step makes, against a scripted API (tower-test), as kube-rs/controller-rs
//! tests its reconciler: every request is checked, and none may come that was not expected.

use super::*;
use crate::kinds::Kind;
use crate::object::Stamped;
use crate::plan::Step;
use crate::testing::{Exchange, exchange, serve};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const INSTANCE: &str = "fleet";

/// Runs `steps` against an API that expects exactly `script`, in order; returns what each step
/// did and the request bodies received.
async fn run(
    steps: Vec<Step<'_>>,
    script: Vec<Exchange>,
) -> (Vec<Result<Done, Error>>, Vec<Value>) {
    let (client, server) = serve(script);
    let executor = Executor {
        client: &client,
        field_manager: "flotilla",
        instance: INSTANCE,
    };
    let done = executor.run(steps).await;
    drop(client);
    (done, server.await.unwrap())
}

fn labels(for_namespace: &str) -> Value {
    json!({"app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/instance": INSTANCE,
        "flotilla.dev/namespace": for_namespace})
}

fn config_map() -> Stamped {
    Stamped {
        key: ObjectKey {
            kind: Kind::ConfigMap,
            namespace: "team-a".into(),
            name: "cm".into(),
        },
        body: json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "team-a", "labels": labels("team-a"),
                "annotations": {"flotilla.dev/hash": "h1"}},
            "data": {"k": "v"}}),
        hash: "h1".into(),
        template: "cm.yaml".into(),
    }
}

/// The live ConfigMap at resourceVersion `rv` with `data`.
fn live(rv: &str, data: Value) -> Value {
    let mut object = config_map().body;
    object["metadata"]["resourceVersion"] = json!(rv);
    object["metadata"]["uid"] = json!("uid-cm");
    object["data"] = data;
    object
}

const CM: &str = "/api/v1/namespaces/team-a/configmaps/cm";
const APPLY: &[&str] = &["fieldManager=flotilla", "force=true"];

fn verified(rv: &str) -> Verified {
    Verified {
        resource_version: rv.into(),
        health: None,
    }
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
        "message": "configmaps \"cm\" not found", "code": 404})
}

#[tokio::test]
async fn a_kept_object_costs_no_request() {
    let cm = config_map();
    let steps = vec![Step::Keep {
        object: &cm,
        verified: verified("7"),
    }];
    let (done, _) = run(steps, vec![]).await;
    assert_eq!(
        done.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [Done::InSync(cm.key.clone(), verified("7"))]
    );
}

/// The rendered object with the resourceVersion no stored object has: a create's precondition.
fn create_only(object: &Stamped) -> Value {
    let mut body = object.body.clone();
    body["metadata"]["resourceVersion"] = json!("1");
    body
}

#[tokio::test]
async fn a_create_is_one_server_side_apply_that_holds_only_while_the_name_is_free() {
    let cm = config_map();
    // Not forced: see a_create_is_not_forced_and_a_name_taken_meanwhile_is_left_alone.
    let script = vec![
        exchange(Method::PATCH, CM, &["fieldManager=flotilla"])
            .without(&["force"])
            .answer(StatusCode::OK, live("8", json!({"k": "v"}))),
    ];
    let (done, bodies) = run(vec![Step::Create { object: &cm }], script).await;
    assert_eq!(
        done.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [Done::Created(cm.key.clone(), verified("8"))]
    );
    assert_eq!(bodies, [create_only(&cm)]);
}

#[tokio::test]
async fn a_read_decides_what_follows() {
    let cm = config_map();
    let read = || exchange(Method::GET, CM, &["resourceVersion=0"]);
    let apply = || exchange(Method::PATCH, CM, APPLY);
    let create = || exchange(Method::PATCH, CM, &["fieldManager=flotilla"]).without(&["force"]);
    let cases: Vec<(&str, Vec<Exchange>, Done)> = vec![
        (
            "in sync: read only, remembered at the version read",
            vec![read().answer(StatusCode::OK, live("9", json!({"k": "v"})))],
            Done::InSync(cm.key.clone(), verified("9")),
        ),
        (
            "edited: read, then applied back",
            vec![
                read().answer(StatusCode::OK, live("9", json!({"k": "edited"}))),
                apply().answer(StatusCode::OK, live("10", json!({"k": "v"}))),
            ],
            Done::DriftRepaired(cm.key.clone(), verified("10")),
        ),
        (
            "gone: read, then created",
            vec![
                read().answer(StatusCode::NOT_FOUND, not_found()),
                create().answer(StatusCode::OK, live("11", json!({"k": "v"}))),
            ],
            Done::Created(cm.key.clone(), verified("11")),
        ),
        (
            "someone else's: read, and nothing written",
            vec![read().answer(
                StatusCode::OK,
                json!({"metadata": {"name": "cm", "namespace": "team-a", "labels": {"app": "mine"}}}),
            )],
            Done::Conflict(
                cm.key.clone(),
                "ConfigMap team-a/cm exists and was not created by flotilla (instance fleet); it is left untouched".into(),
            ),
        ),
    ];
    for (case, script, want) in cases {
        let (done, _) = run(vec![Step::Read { object: &cm }], script).await;
        let done: Vec<Done> = done.into_iter().map(Result::unwrap).collect();
        assert_eq!(done, [want], "{case}");
    }
}

#[tokio::test]
async fn a_delete_carries_the_uid_and_version_it_was_decided_on() {
    let step = || Step::Delete {
        key: config_map().key,
        uid: Some("uid-cm".into()),
        resource_version: Some("7".into()),
        why: Removal::Pruned,
    };
    let delete = || exchange(Method::DELETE, CM, &[]);
    let (done, bodies) = run(
        vec![step()],
        vec![delete().answer(StatusCode::OK, json!({}))],
    )
    .await;
    assert_eq!(
        done.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [Done::Deleted(config_map().key, Removal::Pruned)]
    );
    assert_eq!(
        bodies[0]["preconditions"],
        json!({"uid": "uid-cm", "resourceVersion": "7"})
    );
    assert_eq!(bodies[0]["propagationPolicy"], "Background");
    // Changed since (409) or gone (404): not deleted, and no error.
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
        "message": "Precondition failed: ResourceVersion in precondition: 7, ResourceVersion in object meta: 8"});
    for (status, answer) in [
        (StatusCode::CONFLICT, conflict),
        (StatusCode::NOT_FOUND, not_found()),
    ] {
        let (done, _) = run(vec![step()], vec![delete().answer(status, answer)]).await;
        assert_eq!(
            done.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            [Done::NotDeleted(config_map().key)]
        );
    }
}

#[tokio::test]
async fn a_delete_forbidden_by_rbac_leaves_the_object_and_holds_up_nothing() {
    // An object labelled as flotilla's under a name its ClusterRole does not list.
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": "configmaps \"cm\" is forbidden: User \"system:serviceaccount:flotilla-system:flotilla\" cannot delete resource \"configmaps\""});
    let delete = |name: &str| Step::Delete {
        key: ObjectKey {
            name: name.into(),
            ..config_map().key
        },
        uid: None,
        resource_version: None,
        why: Removal::Pruned,
    };
    let script = vec![
        exchange(Method::DELETE, CM, &[]).answer(StatusCode::FORBIDDEN, forbidden),
        exchange(
            Method::DELETE,
            "/api/v1/namespaces/team-a/configmaps/other",
            &[],
        ),
    ];
    let (done, _) = run(vec![delete("cm"), delete("other")], script).await;
    let other = ObjectKey {
        name: "other".into(),
        ..config_map().key
    };
    assert_eq!(
        done.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [
            Done::NotDeleted(config_map().key),
            Done::Deleted(other, Removal::Pruned)
        ]
    );
}

#[tokio::test]
async fn a_passing_failure_is_an_error_and_the_next_step_still_runs() {
    let cm = config_map();
    let mut other = config_map();
    other.key.name = "other".into();
    other.body["metadata"]["name"] = json!("other");
    let unavailable = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable", "code": 503,
        "message": "the server is currently unable to handle the request"});
    let script = vec![
        exchange(Method::PATCH, CM, APPLY).answer(StatusCode::SERVICE_UNAVAILABLE, unavailable),
        exchange(
            Method::PATCH,
            "/api/v1/namespaces/team-a/configmaps/other",
            &["fieldManager=flotilla"],
        )
        .answer(StatusCode::OK, live("3", json!({"k": "v"}))),
    ];
    let steps = vec![
        Step::Apply {
            object: &cm,
            why: Why::Outdated,
        },
        Step::Create { object: &other },
    ];
    let (done, _) = run(steps, script).await;
    let error = done[0].as_ref().unwrap_err();
    assert_eq!(
        error.to_string(),
        "apply ConfigMap team-a/cm: 503 ServiceUnavailable: the server is currently unable to handle the request"
    );
    assert!(!error.refused());
    assert!(matches!(done[1], Ok(Done::Created(..))));
}

#[tokio::test]
async fn a_create_is_not_forced_and_a_name_taken_meanwhile_is_left_alone() {
    let cm = config_map();
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
        "message": "Apply failed with 1 conflict: conflict with \"kubectl\": .data.k"});
    let theirs = json!({"metadata": {"name": "cm", "namespace": "team-a", "resourceVersion": "4",
        "labels": {"app": "theirs"}}, "data": {"k": "theirs"}});
    let script = vec![
        exchange(Method::PATCH, CM, &["fieldManager=flotilla"])
            .without(&["force"])
            .answer(StatusCode::CONFLICT, conflict),
        // Read from etcd, not the watch cache, which may not show it yet.
        exchange(Method::GET, CM, &[]).answer(StatusCode::OK, theirs),
    ];
    let (done, _) = run(vec![Step::Create { object: &cm }], script).await;
    let done: Vec<Done> = done.into_iter().map(Result::unwrap).collect();
    assert!(
        matches!(&done[..], [Done::Conflict(key, _)] if *key == cm.key),
        "{done:?}"
    );
}

#[tokio::test]
async fn after_a_refusal_nothing_more_is_sent() {
    let cm = config_map();
    let mut other = config_map();
    other.key.name = "other".into();
    let invalid = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": "ConfigMap \"cm\" is invalid"});
    let script =
        vec![exchange(Method::PATCH, CM, APPLY).answer(StatusCode::UNPROCESSABLE_ENTITY, invalid)];
    let steps = vec![
        Step::Apply {
            object: &cm,
            why: Why::Outdated,
        },
        Step::Create { object: &other },
        Step::Delete {
            key: config_map().key,
            uid: None,
            resource_version: None,
            why: Removal::Pruned,
        },
    ];
    let (done, _) = run(steps, script).await;
    assert_eq!(done.len(), 1, "the steps after the refusal were not run");
    assert!(done[0].as_ref().is_err_and(Error::refused));
}
