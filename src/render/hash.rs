//! Content hashes: a fleet-wide revision of templates and values, and a per-object hash.

use crate::overrides::OverrideSpec;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Hex of the first 8 bytes of a SHA-256: short enough for a kubectl column, long enough that
/// two revisions of one fleet never collide in practice.
fn short_hash(digest: Sha256) -> String {
    digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The revision of everything templates are rendered from, except the namespace itself: the
/// templates, the values, and what namespaces may override.
pub fn revision<'a>(
    templates: impl IntoIterator<Item = (&'a str, &'a str)>,
    values: &serde_json::Map<String, serde_json::Value>,
    overrides: &BTreeMap<String, OverrideSpec>,
    instance: &str,
    own_namespace: &str,
) -> String {
    let mut digest = Sha256::new();
    for (name, source) in templates {
        for part in [name, source] {
            digest.update(part.len().to_le_bytes());
            digest.update(part.as_bytes());
        }
    }
    digest.update(serde_json::Value::Object(values.clone()).to_string());
    digest.update([0]);
    // A map serializes in key order: the same declarations always hash the same.
    digest.update(serde_json::to_string(overrides).unwrap_or_default());
    digest.update([0]);
    digest.update(instance);
    digest.update([0]);
    digest.update(own_namespace);
    short_hash(digest)
}

/// The hash of one rendered object's JSON.
pub fn object_hash(body: &serde_json::Value) -> String {
    short_hash(Sha256::new_with_prefix(body.to_string()))
}

/// Hashes `object` as it is without its hash annotation, and sets that annotation to the
/// hash (an object without `metadata.annotations` is hashed and left as it is).
pub fn stamp_hash(object: &mut serde_json::Map<String, serde_json::Value>) -> String {
    fn annotations(
        object: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Option<&mut serde_json::Map<String, serde_json::Value>> {
        object
            .get_mut("metadata")?
            .get_mut("annotations")?
            .as_object_mut()
    }
    if let Some(a) = annotations(object) {
        a.remove(crate::ownership::HASH);
    }
    let hash = object_hash(&serde_json::Value::Object(object.clone()));
    if let Some(a) = annotations(object) {
        a.insert(crate::ownership::HASH.into(), hash.clone().into());
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revision_changes_with_any_input() {
        let values = serde_json::Map::new();
        let none = BTreeMap::new();
        let revision = |t, v, i, n| super::revision(t, v, &none, i, n);
        let base = revision([("a.yaml", "x")], &values, "i", "ns");
        assert_eq!(base.len(), 16);
        assert_eq!(base, revision([("a.yaml", "x")], &values, "i", "ns"));
        assert_ne!(base, revision([("a.yaml", "y")], &values, "i", "ns"));
        assert_ne!(base, revision([("b.yaml", "x")], &values, "i", "ns"));
        // Boundaries between name and source are part of the hash.
        assert_ne!(base, revision([("a.yamlx", "")], &values, "i", "ns"));
        let mut other = values.clone();
        other.insert("k".into(), json!(1));
        assert_ne!(base, revision([("a.yaml", "x")], &other, "i", "ns"));
        assert_ne!(base, revision([("a.yaml", "x")], &values, "j", "ns"));
        let spec: OverrideSpec = serde_json::from_value(json!({"type": "integer"})).unwrap();
        let overridable = BTreeMap::from([("k".to_string(), spec)]);
        assert_ne!(
            base,
            super::revision([("a.yaml", "x")], &values, &overridable, "i", "ns"),
            "what may be overridden is part of the revision"
        );
    }

    #[test]
    fn object_hash_follows_content() {
        assert_eq!(object_hash(&json!({"a": 1})), object_hash(&json!({"a": 1})));
        assert_ne!(object_hash(&json!({"a": 1})), object_hash(&json!({"a": 2})));
    }
}
