use super::plan::{Member, Phase, State, step};
use super::strategy::{Amount, OnFailure, Strategy};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

const OLD: &str = "old";
const NEW: &str = "new";

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn strategy(max_unavailable: Amount) -> Strategy {
    Strategy {
        max_unavailable,
        soak: Duration::from_secs(2),
        progress_deadline: Duration::from_secs(30),
        ..Strategy::default()
    }
}

/// `n` namespaces healthy at the old revision for long; the first `canaries` are canaries.
fn fleet(n: usize, canaries: usize) -> Vec<Member> {
    (0..n)
        .map(|i| Member {
            name: format!("ns-{i:02}"),
            canary: i < canaries,
            applied: Some(OLD.into()),
            applied_since: Some(t(-1000)),
            healthy_since: Some(t(-1000)),
            unhealthy_since: None,
            failing: false,
            ..Member::default()
        })
        .collect()
}

/// What the cluster does between steps: admitted namespaces are applied at the target; at the
/// next step those whose image is good are healthy.
fn cluster(members: &mut [Member], state: &State, now: Timestamp, good: bool) {
    for m in members.iter_mut() {
        let pin = state
            .pin(&m.name, m.applied.as_deref(), true, true)
            .to_string();
        if m.applied.as_deref() != Some(&pin) {
            m.applied = Some(pin);
            m.applied_since = Some(now);
            m.healthy_since = None;
            m.unhealthy_since = Some(now);
        } else if m.healthy_since.is_none() && (good || m.applied.as_deref() == Some(OLD)) {
            m.healthy_since = Some(now);
            m.unhealthy_since = None;
        }
    }
}

struct Run {
    states: Vec<State>,
    /// The namespaces moved, in the order they were.
    order: Vec<String>,
    /// The most namespaces at once that were updating or not healthy for the soak yet.
    peak_unavailable: usize,
    members: Vec<Member>,
}

fn run(mut members: Vec<Member>, strategy: &Strategy, good: bool, seconds: i64) -> Run {
    let mut state = State::settled(OLD).retarget(NEW);
    let mut run = Run {
        states: Vec::new(),
        order: Vec::new(),
        peak_unavailable: 0,
        members: Vec::new(),
    };
    for second in 0..seconds {
        let now = t(second);
        let step = step(&state, &members, strategy, false, now);
        run.order.extend(step.admitted.iter().cloned());
        state = step.state;
        run.states.push(state.clone());
        cluster(&mut members, &state, now, good);
        // Counted from what the cluster shows, not by the step: applied at the target and not
        // yet healthy for the soak.
        let soaked = |healthy: Timestamp| {
            let elapsed = now.duration_since(healthy);
            elapsed >= k8s_openapi::jiff::SignedDuration::try_from(strategy.soak).unwrap()
        };
        let unavailable = members
            .iter()
            .filter(|m| m.applied.as_deref() == Some(NEW) && !m.healthy_since.is_some_and(soaked))
            .count();
        run.peak_unavailable = run.peak_unavailable.max(unavailable);
    }
    run.members = members;
    run
}

#[test]
fn canaries_go_first_then_at_most_max_unavailable_at_a_time() {
    let strategy = strategy(Amount::Count(5));
    let run = run(fleet(40, 2), &strategy, true, 120);
    assert_eq!(run.order[..2], ["ns-00", "ns-01"], "canaries first");
    assert_eq!(run.order.len(), 40, "each moved once: {:?}", run.order);
    assert_eq!(run.peak_unavailable, 5);
    let last = run.states.last().unwrap();
    assert_eq!(last.phase, Phase::Complete);
    assert_eq!(last.stable, NEW);
    assert!(
        run.members
            .iter()
            .all(|m| m.applied.as_deref() == Some(NEW))
    );
    // Nothing but the canaries moves until they are healthy and soaked.
    let first_other = run
        .states
        .iter()
        .position(|s| s.admitted.keys().any(|n| n != "ns-00" && n != "ns-01"))
        .unwrap();
    assert!(first_other >= 3, "others moved at second {first_other}");
}

#[test]
fn a_whole_fleet_at_once_is_max_unavailable_100_percent() {
    let run = run(fleet(40, 0), &strategy(Amount::Percent(100)), true, 10);
    assert_eq!(run.states[0].admitted.len(), 40);
    assert_eq!(run.states.last().unwrap().phase, Phase::Complete);
}

#[test]
fn admitted_namespaces_flotilla_has_not_applied_yet_are_not_late() {
    // The whole fleet admitted at once, and flotilla's queue so long that it applies nothing
    // for longer than the deadline (30 s): waiting for flotilla is not failing.
    let strategy = strategy(Amount::Percent(100));
    let mut members = fleet(4, 0);
    let mut state = State::settled(OLD).retarget(NEW);
    for second in 0..60 {
        let now = t(second);
        let step = step(&state, &members, &strategy, false, now);
        assert!(step.failed.is_empty(), "failed at second {second}");
        state = step.state;
        if second >= 45 {
            cluster(&mut members, &state, now, true);
        }
    }
    assert_eq!(state.phase, Phase::Complete);
    assert!(state.failed.is_empty());
}

#[test]
fn a_bad_revision_stops_after_the_canaries_and_the_rest_keep_theirs() {
    let strategy = strategy(Amount::Count(5));
    let run = run(fleet(40, 2), &strategy, false, 60);
    let last = run.states.last().unwrap();
    assert_eq!(last.phase, Phase::Failed);
    assert_eq!(
        last.failed.iter().collect::<Vec<_>>(),
        ["ns-00", "ns-01"],
        "failed at the deadline"
    );
    assert_eq!(run.order, ["ns-00", "ns-01"]);
    for m in &run.members[2..] {
        assert_eq!(last.pin(&m.name, m.applied.as_deref(), true, true), OLD);
    }
    // The deadline counts from the apply: nothing failed before it.
    let failed_at = run
        .states
        .iter()
        .position(|s| !s.failed.is_empty())
        .unwrap();
    assert_eq!(failed_at, 30);
}

#[test]
fn past_the_budget_a_rollback_returns_the_updated_namespaces() {
    let strategy = Strategy {
        on_failure: OnFailure::Rollback,
        ..strategy(Amount::Count(5))
    };
    let run = run(fleet(40, 2), &strategy, false, 60);
    let last = run.states.last().unwrap();
    assert_eq!(last.phase, Phase::RolledBack);
    assert!(
        run.members
            .iter()
            .all(|m| m.applied.as_deref() == Some(OLD))
    );
    // A namespace that opts in now gets the stable revision.
    assert_eq!(last.pin("new-ns", None, false, false), OLD);
}

#[test]
fn failures_within_the_budget_let_the_rollout_go_on() {
    let strategy = Strategy {
        max_failures: Amount::Count(1),
        ..strategy(Amount::Count(5))
    };
    let mut members = fleet(10, 0);
    // ns-03 refuses the new revision: its render fails as soon as it is moved.
    let mut state = State::settled(OLD).retarget(NEW);
    for second in 0..40 {
        let now = t(second);
        let step = step(&state, &members, &strategy, false, now);
        state = step.state;
        cluster(&mut members, &state, now, true);
        let m = &mut members[3];
        if m.applied.as_deref() == Some(NEW) {
            m.applied = Some(OLD.into());
            m.failing = true;
            m.failed_at = Some(NEW.into());
            m.healthy_since = Some(t(-1000));
        }
    }
    assert_eq!(state.phase, Phase::Complete);
    assert_eq!(state.failed.iter().collect::<Vec<_>>(), ["ns-03"]);
    assert_eq!(
        state.pin("ns-03", Some(OLD), true, true),
        OLD,
        "keeps its old revision"
    );
}

#[test]
fn an_old_failure_is_not_a_failure_at_the_target_but_is_late_after_the_deadline() {
    let strategy = strategy(Amount::Count(1));
    let mut members = fleet(2, 0);
    // ns-00's render fails at every revision (an override no revision accepts), and its
    // NamespaceWorker says the same after the move as before: RenderFailed at OLD.
    members[0].failing = true;
    members[0].failed_at = Some(OLD.into());
    let state = State::settled(OLD).retarget(NEW);
    let first = step(&state, &members, &strategy, false, t(0));
    assert_eq!(first.admitted, ["ns-00"]);
    let second = step(&first.state, &members, &strategy, false, t(1));
    assert!(second.failed.is_empty(), "its failure predates the move");
    // Its status never changes: it fails once the deadline (30 s) from the move has passed.
    let before = step(&second.state, &members, &strategy, false, t(29));
    assert!(before.failed.is_empty(), "failed before the deadline");
    let late = step(&before.state, &members, &strategy, false, t(30));
    assert_eq!(late.failed, ["ns-00"], "late at the deadline");
    assert_eq!(late.state.phase, Phase::Failed);
    // Refused at the target (its reconcile there failed, even within the same second as the
    // move): failed at once.
    members[0].failed_at = Some(NEW.into());
    let refused = step(&first.state, &members, &strategy, false, t(0));
    assert_eq!(refused.failed, ["ns-00"]);
}

#[test]
fn a_server_error_at_the_target_fails_only_after_the_deadline() {
    let strategy = strategy(Amount::Count(1));
    let mut members = fleet(2, 0);
    let state = State::settled(OLD).retarget(NEW);
    let first = step(&state, &members, &strategy, false, t(0));
    // Applied at the target as far as the render goes, the apply answered 5xx: its old
    // Deployment is still healthy, which is not health at the target.
    let m = &mut members[0];
    (m.applied, m.applied_since) = (Some(NEW.into()), Some(t(1)));
    (m.failing, m.passing, m.failed_at) = (true, true, Some(NEW.into()));
    let mut state = first.state;
    for second in 1..31 {
        let next = step(&state, &members, &strategy, false, t(second));
        assert!(next.failed.is_empty(), "failed at second {second}");
        state = next.state;
    }
    assert_eq!(
        step(&state, &members, &strategy, false, t(31)).failed,
        ["ns-00"]
    );
}

#[test]
fn an_empty_fleet_completes_nothing_and_a_namespace_left_behind_reopens_the_rollout() {
    let strategy = strategy(Amount::Count(1));
    let rolling = State::settled(OLD).retarget(NEW);
    // A selector typo: no member. The target does not become stable.
    let empty = step(&rolling, &[], &strategy, false, t(0));
    assert_eq!(
        (empty.state.phase, empty.state.stable.as_str()),
        (Phase::Progressing, OLD)
    );
    // Complete (as an earlier version left it) with namespaces at OLD: it goes on, paced.
    let members = fleet(4, 0);
    let reopened = step(&State::settled(NEW), &members, &strategy, false, t(1));
    assert_eq!(reopened.state.phase, Phase::Progressing);
    assert_eq!(reopened.admitted, ["ns-00"], "one at a time");
    // New namespaces (no revision yet) and one that failed within the budget are not left
    // behind.
    let mut within = State::settled(NEW);
    within.failed.insert("ns-00".into());
    let mut members = fleet(2, 0);
    members[1].applied = Some(NEW.into());
    members.push(Member {
        name: "new".into(),
        ..Member::default()
    });
    let budget = Strategy {
        max_failures: Amount::Count(1),
        ..strategy.clone()
    };
    assert_eq!(
        step(&within, &members, &budget, false, t(1)).state.phase,
        Phase::Complete
    );
    // Stamped, with no revision recorded (its NamespaceWorker deleted): the stable revision
    // until the rollout moves it; a new namespace gets the target.
    let moving = step(&rolling, &fleet(4, 0), &strategy, false, t(0)).state;
    assert_eq!(moving.pin("ns-03", None, false, true), OLD);
    assert_eq!(moving.pin("ns-03", None, false, false), NEW);
    assert_eq!(moving.pin("ns-00", None, false, true), NEW, "moved");
}

#[test]
fn a_failed_rollout_whose_failed_namespaces_left_goes_on() {
    let strategy = strategy(Amount::Count(1));
    let mut failed = State::settled(OLD).retarget(NEW);
    failed.phase = Phase::Failed;
    failed.failed.insert("gone".into());
    let next = step(&failed, &fleet(2, 0), &strategy, false, t(0));
    assert_eq!(next.state.phase, Phase::Progressing);
    assert!(next.state.failed.is_empty());
    assert_eq!(next.admitted, ["ns-00"]);
    // Still past the budget: still stopped.
    let mut members = fleet(2, 0);
    members[0].applied = Some(NEW.into());
    failed.failed = ["ns-00".to_string()].into();
    assert_eq!(
        step(&failed, &members, &strategy, false, t(0)).state.phase,
        Phase::Failed
    );
}

#[test]
fn canaries_move_within_max_unavailable() {
    // (canaries, maxUnavailable) -> the first batch: the canaries, as many as the budget.
    let cases = [(3, 2, 2), (3, 5, 3), (2, 1, 1), (1, 1, 1)];
    for (canaries, max_unavailable, first) in cases {
        let strategy = strategy(Amount::Count(max_unavailable));
        let run = run(fleet(10, canaries), &strategy, true, 120);
        assert_eq!(
            run.states[0].admitted.len(),
            first,
            "{canaries} canaries, {max_unavailable}"
        );
        assert!(run.peak_unavailable <= max_unavailable as usize);
        let canary_names: Vec<String> = (0..canaries).map(|i| format!("ns-{i:02}")).collect();
        assert_eq!(run.order[..canaries], canary_names[..], "canaries first");
        assert_eq!(run.states.last().unwrap().phase, Phase::Complete);
    }
}

#[test]
fn soak_counts_from_the_apply_not_from_an_older_healthy_signal() {
    let strategy = strategy(Amount::Count(1));
    let mut members = fleet(2, 0);
    let state = State::settled(OLD).retarget(NEW);
    let first = step(&state, &members, &strategy, false, t(0));
    // Applied at the target and never unhealthy: its `healthy_since` is old.
    members[0].applied = Some(NEW.into());
    members[0].applied_since = Some(t(0));
    let second = step(&first.state, &members, &strategy, false, t(1));
    assert!(second.admitted.is_empty(), "ns-00 has not soaked yet");
    let third = step(&second.state, &members, &strategy, false, t(2));
    assert_eq!(
        third.admitted,
        ["ns-01"],
        "soaked two seconds after the apply"
    );
}

#[test]
fn pause_holds_and_resume_goes_on() {
    let strategy = strategy(Amount::Count(1));
    let members = fleet(3, 0);
    let state = State::settled(OLD).retarget(NEW);
    let paused = step(&state, &members, &strategy, true, t(0));
    assert_eq!(paused.state.phase, Phase::Paused);
    assert!(paused.admitted.is_empty());
    assert_eq!(paused.state.pin("new-ns", None, false, false), OLD);
    let resumed = step(&paused.state, &members, &strategy, false, t(1));
    assert_eq!(resumed.state.phase, Phase::Progressing);
    assert_eq!(resumed.admitted, ["ns-00"]);
    assert_eq!(resumed.state.pin("new-ns", None, false, false), NEW);
}

#[test]
fn a_newer_revision_supersedes_one_in_progress_or_failed() {
    let mut state = State::settled(OLD).retarget(NEW);
    state.failed.insert("ns-00".into());
    state.phase = Phase::Failed;
    let next = state.retarget("newer");
    assert_eq!((next.stable.as_str(), next.target.as_str()), (OLD, "newer"));
    assert_eq!(next.phase, Phase::Progressing);
    assert!(next.failed.is_empty());
    let complete = State::settled(NEW).retarget("newer");
    assert_eq!(complete.stable, NEW);
    assert_eq!(State::settled(NEW).retarget(NEW), State::settled(NEW));
}

#[test]
fn back_to_the_stable_revision_moves_the_updated_namespaces_back() {
    let strategy = strategy(Amount::Count(2));
    let mut members = fleet(6, 0);
    let mut state = State::settled(OLD).retarget(NEW);
    for second in 0..4 {
        state = step(&state, &members, &strategy, false, t(second)).state;
        cluster(&mut members, &state, t(second), true);
    }
    let updated = members.iter().filter(|m| m.applied.as_deref() == Some(NEW));
    assert!(updated.count() >= 2, "the rollout of NEW moved some");
    // The config goes back to OLD's content before NEW completed.
    state = state.retarget(OLD);
    assert_eq!(
        (state.stable.as_str(), state.phase),
        (OLD, Phase::Progressing)
    );
    for second in 4..40 {
        state = step(&state, &members, &strategy, false, t(second)).state;
        cluster(&mut members, &state, t(second), true);
    }
    assert_eq!(state.phase, Phase::Complete);
    assert!(
        members.iter().all(|m| m.applied.as_deref() == Some(OLD)),
        "{members:?}"
    );
}

#[test]
fn namespaces_that_left_are_forgotten() {
    let strategy = strategy(Amount::Count(1));
    let mut state = State::settled(OLD).retarget(NEW);
    state.admitted.insert("gone".into(), t(0));
    state.failed.insert("gone-too".into());
    let next = step(&state, &fleet(1, 0), &strategy, false, t(1));
    assert!(!next.state.admitted.contains_key("gone"));
    assert!(next.state.failed.is_empty());
    assert_eq!(next.admitted, ["ns-00"]);
}

#[test]
fn a_done_namespace_with_a_passing_blip_is_not_failed_on_the_spot() {
    let strategy = strategy(Amount::Count(1));
    let mut members = fleet(20, 0);
    let mut state = State::settled(OLD).retarget(NEW);
    for second in 0..90 {
        let step = step(&state, &members, &strategy, false, t(second));
        state = step.state;
        cluster(&mut members, &state, t(second), true);
        if second == 35 {
            // ns-00, done long ago (past the deadline from its apply), turns unhealthy for a
            // moment while the rollout goes on.
            assert_eq!(state.phase, Phase::Progressing);
            members[0].healthy_since = None;
            members[0].unhealthy_since = Some(t(35));
        }
        if second == 40 {
            members[0].healthy_since = Some(t(40));
            members[0].unhealthy_since = None;
        }
        assert!(state.failed.is_empty(), "failed at second {second}");
    }
    assert_eq!(state.phase, Phase::Complete);
    // Unhealthy for longer than the deadline, it has failed.
    let mut late = members.clone();
    late[0].healthy_since = None;
    late[0].unhealthy_since = Some(t(100));
    let mut progressing = state.clone();
    progressing.phase = Phase::Progressing;
    assert!(
        step(&progressing, &late, &strategy, false, t(129))
            .failed
            .is_empty()
    );
    assert_eq!(
        step(&progressing, &late, &strategy, false, t(130)).failed,
        ["ns-00"]
    );
}
