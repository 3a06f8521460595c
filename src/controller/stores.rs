//! The watches flotilla runs: one on all Namespaces (a label-filtered one would never see an
//! opt-out), one shared watch per stamped kind of what carries this instance's label, one per
//! rendered kind and name of what does not (started on first use, name_watches.rs), one on this
//! instance's NamespaceWorkers and one on its Fleet; and what they show, read without a request.
//! Namespaces and stamped objects are watched as metadata only: nothing else of them is read.

use super::index::KindIndex;
use super::memory::Memory;
use super::name_watches::NameWatches;
use super::queue::WorkQueue;
use super::watch::{Feed, Shared, StampedMeta, spawn_kept, spawn_reflected, watch_config};
use super::worker_view::WorkerView;
use crate::kinds::Kind;
use crate::membership::{self, Membership};
use crate::object::{ObjectKey, Watched};
use crate::ownership;
use crate::plan;
use crate::rollout::fleet::Fleet;
use crate::telemetry::Metrics;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::core::Selector;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

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
        let feed = Feed::new(queue, metrics);
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
            shared.wait_until_ready().await;
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

    /// Every namespace with a NamespaceWorker of this instance, judged by `selector`
    /// ([`membership::of`]): who is in the fleet, and who opts out.
    pub fn census(&self, selector: &Selector) -> Census {
        let workers = self.workers.state();
        let mut census = Census {
            workers: workers.len(),
            members: Vec::new(),
            opting_out: BTreeSet::new(),
        };
        for worker in workers {
            let name = worker.name_any();
            let Some(namespace) = self.namespace(&name) else {
                continue;
            };
            match membership::of(&namespace.metadata, selector) {
                Membership::Member => census.members.push((worker, namespace)),
                Membership::OptingOut => {
                    census.opting_out.insert(name);
                }
                Membership::Terminating => {}
            }
        }
        census
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

/// The namespaces with a NamespaceWorker, by membership. A terminating one is in neither list.
pub struct Census {
    /// How many NamespaceWorkers there are: the fleet the brake on reaping measures.
    pub workers: usize,
    /// In the fleet: each one's worker and Namespace.
    pub members: Vec<(Arc<WorkerView>, Arc<PartialObjectMeta<Namespace>>)>,
    /// Existing, not being deleted, and no longer matching the selector.
    pub opting_out: BTreeSet<String>,
}

/// Stores that no watch fills, for tests: what they show is written through [`Shown`].
#[cfg(test)]
pub(super) struct Shown {
    namespaces: reflector::store::Writer<PartialObjectMeta<Namespace>>,
    workers: reflector::store::Writer<WorkerView>,
    fleet: reflector::store::Writer<Fleet>,
    stamped: Vec<Shared<KindIndex>>,
}

#[cfg(test)]
impl Shown {
    /// Stores for `instance` that show nothing yet, but that each name of `names` is watched,
    /// and taken (`true`) or not by an object flotilla did not stamp. Any other name would
    /// start its watch.
    pub(super) fn stores(
        client: &Client,
        instance: &str,
        names: &[(ObjectKey, bool)],
        feed: Feed,
    ) -> (Stores, Shown) {
        use super::index::Bookkeeper;
        use super::taken::Taken;
        let (namespaces, namespaces_writer) = reflector::store();
        let (workers, workers_writer) = reflector::store();
        let (fleet, fleet_writer) = reflector::store();
        let stamped: Vec<Shared<KindIndex>> = Kind::ALL
            .iter()
            .map(|kind| Shared::fixed(KindIndex::new(*kind, instance)))
            .collect();
        let watched = names.iter().map(|(key, held)| {
            let mut taken = Taken::default();
            taken.relist_started();
            taken.relist_done();
            if *held {
                taken.apply(
                    &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(key.name.clone()),
                        namespace: Some(key.namespace.clone()),
                        ..Default::default()
                    },
                );
            }
            ((key.kind, key.name.clone()), Shared::fixed(taken))
        });
        let names = Arc::new(NameWatches {
            client: client.clone(),
            selector: ownership::foreign_selector(instance),
            feed,
            watches: Mutex::new(watched.collect()),
        });
        let stores = Stores {
            namespaces,
            stamped: stamped.clone(),
            names,
            workers,
            fleet,
        };
        let shown = Shown {
            namespaces: namespaces_writer,
            workers: workers_writer,
            fleet: fleet_writer,
            stamped,
        };
        (stores, shown)
    }

    pub(super) fn namespace(&mut self, namespace: PartialObjectMeta<Namespace>) {
        let event = watcher::Event::Apply(namespace);
        self.namespaces.apply_watcher_event(&event);
    }

    pub(super) fn worker(&mut self, worker: WorkerView) {
        self.workers
            .apply_watcher_event(&watcher::Event::Apply(worker));
    }

    pub(super) fn fleet(&mut self, fleet: Fleet) {
        self.fleet
            .apply_watcher_event(&watcher::Event::Apply(fleet));
    }

    /// A stamped object of `kind` with metadata `meta`.
    pub(super) fn stamped(
        &self,
        kind: Kind,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        use super::index::Bookkeeper;
        let index = Kind::ALL.iter().position(|k| *k == kind);
        if let Some(shared) = index.and_then(|i| self.stamped.get(i)) {
            shared.write().apply(meta);
        }
    }
}
