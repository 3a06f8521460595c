//! The watch of one of Argo's kinds across the cluster (Workflows, CronWorkflows), fed into a
//! tally that keeps only what flotilla needs of them. Argo's CRDs may be missing, and be
//! installed or deleted while flotilla runs: until one is served, the API server is asked every
//! few seconds whether it is (discovery, not a LIST), the NamespaceWorkers are told, and one
//! line is logged, not one per attempt.

use super::queue::WorkQueue;
use super::stores::Stores;
use super::watch::watch_config;
use crate::sync::{read, write};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// How often the kind is looked for while its CRD is missing or it cannot be listed.
const LOOK_AGAIN: Duration = Duration::from_secs(5);
/// The longest wait between two attempts of a failing watch.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One of Argo's kinds, and the tally its watch feeds. The tally keeps its own locks: its
/// readers are the reconcilers.
pub trait Kind: Send + Sync + 'static {
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + 'static;
    /// Its plural, as discovery lists it (`workflows`).
    const PLURAL: &'static str;
    /// Its kind (`Workflow`), and what the log calls them (`Workflows`).
    const KIND: &'static str;
    const NAME: &'static str;
    fn api(client: &Client) -> Api<Self::Object>;
    /// The watch (re)starts with a full list: until it is complete, the old tally answers.
    fn relist_started(&self);
    fn relisted(&self, object: &Self::Object);
    /// The list is complete: the namespaces whose tally changed.
    fn relist_done(&self) -> Vec<String>;
    /// An object created or changed: its namespace if that is news for its NamespaceWorker.
    fn apply(&self, object: &Self::Object) -> Option<String>;
    fn delete(&self, object: &Self::Object) -> Option<String>;
    /// The CRD is gone, and every object with it.
    fn clear(&self);
}

/// Whether the kind could be listed, across every namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Listing {
    NotListed,
    CrdMissing,
    Failed(String),
    Listed,
}

/// A kind's tally and whether it could be listed.
pub struct Watched<K: Kind> {
    pub tally: K,
    listing: RwLock<Listing>,
    /// Becomes true once the first attempt to list told something: the reconcilers wait for it,
    /// so that no NamespaceWorker is written twice at start-up, first without it.
    known: watch::Sender<bool>,
}

impl<K: Kind> Watched<K> {
    /// Starts the watch; it runs until the process ends.
    pub fn start(tally: K, client: &Client, queue: &Arc<WorkQueue>, stores: &Stores) -> Arc<Self> {
        let watched = Arc::new(Watched {
            tally,
            listing: RwLock::new(Listing::NotListed),
            known: watch::Sender::new(false),
        });
        let feed = Feed {
            watched: Arc::clone(&watched),
            queue: Arc::clone(queue),
            stores: stores.clone(),
        };
        tokio::spawn(feed.run(client.clone()));
        watched
    }

    /// A tally that is never listed: for tests.
    #[cfg(test)]
    pub fn unlisted(tally: K) -> Arc<Self> {
        Arc::new(Watched {
            tally,
            listing: RwLock::new(Listing::NotListed),
            known: watch::Sender::new(true),
        })
    }

    /// A tally listed already, fed by the test: for tests.
    #[cfg(test)]
    pub fn listed(tally: K) -> Arc<Self> {
        let watched = Self::unlisted(tally);
        *write(&watched.listing) = Listing::Listed;
        watched
    }

    pub fn listing(&self) -> Listing {
        read(&self.listing).clone()
    }

    pub async fn wait_until_known(&self) {
        let _ = self.known.subscribe().wait_for(|known| *known).await;
    }
}

/// The watch's side: what it sees goes into the tally, and the namespaces it is news for are
/// queued (only those with a NamespaceWorker: the others have no one to tell).
struct Feed<K: Kind> {
    watched: Arc<Watched<K>>,
    queue: Arc<WorkQueue>,
    stores: Stores,
}

impl<K: Kind> Feed<K> {
    async fn run(self, client: Client) {
        let api = K::api(&client);
        let mut logged = None;
        let group = "argoproj.io/v1alpha1";
        loop {
            // Discovery, not a LIST: looking costs the API server next to nothing, however long
            // the CRD stays missing. Whether flotilla may list them, the watch finds out.
            match client.list_api_group_resources(group).await {
                Ok(served) if served.resources.iter().any(|r| r.name == K::PLURAL) => {
                    self.watch(&api, &mut logged).await;
                }
                Ok(_) => {
                    self.set(Listing::CrdMissing, &mut logged);
                }
                // An unknown group is a bare "404 page not found", without a Status reason.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    self.set(Listing::CrdMissing, &mut logged);
                }
                Err(e) => self.failed(e.to_string(), &mut logged),
            };
            tokio::time::sleep(LOOK_AGAIN).await;
        }
    }

    /// Follows the watch until the CRD is gone.
    async fn watch(&self, api: &Api<K::Object>, logged: &mut Option<String>) {
        let mut events = std::pin::pin!(watcher::watcher(api.clone(), watch_config()));
        let mut backoff = Duration::from_secs(1);
        let tally = &self.watched.tally;
        while let Some(event) = events.next().await {
            let news = match event {
                Ok(Event::Init) => {
                    tally.relist_started();
                    Vec::new()
                }
                Ok(Event::InitApply(object)) => {
                    tally.relisted(&object);
                    Vec::new()
                }
                Ok(Event::InitDone) => {
                    let changed = tally.relist_done();
                    tracing::info!("listed the {}", K::NAME);
                    if self.set(Listing::Listed, logged) {
                        Vec::new()
                    } else {
                        changed
                    }
                }
                Ok(Event::Apply(object)) => tally.apply(&object).into_iter().collect(),
                Ok(Event::Delete(object)) => tally.delete(&object).into_iter().collect(),
                Err(e) if not_found(&e) => {
                    tally.clear();
                    self.set(Listing::CrdMissing, logged);
                    return;
                }
                Err(e) => {
                    self.failed(e.to_string(), logged);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            backoff = Duration::from_secs(1);
            self.queue(news);
        }
    }

    /// A failure to list: what NamespaceWorkers say only until a list works (afterwards the
    /// tally stands, and the watch catches up when it is back). Its first reason stays what they
    /// say: a reason that changes on every attempt would rewrite every NamespaceWorker each time.
    fn failed(&self, reason: String, logged: &mut Option<String>) {
        let listing = self.watched.listing();
        if matches!(listing, Listing::NotListed | Listing::CrdMissing) {
            self.set(Listing::Failed(reason), logged);
        } else if logged.as_deref() != Some(reason.as_str()) {
            tracing::warn!(error = %reason, "the {} watch failed; retrying", K::NAME);
            *logged = Some(reason);
        }
    }

    /// A new listing state; every NamespaceWorker is told, and the change is logged once.
    /// Whether it changed.
    fn set(&self, listing: Listing, logged: &mut Option<String>) -> bool {
        let changed = {
            let mut state = write(&self.watched.listing);
            let changed = *state != listing;
            if changed {
                *state = listing.clone();
            }
            changed
        };
        self.watched.known.send_replace(true);
        if !changed {
            return false;
        }
        let line = match &listing {
            Listing::CrdMissing => Some(format!(
                "Argo's {} CRD ({}.argoproj.io) is not installed: NamespaceWorkers say so, and flotilla follows them once it is",
                K::KIND,
                K::PLURAL
            )),
            Listing::Failed(reason) => Some(format!("cannot list {}, retrying: {reason}", K::NAME)),
            Listing::NotListed | Listing::Listed => None,
        };
        if let Some(line) = line {
            if logged.as_deref() != Some(line.as_str()) {
                tracing::warn!("{line}");
            }
            *logged = Some(line);
        } else {
            *logged = None;
        }
        for worker in self.stores.workers() {
            self.queue.add(&worker.name_any());
        }
        true
    }

    fn queue(&self, namespaces: impl IntoIterator<Item = String>) {
        for namespace in namespaces {
            if self.stores.worker(&namespace).is_some() {
                self.queue.add(&namespace);
            }
        }
    }
}

/// The watch says the resource is gone (its CRD was deleted).
fn not_found(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 404,
        watcher::Error::WatchError(status) => status.code == 404,
        _ => false,
    }
}
