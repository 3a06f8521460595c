//! The rollout as a pure function: from what the fleet's NamespaceWorkers show, which
//! namespaces move to the target revision now, which failed, and the phase. The controller calls
//! [`step`] every second while it leads; [`State::pin`] tells each reconcile which revision to
//! render a namespace at.
//!
//! Everything but [`State::admitted`] is kept in the Fleet's status, and the rest comes from the
//! NamespaceWorkers, so a replica that takes over goes on where the last one stopped.

use super::strategy::{OnFailure, Strategy};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One opted-in namespace, as its NamespaceWorker shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Member {
    pub name: String,
    /// Matches the strategy's canary selector.
    pub canary: bool,
    /// The revision its objects were last applied at.
    pub applied: Option<String>,
    /// Since when `applied` has been what it is.
    pub applied_since: Option<Timestamp>,
    /// Since when its controller has been healthy (`Available`), if it is.
    pub healthy_since: Option<Timestamp>,
    /// Since when it has not been, if it is not.
    pub unhealthy_since: Option<Timestamp>,
    /// Its last reconcile could not apply: render failed, the API server refused, a conflict.
    pub failing: bool,
    /// The revision that last reconcile failed at, if the NamespaceWorker records it: a failure
    /// at the target is news for the rollout, one at the revision it had is not.
    pub failed_at: Option<String>,
    /// The failure may pass by itself (the API server answered 5xx): it fails the rollout only
    /// after the deadline, as a controller that is not healthy yet does.
    pub passing: bool,
    /// Its last reconcile could not render only because its revision was not kept (a
    /// ControllerRevision deleted): not a failure, and to be reconciled again once it is.
    pub unrendered: bool,
    /// Its controller sleeps (scaled to zero: its health is what it showed awake).
    pub asleep: bool,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Phase {
    /// Namespaces are being moved to the target revision.
    #[default]
    Progressing,
    /// Held by `flotilla rollout pause` (the Fleet's `spec.paused`): nothing more is moved.
    Paused,
    /// Every namespace runs the target revision, healthy for `soakSeconds`.
    Complete,
    /// More namespaces failed than `maxFailures`; the rollout stopped where it was.
    Failed,
    /// More namespaces failed than `maxFailures`; every namespace returns to the stable revision.
    RolledBack,
}

/// What the rollout knows between steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// The revision the fleet last completed a rollout to: where namespaces go back to.
    pub stable: String,
    /// The revision being rolled out (equal to `stable` once complete).
    pub target: String,
    pub phase: Phase,
    /// The namespaces that failed at the target.
    pub failed: BTreeSet<String>,
    /// Moved to the target and not applied there yet, since when. Kept in memory only: after a
    /// failover these are simply moved again.
    pub admitted: BTreeMap<String, Timestamp>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    /// Applied at the target revision.
    pub updated: usize,
    /// Applied at the target and healthy.
    pub ready: usize,
    pub failed: usize,
    /// Moved to the target and not done yet, or failed there and not healthy.
    pub unavailable: usize,
    /// Whose controller sleeps.
    pub asleep: usize,
}

/// What one step decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub state: State,
    /// Moved to the target by this step: to be reconciled now.
    pub admitted: Vec<String>,
    /// Failed in this step.
    pub failed: Vec<String>,
    pub counts: Counts,
}

impl State {
    /// A fleet with nothing to roll out: everything at `revision`.
    pub fn settled(revision: &str) -> State {
        State {
            stable: revision.into(),
            target: revision.into(),
            phase: Phase::Complete,
            ..State::default()
        }
    }

    /// The rollout of `target`. A newer revision supersedes one in progress or failed: the
    /// stable revision stays what the last complete rollout reached. Back to the stable revision
    /// itself is a rollout too: the namespaces the superseded one updated move back, paced the
    /// same, and it completes once every namespace is done there.
    pub fn retarget(&self, target: &str) -> State {
        if target == self.target {
            return self.clone();
        }
        let stable = if self.phase == Phase::Complete {
            self.target.clone()
        } else {
            self.stable.clone()
        };
        State {
            phase: Phase::Progressing,
            stable,
            target: target.into(),
            ..State::default()
        }
    }

    /// The revision namespace `name` is to be rendered at, given the revision it was last
    /// applied at and whether that revision can still be rendered (`known`). `stamped`: objects
    /// of it exist although no revision is recorded (its NamespaceWorker was deleted): it stays
    /// at the stable revision until the rollout moves it, rather than every such namespace
    /// moving to the target at once, past the canaries and `maxUnavailable`.
    pub fn pin<'a>(
        &'a self,
        name: &str,
        applied: Option<&'a str>,
        known: bool,
        stamped: bool,
    ) -> &'a str {
        if self.phase == Phase::RolledBack {
            return &self.stable;
        }
        if self.admitted.contains_key(name) {
            return &self.target;
        }
        match applied {
            Some(applied) if known => applied,
            None if stamped => &self.stable,
            // New (or at a revision no longer kept): the target while the rollout moves, the
            // stable revision while it is held.
            _ => match self.phase {
                Phase::Progressing | Phase::Complete => &self.target,
                Phase::Paused | Phase::Failed | Phase::RolledBack => &self.stable,
            },
        }
    }
}

/// One step of the rollout at `now`. `paused` is the Fleet's `spec.paused`.
pub fn step(
    state: &State,
    members: &[Member],
    strategy: &Strategy,
    paused: bool,
    now: Timestamp,
) -> Step {
    let mut next = state.clone();
    // Looked up by name: the whole fleet may be admitted at once, and a search of `members` for
    // each admitted name would make every step quadratic in the fleet.
    let present: HashMap<&str, &Member> = members.iter().map(|m| (m.name.as_str(), m)).collect();
    next.failed
        .retain(|name| present.contains_key(name.as_str()));
    next.admitted
        .retain(|name, _| present.contains_key(name.as_str()));
    let target = state.target.as_str();
    let at_target = |m: &Member| m.applied.as_deref() == Some(target);
    let done = |m: &Member| {
        at_target(m)
            && !m.failing
            && m.healthy_since.is_some_and(|healthy| {
                let from = healthy.max(m.applied_since.unwrap_or(healthy));
                elapsed(from, now) >= strategy.soak
            })
    };
    let mut newly_failed = Vec::new();
    if matches!(state.phase, Phase::Progressing | Phase::Paused) {
        for m in members {
            let admitted_at = next.admitted.get(&m.name).copied();
            let moving = at_target(m) || admitted_at.is_some();
            if !moving || done(m) || next.failed.contains(&m.name) {
                continue;
            }
            if refused_at(m, target) || late(m, admitted_at, target, strategy, now) {
                newly_failed.push(m.name.clone());
            }
        }
        for name in &newly_failed {
            next.failed.insert(name.clone());
            // One that failed before applying keeps what it has (and is repaired at it).
            next.admitted.remove(name);
        }
        // Applied at the target: the NamespaceWorker says so now.
        next.admitted
            .retain(|name, _| present.get(name.as_str()).is_some_and(|m| !at_target(m)));
    }
    let total = members.len();
    let unavailable = |next: &State| {
        members
            .iter()
            .filter(|m| {
                let moving = at_target(m) || next.admitted.contains_key(&m.name);
                moving && !done(m)
            })
            .count()
    };
    let mut admitted = Vec::new();
    let over_budget = next.failed.len() > strategy.max_failures.of(total);
    // Complete while a namespace is still at another revision (one it was left at while the
    // fleet looked empty, say): not complete, it goes on. New namespaces and those that failed
    // within the budget are not left behind.
    let left_behind = members.iter().any(|m| {
        m.applied.as_deref().is_some_and(|a| a != target) && !next.failed.contains(&m.name)
    });
    if next.phase == Phase::Complete && left_behind {
        next.phase = Phase::Progressing;
    }
    match next.phase {
        Phase::Complete | Phase::RolledBack => {}
        // Still past the budget: it stays stopped. Within it again (the namespaces that failed
        // left the fleet, or the budget was raised), nothing is failing and the rollout goes on.
        Phase::Failed if over_budget => {}
        _ if over_budget => {
            next.phase = match strategy.on_failure {
                OnFailure::Pause => Phase::Failed,
                OnFailure::Rollback => Phase::RolledBack,
            };
            next.admitted.clear();
        }
        _ if paused => next.phase = Phase::Paused,
        Phase::Progressing | Phase::Paused | Phase::Failed => {
            next.phase = Phase::Progressing;
            let waiting = |m: &&Member| {
                !at_target(m)
                    && !next.admitted.contains_key(&m.name)
                    && !next.failed.contains(&m.name)
            };
            let mut canaries: Vec<&Member> = members
                .iter()
                .filter(|m| m.canary)
                .filter(waiting)
                .collect();
            let canaries_busy = members
                .iter()
                .any(|m| m.canary && !done(m) && !next.failed.contains(&m.name));
            // `maxUnavailable` holds for the canaries too: they go first, as many at a time.
            let room = strategy
                .unavailable_budget(total)
                .saturating_sub(unavailable(&next));
            let batch: Vec<&Member> = if !canaries.is_empty() {
                canaries.sort_by(|a, b| a.name.cmp(&b.name));
                canaries
            } else if canaries_busy {
                Vec::new()
            } else {
                let mut names: Vec<&Member> = members.iter().filter(waiting).collect();
                names.sort_by(|a, b| a.name.cmp(&b.name));
                names
            };
            let batch: Vec<String> = batch
                .into_iter()
                .take(room)
                .map(|m| m.name.clone())
                .collect();
            for name in &batch {
                next.admitted.insert(name.clone(), now);
            }
            admitted = batch;
            // An empty fleet (a selector typo, every NamespaceWorker deleted) completes nothing:
            // `all` over no member is true, and would make the target stable for the namespaces
            // that come back.
            let finished = !members.is_empty()
                && members
                    .iter()
                    .all(|m| done(m) || next.failed.contains(&m.name));
            if finished {
                next.phase = Phase::Complete;
                next.stable = next.target.clone();
                next.admitted.clear();
            }
        }
    }
    let counts = Counts {
        total,
        updated: members.iter().filter(|m| at_target(m)).count(),
        ready: members
            .iter()
            .filter(|m| at_target(m) && m.healthy_since.is_some() && !m.failing)
            .count(),
        failed: next.failed.len(),
        unavailable: unavailable(&next),
        asleep: members.iter().filter(|m| m.asleep).count(),
    };
    Step {
        state: next,
        admitted,
        failed: newly_failed,
        counts,
    }
}

/// Refused at the target: its last reconcile, at the target, failed for what it is (render
/// failed on the target's bounds, the API server refused, a conflict). Sending it again fails the
/// same way, so it fails the rollout at once. A NamespaceWorker that does not record where it
/// failed is taken at its applied revision.
fn refused_at(m: &Member, target: &str) -> bool {
    let at = m.failed_at.as_deref().or(m.applied.as_deref());
    m.failing && !m.passing && at == Some(target)
}

/// Late: moved to the target and not healthy there within the deadline. It runs from the apply,
/// or from when it last turned unhealthy (a namespace that was done and has a passing blip is
/// not failed on the spot); for one failing that never applied the target (a failure shown
/// before the move, the same again after it), from the move. One admitted and neither applied
/// nor failing is waiting for flotilla (10,000 admitted at once take minutes to write), not late.
fn late(
    m: &Member,
    admitted_at: Option<Timestamp>,
    target: &str,
    strategy: &Strategy,
    now: Timestamp,
) -> bool {
    let at_target = m.applied.as_deref() == Some(target);
    // Healthy and soaking is not late, however long ago the apply was.
    if at_target && m.healthy_since.is_some() && !m.failing {
        return false;
    }
    let started = if at_target {
        m.applied_since.max(m.unhealthy_since)
    } else if m.failing {
        admitted_at
    } else {
        None
    };
    started.is_some_and(|s| elapsed(s, now) >= strategy.progress_deadline)
}

fn elapsed(since: Timestamp, now: Timestamp) -> std::time::Duration {
    std::time::Duration::try_from(now.duration_since(since)).unwrap_or_default()
}
