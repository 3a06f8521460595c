//! A revision as data: everything templates render from (the templates, the values, what
//! namespaces may override), kept in an apps/v1 ControllerRevision in flotilla's namespace, named
//! after its hash, numbered in order, labelled with the instance. Any replica renders any
//! namespace at any kept revision from it, without the files that made it.

use crate::config::Config;
use crate::overrides::{Override, OverrideError, OverrideSpec};
use crate::ownership;
use crate::render::{RenderErrors, Renderer};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// When a revision was last made the newest, by the recording replica's clock, to the
/// nanosecond: a replica whose files were read before it may hold stale files. Creation times
/// are whole seconds, too coarse to tell files read within that second.
pub const RECORDED_AT: &str = "flotilla.dev/recorded-at";

/// What one revision renders from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Content {
    /// Template file name -> source.
    pub templates: BTreeMap<String, String>,
    pub values: Map<String, Value>,
    #[serde(default)]
    pub overrides: BTreeMap<String, OverrideSpec>,
}

/// A kept revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub hash: String,
    pub number: i64,
    /// When it was recorded (its ControllerRevision's creation time).
    pub created: Option<String>,
    pub content: Content,
}

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("ControllerRevision {name}: no data or no revision number")]
    NoData { name: String },
    #[error("ControllerRevision {name}: its data is not a flotilla revision: {error}")]
    Data {
        name: String,
        error: serde_json::Error,
    },
    #[error("ControllerRevision {name}: overrides.{key}: {error}")]
    Override {
        name: String,
        key: String,
        error: OverrideError,
    },
    #[error("ControllerRevision {name}: templates:\n{errors}")]
    Templates { name: String, errors: RenderErrors },
    #[error(
        "ControllerRevision {name}: its content hashes to {actual}, not to the hash it is named after; it is not used"
    )]
    Hash { name: String, actual: String },
}

impl Content {
    /// The config's values and overrides with `templates` (file name, source).
    pub fn of(config: &Config, templates: &[(String, String)]) -> Content {
        Content {
            templates: templates.iter().cloned().collect(),
            values: config.values.clone(),
            overrides: config.override_specs.clone(),
        }
    }

    /// What changed from `older`: template files, values and override keys, by name.
    pub fn changes_from(&self, older: &Content) -> Vec<String> {
        let mut changed = Vec::new();
        keys_changed(&older.templates, &self.templates, "", &mut changed);
        let values = |m: &Map<String, Value>| -> BTreeMap<String, Value> {
            let mut flat = BTreeMap::new();
            flatten("values", &Value::Object(m.clone()), &mut flat);
            flat
        };
        keys_changed(
            &values(&older.values),
            &values(&self.values),
            "",
            &mut changed,
        );
        keys_changed(
            &older.overrides,
            &self.overrides,
            "overrides.",
            &mut changed,
        );
        changed
    }
}

fn keys_changed<V: PartialEq>(
    old: &BTreeMap<String, V>,
    new: &BTreeMap<String, V>,
    prefix: &str,
    changed: &mut Vec<String>,
) {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        if old.get(key) != new.get(key) {
            changed.push(format!("{prefix}{key}"));
        }
    }
}

/// `values.a.b` -> leaf, so that a change names the value that changed.
fn flatten(path: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                flatten(&format!("{path}.{key}"), inner, out);
            }
        }
        leaf => {
            out.insert(path.to_string(), leaf.clone());
        }
    }
}

/// The ControllerRevision's name for revision `hash` of `instance`.
pub fn object_name(instance: &str, hash: &str) -> String {
    format!("{instance}-{hash}")
}

/// The ControllerRevision that keeps `content` as revision `number` (hash `hash`).
pub fn controller_revision(
    config: &Config,
    hash: &str,
    number: i64,
    content: &Content,
) -> ControllerRevision {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    labels.insert(ownership::INSTANCE.to_string(), config.instance.clone());
    labels.insert(
        ownership::MANAGED_BY.to_string(),
        ownership::MANAGED_BY_VALUE.into(),
    );
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(object_name(&config.instance, hash)),
            namespace: Some(config.namespace.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        // A map of strings and JSON values always serializes.
        data: RawExtension(serde_json::to_value(content).unwrap_or_default()),
        revision: Some(number),
    }
}

/// Marks `object` as made the newest at `at`.
pub fn mark_recorded(object: &mut ControllerRevision, at: Timestamp) {
    object
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(RECORDED_AT.into(), at.to_string());
}

/// When `object` was last made the newest: its mark, else (recorded by a flotilla that did not
/// mark it) the end of its creation second, the latest it can have been.
pub fn recorded_at(object: &ControllerRevision) -> Option<Timestamp> {
    let marked = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECORDED_AT))
        .and_then(|at| at.parse().ok());
    marked.or_else(|| {
        let created = object.metadata.creation_timestamp.as_ref()?.0;
        created.checked_add(SignedDuration::from_secs(1)).ok()
    })
}

/// Reads a ControllerRevision of `config`'s instance.
pub fn read(object: &ControllerRevision) -> Result<Stored, RevisionError> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let data = &object.data;
    if data.0.is_null() {
        return Err(RevisionError::NoData { name });
    }
    let number = object
        .revision
        .ok_or_else(|| RevisionError::NoData { name: name.clone() })?;
    let content: Content =
        serde_json::from_value(data.0.clone()).map_err(|error| RevisionError::Data {
            name: name.clone(),
            error,
        })?;
    let hash = name.rsplit('-').next().unwrap_or_default().to_string();
    Ok(Stored {
        hash,
        number,
        created: object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        content,
    })
}

impl Stored {
    /// Compiles the revision's templates with `config`'s instance, namespace and policy, and
    /// checks that they are what its name says.
    pub fn renderer(&self, config: &Config) -> Result<Renderer, RevisionError> {
        let name = object_name(&config.instance, &self.hash);
        let mut at = config.clone();
        at.values = self.content.values.clone();
        at.override_specs = self.content.overrides.clone();
        at.overrides = self
            .content
            .overrides
            .iter()
            .map(|(key, spec)| {
                Override::new(key, spec.clone(), &at.values).map_err(|error| {
                    RevisionError::Override {
                        name: name.clone(),
                        key: key.clone(),
                        error,
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        let sources = self
            .content
            .templates
            .iter()
            .map(|(f, s)| (f.clone(), s.clone()))
            .collect();
        let renderer = Renderer::new(sources, &at).map_err(|errors| RevisionError::Templates {
            name: name.clone(),
            errors,
        })?;
        if renderer.revision() != self.hash {
            return Err(RevisionError::Hash {
                name,
                actual: renderer.revision().to_string(),
            });
        }
        Ok(renderer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Config {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        let text = "values:\n  image: a:1\n  limits:\n    cpu: '1'\noverrides:\n  limits.cpu:\n    type: quantity\n";
        Config::parse(text, &dir.path().join("flotilla.yaml")).unwrap()
    }

    const TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {{ namespace.name }}\ndata:\n  image: {{ values.image }}\n";

    #[test]
    fn a_stored_revision_renders_as_the_files_it_came_from() {
        let config = config();
        let templates = vec![("cm.yaml".to_string(), TEMPLATE.to_string())];
        let from_files = Renderer::new(templates.clone(), &config).unwrap();
        let content = Content::of(&config, &templates);
        let object = controller_revision(&config, from_files.revision(), 3, &content);
        assert_eq!(
            object.metadata.name.as_deref(),
            Some(format!("flotilla-{}", from_files.revision()).as_str())
        );
        // Through the API as JSON, and back.
        let object: ControllerRevision =
            serde_json::from_value(serde_json::to_value(&object).unwrap()).unwrap();
        let stored = read(&object).unwrap();
        assert_eq!((stored.number, stored.content.clone()), (3, content));
        // Rendered with other values on disk: the stored ones count.
        let mut later = config.clone();
        later.values.insert("image".into(), json!("b:2"));
        let renderer = stored.renderer(&later).unwrap();
        assert_eq!(renderer.revision(), from_files.revision());
        let ns = crate::render::NamespaceInput {
            name: "team-a".into(),
            ..Default::default()
        };
        assert_eq!(
            renderer.render(&ns).unwrap()[0].body["data"]["image"],
            "a:1"
        );
    }

    #[test]
    fn a_revision_whose_content_is_not_its_name_is_refused() {
        let config = config();
        let templates = vec![("cm.yaml".to_string(), TEMPLATE.to_string())];
        let content = Content::of(&config, &templates);
        let object = controller_revision(&config, "0123456789abcdef", 1, &content);
        let Err(error) = read(&object).unwrap().renderer(&config) else {
            panic!("a revision not named after its content is used");
        };
        assert!(
            error
                .to_string()
                .contains("not to the hash it is named after"),
            "{error}"
        );
        let mut empty = object.clone();
        empty.data = RawExtension(json!({"spec": 1}));
        assert!(matches!(read(&empty), Err(RevisionError::Data { .. })));
    }

    #[test]
    fn changes_name_files_values_and_overrides() {
        let config = config();
        let old = Content::of(&config, &[("a.yaml".into(), "x".into())]);
        let mut new = old.clone();
        new.templates.insert("a.yaml".into(), "y".into());
        new.templates.insert("b.yaml".into(), "z".into());
        new.values.insert("image".into(), json!("a:2"));
        new.overrides.clear();
        assert_eq!(
            new.changes_from(&old),
            ["a.yaml", "b.yaml", "values.image", "overrides.limits.cpu"]
        );
        assert!(old.changes_from(&old).is_empty());
    }
}
