//! One turn of the rollout, decided from one [`FleetSnapshot`] alone: the new rollout state, the
//! namespaces to reconcile now, the Fleet's spec and status to write, and the Events to publish.
//! The leader takes a turn every second (controller/rollout_task.rs carries it out).

use super::fleet::{self, FleetStatus};
use super::fleet_snapshot::FleetSnapshot;
use super::message;
use super::plan::{Phase, State, Step, step};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

/// What a turn decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The step of the rollout, with the new state.
    pub step: Step,
    /// To reconcile now: those whose pin changed, and those the brake let go.
    pub queue: Vec<String>,
    /// A merge patch of the Fleet's spec, if it needs one.
    pub spec: Option<serde_json::Value>,
    /// The Fleet's new status, if it changed.
    pub status: Option<FleetStatus>,
    /// The Events the new status is news for.
    pub news: Vec<News>,
    /// The refusal told once the status is written.
    pub refusal_reported: Option<String>,
}

/// What an Event on the Fleet tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// A phase reached, or a new target.
    Phase(Phase),
    /// The config on disk is refused (each refusal once).
    ConfigRefused,
    /// The brake on mass reaping took hold.
    ReapingHeld,
}

/// The turn `snapshot` comes to.
pub fn turn(snapshot: &FleetSnapshot) -> Turn {
    let spec = &snapshot.fleet.spec;
    let kept = &snapshot.kept;
    // Confirmed, and none is left opting out: the confirmation has done its work.
    let spec_patch = (snapshot.brake.opting_out == 0 && spec.confirm_reaping.is_some())
        .then(|| json!({"confirmReaping": null}));
    let mut problems = message::problems(snapshot);
    let target = match spec.revision {
        Some(number) => kept.hash_of(number).or_else(|| {
            problems.push(format!(
                "spec.revision {number} is not a kept revision (flotilla rollout history lists them); rolling out the newest"
            ));
            kept.newest()
        }),
        None => kept.newest(),
    }
    .unwrap_or_else(|| snapshot.state.target.clone());
    // The stable revision is no longer kept (its ControllerRevision deleted, after a failed
    // rollout say): there is nothing to return to, and the newest is not proven. Nothing moves
    // until the admin names the revision to roll out (`undo --to-revision`, spec.revision).
    let held = missing_stable(snapshot).filter(|_| spec.revision.is_none());
    if let Some(missing) = &held {
        problems.push(format!(
            "holding: the stable revision {missing} is not kept (its ControllerRevision is missing or cannot be rendered), so nothing moves; `flotilla rollout undo --to-revision N` names the revision to roll out"
        ));
    }
    let state = snapshot.state.retarget(&target);
    let step = step(
        &state,
        &snapshot.members,
        &snapshot.strategy,
        spec.paused || held.is_some(),
        snapshot.now,
    );
    let mut queue = snapshot.brake.released.clone();
    for m in &snapshot.members {
        let applied = m.applied.as_deref();
        let known = applied.is_some_and(|a| kept.known(a));
        // Its revision is kept again (recorded anew after its ControllerRevision was deleted):
        // rendered at it now, rather than left showing a failure that has passed.
        if m.unrendered && known {
            queue.push(m.name.clone());
            continue;
        }
        // Taken as stamped: one without a recorded revision is queued when it is moved (a new
        // one is rendered at the target anyway).
        let pin = |s: &State| s.pin(&m.name, applied, known, true).to_string();
        if pin(&state) != pin(&step.state) {
            queue.push(m.name.clone());
        }
    }
    let message = message::message(snapshot, &step, &problems);
    let previous = snapshot
        .written
        .clone()
        .or_else(|| snapshot.fleet.status.clone());
    let mut status = fleet::status(
        &step.state,
        &step.counts,
        |hash| kept.number(hash),
        message,
        previous.as_ref(),
        &whole_seconds(snapshot.wall).to_string(),
    );
    if snapshot.brake.held {
        status.reap_held = snapshot.brake.opting_out as u64;
    }
    status.budget = snapshot.budget.map(Into::into);
    let (status, news, refusal_reported) = if previous.as_ref() == Some(&status) {
        (None, Vec::new(), snapshot.refusal_reported.clone())
    } else {
        let news = news(&status, previous.as_ref(), snapshot);
        (Some(status), news, snapshot.refused.clone())
    };
    Turn {
        step,
        queue,
        spec: spec_patch,
        status,
        news,
        refusal_reported,
    }
}

/// What is news in `status`: a phase or target reached, a refused config (each refusal once),
/// the brake taking hold.
fn news(
    status: &FleetStatus,
    previous: Option<&FleetStatus>,
    snapshot: &FleetSnapshot,
) -> Vec<News> {
    let mut news = Vec::new();
    if previous.map(|p| p.phase) != Some(status.phase)
        || previous.map(|p| &p.target_hash) != Some(&status.target_hash)
    {
        news.push(News::Phase(status.phase));
    }
    if snapshot.refused.is_some() && snapshot.refusal_reported != snapshot.refused {
        news.push(News::ConfigRefused);
    }
    if status.reap_held > 0 && previous.is_none_or(|p| p.reap_held == 0) {
        news.push(News::ReapingHeld);
    }
    news
}

/// The stable revision, by number (as the Fleet last recorded it) and hash, if it is no longer
/// kept.
fn missing_stable(snapshot: &FleetSnapshot) -> Option<String> {
    let stable = &snapshot.state.stable;
    if stable.is_empty() || snapshot.kept.known(stable) {
        return None;
    }
    let recorded = snapshot.fleet.status.as_ref();
    let number = recorded
        .filter(|s| s.stable_hash == *stable)
        .map_or(0, |s| s.stable_revision);
    Some(format!("{number} ({stable})"))
}

/// `now` in whole seconds: the precision Kubernetes shows times with.
fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests;
