//! Every namespace's CronWorkflows, as much as a sleeping controller needs to be woken ahead of
//! their runs: each one's name, schedules, timezone and instanceid label, and nothing else.
//! Their metadata does not carry the schedule, so the watch reads whole objects, but only those
//! fields are deserialized ([`CronWorkflowView`]) and kept: about 200 bytes a CronWorkflow,
//! whatever its `workflowSpec`. A suspended or stopped one is not kept: it runs nothing.

use crate::sleep::CronEntry;
use crate::workflows::INSTANCE_ID_LABEL;
use kube::api::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashMap;

/// A CronWorkflow, of which only what its schedule needs is read.
#[derive(Debug, Clone, Deserialize)]
pub struct CronWorkflowView {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CronSpec,
    #[serde(default)]
    pub status: Option<CronStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronSpec {
    #[serde(default)]
    pub schedules: Vec<String>,
    /// Argo before v3.6: one schedule.
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub timezone: String,
    #[serde(default)]
    pub suspend: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CronStatus {
    /// `Stopped` once its `stopStrategy` held.
    #[serde(default)]
    pub phase: Option<String>,
}

impl kube::Resource for CronWorkflowView {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "CronWorkflow".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "argoproj.io".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "cronworkflows".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One kept CronWorkflow.
#[derive(Debug, Clone, PartialEq)]
struct Kept {
    label: Option<String>,
    entry: CronEntry,
}

/// Every namespace's CronWorkflows that run something. Each change returns the namespace whose
/// schedules it changed, if any: a status update (a run recorded) changes nothing here.
#[derive(Debug, Default)]
pub struct Tally {
    namespaces: HashMap<String, HashMap<String, Kept>>,
    /// What has been listed since the watch (re)started; replaces the above once complete.
    relist: Option<HashMap<String, HashMap<String, Kept>>>,
}

impl Tally {
    pub fn apply(&mut self, cron: &CronWorkflowView) -> Option<String> {
        let (namespace, name) = key(cron)?;
        let crons = self.namespaces.entry(namespace.to_string()).or_default();
        let changed = match kept(cron) {
            Some(new) => crons.insert(name.to_string(), new.clone()) != Some(new),
            None => crons.remove(name).is_some(),
        };
        self.drop_if_empty(namespace);
        changed.then(|| namespace.to_string())
    }

    pub fn delete(&mut self, cron: &CronWorkflowView) -> Option<String> {
        let (namespace, name) = key(cron)?;
        let removed = self
            .namespaces
            .get_mut(namespace)
            .is_some_and(|crons| crons.remove(name).is_some());
        self.drop_if_empty(namespace);
        removed.then(|| namespace.to_string())
    }

    pub fn relist_started(&mut self) {
        self.relist = Some(HashMap::new());
    }

    pub fn relisted(&mut self, cron: &CronWorkflowView) {
        let (Some(relist), Some((namespace, name)), Some(kept)) =
            (self.relist.as_mut(), key(cron), kept(cron))
        else {
            return;
        };
        relist
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string(), kept);
    }

    /// The list is complete: it replaces the old tally. Every namespace whose CronWorkflows
    /// differ, sorted.
    pub fn relist_done(&mut self) -> Vec<String> {
        let Some(new) = self.relist.take() else {
            return Vec::new();
        };
        let old = std::mem::replace(&mut self.namespaces, new);
        let mut changed: Vec<String> = old
            .keys()
            .chain(self.namespaces.keys())
            .filter(|ns| old.get(*ns) != self.namespaces.get(*ns))
            .cloned()
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }

    /// The CronWorkflows of `namespace`, each with its instanceid label (whose controller runs
    /// it: `sleep::run_by`), by name.
    pub fn of(&self, namespace: &str) -> Vec<(Option<String>, CronEntry)> {
        let mut entries: Vec<(Option<String>, CronEntry)> = self
            .namespaces
            .get(namespace)
            .into_iter()
            .flat_map(HashMap::values)
            .map(|kept| (kept.label.clone(), kept.entry.clone()))
            .collect();
        entries.sort_by(|a, b| a.1.cmp(&b.1));
        entries
    }

    fn drop_if_empty(&mut self, namespace: &str) {
        if self
            .namespaces
            .get(namespace)
            .is_some_and(HashMap::is_empty)
        {
            self.namespaces.remove(namespace);
        }
    }
}

fn key(cron: &CronWorkflowView) -> Option<(&str, &str)> {
    Some((
        cron.metadata.namespace.as_deref()?,
        cron.metadata.name.as_deref()?,
    ))
}

/// What is kept of a CronWorkflow that runs something.
fn kept(cron: &CronWorkflowView) -> Option<Kept> {
    let stopped = cron
        .status
        .as_ref()
        .is_some_and(|s| s.phase.as_deref() == Some("Stopped"));
    if cron.spec.suspend || stopped {
        return None;
    }
    let mut schedules = cron.spec.schedules.clone();
    schedules.extend(cron.spec.schedule.clone());
    Some(Kept {
        label: cron
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(INSTANCE_ID_LABEL))
            .cloned(),
        entry: CronEntry {
            name: cron.metadata.name.clone().unwrap_or_default(),
            schedules,
            timezone: cron.spec.timezone.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(namespace: &str, name: &str, extra: serde_json::Value) -> CronWorkflowView {
        let mut object = serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {INSTANCE_ID_LABEL: namespace}},
            "spec": {"schedules": ["0 * * * *"],
                     "workflowSpec": {"entrypoint": "main", "templates": [{"name": "main"}]}},
            "status": {"lastScheduledTime": "2026-12-04T10:00:00Z", "active": []},
        });
        json_patch(&mut object, extra);
        serde_json::from_value(object).unwrap()
    }

    /// Merges `patch` into `value` (RFC 7386).
    fn json_patch(value: &mut serde_json::Value, patch: serde_json::Value) {
        match (value, patch) {
            (serde_json::Value::Object(v), serde_json::Value::Object(p)) => {
                for (k, p) in p {
                    json_patch(v.entry(k).or_insert(serde_json::Value::Null), p);
                }
            }
            (v, p) => *v = p,
        }
    }

    /// What a controller with `instance_id` runs of `namespace`'s.
    fn run_by(tally: &Tally, namespace: &str, instance_id: Option<&str>) -> Vec<CronEntry> {
        crate::sleep::run_by(&tally.of(namespace), instance_id)
    }

    fn entry(name: &str, schedules: &[&str], timezone: &str) -> CronEntry {
        CronEntry {
            name: name.into(),
            schedules: schedules.iter().map(|s| s.to_string()).collect(),
            timezone: timezone.into(),
        }
    }

    #[test]
    fn only_a_schedule_change_is_news() {
        let mut tally = Tally::default();
        let hourly = cron("a", "hourly", serde_json::json!({}));
        assert_eq!(tally.apply(&hourly), Some("a".into()));
        // A run recorded in its status: nothing for a sleeping namespace.
        let ran = cron(
            "a",
            "hourly",
            serde_json::json!({"status": {"lastScheduledTime": "2026-12-04T11:00:00Z"}}),
        );
        assert_eq!(tally.apply(&ran), None);
        let tokyo = serde_json::json!({"spec": {"timezone": "Asia/Tokyo"}});
        assert_eq!(tally.apply(&cron("a", "hourly", tokyo)), Some("a".into()));
        assert_eq!(
            run_by(&tally, "a", Some("a")),
            vec![entry("hourly", &["0 * * * *"], "Asia/Tokyo")]
        );
        // Suspended or stopped: it runs nothing, as if gone.
        let suspended = cron(
            "a",
            "hourly",
            serde_json::json!({"spec": {"suspend": true}}),
        );
        assert_eq!(tally.apply(&suspended), Some("a".into()));
        assert_eq!(run_by(&tally, "a", Some("a")), Vec::new());
        assert_eq!(tally.apply(&suspended), None);
        let stopped = serde_json::json!({"status": {"phase": "Stopped"}});
        assert_eq!(tally.apply(&cron("a", "hourly", stopped)), None);
        assert_eq!(tally.apply(&hourly), Some("a".into()));
        assert_eq!(tally.delete(&hourly), Some("a".into()));
        assert_eq!(tally.delete(&hourly), None);
        assert!(tally.namespaces.is_empty());
    }

    #[test]
    fn a_controller_sees_the_crons_it_runs() {
        let mut tally = Tally::default();
        tally.apply(&cron("a", "mine", serde_json::json!({})));
        let other = serde_json::json!({"metadata": {"labels": {INSTANCE_ID_LABEL: "x"}}});
        tally.apply(&cron("a", "theirs", other));
        let old = serde_json::json!({"spec": {"schedules": [], "schedule": "5 4 * * *"},
                                     "metadata": {"labels": null}});
        tally.apply(&cron("a", "old", old));
        assert_eq!(
            run_by(&tally, "a", Some("a")),
            vec![entry("mine", &["0 * * * *"], "")]
        );
        assert_eq!(
            run_by(&tally, "a", None),
            vec![entry("old", &["5 4 * * *"], "")]
        );
        assert_eq!(run_by(&tally, "b", Some("b")), Vec::new());
    }

    #[test]
    fn a_relist_replaces_the_tally_and_names_what_changed() {
        let mut tally = Tally::default();
        tally.apply(&cron("a", "kept", serde_json::json!({})));
        tally.apply(&cron("b", "gone", serde_json::json!({})));
        tally.relist_started();
        tally.relisted(&cron("a", "kept", serde_json::json!({})));
        tally.relisted(&cron("c", "new", serde_json::json!({})));
        // The old tally answers until the list is complete.
        assert_eq!(run_by(&tally, "b", Some("b")).len(), 1);
        assert_eq!(tally.relist_done(), vec!["b".to_string(), "c".to_string()]);
        assert_eq!(run_by(&tally, "b", Some("b")), Vec::new());
        assert_eq!(run_by(&tally, "c", Some("c")).len(), 1);
        assert_eq!(tally.relist_done(), Vec::<String>::new());
    }
}
