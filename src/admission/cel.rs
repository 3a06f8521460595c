//! CEL text for the admission policy, built from values: string literals, a label selector on
//! the request's namespace, the pinned content of Roles and RoleBindings, and the render
//! policy's pod rules. Only the core of CEL (`has`, `in`, `all`, `size`, comparisons), which
//! every API server from 1.30 evaluates alike.

use super::Pattern;
use kube::core::{Expression, Selector};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;

/// `text` as a CEL string literal. Everything outside printable ASCII is escaped, so the literal
/// stays one line of plain text in the YAML it is written into.
pub fn lit(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// A CEL list of string literals.
pub fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(lit).collect();
    format!("[{}]", items.join(", "))
}

/// `parts` joined by `&&`, each on a line of its own; `true` when there are none.
pub fn all(parts: &[String]) -> String {
    join(parts, "&&", "true")
}

/// `parts` joined by `||`; `false` when there are none.
pub fn any(parts: &[String]) -> String {
    join(parts, "||", "false")
}

fn join(parts: &[String], operator: &str, empty: &str) -> String {
    match parts {
        [] => empty.into(),
        [one] => one.clone(),
        _ => parts
            .iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(&format!("\n{operator} ")),
    }
}

/// Whether the labels at `labels` (a map that may be absent) match `selector`, with Kubernetes'
/// meaning: `!=` and `notin` also match a namespace without the label.
pub fn selector(labels: &str, selector: &Selector) -> String {
    let present = |key: &str| format!("has({labels}) && {} in {labels}", lit(key));
    let value = |key: &str| format!("{labels}[{}]", lit(key));
    let parts: Vec<String> = selector
        .clone()
        .into_iter()
        .map(|expression| match expression {
            Expression::Equal(key, v) => {
                format!("{} && {} == {}", present(&key), value(&key), lit(&v))
            }
            Expression::NotEqual(key, v) => {
                format!("!({} && {} == {})", present(&key), value(&key), lit(&v))
            }
            Expression::In(key, values) => {
                format!("{} && {} in {}", present(&key), value(&key), set(&values))
            }
            Expression::NotIn(key, values) => {
                format!(
                    "!({} && {} in {})",
                    present(&key),
                    value(&key),
                    set(&values)
                )
            }
            Expression::Exists(key) => present(&key),
            Expression::DoesNotExist(key) => format!("!({})", present(&key)),
        })
        .collect();
    all(&parts)
}

fn set(values: &BTreeSet<String>) -> String {
    list(values.iter().map(String::as_str))
}

/// Whether the value at `path` (present) is `pattern`: a scalar, or a list of scalars.
fn equals(path: &str, pattern: &Pattern) -> String {
    match pattern {
        Pattern::Namespace => format!("{path} == request.namespace"),
        Pattern::Value(Value::String(s)) => format!("{path} == {}", lit(s)),
        Pattern::Value(other) => format!("{path} == {other}"),
        Pattern::List(items)
            if items
                .iter()
                .all(|i| matches!(i, Pattern::Value(Value::String(_)))) =>
        {
            let strings = items.iter().filter_map(|i| match i {
                Pattern::Value(Value::String(s)) => Some(s.as_str()),
                _ => None,
            });
            format!("{path} == {}", list(strings))
        }
        Pattern::List(items) => {
            let mut parts = vec![format!("{path}.size() == {}", items.len())];
            parts.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| equals(&format!("{path}[{i}]"), item)),
            );
            parts.join(" && ")
        }
        // Maps are compared field by field with their shape (`object`).
        Pattern::Map(_) => "false".into(),
    }
}

/// Whether the object at `path` (present) holds exactly `pattern` in each of `fields`: a field
/// the pattern lacks must be absent or empty, as the API server stores an empty one.
pub fn object(path: &str, pattern: &Pattern, fields: &[&str]) -> String {
    let Pattern::Map(map) = pattern else {
        return "false".into();
    };
    let parts: Vec<String> = fields
        .iter()
        .map(|field| {
            let at = format!("{path}.{field}");
            match map.get(*field) {
                Some(value) => format!("has({at}) && {}", equals(&at, value)),
                None => format!("!has({at}) || {at}.size() == 0"),
            }
        })
        .map(|p| format!("({p})"))
        .collect();
    parts.join(" && ")
}

/// Whether the list at `at` (which may be absent) holds exactly the objects of `pattern`, in
/// order.
pub fn objects(at: &str, pattern: Option<&Pattern>, fields: &[&str]) -> String {
    let items = match pattern {
        Some(Pattern::List(items)) if !items.is_empty() => items,
        _ => return none(at),
    };
    let mut parts = vec![format!("has({at}) && {at}.size() == {}", items.len())];
    parts.extend(
        items
            .iter()
            .enumerate()
            .map(|(i, item)| object(&format!("{at}[{i}]"), item, fields)),
    );
    parts.join("\n  && ")
}

/// Not null and not `false`, for an optional boolean field.
fn unset_or_false(path: &str) -> String {
    format!("!has({path}) || !{path}")
}

/// Absent or empty, for an optional list field.
fn none(path: &str) -> String {
    format!("!has({path}) || {path}.size() == 0")
}

/// The render policy's pod rules (`render::policy::kinds::check_pod_spec`) on the pod spec at
/// `pod`, one expression each, with the message the API server answers when it fails.
pub fn pod_rules(pod: &str) -> Vec<(String, &'static str)> {
    let context = format!("{pod}.securityContext");
    let mut rules: Vec<(String, &'static str)> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .map(|field| {
            (
                unset_or_false(&format!("{pod}.{field}")),
                "a stamped pod may not share the node's network, PIDs or IPC",
            )
        })
        .collect();
    rules.push((
        format!("!has({pod}.volumes) || {pod}.volumes.all(v, !has(v.hostPath))"),
        "a stamped pod may not mount the node's files (hostPath)",
    ));
    rules.push((
        format!("!has({context}) || {}", none(&format!("{context}.sysctls"))),
        "a stamped pod may not tune the node's kernel (sysctls)",
    ));
    rules.push((
        format!(
            "!has({context}) || !has({context}.seccompProfile) || {context}.seccompProfile.type != \"Unconfined\""
        ),
        "a stamped pod keeps the runtime's system call filter (no seccomp profile Unconfined)",
    ));
    let container = [
        (
            "has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && c.securityContext.allowPrivilegeEscalation == false".to_string(),
            "a stamped container sets allowPrivilegeEscalation: false",
        ),
        (
            format!("!has(c.securityContext) || {}", unset_or_false("c.securityContext.privileged")),
            "a stamped container may not be privileged",
        ),
        (
            format!(
                "!has(c.securityContext) || !has(c.securityContext.capabilities) || {}",
                none("c.securityContext.capabilities.add")
            ),
            "a stamped container may only drop capabilities",
        ),
        (
            "!has(c.securityContext) || !has(c.securityContext.seccompProfile) || c.securityContext.seccompProfile.type != \"Unconfined\"".to_string(),
            "a stamped container keeps the runtime's system call filter (no seccomp profile Unconfined)",
        ),
        (
            "!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)".to_string(),
            "a stamped container may not take a port of the node (hostPort)",
        ),
    ];
    for (check, message) in container {
        let lists: Vec<String> = ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .map(|list| format!("!has({pod}.{list}) || {pod}.{list}.all(c, {check})"))
            .collect();
        rules.push((all(&lists), message));
    }
    rules
}
