//! Every way a reconcile can go, decided from the snapshot alone.

use super::*;
use crate::kinds::Kind;
use crate::object::Watched;
use crate::plan::{NamespaceState, Settled, WorkerState};
use crate::render::{NamespaceInput, RenderProblem};
use std::sync::Arc;
use std::time::Duration;

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  id: {{ controller.instanceID }}\n";

fn watched(name: &str, rv: &str) -> Watched {
    Watched {
        key: ObjectKey {
            kind: Kind::ConfigMap,
            namespace: "team-a".into(),
            name: name.into(),
        },
        uid: Some(format!("uid-{name}")),
        resource_version: Some(rv.into()),
        stamped_for: "team-a".into(),
        hash: Some("h1".into()),
    }
}

/// team-a, in the fleet, with a stamped ConfigMap and its worker, and the templates at its pin.
fn member() -> Snapshot {
    let config = crate::testing::config("");
    Snapshot {
        name: "team-a".into(),
        namespace: Some(NamespaceState {
            input: NamespaceInput {
                name: "team-a".into(),
                ..NamespaceInput::default()
            },
            resource_version: Some("100".into()),
            membership: Membership::Member,
            ..NamespaceState::default()
        }),
        stamped: vec![watched("settings", "7")],
        worker: Some(WorkerState {
            reference: k8s_openapi::api::core::v1::ObjectReference {
                resource_version: Some("200".into()),
                ..Default::default()
            },
            ours: true,
        }),
        revision: "r1".into(),
        renderer: Some(Arc::new(crate::testing::renderer(
            &config,
            &[("cm.yaml", CM)],
        ))),
        ..Snapshot::default()
    }
}

/// `snapshot` as found settled, until `until`.
fn settled(snapshot: Snapshot, until: Option<Instant>) -> Snapshot {
    let fingerprint = fingerprint(&snapshot, Some("200"));
    Snapshot {
        settled: Some(Settled { fingerprint, until }),
        ..snapshot
    }
}

/// The decision in a word, the reap's opting out, and the names rendered or reaped.
type Summary = (&'static str, bool, Vec<String>);

fn summary(decision: &Decision) -> Summary {
    match decision {
        Decision::Settled { .. } => ("settled", false, Vec::new()),
        Decision::Reap { opting_out, steps } => {
            let names = steps
                .iter()
                .map(|s| match s {
                    Step::Delete { key, .. } => key.name.clone(),
                    other => panic!("a reap with {other:?}"),
                })
                .collect();
            ("reap", *opting_out, names)
        }
        Decision::Sync(sync) => match &sync.rendered {
            Ok(objects) => {
                let names = objects.iter().map(|o| o.key.name.clone()).collect();
                ("sync", false, names)
            }
            Err(_) => ("render failed", false, Vec::new()),
        },
    }
}

#[test]
fn each_namespace_is_reaped_left_alone_or_synced() {
    let now = Instant::now();
    let later = now + Duration::from_secs(5);
    let with = |membership: Membership| {
        let mut snapshot = settled(member(), None);
        if let Some(ns) = snapshot.namespace.as_mut() {
            ns.membership = membership;
        }
        snapshot
    };
    let edited = {
        let mut snapshot = settled(member(), None);
        snapshot.stamped[0].resource_version = Some("8".into());
        snapshot
    };
    let relabelled = {
        let mut snapshot = settled(member(), None);
        if let Some(ns) = snapshot.namespace.as_mut() {
            ns.resource_version = Some("101".into());
        }
        snapshot
    };
    let repinned = Snapshot {
        revision: "r2".into(),
        ..settled(member(), None)
    };
    let gone = Snapshot {
        namespace: None,
        ..settled(member(), None)
    };
    // Gone, and its last reap deleted nothing (refused): settled until something changes.
    let refused = |snapshot: Snapshot| Snapshot {
        settled: Some(Settled {
            fingerprint: reap_fingerprint(&snapshot),
            until: None,
        }),
        ..snapshot
    };
    let gone_refused = refused(Snapshot {
        namespace: None,
        ..member()
    });
    let mut gone_refused_changed = gone_refused.clone();
    gone_refused_changed.stamped[0].resource_version = Some("8".into());
    let reaped = vec!["settings".to_string()];
    let synced = vec!["settings".to_string()];
    // (case, snapshot, when) -> (decision, opting out, names)
    let cases: Vec<(&str, Snapshot, Instant, Summary)> = vec![
        (
            "never settled",
            member(),
            now,
            ("sync", false, synced.clone()),
        ),
        (
            "settled",
            settled(member(), None),
            now,
            ("settled", false, vec![]),
        ),
        (
            "settled, a deadline ahead",
            settled(member(), Some(later)),
            now,
            ("settled", false, vec![]),
        ),
        (
            "settled, the deadline passed",
            settled(member(), Some(later)),
            later,
            ("sync", false, synced.clone()),
        ),
        (
            "an object changed",
            edited,
            now,
            ("sync", false, synced.clone()),
        ),
        (
            "the namespace changed",
            relabelled,
            now,
            ("sync", false, synced.clone()),
        ),
        ("a new pin", repinned, now, ("sync", false, synced.clone())),
        (
            "opting out: the brake may hold it",
            with(Membership::OptingOut),
            now,
            ("reap", true, reaped.clone()),
        ),
        (
            "terminating: reaped at once",
            with(Membership::Terminating),
            now,
            ("reap", false, reaped.clone()),
        ),
        (
            "gone, its reap refused, nothing changed: one refused delete, not one a resync",
            gone_refused,
            now,
            ("settled", false, vec![]),
        ),
        (
            "gone, its reap refused, an object changed since",
            gone_refused_changed,
            now,
            ("reap", false, reaped.clone()),
        ),
        ("gone: reaped at once", gone, now, ("reap", false, reaped)),
    ];
    for (case, snapshot, at, want) in cases {
        assert_eq!(summary(&decide(&snapshot, at)), want, "{case}");
    }
}

#[test]
fn a_settled_deadline_is_kept() {
    let now = Instant::now();
    let later = now + Duration::from_secs(5);
    let snapshot = settled(member(), Some(later));
    assert!(matches!(
        decide(&snapshot, now),
        Decision::Settled { until } if until == Some(later)
    ));
}

#[test]
fn a_sync_renders_at_the_pin_with_the_instance_id_and_a_missing_revision_renders_nothing() {
    let snapshot = member();
    let Decision::Sync(sync) = decide(&snapshot, Instant::now()) else {
        panic!("not a sync");
    };
    let objects = sync.rendered.as_ref().unwrap();
    assert_eq!(objects[0].body["data"]["id"], "team-a");
    assert_eq!(sync.instance_id.as_deref(), Some("team-a"));
    assert_eq!(sync.followed(), None, "no Deployment rendered");

    let unkept = Snapshot {
        renderer: None,
        ..member()
    };
    let Decision::Sync(sync) = decide(&unkept, Instant::now()) else {
        panic!("not a sync");
    };
    let errors = sync.rendered.unwrap_err();
    assert!(matches!(
        errors.0[..],
        [RenderError {
            problem: RenderProblem::RevisionUnavailable,
            ..
        }]
    ));
    assert_eq!(errors.0[0].origin, "revision r1");
    assert_eq!(sync.instance_id, None);
}
