use super::*;
use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::workflows::{Counts, Seen};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use std::time::Duration;

fn rendered() -> Vec<Stamped> {
    let key = |kind, name: &str| ObjectKey {
        kind,
        namespace: "team-a".into(),
        name: name.into(),
    };
    vec![
        Stamped {
            key: key(Kind::ConfigMap, "cm"),
            body: json!({}),
            hash: "h1".into(),
            template: "cm.yaml".into(),
        },
        Stamped {
            key: key(Kind::Deployment, "workflow-controller"),
            body: json!({"spec": {"template": {"spec": {"containers": [{"image": "ctrl:v1"}]}}}}),
            hash: "h2".into(),
            template: "d.yaml".into(),
        },
    ]
}

/// What flotilla keeps of a Deployment with that status: `None` before its controller looked.
fn deployment(observed: Option<i64>, available: i64) -> Option<Health> {
    let mut d = json!({
        "metadata": {"generation": 1},
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "updatedReplicas": 1, "readyReplicas": available, "availableReplicas": available,
            "conditions": [{"type": "Available", "status": if available > 0 {"True"} else {"False"},
                "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."}]},
    });
    if let Some(g) = observed {
        d["status"]["observedGeneration"] = json!(g);
    }
    availability(&d)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn observe<'a>(
    rendered: Result<&'a [Stamped], String>,
    conflicts: &'a [(ObjectKey, String)],
    health: Option<&'a Health>,
    now: Timestamp,
) -> Observation<'a> {
    Observation {
        namespace: "team-a",
        rendered,
        conflicts,
        refused: None,
        server_error: false,
        revision_unavailable: false,
        health,
        revision: "rev1",
        workflows: &LISTED_NONE,
        instance_id: Some("team-a"),
        now,
        degraded_after: Duration::from_secs(300),
        sleep: None,
        share: None,
    }
}

static LISTED_NONE: Seen = Seen::Listed(Counts {
    by_label: Vec::new(),
});

fn condition<'s>(status: &'s WorkerStatus, type_: &str) -> &'s Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn walks_pending_progressing_ready_degraded_ready() {
    let objects = rendered();
    let (pending, _) = compute(None, &observe(Ok(&objects), &[], None, at(0)));
    assert_eq!(pending.phase, Phase::Pending);
    assert_eq!(pending.image, "ctrl:v1");
    assert_eq!(pending.revision, "rev1");
    assert_eq!(pending.objects.len(), 2);
    assert_eq!(condition(&pending, "Applied").status, "True");

    let rolling = deployment(Some(1), 0);
    let (progressing, recheck) = compute(
        Some(&pending),
        &observe(Ok(&objects), &[], rolling.as_ref(), at(10)),
    );
    assert_eq!(progressing.phase, Phase::Progressing);
    assert_eq!(progressing.ready, "0/1");
    assert_eq!(recheck, Some(Duration::from_secs(300)));
    assert!(
        progressing.message.contains("minimum availability"),
        "{}",
        progressing.message
    );

    let (still, recheck) = compute(
        Some(&progressing),
        &observe(Ok(&objects), &[], rolling.as_ref(), at(110)),
    );
    assert_eq!(
        still, progressing,
        "nothing new: the same status, so no write"
    );
    assert_eq!(recheck, Some(Duration::from_secs(200)));

    let up = deployment(Some(1), 1);
    let (ready, recheck) = compute(
        Some(&still),
        &observe(Ok(&objects), &[], up.as_ref(), at(120)),
    );
    assert_eq!(
        (ready.phase, ready.ready.as_str(), recheck),
        (Phase::Ready, "1/1", None)
    );
    assert_eq!(
        condition(&ready, "Available").last_transition_time,
        at(120).to_string()
    );

    let (lost, _) = compute(
        Some(&ready),
        &observe(Ok(&objects), &[], rolling.as_ref(), at(200)),
    );
    assert_eq!(lost.phase, Phase::Progressing);
    let (degraded, recheck) = compute(
        Some(&lost),
        &observe(Ok(&objects), &[], rolling.as_ref(), at(500)),
    );
    assert_eq!((degraded.phase, recheck), (Phase::Degraded, None));
    assert!(
        degraded.message.contains("kubectl -n team-a get pods"),
        "{}",
        degraded.message
    );
    assert_eq!(
        condition(&degraded, "Available").last_transition_time,
        at(200).to_string(),
        "unavailable since it was lost"
    );

    let (recovered, _) = compute(
        Some(&degraded),
        &observe(Ok(&objects), &[], up.as_ref(), at(600)),
    );
    assert_eq!(recovered.phase, Phase::Ready);
}

#[test]
fn a_deployment_not_yet_seen_by_its_controller_is_pending() {
    let objects = rendered();
    let fresh = deployment(None, 0);
    let (status, _) = compute(None, &observe(Ok(&objects), &[], fresh.as_ref(), at(0)));
    assert_eq!(status.phase, Phase::Pending);
}

#[test]
fn render_failure_keeps_what_was_known_and_says_what_to_do() {
    let objects = rendered();
    let up = deployment(Some(1), 1);
    let (ready, _) = compute(None, &observe(Ok(&objects), &[], up.as_ref(), at(0)));
    let error =
        "annotation override.flotilla.dev/parallelism: \"lots\" is not an integer".to_string();
    let (failed, _) = compute(Some(&ready), &observe(Err(error), &[], None, at(50)));
    assert_eq!(failed.phase, Phase::RenderFailed);
    assert!(failed.message.contains("parallelism"), "{}", failed.message);
    assert!(failed.message.contains("kept"), "{}", failed.message);
    assert_eq!(
        (failed.revision.as_str(), failed.image.as_str()),
        ("rev1", "ctrl:v1")
    );
    assert_eq!(failed.objects, ready.objects);
    assert_eq!(condition(&failed, "Applied").reason, "RenderFailed");
    assert_eq!(
        condition(&failed, "Available"),
        condition(&ready, "Available")
    );
    assert_eq!(failed.last_reconcile_time, at(50).to_string());
}

#[test]
fn conflicts_are_reported_and_excluded_from_objects() {
    let objects = rendered();
    let conflicts = [(
        objects[0].key.clone(),
        "ConfigMap team-a/cm exists and was not created by flotilla".to_string(),
    )];
    let (status, _) = compute(None, &observe(Ok(&objects), &conflicts, None, at(0)));
    assert_eq!(status.phase, Phase::Conflict);
    assert!(
        status.message.contains("Delete or rename"),
        "{}",
        status.message
    );
    let kept = StampedRef {
        kind: "Deployment".into(),
        namespace: "team-a".into(),
        name: "workflow-controller".into(),
    };
    assert_eq!(
        status.objects,
        [kept],
        "the conflicting ConfigMap is not listed"
    );
    assert_eq!(condition(&status, "Applied").reason, "Conflict");
}

#[test]
fn worker_object_is_labelled_and_owned_by_its_namespace() {
    let worker = worker_object("team-a", Some("uid-1".into()), "fleet");
    assert_eq!(worker.metadata.name.as_deref(), Some("team-a"));
    let labels = worker.metadata.labels.unwrap();
    assert_eq!(labels["flotilla.dev/namespace"], "team-a");
    assert_eq!(labels["flotilla.dev/instance"], "fleet");
    let owner = &worker.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Namespace", "uid-1")
    );
}

#[test]
fn a_refusal_is_apply_failed_with_the_api_servers_words_and_keeps_what_was_applied() {
    let objects = rendered();
    let up = deployment(Some(1), 1);
    // Ready with a share of the fleet's budget of 4; then lowered to 2, which is refused.
    let (ready, _) = compute(
        None,
        &Observation {
            share: Some(4),
            ..observe(Ok(&objects), &[], up.as_ref(), at(0))
        },
    );
    let refusal = "apply ConfigMap team-a/cm: 403 Forbidden: configmaps \"cm\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1";
    let seen = Observation {
        refused: Some(refusal),
        server_error: false,
        revision_unavailable: false,
        share: Some(2),
        ..observe(Ok(&objects), &[], up.as_ref(), at(30))
    };
    let (failed, recheck) = compute(Some(&ready), &seen);
    assert_eq!((failed.phase, recheck), (Phase::ApplyFailed, None));
    // The share its controller runs with is still the one applied before.
    assert_eq!(failed.share, Some(4));
    assert!(
        failed.message.contains("exceeded quota"),
        "{}",
        failed.message
    );
    assert!(
        failed.message.contains("recovers by itself"),
        "{}",
        failed.message
    );
    let applied = condition(&failed, "Applied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "ApplyFailed")
    );
    assert_eq!(applied.last_transition_time, at(30).to_string());
    // The controller's own health is still told.
    assert_eq!(
        condition(&failed, "Available"),
        condition(&ready, "Available")
    );
    // Once the cause is gone, the next reconcile is Ready again.
    let (recovered, _) = compute(
        Some(&failed),
        &Observation {
            share: Some(2),
            ..observe(Ok(&objects), &[], up.as_ref(), at(60))
        },
    );
    assert_eq!((recovered.phase, recovered.share), (Phase::Ready, Some(2)));
}

#[test]
fn healthy_means_the_new_generation_really_runs() {
    let deploy = |generation: i64, status: serde_json::Value| {
        availability(&json!({
            "metadata": {"generation": generation},
            "spec": {"replicas": 2},
            "status": status,
        }))
        .map(|h| h.available)
    };
    let all = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
    assert_eq!(deploy(2, all.clone()), Some(true));
    assert_eq!(
        deploy(3, all),
        Some(false),
        "the applied generation not seen yet"
    );
    let old_pods_left = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 3});
    assert_eq!(
        deploy(2, old_pods_left),
        Some(false),
        "an older ReplicaSet still has a pod"
    );
    let half = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 2});
    assert_eq!(deploy(2, half), Some(false), "one replica not updated");
    let unavailable = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1});
    assert_eq!(deploy(2, unavailable), Some(false));
    assert_eq!(
        deploy(2, json!({})),
        None,
        "not looked at by its controller"
    );
}

#[test]
fn revision_since_moves_with_the_revision_only() {
    let objects = rendered();
    let healthy = deployment(Some(1), 1);
    let (first, _) = compute(None, &observe(Ok(&objects), &[], healthy.as_ref(), at(0)));
    assert_eq!(first.revision_since, at(0).to_string());
    let (same, _) = compute(
        Some(&first),
        &observe(Ok(&objects), &[], healthy.as_ref(), at(50)),
    );
    assert_eq!(same.revision_since, at(0).to_string());
    let mut next = observe(Ok(&objects), &[], healthy.as_ref(), at(60));
    next.revision = "rev2";
    let (moved, _) = compute(Some(&same), &next);
    assert_eq!(moved.revision_since, at(60).to_string());
    let (failed, _) = compute(
        Some(&moved),
        &observe(Err("bad".into()), &[], healthy.as_ref(), at(70)),
    );
    assert_eq!(
        (failed.revision.as_str(), failed.revision_since.as_str()),
        ("rev2", at(60).to_string().as_str()),
        "a render failure applies nothing"
    );
}

#[test]
fn ignored_workflows_are_counted_with_the_fix_and_cleared_when_fixed() {
    let objects = rendered();
    let up = deployment(Some(1), 1);
    let listed = |pairs: &[(Option<&str>, u32)]| {
        Seen::Listed(Counts {
            by_label: pairs
                .iter()
                .map(|(l, n)| (l.map(str::to_string), *n))
                .collect(),
        })
    };
    let two_unlabelled = listed(&[(None, 2), (Some("team-a"), 1)]);
    let fixed = listed(&[(Some("team-a"), 3)]);
    let gone = Seen::CrdMissing;
    let failed = Seen::Failed("403 Forbidden".into());
    // (what is seen, instanceID, status, reason, count, words the message must hold)
    type Case<'a> = (
        &'a Seen,
        Option<&'a str>,
        &'a str,
        &'a str,
        Option<u32>,
        &'a [&'a str],
    );
    let cases: [Case; 6] = [
        (
            &two_unlabelled,
            Some("team-a"),
            "True",
            "InstanceIDMismatch",
            Some(2),
            &[
                "2 live Workflows are without the label workflows.argoproj.io/controller-instanceid=team-a",
                "kubectl -n team-a label workflow NAME workflows.argoproj.io/controller-instanceid=team-a",
                "argo submit -n team-a --instanceid team-a",
            ],
        ),
        (&fixed, Some("team-a"), "False", "NoneIgnored", Some(0), &[]),
        // Without an instanceID the unlabelled ones run, and the labelled one is ignored.
        (
            &two_unlabelled,
            None,
            "True",
            "LabelPresent",
            Some(1),
            &[
                "1 live Workflow carries the label",
                "controller-instanceid-",
            ],
        ),
        (
            &gone,
            Some("team-a"),
            "Unknown",
            "WorkflowCRDMissing",
            None,
            &["not installed"],
        ),
        (
            &failed,
            Some("team-a"),
            "Unknown",
            "ListFailed",
            None,
            &["403 Forbidden"],
        ),
        (
            &Seen::NotListed,
            Some("team-a"),
            "Unknown",
            "NotListed",
            None,
            &[],
        ),
    ];
    for (workflows, instance_id, status, reason, count, words) in cases {
        let seen = Observation {
            workflows,
            instance_id,
            ..observe(Ok(&objects), &[], up.as_ref(), at(0))
        };
        let (worker, _) = compute(None, &seen);
        let c = condition(&worker, "WorkflowsIgnored");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            (status, reason),
            "{c:?}"
        );
        assert_eq!(worker.workflows_ignored, count, "{reason}");
        for word in words {
            assert!(c.message.contains(word), "{}", c.message);
        }
        // The phase is the controller's: ignored Workflows only add to its message.
        assert_eq!(worker.phase, Phase::Ready);
        assert_eq!(
            worker.message.contains("ignored by the controller"),
            count.is_some_and(|n| n > 0),
            "{}",
            worker.message
        );
    }
}

#[test]
fn while_rendering_fails_the_last_count_stands() {
    let objects = rendered();
    let unlabelled = Seen::Listed(Counts {
        by_label: vec![(None, 4)],
    });
    let seen = Observation {
        workflows: &unlabelled,
        ..observe(Ok(&objects), &[], None, at(0))
    };
    let (before, _) = compute(None, &seen);
    assert_eq!(before.workflows_ignored, Some(4));
    let failing = Observation {
        workflows: &LISTED_NONE,
        instance_id: None,
        ..observe(Err("bad template".into()), &[], None, at(10))
    };
    let (after, _) = compute(Some(&before), &failing);
    assert_eq!(after.workflows_ignored, Some(4));
    assert_eq!(
        condition(&after, "WorkflowsIgnored"),
        condition(&before, "WorkflowsIgnored")
    );
}

#[test]
fn the_worker_follows_the_workflow_controller_whatever_else_the_set_runs() {
    // argo-server's Deployment sorts before the controller's: the worker still shows the
    // controller's image (and reconcile takes the controller's health, `followed`).
    let mut objects = rendered();
    objects.insert(
        0,
        Stamped {
            key: ObjectKey {
                kind: Kind::Deployment,
                namespace: "team-a".into(),
                name: "argo-server".into(),
            },
            body: json!({"spec": {"template": {"spec": {"containers": [{"image": "argocli:v1"}]}}}}),
            hash: "h0".into(),
            template: "argo-server-deployment.yaml".into(),
        },
    );
    let (status, _) = compute(None, &observe(Ok(&objects), &[], None, at(0)));
    assert_eq!(status.image, "ctrl:v1");
    assert_eq!(followed_name(&objects), Some("workflow-controller"));
    // Templates of other names: the first Deployment rendered; none, nothing to follow.
    objects[2].key.name = "zz-controller".into();
    assert_eq!(followed_name(&objects), Some("argo-server"));
    let (status, _) = compute(None, &observe(Ok(&objects), &[], None, at(0)));
    assert_eq!(status.image, "argocli:v1");
    assert_eq!(followed_name(&objects[1..]), Some("zz-controller"));
    assert_eq!(followed_name(&objects[1..2]), None);
}

fn followed_name(objects: &[Stamped]) -> Option<&str> {
    followed(objects).map(|key| key.name.as_str())
}

#[path = "asleep_tests.rs"]
mod sleeping;
