//! The watches: one on all Namespaces (a label-filtered one would never see an opt-out), one
//! shared, label-filtered, metadata-only watch per stamped kind, and one on this instance's
//! NamespaceWorkers. Each feeds an in-memory store
//! and turns every change into the name of the namespace to reconcile.

use super::queue::WorkQueue;
use crate::kinds::Kind;
use crate::object::ObjectKey;
use crate::ownership;
use crate::status::NamespaceWorker;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use tokio::task::JoinHandle;

pub type StampedMeta = PartialObjectMeta<DynamicObject>;

/// A stamped object as the watch sees it.
#[derive(Debug, Clone)]
pub struct Observed {
    pub key: ObjectKey,
    pub uid: Option<String>,
}

#[derive(Clone)]
pub struct Stores {
    namespaces: Store<PartialObjectMeta<Namespace>>,
    stamped: Vec<(Kind, Store<StampedMeta>)>,
    workers: Store<NamespaceWorker>,
}

impl Stores {
    /// Starts every watch; the returned tasks run until the process ends.
    pub fn start(
        client: &Client,
        instance: &str,
        queue: &Arc<WorkQueue>,
    ) -> (Stores, Vec<JoinHandle<()>>) {
        let (ns_store, ns_writer) = reflector::store();
        let mut tasks = vec![spawn_watch(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            watch_config(),
            ns_writer,
            "Namespace",
            Arc::clone(queue),
            |ns| Some(ns.name_any()),
        )];
        let selector = ownership::watch_selector(instance);
        let mut stamped = Vec::new();
        for kind in Kind::ALL {
            let ar = kind.api_resource();
            let writer = reflector::store::Writer::new(ar.clone());
            stamped.push((kind, writer.as_reader()));
            tasks.push(spawn_watch(
                Api::<StampedMeta>::all_with(client.clone(), &ar),
                watch_config().labels(&selector),
                writer,
                kind.name(),
                Arc::clone(queue),
                |obj| obj.labels().get(ownership::FOR_NAMESPACE).cloned(),
            ));
        }
        let (workers, workers_writer) = reflector::store();
        tasks.push(spawn_watch(
            Api::<NamespaceWorker>::all(client.clone()),
            watch_config().labels(&selector),
            workers_writer,
            "NamespaceWorker",
            Arc::clone(queue),
            |worker| Some(worker.name_any()),
        ));
        let stores = Stores {
            namespaces: ns_store,
            stamped,
            workers,
        };
        (stores, tasks)
    }

    pub async fn wait_until_ready(&self) {
        // Only fails if the writer is dropped, i.e. the process is shutting down.
        let _ = self.namespaces.wait_until_ready().await;
        for (_, store) in &self.stamped {
            let _ = store.wait_until_ready().await;
        }
        let _ = self.workers.wait_until_ready().await;
    }

    pub fn worker_count(&self) -> usize {
        self.workers.state().len()
    }

    /// This instance's NamespaceWorker for `namespace`, as last seen.
    pub fn worker(&self, namespace: &str) -> Option<Arc<NamespaceWorker>> {
        self.workers.get(&ObjectRef::new(namespace))
    }

    pub fn namespace(&self, name: &str) -> Option<Arc<PartialObjectMeta<Namespace>>> {
        self.namespaces.get(&ObjectRef::new(name))
    }

    /// Everything this instance stamped for `namespace`, wherever it lives.
    pub fn stamped_for(&self, namespace: &str) -> Vec<Observed> {
        let mut observed = Vec::new();
        for (kind, store) in &self.stamped {
            let mine = store.state_filter(|obj: &StampedMeta| {
                obj.labels()
                    .get(ownership::FOR_NAMESPACE)
                    .map(String::as_str)
                    == Some(namespace)
            });
            observed.extend(mine.into_iter().map(|obj| Observed {
                key: ObjectKey {
                    kind: *kind,
                    namespace: obj.namespace().unwrap_or_default(),
                    name: obj.name_any(),
                },
                uid: obj.uid(),
            }));
        }
        observed
    }

    /// The resourceVersion the watch last saw for a stamped object.
    pub fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        let (_, store) = self.stamped.iter().find(|(kind, _)| *kind == key.kind)?;
        let obj_ref =
            ObjectRef::new_with(&key.name, key.kind.api_resource()).within(&key.namespace);
        store.get(&obj_ref)?.resource_version()
    }

    /// Every namespace that exists or that something was stamped for: a full resync key set.
    /// Stamped objects of namespaces that are gone are how deletions missed while flotilla was
    /// down get reaped.
    pub fn all_namespaces(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .namespaces
            .state()
            .iter()
            .map(|ns| ns.name_any())
            .collect();
        for (_, store) in &self.stamped {
            names.extend(
                store
                    .state()
                    .iter()
                    .filter_map(|obj| obj.labels().get(ownership::FOR_NAMESPACE).cloned()),
            );
        }
        names
    }
}

/// Watches end server-side after a minute and are resumed: a watch that went silent (say, opened
/// against an API server that was just restarting) is replaced within a minute, not five.
fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(60)
}

fn spawn_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    kind: &'static str,
    queue: Arc<WorkQueue>,
    key_of: fn(&K) -> Option<String>,
) -> JoinHandle<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    tokio::spawn(async move {
        let mut events = std::pin::pin!(
            watcher(api, config)
                .default_backoff()
                // managedFields are most of an object's metadata and nothing here reads them.
                .modify(|obj| obj.managed_fields_mut().clear())
                .reflect(writer)
                .touched_objects()
        );
        while let Some(event) = events.next().await {
            match event {
                Ok(obj) => {
                    if let Some(key) = key_of(&obj) {
                        queue.add(&key);
                    }
                }
                // The watcher retries with backoff (and relists after 410 Gone) by itself.
                Err(e) => tracing::warn!(kind, error = %e, "watch error; retrying"),
            }
        }
    })
}
