//! A NamespaceWorker as the watch keeps it: one per opted-in namespace, so kept small. Its
//! status is held as JSON, one allocation a third the size of the parsed form's many small ones,
//! and parsed only by that namespace's reconcile; what the rollout reads of every worker every
//! second is read once, as the watch event arrives.

use crate::rollout::Member;
use crate::rollout::member::member;
use crate::status::{NamespaceWorker, Phase, WorkerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use kube::{Resource, ResourceExt};
use serde::Deserialize;
use std::borrow::Cow;

/// Deserialized as a NamespaceWorker (`Api<WorkerView>` watches NamespaceWorkers), then made
/// small.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "NamespaceWorker")]
pub struct WorkerView {
    pub metadata: ObjectMeta,
    /// Its status as JSON; `None` until flotilla writes one.
    status: Option<Box<str>>,
    /// What the rollout reads of it; not a canary (that is the config's to say).
    pub member: Member,
    /// Its phase, for the leader's count of the fleet by phase (`flotilla_namespaces`).
    pub phase: Option<Phase>,
    /// Its share of the fleet's budget as last rendered, for the leader's allocation.
    pub share: Option<u32>,
}

impl From<NamespaceWorker> for WorkerView {
    fn from(worker: NamespaceWorker) -> WorkerView {
        let member = member(&worker.name_any(), false, worker.status.as_ref());
        WorkerView {
            phase: worker.status.as_ref().map(|s| s.phase),
            share: worker.status.as_ref().and_then(|s| s.share),
            status: worker
                .status
                .and_then(|s| serde_json::to_string(&s).ok())
                .map(String::into_boxed_str),
            metadata: worker.metadata,
            member,
        }
    }
}

impl WorkerView {
    /// Its status, parsed. The JSON was written from a [`WorkerStatus`] when the event came,
    /// so it parses back to the same.
    pub fn status(&self) -> Option<WorkerStatus> {
        serde_json::from_str(self.status.as_deref()?).ok()
    }
}

impl Resource for WorkerView {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        NamespaceWorker::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        NamespaceWorker::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        NamespaceWorker::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        NamespaceWorker::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Condition, Phase, StampedRef};

    fn worker(status: Option<WorkerStatus>) -> serde_json::Value {
        let mut worker = NamespaceWorker::new(
            "team-a",
            crate::status::NamespaceWorkerSpec {
                namespace: "team-a".into(),
            },
        );
        worker.metadata.resource_version = Some("42".into());
        worker.status = status;
        serde_json::to_value(worker).unwrap_or_default()
    }

    #[test]
    fn a_worker_read_from_the_api_gives_back_its_status_and_what_the_rollout_reads() {
        let status = WorkerStatus {
            phase: Phase::Ready,
            message: "1/1 replicas ready".into(),
            revision: "43fda9d807afc526".into(),
            revision_since: "2026-12-01T10:00:00Z".into(),
            objects: vec![StampedRef {
                kind: "ConfigMap".into(),
                namespace: "team-a".into(),
                name: "workflow-controller-configmap".into(),
            }],
            workflows_ignored: Some(2),
            conditions: vec![Condition {
                type_: "Available".into(),
                status: "True".into(),
                reason: "MinimumReplicasAvailable".into(),
                message: "1/1".into(),
                last_transition_time: "2026-12-01T10:01:00Z".into(),
            }],
            ..WorkerStatus::default()
        };
        let view: WorkerView = serde_json::from_value(worker(Some(status.clone()))).unwrap();
        assert_eq!(view.status(), Some(status.clone()));
        assert_eq!(view.member, member("team-a", false, Some(&status)));
        assert_eq!(view.resource_version().as_deref(), Some("42"));
        assert_eq!(
            view.object_ref(&()).kind.as_deref(),
            Some("NamespaceWorker")
        );

        let bare: WorkerView = serde_json::from_value(worker(None)).unwrap();
        assert_eq!(bare.status(), None);
        assert_eq!(bare.member, member("team-a", false, None));
    }
}
