//! Whether a live object is as rendered: every field flotilla sets is there with the same value.
//! Server defaults, status and other managers' fields are no drift.

use serde_json::Value;

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
                    (None, want) => {
                        is_empty(want)
                            || (OMITTED_WHEN_FALSE.contains(&key.as_str())
                                && *want == Value::Bool(false))
                    }
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

/// Fields flotilla renders as `false` that the API server leaves out when false (Go's
/// `omitempty` on a plain bool): a Deployment's `paused`, rendered so that server-side apply
/// owns it and a tenant's `true` is drift. Not every false: a `*bool` such as
/// `automountServiceAccountToken` left out means its default, which may be true.
const OMITTED_WHEN_FALSE: [&str; 1] = ["paused"];

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        // `paused: false` as rendered is what the API server shows by leaving it out.
        let unpaused = json!({"spec": {"paused": false}});
        assert!(contains(&json!({"spec": {}}), &unpaused));
        assert!(!contains(&json!({"spec": {"paused": true}}), &unpaused));
        assert!(!contains(
            &json!({"spec": {}}),
            &json!({"spec": {"automount": false}})
        ));
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
}
