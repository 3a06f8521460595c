//! The watches: one on all Namespaces (a label-filtered one would never see an opt-out), one
//! shared watch per stamped kind of what carries this instance's label, one per rendered kind
//! and name of what does not (started on first use), and one on this instance's
//! NamespaceWorkers. Namespaces and stamped objects are watched as metadata only: nothing else
//! of them is read. Each feeds an in-memory view and turns every change into the name of the
//! namespace to reconcile.

use super::index::{Bookkeeper, KindIndex};
use super::memory::Memory;
use super::names::NameWatches;
use super::queue::WorkQueue;
use super::worker_view::WorkerView;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Watched};
use crate::ownership;
use crate::plan;
use crate::rollout::fleet::Fleet;
use crate::sync::{read, write};
use crate::telemetry::Metrics;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// `Api<PartialObjectMeta<_>>` makes metadata-only requests.
pub(super) type StampedMeta = PartialObjectMeta<DynamicObject>;

/// What a watch keeps, shared between it (the only writer) and the workers.
pub(super) struct Shared<B> {
    book: Arc<RwLock<B>>,
    ready: watch::Receiver<bool>,
}

impl<B> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Shared {
            book: Arc::clone(&self.book),
            ready: self.ready.clone(),
        }
    }
}

impl<B> Shared<B> {
    pub(super) fn read(&self) -> RwLockReadGuard<'_, B> {
        read(&self.book)
    }
}

/// Where what the watches see goes: the namespaces to reconcile, and the count of failed
/// requests (a watch retries by itself; its failures are still counted).
#[derive(Clone)]
pub(super) struct Feed {
    queue: Arc<WorkQueue>,
    metrics: Arc<Metrics>,
}

impl Feed {
    fn failed(&self, what: &str, error: &watcher::Error) {
        self.metrics.watch_error(error);
        tracing::warn!(watch = %what, error = %error, "watch error; retrying");
    }
}

#[derive(Clone)]
pub struct Stores {
    namespaces: Store<PartialObjectMeta<Namespace>>,
    stamped: Vec<Shared<KindIndex>>,
    names: Arc<NameWatches>,
    workers: Store<WorkerView>,
    fleet: Store<Fleet>,
}

impl Stores {
    /// Starts every watch; the returned tasks run until the process ends. What the
    /// NamespaceWorker watch shows is told to `memory` (a status write it no longer needs to
    /// keep).
    pub fn start(
        client: &Client,
        instance: &str,
        queue: &Arc<WorkQueue>,
        memory: &Arc<Memory>,
        metrics: &Arc<Metrics>,
    ) -> (Stores, Vec<JoinHandle<()>>) {
        let feed = Feed {
            queue: Arc::clone(queue),
            metrics: Arc::clone(metrics),
        };
        let (ns_store, ns_writer) = reflector::store();
        let mut tasks = vec![spawn_reflected(
            watcher::watcher(
                Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
                watch_config(),
            ),
            ns_writer,
            "Namespace",
            feed.clone(),
            |ns| Some(ns.name_any()),
            |_| {},
        )];
        let mut stamped = Vec::new();
        for kind in Kind::ALL {
            let api = Api::<StampedMeta>::all_with(client.clone(), &kind.api_resource());
            let config = watch_config().labels(&ownership::instance_selector(instance));
            let (shared, task) = spawn_kept(
                kind.name().to_string(),
                watcher::watcher(api, config),
                KindIndex::new(kind, instance),
                feed.clone(),
            );
            stamped.push(shared);
            tasks.push(task);
        }
        let names = Arc::new(NameWatches {
            client: client.clone(),
            selector: ownership::foreign_selector(instance),
            feed: feed.clone(),
            watches: Mutex::default(),
        });
        let selector = ownership::watch_selector(instance);
        let (workers, workers_writer) = reflector::store();
        let shown = Arc::clone(memory);
        tasks.push(spawn_reflected(
            watcher::watcher(
                Api::<WorkerView>::all(client.clone()),
                watch_config().labels(&selector),
            ),
            workers_writer,
            "NamespaceWorker",
            feed.clone(),
            |worker| Some(worker.name_any()),
            move |worker| {
                if let Some(version) = worker.resource_version() {
                    shown.worker_shown(&worker.name_any(), &version);
                }
            },
        ));
        // This instance's Fleet: the admin's pause and undo. The rollout looks at it every second.
        let (fleet, fleet_writer) = reflector::store();
        tasks.push(spawn_reflected(
            watcher::watcher(
                Api::<Fleet>::all(client.clone()),
                watch_config().fields(&format!("metadata.name={instance}")),
            ),
            fleet_writer,
            "Fleet",
            feed,
            |_| None,
            |_| {},
        ));
        let stores = Stores {
            namespaces: ns_store,
            stamped,
            names,
            workers,
            fleet,
        };
        (stores, tasks)
    }

    pub async fn wait_until_ready(&self) {
        // Only fails if the writer is dropped, i.e. the process is shutting down.
        let _ = self.namespaces.wait_until_ready().await;
        for shared in &self.stamped {
            let _ = shared.ready.clone().wait_for(|ready| *ready).await;
        }
        let _ = self.workers.wait_until_ready().await;
        let _ = self.fleet.wait_until_ready().await;
    }

    /// This instance's Fleet, as last seen.
    pub fn fleet(&self) -> Option<Arc<Fleet>> {
        self.fleet.state().into_iter().next()
    }

    /// Every NamespaceWorker of this instance, as last seen.
    pub fn workers(&self) -> Vec<Arc<WorkerView>> {
        self.workers.state()
    }

    /// Counted by the store, not by copying it: every reconcile asks.
    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// This instance's NamespaceWorker for `namespace`, as last seen.
    pub fn worker(&self, namespace: &str) -> Option<Arc<WorkerView>> {
        self.workers.get(&ObjectRef::new(namespace))
    }

    pub fn namespace(&self, name: &str) -> Option<Arc<PartialObjectMeta<Namespace>>> {
        self.namespaces.get(&ObjectRef::new(name))
    }

    /// Everything this instance stamped for `namespace`, wherever it lives.
    pub fn stamped_for(&self, namespace: &str) -> Vec<Watched> {
        self.stamped
            .iter()
            .flat_map(|shared| {
                let index = shared.read();
                index.stamped_for(namespace).collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether the watches show nothing at all at `key`: nothing stamped there, and its name not
    /// taken by anything else. `false` while that is not known yet. The watches are served from
    /// the API server's watch cache, as the read this replaces is, a delivery later.
    pub fn vacant(&self, key: &ObjectKey) -> bool {
        let held = Kind::ALL
            .iter()
            .position(|kind| *kind == key.kind)
            .and_then(|i| self.stamped.get(i))
            .is_none_or(|shared| shared.read().holds(key));
        !held && self.names.taken(key) == Some(false)
    }

    /// Every namespace that exists or that something was stamped for: a full resync key set.
    /// Stamped objects of namespaces that are gone are how deletions missed while flotilla was
    /// down get reaped.
    pub fn all_namespaces(&self) -> BTreeSet<String> {
        let existing = self
            .namespaces
            .state()
            .iter()
            .map(|ns| ns.name_any())
            .collect::<Vec<_>>();
        let stamped_for: Vec<String> = self
            .stamped
            .iter()
            .flat_map(|shared| {
                let index = shared.read();
                index.namespaces().map(str::to_string).collect::<Vec<_>>()
            })
            .collect();
        plan::fleet(existing, stamped_for)
    }
}

/// Watches end server-side after a minute and are resumed: a watch that went silent (say, opened
/// against an API server that was just restarting) is replaced within a minute, not five.
pub(super) fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(60)
}

/// A watch into a reflector store: for the objects whose content is read (Namespaces' labels,
/// NamespaceWorkers' status). `shown` sees each object once the store holds it.
fn spawn_reflected<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    kind: &'static str,
    feed: Feed,
    key_of: fn(&K) -> Option<String>,
    shown: impl Fn(&K) + Send + 'static,
) -> JoinHandle<()>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let store = writer.as_reader();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(
            events
                .default_backoff()
                .modify(|obj| keep_what_is_read(obj.meta_mut()))
                .reflect(writer)
        );
        let mut relisted: Vec<String> = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(obj) | Event::Delete(obj)) => {
                    shown(&obj);
                    if let Some(key) = key_of(&obj) {
                        feed.queue.add(&key);
                    }
                }
                // The store takes a relist in only once it is complete, so its keys are queued
                // then (a reconcile before would still read the old list), with the keys of the
                // old list: what vanished while the watch was down is looked at too.
                Ok(Event::Init) => {
                    relisted = store.state().iter().filter_map(|obj| key_of(obj)).collect();
                }
                Ok(Event::InitApply(obj)) => relisted.extend(key_of(&obj)),
                Ok(Event::InitDone) => {
                    for obj in store.state() {
                        shown(&obj);
                    }
                    for key in relisted.drain(..) {
                        feed.queue.add(&key);
                    }
                }
                // The watcher retries with backoff (and relists after 410 Gone) by itself.
                Err(e) => feed.failed(kind, &e),
            }
        }
    })
}

/// Of a stored object's metadata, only what flotilla reads: who it is, its version, labels,
/// annotations and deletion. The rest is dropped, not emptied (an emptied Vec keeps its buffer):
/// managedFields alone are most of an object's metadata, and the store keeps an object for every
/// namespace.
fn keep_what_is_read(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        labels: meta.labels.take(),
        annotations: meta.annotations.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
}

/// A metadata watch into its bookkeeping; every namespace a change concerns is queued.
pub(super) fn spawn_kept<B: Bookkeeper + Send + Sync + 'static>(
    what: String,
    events: impl Stream<Item = watcher::Result<Event<StampedMeta>>> + Send + 'static,
    book: B,
    feed: Feed,
) -> (Shared<B>, JoinHandle<()>) {
    let book = Arc::new(RwLock::new(book));
    let (ready_tx, ready) = watch::channel(false);
    let shared = Shared {
        book: Arc::clone(&book),
        ready,
    };
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events.default_backoff());
        while let Some(event) = events.next().await {
            let write = || write(&book);
            let touched = match event {
                Ok(Event::Apply(obj)) => write().apply(&obj.metadata),
                Ok(Event::Delete(obj)) => write().delete(&obj.metadata),
                Ok(Event::Init) => {
                    write().relist_started();
                    Vec::new()
                }
                Ok(Event::InitApply(obj)) => {
                    write().relisted(&obj.metadata);
                    Vec::new()
                }
                Ok(Event::InitDone) => {
                    let touched = write().relist_done();
                    ready_tx.send_replace(true);
                    touched
                }
                Err(e) => {
                    feed.failed(&what, &e);
                    Vec::new()
                }
            };
            for namespace in touched {
                feed.queue.add(&namespace);
            }
        }
    });
    (shared, task)
}
