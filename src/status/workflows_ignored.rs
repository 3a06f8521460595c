//! `WorkflowsIgnored`: the Workflows this namespace's controller will not run, because their
//! instanceid label does not match its instanceID (crate::workflows), and the exact fix.

use super::observation::{Conditions, Observation};
use super::resource::Condition;
use crate::workflows::{INSTANCE_ID_LABEL, Seen};

const TYPE: &str = "WorkflowsIgnored";

/// The condition and the count for the printer column (None: not known).
pub(super) fn ignored(conditions: &Conditions, seen: &Observation) -> (Condition, Option<u32>) {
    let ns = seen.namespace;
    if seen.rendered.is_err() {
        // The instanceID is what the templates render: while they fail, keep what was known.
        let kept = conditions.last(TYPE).cloned().unwrap_or_else(|| {
            conditions.make(
                TYPE,
                "Unknown",
                "NotRendered",
                "the templates did not render".into(),
            )
        });
        return (kept, conditions.previous.and_then(|p| p.workflows_ignored));
    }
    let counts = match seen.workflows {
        Seen::NotListed => {
            let message = "flotilla has not listed the Workflows yet".into();
            return (conditions.make(TYPE, "Unknown", "NotListed", message), None);
        }
        Seen::CrdMissing => {
            let message = "Argo's Workflow CRD (workflows.argoproj.io) is not installed, so no Workflow can be submitted yet: install Argo's CRDs once for the cluster (README, Install on your cluster). flotilla counts ignored Workflows as soon as it is there.".into();
            return (
                conditions.make(TYPE, "Unknown", "WorkflowCRDMissing", message),
                None,
            );
        }
        Seen::Failed(reason) => {
            let message = format!("flotilla cannot list Workflows: {reason}");
            return (
                conditions.make(TYPE, "Unknown", "ListFailed", message),
                None,
            );
        }
        Seen::Listed(counts) => counts,
    };
    let id = seen.instance_id;
    let n = counts.ignored(id);
    let condition = match (n, id) {
        (0, Some(id)) => conditions.make(
            TYPE,
            "False",
            "NoneIgnored",
            format!("every live Workflow here carries {INSTANCE_ID_LABEL}={id}, which this namespace's controller runs"),
        ),
        (0, None) => conditions.make(
            TYPE,
            "False",
            "NoneIgnored",
            format!("no live Workflow here carries {INSTANCE_ID_LABEL}, and this namespace's controller (instanceID none) runs them all"),
        ),
        (n, Some(id)) => conditions.make(
            TYPE,
            "True",
            "InstanceIDMismatch",
            format!(
                "{n} live {} without the label {INSTANCE_ID_LABEL}={id}, so this namespace's controller ignores them and they stay Pending. List them: kubectl -n {ns} get workflows -l '{INSTANCE_ID_LABEL}!={id}'. Label each: kubectl -n {ns} label workflow NAME {INSTANCE_ID_LABEL}={id} --overwrite. Submit new ones with it: argo submit -n {ns} --instanceid {id}, or the label in the Workflow's metadata.labels",
                workflows(n)
            ),
        ),
        (n, None) => conditions.make(
            TYPE,
            "True",
            "LabelPresent",
            format!(
                "{n} live {} the label {INSTANCE_ID_LABEL}, and this namespace's controller (instanceID none) runs only Workflows without it, so they stay Pending. List them: kubectl -n {ns} get workflows -l {INSTANCE_ID_LABEL}. Remove it: kubectl -n {ns} label workflow NAME {INSTANCE_ID_LABEL}-. Submit new ones without --instanceid",
                if n == 1 { "Workflow carries" } else { "Workflows carry" }
            ),
        ),
    };
    (condition, Some(n))
}

/// What the phase message adds while some are ignored.
pub(super) fn summary(ignored: Option<u32>) -> Option<String> {
    match ignored {
        Some(n) if n > 0 => Some(format!(
            "{n} {} ignored by the controller (condition {TYPE} says why and how to fix it)",
            workflows(n)
        )),
        _ => None,
    }
}

fn workflows(n: u32) -> &'static str {
    if n == 1 {
        "Workflow is"
    } else {
        "Workflows are"
    }
}
