//! What one reconcile saw of a namespace, which its NamespaceWorker's status is computed from,
//! and the conditions built from it that keep their transition time while they hold.

use super::health::Health;
use super::resource::{Condition, WorkerStatus};
use crate::object::{ObjectKey, Stamped};
use crate::sleep::{Policy, Verdict};
use crate::workflows::Seen;
use k8s_openapi::jiff::Timestamp;
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
    /// `refused` is the API server's failure on its side (5xx), not a refusal: it may pass.
    pub server_error: bool,
    /// Rendering failed only because the pinned revision is not kept (its ControllerRevision
    /// is missing): flotilla's own state, not the revision's content, and it passes once the
    /// revision is kept again.
    pub revision_unavailable: bool,
    /// The controller Deployment's health, once its controller has looked at it.
    pub health: Option<&'a Health>,
    pub revision: &'a str,
    /// What flotilla knows of the namespace's Workflows.
    pub workflows: &'a Seen,
    /// The instanceID the rendered controller has (None: none); read only if rendering worked.
    pub instance_id: Option<&'a str>,
    pub now: Timestamp,
    pub degraded_after: Duration,
    /// Whether the controller sleeps, and the config's `sleep` (`None`: it never does).
    pub sleep: Option<(&'a Verdict, &'a Policy)>,
    /// Its share of the fleet's budget, as rendered (`None`: no budget).
    pub share: Option<u32>,
}

/// Now, in whole seconds: the precision Kubernetes shows times with.
pub fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

/// Builds conditions that keep their transition time while their status stays the same.
pub(super) struct Conditions<'a> {
    pub(super) previous: Option<&'a WorkerStatus>,
    now: String,
}

impl<'a> Conditions<'a> {
    pub(super) fn new(previous: Option<&'a WorkerStatus>, now: Timestamp) -> Conditions<'a> {
        Conditions {
            previous,
            now: now.to_string(),
        }
    }

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
