//! Per-namespace overrides: an admin sets a value for one namespace with an annotation
//! `override.flotilla.dev/<key>` on the Namespace. Only keys the config declares overridable
//! are accepted, each checked against its declared type and bounds; anything else is refused
//! with a message naming the annotation, and the namespace keeps what it has.

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::LazyLock;

pub const ANNOTATION_PREFIX: &str = "override.flotilla.dev/";

static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$")
        .expect("a valid regex")
});

/// One overridable key as written in the config's `overrides` map.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideSpec {
    #[serde(rename = "type")]
    pub value_type: ValueType,
    /// Strings: the whole value must match (the pattern is anchored).
    pub pattern: Option<String>,
    /// Strings: the value must be one of these.
    #[serde(rename = "enum")]
    pub one_of: Option<Vec<String>>,
    /// Integers: inclusive bounds.
    pub minimum: Option<i64>,
    pub maximum: Option<i64>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ValueType {
    String,
    Integer,
    Boolean,
    /// A Kubernetes quantity such as `500m` or `1Gi`, kept as a string.
    Quantity,
}

/// A validated, ready-to-use override declaration.
#[derive(Debug, Clone)]
pub struct Override {
    pub key: String,
    path: Vec<String>,
    spec: OverrideSpec,
    pattern: Option<Regex>,
}

impl Override {
    /// Checks a declaration against the values it overrides: the key must name an existing
    /// value (a dotted path into `values`) and make a valid annotation key.
    pub fn new(
        key: &str,
        spec: OverrideSpec,
        values: &Map<String, Value>,
    ) -> Result<Override, String> {
        let annotation = format!("{ANNOTATION_PREFIX}{key}");
        crate::selector::valid_key(&annotation).map_err(|e| format!("overrides.{key}: {e}"))?;
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        if lookup(values, &path).is_none() {
            return Err(format!(
                "overrides.{key}: there is no values.{key} to override"
            ));
        }
        let pattern = spec
            .pattern
            .as_deref()
            .map(|p| Regex::new(&format!("^(?:{p})$")))
            .transpose()
            .map_err(|e| format!("overrides.{key}.pattern: {e}"))?;
        let string_only = spec.pattern.is_some() || spec.one_of.is_some();
        if string_only && spec.value_type != ValueType::String {
            return Err(format!(
                "overrides.{key}: pattern and enum apply to type string only"
            ));
        }
        let bounded = spec.minimum.is_some() || spec.maximum.is_some();
        if bounded && spec.value_type != ValueType::Integer {
            return Err(format!(
                "overrides.{key}: minimum and maximum apply to type integer only"
            ));
        }
        Ok(Override {
            key: key.to_string(),
            path,
            spec,
            pattern,
        })
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        let spec = &self.spec;
        match spec.value_type {
            ValueType::String => {
                if let Some(pattern) = &self.pattern
                    && !pattern.is_match(raw)
                {
                    return Err(format!(
                        "{} does not match the allowed pattern {:?}",
                        shown(raw),
                        spec.pattern.as_deref().unwrap_or_default()
                    ));
                }
                if let Some(one_of) = &spec.one_of
                    && !one_of.iter().any(|v| v == raw)
                {
                    return Err(format!("{} is not one of {one_of:?}", shown(raw)));
                }
                Ok(Value::String(raw.to_string()))
            }
            ValueType::Integer => {
                let n: i64 = raw
                    .trim()
                    .parse()
                    .map_err(|_| format!("{} is not an integer", shown(raw)))?;
                if let Some(min) = spec.minimum
                    && n < min
                {
                    return Err(format!("{n} is below the minimum {min}"));
                }
                if let Some(max) = spec.maximum
                    && n > max
                {
                    return Err(format!("{n} is above the maximum {max}"));
                }
                Ok(Value::from(n))
            }
            ValueType::Boolean => match raw.trim() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("{} is not true or false", shown(raw))),
            },
            ValueType::Quantity => {
                if QUANTITY.is_match(raw) {
                    Ok(Value::String(raw.to_string()))
                } else {
                    Err(format!(
                        "{} is not a Kubernetes quantity (like 500m or 1Gi)",
                        shown(raw)
                    ))
                }
            }
        }
    }
}

/// A value as messages quote it: at most 100 characters, so that a 256 KiB annotation does not
/// end up whole in the NamespaceWorker's status, an Event and the log.
fn shown(raw: &str) -> String {
    const MAX: usize = 100;
    if raw.chars().count() <= MAX {
        return format!("{raw:?}");
    }
    let head: String = raw.chars().take(MAX).collect();
    format!("{head:?}… ({} bytes)", raw.len())
}

fn lookup<'v>(values: &'v Map<String, Value>, path: &[String]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(values.get(first)?, |v, key| v.as_object()?.get(key))
}

fn lookup_mut<'v>(values: &'v mut Map<String, Value>, path: &[String]) -> Option<&'v mut Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(values.get_mut(first)?, |v, key| {
        v.as_object_mut()?.get_mut(key)
    })
}

/// The values for one namespace: the config's, with that namespace's valid overrides applied.
/// Every problem is reported, as `(annotation, message)`.
pub fn apply(
    values: &Map<String, Value>,
    declared: &[Override],
    annotations: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, Vec<(String, String)>> {
    let mut result = values.clone();
    let mut errors = Vec::new();
    for (annotation, raw) in annotations {
        let Some(key) = annotation.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        let Some(declaration) = declared.iter().find(|o| o.key == key) else {
            let allowed: Vec<&str> = declared.iter().map(|o| o.key.as_str()).collect();
            errors.push((
                annotation.clone(),
                format!(
                    "{} is not overridable (the config allows: {})",
                    shown(key),
                    list(&allowed)
                ),
            ));
            continue;
        };
        match declaration.parse(raw) {
            Ok(value) => {
                if let Some(slot) = lookup_mut(&mut result, &declaration.path) {
                    *slot = value;
                }
            }
            Err(message) => errors.push((annotation.clone(), message)),
        }
    }
    if errors.is_empty() {
        Ok(result)
    } else {
        Err(errors)
    }
}

fn list(keys: &[&str]) -> String {
    if keys.is_empty() {
        "nothing".into()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values() -> Map<String, Value> {
        json!({
            "controllerImage": "quay.io/argoproj/workflow-controller:v4.1.2",
            "parallelism": 50,
            "debug": false,
            "resources": {"limits": {"memory": "512Mi"}},
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn declared() -> Vec<Override> {
        let specs = json!({
            "controllerImage": {"type": "string", "pattern": r"quay\.io/argoproj/workflow-controller:v[0-9.]+(-rc[0-9]+)?"},
            "parallelism": {"type": "integer", "minimum": 1, "maximum": 500},
            "debug": {"type": "boolean"},
            "resources.limits.memory": {"type": "quantity"},
        });
        specs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, s)| {
                Override::new(k, serde_json::from_value(s.clone()).unwrap(), &values()).unwrap()
            })
            .collect()
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn accepted_overrides_replace_only_their_value() {
        let result = apply(
            &values(),
            &declared(),
            &annotations(&[
                (
                    "controllerImage",
                    "quay.io/argoproj/workflow-controller:v4.1.3-rc1",
                ),
                ("parallelism", "200"),
                ("debug", "true"),
                ("resources.limits.memory", "1Gi"),
            ]),
        )
        .unwrap();
        assert_eq!(
            result["controllerImage"],
            "quay.io/argoproj/workflow-controller:v4.1.3-rc1"
        );
        assert_eq!(result["parallelism"], 200);
        assert_eq!(result["debug"], true);
        assert_eq!(result["resources"]["limits"]["memory"], "1Gi");
        let mut unrelated = BTreeMap::new();
        unrelated.insert("example.com/other".to_string(), "x".to_string());
        assert_eq!(apply(&values(), &declared(), &unrelated).unwrap(), values());
    }

    #[test]
    fn rejected_overrides_name_the_annotation_and_the_problem() {
        let errors = apply(
            &values(),
            &declared(),
            &annotations(&[
                ("controllerImage", "evil.example/controller:latest"),
                ("parallelism", "lots"),
                ("debug", "yes"),
                ("resources.limits.memory", "a lot"),
                ("executorImage", "x"),
            ]),
        )
        .unwrap_err();
        let text: Vec<String> = errors.iter().map(|(a, m)| format!("{a}: {m}")).collect();
        let expect = [
            "override.flotilla.dev/controllerImage: \"evil.example/controller:latest\" does not match",
            "override.flotilla.dev/debug: \"yes\" is not true or false",
            "override.flotilla.dev/executorImage: \"executorImage\" is not overridable (the config allows: controllerImage, debug, parallelism, resources.limits.memory)",
            "override.flotilla.dev/parallelism: \"lots\" is not an integer",
            "override.flotilla.dev/resources.limits.memory: \"a lot\" is not a Kubernetes quantity",
        ];
        assert_eq!(text.len(), expect.len(), "{text:#?}");
        for (got, want) in text.iter().zip(expect) {
            assert!(got.starts_with(want), "{got}\n  !~ {want}");
        }
        let errors = apply(
            &values(),
            &declared(),
            &annotations(&[("parallelism", "5000")]),
        )
        .unwrap_err();
        assert!(errors[0].1.contains("above the maximum 500"), "{errors:?}");
    }

    #[test]
    fn only_the_declared_key_itself_is_overridable() {
        // Not a parent of a declared key (which would replace the whole map and its bounds), not
        // a child of one, not a lookalike, not a value that is not declared at all.
        for key in [
            "resources",
            "resources.limits",
            "resources.limits.memory.extra",
            "controllerimage",
            "controllerImage ",
            "workflowDefaults.spec.serviceAccountName",
        ] {
            let errors = apply(&values(), &declared(), &annotations(&[(key, "x")])).unwrap_err();
            assert_eq!(errors.len(), 1, "{key}: {errors:?}");
            assert!(
                errors[0].1.contains("is not overridable"),
                "{key}: {errors:?}"
            );
        }
        // With nothing declared, nothing is overridable, and the message says so.
        let errors = apply(&values(), &[], &annotations(&[("parallelism", "1")])).unwrap_err();
        assert!(
            errors[0].1.ends_with("(the config allows: nothing)"),
            "{errors:?}"
        );
    }

    #[test]
    fn patterns_bind_the_whole_value() {
        for evil in [
            "evil.example/argoproj/workflow-controller:v4.1.2",
            "quay.io.evil.example/argoproj/workflow-controller:v4.1.2",
            "quay.io/argoproj/workflow-controller:v4.1.2@sha256:0000",
            "quay.io/argoproj/workflow-controller:v4.1.2\n",
            "quay.io/argoproj/workflow-controller:v4.1.2\nimage: evil/x",
            "x quay.io/argoproj/workflow-controller:v4.1.2",
            "quay.io/argoproj/workflow-controller:latest",
            "",
        ] {
            let errors = apply(
                &values(),
                &declared(),
                &annotations(&[("controllerImage", evil)]),
            )
            .expect_err(evil);
            assert!(
                errors[0].1.contains("does not match"),
                "{evil:?}: {errors:?}"
            );
        }
    }

    #[test]
    fn typed_values_refuse_near_misses() {
        for (key, raw, needle) in [
            ("parallelism", "5; rm -rf /", "not an integer"),
            ("parallelism", "1e3", "not an integer"),
            ("parallelism", "0", "below the minimum 1"),
            ("parallelism", "-1", "below the minimum 1"),
            ("parallelism", "99999999999999999999", "not an integer"),
            ("debug", "True", "not true or false"),
            ("debug", "1", "not true or false"),
            ("resources.limits.memory", "", "not a Kubernetes quantity"),
            (
                "resources.limits.memory",
                "1Gi\n",
                "not a Kubernetes quantity",
            ),
            (
                "resources.limits.memory",
                "-1Gi",
                "not a Kubernetes quantity",
            ),
            (
                "resources.limits.memory",
                "{\"a\": 1}",
                "not a Kubernetes quantity",
            ),
        ] {
            let errors = apply(&values(), &declared(), &annotations(&[(key, raw)])).expect_err(raw);
            assert!(errors[0].1.contains(needle), "{key}={raw:?}: {errors:?}");
        }
    }

    #[test]
    fn messages_quote_at_most_a_little_of_a_huge_value() {
        let huge = "q".repeat(256 * 1024);
        let errors = apply(
            &values(),
            &declared(),
            &annotations(&[("controllerImage", &huge), (&huge[..200], "x")]),
        )
        .unwrap_err();
        for (_, message) in &errors {
            assert!(message.len() < 400, "{} bytes", message.len());
            assert!(
                message.contains("(262144 bytes)") || message.contains("(200 bytes)"),
                "{message}"
            );
        }
    }

    #[test]
    fn declarations_are_checked_against_values() {
        let spec = |v: Value| serde_json::from_value::<OverrideSpec>(v).unwrap();
        let err = Override::new("nope", spec(json!({"type": "string"})), &values()).unwrap_err();
        assert!(err.contains("no values.nope"), "{err}");
        let err = Override::new(
            "parallelism",
            spec(json!({"type": "integer", "pattern": "x"})),
            &values(),
        )
        .unwrap_err();
        assert!(err.contains("type string only"), "{err}");
        let err = Override::new(
            "controllerImage",
            spec(json!({"type": "string", "pattern": "("})),
            &values(),
        )
        .unwrap_err();
        assert!(err.contains("pattern"), "{err}");
    }
}
