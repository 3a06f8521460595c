//! What `flotilla diff` shows: the live object against the object as it would be after apply,
//! both reduced to the fields a person edits, as a unified diff of their YAML.

use serde_json::Value;
use similar::TextDiff;

/// Bookkeeping the server changes on every write; showing it would hide the real change.
const NOISE: [&str; 6] = [
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
];

fn normalize(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            for field in NOISE {
                metadata.remove(field);
            }
        }
    }
    object
}

fn yaml(object: Option<&Value>) -> String {
    object
        .map(|o| serde_saphyr::to_string(&normalize(o)).unwrap_or_else(|e| format!("# {e}\n")))
        .unwrap_or_default()
}

/// A unified diff from `live` to `after` (`None`: absent), or `None` when they are the same.
pub fn unified(title: &str, live: Option<&Value>, after: Option<&Value>) -> Option<String> {
    let (old, new) = (yaml(live), yaml(after));
    if old == new {
        return None;
    }
    let diff = TextDiff::from_lines(&old, &new);
    let (from, to) = (format!("live/{title}"), format!("applied/{title}"));
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header(&from, &to)
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_bookkeeping_is_no_difference() {
        let live = json!({"metadata": {"name": "c", "resourceVersion": "1", "managedFields": [{}]}, "data": {"k": "v"}, "status": {"x": 1}});
        let after = json!({"metadata": {"name": "c", "resourceVersion": "2"}, "data": {"k": "v"}});
        assert_eq!(unified("ConfigMap a/c", Some(&live), Some(&after)), None);
    }

    #[test]
    fn a_changed_field_shows_as_a_unified_diff() {
        let live = json!({"metadata": {"name": "d"}, "spec": {"image": "evil:1", "replicas": 1}});
        let after = json!({"metadata": {"name": "d"}, "spec": {"image": "good:1", "replicas": 1}});
        let diff = unified("Deployment a/d", Some(&live), Some(&after)).unwrap();
        assert!(
            diff.starts_with("--- live/Deployment a/d\n+++ applied/Deployment a/d\n"),
            "{diff}"
        );
        assert!(
            diff.contains("-  image: evil:1\n+  image: good:1\n"),
            "{diff}"
        );
    }

    #[test]
    fn creation_and_removal_are_whole_object_diffs() {
        let obj = json!({"metadata": {"name": "c"}});
        assert!(
            unified("x", None, Some(&obj))
                .unwrap()
                .contains("+metadata:")
        );
        assert!(
            unified("x", Some(&obj), None)
                .unwrap()
                .contains("-metadata:")
        );
    }
}
