//! The NamespaceWorker resource: flotilla's record of each opted-in namespace's controller, as
//! `kubectl get nsw` shows it, and the object flotilla creates for a namespace.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What flotilla keeps for one opted-in namespace.
// clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "flotilla.dev",
    version = "v1alpha1",
    kind = "NamespaceWorker",
    shortname = "nsw",
    doc = "The namespaced workflow-controller flotilla keeps for one opted-in namespace; one per namespace, named after it.",
    status = "WorkerStatus",
    derive = "PartialEq",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(name = "Revision", type_ = "string", json_path = ".status.revision"),
    printcolumn(name = "Image", type_ = "string", json_path = ".status.image"),
    printcolumn(
        name = "Ignored",
        type_ = "integer",
        json_path = ".status.workflowsIgnored"
    ),
    printcolumn(name = "Share", type_ = "integer", json_path = ".status.share"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceWorkerSpec {
    /// The opted-in namespace whose workflow-controller this is.
    pub namespace: String,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    pub phase: Phase,
    /// What is wrong and what to do, in plain words.
    pub message: String,
    /// Ready replicas of the controller Deployment, as `ready/desired`.
    pub ready: String,
    pub ready_replicas: i64,
    pub desired_replicas: i64,
    /// The templates-and-values revision last applied; left out until there is one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// When `revision` became what it is: a rollout's soak counts from the later of this and
    /// the controller's last turn to Available, never from an older healthy signal.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision_since: String,
    /// The revision the last reconcile failed at (render failed, refused, in conflict); left
    /// out while it did not fail. While rendering fails `revision` stays what was applied
    /// before: this says whether the failure is at the revision a rollout moved it to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed_revision: String,
    /// The controller image last applied (left out until there is one, as `revision`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Everything stamped for this namespace.
    pub objects: Vec<StampedRef>,
    /// Live Workflows here that the controller ignores: their instanceid label is missing or
    /// another (condition `WorkflowsIgnored` says how to fix them). Left out while not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows_ignored: Option<u32>,
    /// Its share of the fleet's budget of running Workflows (`fleetParallelism`): its
    /// controller's `parallelism`, 1 while it holds none. Left out without a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<u32>,
    pub conditions: Vec<Condition>,
    /// When a reconcile last changed this status (status is written only on change).
    pub last_reconcile_time: String,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Applied; the controller Deployment has not been observed yet.
    #[default]
    Pending,
    /// The Deployment is rolling out or recovering, within the deadline.
    Progressing,
    Ready,
    /// The Deployment has been unavailable for longer than `degradedAfterSeconds`.
    Degraded,
    /// Templates or overrides failed for this namespace; nothing was changed.
    RenderFailed,
    /// The API server refused an object (invalid, forbidden, over a quota); nothing after it
    /// was applied. Retried with backoff: it recovers by itself once the cause is gone.
    ApplyFailed,
    /// A rendered object's name is taken by an object flotilla did not stamp.
    Conflict,
    /// Idle: its controller is scaled to zero until there is work (condition `Asleep`).
    Sleeping,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StampedRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Applied`, `Available`, `WorkflowsIgnored` or `Asleep`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: String,
}

/// The NamespaceWorker object (without status) flotilla creates for a namespace.
pub fn worker_object(
    namespace: &str,
    namespace_uid: Option<String>,
    instance: &str,
) -> NamespaceWorker {
    let mut worker = NamespaceWorker::new(
        namespace,
        NamespaceWorkerSpec {
            namespace: namespace.into(),
        },
    );
    worker.metadata.labels = Some(
        crate::ownership::labels(instance, namespace)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    );
    // Garbage-collected with its Namespace, even while flotilla is down.
    worker.metadata.owner_references = namespace_uid.map(|uid| {
        vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                name: namespace.into(),
                uid,
                ..Default::default()
            },
        ]
    });
    worker
}
