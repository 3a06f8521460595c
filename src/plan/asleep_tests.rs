//! Whether a namespace sleeps, from its snapshot and the repository's templates: what counts as
//! a change, and the Deployment as applied.

use super::*;
use crate::kinds::Kind;
use crate::membership::Membership;
use crate::object::{ObjectKey, Watched};
use crate::plan::{Decision, decide};
use crate::render::{NamespaceInput, Renderer};
use crate::sleep::{Cause, Policy};
use crate::status::{Condition, WorkerStatus};
use crate::workflows::Counts;
use jiff::Timestamp;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NOW: &str = "2026-12-04T12:00:00Z";

fn renderer() -> Arc<Renderer> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = crate::config::Config::load(&path).unwrap();
    Arc::new(Renderer::load(&config).unwrap())
}

fn team_a(annotations: &[(&str, &str)]) -> NamespaceState {
    NamespaceState {
        input: NamespaceInput {
            name: "team-a".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..NamespaceInput::default()
        },
        membership: Membership::Member,
        ..NamespaceState::default()
    }
}

fn rendered(renderer: &Renderer) -> Vec<Stamped> {
    renderer.render(&team_a(&[]).input).unwrap()
}

/// What the watches show of `objects` once stamped.
fn stamped(objects: &[Stamped]) -> Vec<Watched> {
    objects
        .iter()
        .map(|o| Watched {
            key: o.key.clone(),
            uid: Some(format!("uid-{}", o.key.name)),
            resource_version: Some("7".into()),
            stamped_for: "team-a".into(),
            hash: Some(o.hash.clone()),
        })
        .collect()
}

fn controller(objects: &[Stamped]) -> &Stamped {
    objects
        .iter()
        .find(|o| o.key.kind == Kind::Deployment && o.key.name == "workflow-controller")
        .unwrap()
}

/// Available since long ago, at a revision applied long ago.
fn proven() -> WorkerStatus {
    WorkerStatus {
        revision_since: "2026-12-04T09:00:00Z".into(),
        conditions: vec![Condition {
            type_: "Available".into(),
            status: "True".into(),
            last_transition_time: "2026-12-04T10:00:00Z".into(),
            ..Condition::default()
        }],
        ..WorkerStatus::default()
    }
}

/// team-a, idle for an hour, everything stamped as rendered and proven: it sleeps.
fn idle(renderer: &Arc<Renderer>) -> Snapshot {
    Snapshot {
        name: "team-a".into(),
        namespace: Some(team_a(&[])),
        stamped: stamped(&rendered(renderer)),
        previous: Some(proven()),
        revision: renderer.revision().into(),
        renderer: Some(Arc::clone(renderer)),
        workflows: Seen::Listed(Counts::default()),
        idle_since: "2026-12-04T11:00:00Z".parse().unwrap(),
        sleep: Some(Policy::default()),
        soak: Duration::from_secs(60),
        now: NOW.parse().unwrap(),
        ..Snapshot::default()
    }
}

fn sync(snapshot: &Snapshot) -> (Option<Verdict>, Vec<Stamped>) {
    match decide(snapshot, Instant::now()) {
        Decision::Sync(sync) => (sync.sleep, sync.rendered.unwrap()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn asleep_the_controller_is_rendered_at_zero_and_the_rest_as_it_is() {
    let renderer = renderer();
    let (verdict, objects) = sync(&idle(&renderer));
    assert!(verdict.as_ref().is_some_and(Verdict::asleep), "{verdict:?}");
    let awake = rendered(&renderer);
    assert_eq!(controller(&objects), &scaled_to_zero(controller(&awake)));
    let others = |set: &[Stamped]| -> Vec<Stamped> {
        set.iter()
            .filter(|o| o.key.name != "workflow-controller" || o.key.kind != Kind::Deployment)
            .cloned()
            .collect()
    };
    assert_eq!(others(&objects), others(&awake));
}

#[test]
fn without_sleep_in_the_config_there_is_no_verdict() {
    let renderer = renderer();
    let snapshot = Snapshot {
        sleep: None,
        ..idle(&renderer)
    };
    let (verdict, objects) = sync(&snapshot);
    assert_eq!(verdict, None);
    assert_eq!(objects, rendered(&renderer));
}

#[test]
fn what_counts_as_a_change_to_prove_awake() {
    let renderer = renderer();
    let awake = rendered(&renderer);
    let asleep = as_applied(awake.clone(), Some(&sync(&idle(&renderer)).0.unwrap()));
    let key = |name: &str, kind| ObjectKey {
        kind,
        namespace: "team-a".into(),
        name: name.into(),
    };
    let deployment = key("workflow-controller", Kind::Deployment);
    let configmap = key("workflow-controller-configmap", Kind::ConfigMap);
    let with_hash = |set: &[Stamped], object: &ObjectKey, hash: Option<&str>| {
        let mut watched = stamped(set);
        for w in &mut watched {
            if &w.key == object {
                w.hash = hash.map(str::to_string);
            }
        }
        watched
    };
    let cases = [
        ("stamped as rendered awake", stamped(&awake), false),
        ("stamped as rendered asleep", stamped(&asleep), false),
        (
            "the ConfigMap rendered otherwise",
            with_hash(&awake, &configmap, Some("0ld")),
            true,
        ),
        (
            "the controller rendered otherwise",
            with_hash(&awake, &deployment, Some("0ld")),
            true,
        ),
        (
            "an object without a hash",
            with_hash(&awake, &configmap, None),
            true,
        ),
        (
            "an object missing",
            stamped(&awake)
                .into_iter()
                .filter(|w| w.key != configmap)
                .collect(),
            true,
        ),
    ];
    for (name, stamped, want) in cases {
        let snapshot = Snapshot {
            stamped,
            ..idle(&renderer)
        };
        let (verdict, _) = sync(&snapshot);
        let got = verdict
            == Some(Verdict::Awake {
                cause: Cause::Change,
                until: None,
            });
        assert_eq!(got, want, "{name}: {verdict:?}");
    }
}

#[test]
fn the_inputs_come_from_the_snapshot() {
    let renderer = renderer();
    let running = Seen::Listed(Counts {
        by_label: vec![(Some("team-a".into()), 2), (Some("other".into()), 5)],
    });
    let ignored_only = Seen::Listed(Counts {
        by_label: vec![(Some("other".into()), 5)],
    });
    let theirs = Crons::Seen(vec![(
        Some("other".into()),
        crate::sleep::CronEntry {
            name: "theirs".into(),
            schedules: vec!["* * * * *".into()],
            timezone: String::new(),
        },
    )]);
    let mine = Crons::Seen(vec![(
        Some("team-a".into()),
        crate::sleep::CronEntry {
            name: "mine".into(),
            schedules: vec!["* * * * *".into()],
            timezone: String::new(),
        },
    )]);
    let at = |t: &str| t.parse::<Timestamp>().unwrap();
    type Case = (
        &'static str,
        Box<dyn Fn(&mut Snapshot)>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("idle", Box::new(|_| {}), None),
        (
            "Workflows its controller runs",
            Box::new(move |s| s.workflows = running.clone()),
            Some("Workflows"),
        ),
        (
            "only Workflows it ignores",
            Box::new(move |s| s.workflows = ignored_only.clone()),
            None,
        ),
        (
            "the CRD missing: none can exist",
            Box::new(|s| s.workflows = Seen::CrdMissing),
            None,
        ),
        (
            "Workflows not listed",
            Box::new(|s| s.workflows = Seen::NotListed),
            Some("Unseen"),
        ),
        (
            "a CronWorkflow of another controller's",
            Box::new(move |s| s.crons = theirs.clone()),
            None,
        ),
        (
            "a CronWorkflow of its own",
            Box::new(move |s| s.crons = mine.clone()),
            Some("CronWorkflow"),
        ),
        (
            "CronWorkflows unseen",
            Box::new(|s| s.crons = Crons::Unseen("no".into())),
            Some("Unseen"),
        ),
        (
            "opted out",
            Box::new(|s| s.namespace = Some(team_a(&[(OPT_OUT_ANNOTATION, "false")]))),
            Some("OptedOut"),
        ),
        (
            "never available",
            Box::new(|s| s.previous = None),
            Some("Proving"),
        ),
        (
            "a revision applied a moment ago",
            Box::new(move |s| {
                let mut status = proven();
                status.revision_since = "2026-12-04T11:59:30Z".into();
                s.previous = Some(status);
            }),
            Some("Proving"),
        ),
        (
            "busy a moment ago",
            Box::new(move |s| s.idle_since = at("2026-12-04T11:59:00Z")),
            Some("Idle"),
        ),
    ];
    for (name, change, awake) in cases {
        let mut snapshot = idle(&renderer);
        change(&mut snapshot);
        let (verdict, _) = sync(&snapshot);
        let got = match verdict {
            Some(Verdict::Awake { cause, .. }) => Some(cause.reason()),
            Some(Verdict::Asleep { .. }) => None,
            None => panic!("{name}: no verdict"),
        };
        assert_eq!(got, awake, "{name}");
    }
}
