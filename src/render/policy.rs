//! What a rendered document must be before flotilla will stamp it: one namespaced object of an
//! allowlisted kind, in the target namespace (or, explicitly, flotilla's own), with a valid
//! name. Flotilla's ownership labels and annotations are then forced onto it.

use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::ownership;
use crate::render::revision::object_hash;
use serde_json::{Map, Value};

/// Where the object is being rendered for.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub own_namespace: &'a str,
    pub instance: &'a str,
    pub revision: &'a str,
}

pub fn admit(doc: Value, template: &str, target: &Target) -> Result<Stamped, String> {
    let Value::Object(mut object) = doc else {
        return Err("must render a YAML mapping (one Kubernetes object)".into());
    };
    let api_version = string_field(&object, "apiVersion")?;
    let kind_name = string_field(&object, "kind")?;
    let kind = Kind::from_type(&api_version, &kind_name).ok_or_else(|| {
        format!(
            "kind {kind_name} ({api_version}) is not allowed; flotilla stamps only namespaced kinds from its allowlist: {}",
            Kind::allowlist()
        )
    })?;
    let metadata = match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => return Err(format!("{kind_name} has no metadata mapping")),
    };
    let name = match metadata.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => return Err(format!("{kind_name} has no metadata.name")),
    };
    check_name(kind, &name)?;
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => target.namespace.to_string(),
        Some(Value::String(ns)) if ns == target.namespace || ns == target.own_namespace => {
            ns.clone()
        }
        Some(other) => {
            return Err(format!(
                "{kind_name} {name} is placed in namespace {other}; objects may only go to the target namespace ({}) or flotilla's own ({})",
                target.namespace, target.own_namespace
            ));
        }
    };
    metadata.insert("namespace".into(), Value::String(namespace.clone()));
    for forbidden in ["generateName", "ownerReferences", "finalizers"] {
        if metadata.contains_key(forbidden) {
            return Err(format!(
                "{kind_name} {name} sets metadata.{forbidden}, which flotilla manages itself or does not support"
            ));
        }
    }
    let labels = map_field(metadata, "labels")?;
    for (key, value) in ownership::labels(target.instance, target.namespace) {
        labels.insert(key.into(), Value::String(value));
    }
    let annotations = map_field(metadata, "annotations")?;
    annotations.insert(
        ownership::REVISION.into(),
        Value::String(target.revision.into()),
    );
    annotations.remove(ownership::HASH);
    let hash = object_hash(&Value::Object(object.clone()));
    if let Some(Value::Object(metadata)) = object.get_mut("metadata")
        && let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
    {
        annotations.insert(ownership::HASH.into(), Value::String(hash.clone()));
    }
    Ok(Stamped {
        key: ObjectKey {
            kind,
            namespace,
            name,
        },
        body: Value::Object(object),
        hash,
        template: template.to_string(),
    })
}

fn string_field(object: &Map<String, Value>, field: &str) -> Result<String, String> {
    match object.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(format!("has no {field}")),
    }
}

/// The string map at `metadata.<field>`, created if absent; its values must all be strings.
fn map_field<'m>(
    metadata: &'m mut Map<String, Value>,
    field: &str,
) -> Result<&'m mut Map<String, Value>, String> {
    let entry = metadata
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => match map.iter().find(|(_, v)| !v.is_string()) {
            Some((key, _)) => Err(format!(
                "metadata.{field}.{key} must be a string (quote it)"
            )),
            None => Ok(map),
        },
        _ => Err(format!("metadata.{field} must be a mapping")),
    }
}

/// Names must be DNS subdomains; Services, whose names become DNS labels, must be RFC 1035 labels.
fn check_name(kind: Kind, name: &str) -> Result<(), String> {
    let subdomain = name.len() <= 253 && name.split('.').all(crate::config::is_dns_label);
    if !subdomain {
        return Err(format!(
            "{kind} name {name:?} is not a valid name (lowercase alphanumerics, '-' and '.', at most 253)"
        ));
    }
    if kind == Kind::Service
        && !(crate::config::is_dns_label(name)
            && name.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        return Err(format!(
            "Service name {name:?} must be a DNS label: at most 63 lowercase alphanumerics or '-', starting with a letter"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TARGET: Target = Target {
        namespace: "team-a",
        own_namespace: "flotilla-system",
        instance: "flotilla",
        revision: "rev1",
    };

    fn cm(metadata: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}})
    }

    #[test]
    fn forces_namespace_labels_and_annotations() {
        let stamped = admit(
            cm(json!({"name": "c", "labels": {"app.kubernetes.io/managed-by": "helm", "x": "y"}})),
            "c.yaml",
            &TARGET,
        )
        .unwrap();
        assert_eq!(stamped.key.to_string(), "ConfigMap team-a/c");
        let meta = &stamped.body["metadata"];
        assert_eq!(meta["namespace"], "team-a");
        assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "flotilla");
        assert_eq!(meta["labels"]["flotilla.dev/namespace"], "team-a");
        assert_eq!(meta["labels"]["flotilla.dev/instance"], "flotilla");
        assert_eq!(meta["labels"]["x"], "y");
        assert_eq!(meta["annotations"]["flotilla.dev/revision"], "rev1");
        assert_eq!(
            meta["annotations"]["flotilla.dev/hash"],
            stamped.hash.as_str()
        );
        assert_eq!(stamped.body["data"]["k"], "v");
    }

    #[test]
    fn hash_ignores_a_hash_annotation_written_by_the_template() {
        let plain = admit(cm(json!({"name": "c"})), "c.yaml", &TARGET).unwrap();
        let spoofed = admit(
            cm(json!({"name": "c", "annotations": {"flotilla.dev/hash": "forged"}})),
            "c.yaml",
            &TARGET,
        )
        .unwrap();
        assert_eq!(plain.hash, spoofed.hash);
        assert_eq!(plain.body, spoofed.body);
    }

    #[test]
    fn own_namespace_is_allowed_explicitly() {
        let stamped = admit(
            cm(json!({"name": "team-a-c", "namespace": "flotilla-system"})),
            "c.yaml",
            &TARGET,
        )
        .unwrap();
        assert_eq!(stamped.key.namespace, "flotilla-system");
        assert_eq!(
            stamped.body["metadata"]["labels"]["flotilla.dev/namespace"],
            "team-a"
        );
    }

    #[test]
    fn refuses_what_it_must_not_stamp() {
        let cases = [
            (json!("just a string"), "mapping"),
            (
                json!({"kind": "ConfigMap", "metadata": {"name": "c"}}),
                "apiVersion",
            ),
            (
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
                "not allowed",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
                "not allowed",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
                "not allowed",
            ),
            (json!({"apiVersion": "v1", "kind": "ConfigMap"}), "metadata"),
            (cm(json!({"namespace": "team-a"})), "metadata.name"),
            (cm(json!({"name": "c", "namespace": "team-b"})), "team-b"),
            (cm(json!({"name": "Bad_Name"})), "valid name"),
            (
                cm(json!({"name": "c", "labels": {"n": 1}})),
                "must be a string",
            ),
            (cm(json!({"name": "c", "labels": ["a"]})), "mapping"),
            (
                cm(json!({"name": "c", "ownerReferences": []})),
                "ownerReferences",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "9lives"}}),
                "DNS label",
            ),
        ];
        for (doc, needle) in cases {
            let err = admit(doc.clone(), "t.yaml", &TARGET).expect_err(&doc.to_string());
            assert!(err.contains(needle), "{doc}: {err}");
        }
    }
}
