//! The watch of every Workflow in the cluster, metadata only, counted per namespace by the
//! instanceid label they carry (crate::workflows): what a NamespaceWorker's `WorkflowsIgnored`
//! says. Argo's CRDs may be missing, and be installed while flotilla runs: until they are, the
//! API server is asked every few seconds whether it serves them, the NamespaceWorkers say so,
//! and one line is logged, not one per attempt.

use super::queue::WorkQueue;
use super::watches::{StampedMeta, Stores, watch_config};
use crate::sync::{read, write};
use crate::workflows::{Seen, Tally};
use futures::StreamExt;
use kube::api::{Api, ApiResource, ObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// How often Workflows are looked for while their CRD is missing or they cannot be listed.
const LOOK_AGAIN: Duration = Duration::from_secs(5);
/// The longest wait between two attempts of a failing watch.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whether the Workflows could be listed, across every namespace.
#[derive(Debug, Clone, PartialEq)]
enum Listing {
    NotListed,
    CrdMissing,
    Failed(String),
    Listed,
}

pub struct Workflows {
    state: RwLock<(Listing, Tally)>,
    /// Per namespace, the instanceID its controller was last rendered with: a Workflow whose
    /// change leaves the namespace's ignored count as it was queues nothing (a new, labelled
    /// Workflow is no news for its NamespaceWorker).
    expected: RwLock<HashMap<String, Option<String>>>,
    /// Becomes true once the first attempt to list told something: the reconcilers wait for it,
    /// so that no NamespaceWorker is written twice at start-up, first without the counts.
    known: watch::Sender<bool>,
}

impl Workflows {
    /// Starts the watch; it runs until the process ends.
    pub fn start(client: &Client, queue: &Arc<WorkQueue>, stores: &Stores) -> Arc<Workflows> {
        let workflows = Arc::new(Workflows {
            state: RwLock::new((Listing::NotListed, Tally::default())),
            expected: RwLock::default(),
            known: watch::Sender::new(false),
        });
        let feed = Feed {
            workflows: Arc::clone(&workflows),
            queue: Arc::clone(queue),
            stores: stores.clone(),
        };
        tokio::spawn(feed.run(client.clone()));
        workflows
    }

    /// What is known of `namespace`'s Workflows.
    pub fn seen(&self, namespace: &str) -> Seen {
        let state = read(&self.state);
        match &state.0 {
            Listing::NotListed => Seen::NotListed,
            Listing::CrdMissing => Seen::CrdMissing,
            Listing::Failed(reason) => Seen::Failed(reason.clone()),
            Listing::Listed => Seen::Listed(state.1.counts(namespace)),
        }
    }

    /// What `namespace`'s controller was rendered with (None: no instanceID).
    pub fn expect(&self, namespace: &str, instance_id: Option<&str>) {
        let known = read(&self.expected).get(namespace).map(Option::as_deref) == Some(instance_id);
        if !known {
            write(&self.expected).insert(namespace.to_string(), instance_id.map(str::to_string));
        }
    }

    /// The namespace was reaped: nothing is expected of it any more.
    pub fn forget(&self, namespace: &str) {
        write(&self.expected).remove(namespace);
    }

    pub async fn wait_until_known(&self) {
        let _ = self.known.subscribe().wait_for(|known| *known).await;
    }
}

fn resource() -> ApiResource {
    ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Workflow".into(),
        plural: "workflows".into(),
    }
}

/// The watch's side: what it sees goes into the tally, and the namespaces whose counts changed
/// are queued (only those with a NamespaceWorker: the others have no one to tell).
struct Feed {
    workflows: Arc<Workflows>,
    queue: Arc<WorkQueue>,
    stores: Stores,
}

impl Feed {
    async fn run(self, client: Client) {
        let api = Api::<StampedMeta>::all_with(client.clone(), &resource());
        let mut logged = None;
        loop {
            // Discovery, not a LIST: looking costs the API server next to nothing, however long
            // the CRD stays missing. Whether flotilla may list them, the watch finds out.
            match client
                .list_api_group_resources("argoproj.io/v1alpha1")
                .await
            {
                Ok(group) if group.resources.iter().any(|r| r.name == "workflows") => {
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
    async fn watch(&self, api: &Api<StampedMeta>, logged: &mut Option<String>) {
        let mut events = std::pin::pin!(watcher::watcher(api.clone(), watch_config()));
        let mut backoff = Duration::from_secs(1);
        while let Some(event) = events.next().await {
            let changed = match event {
                Ok(Event::Init) => {
                    write(&self.workflows.state).1.relist_started();
                    None
                }
                Ok(Event::InitApply(wf)) => {
                    write(&self.workflows.state).1.relisted(&wf.metadata);
                    None
                }
                Ok(Event::InitDone) => {
                    let changed = write(&self.workflows.state).1.relist_done();
                    let live = read(&self.workflows.state).1.live();
                    tracing::info!(
                        live,
                        "listed the Workflows: counting those each controller ignores"
                    );
                    if !self.set(Listing::Listed, logged) {
                        self.queue(changed);
                    }
                    None
                }
                Ok(Event::Apply(wf)) => self.news(&wf.metadata, Tally::apply),
                Ok(Event::Delete(wf)) => self.news(&wf.metadata, Tally::delete),
                Err(e) if not_found(&e) => {
                    write(&self.workflows.state).1 = Tally::default();
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
            self.queue(changed);
        }
    }

    /// Records a Workflow's change; its namespace if that is news for its NamespaceWorker: its
    /// ignored count changed, or its controller's instanceID is not known yet.
    fn news(
        &self,
        meta: &ObjectMeta,
        change: fn(&mut Tally, &ObjectMeta) -> Option<String>,
    ) -> Option<String> {
        let namespace = meta.namespace.as_deref()?;
        // Every Workflow status update comes here: nothing is copied. Locks are taken in this
        // order only (`expect` takes `expected` alone).
        let expected = read(&self.workflows.expected);
        let expected = expected.get(namespace);
        let mut state = write(&self.workflows.state);
        let ignored = |tally: &Tally| expected.map(|id| tally.ignored(namespace, id.as_deref()));
        let before = ignored(&state.1);
        let changed = change(&mut state.1, meta)?;
        match (before, ignored(&state.1)) {
            (Some(before), Some(after)) if before == after => None,
            _ => Some(changed),
        }
    }

    /// A failure to list: what NamespaceWorkers say only until a list works (afterwards the
    /// counts stand, and the watch catches up when it is back). Its first reason stays what they
    /// say: a reason that changes on every attempt would rewrite every NamespaceWorker each time.
    fn failed(&self, reason: String, logged: &mut Option<String>) {
        let listing = read(&self.workflows.state).0.clone();
        if matches!(listing, Listing::NotListed | Listing::CrdMissing) {
            self.set(Listing::Failed(reason), logged);
        } else if logged.as_deref() != Some(reason.as_str()) {
            tracing::warn!(error = %reason, "the Workflow watch failed; retrying");
            *logged = Some(reason);
        }
    }

    /// A new listing state; every NamespaceWorker is told, and the change is logged once.
    /// Whether it changed.
    fn set(&self, listing: Listing, logged: &mut Option<String>) -> bool {
        let changed = {
            let mut state = write(&self.workflows.state);
            let changed = state.0 != listing;
            if changed {
                state.0 = listing.clone();
            }
            changed
        };
        self.workflows.known.send_replace(true);
        if !changed {
            return false;
        }
        let line = match &listing {
            Listing::CrdMissing => Some(
                "Argo's Workflow CRD (workflows.argoproj.io) is not installed: NamespaceWorkers say so, and ignored Workflows are counted once it is".to_string(),
            ),
            Listing::Failed(reason) => Some(format!("cannot list Workflows, retrying: {reason}")),
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
