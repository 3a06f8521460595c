//! Whether a namespace's controller sleeps (crate::sleep), decided from its snapshot and what
//! its templates render, and the rendered set as it is applied then.

use super::snapshot::{NamespaceState, Snapshot};
use crate::object::Stamped;
use crate::render::scaled_to_zero;
use crate::sleep::{self, CronEntry, Inputs, OPT_OUT_ANNOTATION, Verdict};
use crate::status::{asleep_since, followed, proven_at};
use crate::workflows::Seen;

/// What flotilla sees of a namespace's CronWorkflows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Crons {
    /// Each with its instanceid label.
    Seen(Vec<(Option<String>, CronEntry)>),
    /// Why they cannot be seen.
    Unseen(String),
}

impl Default for Crons {
    fn default() -> Self {
        Crons::Seen(Vec::new())
    }
}

/// The verdict for `namespace`, whose templates render `rendered` and give its controller
/// `instance_id`; `None` while the config has no `sleep`.
pub fn verdict(
    snapshot: &Snapshot,
    namespace: &NamespaceState,
    rendered: &[Stamped],
    instance_id: Option<&str>,
) -> Option<Verdict> {
    let policy = snapshot.sleep.as_ref()?;
    let crons = match &snapshot.crons {
        Crons::Seen(all) => Ok(sleep::run_by(all, instance_id)),
        Crons::Unseen(why) => Err(why.clone()),
    };
    let previous = snapshot.previous.as_ref();
    let inputs = Inputs {
        policy,
        opt_out: namespace
            .input
            .annotations
            .get(OPT_OUT_ANNOTATION)
            .map(String::as_str),
        asleep_since: asleep_since(previous),
        running: running(&snapshot.workflows, instance_id),
        idle_since: snapshot.idle_since,
        crons: crons.as_deref().map_err(Clone::clone),
        changed: changed(snapshot, rendered),
        proven_at: proven_at(previous, snapshot.soak),
        now: snapshot.now,
    };
    Some(sleep::decide(&inputs))
}

/// `rendered` as applied under `verdict`: asleep, the controller Deployment at zero replicas.
pub fn as_applied(rendered: Vec<Stamped>, verdict: Option<&Verdict>) -> Vec<Stamped> {
    if !verdict.is_some_and(Verdict::asleep) {
        return rendered;
    }
    let Some(controller) = followed(&rendered).cloned() else {
        return rendered;
    };
    rendered
        .into_iter()
        .map(|o| {
            if o.key == controller {
                scaled_to_zero(&o)
            } else {
                o
            }
        })
        .collect()
}

/// The live Workflows its controller runs, or why they cannot be seen.
fn running(workflows: &Seen, instance_id: Option<&str>) -> Result<u32, String> {
    match workflows {
        Seen::Listed(counts) => Ok(counts.taken(instance_id)),
        Seen::CrdMissing => Ok(0),
        Seen::NotListed => Err("flotilla has not listed the Workflows yet".into()),
        Seen::Failed(reason) => Err(format!("flotilla cannot list Workflows: {reason}")),
    }
}

/// Whether anything rendered differs from what is stamped (missing, or of another hash than
/// either form of it, awake or asleep): a change is applied awake, and proven running.
fn changed(snapshot: &Snapshot, rendered: &[Stamped]) -> bool {
    let controller = followed(rendered);
    rendered.iter().any(|object| {
        let stamped = snapshot
            .stamped
            .iter()
            .find(|w| w.key == object.key)
            .and_then(|w| w.hash.as_deref());
        match stamped {
            Some(hash) if hash == object.hash => false,
            Some(hash) if Some(&object.key) == controller => hash != scaled_to_zero(object).hash,
            _ => true,
        }
    })
}

#[cfg(test)]
#[path = "asleep_tests.rs"]
mod tests;
