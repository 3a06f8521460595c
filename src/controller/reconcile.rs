//! One namespace, from a watch event to its NamespaceWorker: take a snapshot of what the watches
//! and the memory know (no request), triage it, render, plan (pure), execute (the only requests
//! on stamped objects), compute the status (pure), write it if it changed, tell what happened,
//! and remember what was found.

use super::Context;
use super::execute::{Done, Error};
use super::report::{self, Outcome};
use crate::object::ObjectKey;
use crate::plan::{self, Settled, Snapshot, Triage, VerifiedObjects};
use crate::render::{RenderError, RenderErrors, RenderProblem};
use crate::status::{self, Health, Observation, WorkerStatus};
use std::time::{Duration, Instant};

pub async fn reconcile(ctx: &Context, name: &str) -> Result<Outcome, Error> {
    let mut snapshot = ctx.snapshot(name);
    // Rendered at the revision the rollout pins it to, never a guess: `run` starts reconciling
    // only once the rollout is loaded.
    let applied = ctx
        .memory
        .of(name)
        .written
        .map(|w| w.status.revision)
        .or_else(|| {
            ctx.stores
                .worker(name)
                .and_then(|w| w.member.applied.clone())
        })
        .filter(|r| !r.is_empty());
    let started = Instant::now();
    let Some(pin) = ctx.rollout.pin(ctx, name, applied.as_deref()) else {
        // Leadership was lost a moment ago: the next leader reconciles it.
        return Ok(Outcome {
            recheck: Some(Duration::from_secs(1)),
            ..Outcome::default()
        });
    };
    snapshot.revision.clone_from(&pin);
    let namespace = match plan::triage(&snapshot, started) {
        Triage::Reap => {
            // A namespace that opts out waits while the brake on mass reaping holds; what a
            // deleted one leaves never does.
            let opting_out = ctx
                .stores
                .namespace(name)
                .is_some_and(|ns| ns.metadata.deletion_timestamp.is_none());
            if opting_out && !ctx.brake.may_reap(name) {
                tracing::debug!(namespace = name, "reaping held by the brake");
                return Ok(Outcome::default());
            }
            let outcome = reap(ctx, &snapshot).await?;
            ctx.brake.reaped(name);
            return Ok(outcome);
        }
        Triage::Settled { until } => {
            let recheck = until.map(|t| t.saturating_duration_since(started));
            return Ok(Outcome {
                recheck,
                ..Outcome::default()
            });
        }
        Triage::Sync(namespace) => namespace.clone(),
    };
    let live = ctx.live.get();
    let renderer = ctx.revisions.renderer(&pin, &live.config);
    let rendered = match &renderer {
        Some(renderer) => renderer.render(&namespace.input),
        None => Err(RenderErrors(vec![RenderError {
            origin: format!("revision {pin}"),
            line: None,
            problem: RenderProblem::RevisionUnavailable,
        }])),
    };
    // On a render failure nothing is applied or pruned: the namespace keeps what it has.
    let done = match &rendered {
        Ok(objects) => {
            snapshot.vacant = ctx.vacant(objects);
            ctx.executor().run(plan::plan(&snapshot, objects)).await
        }
        Err(_) => Vec::new(),
    };
    let followed = rendered.as_deref().ok().and_then(status::followed);
    let mut tally = Tally::of(done, followed);
    ctx.memory
        .update(name, |m| m.verified = tally.verified.compacted());
    let mut outcome = tally.outcome;
    outcome.render_failed = rendered.is_err();
    // A refusal is news for the NamespaceWorker; any other failure is retried as it is.
    let refusal = match tally.first_error.take() {
        Some(e) if e.refused() => Some(e.to_string()),
        Some(e) => return Err(e),
        None => None,
    };
    outcome.refused = refusal.is_some();

    let remembered = ctx.memory.of(name).written.map(|w| w.status);
    let watched = ctx.stores.worker(name);
    let previous: Option<WorkerStatus> =
        remembered.or_else(|| watched.as_ref().and_then(|w| w.status()));
    // Only the templates know it: at the namespace's pin, with its overrides.
    let instance_id = match (&renderer, &rendered) {
        (Some(renderer), Ok(_)) => renderer.instance_id(&namespace.input).ok().flatten(),
        _ => None,
    };
    if rendered.is_ok() {
        ctx.workflows.expect(name, instance_id.as_deref());
    }
    let observation = Observation {
        namespace: name,
        rendered: rendered.as_deref().map_err(ToString::to_string),
        conflicts: &tally.conflicts,
        refused: refusal.as_deref(),
        health: tally.health.as_ref(),
        revision: &pin,
        workflows: &snapshot.workflows,
        instance_id: instance_id.as_deref(),
        now: status::now(),
        degraded_after: Duration::from_secs(live.config.degraded_after_seconds),
    };
    let (status, recheck) = status::compute(previous.as_ref(), &observation);
    outcome.recheck = recheck;
    let written = ctx
        .workers()
        .write(
            name,
            namespace.uid.clone(),
            watched,
            previous.as_ref(),
            &status,
            || {
                ctx.stores
                    .worker(name)
                    .and_then(|w| w.metadata.resource_version.clone())
            },
        )
        .await
        .map_err(Error::on("write status of NamespaceWorker", name))?;
    let about = report::About::of(&namespace, written.clone());
    report::synced(
        &ctx.events,
        name,
        &outcome,
        &tally.repaired,
        previous.as_ref(),
        &status,
        &about,
    );
    // Nothing written to stamped objects and nothing wrong: until the watches show a change (or
    // the deadline of a status transition passes), there is nothing to do here. The worker is
    // fingerprinted as written just now, which is what its watch event will show.
    if outcome.settles() {
        snapshot.worker_version = written.and_then(|w| w.resource_version);
        let settled = Settled {
            fingerprint: plan::fingerprint(&snapshot),
            until: outcome.recheck.map(|after| started + after),
        };
        ctx.memory.update(name, |m| m.settled = Some(settled));
    } else {
        ctx.memory.update(name, |m| m.settled = None);
    }
    Ok(outcome)
}

/// Deletes everything stamped for a namespace that is no longer opted in (or no longer
/// exists), including objects placed outside it, and its NamespaceWorker; then forgets it.
async fn reap(ctx: &Context, snapshot: &Snapshot) -> Result<Outcome, Error> {
    let name = &snapshot.name;
    let tally = Tally::of(ctx.executor().run(plan::reap(snapshot)).await, None);
    if let Some(e) = tally.first_error {
        return Err(e);
    }
    let removed_worker = ctx
        .workers()
        .remove(name, ctx.stores.worker(name))
        .await
        .map_err(Error::on("delete NamespaceWorker", name))?;
    ctx.memory.forget(name);
    ctx.workflows.forget(name);
    let outcome = tally.outcome;
    if outcome.reaped > 0 || removed_worker {
        report::reaped(&ctx.events, snapshot.namespace.as_ref(), outcome.reaped);
    }
    Ok(outcome)
}

/// What a reconcile's steps came to.
struct Tally {
    outcome: Outcome,
    conflicts: Vec<(ObjectKey, String)>,
    /// The health of the Deployment the worker follows (`status::followed`), once known.
    health: Option<Health>,
    /// What was found in sync this time: what is remembered next time.
    verified: VerifiedObjects,
    /// The objects whose drift was repaired.
    repaired: Vec<ObjectKey>,
    first_error: Option<Error>,
}

impl Tally {
    fn of(done: Vec<Result<Done, Error>>, followed: Option<&ObjectKey>) -> Tally {
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
}
