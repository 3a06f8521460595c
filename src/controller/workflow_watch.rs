//! The watch of every Workflow in the cluster, metadata only (argo_watch.rs), counted per
//! namespace by the instanceid label they carry (crate::workflows): what a NamespaceWorker's
//! `WorkflowsIgnored` says, and whether a controller has Workflows to run (a sleeping one is
//! woken by the event of a new one). No Workflow is kept.

use super::argo_watch::{Kind, Listing, Watched};
use super::watch::StampedMeta;
use crate::sync::{read, write};
use crate::workflows::{Seen, Tally};
use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, ObjectMeta};
use std::collections::HashMap;
use std::sync::RwLock;

pub type Workflows = Watched<WorkflowTally>;

pub struct WorkflowTally {
    tally: RwLock<Tally>,
    /// Per namespace, the instanceID its controller was last rendered with: a Workflow whose
    /// change leaves the namespace's ignored count as it was, and its controller with or without
    /// work as it was, queues nothing (a fifth labelled Workflow is no news).
    expected: RwLock<HashMap<String, Option<String>>>,
    /// Per namespace, when its live Workflows last changed (one created, completed, deleted or
    /// relabelled): a controller has had nothing to do since then at most.
    changed_at: RwLock<HashMap<String, Timestamp>>,
    /// When this process started watching: what it knows of any namespace's idleness starts here.
    since: Timestamp,
}

impl Default for WorkflowTally {
    fn default() -> Self {
        WorkflowTally {
            tally: RwLock::default(),
            expected: RwLock::default(),
            changed_at: RwLock::default(),
            since: Timestamp::now(),
        }
    }
}

impl Watched<WorkflowTally> {
    /// What is known of `namespace`'s Workflows.
    pub fn seen(&self, namespace: &str) -> Seen {
        match self.listing() {
            Listing::NotListed => Seen::NotListed,
            Listing::CrdMissing => Seen::CrdMissing,
            Listing::Failed(reason) => Seen::Failed(reason),
            Listing::Listed => Seen::Listed(read(&self.tally.tally).counts(namespace)),
        }
    }

    /// `namespace`'s Workflows that a controller with `instance_id` runs now, and has live
    /// (running or waiting to start); `None` until they are listed.
    pub fn budget_counts(&self, namespace: &str, instance_id: Option<&str>) -> Option<(u32, u32)> {
        if !matches!(self.listing(), Listing::Listed) {
            return None;
        }
        let tally = read(&self.tally.tally);
        let live = tally.counts(namespace).taken(instance_id);
        Some((tally.running(namespace, instance_id).min(live), live))
    }

    /// The namespaces with live Workflows; `None` until they are listed.
    pub fn active(&self) -> Option<std::collections::BTreeSet<String>> {
        matches!(self.listing(), Listing::Listed).then(|| {
            read(&self.tally.tally)
                .active()
                .map(str::to_string)
                .collect()
        })
    }

    /// Since when `namespace`'s live Workflows are as they are, as far as this process knows.
    pub fn idle_since(&self, namespace: &str) -> Timestamp {
        let changed = read(&self.tally.changed_at).get(namespace).copied();
        changed.map_or(self.tally.since, |at| at.max(self.tally.since))
    }

    /// What `namespace`'s controller was rendered with (None: no instanceID).
    pub fn expect(&self, namespace: &str, instance_id: Option<&str>) {
        let expected = &self.tally.expected;
        let known = read(expected).get(namespace).map(Option::as_deref) == Some(instance_id);
        if !known {
            write(expected).insert(namespace.to_string(), instance_id.map(str::to_string));
        }
    }

    /// The namespace was reaped: nothing is expected of it any more.
    pub fn forget(&self, namespace: &str) {
        write(&self.tally.expected).remove(namespace);
        write(&self.tally.changed_at).remove(namespace);
    }
}

impl WorkflowTally {
    /// Records a Workflow's change; its namespace if that is news for its NamespaceWorker: its
    /// ignored count changed, its controller has work where it had none or none where it had
    /// some, or its controller's instanceID is not known yet.
    fn news(
        &self,
        meta: &ObjectMeta,
        change: fn(&mut Tally, &ObjectMeta) -> Option<String>,
    ) -> Option<String> {
        let namespace = meta.namespace.as_deref()?;
        // Every Workflow status update comes here: nothing is copied. Locks are taken in this
        // order only (`expect` takes `expected` alone).
        let expected = read(&self.expected);
        let expected = expected.get(namespace);
        let mut tally = write(&self.tally);
        let seen = |tally: &Tally| {
            (
                expected.map(|id| tally.ignored(namespace, id.as_deref())),
                tally.live_in(namespace) > 0,
            )
        };
        let before = seen(&tally);
        let changed = change(&mut tally, meta)?;
        write(&self.changed_at).insert(changed.clone(), Timestamp::now());
        match (before, seen(&tally)) {
            ((Some(before), busy), (Some(after), still)) if before == after && busy == still => {
                None
            }
            _ => Some(changed),
        }
    }
}

impl Kind for WorkflowTally {
    type Object = StampedMeta;
    const PLURAL: &'static str = "workflows";
    const KIND: &'static str = "Workflow";
    const NAME: &'static str = "Workflows";

    fn api(client: &Client) -> Api<StampedMeta> {
        let resource = ApiResource {
            group: "argoproj.io".into(),
            version: "v1alpha1".into(),
            api_version: "argoproj.io/v1alpha1".into(),
            kind: Self::KIND.into(),
            plural: Self::PLURAL.into(),
        };
        Api::all_with(client.clone(), &resource)
    }

    fn relist_started(&self) {
        write(&self.tally).relist_started();
    }

    fn relisted(&self, workflow: &StampedMeta) {
        write(&self.tally).relisted(&workflow.metadata);
    }

    fn relist_done(&self) -> Vec<String> {
        let changed = write(&self.tally).relist_done();
        let now = Timestamp::now();
        let mut changed_at = write(&self.changed_at);
        for namespace in &changed {
            changed_at.insert(namespace.clone(), now);
        }
        changed
    }

    fn apply(&self, workflow: &StampedMeta) -> Option<String> {
        self.news(&workflow.metadata, Tally::apply)
    }

    fn delete(&self, workflow: &StampedMeta) -> Option<String> {
        self.news(&workflow.metadata, Tally::delete)
    }

    fn clear(&self) {
        *write(&self.tally) = Tally::default();
    }
}
