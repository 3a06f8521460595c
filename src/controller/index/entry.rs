//! How the index keeps one stamped object: what a [`Watched`] says, in about a hundred bytes and
//! no allocation of its own. Every namespace repeats the same few object names, so a name is
//! shared (interned per kind); a uid, a resourceVersion and flotilla's content hash are numbers
//! on every API server, so each is kept as one where it prints back exactly as it came. At
//! 10,000 namespaces and nine objects each, this is what makes the index a small part of
//! flotilla's memory rather than the largest.

use crate::kinds::Kind;
use crate::object::packed::Packed;
use crate::object::{ObjectKey, Watched};
use std::collections::HashSet;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Where it lives, if that is not the namespace it was stamped for (flotilla's own
    /// namespace, say).
    elsewhere: Option<Box<str>>,
    name: Arc<str>,
    uid: Option<Packed>,
    resource_version: Option<Packed>,
    hash: Option<Packed>,
}

impl Entry {
    pub(super) fn of(watched: &Watched, names: &mut Names) -> Entry {
        Entry {
            elsewhere: (watched.key.namespace != watched.stamped_for)
                .then(|| watched.key.namespace.as_str().into()),
            name: names.intern(&watched.key.name),
            uid: watched.uid.as_deref().map(Packed::uuid),
            resource_version: watched.resource_version.as_deref().map(Packed::decimal),
            hash: watched.hash.as_deref().map(Packed::hex16),
        }
    }

    /// The namespace it lives in, when it is in the list of `stamped_for`.
    fn namespace<'a>(&'a self, stamped_for: &'a str) -> &'a str {
        self.elsewhere.as_deref().unwrap_or(stamped_for)
    }

    /// Whether this is the object at `key`, when it is in the list of `stamped_for`.
    pub(super) fn is(&self, key: &ObjectKey, stamped_for: &str) -> bool {
        *self.name == *key.name && self.namespace(stamped_for) == key.namespace
    }

    pub(super) fn key(&self, kind: Kind, stamped_for: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: self.namespace(stamped_for).to_string(),
            name: self.name.to_string(),
        }
    }

    pub(super) fn watched(&self, kind: Kind, stamped_for: &str) -> Watched {
        Watched {
            key: self.key(kind, stamped_for),
            uid: self.uid.as_ref().map(Packed::text),
            resource_version: self.resource_version.as_ref().map(Packed::text),
            stamped_for: stamped_for.to_string(),
            hash: self.hash.as_ref().map(Packed::text),
        }
    }

    /// Its name, which the caller gives back to [`Names::release`] once it removed it.
    pub(super) fn into_name(self) -> Arc<str> {
        self.name
    }
}

/// The object names of one kind, each kept once however many namespaces use it.
#[derive(Debug, Default)]
pub(super) struct Names(HashSet<Arc<str>>);

impl Names {
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.get(name) {
            return Arc::clone(known);
        }
        let name: Arc<str> = name.into();
        self.0.insert(Arc::clone(&name));
        name
    }

    /// `name` left the index: forgotten once nothing else uses it (a template that put the
    /// namespace into a name would otherwise leave a name behind for every reaped namespace).
    pub(super) fn release(&mut self, name: Arc<str>) {
        // This one and the set's.
        if Arc::strong_count(&name) == 2 {
            self.0.remove(&*name);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(namespace: &str, name: &str, stamped_for: &str) -> Watched {
        Watched {
            key: ObjectKey {
                kind: Kind::Role,
                namespace: namespace.into(),
                name: name.into(),
            },
            uid: Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427".into()),
            resource_version: Some("912".into()),
            stamped_for: stamped_for.into(),
            hash: Some("43fda9d807afc526".into()),
        }
    }

    #[test]
    fn an_entry_gives_back_the_watched_object_and_shares_its_name() {
        let mut names = Names::default();
        let here = watched("team-a", "argo-role", "team-a");
        let there = watched("flotilla-system", "argo-role", "team-b");
        let (a, b) = (Entry::of(&here, &mut names), Entry::of(&there, &mut names));
        assert_eq!(a.watched(Kind::Role, "team-a"), here);
        assert_eq!(b.watched(Kind::Role, "team-b"), there);
        assert!(a.is(&here.key, "team-a") && !a.is(&there.key, "team-a"));
        assert!(b.is(&there.key, "team-b"));
        assert_eq!(names.len(), 1);
        names.release(a.into_name());
        assert_eq!(names.len(), 1, "team-b's Role still has the name");
        names.release(b.into_name());
        assert_eq!(names.len(), 0);
    }
}
