use super::*;
use serde_json::json;

fn config(values: serde_json::Value) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let text = format!("values: {values}\n");
    Config::parse(&text, dir.path()).unwrap()
}

fn renderer(files: &[(&str, &str)]) -> Result<Renderer, RenderErrors> {
    let sources = files
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    Renderer::new(sources, &config(json!({"image": "ctrl:v1", "replicas": 2})))
}

fn ns(name: &str, annotations: &[(&str, &str)]) -> NamespaceInput {
    NamespaceInput {
        name: name.into(),
        labels: BTreeMap::from([("flotilla.dev/enabled".into(), "true".into())]),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

const CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  note: {{ namespace.annotations["note"] }}
  image: {{ values.image }}
"#;

#[test]
fn renders_values_and_namespace_fields() {
    let r = renderer(&[("cm.yaml", CM)]).unwrap();
    let objects = r.render(&ns("team-a", &[("note", "hello")])).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(
        objects[0].body["data"],
        json!({"note": "hello", "image": "ctrl:v1"})
    );
    assert_eq!(objects[0].body["metadata"]["namespace"], "team-a");
}

#[test]
fn hostile_values_stay_one_inert_string() {
    let r = renderer(&[("cm.yaml", CM)]).unwrap();
    for payload in [
        "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwn",
        "\"\nextra: field",
        "{{ values.image }} {% if true %}x{% endif %}",
        "x\"}, \"injected\": {\"a\": \"b",
        "'; key: value",
        "tab\there\r\nnul-free ünïcödé ✓",
        "- list\n- items",
        "&anchor *alias !!binary",
    ] {
        let objects = r.render(&ns("team-a", &[("note", payload)])).unwrap();
        assert_eq!(objects.len(), 1, "{payload:?}");
        let data = objects[0].body["data"].as_object().unwrap();
        assert_eq!(data.len(), 2, "{payload:?} added a field");
        assert_eq!(data["note"], payload);
    }
}

#[test]
fn argo_placeholders_pass_through_raw_blocks() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  config: |\n    keyFormat: {% raw %}\"{{workflow.name}}/{{pod.name}}\"{% endraw %}\n";
    let r = renderer(&[("cm.yaml", template)]).unwrap();
    let objects = r.render(&ns("team-a", &[])).unwrap();
    assert_eq!(
        objects[0].body["data"]["config"],
        "keyFormat: \"{{workflow.name}}/{{pod.name}}\"\n"
    );
}

#[test]
fn undefined_variables_are_errors_with_file_line_and_hint() {
    let template =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: {{ workflow.name }}\n";
    let r = renderer(&[("cm.yaml", template)]).unwrap();
    let err = r.render(&ns("team-a", &[])).unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!(
        (err.0[0].origin.as_str(), err.0[0].line),
        ("cm.yaml", Some(6))
    );
    assert!(err.to_string().contains("{% raw %}"), "{err}");
    let missing =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: {{ values.nope }}\n";
    let err = renderer(&[("m.yaml", missing)])
        .unwrap()
        .render(&ns("a", &[]))
        .unwrap_err();
    assert!(err.to_string().starts_with("m.yaml:6: undefined"), "{err}");
}

#[test]
fn syntax_errors_of_every_file_are_reported_together() {
    let err = renderer(&[
        ("a.yaml", "kind: {{ oops\n"),
        ("b.yaml", "ok: 1\n"),
        ("c.yaml", "x: 1\n{% if %}\n"),
    ])
    .err()
    .unwrap();
    let files: Vec<_> = err.0.iter().map(|e| (e.origin.as_str(), e.line)).collect();
    assert_eq!(files, [("a.yaml", Some(1)), ("c.yaml", Some(2))]);
}

#[test]
fn invalid_yaml_output_names_the_line() {
    let r = renderer(&[(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [c\n",
    )])
    .unwrap();
    let err = r.render(&ns("a", &[])).unwrap_err();
    assert_eq!(err.0[0].origin, "bad.yaml");
    assert!(err.0[0].line.is_some(), "{err}");
    assert!(err.to_string().contains("not valid YAML"), "{err}");
}

#[test]
fn policy_failures_and_duplicates_fail_the_whole_set() {
    let crb = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: x\n";
    let err = renderer(&[("cm.yaml", CM), ("crb.yaml", crb)])
        .unwrap()
        .render(&ns("a", &[("note", "n")]))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("crb.yaml: kind ClusterRoleBinding"),
        "{err}"
    );
    let err = renderer(&[("a.yaml", CM), ("b.yaml", CM)])
        .unwrap()
        .render(&ns("a", &[("note", "n")]))
        .unwrap_err();
    assert!(
        err.to_string().contains("which a.yaml renders already"),
        "{err}"
    );
    let two = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
    let err = renderer(&[("two.yaml", two)])
        .unwrap()
        .render(&ns("a", &[]))
        .unwrap_err();
    assert!(err.to_string().contains("2 YAML documents"), "{err}");
}

#[test]
fn empty_output_stamps_nothing() {
    let optional = "{% if values.replicas > 5 %}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\n{% endif %}\n# nothing\n";
    let r = renderer(&[("opt.yaml", optional), ("cm.yaml", CM)]).unwrap();
    let objects = r.render(&ns("a", &[("note", "n")])).unwrap();
    assert_eq!(objects.len(), 1);
}

#[test]
fn output_is_ordered_for_apply_and_yaml_round_trips() {
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: {{ values.replicas }}\n";
    let sa = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: s}\n";
    let r = renderer(&[("a-deploy.yaml", deploy), ("z-sa.yaml", sa)]).unwrap();
    let objects = r.render(&ns("a", &[])).unwrap();
    let kinds: Vec<_> = objects.iter().map(|o| o.key.kind.name()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Deployment"]);
    assert_eq!(objects[1].body["spec"]["replicas"], 2);
    let yaml = to_yaml(&objects);
    let back: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let bodies: Vec<_> = objects.iter().map(|o| o.body.clone()).collect();
    assert_eq!(back, bodies);
}

#[test]
fn revision_is_shared_by_namespaces_and_follows_templates() {
    let r = renderer(&[("cm.yaml", CM)]).unwrap();
    let a = r.render(&ns("a", &[("note", "1")])).unwrap();
    let b = r.render(&ns("b", &[("note", "2")])).unwrap();
    let rev = |o: &Stamped| o.body["metadata"]["annotations"]["flotilla.dev/revision"].clone();
    assert_eq!(rev(&a[0]), rev(&b[0]));
    assert_ne!(a[0].hash, b[0].hash);
    let changed = renderer(&[("cm.yaml", &CM.replace("notes", "notes2"))]).unwrap();
    assert_ne!(changed.revision(), r.revision());
}

#[test]
fn yaml_filter_embeds_nested_yaml_as_one_string() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  defaults: {{ values.nested | yaml }}\n";
    let sources = vec![("c.yaml".to_string(), template.to_string())];
    let r = Renderer::new(
        sources,
        &config(json!({"nested": {"spec": {"sa": "x\n---"}}})),
    )
    .unwrap();
    let objects = r.render(&ns("a", &[])).unwrap();
    let text = objects[0].body["data"]["defaults"].as_str().unwrap();
    let back: serde_json::Value = serde_saphyr::from_str(text).unwrap();
    assert_eq!(back, json!({"spec": {"sa": "x\n---"}}));
}
