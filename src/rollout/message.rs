//! The Fleet's status message: the rollout's phase and counts in words, then what holds it (a
//! refused config, keys waiting for a restart, the reap brake) and what to do about it.

use super::fleet_snapshot::FleetSnapshot;
use super::plan::{Phase, Step};

/// What the Fleet's message adds to the rollout's: a refused config, keys waiting for a
/// restart, the brake holding.
pub fn problems(snapshot: &FleetSnapshot) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(why) = &snapshot.refused {
        problems.push(format!(
            "the config on disk is refused and revision {} stays in force: {}",
            snapshot.kept.number(&snapshot.in_force),
            why.replace('\n', "; ")
        ));
    }
    if !snapshot.waiting.is_empty() {
        problems.push(format!(
            "changed on disk, applied at the next restart: {}",
            snapshot.waiting.join(", ")
        ));
    }
    let brake = &snapshot.brake;
    if brake.held {
        let rule = snapshot.strategy.reap_brake;
        problems.push(format!(
            "holding the reaping of {} namespaces ({} opting out or pruning within {} s: more than {} of {} and at least {}): `flotilla rollout resume` confirms",
            brake.opting_out,
            brake.counted,
            rule.window.as_secs(),
            rule.share,
            brake.fleet,
            rule.at_least
        ));
    }
    problems
}

/// The Fleet's message after `step`: what is going on and, when stuck, what to do.
pub fn message(snapshot: &FleetSnapshot, step: &Step, problems: &[String]) -> String {
    let s = &step.state;
    let c = &step.counts;
    let (stable, target) = (
        snapshot.kept.number(&s.stable),
        snapshot.kept.number(&s.target),
    );
    let failed = || {
        // Rolled back, and the namespaces that failed have left the fleet since: no count of
        // zero failed (a Failed rollout with none failed goes on: rollout/plan.rs).
        if s.failed.is_empty() {
            return format!(
                "the namespaces that failed at revision {target} have left the fleet; roll out a new revision"
            );
        }
        let names: Vec<&str> = s.failed.iter().map(String::as_str).take(5).collect();
        let more = s.failed.len().saturating_sub(names.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} failed at revision {target} (maxFailures {}): {}{more}; `kubectl get nsw` says why",
            s.failed.len(),
            snapshot.strategy.max_failures,
            names.join(", ")
        )
    };
    let mut text = match s.phase {
        Phase::Complete => format!("revision {target} runs in all {} namespaces", c.total),
        // No namespace at all (a selector that matches none): nothing can complete.
        Phase::Progressing if c.total == 0 => format!(
            "rolling out revision {target} over {stable}: no namespace is in the fleet (check the selector); revision {stable} stays stable"
        ),
        Phase::Progressing => format!(
            "rolling out revision {target} over {stable}: {}/{} updated, {} updating",
            c.updated, c.total, c.unavailable
        ),
        Phase::Paused => format!(
            "paused at {}/{} on revision {target}: `flotilla rollout resume` goes on",
            c.updated, c.total
        ),
        Phase::Failed => format!(
            "stopped: {}; fix it and roll out a new revision, or `flotilla rollout undo`",
            failed()
        ),
        Phase::RolledBack => format!("rolled back to revision {stable}: {}", failed()),
    };
    for problem in problems {
        text.push_str("; ");
        text.push_str(problem);
    }
    text
}

#[cfg(test)]
mod tests;
