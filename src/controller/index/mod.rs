//! What the watches know of stamped objects, indexed by the namespace each was stamped for, so a
//! reconcile finds its objects in time proportional to their number, not to the fleet's.
//! Fed by one kind's watch of everything labelled with this instance; pure bookkeeping, no I/O.

mod entry;

use crate::kinds::Kind;
use crate::object::{ObjectKey, Watched};
use crate::ownership::{self, Owner};
use entry::{Entry, Names};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeSet, HashMap, HashSet};

/// What the watch shows of a stamped object; `None` for an object that carries this instance's
/// label but not the rest of what marks a stamped object (say, someone removed the label naming
/// its namespace): nobody's.
fn watched(kind: Kind, instance: &str, meta: &ObjectMeta) -> Option<Watched> {
    let Owner::Stamped(stamped_for) = ownership::owner(meta.labels.as_ref(), instance) else {
        return None;
    };
    Some(Watched {
        key: ObjectKey {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
        },
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        stamped_for: stamped_for.to_string(),
        hash: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(ownership::HASH))
            .cloned(),
    })
}

/// What a metadata watch keeps up to date, event by event; each change returns the namespaces
/// to reconcile because of it.
pub trait Bookkeeper {
    fn apply(&mut self, meta: &ObjectMeta) -> Vec<String>;
    fn delete(&mut self, meta: &ObjectMeta) -> Vec<String>;
    /// The watch (re)starts with a full list: until it is complete, the old view answers.
    fn relist_started(&mut self);
    fn relisted(&mut self, meta: &ObjectMeta);
    fn relist_done(&mut self) -> Vec<String>;
}

/// One kind's stamped objects. Each change returns the namespaces whose objects it changed.
#[derive(Debug)]
pub struct KindIndex {
    kind: Kind,
    instance: String,
    /// Each object once, under the namespace it was stamped for. A kind has one or two objects
    /// per namespace: a short list, searched by key, not a second map by key (which would hold
    /// every key again).
    by_namespace: HashMap<Box<str>, Vec<Entry>>,
    /// Every object name of this kind, kept once.
    names: Names,
    /// The namespace an object was stamped for, where that is not the one it lives in (say, in
    /// flotilla's own namespace, or cluster-scoped): lookups by key find its list here, else
    /// under its own namespace.
    elsewhere: HashMap<ObjectKey, String>,
    /// Objects with this instance's label that are not stamped objects: never touched, and
    /// their names are taken.
    unowned: HashSet<ObjectKey>,
    /// What has been listed since the watch (re)started; replaces the above once complete.
    relist: Option<(HashMap<ObjectKey, Watched>, HashSet<ObjectKey>)>,
    /// Has seen one complete list.
    listed: bool,
}

fn key_of(kind: Kind, meta: &ObjectMeta) -> ObjectKey {
    ObjectKey {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

impl KindIndex {
    pub fn new(kind: Kind, instance: &str) -> KindIndex {
        KindIndex {
            kind,
            instance: instance.to_string(),
            by_namespace: HashMap::new(),
            names: Names::default(),
            elsewhere: HashMap::new(),
            unowned: HashSet::new(),
            relist: None,
            listed: false,
        }
    }

    /// Whether the watch shows an object at `key`, stamped or not.
    pub fn holds(&self, key: &ObjectKey) -> bool {
        self.find(key).is_some() || self.unowned.contains(key)
    }

    /// The list `key` would be in, and its place there.
    fn find(&self, key: &ObjectKey) -> Option<(&str, usize)> {
        let list = self.elsewhere.get(key).unwrap_or(&key.namespace);
        let (list, entries) = self.by_namespace.get_key_value(list.as_str())?;
        let at = entries.iter().position(|e| e.is(key, list))?;
        Some((list, at))
    }

    fn get(&self, key: &ObjectKey) -> Option<Watched> {
        let (list, at) = self.find(key)?;
        Some(
            self.by_namespace
                .get(list)?
                .get(at)?
                .watched(self.kind, list),
        )
    }
}

impl Bookkeeper for KindIndex {
    fn apply(&mut self, meta: &ObjectMeta) -> Vec<String> {
        let Some(watched) = watched(self.kind, &self.instance, meta) else {
            // It lost a label: whatever it was stamped for must look again.
            let key = key_of(self.kind, meta);
            let touched = self.remove(&key).into_iter().collect();
            self.unowned.insert(key);
            return touched;
        };
        self.unowned.remove(&watched.key);
        let mut touched = vec![watched.stamped_for.clone()];
        touched.extend(self.insert(watched));
        touched
    }

    fn delete(&mut self, meta: &ObjectMeta) -> Vec<String> {
        let key = key_of(self.kind, meta);
        self.unowned.remove(&key);
        self.remove(&key).into_iter().collect()
    }

    fn relist_started(&mut self) {
        self.relist = Some((HashMap::new(), HashSet::new()));
    }

    fn relisted(&mut self, meta: &ObjectMeta) {
        let Some((stamped, unowned)) = self.relist.as_mut() else {
            return;
        };
        match watched(self.kind, &self.instance, meta) {
            Some(watched) => {
                stamped.insert(watched.key.clone(), watched);
            }
            None => {
                unowned.insert(key_of(self.kind, meta));
            }
        }
    }

    /// Swaps in the complete list. Returns the namespaces whose objects differ from before: what
    /// changed while the watch was down. The first list returns none (everything is new and the
    /// operator looks at every namespace on start anyway).
    fn relist_done(&mut self) -> Vec<String> {
        let (listed, unowned) = self.relist.take().unwrap_or_default();
        self.unowned = unowned;
        let first = !self.listed;
        self.listed = true;
        let mut touched = BTreeSet::new();
        let gone: Vec<ObjectKey> = self
            .by_namespace
            .iter()
            .flat_map(|(list, entries)| entries.iter().map(|e| e.key(self.kind, list)))
            .filter(|key| !listed.contains_key(key))
            .collect();
        for key in gone {
            touched.extend(self.remove(&key));
        }
        for (key, watched) in listed {
            if self.get(&key).as_ref() != Some(&watched) {
                touched.insert(watched.stamped_for.clone());
                touched.extend(self.insert(watched));
            }
        }
        if first {
            return Vec::new();
        }
        touched.into_iter().collect()
    }
}

impl KindIndex {
    /// This kind's objects stamped for `namespace`.
    pub fn stamped_for<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = Watched> + 'a {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .map(move |e| e.watched(self.kind, namespace))
    }

    /// Every namespace something of this kind was stamped for.
    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.by_namespace.keys().map(|k| &**k)
    }

    /// Inserts or replaces; returns the namespace the object was stamped for before, if that
    /// differs (someone relabelled it).
    fn insert(&mut self, watched: Watched) -> Option<String> {
        let entry = Entry::of(&watched, &mut self.names);
        // The usual event, a new version of an object stamped for the same namespace: in place.
        if let Some((list, at)) = self.find(&watched.key)
            && list == watched.stamped_for
            && let Some(known) = self
                .by_namespace
                .get_mut(watched.stamped_for.as_str())
                .and_then(|entries| entries.get_mut(at))
        {
            *known = entry;
            return None;
        }
        let previous = self.remove(&watched.key);
        if watched.stamped_for != watched.key.namespace {
            let list = watched.stamped_for.clone();
            self.elsewhere.insert(watched.key, list);
        }
        let entries = self
            .by_namespace
            .entry(watched.stamped_for.into_boxed_str())
            .or_default();
        // Exactly as many as there are: a growing Vec would leave room for four.
        entries.reserve_exact(1);
        entries.push(entry);
        previous
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<String> {
        let list = self
            .elsewhere
            .remove(key)
            .unwrap_or_else(|| key.namespace.clone());
        let entries = self.by_namespace.get_mut(list.as_str())?;
        let at = entries.iter().position(|e| e.is(key, &list))?;
        let entry = entries.remove(at);
        if entries.is_empty() {
            self.by_namespace.remove(list.as_str());
        }
        self.names.release(entry.into_name());
        Some(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// With this instance's labels; `stamped_for: None` leaves out the one naming the namespace.
    fn meta(namespace: &str, name: &str, stamped_for: Option<&str>, rv: &str) -> ObjectMeta {
        let mut labels: BTreeMap<String, String> = ownership::labels(INSTANCE, "")
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        match stamped_for {
            Some(ns) => labels.insert(ownership::FOR_NAMESPACE.to_string(), ns.to_string()),
            None => labels.remove(ownership::FOR_NAMESPACE),
        };
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{namespace}-{name}")),
            resource_version: Some(rv.into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    }

    const INSTANCE: &str = "fleet";

    fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            kind: Kind::ConfigMap,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn names(index: &KindIndex, namespace: &str) -> Vec<String> {
        index
            .stamped_for(namespace)
            .map(|o| format!("{}/{}", o.key.namespace, o.key.name))
            .collect()
    }

    fn ready() -> KindIndex {
        let mut index = KindIndex::new(Kind::ConfigMap, INSTANCE);
        index.relist_started();
        assert!(index.relist_done().is_empty());
        index
    }

    #[test]
    fn finds_objects_by_the_namespace_they_were_stamped_for() {
        let mut index = ready();
        assert_eq!(index.apply(&meta("a", "cm", Some("a"), "1")), ["a"]);
        // Stamped for `a`, placed in flotilla's own namespace.
        assert_eq!(
            index.apply(&meta("flotilla-system", "a-cm", Some("a"), "2")),
            ["a"]
        );
        index.apply(&meta("b", "cm", Some("b"), "3"));
        assert_eq!(names(&index, "a"), ["a/cm", "flotilla-system/a-cm"]);
        assert_eq!(names(&index, "b"), ["b/cm"]);
        assert!(names(&index, "c").is_empty());
        let mut all: Vec<&str> = index.namespaces().collect();
        all.sort();
        assert_eq!(all, ["a", "b"]);
    }

    #[test]
    fn an_update_replaces_and_a_delete_removes() {
        let mut index = ready();
        index.apply(&meta("a", "cm", Some("a"), "1"));
        index.apply(&meta("a", "cm", Some("a"), "5"));
        let seen: Vec<_> = index.stamped_for("a").collect();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].resource_version.as_deref(), Some("5"));
        assert_eq!(index.delete(&meta("a", "cm", Some("a"), "6")), ["a"]);
        assert!(names(&index, "a").is_empty());
        assert_eq!(index.namespaces().count(), 0);
        // Deleting what is not there touches nothing.
        assert!(index.delete(&meta("a", "cm", Some("a"), "7")).is_empty());
    }

    #[test]
    fn a_relabelled_object_moves_and_both_namespaces_are_touched() {
        let mut index = ready();
        index.apply(&meta("shared", "cm", Some("a"), "1"));
        assert_eq!(
            index.apply(&meta("shared", "cm", Some("b"), "2")),
            ["b", "a"]
        );
        assert!(names(&index, "a").is_empty());
        assert_eq!(names(&index, "b"), ["shared/cm"]);
        // Losing the label naming its namespace removes it from the index; its name stays taken.
        assert_eq!(index.apply(&meta("shared", "cm", None, "3")), ["b"]);
        assert!(names(&index, "b").is_empty());
        assert!(index.holds(&key("shared", "cm")));
        assert!(index.delete(&meta("shared", "cm", None, "4")).is_empty());
        assert!(!index.holds(&key("shared", "cm")));
    }

    #[test]
    fn an_object_of_another_manager_with_this_instances_label_is_held_but_not_stamped() {
        let mut index = ready();
        let mut claimed = meta("a", "cm", Some("a"), "1");
        if let Some(labels) = claimed.labels.as_mut() {
            labels.insert(ownership::MANAGED_BY.into(), "helm".into());
        }
        assert!(index.apply(&claimed).is_empty());
        assert!(names(&index, "a").is_empty());
        assert!(index.holds(&key("a", "cm")));
        assert!(!index.holds(&key("a", "other")));
        // A relist that no longer shows it frees the name.
        index.relist_started();
        index.relisted(&meta("a", "other", None, "2"));
        index.relist_done();
        assert!(!index.holds(&key("a", "cm")));
        assert!(index.holds(&key("a", "other")));
    }

    #[test]
    fn a_relist_reports_only_what_changed_while_the_watch_was_down() {
        let mut index = ready();
        index.apply(&meta("a", "cm", Some("a"), "1"));
        index.apply(&meta("b", "cm", Some("b"), "1"));
        index.apply(&meta("c", "cm", Some("c"), "1"));
        index.relist_started();
        index.relisted(&meta("a", "cm", Some("a"), "1"));
        index.relisted(&meta("b", "cm", Some("b"), "9"));
        index.relisted(&meta("d", "cm", Some("d"), "9"));
        // Until the list is complete the old view still answers.
        assert_eq!(names(&index, "c"), ["c/cm"]);
        assert_eq!(index.relist_done(), ["b", "c", "d"]);
        assert!(names(&index, "c").is_empty());
        assert_eq!(names(&index, "d"), ["d/cm"]);
        assert_eq!(names(&index, "a"), ["a/cm"]);
    }

    #[test]
    fn the_first_list_fills_the_index_without_touching() {
        let mut index = KindIndex::new(Kind::ConfigMap, INSTANCE);
        index.relist_started();
        index.relisted(&meta("a", "cm", Some("a"), "1"));
        index.relisted(&meta("a", "unlabelled", None, "1"));
        assert!(index.relist_done().is_empty());
        assert_eq!(names(&index, "a"), ["a/cm"]);
    }
}
