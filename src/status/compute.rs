//! The status of a NamespaceWorker, computed from what one reconcile saw: a pure function,
//! so every phase transition is a table of cases (status/tests.rs).

use super::asleep;
use super::observation::{Conditions, Observation};
use super::resource::{Condition, Phase, StampedRef, WorkerStatus};
use super::workflows_ignored;
use crate::object::{ObjectKey, Stamped};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// The new status, and when to look again if a deadline is pending (Progressing -> Degraded).
pub fn compute(
    previous: Option<&WorkerStatus>,
    seen: &Observation,
) -> (WorkerStatus, Option<Duration>) {
    let conditions = Conditions::new(previous, seen.now);
    let applied = applied(&conditions, seen);
    let asleep = match (seen.sleep, &seen.rendered) {
        (Some((verdict, policy)), _) => Some(asleep::condition(&conditions, verdict, policy)),
        // Not refreshed while rendering fails: keep what was last known.
        (None, Err(_)) => conditions.last(asleep::TYPE).cloned(),
        (None, Ok(_)) => None,
    };
    let sleeping = asleep.as_ref().is_some_and(|c| c.status == "True");
    // A controller scaled to zero is neither available nor not: what it showed when it last
    // ran stands, which is what the rollout proved it by.
    let available = match conditions.last("Available") {
        Some(last) if sleeping => last.clone(),
        _ => available(&conditions, seen),
    };
    let (mut phase, mut message, mut recheck) = phase(seen, &applied, &available);
    if let Some(asleep) = asleep.as_ref().filter(|_| sleeping)
        && !matches!(
            phase,
            Phase::RenderFailed | Phase::ApplyFailed | Phase::Conflict
        )
    {
        (phase, message, recheck) = (Phase::Sleeping, asleep::message(asleep), None);
    }
    let (ignored, workflows_ignored) = workflows_ignored::ignored(&conditions, seen);
    if let Some(summary) = workflows_ignored::summary(workflows_ignored) {
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
        _ => seen.now.to_string(),
    };
    // Where it failed; not a revision that is not kept: no fault of its content.
    let failed_revision = match phase {
        Phase::RenderFailed if seen.revision_unavailable => String::new(),
        Phase::RenderFailed | Phase::ApplyFailed | Phase::Conflict => seen.revision.to_string(),
        _ => String::new(),
    };
    let mut status = WorkerStatus {
        failed_revision,
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
        // The share its controller runs with: the one rendered only once everything is applied.
        // Rendering failed or the API server refused a write: the one applied before stands
        // (the fleet's budget counts it as held until it is replaced).
        share: match (&seen.rendered, seen.refused) {
            (Ok(_), None) => seen.share,
            _ => previous.and_then(|p| p.share),
        },
        conditions: [applied, available, ignored]
            .into_iter()
            .chain(asleep)
            .collect(),
        last_reconcile_time: keep(|p| p.last_reconcile_time.clone()),
    };
    if previous != Some(&status) {
        status.last_reconcile_time = seen.now.to_string();
    }
    (status, recheck)
}

/// `Applied`: whether everything rendered is in place.
fn applied(conditions: &Conditions, seen: &Observation) -> Condition {
    match (&seen.rendered, seen.refused) {
        (Err(errors), _) => {
            let reason = if seen.revision_unavailable {
                super::REVISION_UNAVAILABLE
            } else {
                "RenderFailed"
            };
            conditions.make("Applied", "False", reason, errors.clone())
        }
        (Ok(_), Some(refusal)) => {
            let reason = if seen.server_error {
                super::SERVER_ERROR
            } else {
                "ApplyFailed"
            };
            conditions.make("Applied", "False", reason, refusal.to_string())
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
        (Ok(_), _, _) if seen.refused.is_some() && seen.server_error => (
            Phase::ApplyFailed,
            format!(
                "the API server failed on its side: {}. What was stamped before is kept; flotilla retries with backoff and recovers by itself once the API server does.",
                applied.message
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
