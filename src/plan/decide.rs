//! What a reconcile of a namespace comes down to, decided from its [`Snapshot`] alone: reap what
//! was stamped for it, nothing at all, or sync it with what its templates render at its pin.

use super::snapshot::{NamespaceState, Snapshot, fingerprint, reap_fingerprint};
use super::{Step, asleep, reap};
use crate::membership::Membership;
use crate::object::{ObjectKey, Stamped};
use crate::render::{RenderError, RenderErrors, RenderProblem};
use crate::sleep::Verdict;
use std::time::Instant;

#[derive(Debug)]
pub enum Decision<'a> {
    /// Nothing changed since it was last found in sync, and no deadline passed. The deadline,
    /// if one is pending, must still be kept: look again then (a retry scheduled for an earlier
    /// deadline may be what brought the namespace here).
    Settled { until: Option<Instant> },
    /// Not opted in, terminating or gone: delete everything stamped for it (`steps`). One that
    /// opts out (it exists and is not being deleted) waits while the brake on mass reaping
    /// holds.
    Reap {
        opting_out: bool,
        steps: Vec<Step<'static>>,
    },
    /// Bring every object in line with what the templates render.
    Sync(Sync<'a>),
}

/// A namespace to sync, and what its templates render for it at its pin.
#[derive(Debug)]
pub struct Sync<'a> {
    pub namespace: &'a NamespaceState,
    /// The objects, or why rendering failed (then nothing is applied or pruned: the namespace
    /// keeps what it has).
    pub rendered: Result<Vec<Stamped>, RenderErrors>,
    /// The instanceID its controller is rendered with (`None`: none, or rendering failed).
    pub instance_id: Option<String>,
    /// Whether its controller sleeps (`None`: nothing sleeps, or rendering failed); `rendered`
    /// is as applied under it.
    pub sleep: Option<Verdict>,
}

impl Sync<'_> {
    /// The Deployment its NamespaceWorker follows (`status::followed`).
    pub fn followed(&self) -> Option<&ObjectKey> {
        self.rendered
            .as_deref()
            .ok()
            .and_then(crate::status::followed)
    }
}

/// The decision for `snapshot` at `now`.
pub fn decide(snapshot: &Snapshot, now: Instant) -> Decision<'_> {
    let worker_version = snapshot
        .worker
        .as_ref()
        .and_then(|w| w.reference.resource_version.as_deref());
    let Some(namespace) = snapshot.namespace.as_ref().filter(|ns| ns.opted_in()) else {
        // The last reap could delete none of what is left (objects labelled for a namespace
        // that does not exist, whose names flotilla's token may not delete: refused), and
        // nothing changed since: one refused delete, not one every resync.
        if snapshot.settled.as_ref().is_some_and(|settled| {
            settled.until.is_none() && settled.fingerprint == reap_fingerprint(snapshot)
        }) {
            return Decision::Settled { until: None };
        }
        let opting_out = snapshot
            .namespace
            .as_ref()
            .is_some_and(|ns| ns.membership == Membership::OptingOut);
        let steps = reap(snapshot);
        return Decision::Reap { opting_out, steps };
    };
    if let Some(settled) = &snapshot.settled
        && settled.fingerprint == fingerprint(snapshot, worker_version)
        && settled.until.is_none_or(|t| now < t)
    {
        return Decision::Settled {
            until: settled.until,
        };
    }
    let (rendered, instance_id) = match &snapshot.renderer {
        Some(renderer) => {
            let rendered = renderer.render(&namespace.input);
            // Only the templates know it: at the namespace's pin, with its overrides.
            let instance_id = rendered
                .is_ok()
                .then(|| renderer.instance_id(&namespace.input).ok().flatten())
                .flatten();
            (rendered, instance_id)
        }
        None => {
            let unavailable = RenderError {
                origin: format!("revision {}", snapshot.revision),
                line: None,
                problem: RenderProblem::RevisionUnavailable,
            };
            (Err(RenderErrors(vec![unavailable])), None)
        }
    };
    let sleep = rendered
        .as_deref()
        .ok()
        .and_then(|objects| asleep::verdict(snapshot, namespace, objects, instance_id.as_deref()));
    let rendered = rendered.map(|objects| asleep::as_applied(objects, sleep.as_ref()));
    Decision::Sync(Sync {
        namespace,
        rendered,
        instance_id,
        sleep,
    })
}

#[cfg(test)]
mod tests;
