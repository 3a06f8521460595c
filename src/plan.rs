//! Pure planning: given what should exist and what does, decide what to write. Nothing here
//! talks to the API, so every rule is unit-tested directly.

use crate::object::{ObjectKey, Stamped};
use crate::ownership::{self, Owner};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// What to do with one rendered object, given the live object of the same kind and name.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Create,
    /// The live object is ours but differs in a field flotilla sets (drift or a new revision).
    Update,
    InSync,
    /// An object of that name exists and flotilla did not stamp it for this namespace: it is
    /// left exactly as it is.
    Conflict(String),
}

pub fn decide(desired: &Stamped, live: Option<&Value>, instance: &str) -> Decision {
    let Some(live) = live else {
        return Decision::Create;
    };
    let labels: Option<BTreeMap<String, String>> =
        serde_json::from_value(live["metadata"]["labels"].clone()).ok();
    let for_namespace = &desired.body["metadata"]["labels"][ownership::FOR_NAMESPACE];
    match ownership::owner(labels.as_ref(), instance) {
        Owner::Foreign => Decision::Conflict(format!(
            "{} exists and was not created by flotilla (instance {instance}); it is left untouched",
            desired.key
        )),
        Owner::Stamped(ns) if for_namespace != ns => Decision::Conflict(format!(
            "{} was stamped for namespace {ns}; it is left untouched",
            desired.key
        )),
        Owner::Stamped(_) if contains(live, &desired.body) => Decision::InSync,
        Owner::Stamped(_) => Decision::Update,
    }
}

/// Whether `live` carries every field of `desired` with the same value. The server adds
/// defaults, status and other managers' fields; those are no drift. An empty value in `desired`
/// matches an absent one, since the API server omits empty fields.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => {
            desired
                .iter()
                .all(|(key, want)| match (live.get(key), want) {
                    (Some(Value::Array(have)), Value::Array(want))
                        if MERGED_BY_NAME.contains(&key.as_str()) =>
                    {
                        contains_by_name(have, want)
                    }
                    (Some(have), want) => contains(have, want),
                    (None, want) => is_empty(want),
                })
        }
        // Every other list is atomic under server-side apply (a Role's rules, a RoleBinding's
        // subjects, args): it must be exactly what flotilla applies, so an addition is drift.
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(l, d)| contains(l, d))
        }
        (Value::Number(live), Value::Number(desired)) => live.as_f64() == desired.as_f64(),
        (live, desired) => live == desired || (live.is_null() && is_empty(desired)),
    }
}

/// Pod-spec lists that server-side apply merges by name: other managers may add items (a
/// webhook's sidecar, an injected env var), which is no drift; flotilla's own items must match.
const MERGED_BY_NAME: [&str; 6] = [
    "containers",
    "initContainers",
    "env",
    "volumes",
    "volumeMounts",
    "imagePullSecrets",
];

fn contains_by_name(live: &[Value], desired: &[Value]) -> bool {
    desired.iter().all(|want| {
        live.iter()
            .find(|have| have["name"] == want["name"])
            .is_some_and(|have| contains(have, want))
    })
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Stamped objects that are no longer rendered, in reverse apply order (workloads first).
pub fn prune(desired: &[Stamped], observed: &[ObjectKey]) -> Vec<ObjectKey> {
    let wanted: HashSet<&ObjectKey> = desired.iter().map(|d| &d.key).collect();
    let mut stale: Vec<ObjectKey> = observed
        .iter()
        .filter(|key| !wanted.contains(key))
        .cloned()
        .collect();
    stale.sort_by(|a, b| b.cmp(a));
    stale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;
    use serde_json::json;

    fn stamped(kind: Kind, name: &str, body: Value) -> Stamped {
        Stamped {
            key: ObjectKey {
                kind,
                namespace: "team-a".into(),
                name: name.into(),
            },
            body,
            hash: "h".into(),
            template: "t.yaml".into(),
        }
    }

    fn ours(extra: Value) -> Value {
        let mut body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "team-a", "labels": {
                "app.kubernetes.io/managed-by": "flotilla",
                "flotilla.dev/instance": "fleet",
                "flotilla.dev/namespace": "team-a"}},
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    }

    #[test]
    fn decides_create_update_in_sync() {
        let want = stamped(Kind::ConfigMap, "c", ours(json!({"data": {"k": "v"}})));
        assert_eq!(decide(&want, None, "fleet"), Decision::Create);
        let mut live = ours(json!({"data": {"k": "v"}}));
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["labels"]["added-by-someone"] = json!("x");
        assert_eq!(decide(&want, Some(&live), "fleet"), Decision::InSync);
        live["data"]["k"] = json!("edited");
        assert_eq!(decide(&want, Some(&live), "fleet"), Decision::Update);
    }

    #[test]
    fn never_claims_what_it_did_not_stamp() {
        let want = stamped(Kind::ConfigMap, "c", ours(json!({"data": {"k": "v"}})));
        let foreign =
            json!({"metadata": {"name": "c", "labels": {"app": "mine"}}, "data": {"k": "v"}});
        assert!(
            matches!(decide(&want, Some(&foreign), "fleet"), Decision::Conflict(m) if m.contains("not created by flotilla"))
        );
        let unlabelled = json!({"metadata": {"name": "c"}});
        assert!(matches!(
            decide(&want, Some(&unlabelled), "fleet"),
            Decision::Conflict(_)
        ));
        let other_fleet = ours(json!({}));
        assert!(matches!(
            decide(&want, Some(&other_fleet), "other"),
            Decision::Conflict(_)
        ));
        let mut other_ns = ours(json!({}));
        other_ns["metadata"]["labels"]["flotilla.dev/namespace"] = json!("team-b");
        assert!(
            matches!(decide(&want, Some(&other_ns), "fleet"), Decision::Conflict(m) if m.contains("team-b"))
        );
    }

    #[test]
    fn contains_tolerates_server_additions_but_not_changes() {
        let desired = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "i:1", "args": [], "ports": [{"containerPort": 9090, "protocol": "TCP"}]}
        ]}}}});
        let live = json!({"spec": {"replicas": 1, "revisionHistoryLimit": 10, "template": {
            "metadata": {"creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "i:1", "terminationMessagePath": "/dev/x",
                "ports": [{"containerPort": 9090, "protocol": "TCP"}]}]}}}, "status": {"replicas": 1}});
        assert!(contains(&live, &desired));
        let mut changed = live.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("i:2");
        assert!(!contains(&changed, &desired));
        // A sidecar another manager added is theirs, not drift; a changed or missing one of ours is.
        let mut extra_container = live.clone();
        extra_container["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar"}));
        assert!(contains(&extra_container, &desired));
        let mut renamed = live.clone();
        renamed["spec"]["template"]["spec"]["containers"][0]["name"] = json!("other");
        assert!(!contains(&renamed, &desired));
        // Role rules are an atomic list: an extra rule is drift.
        let rules = json!({"rules": [{"verbs": ["get"]}]});
        assert!(!contains(
            &json!({"rules": [{"verbs": ["get"]}, {"verbs": ["*"]}]}),
            &rules
        ));
        assert!(contains(&json!({"rules": [{"verbs": ["get"]}]}), &rules));
        let mut missing = live.clone();
        missing["spec"].as_object_mut().unwrap().remove("replicas");
        assert!(!contains(&missing, &desired));
        assert!(contains(&json!({"a": 1.0}), &json!({"a": 1})));
        assert!(!contains(&json!({"a": "1"}), &json!({"a": 1})));
        assert!(contains(
            &json!({}),
            &json!({"apiGroup": "", "m": {}, "n": null})
        ));
        assert!(!contains(&json!({}), &json!({"enabled": false})));
    }

    #[test]
    fn prunes_what_is_no_longer_rendered_workloads_first() {
        let desired = vec![stamped(Kind::ConfigMap, "keep", json!({}))];
        let key = |kind, name: &str| ObjectKey {
            kind,
            namespace: "team-a".into(),
            name: name.into(),
        };
        let observed = vec![
            key(Kind::ServiceAccount, "old-sa"),
            key(Kind::ConfigMap, "keep"),
            key(Kind::Deployment, "old-deploy"),
        ];
        assert_eq!(
            prune(&desired, &observed),
            [
                key(Kind::Deployment, "old-deploy"),
                key(Kind::ServiceAccount, "old-sa")
            ]
        );
        assert!(prune(&desired, &[key(Kind::ConfigMap, "keep")]).is_empty());
    }
}
