//! A turn of the rollout, decided from a snapshot alone: tables of fleets and what each turn
//! comes to.

use super::*;
use crate::rollout::fleet::{Fleet, FleetSpec};
use crate::rollout::{Amount, OnFailure};
use crate::rollout::{KeptRevisions, Member, Seen, State, Strategy};
use std::time::Duration;

const OLD: &str = "old";
const NEW: &str = "new";

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

/// `n` namespaces applied at `revision` since long ago; healthy since `healthy` (seconds from
/// now), or failing.
fn members(n: usize, revision: &str, healthy: Option<i64>) -> Vec<Member> {
    (0..n)
        .map(|i| Member {
            name: format!("ns-{i}"),
            applied: Some(revision.into()),
            applied_since: Some(t(-1000)),
            healthy_since: healthy.map(t),
            unhealthy_since: healthy.is_none().then(|| t(-1000)),
            failing: healthy.is_none(),
            ..Member::default()
        })
        .collect()
}

/// Revision 1 (`OLD`) stable, 2 (`NEW`) the newest and in force; `members` in the fleet.
fn fleet(state: State, members: Vec<Member>) -> FleetSnapshot {
    FleetSnapshot {
        fleet: Fleet::new("flotilla", FleetSpec::default()),
        written: None,
        state,
        members,
        brake: Seen::default(),
        kept: KeptRevisions::new([(OLD.to_string(), 1, true), (NEW.to_string(), 2, true)]),
        strategy: Strategy {
            max_unavailable: Amount::Count(2),
            soak: Duration::from_secs(2),
            progress_deadline: Duration::from_secs(30),
            ..Strategy::default()
        },
        in_force: NEW.into(),
        refused: None,
        waiting: Vec::new(),
        refusal_reported: None,
        now: t(0),
        wall: t(0),
        budget: None,
    }
}

/// A rollout of `NEW` under way.
fn rolling() -> State {
    State::settled(OLD).retarget(NEW)
}

/// The turn in short: its phase, what it queued, whether the status was written, the news.
fn summary(turn: &Turn) -> (Phase, Vec<String>, bool, Vec<News>) {
    (
        turn.step.state.phase,
        turn.queue.clone(),
        turn.status.is_some(),
        turn.news.clone(),
    )
}

fn names(of: &[&str]) -> Vec<String> {
    of.iter().map(|n| n.to_string()).collect()
}

#[test]
fn each_turn_of_a_rollout_moves_holds_or_ends_it() {
    let paused = {
        let mut snapshot = fleet(rolling(), members(5, OLD, Some(-1000)));
        snapshot.fleet.spec.paused = true;
        snapshot
    };
    let rolling_back = {
        let mut snapshot = fleet(rolling(), members(2, NEW, None));
        snapshot.strategy.on_failure = OnFailure::Rollback;
        snapshot
    };
    let progressing = News::Phase(Phase::Progressing);
    // (case, snapshot) -> (phase, queued, status written, news)
    let cases = [
        (
            "a new revision: the first batch of maxUnavailable is admitted",
            fleet(State::settled(OLD), members(5, OLD, Some(-1000))),
            (
                Phase::Progressing,
                names(&["ns-0", "ns-1"]),
                true,
                vec![progressing],
            ),
        ),
        (
            "applied, healthy, soaking: nobody else moves while the budget is taken",
            fleet(rolling(), {
                let mut m = members(5, OLD, Some(-1000));
                m[..2].clone_from_slice(&members(2, NEW, Some(-1)));
                m
            }),
            (Phase::Progressing, vec![], true, vec![progressing]),
        ),
        (
            "every namespace healthy at the target past its soak: complete",
            fleet(rolling(), members(5, NEW, Some(-10))),
            (
                Phase::Complete,
                vec![],
                true,
                vec![News::Phase(Phase::Complete)],
            ),
        ),
        (
            "failing at the target past maxFailures (0): the rollout stops where it is",
            fleet(rolling(), members(2, NEW, None)),
            (
                Phase::Failed,
                vec![],
                true,
                vec![News::Phase(Phase::Failed)],
            ),
        ),
        (
            "with onFailure Rollback every namespace returns to the stable revision",
            rolling_back,
            (
                Phase::RolledBack,
                names(&["ns-0", "ns-1"]),
                true,
                vec![News::Phase(Phase::RolledBack)],
            ),
        ),
        (
            "paused: nothing is admitted",
            paused,
            (
                Phase::Paused,
                vec![],
                true,
                vec![News::Phase(Phase::Paused)],
            ),
        ),
    ];
    for (case, snapshot, want) in cases {
        let turn = turn(&snapshot);
        assert_eq!(summary(&turn), want, "{case}");
    }
}

#[test]
fn a_turn_that_changes_nothing_writes_nothing_and_tells_nothing() {
    let mut snapshot = fleet(rolling(), members(2, NEW, Some(-1)));
    let first = turn(&snapshot);
    assert!(first.status.is_some());
    // What was written last is what the status is compared with, though the watch may not
    // show it yet.
    snapshot.written = first.status.clone();
    snapshot.state = first.step.state.clone();
    let second = turn(&snapshot);
    assert_eq!(
        summary(&second),
        (Phase::Progressing, vec![], false, vec![])
    );
    // Soaked a moment later: promoted.
    snapshot.now = t(2);
    let promoted = turn(&snapshot);
    assert_eq!(promoted.step.state.stable, NEW);
    assert_eq!(promoted.news, [News::Phase(Phase::Complete)]);
}

#[test]
fn the_status_records_the_state_and_counts_by_revision_number() {
    let snapshot = fleet(State::settled(OLD), members(5, OLD, Some(-1000)));
    let status = turn(&snapshot).status.expect("a new status");
    assert_eq!(
        (status.stable_revision, status.target_revision, status.total),
        (1, 2, 5)
    );
    assert_eq!(
        (status.updated.as_str(), status.ready.as_str()),
        ("0/5", "0/5")
    );
    assert_eq!(status.conditions[0].last_transition_time, t(0).to_string());
    assert_eq!(
        status.message,
        "rolling out revision 2 over 1: 0/5 updated, 2 updating"
    );
}

#[test]
fn an_undo_rolls_out_a_kept_revision_and_an_unknown_one_the_newest() {
    let mut snapshot = fleet(State::settled(NEW), members(2, NEW, Some(-1000)));
    snapshot.fleet.spec.revision = Some(1);
    let undo = turn(&snapshot);
    assert_eq!(undo.step.state.target, OLD);
    assert_eq!(
        undo.queue,
        names(&["ns-0", "ns-1"]),
        "both return to revision 1"
    );
    snapshot.fleet.spec.revision = Some(9);
    let unknown = turn(&snapshot);
    assert_eq!(unknown.step.state.target, NEW);
    let message = unknown.status.expect("a status").message;
    assert!(
        message.contains("spec.revision 9 is not a kept revision"),
        "{message}"
    );
}

#[test]
fn the_brake_holds_tells_once_lets_go_and_its_confirmation_is_cleared() {
    let mut snapshot = fleet(State::settled(NEW), members(2, NEW, Some(-1000)));
    snapshot.brake = Seen {
        opting_out: 6,
        counted: 6,
        fleet: 8,
        held: true,
        released: Vec::new(),
    };
    let held = turn(&snapshot);
    let status = held.status.clone().expect("a status");
    assert_eq!(status.reap_held, 6);
    assert_eq!(held.news, [News::Phase(Phase::Complete), News::ReapingHeld]);
    assert!(
        status
            .message
            .contains("holding the reaping of 6 namespaces"),
        "{}",
        status.message
    );
    snapshot.written = held.status;
    assert!(turn(&snapshot).news.is_empty(), "told once");

    // Confirmed: let go, the held namespaces queued, and once none is left the confirmation
    // is cleared from the spec.
    snapshot.fleet.spec.confirm_reaping = Some(6);
    snapshot.brake = Seen {
        opting_out: 6,
        counted: 6,
        fleet: 8,
        held: false,
        released: names(&["a", "b"]),
    };
    let released = turn(&snapshot);
    assert_eq!(
        (released.queue.clone(), released.spec.clone()),
        (names(&["a", "b"]), None)
    );
    snapshot.brake = Seen::default();
    let cleared = turn(&snapshot);
    assert_eq!(cleared.spec, Some(json!({"confirmReaping": null})));
}

#[test]
fn a_refused_config_is_told_once_per_refusal() {
    let mut snapshot = fleet(State::settled(NEW), members(1, NEW, Some(-1000)));
    snapshot.refused = Some("flotilla.yaml: line 2: concurrency: invalid u16".into());
    let first = turn(&snapshot);
    assert!(first.news.contains(&News::ConfigRefused));
    assert_eq!(first.refusal_reported, snapshot.refused);
    let message = &first.status.as_ref().expect("a status").message;
    assert!(
        message.contains("refused and revision 2 stays in force"),
        "{message}"
    );
    snapshot.refusal_reported = first.refusal_reported;
    snapshot.written = None;
    let again = turn(&snapshot);
    assert!(
        !again.news.contains(&News::ConfigRefused),
        "{:?}",
        again.news
    );
}

#[test]
fn a_stable_revision_no_longer_kept_holds_until_the_admin_names_one() {
    // Revision 1 failed over to revision 2 ("lost", whose ControllerRevision was deleted).
    let mut lost = State::settled("lost").retarget(NEW);
    lost.phase = Phase::Failed;
    lost.failed.insert("ns-0".into());
    let mut at_lost = members(3, "lost", Some(-1000));
    at_lost[0].applied = Some(NEW.into());
    let mut snapshot = fleet(lost.clone(), at_lost);
    let mut recorded = crate::rollout::fleet::FleetStatus {
        stable_hash: "lost".into(),
        stable_revision: 1,
        ..Default::default()
    };
    snapshot.fleet.status = Some(recorded.clone());
    let held = turn(&snapshot);
    assert_eq!(held.step.state.phase, Phase::Failed);
    assert!(held.step.admitted.is_empty() && held.queue.is_empty());
    let message = held.status.expect("a status").message;
    assert!(
        message.contains("holding: the stable revision 1 (lost) is not kept"),
        "{message}"
    );
    // Progressing, it holds as a pause does.
    snapshot.state = State::settled("lost").retarget(NEW);
    assert_eq!(turn(&snapshot).step.state.phase, Phase::Paused);
    // The admin names revision 2: it rolls out.
    snapshot.fleet.spec.revision = Some(2);
    recorded.stable_revision = 0;
    snapshot.fleet.status = Some(recorded);
    let undone = turn(&snapshot);
    assert_eq!(undone.step.state.phase, Phase::Progressing);
    assert_eq!(undone.step.admitted, ["ns-1", "ns-2"]);
    // Kept again: a namespace its reconcile could not render while it was missing is
    // reconciled at once, not left showing a failure that has passed.
    let mut again = fleet(State::settled(NEW), members(2, NEW, Some(-1000)));
    again.members[1].unrendered = true;
    assert_eq!(turn(&again).queue, ["ns-1"]);
}
