//! The chart's values and files: each override renders what the README says.

use super::{chart, documents, find, render};
use crate::tools::{helm, helm_fails, repo};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

fn config_of(objects: &[Value]) -> Value {
    let text = find(objects, "ConfigMap", "flotilla-config")["data"]["flotilla.yaml"]
        .as_str()
        .expect("flotilla.yaml in the config ConfigMap")
        .to_string();
    serde_saphyr::from_str(&text).unwrap()
}

/// The repository's flotilla.yaml as the pod reads it: the templates beside the config.
fn repository_config() -> Value {
    let text = std::fs::read_to_string(repo().join("flotilla.yaml")).unwrap();
    let mut config: Value = serde_saphyr::from_str(&text).unwrap();
    config["templates"] = json!("../templates");
    config
}

#[test]
fn config_keys_merge_over_the_repository_config_false_and_zero_included() {
    let objects = render(&[
        "--set",
        "config.values.parallelism=7,config.leaderElection.enabled=false,config.values.namespaceParallelism=0",
    ]);
    let mut want = repository_config();
    want["values"]["parallelism"] = json!(7);
    want["leaderElection"]["enabled"] = json!(false);
    want["values"]["namespaceParallelism"] = json!(0);
    assert_eq!(config_of(&objects), want);
}

#[test]
fn config_file_replaces_the_repository_config_and_takes_the_release_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flotilla.yaml");
    std::fs::write(
        &file,
        "# ours\nselector: team=yes\ntemplates: ../templates\n",
    )
    .unwrap();
    let objects = render(&["--set-file", &format!("configFile={}", file.display())]);
    let config = find(&objects, "ConfigMap", "flotilla-config");
    assert_eq!(
        config["data"]["flotilla.yaml"],
        "# ours\nselector: team=yes\ntemplates: ../templates\nnamespace: flotilla-system\n"
    );
}

#[test]
fn another_release_namespace_is_the_config_namespace_and_the_bindings_subject() {
    let chart = chart();
    let objects = documents(&helm(&["template", "flotilla", &chart, "-n", "ops"]));
    let mut want = repository_config();
    want["namespace"] = json!("ops");
    assert_eq!(config_of(&objects), want);
    let binding = find(&objects, "ClusterRoleBinding", "flotilla");
    assert_eq!(binding["subjects"][0]["namespace"], "ops");
    let err = helm_fails(&[
        "template",
        "flotilla",
        &chart,
        "-n",
        "ops",
        "--set",
        "config.namespace=flotilla-system",
    ]);
    assert!(
        err.contains("config.namespace is flotilla-system but the release is in namespace ops"),
        "{err}"
    );
}

#[test]
fn a_release_not_named_flotilla_names_its_objects_after_itself() {
    let chart = chart();
    let objects = documents(&helm(&["template", "team", &chart, "-n", "ops"]));
    let deployment = find(&objects, "Deployment", "team-flotilla");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "team-flotilla");
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        "team-flotilla-config"
    );
    assert_eq!(
        pod["volumes"][1]["configMap"]["name"],
        "team-flotilla-templates"
    );
    let stamp = find(&objects, "ClusterRoleBinding", "team-flotilla-stamp");
    assert_eq!(stamp["roleRef"]["name"], "team-flotilla-stamp");
    find(&objects, "ClusterRole", "team-flotilla-stamp");
    find(&objects, "Role", "team-flotilla-leader-election");
}

#[test]
fn templates_are_added_replaced_and_removed_by_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.yaml");
    std::fs::write(&extra, "kind: ConfigMap\n").unwrap();
    let objects = render(&[
        "--set-file",
        &format!("templates.extra\\.yaml={}", extra.display()),
        "--set-file",
        &format!("templates.controller-role\\.yaml={}", extra.display()),
        "--set-string",
        "templates.argo-server-service\\.yaml=",
    ]);
    let data = &find(&objects, "ConfigMap", "flotilla-templates")["data"];
    let mut want: BTreeMap<String, String> = std::fs::read_dir(repo().join("templates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (file_name(&p), std::fs::read_to_string(&p).unwrap()))
        .collect();
    want.insert("extra.yaml".into(), "kind: ConfigMap\n".into());
    want.insert("controller-role.yaml".into(), "kind: ConfigMap\n".into());
    want.remove("argo-server-service.yaml");
    assert_eq!(data, &serde_json::to_value(&want).unwrap());
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn values_set_the_deployment_and_its_disruption_budget() {
    let objects = render(&[
        "--set",
        "image.repository=registry.example.com/flotilla,image.tag=9.9.9,image.pullPolicy=Always",
        "--set",
        "replicas=3,priorityClassName=system-cluster-critical,resources.limits.memory=1Gi",
        "--set",
        "podDisruptionBudget.enabled=true",
    ]);
    let deployment = find(&objects, "Deployment", "flotilla");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "registry.example.com/flotilla:9.9.9");
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(container["resources"]["requests"]["memory"], "64Mi");
    let budget = find(&objects, "PodDisruptionBudget", "flotilla");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert_eq!(
        budget["spec"]["selector"], deployment["spec"]["selector"],
        "the budget covers the Deployment's pods"
    );
}

#[test]
fn a_stamp_cluster_role_of_ones_own_replaces_the_generated_one() {
    let dir = tempfile::tempdir().unwrap();
    let role = dir.path().join("role.yaml");
    std::fs::write(
        &role,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: flotilla-stamp\n\
         rules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [create, patch, delete]\n    resourceNames: [mine]\n",
    )
    .unwrap();
    let objects = render(&[
        "--set-file",
        &format!("stampClusterRole={}", role.display()),
    ]);
    let stamp = find(&objects, "ClusterRole", "flotilla-stamp");
    assert_eq!(
        stamp["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch", "delete"], "resourceNames": ["mine"]}])
    );
    let err = helm_fails(&[
        "template",
        "flotilla",
        &chart(),
        "--set",
        "stampClusterRole=nope",
    ]);
    assert!(
        err.contains("stampClusterRole must be one ClusterRole"),
        "{err}"
    );
}

#[test]
fn monitoring_objects_carry_the_repository_files_and_select_what_flotilla_runs_and_stamps() {
    let objects = render(&[
        "--set",
        "monitoring.podMonitor.enabled=true,monitoring.controllerServiceMonitor.enabled=true",
        "--set",
        "monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true",
        "--set",
        "monitoring.prometheusRule.labels.release=kube-prometheus,config.instance=blue",
    ]);
    let rule = find(&objects, "PrometheusRule", "flotilla");
    assert_eq!(rule["metadata"]["labels"]["release"], "kube-prometheus");
    let alerts = std::fs::read_to_string(repo().join("monitoring/alerts.yaml")).unwrap();
    let alerts: Value = serde_saphyr::from_str(&alerts).unwrap();
    assert_eq!(rule["spec"], alerts);
    let dashboard = find(&objects, "ConfigMap", "flotilla-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = std::fs::read_to_string(repo().join("monitoring/dashboard.json")).unwrap();
    assert_eq!(dashboard["data"]["flotilla.json"], json.as_str());
    // The PodMonitor selects the Deployment's pods, by labels they carry.
    let pods = &find(&objects, "Deployment", "flotilla")["spec"]["template"]["metadata"]["labels"];
    let monitor = find(&objects, "PodMonitor", "flotilla");
    for (name, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pods[name], value, "the pods lack {name}");
    }
    assert_eq!(monitor["spec"]["podMetricsEndpoints"][0]["port"], "http");
    // The ServiceMonitor selects the metrics Service templates/ stamps, by the instance label
    // flotilla puts on what it stamps.
    let services = find(&objects, "ServiceMonitor", "flotilla-controllers");
    let selector = &services["spec"]["selector"]["matchLabels"];
    assert_eq!(selector[flotilla::ownership::INSTANCE], "blue");
    let template =
        std::fs::read_to_string(repo().join("templates/controller-metrics-service.yaml")).unwrap();
    let template: Value = serde_saphyr::from_str(&template).unwrap();
    assert_eq!(
        selector["app.kubernetes.io/name"],
        template["metadata"]["labels"]["app.kubernetes.io/name"]
    );
    assert_eq!(
        services["spec"]["endpoints"][0]["port"],
        template["spec"]["ports"][0]["name"]
    );
}
