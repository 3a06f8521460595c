//! One namespace, from a watch event to its NamespaceWorker: its snapshot (everything it is
//! decided from, read once, no request), the decision (pure: reap, nothing to do, or sync with
//! what its templates render), and the decision carried out: the plan's steps (the only
//! requests on stamped objects), the status computed from what they did (pure), written if it
//! changed, what happened told, and what was found remembered.

mod tally;

use super::Context;
use super::execute::Error;
use super::report::{self, Outcome};
use crate::plan::{self, Decision, Settled, Snapshot, Step, Sync};
use crate::status::{self, Health, WorkerStatus};
use crate::telemetry::ReasonLabel;
use k8s_openapi::api::core::v1::ObjectReference;
use std::time::{Duration, Instant};
use tally::Tally;

pub async fn reconcile(ctx: &Context, name: &str) -> Result<Outcome, Error> {
    let started = Instant::now();
    // `run` reconciles only once the rollout is loaded: without a pin, leadership was lost a
    // moment ago, and the next leader reconciles it.
    let Some(snapshot) = ctx.snapshot(name) else {
        return Ok(Outcome {
            recheck: Some(Duration::from_secs(1)),
            ..Outcome::default()
        });
    };
    match plan::decide(&snapshot, started) {
        Decision::Settled { until } => Ok(Outcome {
            recheck: until.map(|t| t.saturating_duration_since(started)),
            ..Outcome::default()
        }),
        Decision::Reap { opting_out, steps } => {
            // A namespace that opts out waits while the brake on mass reaping holds; what a
            // deleted one leaves, or one never in the fleet (no NamespaceWorker), never does.
            let member = snapshot.worker.is_some();
            if opting_out && !ctx.brake.may_reap(name, member) {
                tracing::debug!(namespace = name, "reaping held by the brake");
                return Ok(Outcome::default());
            }
            let outcome = reap(ctx, &snapshot, steps).await?;
            ctx.brake.reaped(name, Instant::now());
            Ok(outcome)
        }
        Decision::Sync(sync) => self::sync(ctx, &snapshot, &sync, started).await,
    }
}

/// Brings every object in line with what was rendered, then the NamespaceWorker's status.
async fn sync(
    ctx: &Context,
    snapshot: &Snapshot,
    sync: &Sync<'_>,
    started: Instant,
) -> Result<Outcome, Error> {
    let name = snapshot.name.as_str();
    // On a render failure nothing is applied or pruned: the namespace keeps what it has.
    let mut prune_held = false;
    let done = match &sync.rendered {
        Ok(objects) => {
            let vacant = ctx.vacant(objects);
            let mut steps = plan::plan(snapshot, objects, &vacant);
            // A prune (a template removed) goes through the brake on mass reaping: across the
            // fleet it deletes as much as an opt-out. Held, the rest is applied.
            let prunes = steps.iter().any(is_prune);
            if prunes && !ctx.brake.may_prune(name) {
                tracing::debug!(namespace = name, "pruning held by the brake");
                steps.retain(|s| !is_prune(s));
                prune_held = true;
            }
            let done = ctx.executor().run(steps).await;
            if prunes && !prune_held {
                ctx.brake.pruned(name, Instant::now());
            }
            done
        }
        Err(_) => Vec::new(),
    };
    let mut tally = Tally::of(done, sync.followed());
    ctx.memory
        .update(name, |m| m.verified = tally.verified.compacted());
    let refusal = tally.refusal()?;
    if sync.rendered.is_ok() {
        ctx.workflows.expect(name, sync.instance_id.as_deref());
    }
    let (status, outcome) = tally.conclude(snapshot, sync, refusal.as_ref(), status::now());
    let watched_now = || {
        ctx.stores
            .worker(name)
            .and_then(|w| w.metadata.resource_version.clone())
    };
    let written = ctx
        .workers()
        .write(
            name,
            sync.namespace.uid.clone(),
            snapshot.worker.as_ref(),
            snapshot.previous.as_ref(),
            &status,
            watched_now,
        )
        .await
        .map_err(Error::on("write status of NamespaceWorker", name))?;
    let about = report::About::of(sync.namespace, written.clone());
    let previous = snapshot.previous.as_ref();
    report::synced(
        &ctx.events,
        name,
        &outcome,
        &tally.repaired,
        previous,
        &status,
        &about,
    );
    count_wake(ctx, name, previous, &status, tally.health.as_ref());
    settle(ctx, snapshot, &outcome, written, started);
    if prune_held {
        // Not in sync: the brake's release (or a resync) brings it back.
        ctx.memory.update(name, |m| m.settled = None);
    }
    Ok(outcome)
}

fn is_prune(step: &Step) -> bool {
    matches!(
        step,
        Step::Delete {
            why: plan::Removal::Pruned,
            ..
        }
    )
}

/// A wake counted by what woke it, and timed until the controller is available again.
fn count_wake(
    ctx: &Context,
    name: &str,
    previous: Option<&WorkerStatus>,
    status: &WorkerStatus,
    health: Option<&Health>,
) {
    if let Some(report::SleepChange::Woke(_)) = report::sleep_change(previous, status) {
        let reason = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Asleep")
            .map_or("", |c| c.reason.as_str());
        let reason = crate::sleep::Cause::REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("Other");
        ctx.metrics
            .wakes
            .get_or_create(&ReasonLabel { reason })
            .inc();
        ctx.memory.update(name, |m| m.woke = Some(Instant::now()));
        return;
    }
    let woke = ctx.memory.of(name).woke;
    if let Some(woke) = woke
        && health.is_some_and(Health::is_available)
    {
        ctx.metrics
            .wake_duration
            .observe(woke.elapsed().as_secs_f64());
        ctx.memory.update(name, |m| m.woke = None);
    }
}

/// Nothing written to stamped objects and nothing wrong: until the watches show a change (or
/// the deadline of a status transition passes), there is nothing to do here. The worker is
/// fingerprinted as written just now, which is what its watch event will show.
fn settle(
    ctx: &Context,
    snapshot: &Snapshot,
    outcome: &Outcome,
    written: Option<ObjectReference>,
    started: Instant,
) {
    let settled = outcome.settles().then(|| {
        let version = written.and_then(|w| w.resource_version);
        Settled {
            fingerprint: plan::fingerprint(snapshot, version.as_deref()),
            until: outcome.recheck.map(|after| started + after),
        }
    });
    ctx.memory.update(&snapshot.name, |m| m.settled = settled);
}

/// Deletes everything stamped for a namespace that is no longer opted in (or no longer
/// exists), including objects placed outside it, and its NamespaceWorker; then forgets it.
async fn reap(
    ctx: &Context,
    snapshot: &Snapshot,
    steps: Vec<Step<'static>>,
) -> Result<Outcome, Error> {
    let name = &snapshot.name;
    let tally = Tally::of(ctx.executor().run(steps).await, None);
    if let Some(e) = tally.first_error {
        return Err(e);
    }
    let removed_worker = ctx
        .workers()
        .remove(name, snapshot.worker.as_ref())
        .await
        .map_err(Error::on("delete NamespaceWorker", name))?;
    ctx.memory.forget(name);
    ctx.workflows.forget(name);
    let outcome = tally.outcome;
    // Nothing deleted and something left (every delete refused): settled until one of them,
    // the namespace or its worker changes, so that each resync does not send the same
    // refused deletes again.
    if outcome.reaped == 0 && !removed_worker && !snapshot.stamped.is_empty() {
        let settled = Settled {
            fingerprint: plan::reap_fingerprint(snapshot),
            until: None,
        };
        ctx.memory.update(name, |m| m.settled = Some(settled));
    }
    if outcome.reaped > 0 || removed_worker {
        report::reaped(&ctx.events, snapshot.namespace.as_ref(), outcome.reaped);
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests;
