//! What a reconcile's steps came to, and the NamespaceWorker's status and the reconcile's
//! outcome computed from it: pure, so that each is a table test.

use super::super::execute::{Done, Error};
use super::super::report::Outcome;
use crate::object::ObjectKey;
use crate::plan::{self, Snapshot, Sync, VerifiedObjects};
use crate::render::RenderProblem;
use crate::sleep::{Cause, Verdict};
use crate::status::{self, Health, Observation, WorkerStatus};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// Why the API server did not take an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub message: String,
    /// A 5xx: it may pass (a rollout counts it as failed only after the deadline).
    pub server_error: bool,
}

pub struct Tally {
    pub outcome: Outcome,
    pub conflicts: Vec<(ObjectKey, String)>,
    /// The health of the Deployment the worker follows (`status::followed`), once known.
    pub health: Option<Health>,
    /// What was found in sync this time: what is remembered next time.
    pub verified: VerifiedObjects,
    /// The objects whose drift was repaired.
    pub repaired: Vec<ObjectKey>,
    pub first_error: Option<Error>,
}

impl Tally {
    /// What `done` came to; `followed` is the Deployment whose health the worker shows.
    pub fn of(done: Vec<Result<Done, Error>>, followed: Option<&ObjectKey>) -> Tally {
        let mut tally = Tally {
            outcome: Outcome::default(),
            conflicts: Vec::new(),
            health: None,
            verified: VerifiedObjects::default(),
            repaired: Vec::new(),
            first_error: None,
        };
        for result in done {
            let (key, verified) = match result {
                Ok(Done::InSync(key, v)) => (key, v),
                Ok(Done::Created(key, v)) => {
                    tally.outcome.created += 1;
                    (key, v)
                }
                Ok(Done::Updated(key, v)) => {
                    tally.outcome.updated += 1;
                    (key, v)
                }
                Ok(Done::DriftRepaired(key, v)) => {
                    tally.outcome.drift_repaired += 1;
                    tally.repaired.push(key.clone());
                    (key, v)
                }
                Ok(Done::Conflict(key, reason)) => {
                    tally.conflicts.push((key, reason));
                    continue;
                }
                Ok(Done::Deleted(_, plan::Removal::Pruned)) => {
                    tally.outcome.pruned += 1;
                    continue;
                }
                Ok(Done::Deleted(_, plan::Removal::Reaped)) => {
                    tally.outcome.reaped += 1;
                    continue;
                }
                Ok(Done::NotDeleted(_)) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "request failed");
                    tally.first_error.get_or_insert(e);
                    continue;
                }
            };
            if Some(&key) == followed {
                tally.health = verified.health.as_deref().cloned();
            }
            tally.verified.insert(&key, verified);
        }
        tally.outcome.conflicts = tally.conflicts.len();
        tally
    }

    /// The API server's refusal, if an object was refused, or its failure on its side (5xx):
    /// news for the NamespaceWorker, whose status would otherwise never show a 5xx that lasts.
    /// Any other failure (no answer, throttled) is the reconcile's error, retried as it is.
    pub fn refusal(&mut self) -> Result<Option<Refusal>, Error> {
        match self.first_error.take() {
            Some(e) if e.refused() || e.server_error() => Ok(Some(Refusal {
                server_error: e.server_error(),
                message: e.to_string(),
            })),
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// The worker's new status after `sync` of `snapshot` came to this, at `now`, and the
    /// reconcile's outcome.
    pub fn conclude(
        &self,
        snapshot: &Snapshot,
        sync: &Sync,
        refusal: Option<&Refusal>,
        now: Timestamp,
    ) -> (WorkerStatus, Outcome) {
        let observation = Observation {
            namespace: &snapshot.name,
            rendered: sync.rendered.as_deref().map_err(ToString::to_string),
            conflicts: &self.conflicts,
            refused: refusal.map(|r| r.message.as_str()),
            server_error: refusal.is_some_and(|r| r.server_error),
            revision_unavailable: sync.rendered.as_ref().is_err_and(|errors| {
                errors
                    .0
                    .iter()
                    .all(|e| matches!(e.problem, RenderProblem::RevisionUnavailable))
            }),
            health: self.health.as_ref(),
            revision: &snapshot.revision,
            workflows: &snapshot.workflows,
            instance_id: sync.instance_id.as_deref(),
            now,
            degraded_after: snapshot.degraded_after,
            sleep: sync.sleep.as_ref().zip(snapshot.sleep.as_ref()),
            share: snapshot.share,
        };
        let (status, recheck) = status::compute(snapshot.previous.as_ref(), &observation);
        // Sleeping or waking next, by the clock: look again then. One proving its revision was
        // decided on the status before this one, which may have just turned it available.
        let next = match &sync.sleep {
            Some(Verdict::Awake {
                cause: Cause::Proving,
                until: None,
            }) => status::proven_at(Some(&status), snapshot.soak),
            other => other.as_ref().and_then(Verdict::next_change),
        };
        let sleep =
            next.map(|at| Duration::try_from(at.duration_since(snapshot.now)).unwrap_or_default());
        let recheck = match (recheck, sleep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let outcome = Outcome {
            render_failed: sync.rendered.is_err(),
            refused: refusal.is_some(),
            recheck,
            ..self.outcome.clone()
        };
        (status, outcome)
    }
}

#[cfg(test)]
mod tests;
