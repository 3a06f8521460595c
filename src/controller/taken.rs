//! Where a name flotilla renders is taken by an object it did not stamp: for one kind and name,
//! the namespaces holding such an object, as that name's watch shows them. With it (and the
//! stamped objects' index), a reconcile knows that an object is missing without reading it.
//! Pure bookkeeping, no I/O.

use super::index::Bookkeeper;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::HashSet;

#[derive(Debug, Default)]
pub struct Taken {
    namespaces: HashSet<String>,
    /// Listed since the watch (re)started; replaces `namespaces` once the list is complete.
    relist: Option<HashSet<String>>,
    /// Has seen one complete list: until then nothing is known.
    listed: bool,
}

fn namespace(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

/// Each change returns the namespace whose name it took or freed.
impl Bookkeeper for Taken {
    fn apply(&mut self, meta: &ObjectMeta) -> Vec<String> {
        let namespace = namespace(meta);
        if self.namespaces.insert(namespace.clone()) {
            vec![namespace]
        } else {
            Vec::new()
        }
    }

    fn delete(&mut self, meta: &ObjectMeta) -> Vec<String> {
        let namespace = namespace(meta);
        if self.namespaces.remove(&namespace) {
            vec![namespace]
        } else {
            Vec::new()
        }
    }

    fn relist_started(&mut self) {
        self.relist = Some(HashSet::new());
    }

    fn relisted(&mut self, meta: &ObjectMeta) {
        if let Some(relist) = self.relist.as_mut() {
            relist.insert(namespace(meta));
        }
    }

    /// Swaps in the complete list; returns the namespaces whose name was taken or freed while
    /// the watch was down (none for the first list: nothing was known before it).
    fn relist_done(&mut self) -> Vec<String> {
        let listed = self.relist.take().unwrap_or_default();
        let changed = if self.listed {
            listed
                .symmetric_difference(&self.namespaces)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        self.namespaces = listed;
        self.listed = true;
        changed
    }
}

impl Taken {
    /// Whether the name is taken in `namespace`; `None` until the first list is complete.
    pub fn in_namespace(&self, namespace: &str) -> Option<bool> {
        self.listed.then(|| self.namespaces.contains(namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_ns(namespace: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some("cm".into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn nothing_is_known_before_the_first_complete_list() {
        let mut taken = Taken::default();
        assert_eq!(taken.in_namespace("a"), None);
        taken.relist_started();
        taken.relisted(&in_ns("a"));
        assert_eq!(taken.in_namespace("a"), None);
        assert!(taken.relist_done().is_empty());
        assert_eq!(taken.in_namespace("a"), Some(true));
        assert_eq!(taken.in_namespace("b"), Some(false));
    }

    #[test]
    fn changes_report_a_namespace_only_when_its_name_is_taken_or_freed() {
        let mut taken = Taken::default();
        taken.relist_started();
        taken.relist_done();
        assert_eq!(taken.apply(&in_ns("a")), ["a"]);
        // An update of the same object changes nothing.
        assert!(taken.apply(&in_ns("a")).is_empty());
        assert_eq!(taken.in_namespace("a"), Some(true));
        assert_eq!(taken.delete(&in_ns("a")), ["a"]);
        assert!(taken.delete(&in_ns("a")).is_empty());
        assert_eq!(taken.in_namespace("a"), Some(false));
    }

    #[test]
    fn a_relist_reports_what_changed_while_the_watch_was_down() {
        let mut taken = Taken::default();
        taken.relist_started();
        taken.relisted(&in_ns("kept"));
        taken.relisted(&in_ns("freed"));
        taken.relist_done();
        taken.relist_started();
        taken.relisted(&in_ns("kept"));
        taken.relisted(&in_ns("new"));
        // Until the list is complete the old view still answers.
        assert_eq!(taken.in_namespace("freed"), Some(true));
        let mut changed = taken.relist_done();
        changed.sort();
        assert_eq!(changed, ["freed", "new"]);
        assert_eq!(taken.in_namespace("freed"), Some(false));
        assert_eq!(taken.in_namespace("new"), Some(true));
    }
}
