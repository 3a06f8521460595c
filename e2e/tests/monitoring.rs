//! Every metric monitoring/'s alerts and dashboard query is one a running flotilla's /metrics
//! really serves: a live scrape of a leader that has stamped one namespace and been refused by
//! another (a quota: ApplyFailed, and a failed request counted), so that every family has shown
//! its first sample. And the chart's monitoring objects are what the Prometheus Operator's API
//! accepts, judged by its own CRDs.

use crate::failures::forbid_config_maps;
use crate::harness::*;
use crate::install::sh;
use crate::queries;

/// The Prometheus Operator release whose CRDs judge the chart's monitoring objects: its Go
/// module carries them, and the Go module proxy serves it.
const PROMETHEUS_OPERATOR: &str = "github.com/prometheus-operator/prometheus-operator@v0.85.0";

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_query_is_served() {
    let client = admin().await;
    let fleet = Fleet::new("metrics");
    forget_revisions(&client, &fleet.instance).await;
    fleet.namespace(&client, "metrics-a", true).await;
    fleet.namespace(&client, "metrics-b", false).await;
    forbid_config_maps(&client, "metrics-b").await;
    fleet.set_opt_in(&client, "metrics-b", Some("on")).await;
    let flotilla = fleet.start();
    fleet.wait_stamped(&client, "metrics-a").await;
    let text = eventually("the leader to count an ApplyFailed namespace", || async {
        let text = flotilla.metrics().await;
        let failed = sample_sum(&text, "flotilla_namespaces{phase=\"ApplyFailed\"}");
        (failed == Some(1.0)).then_some(text)
    })
    .await;
    assert_eq!(sample_sum(&text, "flotilla_is_leader"), Some(1.0));
    let missing = queries::missing(&text);
    assert!(
        missing.is_empty(),
        "queried by monitoring/ but not served: {missing:?}\n{text}"
    );
    flotilla.stop();
    delete_namespaces(&client, &["metrics-a", "metrics-b"]).await;
}

#[tokio::test]
async fn the_charts_monitoring_objects_are_accepted_by_the_prometheus_operators_crds() {
    let repo = &env().repo;
    let module = sh(
        repo,
        &format!("go mod download -json {PROMETHEUS_OPERATOR} | jq -r .Dir"),
    );
    let crds = format!("{}/example/prometheus-operator-crd", module.trim());
    let kinds = ["podmonitors", "servicemonitors", "prometheusrules"];
    for kind in kinds {
        sh(
            repo,
            &format!("kubectl apply --server-side -f {crds}/monitoring.coreos.com_{kind}.yaml"),
        );
    }
    let names = kinds
        .map(|k| format!("crd/{k}.monitoring.coreos.com"))
        .join(" ");
    sh(
        repo,
        &format!("kubectl wait --for=condition=Established --timeout=60s {names}"),
    );
    sh(
        repo,
        "kubectl get namespace e2e-monitoring || kubectl create namespace e2e-monitoring",
    );
    // Strict: a field the CRD does not know is refused, not dropped.
    let applied = sh(
        repo,
        "helm template e2e-monitoring charts/flotilla --namespace e2e-monitoring \
           --set monitoring.podMonitor.enabled=true \
           --set monitoring.controllerServiceMonitor.enabled=true \
           --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true \
           --show-only templates/podmonitor.yaml --show-only templates/controller-servicemonitor.yaml \
           --show-only templates/prometheusrule.yaml --show-only templates/dashboard.yaml \
         | kubectl apply --server-side --dry-run=server --validate=strict -n e2e-monitoring -f -",
    );
    for object in [
        "podmonitor.monitoring.coreos.com/",
        "servicemonitor.monitoring.coreos.com/",
        "prometheusrule.monitoring.coreos.com/",
        "configmap/",
    ] {
        assert!(applied.contains(object), "no {object} accepted:\n{applied}");
    }
    sh(repo, "kubectl delete namespace e2e-monitoring --wait=false");
}
