//! What a rendered document must be before flotilla will stamp it: one namespaced object of an
//! allowlisted kind, in the target namespace (or, explicitly, flotilla's own), with a valid
//! name, valid labels and annotations, and (for RoleBindings) a roleRef flotilla can bind and
//! no grant to everyone or to another namespace's ServiceAccounts. Flotilla's ownership labels
//! and annotations are then forced onto it.
//!
//! Checking here, before anything is applied, is what turns a bad value into a clear error
//! that changes nothing: the API server would refuse the same object only after the objects
//! before it were applied.

use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::ownership;
use crate::render::revision::object_hash;
use serde_json::{Map, Value};

/// What a template may place in flotilla's own namespace: nothing that grants rights or runs
/// code, since flotilla's ServiceAccount token lives there.
const OWN_NAMESPACE_KINDS: [Kind; 3] = [Kind::ServiceAccount, Kind::ConfigMap, Kind::Service];

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
    if namespace != target.namespace && !OWN_NAMESPACE_KINDS.contains(&kind) {
        return Err(format!(
            "{kind_name} {name} is placed in flotilla's own namespace {namespace}; only {} may go there (RBAC or a workload there could reach flotilla's own credentials)",
            OWN_NAMESPACE_KINDS.map(|k| k.name()).join(", ")
        ));
    }
    metadata.insert("namespace".into(), Value::String(namespace.clone()));
    for forbidden in ["generateName", "ownerReferences", "finalizers"] {
        if metadata.contains_key(forbidden) {
            return Err(format!(
                "{kind_name} {name} sets metadata.{forbidden}, which flotilla manages itself or does not support"
            ));
        }
    }
    let labels = map_field(metadata, "labels")?;
    for (key, value) in labels.iter() {
        check_label(key, value.as_str().unwrap_or_default())
            .map_err(|e| format!("{kind_name} {name}: metadata.labels: {e}"))?;
    }
    for (key, value) in ownership::labels(target.instance, target.namespace) {
        labels.insert(key.into(), Value::String(value));
    }
    let annotations = map_field(metadata, "annotations")?;
    annotations.insert(
        ownership::REVISION.into(),
        Value::String(target.revision.into()),
    );
    annotations.remove(ownership::HASH);
    match kind {
        Kind::ConfigMap => check_config_map(&object),
        Kind::RoleBinding => check_role_binding(&object, target),
        _ => Ok(()),
    }
    .map_err(|e| format!("{kind_name} {name}: {e}"))?;
    check_apply_safe(&Value::Object(object.clone()), &mut Vec::new())
        .map_err(|e| format!("{kind_name} {name}: {e}"))?;
    let hash = object_hash(&Value::Object(object.clone()));
    if let Some(Value::Object(metadata)) = object.get_mut("metadata")
        && let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
    {
        annotations.insert(ownership::HASH.into(), Value::String(hash.clone()));
        // Checked with flotilla's own annotations in: the API server limits them all together.
        check_annotations(annotations).map_err(|e| format!("{kind_name} {name}: {e}"))?;
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
        _ => Err(format!(
            "has no {field}: each template renders one Kubernetes object, with apiVersion, kind and metadata.name"
        )),
    }
}

/// Characters server-side apply cannot carry as flotilla sends it today: the API server reads an
/// apply body as YAML, and its decoder refuses DEL, the C1 controls and U+FFFE/U+FFFF when they
/// are not escaped, and turns an unescaped U+0085 into a space. The JSON body flotilla sends
/// leaves them unescaped (as JSON allows), so an object holding one would fail to apply (after
/// the objects before it were applied) or be stored changed. Refused here until the apply body
/// is sent with them escaped (`escape::escape_non_printable`); then this check can go.
fn unsendable(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}')
}

fn check_apply_safe(value: &Value, path: &mut Vec<String>) -> Result<(), String> {
    let refuse = |path: &[String], c: char| {
        Err(format!(
            "{} holds U+{:04X}, a control character server-side apply cannot carry; remove it where it comes from (a namespace's annotation, usually)",
            if path.is_empty() {
                "the object".to_string()
            } else {
                path.join(".")
            },
            c as u32
        ))
    };
    match value {
        Value::String(text) => match text.chars().find(|c| unsendable(*c)) {
            Some(c) => refuse(path, c),
            None => Ok(()),
        },
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                check_apply_safe(item, path)?;
                path.pop();
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(super::truncate(key, 100));
                if let Some(c) = key.chars().find(|c| unsendable(*c)) {
                    return refuse(path, c);
                }
                check_apply_safe(item, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A label as the API server validates it: a qualified key, and a value of at most 63
/// characters of `[A-Za-z0-9._-]`.
fn check_label(key: &str, value: &str) -> Result<(), String> {
    crate::selector::valid_key(key)?;
    crate::selector::valid_value(value)
        .map(drop)
        .map_err(|e| format!("{key}: {}", super::truncate(&e, 200)))
}

/// The API server's limit on all annotations of one object together (keys and values).
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn check_annotations(annotations: &Map<String, Value>) -> Result<(), String> {
    let mut total = 0;
    for (key, value) in annotations {
        crate::selector::valid_key(key).map_err(|e| format!("metadata.annotations: {e}"))?;
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_MAX_BYTES {
        return Err(format!(
            "metadata.annotations are {total} bytes; Kubernetes allows at most {ANNOTATIONS_MAX_BYTES}"
        ));
    }
    Ok(())
}

/// The API server's limit on a ConfigMap's data.
const CONFIG_MAP_MAX_BYTES: usize = 1024 * 1024;

/// ConfigMap data: string values under keys of `[-._a-zA-Z0-9]`, 1 MiB in all.
fn check_config_map(object: &Map<String, Value>) -> Result<(), String> {
    let data = match object.get("data") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(data)) => data,
        Some(_) => return Err("data must be a mapping".into()),
    };
    let mut total = 0;
    for (key, value) in data {
        let valid_key = !key.is_empty()
            && key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid_key {
            return Err(format!(
                "data key {:?} is not valid (at most 253 characters of [-._a-zA-Z0-9])",
                super::truncate(key, 100)
            ));
        }
        let Value::String(text) = value else {
            return Err(format!(
                "data.{key} must be a string (quote it, or use | string)"
            ));
        };
        total += key.len() + text.len();
    }
    if total > CONFIG_MAP_MAX_BYTES {
        return Err(format!(
            "data is {total} bytes; Kubernetes allows at most {CONFIG_MAP_MAX_BYTES}"
        ));
    }
    Ok(())
}

/// Subjects that stand for everyone (or every ServiceAccount): a binding to them grants the
/// Role to the whole cluster.
const EVERYONE: [&str; 4] = [
    "system:authenticated",
    "system:unauthenticated",
    "system:anonymous",
    "system:serviceaccounts",
];

/// A stamped RoleBinding binds a Role (flotilla may bind only the templated Roles, never a
/// ClusterRole), to subjects in its namespace: not to everyone, and not to another namespace's
/// ServiceAccounts.
fn check_role_binding(object: &Map<String, Value>, target: &Target) -> Result<(), String> {
    let role_ref = &object.get("roleRef").cloned().unwrap_or_default();
    if role_ref["kind"] != "Role" || role_ref["apiGroup"] != "rbac.authorization.k8s.io" {
        return Err(format!(
            "roleRef must be a Role of apiGroup rbac.authorization.k8s.io (got kind {} apiGroup {}); flotilla binds only the Roles it stamps, never a ClusterRole",
            role_ref["kind"], role_ref["apiGroup"]
        ));
    }
    let subjects = match object.get("subjects") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(subjects)) => subjects,
        Some(_) => return Err("subjects must be a list".into()),
    };
    for subject in subjects {
        let name = subject["name"].as_str().unwrap_or_default();
        let everyone = EVERYONE.contains(&name) || name.starts_with("system:serviceaccounts:");
        if everyone {
            return Err(format!(
                "binds {name}, which stands for everyone; bind the ServiceAccounts that need the Role"
            ));
        }
        if subject["kind"] == "ServiceAccount" {
            // Without a namespace, a subject means the binding's own, which is the target.
            let namespace = subject["namespace"].as_str().unwrap_or(target.namespace);
            if namespace != target.namespace {
                return Err(format!(
                    "binds ServiceAccount {namespace}/{name}; a stamped RoleBinding may only bind ServiceAccounts of {}",
                    target.namespace
                ));
            }
        }
    }
    Ok(())
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
            "{kind} name {:?} is not a valid name (lowercase alphanumerics, '-' and '.', at most 253, at most 63 between dots); a name composed from the namespace name fits with | dns_label",
            super::truncate(name, 100)
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

    fn role_ref() -> Value {
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-role"})
    }

    fn binding(role_ref: Value, subjects: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b"}, "roleRef": role_ref, "subjects": subjects})
    }

    #[test]
    fn a_binding_of_a_templated_role_to_its_namespace_passes() {
        let subjects = json!([
            {"kind": "ServiceAccount", "name": "argo", "namespace": "team-a"},
            {"kind": "ServiceAccount", "name": "argo-workflow"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team-a-admins"},
        ]);
        let stamped = admit(binding(role_ref(), subjects), "b.yaml", &TARGET).unwrap();
        assert_eq!(stamped.key.to_string(), "RoleBinding team-a/b");
    }

    #[test]
    fn labels_and_annotations_at_their_limits_pass_and_one_byte_over_fails() {
        // The annotation limit counts every key and value, flotilla's own two included.
        let with_big = |len: usize| {
            cm(
                json!({"name": "c", "labels": {"example.com/note": "x".repeat(63)},
                "annotations": {"example.com/big": "y".repeat(len)}}),
            )
        };
        let probe = admit(with_big(0), "c.yaml", &TARGET).unwrap();
        let used: usize = probe.body["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| k.len() + v.as_str().unwrap().len())
            .sum();
        let at_limit = ANNOTATIONS_MAX_BYTES - used;
        let stamped = admit(with_big(at_limit), "c.yaml", &TARGET).unwrap();
        assert_eq!(
            stamped.body["metadata"]["labels"]["example.com/note"],
            "x".repeat(63)
        );
        let over = admit(with_big(at_limit + 1), "c.yaml", &TARGET).unwrap_err();
        assert_eq!(
            over,
            "ConfigMap c: metadata.annotations are 262145 bytes; Kubernetes allows at most 262144"
        );
    }

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
            (
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}),
                "not allowed",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}),
                "not allowed",
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"name": "c"}}),
                "has no kind",
            ),
            (
                cm(json!({"name": format!("{}-x", "n".repeat(63))})),
                "dns_label",
            ),
            (
                cm(json!({"name": "c", "labels": {"note": "has spaces"}})),
                "metadata.labels: note",
            ),
            (
                cm(json!({"name": "c", "labels": {"note": "x".repeat(64)}})),
                "at most 63",
            ),
            (
                cm(json!({"name": "c", "labels": {"bad key!": "x"}})),
                "label key",
            ),
            (
                cm(json!({"name": "c", "annotations": {"a": "x".repeat(256 * 1024)}})),
                "at most 262144",
            ),
            (
                cm(json!({"name": "c", "annotations": {"no/good/key": "x"}})),
                "metadata.annotations",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1}}),
                "data.n must be a string",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a b": "x"}}),
                "data key",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"big": "x".repeat(1024 * 1024)}}),
                "at most 1048576",
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "flotilla-system"}}),
                "flotilla's own namespace",
            ),
            (
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "argo-role", "namespace": "flotilla-system"}}),
                "flotilla's own namespace",
            ),
            (
                binding(
                    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}),
                    json!([]),
                ),
                "never a ClusterRole",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "a\u{7f}b"}}),
                "data.k holds U+007F, a control character server-side apply cannot carry",
            ),
            (
                cm(json!({"name": "c", "annotations": {"note": "a\u{85}b"}})),
                "metadata.annotations.note holds U+0085",
            ),
            (
                binding(
                    role_ref(),
                    json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]),
                ),
                "stands for everyone",
            ),
            (
                binding(
                    role_ref(),
                    json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:team-b"}]),
                ),
                "stands for everyone",
            ),
            (
                binding(
                    role_ref(),
                    json!([{"kind": "ServiceAccount", "name": "argo", "namespace": "team-b"}]),
                ),
                "ServiceAccount team-b/argo",
            ),
            (
                binding(
                    role_ref(),
                    json!([{"kind": "ServiceAccount", "name": "flotilla", "namespace": "flotilla-system"}]),
                ),
                "ServiceAccount flotilla-system/flotilla",
            ),
        ];
        for (doc, needle) in cases {
            let err = admit(doc.clone(), "t.yaml", &TARGET).expect_err(&doc.to_string());
            assert!(err.contains(needle), "{doc}: {err}");
        }
    }
}
