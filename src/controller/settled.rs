//! Namespaces found fully in sync, remembered by a fingerprint of what the watches showed then
//! (the Namespace's resourceVersion, every stamped object's, the NamespaceWorker's). While the
//! fingerprint is unchanged nothing about the namespace has changed, so a reconcile (typically a
//! periodic resync) has nothing to do: not even rendering. Pure bookkeeping, no I/O.

use super::index::Observed;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

#[derive(Default)]
pub struct Settled {
    namespaces: HashMap<String, Entry>,
}

struct Entry {
    fingerprint: u64,
    /// A status deadline (Progressing -> Degraded): after it the namespace must be looked at.
    until: Option<Instant>,
}

/// What the watches show of one namespace, as a number.
pub fn fingerprint(
    namespace_version: Option<&str>,
    observed: &[Observed],
    worker_version: Option<&str>,
) -> u64 {
    let mut versions: Vec<(&Observed, Option<&str>)> = observed
        .iter()
        .map(|o| (o, o.resource_version.as_deref()))
        .collect();
    versions.sort_by(|a, b| a.0.key.cmp(&b.0.key));
    let mut hasher = DefaultHasher::new();
    namespace_version.hash(&mut hasher);
    worker_version.hash(&mut hasher);
    for (o, version) in versions {
        (&o.key, &o.uid, version).hash(&mut hasher);
    }
    hasher.finish()
}

impl Settled {
    /// Whether `namespace` was settled with this fingerprint, and its deadline has not passed.
    pub fn still(&self, namespace: &str, fingerprint: u64, now: Instant) -> bool {
        self.namespaces.get(namespace).is_some_and(|e| {
            e.fingerprint == fingerprint && e.until.is_none_or(|until| now < until)
        })
    }

    pub fn settle(&mut self, namespace: &str, fingerprint: u64, until: Option<Instant>) {
        let entry = Entry { fingerprint, until };
        self.namespaces.insert(namespace.to_string(), entry);
    }

    pub fn unsettle(&mut self, namespace: &str) {
        self.namespaces.remove(namespace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;
    use crate::object::ObjectKey;
    use std::time::Duration;

    fn observed(name: &str, rv: &str) -> Observed {
        Observed {
            key: ObjectKey {
                kind: Kind::ConfigMap,
                namespace: "a".into(),
                name: name.into(),
            },
            uid: Some(format!("uid-{name}")),
            resource_version: Some(rv.into()),
            stamped_for: "a".into(),
            hash: None,
        }
    }

    #[test]
    fn any_change_of_version_changes_the_fingerprint_and_order_does_not() {
        let objects = [observed("x", "1"), observed("y", "2")];
        let base = fingerprint(Some("10"), &objects, Some("20"));
        let reversed = [observed("y", "2"), observed("x", "1")];
        assert_eq!(base, fingerprint(Some("10"), &reversed, Some("20")));
        assert_ne!(base, fingerprint(Some("11"), &objects, Some("20")));
        assert_ne!(base, fingerprint(Some("10"), &objects, None));
        let edited = [observed("x", "1"), observed("y", "3")];
        assert_ne!(base, fingerprint(Some("10"), &edited, Some("20")));
        assert_ne!(base, fingerprint(Some("10"), &objects[..1], Some("20")));
    }

    #[test]
    fn settled_until_the_fingerprint_changes_or_the_deadline_passes() {
        let mut settled = Settled::default();
        let now = Instant::now();
        assert!(!settled.still("a", 1, now));
        settled.settle("a", 1, None);
        assert!(settled.still("a", 1, now));
        assert!(!settled.still("a", 2, now));
        assert!(!settled.still("b", 1, now));
        settled.settle("a", 1, Some(now + Duration::from_secs(5)));
        assert!(settled.still("a", 1, now));
        assert!(!settled.still("a", 1, now + Duration::from_secs(5)));
        settled.unsettle("a");
        assert!(!settled.still("a", 1, now));
    }
}
