//! The controller's knobs as overrides: `override.flotilla.dev/<key>` within its bounds changes
//! the stamped ConfigMap and flags of that namespace; one beyond them is refused, shown in the
//! NamespaceWorker, and the namespace keeps what it had (no write, by the audit log).

use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};

/// The controller's ConfigMap data and flags, as live.
async fn live_knobs(client: &kube::Client, ns: &str) -> (serde_json::Value, Vec<String>) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let data = cms
        .get("workflow-controller-configmap")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deploy = deploys.get("workflow-controller").await.unwrap();
    let args = deploy
        .spec
        .template
        .spec
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default();
    (serde_json::to_value(data).unwrap(), args)
}

async fn annotate(client: &kube::Client, ns: &str, overrides: &[(&str, &str)]) {
    let annotations: serde_json::Map<String, serde_json::Value> = overrides
        .iter()
        .map(|(k, v)| (format!("override.flotilla.dev/{k}"), (*v).into()))
        .collect();
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn knob_overrides_within_bounds_change_their_namespace_and_beyond_them_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("knobs");
    let ns = "knobs-a";
    fleet.namespace(&client, ns, true).await;
    let _flotilla = fleet.start();
    fleet.wait_stamped(&client, ns).await;
    let (data, args) = live_knobs(&client, ns).await;
    assert_eq!(data["namespaceParallelism"], "0");
    assert!(data.get("resourceRateLimit").is_none(), "{data}");
    assert!(args.contains(&"--qps=20".to_string()), "{args:?}");

    // Within bounds: the ConfigMap and the flags of this namespace.
    let within = [
        ("namespaceParallelism", "200"),
        ("resourceRateLimit.limit", "2.5"),
        ("resourceRateLimit.burst", "25"),
        ("workflowWorkers", "64"),
        ("controllerQps", "50"),
        ("controllerBurst", "75"),
    ];
    annotate(&client, ns, &within).await;
    let annotations: Vec<(String, &str)> = within
        .iter()
        .map(|(k, v)| (format!("override.flotilla.dev/{k}"), *v))
        .collect();
    let annotations: Vec<(&str, &str)> =
        annotations.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    fleet
        .wait_stamped_annotated(&client, ns, &annotations)
        .await;
    let (data, args) = live_knobs(&client, ns).await;
    assert_eq!(data["namespaceParallelism"], "200");
    let limit: serde_json::Value =
        serde_saphyr::from_str(data["resourceRateLimit"].as_str().unwrap()).unwrap();
    assert_eq!(limit, serde_json::json!({"limit": 2.5, "burst": 25}));
    for flag in ["--workflow-workers=64", "--qps=50", "--burst=75"] {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }

    // Beyond bounds: refused, the worker says which annotation and why, and nothing changes.
    let audit = AuditWindow::open();
    annotate(&client, ns, &[("namespaceParallelism", "100000")]).await;
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let message = eventually("the worker RenderFailed", || async {
        let status = workers.get_opt(ns).await.ok()??.status?;
        (status.phase == Phase::RenderFailed).then_some(status.message)
    })
    .await;
    assert!(
        message.contains(
            "annotation override.flotilla.dev/namespaceParallelism: 100000 is above the maximum 500"
        ),
        "{message}"
    );
    // The window holds flotilla's writes: the RenderFailed status it wrote is in it once the
    // log reaches past now.
    let now = k8s_openapi::jiff::Timestamp::now();
    eventually("the audit log past the RenderFailed status", || async {
        audit.reaches(now).then_some(())
    })
    .await;
    let status_writes = audit
        .requests(
            FLOTILLA_USER,
            Some(&format!("namespaceworkers/{ns}/status")),
        )
        .len();
    assert!(status_writes > 0, "no status write for {ns} seen");
    assert_eq!(audit.writes_in(FLOTILLA_USER, ns), 0);
    let (kept, kept_args) = live_knobs(&client, ns).await;
    assert_eq!(kept["namespaceParallelism"], "200");
    assert_eq!(kept_args, args);
    delete_namespaces(&client, &[ns]).await;
}
