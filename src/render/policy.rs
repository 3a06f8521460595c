//! What a rendered document must be before flotilla will stamp it: one namespaced object of an
//! allowlisted kind, in the target namespace (or, explicitly, flotilla's own), with a valid
//! name, valid labels and annotations; a RoleBinding binds a Role, to ServiceAccounts of the
//! target namespace only; a Deployment's pods get nothing of the node (no privileged or
//! escalating containers, no added capabilities, no host namespaces or hostPath volumes); a
//! Service claims no external IPs and is of a type the config allows. Flotilla's ownership
//! labels and annotations are then forced onto it. [`admit_set`] then checks what needs the
//! whole set: a Deployment runs as a ServiceAccount of the set, a RoleBinding binds a Role of
//! the set.
//!
//! Checking here, before anything is applied, is what turns a bad value into a clear error
//! that changes nothing: the API server would refuse the same object only after the objects
//! before it were applied.

use crate::config::ServiceType;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::ownership;
use crate::render::hash::stamp_hash;
use serde_json::{Map, Value};

mod error;
mod kinds;
pub use error::{ContainerName, ObjectName, ObjectProblem, PolicyError};
use kinds::{check_config_map, check_pod_spec, check_role_binding, check_service, text};

/// What a template may place in flotilla's own namespace: nothing that grants rights or runs
/// code, since flotilla's ServiceAccount token lives there.
const OWN_NAMESPACE_KINDS: [Kind; 3] = [Kind::ServiceAccount, Kind::ConfigMap, Kind::Service];

/// Where the object is being rendered for.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub own_namespace: &'a str,
    pub instance: &'a str,
    pub revision: &'a str,
    /// The Service types the config allows (`policy.allowServiceTypes`).
    pub service_types: &'a [ServiceType],
}

pub fn admit(doc: Value, template: &str, target: &Target) -> Result<Stamped, PolicyError> {
    let Value::Object(mut object) = doc else {
        return Err(PolicyError::NotAMapping);
    };
    let api_version = string_field(&object, "apiVersion")?;
    let kind_name = string_field(&object, "kind")?;
    let kind = Kind::from_type(&api_version, &kind_name).ok_or(PolicyError::KindNotAllowed {
        kind: kind_name,
        api_version,
    })?;
    let metadata = match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => return Err(PolicyError::NoMetadata(kind)),
    };
    let name = match metadata.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => return Err(PolicyError::NoName(kind)),
    };
    check_name(kind, &name)?;
    let named = ObjectName {
        kind,
        name: name.clone(),
    };
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => target.namespace.to_string(),
        Some(Value::String(ns)) if ns == target.namespace || ns == target.own_namespace => {
            ns.clone()
        }
        Some(other) => {
            return Err(PolicyError::PlacedElsewhere {
                object: named,
                namespace: other.clone(),
                target: target.namespace.into(),
                own: target.own_namespace.into(),
            });
        }
    };
    if namespace != target.namespace && !OWN_NAMESPACE_KINDS.contains(&kind) {
        return Err(PolicyError::PlacedInOwnNamespace {
            object: named,
            namespace,
        });
    }
    metadata.insert("namespace".into(), Value::String(namespace.clone()));
    for forbidden in ["generateName", "ownerReferences", "finalizers"] {
        if metadata.contains_key(forbidden) {
            return Err(PolicyError::ManagedMetadata {
                object: named,
                field: forbidden,
            });
        }
    }
    // Everything checked from here on is inside the object, and its messages name it.
    let in_object = |problem| PolicyError::InObject {
        object: named.clone(),
        problem,
    };
    let labels = map_field(metadata, "labels")?;
    for (key, value) in labels.iter() {
        check_label(key, value.as_str().unwrap_or_default()).map_err(in_object)?;
    }
    for (key, value) in ownership::labels(target.instance, target.namespace) {
        labels.insert(key.into(), Value::String(value));
    }
    let annotations = map_field(metadata, "annotations")?;
    annotations.insert(
        ownership::REVISION.into(),
        Value::String(target.revision.into()),
    );
    match kind {
        Kind::ConfigMap => check_config_map(&object),
        Kind::RoleBinding => check_role_binding(&object, target),
        Kind::Deployment => check_pod_spec(&object["spec"]["template"]["spec"]),
        Kind::Service => check_service(&object, target),
        _ => Ok(()),
    }
    .map_err(in_object)?;
    check_apply_safe(&Value::Object(object.clone()), &mut Vec::new()).map_err(in_object)?;
    let hash = stamp_hash(&mut object);
    if let Some(Value::Object(metadata)) = object.get_mut("metadata")
        && let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
    {
        // Checked with flotilla's own annotations in: the API server limits them all together.
        check_annotations(annotations).map_err(in_object)?;
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

fn string_field(object: &Map<String, Value>, field: &'static str) -> Result<String, PolicyError> {
    match object.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(PolicyError::MissingField(field)),
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

fn check_apply_safe(value: &Value, path: &mut Vec<String>) -> Result<(), ObjectProblem> {
    let refuse = |path: &[String], character: char| {
        Err(ObjectProblem::Unsendable {
            path: path.to_vec(),
            character,
        })
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
fn check_label(key: &str, value: &str) -> Result<(), ObjectProblem> {
    crate::selector::valid_key(key).map_err(ObjectProblem::LabelKey)?;
    crate::selector::valid_value(value)
        .map(drop)
        .map_err(|error| ObjectProblem::LabelValue {
            key: key.to_string(),
            error,
        })
}

/// The API server's limit on all annotations of one object together (keys and values).
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn check_annotations(annotations: &Map<String, Value>) -> Result<(), ObjectProblem> {
    let mut total = 0;
    for (key, value) in annotations {
        crate::selector::valid_key(key).map_err(ObjectProblem::AnnotationKey)?;
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_MAX_BYTES {
        return Err(ObjectProblem::AnnotationsTooBig {
            bytes: total,
            limit: ANNOTATIONS_MAX_BYTES,
        });
    }
    Ok(())
}

/// What needs the whole rendered set, once each object is admitted: a Deployment runs as a
/// ServiceAccount the same render stamps (not `default`, nor one the namespace has for other
/// ends), and a RoleBinding binds a Role the same render stamps, in the same namespace. Returns
/// each refusal with the template it comes from.
pub fn admit_set(objects: &[Stamped]) -> Vec<(String, PolicyError)> {
    let stamped = |kind: Kind, namespace: &str, name: &str| {
        objects
            .iter()
            .any(|o| o.key.kind == kind && o.key.namespace == namespace && o.key.name == name)
    };
    let mut refused = Vec::new();
    for object in objects {
        let problem = match object.key.kind {
            Kind::Deployment => {
                let pod = &object.body["spec"]["template"]["spec"];
                let account = pod["serviceAccountName"].as_str();
                let legacy = &pod["serviceAccount"];
                if !legacy.is_null() && legacy.as_str() != account {
                    Some(ObjectProblem::LegacyServiceAccount(text(legacy)))
                } else if !account
                    .is_some_and(|a| stamped(Kind::ServiceAccount, &object.key.namespace, a))
                {
                    Some(ObjectProblem::ServiceAccountNotStamped {
                        name: account.map(str::to_string),
                        namespace: object.key.namespace.clone(),
                    })
                } else {
                    None
                }
            }
            Kind::RoleBinding => {
                let role = object.body["roleRef"]["name"].as_str().unwrap_or_default();
                (!stamped(Kind::Role, &object.key.namespace, role)).then(|| {
                    ObjectProblem::RoleNotStamped {
                        name: role.to_string(),
                        namespace: object.key.namespace.clone(),
                    }
                })
            }
            _ => None,
        };
        if let Some(problem) = problem {
            let error = PolicyError::InObject {
                object: ObjectName {
                    kind: object.key.kind,
                    name: object.key.name.clone(),
                },
                problem,
            };
            refused.push((object.template.clone(), error));
        }
    }
    refused
}

/// The string map at `metadata.<field>`, created if absent; its values must all be strings.
fn map_field<'m>(
    metadata: &'m mut Map<String, Value>,
    field: &'static str,
) -> Result<&'m mut Map<String, Value>, PolicyError> {
    let entry = metadata
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => match map.iter().find(|(_, v)| !v.is_string()) {
            Some((key, _)) => Err(PolicyError::MetadataValueNotAString {
                field,
                key: key.clone(),
            }),
            None => Ok(map),
        },
        _ => Err(PolicyError::MetadataNotAMapping(field)),
    }
}

/// Names must be DNS subdomains; Services, whose names become DNS labels, must be RFC 1035 labels.
fn check_name(kind: Kind, name: &str) -> Result<(), PolicyError> {
    let subdomain = name.len() <= 253 && name.split('.').all(crate::config::is_dns_label);
    if !subdomain {
        return Err(PolicyError::InvalidName {
            kind,
            name: name.to_string(),
        });
    }
    if kind == Kind::Service
        && !(crate::config::is_dns_label(name)
            && name.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        return Err(PolicyError::InvalidServiceName(name.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
