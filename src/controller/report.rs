//! Telling what a reconcile did: its outcome (logged, counted in metrics) and the Events admins
//! see. Writes are told each time; a problem (render failure, conflict) once, when it first
//! appears or changes, not on every resync.

use super::events::{self, Events, Reason};
use crate::object::ObjectKey;
use crate::plan::NamespaceState;
use crate::status::{Phase, WorkerStatus};
use k8s_openapi::api::core::v1::ObjectReference;
use std::fmt;
use std::time::Duration;

/// What one reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub created: usize,
    pub updated: usize,
    pub drift_repaired: usize,
    pub pruned: usize,
    pub reaped: usize,
    pub conflicts: usize,
    pub render_failed: bool,
    /// The API server refused an object: the rest was not sent, and it is retried with backoff.
    pub refused: bool,
    /// Look again after this long even without events (a pending deadline).
    pub recheck: Option<Duration>,
}

impl Outcome {
    pub fn wrote(&self) -> bool {
        self.created + self.updated + self.drift_repaired + self.pruned + self.reaped > 0
    }

    /// Nothing written and nothing wrong: the namespace can rest until something changes.
    pub fn settles(&self) -> bool {
        !self.wrote() && self.conflicts == 0 && !self.render_failed && !self.refused
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "created={} updated={} drift_repaired={} pruned={} reaped={} conflicts={} render_failed={} refused={}",
            self.created,
            self.updated,
            self.drift_repaired,
            self.pruned,
            self.reaped,
            self.conflicts,
            self.render_failed,
            self.refused
        )
    }
}

/// What a namespace's Events are about.
pub struct About {
    namespace: ObjectReference,
    /// `None` if its name is taken by a NamespaceWorker this instance did not create.
    worker: Option<ObjectReference>,
}

impl About {
    pub fn of(namespace: &NamespaceState, worker: Option<ObjectReference>) -> About {
        About {
            namespace: namespace_reference(namespace),
            worker,
        }
    }

    /// Routine news goes on the NamespaceWorker only (the fleet view; one Event per occurrence,
    /// not two, which matters when thousands of namespaces converge at once).
    fn routine(&self) -> [&ObjectReference; 1] {
        [self.worker.as_ref().unwrap_or(&self.namespace)]
    }

    /// Problems go on the Namespace too, where its owner looks (`kubectl describe namespace`).
    fn problem(&self) -> Vec<&ObjectReference> {
        std::iter::once(&self.namespace)
            .chain(self.worker.as_ref())
            .collect()
    }
}

fn namespace_reference(namespace: &NamespaceState) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Namespace".into()),
        name: Some(namespace.input.name.clone()),
        uid: namespace.uid.clone(),
        ..ObjectReference::default()
    }
}

/// Logs and publishes Events for a sync; `repaired` are the objects whose drift it repaired.
pub fn synced(
    events: &Events,
    name: &str,
    outcome: &Outcome,
    repaired: &[ObjectKey],
    previous: Option<&WorkerStatus>,
    status: &WorkerStatus,
    about: &About,
) {
    if outcome.created + outcome.updated > 0 {
        let note = events::applied(outcome.created, outcome.updated, &status.revision);
        events.publish(Reason::Applied, note, &about.routine());
    }
    // One Event per object, aggregated over its repeated repairs (events/aggregate.rs).
    let [regarding] = about.routine();
    for object in repaired {
        events.drift_repaired(object, regarding);
    }
    match sleep_change(previous, status) {
        Some(SleepChange::Slept(note)) => events.publish(Reason::Slept, note, &about.routine()),
        Some(SleepChange::Woke(note)) => events.publish(Reason::Woke, note, &about.routine()),
        None => {}
    }
    let news = previous.is_none_or(|p| p.phase != status.phase || p.message != status.message);
    let reason = match status.phase {
        Phase::RenderFailed => Reason::RenderFailed,
        Phase::ApplyFailed => Reason::ApplyFailed,
        Phase::Conflict => Reason::Conflict,
        _ => return,
    };
    if news {
        tracing::error!(namespace = name, "{:?}: {}", status.phase, status.message);
        events.publish(reason, status.message.clone(), &about.problem());
    } else {
        tracing::debug!(namespace = name, "still {:?}", status.phase);
    }
}

/// Publishes the Event of a reap, on the Namespace if it still exists (else there is nothing
/// left to attach it to).
pub fn reaped(events: &Events, namespace: Option<&NamespaceState>, objects: usize) {
    if let Some(namespace) = namespace {
        let note =
            format!("removed {objects} stamped objects: the namespace is no longer opted in");
        events.publish(Reason::Reaped, note, &[&namespace_reference(namespace)]);
    }
}

/// A controller put to sleep or woken, with what its `Asleep` condition says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SleepChange {
    Slept(String),
    Woke(String),
}

/// What `status` changed of the controller's sleep since `previous`.
pub fn sleep_change(previous: Option<&WorkerStatus>, status: &WorkerStatus) -> Option<SleepChange> {
    let asleep = |s: &WorkerStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Asleep")
            .map(|c| (c.status == "True", c.message.clone()))
    };
    let before = previous.and_then(asleep).is_some_and(|(asleep, _)| asleep);
    match asleep(status) {
        Some((true, message)) if !before => Some(SleepChange::Slept(message)),
        Some((false, message)) if before => Some(SleepChange::Woke(message)),
        _ => None,
    }
}
