use super::*;
use crate::membership::Membership;
use crate::status::availability;
use serde_json::json;

const INSTANCE: &str = "fleet";
const MANAGER: &str = "flotilla";

fn key(kind: Kind, name: &str) -> ObjectKey {
    ObjectKey {
        kind,
        namespace: "team-a".into(),
        name: name.into(),
    }
}

fn labels(for_namespace: &str) -> Value {
    json!({"app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/instance": INSTANCE,
        "flotilla.dev/namespace": for_namespace})
}

/// A rendered object with content hash `hash`.
fn rendered(kind: Kind, name: &str, hash: &str) -> Stamped {
    let (api_version, data) = match kind {
        Kind::Deployment => ("apps/v1", json!({"spec": {"replicas": 1}})),
        _ => ("v1", json!({"data": {"k": "v"}})),
    };
    let mut body = json!({"apiVersion": api_version, "kind": kind.name(),
        "metadata": {"name": name, "namespace": "team-a", "labels": labels("team-a"),
            "annotations": {"flotilla.dev/hash": hash}}});
    body.as_object_mut()
        .unwrap()
        .extend(data.as_object().unwrap().clone());
    Stamped {
        key: key(kind, name),
        body,
        hash: hash.into(),
        template: format!("{name}.yaml"),
    }
}

/// What the watch shows of a stamped object.
fn watched(kind: Kind, name: &str, rv: &str, hash: &str) -> Watched {
    Watched {
        key: key(kind, name),
        uid: Some(format!("uid-{name}")),
        resource_version: Some(rv.into()),
        stamped_for: "team-a".into(),
        hash: Some(hash.into()),
    }
}

fn opted_in(stamped: Vec<Watched>) -> Snapshot {
    Snapshot {
        name: "team-a".into(),
        namespace: Some(NamespaceState {
            resource_version: Some("100".into()),
            membership: Membership::Member,
            ..NamespaceState::default()
        }),
        stamped,
        ..Snapshot::default()
    }
}

fn verified(rv: &str) -> Verified {
    Verified {
        resource_version: rv.into(),
        health: None,
    }
}

/// A step as a short word and the object's name, for table assertions.
fn summary(step: &Step) -> (&'static str, String) {
    match step {
        Step::Keep { object, .. } => ("keep", object.key.name.clone()),
        Step::Read { object } => ("read", object.key.name.clone()),
        Step::Create { object } => ("create", object.key.name.clone()),
        Step::Apply {
            object,
            why: Why::Outdated,
        } => ("apply outdated", object.key.name.clone()),
        Step::Apply {
            object,
            why: Why::Drifted,
        } => ("apply drifted", object.key.name.clone()),
        Step::Conflict { object, .. } => ("conflict", object.key.name.clone()),
        Step::Delete { key, .. } => ("delete", key.name.clone()),
    }
}

#[test]
fn each_fast_path_saves_its_request() {
    let cm = rendered(Kind::ConfigMap, "cm", "h1");
    let free = HashSet::from([cm.key.clone()]);
    let unknown = HashSet::new();
    let cases: Vec<(&str, Snapshot, &HashSet<ObjectKey>, &str)> = vec![
        (
            "nothing known: read first",
            opted_in(vec![]),
            &unknown,
            "read",
        ),
        (
            "a free name, as the name watch shows it: create without reading",
            opted_in(vec![]),
            &free,
            "create",
        ),
        (
            "verified at the version the watch shows: nothing at all",
            Snapshot {
                verified: [(cm.key.clone(), verified("7"))].into_iter().collect(),
                ..opted_in(vec![watched(Kind::ConfigMap, "cm", "7", "h1")])
            },
            &unknown,
            "keep",
        ),
        (
            "verified at an older version: someone wrote since, read it",
            Snapshot {
                verified: [(cm.key.clone(), verified("6"))].into_iter().collect(),
                ..opted_in(vec![watched(Kind::ConfigMap, "cm", "7", "h1")])
            },
            &unknown,
            "read",
        ),
        (
            "ours, last applied with another hash: apply without reading",
            Snapshot {
                verified: [(cm.key.clone(), verified("7"))].into_iter().collect(),
                ..opted_in(vec![watched(Kind::ConfigMap, "cm", "7", "h0")])
            },
            &unknown,
            "apply outdated",
        ),
        (
            "ours, same hash, never verified: could hide an edit, read it",
            opted_in(vec![watched(Kind::ConfigMap, "cm", "7", "h1")]),
            &unknown,
            "read",
        ),
    ];
    for (case, snapshot, vacant, want) in cases {
        let objects = [cm.clone()];
        let steps = plan(&snapshot, &objects, vacant);
        let got: Vec<_> = steps.iter().map(summary).collect();
        assert_eq!(got, [(want, "cm".to_string())], "{case}");
    }
}

#[test]
fn a_kept_deployment_carries_its_health_as_verified() {
    let deploy = rendered(Kind::Deployment, "d", "h1");
    let status = json!({"metadata": {"generation": 1}, "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1}});
    let health = availability(&status).unwrap();
    let snapshot = Snapshot {
        verified: [(
            deploy.key.clone(),
            Verified {
                resource_version: "7".into(),
                health: Some(Box::new(health.clone())),
            },
        )]
        .into_iter()
        .collect(),
        ..opted_in(vec![watched(Kind::Deployment, "d", "7", "h1")])
    };
    let objects = [deploy];
    let Step::Keep { verified, .. } = &plan(&snapshot, &objects, &HashSet::new())[0] else {
        panic!("not kept");
    };
    assert_eq!(verified.health.as_deref(), Some(&health));
}

#[test]
fn orphans_are_deleted_workloads_first_with_the_version_they_were_seen_at() {
    let objects = [rendered(Kind::ConfigMap, "kept", "h1")];
    let snapshot = opted_in(vec![
        watched(Kind::ServiceAccount, "old-sa", "3", "x"),
        watched(Kind::Deployment, "old-deploy", "4", "y"),
    ]);
    let vacant = HashSet::from([objects[0].key.clone()]);
    let steps = plan(&snapshot, &objects, &vacant);
    let got: Vec<_> = steps.iter().map(summary).collect();
    assert_eq!(
        got,
        [
            ("create", "kept".to_string()),
            ("delete", "old-deploy".to_string()),
            ("delete", "old-sa".to_string())
        ]
    );
    assert_eq!(
        steps[1],
        Step::Delete {
            key: key(Kind::Deployment, "old-deploy"),
            uid: Some("uid-old-deploy".into()),
            resource_version: Some("4".into()),
            why: Removal::Pruned,
        }
    );
}

#[test]
fn a_reap_deletes_everything_stamped_and_nothing_else() {
    let snapshot = opted_in(vec![
        watched(Kind::ConfigMap, "cm", "1", "a"),
        watched(Kind::Deployment, "d", "2", "b"),
    ]);
    let steps = reap(&snapshot);
    let got: Vec<_> = steps.iter().map(summary).collect();
    assert_eq!(
        got,
        [("delete", "d".to_string()), ("delete", "cm".to_string())]
    );
    assert!(steps.iter().all(|s| matches!(
        s,
        Step::Delete {
            why: Removal::Reaped,
            ..
        }
    )));
    assert!(reap(&opted_in(vec![])).is_empty());
}

#[test]
fn after_a_read_the_live_object_decides() {
    let cm = rendered(Kind::ConfigMap, "cm", "h1");
    let ours = |data: Value, hash: &str| {
        let mut live = cm.body.clone();
        live["metadata"]["resourceVersion"] = json!("9");
        live["metadata"]["annotations"]["flotilla.dev/hash"] = json!(hash);
        live["data"] = data;
        live
    };
    // Applied by `manager` (`operation`), with flotilla's hash, and no label but `label`.
    let unlabelled = |manager: &str, operation: &str, label: Option<(&str, &str)>| {
        let mut live = ours(json!({"k": "v"}), "h1");
        let labels: serde_json::Map<String, Value> = label
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        live["metadata"]["labels"] = Value::Object(labels);
        live["metadata"]["managedFields"] =
            json!([{"manager": manager, "operation": operation, "fieldsType": "FieldsV1"}]);
        live
    };
    let cases: Vec<(&str, Option<Value>, &str)> = vec![
        ("gone", None, "create"),
        (
            "ours and as rendered",
            Some(ours(json!({"k": "v"}), "h1")),
            "keep",
        ),
        (
            "ours, same hash, a field edited",
            Some(ours(json!({"k": "edited"}), "h1")),
            "apply drifted",
        ),
        (
            "ours, rendered otherwise",
            Some(ours(json!({"k": "old"}), "h0")),
            "apply outdated",
        ),
        (
            "someone else's",
            Some(
                json!({"metadata": {"name": "cm", "labels": {"app": "mine"}}, "data": {"k": "v"}}),
            ),
            "conflict",
        ),
        (
            "another fleet's",
            Some(json!({"metadata": {"name": "cm", "labels": {
                "app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/instance": "other",
                "flotilla.dev/namespace": "team-a"}}})),
            "conflict",
        ),
        (
            "stamped for another namespace",
            Some(
                json!({"metadata": {"name": "cm", "labels": labels("team-b")}, "data": {"k": "v"}}),
            ),
            "conflict",
        ),
        (
            "unlabelled",
            Some(json!({"metadata": {"name": "cm"}})),
            "conflict",
        ),
        // A tenant removed flotilla's labels from what it applied: its own apply and hash say
        // whose it is, and the labels are drift like any other field.
        (
            "ours, labels removed",
            Some(unlabelled(MANAGER, "Apply", None)),
            "apply drifted",
        ),
        (
            "ours, instance label removed only",
            Some(unlabelled(
                MANAGER,
                "Apply",
                Some(("flotilla.dev/namespace", "team-a")),
            )),
            "apply drifted",
        ),
        (
            "unlabelled, another manager's apply",
            Some(unlabelled("kubectl", "Apply", None)),
            "conflict",
        ),
        (
            "unlabelled, flotilla's update only",
            Some(unlabelled(MANAGER, "Update", None)),
            "conflict",
        ),
        (
            "unlabelled, stamped for another namespace",
            Some(unlabelled(
                MANAGER,
                "Apply",
                Some(("flotilla.dev/namespace", "team-b")),
            )),
            "conflict",
        ),
    ];
    for (case, live, want) in cases {
        let step = after_read(&cm, live.as_ref(), INSTANCE, MANAGER);
        assert_eq!(summary(&step).0, want, "{case}");
    }
    let Step::Keep { verified, .. } =
        after_read(&cm, Some(&ours(json!({"k": "v"}), "h1")), INSTANCE, MANAGER)
    else {
        panic!("not kept");
    };
    assert!(
        verified.resource_version.is("9"),
        "verified at the version read"
    );
    let stamped_elsewhere = json!({"metadata": {"labels": labels("team-b")}});
    let Step::Conflict { reason, .. } =
        after_read(&cm, Some(&stamped_elsewhere), INSTANCE, MANAGER)
    else {
        panic!("not a conflict");
    };
    assert_eq!(
        reason,
        "ConfigMap team-a/cm was stamped for namespace team-b; it is left untouched"
    );
}

#[test]
fn the_fingerprint_follows_every_version_and_not_the_order() {
    let objects = vec![
        watched(Kind::ConfigMap, "x", "1", "a"),
        watched(Kind::ConfigMap, "y", "2", "b"),
    ];
    let fingerprint = |snapshot: &Snapshot| fingerprint(snapshot, Some("200"));
    let base = fingerprint(&opted_in(objects.clone()));
    let reversed = objects.iter().rev().cloned().collect();
    assert_eq!(base, fingerprint(&opted_in(reversed)));
    let no_worker = super::fingerprint(&opted_in(objects.clone()), None);
    assert_ne!(base, no_worker);
    let repinned = Snapshot {
        revision: "another revision".into(),
        ..opted_in(objects.clone())
    };
    assert_ne!(base, fingerprint(&repinned), "a new pin");
    let unlabelled = Snapshot {
        workflows: crate::workflows::Seen::Listed(crate::workflows::Counts {
            by_label: vec![(None, 1)],
        }),
        ..opted_in(objects.clone())
    };
    assert_ne!(base, fingerprint(&unlabelled), "a Workflow counted");
    assert_ne!(base, fingerprint(&opted_in(objects[..1].to_vec())));
    let mut recreated = objects.clone();
    recreated[0].uid = Some("another".into());
    assert_ne!(base, fingerprint(&opted_in(recreated)));
}
