use super::*;
use serde_json::{Value, json};

fn config(text: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(text, &dir.path().join("flotilla.yaml")).unwrap()
}

fn names_of(files: &[(&str, &str)]) -> Result<TemplatedNames, RenderErrors> {
    let config = config("selector: a=b\n");
    let sources = files
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    templated_names(&Renderer::new(sources, &config).unwrap(), &config)
}

fn repo() -> TemplatedNames {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&path).unwrap();
    templated_names(&Renderer::load(&config).unwrap(), &config).unwrap()
}

fn cm(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
    )
}

#[test]
fn the_default_templates_render_fixed_names() {
    let names = repo();
    let flat: Vec<(Kind, &str)> = names
        .names
        .iter()
        .flat_map(|(kind, names)| names.keys().map(move |n| (*kind, n.as_str())))
        .collect();
    assert_eq!(
        flat,
        [
            (Kind::ServiceAccount, "argo"),
            (Kind::ServiceAccount, "argo-workflow"),
            (Kind::ConfigMap, "workflow-controller-configmap"),
            (Kind::Role, "argo-role"),
            (Kind::Role, "argo-workflow"),
            (Kind::RoleBinding, "argo-binding"),
            (Kind::RoleBinding, "argo-workflow"),
            (Kind::Service, "workflow-controller-metrics"),
            (Kind::Deployment, "workflow-controller"),
        ]
    );
    assert_eq!(names.objects, 9);
    assert_eq!(
        names.names[&Kind::Deployment]["workflow-controller"],
        BTreeSet::from(["controller-deployment.yaml".to_string()])
    );
}

#[test]
fn the_cluster_role_limits_every_write_to_the_rendered_names() {
    let yaml = cluster_role(&repo());
    let role: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(role["kind"], "ClusterRole");
    assert_eq!(role["metadata"]["name"], CLUSTER_ROLE);
    let rule = |group: &str, resource: &str, verbs: &[&str], names: &[&str]| json!({"apiGroups": [group], "resources": [resource], "verbs": verbs, "resourceNames": names});
    let writes = ["create", "patch", "delete"];
    let rbac = "rbac.authorization.k8s.io";
    assert_eq!(
        role["rules"],
        json!([
            rule("", "serviceaccounts", &writes, &["argo", "argo-workflow"]),
            rule(
                "",
                "configmaps",
                &writes,
                &["workflow-controller-configmap"]
            ),
            rule(rbac, "roles", &writes, &["argo-role", "argo-workflow"]),
            rule(
                rbac,
                "rolebindings",
                &writes,
                &["argo-binding", "argo-workflow"]
            ),
            rule("", "services", &writes, &["workflow-controller-metrics"]),
            rule("apps", "deployments", &writes, &["workflow-controller"]),
            rule(
                rbac,
                "roles",
                &["escalate", "bind"],
                &["argo-role", "argo-workflow"]
            ),
        ])
    );
    // Every rule has its why.
    let lines: Vec<&str> = yaml.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("  - apiGroups:") {
            assert!(lines[i - 1].trim_start().starts_with('#'), "{line}");
        }
    }
    assert!(yaml.contains("# ServiceAccounts the templates render (controller-serviceaccount.yaml, executor-serviceaccount.yaml)."), "{yaml}");
}

#[test]
fn names_that_read_as_other_yaml_stay_strings() {
    let names = names_of(&[
        ("t.yaml", &cm("\"true\"", "{{ namespace.name }}")),
        ("n.yaml", &cm("\"1e3\"", "{{ namespace.name }}")),
    ])
    .unwrap();
    let role: Value = serde_saphyr::from_str(&cluster_role(&names)).unwrap();
    assert_eq!(role["rules"][0]["resourceNames"], json!(["1e3", "true"]));
}

#[test]
fn a_name_composed_from_the_namespace_is_refused_naming_its_template() {
    let entry = cm(
        "{{ (namespace.name ~ \"-fleet-entry\") | dns_label }}",
        "{{ flotilla.namespace }}",
    );
    let prefixed = cm("{{ \"x-\" ~ namespace.name[:3] }}", "{{ namespace.name }}");
    let err = names_of(&[
        ("entry.yaml", &entry),
        ("fixed.yaml", &cm("fixed", "{{ namespace.name }}")),
        ("prefixed.yaml", &prefixed),
    ])
    .unwrap_err();
    let messages: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with(
            "entry.yaml: renders ConfigMap flotilla-system/flotilla-check-fleet-entry for namespace flotilla-check but ConfigMap flotilla-system/sample-b-fleet-entry for sample-b: a name composed from the namespace cannot be listed"
        ),
        "{}",
        messages[0]
    );
    assert!(messages[1].starts_with("prefixed.yaml: renders ConfigMap flotilla-check/x-flo for namespace flotilla-check but ConfigMap sample-b/x-sam for sample-b"), "{}", messages[1]);
}

#[test]
fn a_template_that_renders_for_some_namespaces_only_is_no_problem() {
    let some = format!(
        "{{% if namespace.name == \"sample-b\" %}}{}{{% endif %}}",
        cm("only-b", "{{ namespace.name }}")
    );
    let names = names_of(&[("some.yaml", &some)]).unwrap();
    assert_eq!(names.objects, 0);
    assert_eq!(
        names.names[&Kind::ConfigMap].keys().collect::<Vec<_>>(),
        ["only-b"]
    );
    // Nothing rendered: no rules at all.
    let none = names_of(&[("none.yaml", "{% if false %}x: 1{% endif %}")]).unwrap();
    let role: Value = serde_saphyr::from_str(&cluster_role(&none)).unwrap();
    assert_eq!(role["rules"], json!([]));
}

#[test]
fn render_errors_are_the_first_samples() {
    let err = names_of(&[(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ values.nope }}\n",
    )])
    .unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert!(
        err.to_string().starts_with("bad.yaml:4: undefined value"),
        "{err}"
    );
}

#[test]
fn the_samples_are_never_flotillas_own_namespace() {
    for own in ["flotilla-system", "flotilla-check", "sample-b"] {
        let samples = samples(own);
        assert!(!samples.contains(&own), "{own}");
        assert_ne!(samples[0], samples[1]);
        assert_ne!(samples[0].len(), samples[1].len());
        assert_ne!(samples[0].as_bytes()[0], samples[1].as_bytes()[0]);
    }
}
