use super::*;
use serde_json::json;

fn config(values: serde_json::Value) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let text = format!("values: {values}\n");
    Config::parse(&text, &dir.path().join("flotilla.yaml")).unwrap()
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
        share: None,
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
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: {{ values.replicas }}\n  template: {spec: {serviceAccountName: s}}\n";
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

// ---- Hostile namespace input: every label and annotation is an inert string. ----

/// Renders `template` for a namespace with `annotations` and the given labels.
fn render_with(
    template: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> Result<Vec<Stamped>, RenderErrors> {
    let mut input = ns("team-a", annotations);
    input
        .labels
        .extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    renderer(&[("t.yaml", template)]).unwrap().render(&input)
}

/// Strings a tenant (or a careless admin) could put in a label or annotation.
fn hostile_strings() -> Vec<(&'static str, String)> {
    let mut cases: Vec<(&'static str, String)> = vec![
        (
            "document",
            "x\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s".into(),
        ),
        ("quote", "\"\nextra: field".into()),
        ("single quote", "'; key: value".into()),
        ("braces", "x\"}, \"injected\": {\"a\": \"b".into()),
        (
            "jinja",
            "{{ values.image }} {% if true %}x{% endif %} {# c #}".into(),
        ),
        ("raw", "{% raw %}{{x}}{% endraw %} {% endraw %}".into()),
        ("flow", "[a, {b: c}]".into()),
        ("yaml tags", "&anchor *alias !!binary !tag %YAML 1.1".into()),
        ("comment", "# not a comment".into()),
        ("block", "|\n  literal\n>-\n  folded".into()),
        ("crlf", "a\r\nb\rc".into()),
        ("tab", "a\tb".into()),
        ("backslashes", "\\n \\u0000 \\\" \\".into()),
        ("non-ascii", "ünïcödé ✓ 日本語 😀 \u{10ffff}".into()),
        ("nul", "a\u{0}b".into()),
        ("bell and escape", "a\u{7}b\u{1b}[31mred".into()),
        ("del", "a\u{7f}b".into()),
        ("c1 controls", "a\u{80}\u{85}\u{9b}\u{9f}b".into()),
        ("line separators", "a\u{2028}b\u{2029}c".into()),
        ("byte order mark", "\u{feff}a\u{feff}".into()),
        ("non-characters", "a\u{fffe}\u{ffff}b".into()),
        ("empty", String::new()),
        ("spaces", "  leading and trailing  ".into()),
        ("null words", "null".into()),
        ("bool words", "yes".into()),
        ("number words", "0x1F".into()),
        ("256 KiB", "x".repeat(256 * 1024)),
        ("256 KiB of documents", "a\n---\n".repeat(256 * 1024 / 6)),
        ("deep nesting", "[".repeat(10_000)),
    ];
    // Every character of the Basic Multilingual Plane (bar surrogates) in one value.
    let bmp: String = (0u32..=0xffff).filter_map(char::from_u32).collect();
    cases.push(("every BMP character", bmp));
    cases
}

/// Whether `text` holds a character server-side apply cannot carry yet (policy refuses it).
fn unsendable(text: &str) -> bool {
    text.chars()
        .any(|c| matches!(c, '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}'))
}

/// Renders `payload` through `template` (under `data.<field>`): an inert string, exactly as
/// written, with no field added; or, for what apply cannot carry, a one-line refusal.
fn assert_inert(
    fields: usize,
    field: &str,
    render: impl Fn(&str) -> Result<Vec<Stamped>, RenderErrors>,
) {
    let mut inert = 0;
    for (case, payload) in hostile_strings() {
        match render(&payload) {
            Ok(objects) => {
                assert!(
                    !unsendable(&payload),
                    "{case}: rendered, but apply cannot carry it"
                );
                assert_eq!(objects.len(), 1, "{case}");
                let data = objects[0].body["data"].as_object().unwrap();
                assert_eq!(data.len(), fields, "{case} added a field");
                assert_eq!(data[field], payload.as_str(), "{case} changed");
                // And the object applied is exactly that: the YAML preview round-trips.
                let back: Vec<serde_json::Value> =
                    serde_saphyr::from_multiple(&to_yaml(&objects)).unwrap();
                assert_eq!(
                    back[0]["data"][field],
                    payload.as_str(),
                    "{case} in to_yaml"
                );
                inert += 1;
            }
            Err(e) => {
                let text = e.to_string();
                assert!(unsendable(&payload), "{case}: {text}");
                assert!(
                    text.contains(&format!("data.{field} holds U+")),
                    "{case}: {text}"
                );
                assert!(
                    text.contains("server-side apply cannot carry"),
                    "{case}: {text}"
                );
                assert_eq!(text.lines().count(), 1, "{case}: {text}");
            }
        }
    }
    assert!(inert > 20, "only {inert} cases rendered");
}

#[test]
fn hostile_annotations_render_as_one_inert_string() {
    assert_inert(2, "note", |payload| {
        render_with(CM, &[], &[("note", payload)])
    });
    // The other field is untouched whatever the note holds.
    let objects = render_with(CM, &[], &[("note", "x\n---\nimage: evil")]).unwrap();
    assert_eq!(objects[0].body["data"]["image"], "ctrl:v1");
}

#[test]
fn hostile_label_values_render_as_one_inert_string() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  team: {{ namespace.labels[\"team\"] }}\n  x: {{ values.image }}\n";
    assert_inert(2, "team", |payload| {
        render_with(template, &[("team", payload)], &[])
    });
}

#[test]
fn every_character_is_written_as_yaml_that_reads_back_the_same() {
    // The escaping itself, for every character of the Basic Multilingual Plane and some beyond,
    // including those that policy then refuses to send: JSON that YAML reads back unchanged.
    let all: String = (0u32..=0xffff)
        .chain([0x1_0000, 0x1_f600, 0x10_fffe, 0x10_ffff])
        .filter_map(char::from_u32)
        .collect();
    for text in [all.clone(), all.chars().rev().collect()] {
        let written = super::escape::to_yaml_json(&Value::from(text.clone())).unwrap();
        let yaml = format!("k: {written}\n");
        let back: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back["k"], text.as_str());
        // Nothing YAML forbids, or may read as a line break, is left raw.
        assert!(!written.chars().any(|c| matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')));
    }
}

#[test]
fn a_whole_map_of_hostile_values_is_one_flow_mapping() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: {{ namespace.annotations }}\n";
    let annotations: Vec<(String, String)> = hostile_strings()
        .into_iter()
        .filter(|(_, v)| !unsendable(v))
        .enumerate()
        .map(|(i, (_, v))| (format!("k{i}"), v))
        .collect();
    let refs: Vec<(&str, &str)> = annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let objects = render_with(template, &[], &refs).unwrap();
    let data = objects[0].body["data"].as_object().unwrap();
    assert_eq!(data.len(), annotations.len());
    for (k, v) in &annotations {
        assert_eq!(data[k], v.as_str(), "{k}");
    }
}

#[test]
fn a_hostile_value_where_a_name_or_label_goes_is_refused_with_a_short_reason() {
    let named =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ namespace.annotations[\"n\"] }}\n";
    let labelled = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels:\n    note: {{ namespace.annotations[\"n\"] }}\n";
    for (template, needle) in [
        (named, "is not a valid name"),
        (labelled, "metadata.labels: note"),
    ] {
        for (case, payload) in hostile_strings() {
            let valid = if template == labelled {
                crate::selector::valid_value(&payload).is_ok()
            } else {
                crate::config::is_dns_label(&payload)
            };
            if valid {
                continue; // "null", "yes": fine as a name or label
            }
            let err = render_with(template, &[], &[("n", &payload)])
                .expect_err(case)
                .to_string();
            assert!(err.contains(needle), "{case}: {err}");
            assert!(err.len() < 1024, "{case}: a {} byte message", err.len());
            assert_eq!(err.lines().count(), 1, "{case}: {err}");
        }
    }
}

#[test]
fn yaml_errors_do_not_quote_the_rendered_output() {
    // A template mistake next to a namespace's value: the reason names the line, not the text.
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  note: {{ namespace.annotations[\"note\"] }}\n  bad: [unclosed\n";
    let err = render_with(template, &[], &[("note", "private-note-text")]).unwrap_err();
    let text = err.to_string();
    assert_eq!(
        (err.0[0].origin.as_str(), err.0[0].line.is_some()),
        ("t.yaml", true),
        "{text}"
    );
    assert!(text.contains("not valid YAML"), "{text}");
    assert!(!text.contains("private-note-text"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

#[test]
fn escaping_cannot_be_turned_off() {
    let safe = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  note: {{ namespace.annotations[\"note\"] | safe }}\n";
    let err = render_with(safe, &[], &[("note", "x\nextra: field")]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("t.yaml:6: invalid operation: the safe filter is not available"),
        "{err}"
    );
    let off = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n{% autoescape false %}  note: {{ namespace.annotations[\"note\"] }}\n{% endautoescape %}";
    let err = render_with(off, &[], &[("note", "x\nextra: field")]).unwrap_err();
    assert!(
        err.to_string().contains("escaping is turned off here"),
        "{err}"
    );
    // The escaping filters give the same inert output as printing.
    for filter in ["e", "escape", "tojson", "string", "trim", "lower"] {
        let template = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  note: {{{{ namespace.annotations[\"note\"] | {filter} }}}}\n"
        );
        let payload = "x\u{2028}\n---\nextra: field";
        let objects = render_with(&template, &[], &[("note", payload)]).unwrap();
        let data = objects[0].body["data"].as_object().unwrap();
        assert_eq!(data.len(), 1, "{filter}");
        let want = if filter == "lower" {
            payload.to_lowercase()
        } else {
            payload.to_string()
        };
        assert_eq!(data["note"], want.as_str(), "{filter}");
    }
}

#[test]
fn flotillas_own_namespace_is_never_a_target() {
    let r = renderer(&[("cm.yaml", CM)]).unwrap();
    let err = r
        .render(&ns("flotilla-system", &[("note", "n")]))
        .unwrap_err();
    assert!(
        err.to_string().contains("is flotilla's own namespace"),
        "{err}"
    );
}

#[test]
fn reserved_namespaces_are_never_targets_unless_the_config_names_them() {
    let r = renderer(&[("cm.yaml", CM)]).unwrap();
    for name in ["kube-system", "kube-public", "kube-node-lease"] {
        let err = r.render(&ns(name, &[("note", "n")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "namespace {name}: is a namespace Kubernetes keeps for itself; flotilla stamps nothing there, even when the selector matches, unless the config names it in policy.allowNamespaces"
            )
        );
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let text = "values: {image: x}\npolicy:\n  allowNamespaces: [kube-public]\n";
    let config = Config::parse(text, &dir.path().join("flotilla.yaml")).unwrap();
    let r = Renderer::new(vec![("cm.yaml".into(), CM.into())], &config).unwrap();
    assert_eq!(
        r.render(&ns("kube-public", &[("note", "n")]))
            .unwrap()
            .len(),
        1
    );
    assert!(r.render(&ns("kube-system", &[("note", "n")])).is_err());
}

#[test]
fn what_the_whole_set_must_hold_is_checked_after_every_object_passed() {
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      serviceAccountName: {{ values.image }}\n";
    let err = renderer(&[("deploy.yaml", deploy)])
        .unwrap()
        .render(&ns("team-a", &[]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "deploy.yaml: Deployment d: spec.template.spec.serviceAccountName is ctrl:v1, which they do not; a stamped Deployment runs as a ServiceAccount the templates stamp in team-a"
    );
    // An object that fails alone is reported alone: the set is not checked then.
    let bad = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
    let err = renderer(&[("deploy.yaml", deploy), ("secret.yaml", bad)])
        .unwrap()
        .render(&ns("team-a", &[]))
        .unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!(err.0[0].origin, "secret.yaml");
}

// ---- Names composed from a namespace name at the 63-character limit. ----

const ENTRY: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ (namespace.name ~ \"-fleet-entry\") | dns_label }}\n  namespace: {{ flotilla.namespace }}\n";

#[test]
fn dns_label_keeps_composed_names_valid_and_distinct() {
    let r = renderer(&[("entry.yaml", ENTRY)]).unwrap();
    let short = r.render(&ns("team-a", &[])).unwrap();
    assert_eq!(short[0].key.name, "team-a-fleet-entry");
    let long_a = format!("{}-a", "n".repeat(61));
    let long_b = format!("{}-b", "n".repeat(61));
    assert_eq!(long_a.len(), 63);
    let names: Vec<String> = [&long_a, &long_b]
        .iter()
        .map(|n| r.render(&ns(n, &[])).unwrap()[0].key.name.clone())
        .collect();
    for name in &names {
        assert_eq!(name.len(), 63, "{name}");
        assert!(crate::config::is_dns_label(name), "{name}");
    }
    assert_ne!(names[0], names[1]);
    // Without the filter, the same name is refused, with the way out in the message.
    let plain = ENTRY.replace(" | dns_label", "");
    let err = renderer(&[("entry.yaml", &plain)])
        .unwrap()
        .render(&ns(&long_a, &[]))
        .unwrap_err();
    assert!(err.to_string().contains("| dns_label"), "{err}");
    let bad = ENTRY.replace("dns_label", "dns_label(5)");
    let err = renderer(&[("entry.yaml", &bad)])
        .unwrap()
        .render(&ns("team-a", &[]))
        .unwrap_err();
    assert!(err.to_string().contains("between 10 and 63"), "{err}");
}

// ---- The default templates, rendered with the repository's flotilla.yaml. ----

fn repo_renderer() -> (Config, Renderer) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let config = Config::load(&path).unwrap();
    let renderer = Renderer::load(&config).unwrap();
    (config, renderer)
}

fn repo_render(name: &str, annotations: &[(&str, &str)]) -> Vec<Stamped> {
    let (config, renderer) = repo_renderer();
    let labels = config
        .selector
        .clone()
        .into_iter()
        .filter_map(|e| match e {
            kube::core::Expression::Equal(k, v) => Some((k, v)),
            _ => None,
        })
        .collect();
    let input = NamespaceInput {
        name: name.into(),
        labels,
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        share: None,
    };
    renderer.render(&input).unwrap()
}

/// Every container of every pod template in `objects`, with its pod spec.
pub(super) fn containers(objects: &[Stamped]) -> Vec<(serde_json::Value, serde_json::Value)> {
    objects
        .iter()
        .filter(|o| o.key.kind == crate::kinds::Kind::Deployment)
        .flat_map(|d| {
            let pod = d.body["spec"]["template"]["spec"].clone();
            let all: Vec<serde_json::Value> = ["initContainers", "containers"]
                .iter()
                .flat_map(|f| pod[*f].as_array().cloned().unwrap_or_default())
                .collect();
            all.into_iter().map(move |c| (pod.clone(), c))
        })
        .collect()
}

pub(super) fn assert_hardened(objects: &[Stamped], what: &str) {
    let containers = containers(objects);
    assert!(!containers.is_empty(), "{what}: no containers rendered");
    for (pod, c) in containers {
        let name = c["name"].as_str().unwrap_or("?");
        let at = format!("{what}: container {name}");
        assert_eq!(
            pod["securityContext"]["runAsNonRoot"], true,
            "{at}: pod runAsNonRoot"
        );
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{at}"
        );
        for host in ["hostNetwork", "hostPID", "hostIPC"] {
            assert!(pod[host].is_null() || pod[host] == false, "{at}: {host}");
        }
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{at}: runAsNonRoot");
        assert_eq!(
            sc["readOnlyRootFilesystem"], true,
            "{at}: readOnlyRootFilesystem"
        );
        assert_eq!(
            sc["allowPrivilegeEscalation"], false,
            "{at}: allowPrivilegeEscalation"
        );
        assert_eq!(
            sc["capabilities"]["drop"],
            json!(["ALL"]),
            "{at}: capabilities"
        );
        assert!(
            sc["capabilities"]["add"].is_null(),
            "{at}: capabilities added"
        );
        assert!(
            sc["privileged"].is_null() || sc["privileged"] == false,
            "{at}: privileged"
        );
        for bound in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                let quantity = c["resources"][bound][resource].as_str().unwrap_or_default();
                assert!(
                    !quantity.is_empty(),
                    "{at}: resources.{bound}.{resource} unset"
                );
            }
        }
    }
}

#[test]
fn default_templates_render_a_hardened_controller() {
    let objects = repo_render("team-a", &[]);
    assert_hardened(&objects, "defaults");
    // Overrides within their bounds keep it so.
    let overridden = repo_render(
        "team-a",
        &[
            ("override.flotilla.dev/resources.limits.cpu", "2"),
            ("override.flotilla.dev/resources.requests.memory", "256Mi"),
            ("override.flotilla.dev/logLevel", "debug"),
            ("override.flotilla.dev/parallelism", "500"),
        ],
    );
    assert_hardened(&overridden, "with overrides");
    let (_, c) = &containers(&overridden)[0];
    assert_eq!(c["resources"]["limits"]["cpu"], "2");
    // No hostPath or other volumes, and the controller keeps its own ServiceAccount.
    let deploy = objects
        .iter()
        .find(|o| o.key.kind == crate::kinds::Kind::Deployment)
        .unwrap();
    let pod = &deploy.body["spec"]["template"]["spec"];
    assert!(pod["volumes"].is_null(), "{pod}");
    assert_eq!(pod["serviceAccountName"], "argo");
}

/// The rules of Argo Workflows' namespace-install Role for the controller, and the executor's
/// minimum (README, "Security"): what the stamped Roles may grant, and no more.
fn argo_rules() -> serde_json::Value {
    json!({
        "argo-role": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]},
            {"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "watch", "list"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumeclaims/finalizers"], "verbs": ["create", "update", "delete", "get"]},
            {"apiGroups": ["argoproj.io"], "resources": ["workflows", "workflows/finalizers", "workflowtasksets", "workflowtasksets/finalizers", "workflowartifactgctasks"], "verbs": ["get", "list", "watch", "update", "patch", "delete", "create"]},
            {"apiGroups": ["argoproj.io"], "resources": ["workflowtemplates", "workflowtemplates/finalizers"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["list", "watch", "deletecollection"]},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            {"apiGroups": ["argoproj.io"], "resources": ["cronworkflows", "cronworkflows/finalizers"], "verbs": ["get", "list", "watch", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["create", "get", "delete"]},
        ],
        "argo-workflow": [
            {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
        ],
    })
}

/// Rights no stamped Role may hold, whatever the reference says.
pub(crate) fn assert_no_dangerous_rules(role: &str, rules: &serde_json::Value) {
    for rule in rules.as_array().unwrap() {
        let list = |f: &str| -> Vec<String> {
            rule[f]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        let (groups, resources, verbs) = (list("apiGroups"), list("resources"), list("verbs"));
        for field in [&groups, &resources, &verbs] {
            assert!(
                !field.iter().any(|v| v.contains('*')),
                "{role}: wildcard in {rule}"
            );
        }
        assert!(rule["nonResourceURLs"].is_null(), "{role}: {rule}");
        assert!(rule["resourceNames"].is_null(), "{role}: {rule}");
        for verb in ["escalate", "bind", "impersonate", "approve", "sign"] {
            assert!(!verbs.iter().any(|v| v == verb), "{role}: {verb} in {rule}");
        }
        for resource in &resources {
            assert!(
                ![
                    "roles",
                    "rolebindings",
                    "clusterroles",
                    "clusterrolebindings",
                    "serviceaccounts/token",
                    "nodes",
                    "namespaces"
                ]
                .contains(&resource.as_str()),
                "{role}: {resource} in {rule}"
            );
            if resource == "secrets" {
                assert_eq!(verbs, ["get"], "{role}: secrets beyond get in {rule}");
            }
        }
    }
}

#[test]
fn default_roles_grant_exactly_argos_namespace_install_rules() {
    let objects = repo_render("team-a", &[]);
    let roles: Vec<&Stamped> = objects
        .iter()
        .filter(|o| o.key.kind == crate::kinds::Kind::Role)
        .collect();
    let reference = argo_rules();
    assert_eq!(roles.len(), reference.as_object().unwrap().len());
    for role in roles {
        assert_eq!(
            role.key.namespace, "team-a",
            "Roles are granted in the namespace only"
        );
        let rules = &role.body["rules"];
        assert_eq!(rules, &reference[&role.key.name], "{}", role.key);
        assert_no_dangerous_rules(&role.key.name, rules);
    }
    // Each RoleBinding binds one of those Roles to a ServiceAccount of the namespace.
    for binding in objects
        .iter()
        .filter(|o| o.key.kind == crate::kinds::Kind::RoleBinding)
    {
        let body = &binding.body;
        assert_eq!(body["roleRef"]["kind"], "Role", "{}", binding.key);
        assert!(
            reference
                .get(body["roleRef"]["name"].as_str().unwrap())
                .is_some()
        );
        for subject in body["subjects"].as_array().unwrap() {
            assert_eq!(subject["kind"], "ServiceAccount", "{}", binding.key);
            assert_eq!(subject["namespace"], "team-a", "{}", binding.key);
        }
    }
    // Everything lands in the namespace itself.
    assert!(objects.iter().all(|o| o.key.namespace == "team-a"));
}

#[test]
fn default_templates_are_valid_for_a_namespace_at_the_name_limit() {
    let name = format!("a{}", "-0123456789".repeat(6))[..62].to_string() + "z";
    assert_eq!(name.len(), 63);
    let objects = repo_render(&name, &[]);
    assert_eq!(objects.len(), 9);
    for o in &objects {
        assert_eq!(o.key.namespace, name);
        assert_eq!(
            o.body["metadata"]["labels"]["flotilla.dev/namespace"],
            name.as_str()
        );
    }
}

#[test]
fn the_instance_id_is_a_values_choice_the_configmap_and_flotilla_share() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let team = ns("team-a", &[]);
    let cases: [(serde_json::Value, Result<Option<&str>, &str>); 7] = [
        (json!("namespace"), Ok(Some("team-a"))),
        (json!("none"), Ok(None)),
        (json!("argo-{{ namespace.name }}"), Ok(Some("argo-team-a"))),
        (json!("fixed"), Ok(Some("fixed"))),
        (json!("{{ namespace.name }} x"), Err("not a label value")),
        (json!("{{ nope.name }"), Err("fails")),
        (json!(3), Err("not a string")),
    ];
    for (choice, expected) in cases {
        let mut config = Config::load(&path).unwrap();
        config.values.insert("instanceID".into(), choice.clone());
        let renderer = Renderer::load(&config).unwrap();
        match expected {
            Ok(id) => {
                let objects = renderer.render(&team).unwrap();
                let cm = objects
                    .iter()
                    .find(|o| o.key.name == "workflow-controller-configmap")
                    .unwrap();
                assert_eq!(cm.body["data"]["instanceID"].as_str(), id, "{choice}");
                assert_eq!(renderer.instance_id(&team).unwrap().as_deref(), id);
            }
            Err(reason) => {
                let err = renderer.render(&team).unwrap_err().to_string();
                assert!(err.contains("values.instanceID"), "{choice}: {err}");
                assert!(err.contains(reason), "{choice}: {err}");
                assert!(renderer.instance_id(&team).is_err());
            }
        }
    }
}

#[test]
fn the_default_instance_id_is_the_namespace() {
    let objects = repo_render("team-b", &[]);
    let cm = objects
        .iter()
        .find(|o| o.key.name == "workflow-controller-configmap")
        .unwrap();
    assert_eq!(cm.body["data"]["instanceID"], "team-b");
}
