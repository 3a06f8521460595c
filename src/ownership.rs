//! How flotilla marks what it stamps. The labels are the durable record of ownership: they
//! survive restarts, so reaping never depends on memory of what was applied before.

use std::collections::BTreeMap;

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "flotilla";
/// Which flotilla fleet stamped the object (config `instance`).
pub const INSTANCE: &str = "flotilla.dev/instance";
/// The opted-in namespace the object was stamped for (it may live elsewhere).
pub const FOR_NAMESPACE: &str = "flotilla.dev/namespace";
/// Hash of the templates and values in force; the same across a fleet after a rollout.
pub const REVISION: &str = "flotilla.dev/revision";
/// Hash of this object's rendered content; a change means it must be applied again.
pub const HASH: &str = "flotilla.dev/hash";

/// The label selector of every watch on stamped kinds.
pub fn watch_selector(instance: &str) -> String {
    format!("{MANAGED_BY}={MANAGED_BY_VALUE},{INSTANCE}={instance}")
}

/// Everything that carries this instance's label: what it stamped, and what only claims to be.
pub fn instance_selector(instance: &str) -> String {
    format!("{INSTANCE}={instance}")
}

/// Everything else (`!=` also matches objects without the label).
pub fn foreign_selector(instance: &str) -> String {
    format!("{INSTANCE}!={instance}")
}

/// The labels stamped on every object rendered for `namespace`.
pub fn labels(instance: &str, namespace: &str) -> [(&'static str, String); 3] {
    [
        (MANAGED_BY, MANAGED_BY_VALUE.to_string()),
        (INSTANCE, instance.to_string()),
        (FOR_NAMESPACE, namespace.to_string()),
    ]
}

/// Whether `live`, at a name flotilla renders for `namespace`, is an object flotilla applied
/// whose ownership labels someone removed (a tenant with `edit` can): its managedFields hold a
/// server-side apply by flotilla's `field_manager`, it carries flotilla's content hash, and no
/// label left names another instance or namespace. Without this, a removed label would leave it
/// a Conflict for good, a veto on every rollout.
pub fn applied_by_us(
    live: &serde_json::Value,
    field_manager: &str,
    instance: &str,
    namespace: &str,
) -> bool {
    let metadata = &live["metadata"];
    let applied = metadata["managedFields"].as_array().is_some_and(|fields| {
        fields
            .iter()
            .any(|f| f["manager"] == field_manager && f["operation"] == "Apply")
    });
    let hashed = metadata["annotations"][HASH].is_string();
    let label = |key: &str, ours: &str| {
        let value = &metadata["labels"][key];
        value.is_null() || *value == ours
    };
    applied
        && hashed
        && label(MANAGED_BY, MANAGED_BY_VALUE)
        && label(INSTANCE, instance)
        && label(FOR_NAMESPACE, namespace)
}

/// Who a live object belongs to, as far as flotilla is concerned.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner<'a> {
    /// Stamped by this instance for this namespace.
    Stamped(&'a str),
    /// Not ours: created by someone else, or by another flotilla instance.
    Foreign,
}

pub fn owner<'a>(labels: Option<&'a BTreeMap<String, String>>, instance: &str) -> Owner<'a> {
    let Some(labels) = labels else {
        return Owner::Foreign;
    };
    let ours = labels.get(MANAGED_BY).map(String::as_str) == Some(MANAGED_BY_VALUE)
        && labels.get(INSTANCE).map(String::as_str) == Some(instance);
    match labels.get(FOR_NAMESPACE) {
        Some(ns) if ours => Owner::Stamped(ns),
        _ => Owner::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_instance_with_a_namespace_label_is_ours() {
        let stamped: BTreeMap<String, String> = labels("fleet", "team-a")
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(owner(Some(&stamped), "fleet"), Owner::Stamped("team-a"));
        assert_eq!(owner(Some(&stamped), "other-fleet"), Owner::Foreign);
        let mut no_ns = stamped.clone();
        no_ns.remove(FOR_NAMESPACE);
        assert_eq!(owner(Some(&no_ns), "fleet"), Owner::Foreign);
        assert_eq!(owner(None, "fleet"), Owner::Foreign);
    }

    #[test]
    fn watch_selector_names_instance() {
        assert_eq!(
            watch_selector("x"),
            "app.kubernetes.io/managed-by=flotilla,flotilla.dev/instance=x"
        );
    }
}
