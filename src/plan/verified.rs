//! What earlier reconciles found in sync, per object, at the version they found it at: kept for
//! every stamped object of every namespace, so kept small. An object is known by a hash of its
//! key, not the key's strings (the namespace and name are held by the watches already). A hash
//! collision cannot pass an object off as verified: its watched resourceVersion must also match
//! the one remembered, and no two objects share one; it can only cost a read.

use super::Verified;
use crate::object::ObjectKey;
use std::hash::{DefaultHasher, Hash, Hasher};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifiedObjects(Vec<(u64, Verified)>);

fn hash_of(key: &ObjectKey) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

impl VerifiedObjects {
    pub fn get(&self, key: &ObjectKey) -> Option<&Verified> {
        let hash = hash_of(key);
        self.0.iter().find(|(h, _)| *h == hash).map(|(_, v)| v)
    }

    pub fn insert(&mut self, key: &ObjectKey, verified: Verified) {
        let hash = hash_of(key);
        match self.0.iter_mut().find(|(h, _)| *h == hash) {
            Some((_, known)) => *known = verified,
            None => self.0.push((hash, verified)),
        }
    }

    /// The same, without room to grow: what is kept until the next reconcile.
    pub fn compacted(&self) -> VerifiedObjects {
        let mut kept = Vec::with_capacity(self.0.len());
        kept.extend(self.0.iter().cloned());
        VerifiedObjects(kept)
    }
}

impl FromIterator<(ObjectKey, Verified)> for VerifiedObjects {
    fn from_iter<I: IntoIterator<Item = (ObjectKey, Verified)>>(items: I) -> Self {
        let mut verified = VerifiedObjects::default();
        for (key, v) in items {
            verified.insert(&key, v);
        }
        verified
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;

    fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            kind: Kind::ConfigMap,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn at(version: &str) -> Verified {
        Verified {
            resource_version: version.into(),
            health: None,
        }
    }

    #[test]
    fn finds_by_key_and_a_second_insert_replaces() {
        let mut verified: VerifiedObjects = [(key("a", "cm"), at("1")), (key("b", "cm"), at("2"))]
            .into_iter()
            .collect();
        assert_eq!(verified.get(&key("a", "cm")), Some(&at("1")));
        assert_eq!(verified.get(&key("b", "cm")), Some(&at("2")));
        assert_eq!(verified.get(&key("a", "other")), None);
        verified.insert(&key("a", "cm"), at("3"));
        assert_eq!(verified.get(&key("a", "cm")), Some(&at("3")));
        let kept = verified.compacted();
        assert_eq!(kept, verified);
        assert_eq!(kept.0.capacity(), 2);
    }
}
