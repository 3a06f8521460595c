//! Templates on a live fleet: one that breaks for each namespace in its own way changes nothing
//! anywhere; long names and control characters are stamped valid and exactly as written.

use super::helpers::*;
use crate::harness::*;
use flotilla::kinds::Kind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

/// A template that fails at render time for each `sec-tb-*` namespace in its own way (and
/// renders nothing for any other).
const BROKEN_AT_RUN: &str = r#"{% if namespace.name == "sec-tb-undefined" %}
apiVersion: v1
kind: ConfigMap
metadata:
  name: broken
data:
  a: {{ values.nope }}
{% elif namespace.name == "sec-tb-yaml" %}
apiVersion: v1
kind: ConfigMap
metadata:
  name: [broken
{% elif namespace.name == "sec-tb-nokind" %}
apiVersion: v1
metadata:
  name: broken
{% elif namespace.name == "sec-tb-noname" %}
apiVersion: v1
kind: ConfigMap
metadata:
  labels: {a: b}
{% elif namespace.name == "sec-tb-duplicate" %}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: argo
{% endif %}
"#;

/// The namespaces [`BROKEN_AT_RUN`] fails for, each with the reason its worker must show.
const BREAKS: [(&str, &str); 5] = [
    (
        "sec-tb-undefined",
        "zz-broken.yaml:7: undefined value: `values.nope` is undefined",
    ),
    ("sec-tb-yaml", "the rendered output is not valid YAML"),
    ("sec-tb-nokind", "zz-broken.yaml: has no kind"),
    (
        "sec-tb-noname",
        "zz-broken.yaml: ConfigMap has no metadata.name",
    ),
    (
        "sec-tb-duplicate",
        "zz-broken.yaml: renders ServiceAccount sec-tb-duplicate/argo, which controller-serviceaccount.yaml renders already",
    ),
];

pub(super) async fn a_template_that_breaks_keeps_every_namespace_as_it_was() {
    let client = admin().await;
    let fleet = Fleet::new("sec-tbreak");
    let flotilla = fleet.start();
    for (ns, _) in BREAKS {
        fleet.namespace(&client, ns, true).await;
    }
    for (ns, _) in BREAKS {
        wait_full_set(&fleet, &client, ns).await;
    }
    flotilla.stop();
    let mut before = BTreeMap::new();
    for (ns, _) in BREAKS {
        before.insert(ns, untouched(&fleet, &client, ns).await);
    }

    each_namespace_shows_its_failure_and_keeps_what_it_has(&fleet, &client, &before).await;
    a_syntax_error_stops_run_naming_file_and_line(&fleet);

    // Fixed: every namespace recovers, and since nothing was touched, nothing needs writing.
    fleet.remove_template("zz-broken.yaml");
    let _flotilla = fleet.start();
    for (ns, _) in BREAKS {
        wait_rendered(&client, ns).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (ns, _) in BREAKS {
        before[ns].assert_kept(&fleet, &client).await;
    }
    let names: Vec<&str> = BREAKS.iter().map(|(ns, _)| *ns).collect();
    delete_namespaces(&client, &names).await;
}

/// Restarted with [`BROKEN_AT_RUN`]: every namespace shows why its render failed, the failure
/// is logged with file, line and namespace, and flotilla changes nothing there.
async fn each_namespace_shows_its_failure_and_keeps_what_it_has(
    fleet: &Fleet,
    client: &kube::Client,
    before: &BTreeMap<&str, Untouched>,
) {
    fleet.add_template("zz-broken.yaml", BROKEN_AT_RUN);
    let flotilla = fleet.start();
    for (ns, reason) in BREAKS {
        let message = wait_render_failed(client, ns).await;
        assert!(
            message.starts_with("rendering failed, so nothing was applied or removed"),
            "{ns}: {message}"
        );
        assert!(
            message.contains(reason),
            "{ns}: {message}\n  lacks {reason}"
        );
    }
    // Logged with file and line. Waited for: others see the status a moment before flotilla
    // has the response to its write, and logs.
    flotilla
        .wait_log("zz-broken.yaml:7: undefined value: `values.nope`")
        .await;
    let logs = flotilla.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("zz-broken.yaml:7: undefined value"));
    assert!(
        line.is_some_and(|l| l.contains("namespace=\"sec-tb-undefined\"")),
        "the render failure is not logged for its namespace:\n{logs}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (ns, _) in BREAKS {
        before[ns].assert_kept(fleet, client).await;
    }
    flotilla.stop();
}

/// A syntax error: `run` refuses to start at all, naming file and line.
fn a_syntax_error_stops_run_naming_file_and_line(fleet: &Fleet) {
    fleet.add_template(
        "zz-broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ broken\n",
    );
    let config = fleet.config_file();
    let (code, _, stderr) = flotilla_exit(
        &["run", "--config", config.to_str().unwrap()],
        &env().flotilla_kubeconfig,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("zz-broken.yaml:4: syntax error"),
        "{stderr}"
    );
}

const ENTRY: &str = r#"# Composes a name from the namespace name: dns_label keeps it a valid, distinct DNS label.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ (namespace.name ~ "-fleet-entry") | dns_label }}
  namespace: {{ flotilla.namespace }}
data:
  namespace: {{ namespace.name }}
"#;

const NOTE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: team-note
data:
  note: {{ namespace.annotations["e2e.flotilla.dev/note"] }}
"#;

pub(super) async fn long_names_and_control_characters_are_stamped_valid_and_as_written() {
    let client = admin().await;
    let fleet = Fleet::new("sec-names");
    fleet.add_template("entry.yaml", ENTRY);
    fleet.add_template("note.yaml", NOTE);
    // Not among the repository's templates: an admin grants what they cost, every ConfigMap in
    // flotilla's namespace for the entry (its name depends on the namespace), the note's name.
    let _entries = outside_grant();
    let _note = Grant::names("team-note", Kind::ConfigMap, &["team-note"]);
    let _flotilla = fleet.start();
    // Two namespaces at the 63-character limit that differ only in their last character.
    let long = |end: &str| format!("sec-names-{}-{end}", "x".repeat(51));
    let (a, b) = (long("a"), long("b"));
    assert_eq!(a.len(), 63);
    // Control and odd characters, a document, a template: one inert string, exactly as written.
    let hostile = "a\u{0}b\u{1b}[31mc\u{2028}d\u{2029}e\u{feff}f\u{a0}g😀\"\n---\nkind: Secret\n{{ values }} {% raw %}";
    let labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
    for (ns, note) in [(&a, hostile), (&b, "plain")] {
        let annotations = BTreeMap::from([("e2e.flotilla.dev/note".to_string(), note.to_string())]);
        create_namespace(&client, ns, labels.clone(), annotations).await;
    }
    let mut entries = Vec::new();
    for ns in [&a, &b] {
        // The full set, and each namespace's entry and note.
        let stamped = wait_count(&fleet, &client, ns, FULL_SET + 2).await;
        let entry = stamped
            .iter()
            .find(|o| o.namespace().as_deref() == Some(FLOTILLA_NAMESPACE))
            .unwrap_or_else(|| panic!("no entry for {ns}"))
            .name_any();
        assert!(
            entry.len() <= 63 && flotilla::config::is_dns_label(&entry),
            "{entry}"
        );
        assert!(entry.starts_with("sec-names-xxxx"), "{entry}");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
        let data = cms.get(&entry).await.unwrap().data.unwrap();
        assert_eq!(data["namespace"], *ns);
        // The labels carry the full namespace name (the objects were found by a selector on
        // it), and so does the controller's argument.
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let args = deploys
            .get("workflow-controller")
            .await
            .unwrap()
            .spec
            .template
            .spec
            .unwrap()
            .containers[0]
            .args
            .clone()
            .unwrap();
        assert!(
            args.contains(&format!("--managed-namespace={ns}")),
            "{args:?}"
        );
        entries.push(entry);
    }
    assert_ne!(
        entries[0], entries[1],
        "two long namespaces, one entry name"
    );
    let notes: Api<ConfigMap> = Api::namespaced(client.clone(), &a);
    let data = notes.get("team-note").await.unwrap().data.unwrap();
    assert_eq!((data.len(), data["note"].as_str()), (1, hostile));
    wait_rendered(&client, &a).await;
    // What server-side apply cannot carry (DEL, C1 controls, U+FFFF) is refused before
    // anything is applied, with the reason, and the namespace keeps what it has.
    wait_rendered(&client, &b).await;
    let before = untouched(&fleet, &client, &b).await;
    let unsendable = serde_json::json!({"metadata": {"annotations": {"e2e.flotilla.dev/note": "a\u{7f}b\u{85}c\u{ffff}"}}});
    patch_namespace(&client, &b, unsendable).await.unwrap();
    let message = wait_render_failed(&client, &b).await;
    assert!(
        message.contains("note.yaml: ConfigMap team-note: data.note holds U+007F, a control character server-side apply cannot carry"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    before.assert_kept(&fleet, &client).await;
    delete_namespaces(&client, &[&a, &b]).await;
    for ns in [&a, &b] {
        fleet.wait_reaped(&client, ns).await;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    for entry in &entries {
        assert!(
            cms.get_opt(entry).await.unwrap().is_none(),
            "{entry} not reaped"
        );
    }
}
