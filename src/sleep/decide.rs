//! Whether a namespace's controller sleeps now, and until when that holds if nothing changes.
//!
//! An awake controller sleeps once all of these hold: no Workflow it runs is live, nothing is to
//! be applied, its revision is proven (available for the rollout's soak since it was applied),
//! it has had nothing to do for `afterSeconds`, and no CronWorkflow of its runs within
//! `wakeAheadSeconds`. A sleeping one wakes for a live Workflow, a change to apply, a
//! CronWorkflow's run `wakeAheadSeconds` ahead, or housekeeping every `housekeepingSeconds`.
//! Whatever flotilla cannot see (Workflows not listed, a schedule it cannot read, an unknown
//! opt-out value) keeps a controller awake: sleeping is a saving, never a risk to a Workflow.

use super::Policy;
use super::schedule::{CronEntry, next_run};
use jiff::{SignedDuration, Timestamp};
use std::fmt;
use std::time::Duration;

/// Why a controller is awake, or what woke it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cause {
    /// This many live Workflows for it to run.
    Workflows(u32),
    /// A CronWorkflow of its runs at this time.
    CronWorkflow { name: String, at: Timestamp },
    /// The periodic wake for TTL and GC of completed Workflows.
    Housekeeping,
    /// Something rendered differs from what is stamped: applied awake, and proven.
    Change,
    /// Applied, and not yet available for the rollout's soak.
    Proving,
    /// Nothing to do since this time, for less than `afterSeconds`.
    Idle(Timestamp),
    /// The namespace's `override.flotilla.dev/sleep` is `false`.
    OptedOut,
    /// The namespace's `override.flotilla.dev/sleep` is neither `true` nor `false`.
    UnknownOptOut(String),
    /// Its Workflows or CronWorkflows cannot be seen, or a schedule cannot be read.
    Unseen(String),
}

impl Cause {
    /// Every reason, as a metric's label values.
    pub const REASONS: [&'static str; 9] = [
        "Workflows",
        "CronWorkflow",
        "Housekeeping",
        "Change",
        "Proving",
        "Idle",
        "OptedOut",
        "UnknownOptOut",
        "Unseen",
    ];

    /// The reason of the `Asleep` condition it turns `False`.
    pub fn reason(&self) -> &'static str {
        match self {
            Cause::Workflows(_) => "Workflows",
            Cause::CronWorkflow { .. } => "CronWorkflow",
            Cause::Housekeeping => "Housekeeping",
            Cause::Change => "Change",
            Cause::Proving => "Proving",
            Cause::Idle(_) => "Idle",
            Cause::OptedOut => "OptedOut",
            Cause::UnknownOptOut(_) => "UnknownOptOut",
            Cause::Unseen(_) => "Unseen",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Workflows(1) => write!(f, "a Workflow to run"),
            Cause::Workflows(n) => write!(f, "{n} Workflows to run"),
            Cause::CronWorkflow { name, at } => write!(f, "CronWorkflow {name} runs at {at}"),
            Cause::Housekeeping => write!(
                f,
                "housekeeping: Argo deletes completed Workflows past their TTL and their pods"
            ),
            Cause::Change => write!(f, "a change to apply, proven running before it sleeps"),
            Cause::Proving => write!(
                f,
                "proving its revision: available for the rollout's soakSeconds first"
            ),
            Cause::Idle(since) => write!(f, "nothing to do since {since}"),
            Cause::OptedOut => write!(f, "{}=false: never sleeps", super::OPT_OUT_ANNOTATION),
            Cause::UnknownOptOut(value) => write!(
                f,
                "{}={value:?} is neither true nor false, so it does not sleep",
                super::OPT_OUT_ANNOTATION
            ),
            Cause::Unseen(why) => write!(f, "{why}, so it does not sleep"),
        }
    }
}

/// A timed wake of a sleeping controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Wake {
    pub at: Timestamp,
    pub cause: Cause,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Scaled to zero since `since`; `wake` is the next timed wake.
    Asleep { since: Timestamp, wake: Wake },
    /// Running, for `cause`; `until` is when that no longer holds if nothing else changes.
    Awake {
        cause: Cause,
        until: Option<Timestamp>,
    },
}

impl Verdict {
    pub fn asleep(&self) -> bool {
        matches!(self, Verdict::Asleep { .. })
    }

    /// When the verdict changes by itself: look again then.
    pub fn next_change(&self) -> Option<Timestamp> {
        match self {
            Verdict::Asleep { wake, .. } => Some(wake.at),
            Verdict::Awake { until, .. } => *until,
        }
    }
}

/// What a namespace's verdict is decided from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    /// Its `override.flotilla.dev/sleep` annotation.
    pub opt_out: Option<&'a str>,
    /// Since when it sleeps, as its NamespaceWorker says (`None`: awake).
    pub asleep_since: Option<Timestamp>,
    /// Its live Workflows its controller runs, or why they cannot be seen.
    pub running: Result<u32, String>,
    /// Since when it has had no Workflow to run (at most since flotilla saw its Workflows).
    pub idle_since: Timestamp,
    /// Its CronWorkflows its controller runs, or why they cannot be seen.
    pub crons: Result<&'a [CronEntry], String>,
    /// Something rendered differs from what is stamped for it.
    pub changed: bool,
    /// When its revision counts as proven (`None`: its controller is not available).
    pub proven_at: Option<Timestamp>,
    pub now: Timestamp,
}

pub fn decide(inputs: &Inputs) -> Verdict {
    let awake = |cause, until| Verdict::Awake { cause, until };
    let now = inputs.now;
    match inputs.opt_out.map(str::trim) {
        None | Some("true") => {}
        Some("false") => return awake(Cause::OptedOut, None),
        Some(other) => return awake(Cause::UnknownOptOut(other.to_string()), None),
    }
    let running = match &inputs.running {
        Ok(n) => *n,
        Err(why) => return awake(Cause::Unseen(why.clone()), None),
    };
    if running > 0 {
        return awake(Cause::Workflows(running), None);
    }
    if inputs.changed {
        return awake(Cause::Change, None);
    }
    let ahead = inputs.policy.wake_ahead;
    // A run counts from `wakeAheadSeconds` before it to as long after: the controller must be
    // up when Argo's own cron fires, and must not be stopped before it created the Workflow.
    let run = match &inputs.crons {
        Ok(crons) => next_run(crons, minus(now, ahead)),
        Err(why) => Err(why.clone()),
    };
    let cron_wake = match run {
        Ok(run) => run.map(|(name, at)| Wake {
            at: minus(at, ahead),
            cause: Cause::CronWorkflow { name, at },
        }),
        Err(why) => return awake(Cause::Unseen(why), None),
    };
    if let Some(wake) = &cron_wake
        && now >= wake.at
    {
        let until = match &wake.cause {
            Cause::CronWorkflow { at, .. } => Some(plus(*at, ahead)),
            _ => None,
        };
        return awake(wake.cause.clone(), until);
    }
    let sleep_wake = |since: Timestamp| {
        let housekeeping = Wake {
            at: plus(since, inputs.policy.housekeeping),
            cause: Cause::Housekeeping,
        };
        match cron_wake.clone() {
            Some(cron) if cron.at < housekeeping.at => cron,
            _ => housekeeping,
        }
    };
    if let Some(since) = inputs.asleep_since {
        let wake = sleep_wake(since);
        return if now >= wake.at {
            awake(wake.cause, None)
        } else {
            Verdict::Asleep { since, wake }
        };
    }
    match inputs.proven_at {
        None => return awake(Cause::Proving, None),
        Some(at) if now < at => return awake(Cause::Proving, Some(at)),
        Some(_) => {}
    }
    let sleeps_at = plus(inputs.idle_since, inputs.policy.after);
    if now < sleeps_at {
        return awake(Cause::Idle(inputs.idle_since), Some(sleeps_at));
    }
    // A sleep shorter than `afterSeconds` before a run saves less than the start-up costs.
    if let Some(Wake {
        cause: cause @ Cause::CronWorkflow { at, .. },
        ..
    }) = &cron_wake
        && minus(*at, ahead) < plus(now, inputs.policy.after)
    {
        return awake(cause.clone(), Some(plus(*at, ahead)));
    }
    Verdict::Asleep {
        since: now,
        wake: sleep_wake(now),
    }
}

pub(super) fn plus(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

pub(super) fn minus(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_sub(d).ok())
        .unwrap_or(Timestamp::MIN)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
