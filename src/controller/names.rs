//! The watches of names flotilla renders, on objects it did not stamp: per rendered kind and
//! name, one watch across the cluster, started on first use. With them (and the stamped
//! objects' index) a reconcile knows a name is free without reading it.

use super::taken::Taken;
use super::watches::{Feed, Shared, StampedMeta, spawn_kept, watch_config};
use crate::kinds::Kind;
use crate::object::ObjectKey;
use crate::sync::lock;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use std::collections::HashMap;
use std::sync::Mutex;

/// Distinct names watched for objects flotilla did not stamp. Templates that put the namespace
/// into a name would need one watch per namespace: past this many, objects are read instead.
const MAX_NAME_WATCHES: usize = 64;

/// Per rendered kind and name, a watch across the cluster on the objects of that name that do
/// not carry this instance's label. Started on first use, so only names the templates render
/// are watched, and it streams next to nothing: objects flotilla stamps are not in it.
pub(super) struct NameWatches {
    pub(super) client: Client,
    pub(super) selector: String,
    pub(super) feed: Feed,
    pub(super) watches: Mutex<HashMap<(Kind, String), Shared<Taken>>>,
}

impl NameWatches {
    /// Whether the name of `key` is taken by something flotilla did not stamp; `None` while
    /// that is not known (its watch has just been started, or too many names are watched).
    pub(super) fn taken(&self, key: &ObjectKey) -> Option<bool> {
        let mut watches = lock(&self.watches);
        let id = (key.kind, key.name.clone());
        let shared = watch_of(&mut watches, id, || self.start(key))?;
        shared.read().in_namespace(&key.namespace)
    }

    fn start(&self, key: &ObjectKey) -> Shared<Taken> {
        let api = Api::<StampedMeta>::all_with(self.client.clone(), &key.kind.api_resource());
        let config = watch_config()
            .labels(&self.selector)
            .fields(&format!("metadata.name={}", key.name));
        let what = format!("{} named {}", key.kind.name(), key.name);
        let events = watcher::watcher(api, config);
        spawn_kept(what, events, Taken::default(), self.feed.clone()).0
    }
}

/// The watch of `id` if one runs; if not, starts one with `start` (while fewer than
/// `MAX_NAME_WATCHES` run) to answer from next time.
fn watch_of<W>(
    watches: &mut HashMap<(Kind, String), W>,
    id: (Kind, String),
    start: impl FnOnce() -> W,
) -> Option<&W> {
    if watches.contains_key(&id) {
        return watches.get(&id);
    }
    if watches.len() < MAX_NAME_WATCHES {
        watches.insert(id, start());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_watched_from_its_second_use_and_none_past_the_cap() {
        let mut watches = HashMap::new();
        let name = |i: usize| (Kind::ConfigMap, format!("cm-{i}"));
        for i in 0..MAX_NAME_WATCHES {
            assert_eq!(
                watch_of(&mut watches, name(i), || i),
                None,
                "first use of {i}"
            );
        }
        assert_eq!(
            watch_of(&mut watches, name(3), || panic!("started twice")),
            Some(&3)
        );
        // Past the cap nothing is started: objects of that name are read instead.
        let past = (Kind::ConfigMap, "one-too-many".to_string());
        let started = watch_of(&mut watches, past.clone(), || panic!("past the cap"));
        assert_eq!(started, None);
        assert_eq!(
            watch_of(&mut watches, past, || panic!("past the cap")),
            None
        );
        assert_eq!(watches.len(), MAX_NAME_WATCHES);
    }
}
