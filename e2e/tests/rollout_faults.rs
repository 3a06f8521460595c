//! Rollouts against what the API server and tenants do (issue 30, item 3): a tenant's edits of
//! the stamped Deployment, a 5xx on apply, objects labelled for a namespace that does not
//! exist. Each replays a code review's finding on the real control plane.

use crate::harness::*;
use crate::kubelet::ReadyMarker;
use crate::rollout::{wait_all_at, wait_fleet_phase, with_image};
use crate::rollout_safety::{namespaces, settled_at_v1};
use flotilla::rollout::Phase;
use flotilla::status::{NamespaceWorker, Phase as WorkerPhase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Finding 4: a tenant with `edit` removed label `flotilla.dev/instance` from the stamped
/// Deployment (a Conflict flotilla never reclaimed, so every rollout failed there), or set
/// `spec.paused: true` on it (not drift, so no new revision ever ran). Both are drift now,
/// repaired as any other, and the rollout completes.
#[tokio::test]
async fn a_tenants_label_removal_or_pause_is_drift_and_the_rollout_completes() {
    let client = admin().await;
    let mut fleet = Fleet::new("rs-veto").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1,
            "progressDeadlineSeconds": 120, "maxFailures": 0}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-veto", 2, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-veto-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    let deployment = |ns: &str| Api::<Deployment>::namespaced(client.clone(), ns);
    let tamper = |patch: serde_json::Value| Patch::Merge(patch);
    deployment(&names[0])
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &tamper(serde_json::json!({"metadata": {"labels": {"flotilla.dev/instance": null}}})),
        )
        .await
        .unwrap();
    deployment(&names[1])
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &tamper(serde_json::json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    eventually_within(
        Duration::from_secs(60),
        "the label back and the pause undone",
        || async {
            let labelled = deployment(&names[0])
                .get("workflow-controller")
                .await
                .ok()?;
            let unpaused = deployment(&names[1])
                .get("workflow-controller")
                .await
                .ok()?;
            let label = labelled.labels().get("flotilla.dev/instance").cloned();
            let paused = unpaused.spec.paused.unwrap_or(false);
            (label.as_deref() == Some(fleet.instance.as_str()) && !paused).then_some(())
        },
    )
    .await;
    let v2 = with_image(&mut fleet, "v2");
    kubelet.accept(&v2);
    fleet.config_file();
    wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Complete,
        Duration::from_secs(120),
    )
    .await;
    wait_all_at(&client, &names, &v2).await;
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Finding 8: a 5xx on apply never reached the NamespaceWorker (only a 4xx became
/// ApplyFailed). It shows as ApplyFailed, reason ServerError, and a rollout counts it as failed
/// only once the deadline passed. The 5xx: a webhook the API server cannot reach, with
/// `failurePolicy: Fail`, on Deployments of the test's namespace only.
#[tokio::test]
async fn a_server_error_on_apply_is_shown_and_fails_a_rollout_only_after_the_deadline() {
    let client = admin().await;
    let deadline = 20;
    let mut fleet = Fleet::new("rs-5xx").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 1,
            "progressDeadlineSeconds": deadline, "maxFailures": 0}),
    );
    forget_revisions(&client, &fleet.instance).await;
    let names = namespaces(&client, &fleet, "rs-5xx", 1, &[]).await;
    let v1 = with_image(&mut fleet, "v1");
    let kubelet = ReadyMarker::start(&client, "rs-5xx-", &[&v1]);
    let flotilla = settled_at_v1(&client, &fleet, &names, &v1).await;
    let _webhook = unreachable_webhook("rs-5xx", "apps", "deployments", &names[0]);
    let v2 = with_image(&mut fleet, "v2");
    kubelet.accept(&v2);
    fleet.config_file();
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let seen = eventually_within(
        Duration::from_secs(60),
        "ApplyFailed, reason ServerError",
        || async {
            let status = workers.get(&names[0]).await.ok()?.status?;
            let applied = status.conditions.iter().find(|c| c.type_ == "Applied")?;
            (status.phase == WorkerPhase::ApplyFailed && applied.reason == "ServerError")
                .then_some(Instant::now())
        },
    )
    .await;
    let status = fleet_object(&client, &fleet.instance)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        status.phase,
        Phase::Progressing,
        "failed before the deadline: {}",
        status.message
    );
    let failed = wait_fleet_phase(
        &client,
        &fleet.instance,
        2,
        Phase::Failed,
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(failed.status.unwrap().failed_namespaces, [names[0].clone()]);
    println!(
        "Failed {:?} after the worker showed the 5xx",
        seen.elapsed()
    );
    flotilla.stop();
    delete_namespaces_and_wait(&client, &names).await;
}

/// Deletes what the file it names applied, however the test ends.
/// An admission webhook that no server answers, for `resource` in `namespace`: the API server
/// refuses every create and update of it there (failurePolicy Fail) until it is dropped.
pub(crate) fn unreachable_webhook(
    name: &str,
    api_group: &str,
    resource: &str,
    namespace: &str,
) -> Removed {
    let webhook = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {name}}}
webhooks:
  - name: unreachable.e2e.flotilla.dev
    clientConfig: {{url: "https://127.0.0.1:1/"}}
    rules:
      - {{apiGroups: ["{api_group}"], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [{resource}]}}
    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {namespace}}}}}
    sideEffects: None
    admissionReviewVersions: [v1]
    failurePolicy: Fail
    timeoutSeconds: 2
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("webhook.yaml");
    std::fs::write(&file, webhook).unwrap();
    kubectl(
        &env().admin_kubeconfig,
        &["apply", "-f", file.to_str().unwrap()],
    );
    Removed { file, _dir: dir }
}

/// Deleted from the cluster when dropped.
pub(crate) struct Removed {
    file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Removed {
    fn drop(&mut self) {
        let file = self.file.to_string_lossy().into_owned();
        let args = ["delete", "--ignore-not-found", "-f", file.as_str()];
        kubectl(&env().admin_kubeconfig, &args);
    }
}

/// Finding 11 (LOW): an object labelled as this fleet's for a namespace that does not exist,
/// whose name flotilla's token may not delete, cost a refused delete on every resync. One.
#[tokio::test]
async fn objects_for_a_namespace_that_does_not_exist_cost_one_refused_delete() {
    let client = admin().await;
    let fleet = Fleet::new("rs-ghost").with("resyncSeconds", 1.into());
    let (home, nowhere, name) = ("rs-ghost-home", "rs-ghost-nowhere", "rs-ghost-forged");
    create_namespace(&client, home, BTreeMap::new(), BTreeMap::new()).await;
    let audit = AuditWindow::open();
    let flotilla = fleet.start();
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            "flotilla".to_string(),
        ),
        ("flotilla.dev/instance".to_string(), fleet.instance.clone()),
        ("flotilla.dev/namespace".to_string(), nowhere.to_string()),
    ]);
    let forged = ConfigMap {
        metadata: kube::core::ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), home)
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let deletes = || {
        audit
            .requests(FLOTILLA_USER, Some(name))
            .iter()
            .filter(|e| e["verb"] == "delete" && e["responseStatus"]["code"] == 403)
            .count()
    };
    eventually("flotilla's delete refused", || async {
        (deletes() >= 1).then_some(())
    })
    .await;
    // Five more resyncs of the namespace that does not exist (one a second).
    let reconciles = || {
        let tag = format!("namespace={nowhere}");
        flotilla
            .logs()
            .lines()
            .filter(|l| l.contains(&tag) && l.contains("in sync"))
            .count()
    };
    let before = reconciles();
    eventually("five more resyncs of it", || async {
        (reconciles() >= before + 5).then_some(())
    })
    .await;
    let end = k8s_openapi::jiff::Timestamp::now();
    eventually("the audit log past them", || async {
        audit.reaches(end).then_some(())
    })
    .await;
    assert_eq!(deletes(), 1, "a refused delete each resync");
    flotilla.stop();
    delete_namespaces_and_wait(&client, &[home]).await;
}
