//! The status of a NamespaceWorker, computed from what one reconcile saw: a pure function,
//! so every phase transition is a table of cases (status/tests.rs).

use super::health::Health;
use super::resource::{Condition, Phase, StampedRef, WorkerStatus};
use super::workflows;
use crate::object::{ObjectKey, Stamped};
use crate::workflows::Seen;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// What one reconcile of an opted-in namespace saw.
pub struct Observation<'a> {
    pub namespace: &'a str,
    /// The rendered set, or why rendering failed.
    pub rendered: Result<&'a [Stamped], String>,
    /// Objects left alone because flotilla did not stamp them.
    pub conflicts: &'a [(ObjectKey, String)],
    /// The API server's refusal of an object, if one was refused (nothing after it was sent).
    pub refused: Option<&'a str>,
    /// The controller Deployment's health, once its controller has looked at it.
    pub health: Option<&'a Health>,
    pub revision: &'a str,
    /// What flotilla knows of the namespace's Workflows.
    pub workflows: &'a Seen,
    /// The instanceID the rendered controller has (None: none); read only if rendering worked.
    pub instance_id: Option<&'a str>,
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
    let conditions = Conditions {
        previous,
        now: seen.now.to_string(),
    };
    let applied = applied(&conditions, seen);
    let available = available(&conditions, seen);
    let (phase, mut message, recheck) = phase(seen, &applied, &available);
    let (ignored, workflows_ignored) = workflows::ignored(&conditions, seen);
    if let Some(summary) = workflows::summary(workflows_ignored) {
        message = format!("{message}; {summary}");
    }
    let keep = |f: fn(&WorkerStatus) -> String| previous.map(f).unwrap_or_default();
    // While rendering fails nothing is applied: what was applied before still stands.
    let (revision, image, objects) = match &seen.rendered {
        Err(_) => (
            keep(|p| p.revision.clone()),
            keep(|p| p.image.clone()),
            previous.map(|p| p.objects.clone()).unwrap_or_default(),
        ),
        Ok(rendered) => (
            seen.revision.to_string(),
            controller_image(rendered),
            stamped_refs(rendered, seen.conflicts),
        ),
    };
    let (ready_replicas, desired_replicas) = match seen.health {
        Some(h) => (h.ready, h.desired),
        None => previous.map_or((0, 0), |p| (p.ready_replicas, p.desired_replicas)),
    };
    let revision_since = match previous {
        Some(p) if p.revision == revision => p.revision_since.clone(),
        _ if revision.is_empty() => String::new(),
        _ => conditions.now.clone(),
    };
    let mut status = WorkerStatus {
        phase,
        message,
        ready: format!("{ready_replicas}/{desired_replicas}"),
        ready_replicas,
        desired_replicas,
        revision,
        revision_since,
        image,
        objects,
        workflows_ignored,
        conditions: vec![applied, available, ignored],
        last_reconcile_time: keep(|p| p.last_reconcile_time.clone()),
    };
    if previous != Some(&status) {
        status.last_reconcile_time = conditions.now;
    }
    (status, recheck)
}

/// Builds conditions that keep their transition time while their status stays the same.
pub(super) struct Conditions<'a> {
    pub(super) previous: Option<&'a WorkerStatus>,
    now: String,
}

impl Conditions<'_> {
    pub(super) fn last(&self, type_: &str) -> Option<&Condition> {
        self.previous?.conditions.iter().find(|c| c.type_ == type_)
    }

    pub(super) fn make(
        &self,
        type_: &str,
        status: &str,
        reason: &str,
        message: String,
    ) -> Condition {
        let since = self
            .last(type_)
            .filter(|c| c.status == status)
            .map_or(self.now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: since,
        }
    }
}

/// `Applied`: whether everything rendered is in place.
fn applied(conditions: &Conditions, seen: &Observation) -> Condition {
    match (&seen.rendered, seen.refused) {
        (Err(errors), _) => conditions.make("Applied", "False", "RenderFailed", errors.clone()),
        (Ok(_), Some(refusal)) => {
            conditions.make("Applied", "False", "ApplyFailed", refusal.to_string())
        }
        (Ok(_), None) if !seen.conflicts.is_empty() => {
            let reasons: Vec<&str> = seen.conflicts.iter().map(|(_, m)| m.as_str()).collect();
            conditions.make("Applied", "False", "Conflict", reasons.join("; "))
        }
        (Ok(rendered), None) => conditions.make(
            "Applied",
            "True",
            "Applied",
            format!(
                "{} objects in sync at revision {}",
                rendered.len(),
                seen.revision
            ),
        ),
    }
}

/// `Available`: the controller Deployment's health, once its controller has looked at it.
fn available(conditions: &Conditions, seen: &Observation) -> Condition {
    let not_observed = || {
        conditions.make(
            "Available",
            "Unknown",
            "NotObserved",
            "the controller Deployment has not been observed yet".into(),
        )
    };
    match (seen.health, &seen.rendered) {
        (Some(h), _) if h.available => {
            conditions.make("Available", "True", "MinimumReplicasAvailable", h.summary())
        }
        (Some(h), _) => conditions.make("Available", "False", &h.reason, h.summary()),
        // Not refreshed while rendering fails: keep what was last known.
        (None, Err(_)) => conditions
            .last("Available")
            .cloned()
            .unwrap_or_else(not_observed),
        (None, Ok(_)) => not_observed(),
    }
}

/// The phase, what to tell the admin, and when to look again if a deadline is pending.
fn phase(
    seen: &Observation,
    applied: &Condition,
    available: &Condition,
) -> (Phase, String, Option<Duration>) {
    let unavailable_for = since(&available.last_transition_time, seen.now);
    match (
        &seen.rendered,
        seen.conflicts.is_empty(),
        available.status.as_str(),
    ) {
        (Err(errors), _, _) => (
            Phase::RenderFailed,
            format!(
                "rendering failed, so nothing was applied or removed and the previously stamped objects are kept: {errors}. Fix the template or the namespace annotation; the worker recovers by itself."
            ),
            None,
        ),
        (Ok(_), _, _) if seen.refused.is_some() => (
            Phase::ApplyFailed,
            format!(
                "the API server refused it: {}. Nothing after it was applied, and what was stamped before is kept. flotilla retries with backoff and recovers by itself once the cause (a quota, an admission policy, RBAC) is gone.",
                applied.message
            ),
            None,
        ),
        (Ok(_), false, _) => (
            Phase::Conflict,
            format!(
                "{}. Delete or rename the existing object (flotilla then stamps its own), or stop rendering that name.",
                applied.message
            ),
            None,
        ),
        (Ok(_), true, "Unknown") => (
            Phase::Pending,
            "applied; waiting for the controller Deployment to be observed".into(),
            None,
        ),
        (Ok(_), true, "True") => (Phase::Ready, available.message.clone(), None),
        (Ok(_), true, _) if unavailable_for >= seen.degraded_after => (
            Phase::Degraded,
            format!(
                "unavailable since {}: {}. Check the controller's pods: kubectl -n {} get pods -l app=workflow-controller; kubectl -n {} describe deployment workflow-controller",
                available.last_transition_time,
                available.message.trim_end_matches('.'),
                seen.namespace,
                seen.namespace
            ),
            None,
        ),
        (Ok(_), true, _) => (
            Phase::Progressing,
            format!(
                "rolling out since {}: {}",
                available.last_transition_time, available.message
            ),
            Some(seen.degraded_after.saturating_sub(unavailable_for)),
        ),
    }
}

/// The rendered objects flotilla holds: all but those whose name another object took.
fn stamped_refs(rendered: &[Stamped], conflicts: &[(ObjectKey, String)]) -> Vec<StampedRef> {
    rendered
        .iter()
        .filter(|o| !conflicts.iter().any(|(key, _)| *key == o.key))
        .map(|o| StampedRef {
            kind: o.key.kind.name().into(),
            namespace: o.key.namespace.clone(),
            name: o.key.name.clone(),
        })
        .collect()
}

fn since(time: &str, now: Timestamp) -> Duration {
    time.parse::<Timestamp>()
        .ok()
        .map(|t| now.duration_since(t))
        .filter(|d| *d > SignedDuration::ZERO)
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// The name of Argo's controller Deployment in the default templates.
const CONTROLLER: &str = "workflow-controller";

/// The Deployment a NamespaceWorker follows (its image, its health): Argo's
/// `workflow-controller` where the set has one, since another Deployment such as argo-server's
/// may sort before it; otherwise, for templates of other names, the first one rendered.
pub fn followed(rendered: &[Stamped]) -> Option<&ObjectKey> {
    let deployments = || {
        rendered
            .iter()
            .filter(|o| o.key.kind == crate::kinds::Kind::Deployment)
    };
    deployments()
        .find(|o| o.key.name == CONTROLLER)
        .or_else(|| deployments().next())
        .map(|o| &o.key)
}

/// The first container image of the [`followed`] Deployment.
fn controller_image(rendered: &[Stamped]) -> String {
    followed(rendered)
        .and_then(|key| rendered.iter().find(|o| &o.key == key))
        .and_then(|d| d.body["spec"]["template"]["spec"]["containers"][0]["image"].as_str())
        .unwrap_or_default()
        .to_string()
}
