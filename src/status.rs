//! The NamespaceWorker resource: flotilla's record of each opted-in namespace's controller, and
//! the pure function that computes its status from what a reconcile saw.

use crate::object::{ObjectKey, Stamped};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

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
    /// The templates-and-values revision last applied. Left out until there is one: 1.20 turns an
    /// empty string in a custom resource into null, which the schema then refuses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// The controller image last applied (left out until there is one, as `revision`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Everything stamped for this namespace.
    pub objects: Vec<StampedRef>,
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
    /// A rendered object's name is taken by an object flotilla did not stamp.
    Conflict,
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
    /// `Applied` or `Available`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: String,
}

/// What one reconcile of an opted-in namespace saw.
pub struct Observation<'a> {
    pub namespace: &'a str,
    /// The rendered set, or why rendering failed.
    pub rendered: Result<&'a [Stamped], String>,
    /// Objects left alone because flotilla did not stamp them.
    pub conflicts: &'a [(ObjectKey, String)],
    /// The controller Deployment's health, once its controller has looked at it.
    pub health: Option<&'a Health>,
    pub revision: &'a str,
    pub now: Timestamp,
    pub degraded_after: Duration,
}

/// Now, in whole seconds: the precision Kubernetes shows times with.
pub fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

/// The new status, and when to look again if a deadline is pending (Progressing -> Degraded).
pub fn compute(
    previous: Option<&WorkerStatus>,
    seen: &Observation,
) -> (WorkerStatus, Option<Duration>) {
    let now = seen.now.to_string();
    let keep = |f: fn(&WorkerStatus) -> String| previous.map(f).unwrap_or_default();
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        let unchanged = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status);
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: unchanged.map_or(now.clone(), |c| c.last_transition_time.clone()),
        }
    };

    let (applied, revision, image, objects) = match &seen.rendered {
        Err(errors) => (
            condition("Applied", "False", "RenderFailed", errors.clone()),
            keep(|p| p.revision.clone()),
            keep(|p| p.image.clone()),
            previous.map(|p| p.objects.clone()).unwrap_or_default(),
        ),
        Ok(rendered) => {
            let applied = if seen.conflicts.is_empty() {
                condition(
                    "Applied",
                    "True",
                    "Applied",
                    format!(
                        "{} objects in sync at revision {}",
                        rendered.len(),
                        seen.revision
                    ),
                )
            } else {
                let reasons: Vec<&str> = seen.conflicts.iter().map(|(_, m)| m.as_str()).collect();
                condition("Applied", "False", "Conflict", reasons.join("; "))
            };
            let objects = rendered
                .iter()
                .filter(|o| !seen.conflicts.iter().any(|(key, _)| *key == o.key))
                .map(|o| StampedRef {
                    kind: o.key.kind.name().into(),
                    namespace: o.key.namespace.clone(),
                    name: o.key.name.clone(),
                })
                .collect();
            (
                applied,
                seen.revision.to_string(),
                controller_image(rendered),
                objects,
            )
        }
    };

    let available = match (seen.health, &seen.rendered) {
        (Some(h), _) if h.available => {
            condition("Available", "True", "MinimumReplicasAvailable", h.summary())
        }
        (Some(h), _) => condition("Available", "False", &h.reason, h.summary()),
        // Not refreshed while rendering fails: keep what was last known.
        (None, Err(_)) => previous
            .and_then(|p| {
                p.conditions
                    .iter()
                    .find(|c| c.type_ == "Available")
                    .cloned()
            })
            .unwrap_or_else(|| {
                condition(
                    "Available",
                    "Unknown",
                    "NotObserved",
                    "the controller Deployment has not been observed yet".into(),
                )
            }),
        (None, Ok(_)) => condition(
            "Available",
            "Unknown",
            "NotObserved",
            "the controller Deployment has not been observed yet".into(),
        ),
    };

    let unavailable_for = since(&available.last_transition_time, seen.now);
    let mut recheck = None;
    let (phase, message) = match (
        &seen.rendered,
        seen.conflicts.is_empty(),
        available.status.as_str(),
    ) {
        (Err(errors), _, _) => (
            Phase::RenderFailed,
            format!(
                "rendering failed, so nothing was applied or removed and the previously stamped objects are kept: {errors}. Fix the template or the namespace annotation; the worker recovers by itself."
            ),
        ),
        (Ok(_), false, _) => (
            Phase::Conflict,
            format!(
                "{}. Delete or rename the existing object (flotilla then stamps its own), or stop rendering that name.",
                applied.message
            ),
        ),
        (Ok(_), true, "Unknown") => (
            Phase::Pending,
            "applied; waiting for the controller Deployment to be observed".into(),
        ),
        (Ok(_), true, "True") => (Phase::Ready, available.message.clone()),
        (Ok(_), true, _) if unavailable_for >= seen.degraded_after => (
            Phase::Degraded,
            format!(
                "unavailable since {}: {}. Check the controller's pods: kubectl -n {} get pods -l app=workflow-controller; kubectl -n {} describe deployment workflow-controller",
                available.last_transition_time,
                available.message.trim_end_matches('.'),
                seen.namespace,
                seen.namespace
            ),
        ),
        (Ok(_), true, _) => {
            recheck = Some(seen.degraded_after.saturating_sub(unavailable_for));
            (
                Phase::Progressing,
                format!(
                    "rolling out since {}: {}",
                    available.last_transition_time, available.message
                ),
            )
        }
    };

    let (ready_replicas, desired_replicas) = match seen.health {
        Some(h) => (h.ready, h.desired),
        None => previous.map_or((0, 0), |p| (p.ready_replicas, p.desired_replicas)),
    };
    let mut status = WorkerStatus {
        phase,
        message,
        ready: format!("{ready_replicas}/{desired_replicas}"),
        ready_replicas,
        desired_replicas,
        revision,
        image,
        objects,
        conditions: vec![applied, available],
        last_reconcile_time: keep(|p| p.last_reconcile_time.clone()),
    };
    if previous != Some(&status) {
        status.last_reconcile_time = now;
    }
    (status, recheck)
}

fn since(time: &str, now: Timestamp) -> Duration {
    time.parse::<Timestamp>()
        .ok()
        .map(|t| now.duration_since(t))
        .filter(|d| *d > SignedDuration::ZERO)
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// The first container image of the (first) rendered Deployment.
fn controller_image(rendered: &[Stamped]) -> String {
    rendered
        .iter()
        .find(|o| o.key.kind == crate::kinds::Kind::Deployment)
        .and_then(|d| d.body["spec"]["template"]["spec"]["containers"][0]["image"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// What a Deployment's status says of its availability: all a worker's status needs of it, kept
/// instead of the Deployment's fields in a fleet-wide cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    available: bool,
    ready: i64,
    desired: i64,
    reason: String,
    detail: String,
}

impl Health {
    fn summary(&self) -> String {
        let mut s = format!("{}/{} replicas ready", self.ready, self.desired);
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// A Deployment is available once its controller has seen the current generation and enough
/// updated replicas are available. `None` until the deployment controller has looked at it.
pub fn availability(deploy: &Value) -> Option<Health> {
    let status = &deploy["status"];
    let observed = status["observedGeneration"].as_i64()?;
    let generation = deploy["metadata"]["generation"].as_i64().unwrap_or(0);
    let desired = deploy["spec"]["replicas"].as_i64().unwrap_or(1);
    let count = |field: &str| status[field].as_i64().unwrap_or(0);
    let available = observed >= generation
        && count("updatedReplicas") >= desired
        && count("availableReplicas") >= desired;
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let failing = conditions
        .iter()
        .find(|c| c["type"] == "Available" && c["status"] != "True")
        .or_else(|| {
            conditions
                .iter()
                .find(|c| c["type"] == "Progressing" && c["status"] != "True")
        });
    let text = |c: Option<&Value>, field: &str| {
        c.and_then(|c| c[field].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (reason, detail) = if available {
        ("MinimumReplicasAvailable".to_string(), String::new())
    } else if observed < generation {
        (
            "RollingOut".to_string(),
            "the new generation is not rolled out yet".to_string(),
        )
    } else {
        let reason = text(failing, "reason");
        (
            if reason.is_empty() {
                "Unavailable".to_string()
            } else {
                reason
            },
            text(failing, "message"),
        )
    };
    Some(Health {
        available,
        ready: count("readyReplicas"),
        desired,
        reason,
        detail,
    })
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

#[cfg(test)]
mod tests;
