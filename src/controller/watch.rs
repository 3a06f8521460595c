//! One watch as a task: it feeds an in-memory view (a reflector store, or bookkeeping of
//! metadata such as the stamped objects' index) and turns every change into the name of the
//! namespace to reconcile. Watches retry with backoff and relist by themselves; their failures
//! are counted.

use super::index::Bookkeeper;
use super::queue::WorkQueue;
use crate::sync::{read, write};
use crate::telemetry::Metrics;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use std::fmt::Debug;
use std::sync::{Arc, RwLock, RwLockReadGuard};
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

    /// What a watch that listed it would keep, with no watch running: for tests.
    #[cfg(test)]
    pub(super) fn fixed(book: B) -> Shared<B> {
        Shared {
            book: Arc::new(RwLock::new(book)),
            ready: watch::channel(true).1,
        }
    }

    #[cfg(test)]
    pub(super) fn write(&self) -> std::sync::RwLockWriteGuard<'_, B> {
        write(&self.book)
    }

    /// Waits until its first list is complete.
    pub(super) async fn wait_until_ready(&self) {
        let _ = self.ready.clone().wait_for(|ready| *ready).await;
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
    pub(super) fn new(queue: &Arc<WorkQueue>, metrics: &Arc<Metrics>) -> Feed {
        Feed {
            queue: Arc::clone(queue),
            metrics: Arc::clone(metrics),
        }
    }

    fn failed(&self, what: &str, error: &watcher::Error) {
        self.metrics.watch_error(error);
        tracing::warn!(watch = %what, error = %error, "watch error; retrying");
    }
}

/// Watches end server-side after a minute and are resumed: a watch that went silent (say, opened
/// against an API server that was just restarting) is replaced within a minute, not five.
pub(super) fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(60)
}

/// A watch into a reflector store: for the objects whose content is read (Namespaces' labels,
/// NamespaceWorkers' status). `shown` sees each object once the store holds it.
pub(super) fn spawn_reflected<K>(
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
