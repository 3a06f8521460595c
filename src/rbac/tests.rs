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

fn set(text: &str) -> Set {
    text.parse().unwrap()
}

#[test]
fn the_union_holds_the_names_and_templates_of_both() {
    let plain = names_of(&[
        ("a.yaml", &cm("a", "{{ namespace.name }}")),
        ("b.yaml", &cm("b", "{{ namespace.name }}")),
    ])
    .unwrap();
    let other = names_of(&[
        ("b2.yaml", &cm("b", "{{ namespace.name }}")),
        ("c.yaml", &cm("c", "{{ namespace.name }}")),
    ])
    .unwrap();
    let both = plain.union(other);
    assert_eq!(
        both.names[&Kind::ConfigMap],
        BTreeMap::from([
            ("a".to_string(), BTreeSet::from(["a.yaml".to_string()])),
            (
                "b".to_string(),
                BTreeSet::from(["b.yaml".to_string(), "b2.yaml".to_string()])
            ),
            ("c".to_string(), BTreeSet::from(["c.yaml".to_string()])),
        ])
    );
    // What a namespace gets is the first's.
    assert_eq!(both.objects, 2);
}

#[test]
fn with_argo_server_set_the_cluster_role_also_lists_its_names() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&path).unwrap();
    let renderer = Renderer::load(&config).unwrap();
    let names =
        templated_names_with(&renderer, &config, &[set("argoServer.enabled=true")]).unwrap();
    // A namespace still gets the nine objects the config renders.
    assert_eq!(names.objects, 9);
    assert_eq!(names.with, ["argoServer.enabled=true"]);
    let role: Value = serde_saphyr::from_str(&cluster_role(&names)).unwrap();
    let names_of_rule = |i: usize| role["rules"][i]["resourceNames"].clone();
    let expected = [
        json!(["argo", "argo-server", "argo-workflow"]),
        json!(["workflow-controller-configmap"]),
        json!(["argo-role", "argo-server-role", "argo-workflow"]),
        json!(["argo-binding", "argo-server-binding", "argo-workflow"]),
        json!(["argo-server", "workflow-controller-metrics"]),
        json!(["argo-server", "workflow-controller"]),
        // escalate and bind: the argo-server Role too.
        json!(["argo-role", "argo-server-role", "argo-workflow"]),
    ];
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(&names_of_rule(i), want, "rule {i}: {}", role["rules"][i]);
    }
    assert_eq!(role["rules"][6]["verbs"], json!(["escalate", "bind"]));
    assert!(cluster_role(&names).contains("#   argoServer.enabled=true\n"));
    // Without the set: exactly the plain names, and no word of sets.
    let plain = templated_names_with(&renderer, &config, &[]).unwrap();
    assert_eq!(plain, repo());
    assert!(!cluster_role(&plain).contains("also with"));
}

#[test]
fn a_set_is_key_value_and_names_an_existing_value() {
    assert_eq!(set("a.b=true").value, json!(true));
    assert_eq!(set("a=3").value, json!(3));
    assert_eq!(set("a=client").value, json!("client"));
    assert_eq!(set("a=x=y").value, json!("x=y"));
    assert_eq!(
        "nope".parse::<Set>().unwrap_err(),
        SetError::NotKeyValue("nope".into())
    );
    assert_eq!(
        "=1".parse::<Set>().unwrap_err(),
        SetError::NotKeyValue("=1".into())
    );
    assert!(matches!(
        "a=[".parse::<Set>().unwrap_err(),
        SetError::NotYaml { .. }
    ));
    let values = json!({"argoServer": {"enabled": false, "image": "x"}, "n": 1});
    let values = values.as_object().unwrap();
    let set_on = with_sets(values, &[set("argoServer.enabled=true"), set("n=2")]).unwrap();
    assert_eq!(
        Value::Object(set_on),
        json!({"argoServer": {"enabled": true, "image": "x"}, "n": 2})
    );
    for missing in [
        "argoServer.enabld",
        "argoServer.enabled.x",
        "n.x",
        "nope",
        "n.",
    ] {
        assert_eq!(
            with_sets(values, &[set(&format!("{missing}=true"))]).unwrap_err(),
            SetError::NoSuchValue(missing.into()),
            "{missing}"
        );
    }
}

#[test]
fn a_render_failing_with_the_sets_says_so() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&path).unwrap();
    let renderer = Renderer::load(&config).unwrap();
    let sets = [
        set("argoServer.enabled=true"),
        set("argoServer.authMode=none"),
    ];
    match templated_names_with(&renderer, &config, &sets) {
        Err(NamesError::Render { with, errors }) => {
            assert_eq!(
                with,
                ["argoServer.enabled=true", "argoServer.authMode=none"]
            );
            assert!(
                errors
                    .to_string()
                    .starts_with("argo-server-deployment.yaml:3:"),
                "{errors}"
            );
        }
        other => panic!("{other:?}"),
    }
    let typo = templated_names_with(&renderer, &config, &[set("argoserver.enabled=true")]);
    assert_eq!(
        typo.unwrap_err().to_string(),
        "--set: there is no values.argoserver.enabled to set"
    );
}
