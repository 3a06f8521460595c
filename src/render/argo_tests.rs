//! Argo's settings in the default templates, rendered offline with the repository's
//! flotilla.yaml: the optional argo-server (`values.argoServer`) and `fail()`, with which a
//! template refuses a value; the controller's knobs and their overrides.

use super::tests::assert_hardened;
use super::*;
use crate::kinds::Kind;
use serde_json::{Map, Value as Json, json};

/// The repository's config with its values edited, and its templates compiled for it.
fn repo_with(edit: impl FnOnce(&mut Map<String, Json>)) -> Renderer {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("flotilla.yaml");
    let mut config = Config::load(&path).unwrap();
    edit(&mut config.values);
    Renderer::load(&config).unwrap()
}

fn team_a(annotations: &[(&str, &str)]) -> NamespaceInput {
    NamespaceInput {
        name: "team-a".into(),
        labels: BTreeMap::from([("flotilla.dev/enabled".into(), "true".into())]),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        share: None,
    }
}

fn with_argo_server(auth_mode: Json) -> impl FnOnce(&mut Map<String, Json>) {
    move |values| {
        values["argoServer"]["enabled"] = json!(true);
        values["argoServer"]["authMode"] = auth_mode;
    }
}

fn names(objects: &[Stamped]) -> Vec<(Kind, &str)> {
    objects
        .iter()
        .map(|o| (o.key.kind, o.key.name.as_str()))
        .collect()
}

fn object<'o>(objects: &'o [Stamped], kind: Kind, name: &str) -> &'o Json {
    let found = objects
        .iter()
        .find(|o| o.key.kind == kind && o.key.name == name);
    &found.unwrap_or_else(|| panic!("no {kind} {name}")).body
}

const CONTROLLER: [(Kind, &str); 9] = [
    (Kind::ServiceAccount, "argo"),
    (Kind::ServiceAccount, "argo-workflow"),
    (Kind::ConfigMap, "workflow-controller-configmap"),
    (Kind::Role, "argo-role"),
    (Kind::Role, "argo-workflow"),
    (Kind::RoleBinding, "argo-binding"),
    (Kind::RoleBinding, "argo-workflow"),
    (Kind::Service, "workflow-controller-metrics"),
    (Kind::Deployment, "workflow-controller"),
];

#[test]
fn argo_server_is_off_by_default_and_the_set_is_the_nine_controller_objects() {
    let objects = repo_with(|_| {}).render(&team_a(&[])).unwrap();
    assert_eq!(names(&objects), CONTROLLER);
}

#[test]
fn argo_server_enabled_adds_its_five_objects_hardened_and_namespaced() {
    let objects = repo_with(with_argo_server(json!("client")))
        .render(&team_a(&[]))
        .unwrap();
    let mut want = CONTROLLER.to_vec();
    want.extend([
        (Kind::ServiceAccount, "argo-server"),
        (Kind::Role, "argo-server-role"),
        (Kind::RoleBinding, "argo-server-binding"),
        (Kind::Service, "argo-server"),
        (Kind::Deployment, "argo-server"),
    ]);
    want.sort();
    assert_eq!(names(&objects), want);
    assert_eq!(objects.len(), 14);
    assert!(objects.iter().all(|o| o.key.namespace == "team-a"));
    // Both Deployments, every container: non-root, read-only root, nothing added, limits.
    assert_hardened(&objects, "argo-server enabled");

    let deploy = object(&objects, Kind::Deployment, "argo-server");
    assert_eq!(deploy["spec"]["replicas"], 1);
    let pod = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "argo-server");
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["volumes"], json!([{"name": "tmp", "emptyDir": {}}]));
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "quay.io/argoproj/argocli:v4.1.2");
    assert_eq!(
        container["args"],
        json!([
            "server",
            "--namespaced",
            "--managed-namespace=team-a",
            "--configmap=workflow-controller-configmap",
            "--auth-mode=client"
        ])
    );
    assert_eq!(
        container["ports"],
        json!([{"name": "web", "containerPort": 2746, "protocol": "TCP"}])
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/", "port": 2746, "scheme": "HTTPS"})
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "tmp", "mountPath": "/tmp"}])
    );
    assert_eq!(container["resources"]["limits"]["memory"], "128Mi");
    // The Service selects the Deployment's pods, inside the cluster only.
    let service = object(&objects, Kind::Service, "argo-server");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(
        service["spec"]["selector"],
        deploy["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "web", "port": 2746, "targetPort": 2746, "protocol": "TCP"}])
    );
    let binding = object(&objects, Kind::RoleBinding, "argo-server-binding");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-server-role"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "argo-server", "namespace": "team-a"}])
    );
}

/// Argo Workflows v4.1.2, manifests/namespace-install/argo-server-rbac/argo-server-role.yaml,
/// as its YAML reads.
fn argos_argo_server_rules() -> Json {
    json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "watch", "list", "create", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["pods", "pods/exec", "pods/log"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["watch", "create", "patch"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["argoproj.io"], "resources": ["eventsources", "sensors", "workflows", "workfloweventbindings", "workflowtemplates", "cronworkflows", "cronworkflows/finalizers"], "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
    ])
}

#[test]
fn argo_server_role_is_argos_rule_for_rule() {
    let objects = repo_with(with_argo_server(json!("client")))
        .render(&team_a(&[]))
        .unwrap();
    let role = object(&objects, Kind::Role, "argo-server-role");
    assert_eq!(role["rules"], argos_argo_server_rules());
}

#[test]
fn docs_security_lists_the_argo_server_role_as_stamped() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/security.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let block = docs
        .split("```yaml\n")
        .map(|b| b.split_once("```").map_or(b, |(yaml, _)| yaml))
        .find(|yaml| yaml.starts_with("argo-server-role:"))
        .expect("docs/security.md lists argo-server-role");
    let listed: Json = serde_saphyr::from_str(block).unwrap();
    assert_eq!(listed["argo-server-role"], argos_argo_server_rules());
}

#[test]
fn each_auth_mode_of_argos_is_passed_and_any_other_fails_naming_the_template() {
    for mode in ["client", "server", "sso"] {
        let objects = repo_with(with_argo_server(json!(mode)))
            .render(&team_a(&[]))
            .unwrap();
        let args = &object(&objects, Kind::Deployment, "argo-server")["spec"]["template"]["spec"]["containers"]
            [0]["args"];
        assert_eq!(args[4], format!("--auth-mode={mode}"), "{mode}");
    }
    for (mode, shown) in [
        (json!("password"), "password"),
        (json!("Client"), "Client"),
        (json!(""), ""),
        (json!("client,sso"), "client,sso"),
        (json!(3), "3"),
    ] {
        let errors = repo_with(with_argo_server(mode))
            .render(&team_a(&[]))
            .unwrap_err();
        assert_eq!(
            errors.to_string(),
            format!(
                "argo-server-deployment.yaml:3: invalid operation: values.argoServer.authMode must be one of client, server, sso, not {shown}"
            )
        );
    }
    // Off, the mode is not used, and not looked at.
    let off = repo_with(|values| values["argoServer"]["authMode"] = json!("password"))
        .render(&team_a(&[]))
        .unwrap();
    assert_eq!(off.len(), 9);
}

#[test]
fn fail_refuses_the_render_with_its_message_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let config = Config::parse("values: {mode: b}\n", &dir.path().join("flotilla.yaml")).unwrap();
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n{% if values.mode != \"a\" %}{{ fail(\"mode must be a, not \" ~ values.mode) }}{% endif %}\n";
    let renderer = Renderer::new(vec![("m.yaml".into(), template.into())], &config).unwrap();
    let errors = renderer.render(&team_a(&[])).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "m.yaml:5: invalid operation: mode must be a, not b"
    );
    // A huge message is cut short: it goes into a NamespaceWorker's status and an Event.
    let huge = "{{ fail(\"x\" * 100000) }}";
    let renderer = Renderer::new(vec![("h.yaml".into(), huge.into())], &config).unwrap();
    let message = renderer.render(&team_a(&[])).unwrap_err().to_string();
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.ends_with("… (100000 bytes)"), "{message}");
}

// ---- The controller's knobs: Argo's ConfigMap keys and flags, and their overrides. ----

fn configmap(objects: &[Stamped]) -> &Json {
    &object(objects, Kind::ConfigMap, "workflow-controller-configmap")["data"]
}

fn controller_args(objects: &[Stamped]) -> Vec<String> {
    let deploy = object(objects, Kind::Deployment, "workflow-controller");
    let args = deploy["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    serde_json::from_value(args).unwrap()
}

#[test]
fn the_controller_knobs_render_at_argos_defaults() {
    let objects = repo_with(|_| {}).render(&team_a(&[])).unwrap();
    let data = configmap(&objects);
    assert_eq!(data["namespaceParallelism"], "0");
    // No rate limit: Argo's default, for which the key must be absent (a limit of 0 would
    // let no pod be created).
    assert!(data.get("resourceRateLimit").is_none(), "{data}");
    let args = controller_args(&objects);
    for flag in ["--workflow-workers=32", "--qps=20", "--burst=30"] {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }
}

#[test]
fn knob_overrides_within_their_bounds_reach_the_configmap_and_the_flags() {
    let objects = repo_with(|_| {})
        .render(&team_a(&[
            ("override.flotilla.dev/namespaceParallelism", "200"),
            ("override.flotilla.dev/resourceRateLimit.limit", "2.5"),
            ("override.flotilla.dev/resourceRateLimit.burst", "25"),
            ("override.flotilla.dev/workflowWorkers", "64"),
            ("override.flotilla.dev/controllerQps", "50"),
            ("override.flotilla.dev/controllerBurst", "75"),
        ]))
        .unwrap();
    let data = configmap(&objects);
    assert_eq!(data["namespaceParallelism"], "200");
    // Nested YAML in one string, as Argo reads the key.
    let limit: Json = serde_saphyr::from_str(data["resourceRateLimit"].as_str().unwrap()).unwrap();
    assert_eq!(limit, json!({"limit": 2.5, "burst": 25}));
    let args = controller_args(&objects);
    assert_eq!(
        args[args.len() - 3..],
        ["--workflow-workers=64", "--qps=50", "--burst=75"]
    );
    // A fractional rate, as Argo's float flag takes it.
    let objects = repo_with(|_| {})
        .render(&team_a(&[("override.flotilla.dev/controllerQps", "7.5")]))
        .unwrap();
    assert!(controller_args(&objects).contains(&"--qps=7.5".to_string()));
}

#[test]
fn knob_overrides_beyond_their_bounds_are_refused_naming_the_annotation() {
    let renderer = repo_with(|_| {});
    for (key, raw, why) in [
        ("namespaceParallelism", "0", "0 is below the minimum 1"),
        (
            "namespaceParallelism",
            "501",
            "501 is above the maximum 500",
        ),
        ("resourceRateLimit.limit", "0", "0 is below the minimum 0.1"),
        (
            "resourceRateLimit.limit",
            "100.5",
            "100.5 is above the maximum 100",
        ),
        (
            "resourceRateLimit.limit",
            "1e3",
            r#""1e3" is not a number (like 10 or 0.5)"#,
        ),
        ("resourceRateLimit.burst", "0", "0 is below the minimum 1"),
        (
            "resourceRateLimit.burst",
            "2.5",
            r#""2.5" is not an integer"#,
        ),
        ("workflowWorkers", "129", "129 is above the maximum 128"),
        ("controllerQps", "0.5", "0.5 is below the minimum 1"),
        ("controllerQps", "101", "101 is above the maximum 100"),
        ("controllerBurst", "151", "151 is above the maximum 150"),
        (
            "resourceRateLimit",
            "{limit: 1}",
            r#""resourceRateLimit" is not overridable"#,
        ),
    ] {
        let annotation = format!("override.flotilla.dev/{key}");
        let errors = renderer
            .render(&team_a(&[(&annotation, raw)]))
            .unwrap_err()
            .to_string();
        assert!(
            errors.starts_with(&format!("annotation {annotation}: {why}")),
            "{key}={raw}: {errors}"
        );
    }
}
