//! The Fleet's message for each phase and each problem: a table of what the admin reads.

use super::*;
use crate::rollout::fleet::{Fleet, FleetSpec};
use crate::rollout::{Counts, KeptRevisions, Seen, State, Strategy};
use k8s_openapi::jiff::Timestamp;

fn snapshot() -> FleetSnapshot {
    FleetSnapshot {
        fleet: Fleet::new("flotilla", FleetSpec::default()),
        written: None,
        state: State::default(),
        members: Vec::new(),
        brake: Seen::default(),
        kept: KeptRevisions::new([("a".to_string(), 3, true), ("b".to_string(), 4, true)]),
        strategy: Strategy::default(),
        in_force: "b".into(),
        refused: None,
        waiting: Vec::new(),
        refusal_reported: None,
        now: Timestamp::UNIX_EPOCH,
        wall: Timestamp::UNIX_EPOCH,
        budget: None,
    }
}

/// A step at `phase` from revision `a` (3) to `b` (4), with `failed` namespaces.
fn step(phase: Phase, failed: usize) -> Step {
    Step {
        state: State {
            stable: "a".into(),
            target: "b".into(),
            phase,
            failed: (0..failed).map(|i| format!("ns-{i}")).collect(),
            admitted: Default::default(),
        },
        admitted: Vec::new(),
        failed: Vec::new(),
        counts: Counts {
            total: 40,
            updated: 12,
            ready: 10,
            failed,
            unavailable: 2,
            asleep: 0,
        },
    }
}

#[test]
fn each_phase_reads_as_what_is_going_on_and_what_to_do() {
    let cases = [
        (Phase::Complete, 0, "revision 4 runs in all 40 namespaces"),
        (
            Phase::Progressing,
            0,
            "rolling out revision 4 over 3: 12/40 updated, 2 updating",
        ),
        (
            Phase::Paused,
            0,
            "paused at 12/40 on revision 4: `flotilla rollout resume` goes on",
        ),
        (
            Phase::Failed,
            1,
            "stopped: 1 failed at revision 4 (maxFailures 0): ns-0; `kubectl get nsw` says why; fix it and roll out a new revision, or `flotilla rollout undo`",
        ),
        (
            Phase::RolledBack,
            7,
            "rolled back to revision 3: 7 failed at revision 4 (maxFailures 0): ns-0, ns-1, ns-2, ns-3, ns-4 and 2 more; `kubectl get nsw` says why",
        ),
    ];
    for (phase, failed, want) in cases {
        assert_eq!(
            message(&snapshot(), &step(phase, failed), &[]),
            want,
            "{phase:?}"
        );
    }
    // Rolled back, and the one that failed deleted since: no "0 failed ...: ;".
    assert_eq!(
        message(&snapshot(), &step(Phase::RolledBack, 0), &[]),
        "rolled back to revision 3: the namespaces that failed at revision 4 have left the fleet; roll out a new revision"
    );
    // No namespace in the fleet: nothing completes, and the message says where to look.
    let mut empty = step(Phase::Progressing, 0);
    empty.counts = Counts::default();
    assert_eq!(
        message(&snapshot(), &empty, &[]),
        "rolling out revision 4 over 3: no namespace is in the fleet (check the selector); revision 3 stays stable"
    );
}

#[test]
fn what_holds_the_rollout_follows_its_message() {
    let mut held = snapshot();
    held.refused = Some("flotilla.yaml: line 2: concurrency: invalid u16\n --> here".into());
    held.waiting = vec!["concurrency", "apiQps"];
    held.brake = Seen {
        opting_out: 30,
        counted: 30,
        fleet: 40,
        held: true,
        released: Vec::new(),
    };
    let problems = problems(&held);
    assert_eq!(
        problems,
        [
            "the config on disk is refused and revision 4 stays in force: flotilla.yaml: line 2: concurrency: invalid u16;  --> here",
            "changed on disk, applied at the next restart: concurrency, apiQps",
            "holding the reaping of 30 namespaces (30 opting out or pruning within 600 s: more than 10% of 40 and at least 5): `flotilla rollout resume` confirms",
        ]
    );
    let text = message(&held, &step(Phase::Complete, 0), &problems[2..]);
    assert_eq!(
        text,
        "revision 4 runs in all 40 namespaces; holding the reaping of 30 namespaces (30 opting out or pruning within 600 s: more than 10% of 40 and at least 5): `flotilla rollout resume` confirms"
    );
    assert!(super::problems(&snapshot()).is_empty());
}
