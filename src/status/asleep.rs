//! `Asleep`: whether the namespace's controller sleeps (crate::sleep), since when and why, and
//! what a sleeping one's status keeps of its last time awake.

use super::observation::Conditions;
use super::resource::{Condition, WorkerStatus};
use crate::sleep::{Cause, Policy, Verdict};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

pub const TYPE: &str = "Asleep";

/// Since when the controller sleeps, as `status` says (`None`: awake).
pub fn asleep_since(status: Option<&WorkerStatus>) -> Option<Timestamp> {
    let condition = status?.conditions.iter().find(|c| c.type_ == TYPE)?;
    (condition.status == "True")
        .then(|| condition.last_transition_time.parse().ok())
        .flatten()
}

/// When the revision `status` says was applied counts as proven: once the controller has been
/// available for `soak` since the later of its turn to available and the apply, as the
/// rollout's soak counts (`None`: it is not available).
pub fn proven_at(status: Option<&WorkerStatus>, soak: Duration) -> Option<Timestamp> {
    let status = status?;
    let available = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Available" && c.status == "True")?;
    let since: Timestamp = available.last_transition_time.parse().ok()?;
    let applied = status.revision_since.parse().unwrap_or(since);
    let soak = SignedDuration::try_from(soak).ok()?;
    since.max(applied).checked_add(soak).ok()
}

/// The condition for `verdict`. Asleep, it says until when; awake, what woke it, kept as it
/// is until it sleeps again (so that a controller at work is not rewritten with each
/// Workflow), but for what keeps a controller from sleeping at all, which it says as it goes.
pub(super) fn condition(conditions: &Conditions, verdict: &Verdict, policy: &Policy) -> Condition {
    let last = conditions.last(TYPE);
    match verdict {
        Verdict::Asleep { wake, .. } => conditions.make(
            TYPE,
            "True",
            "Idle",
            format!(
                "nothing to do for {}s; wakes for a Workflow, a change, or at {} for {}",
                policy.after.as_secs(),
                wake.at,
                wake.cause
            ),
        ),
        Verdict::Awake { cause, .. } if keeps_awake(cause) => {
            conditions.make(TYPE, "False", cause.reason(), cause.to_string())
        }
        Verdict::Awake { cause, .. } => match last {
            Some(last) if last.status == "False" && !kept_awake(last) => last.clone(),
            Some(last) if last.status == "True" => {
                conditions.make(TYPE, "False", cause.reason(), format!("woke for {cause}"))
            }
            _ => conditions.make(
                TYPE,
                "False",
                "Awake",
                format!(
                    "sleeps once it has had nothing to do for {}s",
                    policy.after.as_secs()
                ),
            ),
        },
    }
}

/// What keeps a controller from sleeping at all, rather than waking it for a while.
fn keeps_awake(cause: &Cause) -> bool {
    matches!(
        cause,
        Cause::OptedOut | Cause::UnknownOptOut(_) | Cause::Unseen(_)
    )
}

fn kept_awake(condition: &Condition) -> bool {
    ["OptedOut", "UnknownOptOut", "Unseen"].contains(&condition.reason.as_str())
}

/// The phase message of a sleeping controller.
pub(super) fn message(asleep: &Condition) -> String {
    format!(
        "asleep since {} (scaled to zero): {}",
        asleep.last_transition_time, asleep.message
    )
}
