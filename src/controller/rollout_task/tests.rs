//! A turn of the rollout against a scripted API (tower-test): the exact requests of each main
//! path, none that was not expected, the namespaces queued and the Events told; and the one rule
//! of who is in the fleet, as the reconcile, the rollout and the brake each apply it.

use super::super::fixture::{CONFIG_MAP, Fixture, drain, fixture, namespace};
use super::super::worker_view::WorkerView;
use super::*;
use crate::plan::{self, Decision};
use crate::rollout::fleet::FleetSpec;
use crate::status::{Condition, Phase as WorkerPhase, WorkerStatus, worker_object};
use crate::testing::{Exchange, exchange};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Instant;

const FLEET_STATUS: &str = "/apis/flotilla.dev/v1alpha1/fleets/flotilla/status";
const FLEET: &str = "/apis/flotilla.dev/v1alpha1/fleets/flotilla";
const OLDER: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  id: old\n";
const LONG_AGO: &str = "2020-01-01T00:00:00Z";

/// How each namespace's worker shows it.
#[derive(Clone, Copy)]
enum Seen {
    /// Applied at the revision, healthy since long ago.
    Healthy,
    /// Applied at the revision, healthy since just now: soaking.
    Soaking,
    /// The API server refused its objects there.
    Failing,
}

fn worker(name: &str, revision: &str, seen: Seen) -> WorkerView {
    let now = crate::status::now().to_string();
    let (phase, available, since) = match seen {
        Seen::Healthy => (WorkerPhase::Ready, "True", LONG_AGO.to_string()),
        Seen::Soaking => (WorkerPhase::Ready, "True", now.clone()),
        Seen::Failing => (WorkerPhase::ApplyFailed, "False", LONG_AGO.to_string()),
    };
    let mut worker = worker_object(name, None, super::super::fixture::INSTANCE);
    worker.metadata.resource_version = Some("10".into());
    worker.status = Some(WorkerStatus {
        phase,
        revision: revision.into(),
        revision_since: LONG_AGO.into(),
        last_reconcile_time: now,
        conditions: vec![Condition {
            type_: "Available".into(),
            status: available.into(),
            last_transition_time: since,
            ..Condition::default()
        }],
        ..WorkerStatus::default()
    });
    WorkerView::from(worker)
}

fn fleet_object(spec: FleetSpec) -> Fleet {
    let mut fleet = Fleet::new("flotilla", spec);
    fleet.metadata.uid = Some("uid-fleet".into());
    fleet.metadata.resource_version = Some("5".into());
    fleet
}

/// The Fleet as the API returns it after a status patch.
fn patched() -> Value {
    serde_json::to_value(fleet_object(FleetSpec::default())).unwrap()
}

/// A fleet of `n` namespaces under the config `text`, its Fleet `spec`; revision 1 (returned)
/// is the stable one, 2 the newest; each namespace at the revision `at` gives for it, as `seen`.
fn fleet_of(
    text: &str,
    spec: FleetSpec,
    n: usize,
    at: impl Fn(&Fixture, usize) -> (String, Seen),
    script: Vec<Exchange>,
) -> (Fixture, String) {
    let mut f = fixture(text, &[("cm.yaml", CONFIG_MAP)], &[], script);
    let older = f.keep_older(&[("cm.yaml", OLDER)]);
    f.shown.fleet(fleet_object(spec));
    for i in 0..n {
        let name = format!("ns-{i}");
        let (revision, seen) = at(&f, i);
        f.shown.namespace(namespace(&name, true, false));
        f.shown.worker(worker(&name, &revision, seen));
    }
    (f, older)
}

/// Takes a turn from `state`; returns what it queued.
async fn take_turn(f: &Fixture, state: State) -> Vec<String> {
    let queue = WorkQueue::start();
    turn(&f.ctx, &queue, state).await.expect("no API error");
    drain(&queue).await
}

fn status_of(body: &Value) -> FleetStatus {
    serde_json::from_value(body["status"].clone()).expect("a Fleet status patch")
}

fn fleet_events(f: &mut Fixture) -> Vec<String> {
    f.events
        .take()
        .into_iter()
        .map(|(reason, kind)| {
            assert_eq!(kind, "Fleet");
            reason
        })
        .collect()
}

const BATCH_OF_2: &str = "rollout:\n  maxUnavailable: 2\n";

#[tokio::test]
async fn a_new_revision_admits_a_batch_and_pins_it_before_queueing() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let at_stable = |f: &Fixture, _| (f.ctx.history.kept().hash_of(1).unwrap(), Seen::Healthy);
    let (mut f, older) = fleet_of(BATCH_OF_2, FleetSpec::default(), 5, at_stable, script);
    let queued = take_turn(&f, State::settled(&older)).await;
    assert_eq!(queued, ["ns-0", "ns-1"]);
    let pinned = f.ctx.rollout.pin("ns-0", Some(&older), true, true);
    assert_eq!(
        pinned,
        Some(f.revision()),
        "pinned to the target before queued"
    );
    assert_eq!(
        f.ctx.rollout.pin("ns-2", Some(&older), true, true),
        Some(older)
    );
    assert_eq!(fleet_events(&mut f), ["RolloutProgressing"]);
    let bodies = f.requests().await;
    let status = status_of(&bodies[0]);
    assert_eq!(
        (status.phase, status.target_revision, status.stable_revision),
        (Phase::Progressing, 2, 1)
    );
    assert_eq!(status.updated, "0/5");
}

#[tokio::test]
async fn while_a_batch_soaks_a_turn_makes_no_request() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let soaking = |f: &Fixture, _| (f.revision(), Seen::Soaking);
    let (mut f, older) = fleet_of(BATCH_OF_2, FleetSpec::default(), 2, soaking, script);
    let state = State::settled(&older).retarget(&f.revision());
    assert!(take_turn(&f, state.clone()).await.is_empty());
    assert_eq!(fleet_events(&mut f), ["RolloutProgressing"]);
    // Nothing changed: what was written is what it would write.
    let state = f.ctx.rollout.get().expect("the rollout state");
    assert!(take_turn(&f, state).await.is_empty());
    assert!(fleet_events(&mut f).is_empty());
    assert_eq!(f.requests().await.len(), 1, "only the first turn's");
}

#[tokio::test]
async fn a_status_that_lands_after_this_leaders_own_is_seen_and_written_over() {
    // Two writes, and any third request fails the script.
    let patch = || exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched());
    let soaking = |f: &Fixture, _| (f.revision(), Seen::Soaking);
    let script = vec![patch(), patch()];
    let (mut f, older) = fleet_of(BATCH_OF_2, FleetSpec::default(), 2, soaking, script);
    let written_over = |f: &Fixture| {
        let written = read(&f.ctx.rollout.written)
            .clone()
            .expect("a status written");
        (written.over, written.status)
    };
    take_turn(&f, State::settled(&older).retarget(&f.revision())).await;
    let (over, ours) = written_over(&f);
    assert_eq!(over.as_deref(), Some("5"));
    let state = f.ctx.rollout.get().expect("the rollout state");
    // The watch still shows the Fleet as it was before the write: the write stands.
    take_turn(&f, state.clone()).await;
    assert_eq!(written_over(&f).0.as_deref(), Some("5"), "no second write");
    // A write lands after it (a deposed leader's, delayed), and the watch shows it.
    let mut stale = fleet_object(FleetSpec::default());
    stale.metadata.resource_version = Some("7".into());
    stale.status = Some(FleetStatus {
        phase: Phase::Complete,
        message: "a deposed leader's".into(),
        ..ours.clone()
    });
    f.shown.fleet(stale);
    take_turn(&f, state.clone()).await;
    assert_eq!(written_over(&f), (Some("7".into()), ours.clone()));
    // Once the watch shows that write, nothing more.
    let mut seen = fleet_object(FleetSpec::default());
    seen.metadata.resource_version = Some("8".into());
    seen.status = Some(ours.clone());
    f.shown.fleet(seen);
    take_turn(&f, state).await;
    fleet_events(&mut f);
    let bodies = f.requests().await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(status_of(&bodies[1]), ours);
}

#[tokio::test]
async fn a_soaked_fleet_is_promoted_to_complete() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let done = |f: &Fixture, _| (f.revision(), Seen::Healthy);
    // Soak 0: this leader observes them healthy as of this turn (its monotonic clock, not the
    // long-ago time a worker shows), and a soak of 0 is done at once.
    let no_soak = "rollout:\n  maxUnavailable: 2\n  soakSeconds: 0\n";
    let (mut f, older) = fleet_of(no_soak, FleetSpec::default(), 3, done, script);
    let state = State::settled(&older).retarget(&f.revision());
    assert!(take_turn(&f, state).await.is_empty());
    assert_eq!(fleet_events(&mut f), ["RolloutComplete"]);
    let status = status_of(&f.requests().await[0]);
    assert_eq!(
        (status.phase, status.stable_revision, status.ready.as_str()),
        (Phase::Complete, 2, "3/3")
    );
}

#[tokio::test]
async fn a_failure_past_max_failures_stops_the_rollout_where_it_is() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let first_fails = |f: &Fixture, i| match i {
        0 => (f.revision(), Seen::Failing),
        _ => (f.ctx.history.kept().hash_of(1).unwrap(), Seen::Healthy),
    };
    let (mut f, older) = fleet_of(BATCH_OF_2, FleetSpec::default(), 3, first_fails, script);
    let state = State::settled(&older).retarget(&f.revision());
    assert!(take_turn(&f, state).await.is_empty(), "nobody else moves");
    assert_eq!(fleet_events(&mut f), ["RolloutFailed"]);
    let status = status_of(&f.requests().await[0]);
    assert_eq!(
        (status.phase, status.failed_namespaces),
        (Phase::Failed, vec!["ns-0".to_string()])
    );
}

#[tokio::test]
async fn with_on_failure_rollback_the_updated_namespaces_return() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let updated = |f: &Fixture, i| match i {
        0 => (f.revision(), Seen::Failing),
        1 => (f.revision(), Seen::Healthy),
        _ => (f.ctx.history.kept().hash_of(1).unwrap(), Seen::Healthy),
    };
    let text = "rollout:\n  maxUnavailable: 2\n  onFailure: Rollback\n";
    let (mut f, older) = fleet_of(text, FleetSpec::default(), 3, updated, script);
    let state = State::settled(&older).retarget(&f.revision());
    assert_eq!(take_turn(&f, state).await, ["ns-0", "ns-1"]);
    assert_eq!(
        f.ctx.rollout.pin("ns-1", Some(&f.revision()), true, true),
        Some(older)
    );
    assert_eq!(fleet_events(&mut f), ["RolledBack"]);
    let status = status_of(&f.requests().await[0]);
    assert_eq!(status.phase, Phase::RolledBack);
}

#[tokio::test]
async fn a_paused_rollout_admits_nothing() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let at_stable = |f: &Fixture, _| (f.ctx.history.kept().hash_of(1).unwrap(), Seen::Healthy);
    let paused = FleetSpec {
        paused: true,
        ..FleetSpec::default()
    };
    let (mut f, older) = fleet_of(BATCH_OF_2, paused, 3, at_stable, script);
    let state = State::settled(&older).retarget(&f.revision());
    assert!(take_turn(&f, state).await.is_empty());
    assert_eq!(fleet_events(&mut f), ["RolloutPaused"]);
    let status = status_of(&f.requests().await[0]);
    assert_eq!(
        (status.phase, status.updated.as_str()),
        (Phase::Paused, "0/3")
    );
}

#[tokio::test]
async fn a_confirmation_with_nobody_left_opting_out_is_cleared_from_the_spec() {
    let script = vec![
        exchange(Method::PATCH, FLEET, &[]).answer(StatusCode::OK, patched()),
        exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched()),
    ];
    let confirmed = FleetSpec {
        confirm_reaping: Some(6),
        ..FleetSpec::default()
    };
    let done = |f: &Fixture, _| (f.revision(), Seen::Healthy);
    let (f, _) = fleet_of(BATCH_OF_2, confirmed, 1, done, script);
    take_turn(&f, State::settled(&f.revision())).await;
    let bodies = f.requests().await;
    assert_eq!(bodies[0], json!({"spec": {"confirmReaping": null}}));
}

#[tokio::test]
async fn a_terminating_namespace_is_out_of_the_fleet_for_the_triage_the_rollout_and_the_brake() {
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let mut f = fixture(BATCH_OF_2, &[("cm.yaml", CONFIG_MAP)], &[], script);
    let older = f.keep_older(&[("cm.yaml", OLDER)]);
    f.shown.fleet(fleet_object(FleetSpec::default()));
    // Its labels still match: only its deletionTimestamp says it is leaving.
    for (name, opted_in, terminating) in [
        ("staying", true, false),
        ("leaving", true, true),
        ("out", false, false),
    ] {
        f.shown.namespace(namespace(name, opted_in, terminating));
        f.shown.worker(worker(name, &older, Seen::Healthy));
    }
    // The triage: reaped at once, not held by the brake as one opting out would be.
    let leaving = f.ctx.snapshot("leaving").expect("the rollout is loaded");
    assert!(matches!(
        plan::decide(&leaving, Instant::now()),
        Decision::Reap {
            opting_out: false,
            ..
        }
    ));
    let out = f.ctx.snapshot("out").expect("the rollout is loaded");
    assert!(matches!(
        plan::decide(&out, Instant::now()),
        Decision::Reap {
            opting_out: true,
            ..
        }
    ));
    // The rollout: not a member, so neither counted nor admitted.
    let current = f.ctx.in_force.get();
    let fleet = fleet_object(FleetSpec::default());
    let state = State::settled(&older);
    let seen = snapshot(&f.ctx, fleet, &current, state.clone());
    let members: Vec<&str> = seen.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(members, ["staying"]);
    // The brake: not opting out either, though it has a worker.
    assert_eq!((seen.brake.opting_out, seen.brake.fleet), (1, 3));
    assert_eq!(take_turn(&f, state).await, ["staying"]);
    let status = status_of(&f.requests().await[0]);
    assert_eq!(status.total, 1);
}

#[tokio::test]
async fn a_takeover_with_stale_files_renumbers_nothing_and_keeps_the_undo() {
    // Only the status is written: no ControllerRevision renumbered, no spec patch.
    let script = vec![exchange(Method::PATCH, FLEET_STATUS, &[]).answer(StatusCode::OK, patched())];
    let undo = FleetSpec {
        revision: Some(2),
        ..FleetSpec::default()
    };
    let at_current = |f: &Fixture, _| (f.revision(), Seen::Healthy);
    let (f, _) = fleet_of(BATCH_OF_2, undo, 2, at_current, script);
    // Revision 3, recorded by the leader before this one from files this replica has not
    // seen yet (created after it read its own, revision 2's content).
    let config = &f.ctx.in_force.get().config;
    let renderer = crate::testing::renderer(config, &[("cm.yaml", OLDER)]);
    let content = crate::rollout::revision::Content::of(config, renderer.sources());
    let mut newer =
        crate::rollout::revision::controller_revision(config, renderer.revision(), 3, &content);
    let later =
        k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(60);
    newer.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(later));
    f.ctx.history.keep(&newer);
    let state = State::settled(&f.revision());
    assert!(take_turn(&f, state).await.is_empty());
    let kept = f.ctx.history.kept();
    assert_eq!(kept.number(&f.revision()), 2, "not renumbered");
    assert_eq!(
        f.ctx.rollout.get().map(|s| s.target),
        Some(f.revision()),
        "the undo's revision stays the target"
    );
    assert_eq!(f.requests().await.len(), 1);
}
