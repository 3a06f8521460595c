//! The Helm chart (charts/flotilla) against `manifests/`, with the real `helm` (e2e/tools.sh
//! builds it; `make check-install` puts it on PATH) and `kubectl kustomize`: the default render is
//! what kustomize builds, values and files override what the README says, the schema refuses bad
//! values with Helm's message, the package holds what the directory renders.

#[path = "../tools/mod.rs"]
mod tools;
mod values;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tools::{helm, helm_fails, repo, run};

/// The labels Helm's own scaffold puts on every object: the only difference allowed from
/// `manifests/` (on objects and their pod templates, never in a selector).
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

pub fn chart() -> String {
    repo().join("charts/flotilla").display().to_string()
}

/// `helm template flotilla charts/flotilla -n flotilla-system --include-crds ARGS`, parsed.
pub fn render(args: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut all = vec![
        "template",
        "flotilla",
        chart.as_str(),
        "--namespace",
        "flotilla-system",
        "--include-crds",
    ];
    all.extend(args);
    documents(&helm(&all))
}

pub fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .expect("helm renders YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .map(integral)
        .collect()
}

/// `value` with each whole number as an integer: the CRD's `minimum: 0.0` (as schemars writes
/// it, and Helm copies it) is the `minimum: 0` kustomize prints.
fn integral(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, integral(v))).collect())
        }
        other => other,
    }
}

type Key = (String, String, String, String);

fn key(object: &Value) -> Key {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["apiVersion"]),
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

fn by_key(objects: Vec<Value>) -> BTreeMap<Key, Value> {
    objects.into_iter().map(|o| (key(&o), o)).collect()
}

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// Removes Helm's labels from `labels`, asserting that they were all there.
fn strip_helm_labels(labels: &mut Value, what: &str) {
    let map = labels
        .as_object_mut()
        .unwrap_or_else(|| panic!("{what} has no labels"));
    for name in HELM_LABELS {
        assert!(
            map.remove(name).is_some(),
            "{what} lacks Helm's label {name}"
        );
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

/// The config the chart renders for flotilla, parsed.
#[test]
fn with_default_values_helm_renders_what_kustomize_builds() {
    let manifests = repo().join("manifests").display().to_string();
    let mut kustomized = by_key(documents(&run("kubectl", &["kustomize", &manifests])));
    // Helm makes the release's namespace itself (`helm install --create-namespace`): a chart
    // that rendered it too could not be installed into it.
    let namespace = (
        "v1".into(),
        "Namespace".into(),
        String::new(),
        "flotilla-system".into(),
    );
    assert!(kustomized.remove(&namespace).is_some());
    // `kubectl create configmap --dry-run` (manifests/generate.sh) writes a null
    // creationTimestamp, which the API server reads as none.
    for object in kustomized.values_mut() {
        if let Some(meta) = object["metadata"].as_object_mut()
            && meta.get("creationTimestamp") == Some(&Value::Null)
        {
            meta.remove("creationTimestamp");
        }
    }
    let mut rendered = by_key(render(&[]));
    for (key, object) in rendered.iter_mut() {
        if key.1 == "CustomResourceDefinition" {
            continue;
        }
        let what = format!("{} {}", key.1, key.3);
        strip_helm_labels(&mut object["metadata"]["labels"], &what);
        if key.1 == "Deployment" {
            let labels = &mut object["spec"]["template"]["metadata"]["labels"];
            strip_helm_labels(labels, &format!("{what}'s pod template"));
        }
    }
    let only_kustomize: Vec<_> = kustomized
        .keys()
        .filter(|k| !rendered.contains_key(k))
        .collect();
    let only_helm: Vec<_> = rendered
        .keys()
        .filter(|k| !kustomized.contains_key(k))
        .collect();
    assert!(
        only_kustomize.is_empty() && only_helm.is_empty(),
        "objects only kustomize builds: {only_kustomize:?}; only the chart renders: {only_helm:?}"
    );
    for (key, want) in &kustomized {
        let have = &rendered[key];
        if have != want {
            let diff = similar::TextDiff::from_lines(pretty(want), pretty(have))
                .unified_diff()
                .header(
                    "kubectl kustomize manifests/",
                    "helm template charts/flotilla",
                )
                .to_string();
            panic!("{} {} differs:\n{diff}", key.1, key.3);
        }
    }
}

#[test]
fn helm_lint_is_clean_with_defaults_and_with_every_option_on() {
    let chart = chart();
    for extra in [
        "",
        "monitoring.podMonitor.enabled=true,monitoring.controllerServiceMonitor.enabled=true,\
         monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,\
         podDisruptionBudget.enabled=true,priorityClassName=high,image.pullPolicy=Always",
    ] {
        let mut args = vec!["lint", "--strict", chart.as_str()];
        if !extra.is_empty() {
            args.extend(["--set", extra]);
        }
        let out = helm(&args);
        assert!(out.contains("0 chart(s) failed"), "{out}");
        assert!(
            !out.contains("[WARNING]") && !out.contains("[ERROR]"),
            "helm lint {extra}:\n{out}"
        );
    }
}

#[test]
fn the_schema_refuses_a_wrong_type_and_a_missing_value_saying_which() {
    let chart = chart();
    for (set, message) in [
        ("replicas=two", "at '/replicas': got string, want integer"),
        (
            "image.repository=null",
            "at '/image': missing property 'repository'",
        ),
        (
            "podDisruptionBudget.enabled=yes",
            "at '/podDisruptionBudget/enabled'",
        ),
        ("replica=3", "additional properties 'replica' not allowed"),
    ] {
        let err = helm_fails(&["template", "flotilla", &chart, "--set", set]);
        assert!(err.contains(message), "--set {set}: {err}");
    }
}

#[test]
fn the_package_renders_what_the_directory_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    helm(&["package", &chart(), "--destination", &out]);
    let package: PathBuf = dir
        .path()
        .join(format!("flotilla-{}.tgz", env!("CARGO_PKG_VERSION")));
    assert!(
        package.exists(),
        "helm package names it after the crate version"
    );
    let packaged = documents(&helm(&[
        "template",
        "flotilla",
        &package.display().to_string(),
        "--namespace",
        "flotilla-system",
        "--include-crds",
    ]));
    assert_eq!(packaged, render(&[]));
}
