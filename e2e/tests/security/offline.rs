//! Bad input caught before any cluster: config files and templates, as `run`, `check` and
//! `render` see them with a kubeconfig that does not exist.

use super::helpers::*;
use std::path::{Path, PathBuf};

const NO_CLUSTER: &str = "/nonexistent/flotilla-e2e/kubeconfig";

/// Runs the binary to its exit ([`flotilla_exit`]) with a kubeconfig that does not exist.
fn offline(args: &[&str]) -> (Option<i32>, String, String) {
    flotilla_exit(args, Path::new(NO_CLUSTER))
}

/// A config file in a fresh directory, and next to it a templates directory holding
/// `templates` (none if `templates` is empty).
fn offline_config(text: &str, templates: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    if !templates.is_empty() {
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        for (file, source) in templates {
            std::fs::write(dir.path().join("templates").join(file), source).unwrap();
        }
    }
    let path = dir.path().join("flotilla.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

const GOOD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  image: {{ values.image }}\n";

/// The bad configs: (case, config text, with a templates directory, what stderr must contain).
const BAD_CONFIGS: &[(&str, &str, bool, &[&str])] = &[
    (
        "YAML syntax error",
        "selector: a=b\nvalues:\n  x: [1, 2\n",
        true,
        &["line 3 column 6", "unclosed bracket"],
    ),
    (
        "unknown key",
        "selectr: a=b\n",
        true,
        &["line 1 column 1: unknown field `selectr`, expected one of selector"],
    ),
    (
        "wrong type",
        "selector: a=b\nconcurrency: many\n",
        true,
        &["line 2 column 14: concurrency: invalid u16"],
    ),
    (
        "wrong type, a list",
        "selector: a=b\nresyncSeconds:\n  - 1\n",
        true,
        &["line 3 column", "resyncSeconds"],
    ),
    (
        "duplicate key",
        "selector: a=b\nselector: c=d\n",
        true,
        &["line 2 column 1", "duplicate mapping key"],
    ),
    (
        "invalid selector",
        "# who opts in\nselector: 'env in (a'\n",
        true,
        &["line 2: selector: invalid label selector \"env in (a\": unbalanced '('"],
    ),
    (
        "empty selector",
        "selector: ''\n",
        true,
        &[
            "line 1: selector: ",
            "an empty selector would opt in every namespace",
        ],
    ),
    (
        "invalid selector key",
        "selector: 'Bad Key=1'\n",
        true,
        &["line 1: selector: ", "label key"],
    ),
    (
        "missing templates directory",
        "selector: a=b\ntemplates: nowhere\n",
        true,
        &["line 2: templates: ", "nowhere is not a directory"],
    ),
    (
        "missing default templates directory",
        "selector: a=b\n",
        false,
        &["templates: ", "templates is not a directory"],
    ),
    (
        "invalid instance",
        "instance: 'two words'\n",
        true,
        &["line 1: instance: ", "label value"],
    ),
    (
        "invalid namespace",
        "namespace: Flotilla_System\n",
        true,
        &["line 1: namespace: ", "not a valid namespace name"],
    ),
    (
        "override of a value that does not exist",
        "values: {image: x}\noverrides:\n  registry: {type: string}\n",
        true,
        &["line 3: overrides.registry: there is no values.registry to override"],
    ),
    (
        "override of an unknown type",
        "values: {n: 1}\noverrides:\n  n: {type: float}\n",
        true,
        &["unknown variant `float`"],
    ),
    (
        "override with a broken pattern",
        "values: {image: x}\noverrides:\n  image: {type: string, pattern: '('}\n",
        true,
        &["line 3: overrides.image.pattern: "],
    ),
];

pub(super) fn bad_config_stops_run_and_check_with_exit_2_naming_file_line_and_key() {
    let mut checked = 0;
    for (case, text, with_templates, needles) in BAD_CONFIGS {
        let templates: &[(&str, &str)] = if *with_templates {
            &[("good.yaml", GOOD)]
        } else {
            &[]
        };
        let (_dir, path) = offline_config(text, templates);
        let config = path.to_str().unwrap();
        for command in ["run", "check"] {
            let (code, stdout, stderr) = offline(&[command, "--config", config]);
            let at = format!("{case} ({command}): stdout {stdout:?}, stderr {stderr:?}");
            assert_eq!(code, Some(2), "{at}");
            assert!(stderr.starts_with(&format!("error: {config}: ")), "{at}");
            for needle in *needles {
                assert!(stderr.contains(needle), "{at}\n  lacks {needle:?}");
            }
            // Refused before any cluster connection was tried.
            assert!(
                !stderr.contains("connect") && !stderr.contains(NO_CLUSTER),
                "{at}"
            );
            assert!(!stdout.contains("ok:"), "{at}");
            checked += 1;
        }
    }
    let (code, _, stderr) = offline(&["run", "--config", "/nonexistent/flotilla.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("error: /nonexistent/flotilla.yaml: cannot read"),
        "{stderr}"
    );
    println!(
        "bad config: {} cases, {checked} runs of run/check refused with exit 2",
        BAD_CONFIGS.len() + 1
    );
}

/// The bad templates: (case, source, what `check` must report for it, for a file broken.yaml).
fn bad_templates() -> Vec<(&'static str, String, &'static str)> {
    let cm = |body: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n{body}");
    vec![
        ("syntax error", cm("data:\n  a: {{ oops\n"), "broken.yaml:6: syntax error: unexpected end of input"),
        ("unclosed block", cm("data:\n{% if values.image %}\n  a: b\n"), "broken.yaml:"),
        ("undefined variable", cm("data:\n  a: {{ values.nope }}\n"), "broken.yaml:6: undefined value"),
        (
            "Argo placeholder outside raw",
            cm("data:\n  a: \"{{workflow.name}}\"\n"),
            "broken.yaml:6: undefined value",
        ),
        ("not valid YAML", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n".into(), "broken.yaml:4: the rendered output is not valid YAML"),
        ("two documents", format!("{}---\n{}", cm(""), cm("")), "broken.yaml: renders 2 YAML documents"),
        ("no kind", "apiVersion: v1\nmetadata:\n  name: x\n".into(), "broken.yaml: has no kind"),
        ("no apiVersion", "kind: ConfigMap\nmetadata:\n  name: x\n".into(), "broken.yaml: has no apiVersion"),
        ("no name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {a: b}\n".into(), "broken.yaml: ConfigMap has no metadata.name"),
        ("not an object", "- a\n- b\n".into(), "broken.yaml: must render a YAML mapping"),
        ("duplicate object", GOOD.into(), "broken.yaml: renders ConfigMap flotilla-check/good, which"),
        (
            "ClusterRole",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: x\n".into(),
            "broken.yaml: kind ClusterRole (rbac.authorization.k8s.io/v1) is not allowed",
        ),
        (
            "ClusterRoleBinding",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: x\n".into(),
            "broken.yaml: kind ClusterRoleBinding (rbac.authorization.k8s.io/v1) is not allowed",
        ),
        ("Namespace", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n".into(), "broken.yaml: kind Namespace (v1) is not allowed"),
        ("Secret", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n".into(), "broken.yaml: kind Secret (v1) is not allowed"),
        (
            "another namespace",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: kube-system\n".into(),
            "broken.yaml: ConfigMap x is placed in namespace \"kube-system\"",
        ),
        ("the safe filter", cm("data:\n  a: {{ values.image | safe }}\n"), "broken.yaml:6: invalid operation: the safe filter is not available"),
        (
            "escaping turned off",
            cm("data:\n{% autoescape false %}  a: {{ values.image }}\n{% endautoescape %}\n"),
            "broken.yaml:6: invalid operation: escaping is turned off here",
        ),
    ]
}

pub(super) fn bad_templates_are_reported_by_check_render_and_run_with_file_and_line() {
    let cases = bad_templates();
    let config = "selector: e2e.flotilla.dev/offline=on\nvalues: {image: \"ctrl:v1\"}\n";
    let compiles = |case: &str| !matches!(case, "syntax error" | "unclosed block");
    for (case, source, needle) in &cases {
        let file = if *case == "duplicate object" {
            "zz-broken.yaml"
        } else {
            "broken.yaml"
        };
        let needle = needle.replace("broken.yaml", file);
        let (dir, path) = offline_config(config, &[("good.yaml", GOOD), (file, source)]);
        let config = path.to_str().unwrap();
        let located = format!("{}/", dir.path().join("templates").display());
        let (code, stdout, stderr) = offline(&["check", "--config", config]);
        let at = format!("{case} (check): stdout {stdout:?}, stderr {stderr:?}");
        assert_eq!(code, Some(2), "{at}");
        assert!(
            stdout.contains(&format!("{located}{needle}")),
            "{at}\n  lacks {located}{needle}"
        );
        assert!(stderr.contains("error: 1 problem(s) in"), "{at}");
        // `render` says the same (it prints what `run` would apply: here, nothing).
        let (code, stdout, stderr) = offline(&["render", "--config", config, "-n", "team-a"]);
        let at = format!("{case} (render): stdout {stdout:?}, stderr {stderr:?}");
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{at}");
        assert!(
            stderr.contains(&needle.replace("flotilla-check", "team-a")),
            "{at}"
        );
        // `run` compiles every template before it connects: a syntax error stops it at once.
        if !compiles(case) {
            let (code, _, stderr) = offline(&["run", "--config", config]);
            assert_eq!(code, Some(2), "{case} (run): {stderr}");
            assert!(
                stderr.contains("templates in ") && stderr.contains(&needle),
                "{case} (run): {stderr}"
            );
            assert!(!stderr.contains(NO_CLUSTER), "{case} (run): {stderr}");
        }
    }
    println!(
        "bad templates: {} cases, each refused by check and render",
        cases.len()
    );
    a_name_from_the_namespace_fails_check_and_rbac_not_render(config);
}

/// A name composed from the namespace renders (and runs, given the open rule it costs), but no
/// ClusterRole can list it: `check` and `rbac` fail naming the template.
fn a_name_from_the_namespace_fails_check_and_rbac_not_render(config: &str) {
    let entry =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ namespace.name ~ \"-entry\" }}\n";
    let (dir, path) = offline_config(config, &[("good.yaml", GOOD), ("entry.yaml", entry)]);
    let config = path.to_str().unwrap();
    let file = dir.path().join("templates").join("entry.yaml");
    let needle = format!(
        "{}: renders ConfigMap flotilla-check/flotilla-check-entry for namespace flotilla-check but ConfigMap sample-b/sample-b-entry for sample-b: a name composed from the namespace cannot be listed in flotilla's ClusterRole",
        file.display()
    );
    let (code, stdout, stderr) = offline(&["check", "--config", config]);
    assert_eq!(code, Some(2), "check: {stdout} {stderr}");
    assert!(
        stdout.contains(&needle),
        "check: {stdout}\n  lacks {needle}"
    );
    let (code, stdout, stderr) = offline(&["rbac", "--config", config]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""), "rbac: {stderr}");
    assert!(stderr.contains(&needle), "rbac: {stderr}\n  lacks {needle}");
    let (code, stdout, stderr) = offline(&["render", "--config", config, "-n", "team-a"]);
    assert_eq!(code, Some(0), "render: {stderr}");
    assert!(stdout.contains("name: team-a-entry"), "render: {stdout}");
}

/// `render` for a name no Namespace can have (not a DNS label): refused with exit 2 before the
/// config is even read, rather than printing objects that could never be applied.
pub(super) fn render_refuses_a_namespace_name_that_is_not_a_dns_label() {
    let (_dir, path) = offline_config(
        "selector: e2e.flotilla.dev/offline=on\nvalues: {image: \"ctrl:v1\"}\n",
        &[("good.yaml", GOOD)],
    );
    let config = path.to_str().unwrap();
    let (code, stdout, stderr) = offline(&["render", "--config", config, "-n", "team-a"]);
    assert_eq!(
        code,
        Some(0),
        "a valid name renders (positive control): {stderr}"
    );
    assert!(stdout.contains("name: good"), "{stdout}");
    let long = "a".repeat(64);
    for name in [
        "Team-A",
        "team_a",
        "team.a",
        "-team",
        "team-",
        "team a",
        "tëam",
        "team\nkind: Secret",
        "",
        long.as_str(),
    ] {
        let namespace = format!("--namespace={name}");
        let (code, stdout, stderr) = offline(&["render", "--config", config, &namespace]);
        let at = format!("{name:?}: stdout {stdout:?}, stderr {stderr:?}");
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{at}");
        assert!(
            stderr.starts_with(&format!(
                "error: namespace {name:?} is not a valid namespace name (a DNS label"
            )),
            "{at}"
        );
    }
    // Before the config is read: a missing config is not what it reports.
    let (code, _, stderr) = offline(&[
        "render",
        "--config",
        "/nonexistent/flotilla.yaml",
        "-n",
        "Team-A",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not a valid namespace name"), "{stderr}");
}
