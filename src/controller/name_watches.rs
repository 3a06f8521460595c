//! The watches of names flotilla renders, on objects it did not stamp: per rendered kind and
//! name, one watch across the cluster, started on first use. With them (and the stamped
//! objects' index) a reconcile knows a name is free without reading it.

use super::taken::Taken;
use super::watch::{Feed, Shared, StampedMeta, spawn_kept, watch_config};
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
        let config = name_watch_config(&self.selector, &key.name);
        let what = format!("{} named {}", key.kind.name(), key.name);
        let events = watcher::watcher(api, config);
        spawn_kept(what, events, Taken::default(), self.feed.clone()).0
    }
}

/// The watch of the objects named `name` that `selector` (not stamped by this instance) matches.
/// Its first list is served from the API server's watch cache (resourceVersion 0): no field
/// selector on a name is indexed, so a list from etcd reads every object of the kind. At 10,000
/// namespaces the nine lists took up to 4.5 s, and they start with the first create after a
/// restart, which they held up. kube sends resourceVersion 0 only on a list without a limit, so
/// the list is not paged (it holds only the few objects of that name). A list a moment old is
/// safe here: the watch goes on from it, and a create into a name just taken gets a conflict
/// (`cluster::Mode::Create`), after which the object is read.
fn name_watch_config(selector: &str, name: &str) -> watcher::Config {
    let mut config = watch_config()
        .any_semantic()
        .labels(selector)
        .fields(&format!("metadata.name={name}"));
    config.page_size = None;
    config
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
    fn a_name_watch_lists_from_the_watch_cache() {
        let config = name_watch_config("flotilla.dev/instance!=fleet", "argo");
        assert_eq!(config.list_semantic, watcher::ListSemantic::Any);
        assert_eq!(
            config.page_size, None,
            "a limit makes kube drop resourceVersion=0"
        );
        assert_eq!(config.field_selector.as_deref(), Some("metadata.name=argo"));
        assert_eq!(
            config.label_selector.as_deref(),
            Some("flotilla.dev/instance!=fleet")
        );
    }

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
