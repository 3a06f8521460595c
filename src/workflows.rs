//! Which Workflows a namespace's controller ignores. An Argo controller with an instanceID takes
//! only the Workflows labelled `workflows.argoproj.io/controller-instanceid: <its id>`, and one
//! without an instanceID only those without the label. Any other Workflow stays Pending for ever
//! with no error (argo-workflows #16863), so flotilla counts them and says so on the namespace's
//! NamespaceWorker.
//!
//! The counts come from a metadata-only watch of every Workflow, and no Workflow is kept: per
//! namespace a count per label value, and per live Workflow two hashes (its uid's and its
//! label's), so that a label edit moves it from one count to the other. A completed Workflow
//! costs nothing: no one waits on it.

use kube::api::ObjectMeta;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

pub const INSTANCE_ID_LABEL: &str = "workflows.argoproj.io/controller-instanceid";
/// Set by Argo's controller on a finished Workflow.
pub const COMPLETED_LABEL: &str = "workflows.argoproj.io/completed";
/// Set by Argo's controller to the Workflow's phase: `Running` counts against `parallelism`.
pub const PHASE_LABEL: &str = "workflows.argoproj.io/phase";

/// What flotilla knows of one namespace's Workflows at a moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Seen {
    /// The watch has not listed them yet.
    #[default]
    NotListed,
    /// The Workflow CRD is not installed: there are none, and none can be created.
    CrdMissing,
    /// They cannot be listed, for this reason (say, RBAC).
    Failed(String),
    Listed(Counts),
}

/// One namespace's live Workflows, by the instanceid label they carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// `(label value, or None without the label; how many)`, sorted, no zero counts.
    pub by_label: Vec<(Option<String>, u32)>,
}

impl Counts {
    /// How many of them a controller with `instance_id` (None: without one) ignores.
    pub fn ignored(&self, instance_id: Option<&str>) -> u32 {
        ignored_of(&self.by_label, instance_id)
    }

    /// How many of them a controller with `instance_id` runs.
    pub fn taken(&self, instance_id: Option<&str>) -> u32 {
        let all: u32 = self.by_label.iter().map(|(_, n)| n).sum();
        all - self.ignored(instance_id)
    }
}

/// Every namespace's live Workflows. Each change returns the namespace whose counts it changed,
/// if any: a Workflow's status updates change nothing here, and queue nothing.
#[derive(Debug, Default)]
pub struct Tally {
    namespaces: HashMap<String, NamespaceTally>,
    /// What has been listed since the watch (re)started; replaces the above once complete.
    relist: Option<HashMap<String, NamespaceTally>>,
}

#[derive(Debug, Default, Clone, PartialEq)]
struct NamespaceTally {
    /// Per live Workflow (its uid's hash), its label's hash.
    workflows: HashMap<u64, u64>,
    /// Per label hash, the label and how many live Workflows carry it.
    labels: HashMap<u64, (Option<String>, u32)>,
    /// The running ones among them (their uid's hash), by their label's hash: what the fleet's
    /// budget counts (crate::budget). A phase change is not news for the namespace's status.
    running: HashMap<u64, u64>,
}

impl NamespaceTally {
    fn counts(&self) -> Counts {
        let mut by_label: Vec<_> = self.labels.values().cloned().collect();
        by_label.sort();
        Counts { by_label }
    }

    /// Records the Workflow's current label (None: it is gone or completed) and whether it
    /// runs; whether the counts by label changed.
    fn set(&mut self, workflow: u64, label: Option<Option<&str>>, running: bool) -> bool {
        let new = label.map(|l| (hash(&l), l));
        match new {
            Some((h, _)) if running => self.running.insert(workflow, h),
            _ => self.running.remove(&workflow),
        };
        let old = self.workflows.get(&workflow).copied();
        if old == new.map(|(h, _)| h) {
            return false;
        }
        if let Some(old) = old {
            self.workflows.remove(&workflow);
            if let Some((_, n)) = self.labels.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    self.labels.remove(&old);
                }
            }
        }
        if let Some((h, label)) = new {
            self.workflows.insert(workflow, h);
            self.labels
                .entry(h)
                .or_insert_with(|| (label.map(str::to_string), 0))
                .1 += 1;
        }
        true
    }
}

impl Tally {
    /// A Workflow was created or changed.
    pub fn apply(&mut self, meta: &ObjectMeta) -> Option<String> {
        let (namespace, workflow) = key(meta)?;
        let changed = self
            .namespaces
            .entry(namespace.to_string())
            .or_default()
            .set(workflow, live_label(meta), runs(meta));
        self.drop_if_empty(namespace);
        changed.then(|| namespace.to_string())
    }

    pub fn delete(&mut self, meta: &ObjectMeta) -> Option<String> {
        let (namespace, workflow) = key(meta)?;
        let changed = self
            .namespaces
            .get_mut(namespace)
            .is_some_and(|tally| tally.set(workflow, None, false));
        self.drop_if_empty(namespace);
        changed.then(|| namespace.to_string())
    }

    /// The watch (re)starts with a full list: until it is complete, the old counts answer.
    pub fn relist_started(&mut self) {
        self.relist = Some(HashMap::new());
    }

    pub fn relisted(&mut self, meta: &ObjectMeta) {
        let (Some(relist), Some((namespace, workflow))) = (self.relist.as_mut(), key(meta)) else {
            return;
        };
        if let Some(label) = live_label(meta) {
            relist
                .entry(namespace.to_string())
                .or_default()
                .set(workflow, Some(label), runs(meta));
        }
    }

    /// The list is complete: it replaces the old counts. Returns every namespace whose counts
    /// differ, sorted.
    pub fn relist_done(&mut self) -> Vec<String> {
        let Some(new) = self.relist.take() else {
            return Vec::new();
        };
        let old = std::mem::replace(&mut self.namespaces, new);
        let mut changed: Vec<String> = old
            .iter()
            .filter(|(ns, tally)| {
                self.namespaces.get(*ns).map(NamespaceTally::counts) != Some(tally.counts())
            })
            .map(|(ns, _)| ns.clone())
            .chain(
                self.namespaces
                    .iter()
                    .filter(|(ns, _)| !old.contains_key(*ns))
                    .map(|(ns, _)| ns.clone()),
            )
            .collect();
        changed.sort();
        changed
    }

    /// The live Workflows of `namespace` by label (none: no counts at all).
    pub fn counts(&self, namespace: &str) -> Counts {
        self.namespaces
            .get(namespace)
            .map(NamespaceTally::counts)
            .unwrap_or_default()
    }

    /// How many Workflows of `namespace` a controller with `instance_id` runs now.
    pub fn running(&self, namespace: &str, instance_id: Option<&str>) -> u32 {
        let label = hash(&instance_id);
        self.namespaces.get(namespace).map_or(0, |tally| {
            tally.running.values().filter(|&&h| h == label).count() as u32
        })
    }

    /// The namespaces with live Workflows.
    pub fn active(&self) -> impl Iterator<Item = &str> {
        self.namespaces.keys().map(String::as_str)
    }

    /// How many live Workflows of `namespace` a controller with `instance_id` ignores.
    pub fn ignored(&self, namespace: &str, instance_id: Option<&str>) -> u32 {
        self.namespaces
            .get(namespace)
            .map_or(0, |tally| ignored_of(tally.labels.values(), instance_id))
    }

    /// Every Workflow counted.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.namespaces.values().map(|t| t.workflows.len()).sum()
    }

    /// The live Workflows of `namespace`, whatever their label.
    pub fn live_in(&self, namespace: &str) -> usize {
        self.namespaces
            .get(namespace)
            .map_or(0, |t| t.workflows.len())
    }

    fn drop_if_empty(&mut self, namespace: &str) {
        if self
            .namespaces
            .get(namespace)
            .is_some_and(|t| t.workflows.is_empty())
        {
            self.namespaces.remove(namespace);
        }
    }
}

/// Of `(label, count)` pairs, the count a controller with `instance_id` ignores.
fn ignored_of<'a>(
    labels: impl IntoIterator<Item = &'a (Option<String>, u32)>,
    instance_id: Option<&str>,
) -> u32 {
    labels
        .into_iter()
        .filter(|(label, _)| label.as_deref() != instance_id)
        .map(|(_, n)| n)
        .sum()
}

/// The Workflow's namespace and its uid's hash (its name's if the uid is missing).
fn key(meta: &ObjectMeta) -> Option<(&str, u64)> {
    let namespace = meta.namespace.as_deref()?;
    let id = meta.uid.as_deref().or(meta.name.as_deref())?;
    Some((namespace, hash(&id)))
}

/// The instanceid label of a live Workflow (`Some(None)`: live, without the label); `None` for a
/// completed one.
fn live_label(meta: &ObjectMeta) -> Option<Option<&str>> {
    let labels = meta.labels.as_ref();
    let completed = labels
        .and_then(|l| l.get(COMPLETED_LABEL))
        .is_some_and(|v| v == "true");
    (!completed).then(|| {
        labels
            .and_then(|l| l.get(INSTANCE_ID_LABEL))
            .map(String::as_str)
    })
}

/// Whether Argo's controller shows the Workflow running.
fn runs(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(PHASE_LABEL))
        .is_some_and(|phase| phase == "Running")
}

fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests;
