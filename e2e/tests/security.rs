//! Hostile input and least privilege. Every bad input gets a clear error and changes nothing;
//! flotilla's own credentials are refused what it must not do; a namespace owner cannot make
//! flotilla act outside their namespace; logs carry no token and no object bodies.
//!
//! The config and template cases run the binary without a cluster; the others run against the
//! local control plane, and prove "nothing changed" with resourceVersions and with the API
//! server's audit log of flotilla's own writes.

use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generous: other engineers run heavy jobs on the same two cores.
const LONG: Duration = Duration::from_secs(180);

/// Runs the flotilla binary to its exit (killed after `limit`): (exit code, stdout, stderr).
fn flotilla_exit(
    args: &[&str],
    kubeconfig: &Path,
    limit: Duration,
) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("FLOTILLA_HTTP_ADDRESS", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (code, read(&out), read(&err))
}

const NO_CLUSTER: &str = "/nonexistent/flotilla-e2e/kubeconfig";

/// A config file (and, if asked, an empty templates directory next to it) in a fresh directory.
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

#[test]
fn bad_config_stops_run_and_check_with_exit_2_naming_file_line_and_key() {
    let cases: &[(&str, &str, bool, &[&str])] = &[
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
            "values: {n: 1}\noverrides:\n  n: {type: number}\n",
            true,
            &["unknown variant `number`"],
        ),
        (
            "override with a broken pattern",
            "values: {image: x}\noverrides:\n  image: {type: string, pattern: '('}\n",
            true,
            &["line 3: overrides.image.pattern: "],
        ),
    ];
    let mut checked = 0;
    for (case, text, with_templates, needles) in cases {
        let templates: &[(&str, &str)] = if *with_templates {
            &[("good.yaml", GOOD)]
        } else {
            &[]
        };
        let (_dir, path) = offline_config(text, templates);
        let config = path.to_str().unwrap();
        for command in ["run", "check"] {
            let (code, stdout, stderr) = flotilla_exit(
                &[command, "--config", config],
                Path::new(NO_CLUSTER),
                Duration::from_secs(60),
            );
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
    let (code, _, stderr) = flotilla_exit(
        &["run", "--config", "/nonexistent/flotilla.yaml"],
        Path::new(NO_CLUSTER),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("error: /nonexistent/flotilla.yaml: cannot read"),
        "{stderr}"
    );
    println!(
        "bad config: {} cases, {checked} runs of run/check refused with exit 2",
        cases.len() + 1
    );
}

#[test]
fn bad_templates_are_reported_by_check_render_and_run_with_file_and_line() {
    let cm = |body: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n{body}");
    let cases: Vec<(&str, String, &str)> = vec![
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
    ];
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
        let (code, stdout, stderr) = flotilla_exit(
            &["check", "--config", config],
            Path::new(NO_CLUSTER),
            Duration::from_secs(60),
        );
        let at = format!("{case} (check): stdout {stdout:?}, stderr {stderr:?}");
        assert_eq!(code, Some(2), "{at}");
        assert!(
            stdout.contains(&format!("{located}{needle}")),
            "{at}\n  lacks {located}{needle}"
        );
        assert!(stderr.contains("error: 1 problem(s) in"), "{at}");
        // `render` says the same (it prints what `run` would apply: here, nothing).
        let (code, stdout, stderr) = flotilla_exit(
            &["render", "--config", config, "-n", "team-a"],
            Path::new(NO_CLUSTER),
            Duration::from_secs(60),
        );
        let at = format!("{case} (render): stdout {stdout:?}, stderr {stderr:?}");
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{at}");
        assert!(
            stderr.contains(&needle.replace("flotilla-check", "team-a")),
            "{at}"
        );
        // `run` compiles every template before it connects: a syntax error stops it at once.
        if !compiles(case) {
            let (code, _, stderr) = flotilla_exit(
                &["run", "--config", config],
                Path::new(NO_CLUSTER),
                Duration::from_secs(60),
            );
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
}

fn workers(client: &kube::Client) -> Api<NamespaceWorker> {
    Api::all(client.clone())
}

async fn wait_worker(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    test: impl Fn(&NamespaceWorker) -> bool,
) -> NamespaceWorker {
    eventually_within(
        LONG,
        &format!("NamespaceWorker {namespace}: {what}"),
        || async {
            let worker = workers(client).get_opt(namespace).await.ok()??;
            worker.status.as_ref()?;
            test(&worker).then_some(worker)
        },
    )
    .await
}

async fn wait_render_failed(client: &kube::Client, namespace: &str) -> String {
    let worker = wait_worker(client, namespace, "RenderFailed", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase == Phase::RenderFailed)
    })
    .await;
    worker.status.unwrap().message
}

async fn wait_rendered(client: &kube::Client, namespace: &str) {
    wait_worker(client, namespace, "rendered", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| !matches!(s.phase, Phase::RenderFailed))
    })
    .await;
}

/// (kind, namespace, name, version) of every object, sorted: the resourceVersion, except for
/// Deployments, whose status the controller-manager keeps writing: their generation (which only
/// a change of the spec bumps). Writes that touch only metadata show in the audit log instead.
fn versions(objects: &[DynamicObject]) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = objects
        .iter()
        .map(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let version = if kind == "Deployment" {
                format!("generation {:?}", o.metadata.generation)
            } else {
                o.resource_version().unwrap_or_default()
            };
            (
                kind,
                o.namespace().unwrap_or_default(),
                o.name_any(),
                version,
            )
        })
        .collect();
    v.sort();
    v
}

/// What flotilla must leave as it is in a namespace: the versions of what it stamped there as
/// of now, and from now on an audit window of the writes it makes there.
struct Untouched {
    namespace: String,
    versions: Vec<(String, String, String, String)>,
    audit: AuditWindow,
}

async fn untouched(fleet: &Fleet, client: &kube::Client, namespace: &str) -> Untouched {
    Untouched {
        namespace: namespace.to_string(),
        versions: versions(&fleet.stamped_for(client, namespace).await),
        audit: AuditWindow::open(),
    }
}

impl Untouched {
    /// Asserts that nothing flotilla stamped there changed and that it wrote nothing there
    /// since; and, so that "nothing" is not for lack of data, that the audit window holds this
    /// fleet's leader Lease renewals (a running flotilla renews every 2 s).
    async fn assert_kept(&self, fleet: &Fleet, client: &kube::Client) {
        let ns = &self.namespace;
        let now = versions(&fleet.stamped_for(client, ns).await);
        assert_eq!(self.versions, now, "{ns}: a stamped object changed");
        let renewals = self.audit.lease_writes(FLOTILLA_USER, &fleet.instance);
        assert!(
            renewals > 0,
            "{ns}: no Lease renewal of {} in the audit window",
            fleet.instance
        );
        assert_eq!(
            self.audit.writes_in(FLOTILLA_USER, ns),
            0,
            "flotilla wrote in {ns}"
        );
    }
}

async fn delete_namespaces(client: &kube::Client, names: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let _ = namespaces.delete(name, &DeleteParams::default()).await;
    }
}

/// Waits until `fleet` has stamped exactly `want` objects for `namespace`, and the
/// controller-manager is done with them (it adds the token Secret to each ServiceAccount, a
/// write of its own), so that their resourceVersions only change if someone writes them.
async fn wait_count(
    fleet: &Fleet,
    client: &kube::Client,
    namespace: &str,
    want: usize,
) -> Vec<DynamicObject> {
    eventually_within(
        LONG,
        &format!("{want} objects stamped for {namespace}"),
        || async {
            let have = fleet.stamped_for(client, namespace).await;
            let settled = have.iter().all(|o| {
                o.types.as_ref().is_none_or(|t| t.kind != "ServiceAccount")
                    || o.data["secrets"].as_array().is_some_and(|s| !s.is_empty())
            });
            (have.len() == want && settled).then_some(have)
        },
    )
    .await
}

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

#[tokio::test]
async fn a_template_that_breaks_keeps_every_namespace_as_it_was() {
    let client = admin().await;
    let fleet = Fleet::new("sec-tbreak");
    let cases = [
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
    let flotilla = fleet.start();
    for (ns, _) in cases {
        fleet.namespace(&client, ns, true).await;
    }
    for (ns, _) in cases {
        wait_count(&fleet, &client, ns, 9).await;
        wait_rendered(&client, ns).await;
    }
    flotilla.stop();
    let mut before = BTreeMap::new();
    for (ns, _) in cases {
        before.insert(ns, untouched(&fleet, &client, ns).await);
    }

    // Restarted with a template that fails for each namespace in its own way.
    fleet.add_template("zz-broken.yaml", BROKEN_AT_RUN);
    let flotilla = fleet.start();
    for (ns, reason) in cases {
        let message = wait_render_failed(&client, ns).await;
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
    for (ns, _) in cases {
        before[ns].assert_kept(&fleet, &client).await;
    }
    flotilla.stop();

    // A syntax error: `run` refuses to start at all, naming file and line.
    fleet.add_template(
        "zz-broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ broken\n",
    );
    let config = fleet.config_file();
    let (code, _, stderr) = flotilla_exit(
        &["run", "--config", config.to_str().unwrap()],
        &env().flotilla_kubeconfig,
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("zz-broken.yaml:4: syntax error"),
        "{stderr}"
    );

    // Fixed: every namespace recovers, and since nothing was touched, nothing needs writing.
    fleet.remove_template("zz-broken.yaml");
    let _flotilla = fleet.start();
    for (ns, _) in cases {
        wait_rendered(&client, ns).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (ns, _) in cases {
        before[ns].assert_kept(&fleet, &client).await;
    }
    let names: Vec<&str> = cases.iter().map(|(ns, _)| *ns).collect();
    delete_namespaces(&client, &names).await;
}

const POLICY: &str = r#"{% set case = namespace.annotations["e2e.flotilla.dev/case"] if "e2e.flotilla.dev/case" in namespace.annotations else "" %}
{% if case == "clusterrole" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: sec-pol-evil
rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
{% elif case == "clusterrolebinding" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: argo, namespace: {{ namespace.name }}}]
{% elif case == "namespace" %}
apiVersion: v1
kind: Namespace
metadata:
  name: sec-pol-evil
{% elif case == "secret" %}
apiVersion: v1
kind: Secret
metadata:
  name: sec-pol-evil
stringData: {token: x}
{% elif case == "elsewhere" %}
apiVersion: v1
kind: ConfigMap
metadata:
  name: sec-pol-evil
  namespace: {{ namespace.annotations["e2e.flotilla.dev/place"] }}
{% elif case == "own-role" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: argo-role
  namespace: {{ flotilla.namespace }}
rules: []
{% elif case == "bind-admin" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: ServiceAccount, name: argo, namespace: {{ namespace.name }}}]
{% elif case == "bind-everyone" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: argo-role}
subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "system:authenticated"}]
{% endif %}
"#;

/// The policy cases: (namespace and case, the reason its worker must show).
const POLICY_CASES: [(&str, &str); 8] = [
    (
        "clusterrole",
        "policy.yaml: kind ClusterRole (rbac.authorization.k8s.io/v1) is not allowed; flotilla stamps only namespaced kinds from its allowlist",
    ),
    (
        "clusterrolebinding",
        "policy.yaml: kind ClusterRoleBinding (rbac.authorization.k8s.io/v1) is not allowed",
    ),
    (
        "namespace",
        "policy.yaml: kind Namespace (v1) is not allowed",
    ),
    ("secret", "policy.yaml: kind Secret (v1) is not allowed"),
    (
        "elsewhere",
        "policy.yaml: ConfigMap sec-pol-evil is placed in namespace \"kube-system\"; objects may only go to the target namespace (sec-pol-elsewhere) or flotilla's own (flotilla-system)",
    ),
    (
        "own-role",
        "policy.yaml: Role argo-role is placed in flotilla's own namespace flotilla-system; only ServiceAccount, ConfigMap, Service may go there",
    ),
    (
        "bind-admin",
        "policy.yaml: RoleBinding sec-pol-evil: roleRef must be a Role",
    ),
    (
        "bind-everyone",
        "policy.yaml: RoleBinding sec-pol-evil: binds system:authenticated, which stands for everyone",
    ),
];

/// Nothing that a refused template asked for exists.
async fn assert_nothing_forbidden_exists(client: &kube::Client) {
    assert!(absent(&Api::<ClusterRole>::all(client.clone()), "sec-pol-evil").await);
    assert!(
        absent(
            &Api::<ClusterRoleBinding>::all(client.clone()),
            "sec-pol-evil"
        )
        .await
    );
    assert!(absent(&Api::<Namespace>::all(client.clone()), "sec-pol-evil").await);
    assert!(
        absent(
            &Api::<ConfigMap>::namespaced(client.clone(), "kube-system"),
            "sec-pol-evil"
        )
        .await
    );
    assert!(
        absent(
            &Api::<Role>::namespaced(client.clone(), FLOTILLA_NAMESPACE),
            "argo-role"
        )
        .await
    );
}

#[tokio::test]
async fn policy_refuses_cluster_scoped_unlisted_and_misplaced_objects() {
    let client = admin().await;
    let fleet = Fleet::new("sec-policy");
    fleet.add_template("policy.yaml", POLICY);
    let _flotilla = fleet.start();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let name = |case: &str| format!("sec-pol-{case}");
    // Each namespace first gets the full set (the template renders nothing for it)...
    for (case, _) in POLICY_CASES {
        fleet.namespace(&client, &name(case), true).await;
    }
    let mut before = BTreeMap::new();
    for (case, _) in POLICY_CASES {
        let ns = name(case);
        wait_count(&fleet, &client, &ns, 9).await;
        wait_rendered(&client, &ns).await;
        before.insert(case, untouched(&fleet, &client, &ns).await);
    }
    // ...then asks, by annotation, for something flotilla must not stamp, and where to put it:
    // an annotation is no way out of the namespace either.
    for (case, _) in POLICY_CASES {
        let patch = serde_json::json!({"metadata": {"annotations": {
            "e2e.flotilla.dev/case": case, "e2e.flotilla.dev/place": "kube-system"}}});
        namespaces
            .patch(&name(case), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }
    for (case, reason) in POLICY_CASES {
        let message = wait_render_failed(&client, &name(case)).await;
        assert!(
            message.contains(reason),
            "{case}: {message}\n  lacks {reason}"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (case, _) in POLICY_CASES {
        before[case].assert_kept(&fleet, &client).await;
    }
    assert_nothing_forbidden_exists(&client).await;
    let names: Vec<String> = POLICY_CASES.iter().map(|(case, _)| name(case)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    delete_namespaces(&client, &names).await;
}

/// A namespace opted in with a template that fails from the start has nothing stamped and
/// must show why. (Its first status has no revision or image yet: the status leaves them out,
/// since this API server turns an empty string into null, which the schema refuses.)
#[tokio::test]
async fn a_namespace_whose_first_render_fails_shows_why_and_gets_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("sec-policy-fresh");
    fleet.add_template("policy.yaml", POLICY);
    let _flotilla = fleet.start();
    let labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
    let ns = "sec-pol-fresh";
    let annotations = BTreeMap::from([(
        "e2e.flotilla.dev/case".to_string(),
        "clusterrole".to_string(),
    )]);
    let audit = AuditWindow::open();
    create_namespace(&client, ns, labels, annotations).await;
    let message = wait_render_failed(&client, ns).await;
    assert!(message.contains(POLICY_CASES[0].1), "{message}");
    assert!(fleet.stamped_for(&client, ns).await.is_empty());
    // The window holds flotilla's writes for the namespace: its NamespaceWorker's.
    let worker_writes = audit
        .requests(FLOTILLA_USER, Some(&format!("namespaceworkers/{ns}")))
        .len();
    assert!(worker_writes > 0, "no NamespaceWorker write for {ns} seen");
    assert_eq!(audit.writes_in(FLOTILLA_USER, ns), 0);
    assert_nothing_forbidden_exists(&client).await;
    delete_namespaces(&client, &[ns]).await;
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

#[tokio::test]
async fn long_names_and_control_characters_are_stamped_valid_and_as_written() {
    let client = admin().await;
    let fleet = Fleet::new("sec-names");
    fleet.add_template("entry.yaml", ENTRY);
    fleet.add_template("note.yaml", NOTE);
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
        let stamped = wait_count(&fleet, &client, ns, 11).await;
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
    Api::<Namespace>::all(client.clone())
        .patch(&b, &PatchParams::default(), &Patch::Merge(unsendable))
        .await
        .unwrap();
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

#[tokio::test]
async fn overrides_beyond_the_declared_keys_and_bounds_change_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("sec-override");
    let ns = "sec-override-a";
    let _flotilla = fleet.start();
    fleet.namespace(&client, ns, true).await;
    wait_count(&fleet, &client, ns, 9).await;
    wait_rendered(&client, ns).await;
    let before = untouched(&fleet, &client, ns).await;
    let attempts = [
        // Not declared: the workflows' ServiceAccount (a way to the controller's own rights).
        (
            "workflowDefaults.spec.serviceAccountName",
            "argo",
            "is not overridable (the config allows: controllerImage, executorImage, logLevel, parallelism, resources.limits.cpu",
        ),
        // A parent of declared keys: would replace the whole map, bounds and all.
        ("resources", "{}", "\"resources\" is not overridable"),
        // Another registry for a declared image.
        (
            "executorImage",
            "evil.example/argoproj/argoexec:v4.1.2",
            "\"evil.example/argoproj/argoexec:v4.1.2\" does not match the allowed pattern",
        ),
        ("parallelism", "100000", "100000 is above the maximum 500"),
        ("parallelism", "lots", "\"lots\" is not an integer"),
        (
            "logLevel",
            "info\n- --namespaced=false",
            "is not one of [\"debug\", \"info\", \"warn\", \"error\"]",
        ),
        (
            "resources.limits.memory",
            "unlimited",
            "\"unlimited\" is not a Kubernetes quantity",
        ),
    ];
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Two values for one key cannot coexist: parallelism gets its second attempt afterwards.
    for round in [0, 1] {
        let mut annotations = serde_json::Map::new();
        for (i, (key, value, _)) in attempts.iter().enumerate() {
            if *key == "parallelism" && (i % 2 == 0) != (round == 0) {
                continue;
            }
            annotations.insert(format!("override.flotilla.dev/{key}"), (*value).into());
        }
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        namespaces
            .patch(ns, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
        let tried: Vec<_> = attempts
            .iter()
            .filter(|(key, value, _)| {
                annotations
                    .get(&format!("override.flotilla.dev/{key}"))
                    .and_then(|v| v.as_str())
                    == Some(*value)
            })
            .collect();
        let worker = wait_worker(
            &client,
            ns,
            "RenderFailed naming every refused override",
            |w| {
                let status = w.status.as_ref().unwrap();
                status.phase == Phase::RenderFailed
                    && tried
                        .iter()
                        .all(|(_, _, reason)| status.message.contains(reason))
            },
        )
        .await;
        let message = worker.status.unwrap().message;
        for (key, _, reason) in &tried {
            let named = format!("annotation override.flotilla.dev/{key}: ");
            assert!(message.contains(&named), "{message}\n  lacks {named}");
            assert!(message.contains(reason), "{message}\n  lacks {reason}");
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    before.assert_kept(&fleet, &client).await;
    // Removed again: the namespace is back to its defaults, which it never left.
    let mut clear = serde_json::Map::new();
    for (key, _, _) in attempts {
        clear.insert(
            format!("override.flotilla.dev/{key}"),
            serde_json::Value::Null,
        );
    }
    let patch = serde_json::json!({"metadata": {"annotations": clear}});
    namespaces
        .patch(ns, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    wait_rendered(&client, ns).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        before.versions,
        versions(&fleet.stamped_for(&client, ns).await)
    );
    delete_namespaces(&client, &[ns]).await;
}

/// Asserts that the API server refused `result` as Forbidden (403), not for any other reason.
#[track_caller]
fn assert_forbidden<T: std::fmt::Debug>(what: &str, result: kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            assert_eq!(status.reason, "Forbidden", "{what}: {status:?}");
        }
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

fn rule(
    groups: &[&str],
    resources: &[&str],
    verbs: &[&str],
) -> k8s_openapi::api::rbac::v1::PolicyRule {
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: strings(groups),
        resources: strings(resources),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Creates `object` in `namespace` as `client`, which must be allowed to.
async fn create_in<K>(client: &kube::Client, namespace: &str, object: &K)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), object)
        .await
        .unwrap();
}

fn meta(name: &str, namespace: Option<&str>) -> kube::core::ObjectMeta {
    kube::core::ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(String::from),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> k8s_openapi::api::rbac::v1::RoleRef {
    k8s_openapi::api::rbac::v1::RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

fn service_account_subject(
    namespace: &str,
    name: &str,
) -> Vec<k8s_openapi::api::rbac::v1::Subject> {
    vec![k8s_openapi::api::rbac::v1::Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        ..Default::default()
    }]
}

/// The stamped Roles' rules as the README lists them (the block after `<!-- stamped-roles -->`).
fn readme_role_rules() -> serde_json::Value {
    let readme = std::fs::read_to_string(env().repo.join("README.md")).unwrap();
    let (_, after) = readme
        .split_once("<!-- stamped-roles")
        .expect("README lists the stamped Roles");
    let block = after
        .split_once("```yaml\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    serde_saphyr::from_str(block).unwrap()
}

#[tokio::test]
async fn flotillas_own_credentials_are_refused_what_it_must_not_do() {
    let admin = admin().await;
    let flotilla = client_for(&env().flotilla_kubeconfig).await;
    let ns = "sec-rbac";
    create_namespace(&admin, ns, BTreeMap::new(), BTreeMap::new()).await;
    let pp = PostParams::default();
    let secret = Secret {
        metadata: meta("sec-rbac-secret", None),
        string_data: Some(BTreeMap::from([("password".into(), "hunter2".into())])),
        ..Default::default()
    };
    create_in(&admin, ns, &secret).await;
    let admin_like = Role {
        metadata: meta("admin-like", None),
        rules: Some(vec![rule(&["*"], &["*"], &["*"])]),
    };
    create_in(&admin, ns, &admin_like).await;
    let account = ServiceAccount {
        metadata: meta("someone", None),
        ..Default::default()
    };
    create_in(&admin, ns, &account).await;

    // Control: the token works, for what flotilla is meant to do.
    let cms: Api<ConfigMap> = Api::namespaced(flotilla.clone(), ns);
    let probe = ConfigMap {
        metadata: meta("sec-rbac-probe", None),
        ..Default::default()
    };
    cms.create(&pp, &probe)
        .await
        .expect("flotilla may create a ConfigMap");
    cms.delete("sec-rbac-probe", &DeleteParams::default())
        .await
        .expect("and delete it");
    Api::<Namespace>::all(flotilla.clone())
        .get(ns)
        .await
        .expect("flotilla may read namespaces");

    let secrets: Api<Secret> = Api::namespaced(flotilla.clone(), ns);
    assert_forbidden("get a Secret", secrets.get("sec-rbac-secret").await);
    assert_forbidden("list Secrets", secrets.list(&Default::default()).await);
    assert_forbidden(
        "list Secrets everywhere",
        Api::<Secret>::all(flotilla.clone())
            .list(&Default::default())
            .await,
    );
    assert_forbidden(
        "list its own namespace's Secrets (its token)",
        Api::<Secret>::namespaced(flotilla.clone(), FLOTILLA_NAMESPACE)
            .list(&Default::default())
            .await,
    );
    let cluster_role = ClusterRole {
        metadata: meta("sec-rbac-evil", None),
        rules: Some(vec![rule(&["*"], &["*"], &["*"])]),
        ..Default::default()
    };
    assert_forbidden(
        "create a ClusterRole",
        Api::<ClusterRole>::all(flotilla.clone())
            .create(&pp, &cluster_role)
            .await,
    );
    let grow =
        serde_json::json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    assert_forbidden(
        "widen its own ClusterRole",
        Api::<ClusterRole>::all(flotilla.clone())
            .patch("flotilla", &PatchParams::default(), &Patch::Merge(grow))
            .await,
    );
    let crb = ClusterRoleBinding {
        metadata: meta("sec-rbac-evil", None),
        role_ref: role_ref("ClusterRole", "cluster-admin"),
        subjects: Some(service_account_subject(FLOTILLA_NAMESPACE, "flotilla")),
    };
    assert_forbidden(
        "create a ClusterRoleBinding",
        Api::<ClusterRoleBinding>::all(flotilla.clone())
            .create(&pp, &crb)
            .await,
    );
    let bindings: Api<RoleBinding> = Api::namespaced(flotilla.clone(), ns);
    for (kind, name) in [
        ("ClusterRole", "cluster-admin"),
        ("ClusterRole", "admin"),
        ("Role", "admin-like"),
    ] {
        let binding = RoleBinding {
            metadata: meta("sec-rbac-evil", None),
            role_ref: role_ref(kind, name),
            subjects: Some(service_account_subject(ns, "someone")),
        };
        assert_forbidden(
            &format!("bind {kind} {name}"),
            bindings.create(&pp, &binding).await,
        );
    }
    let to_self = RoleBinding {
        metadata: meta("sec-rbac-evil", None),
        role_ref: role_ref("ClusterRole", "cluster-admin"),
        subjects: Some(service_account_subject(FLOTILLA_NAMESPACE, "flotilla")),
    };
    assert_forbidden(
        "bind cluster-admin to itself in kube-system",
        Api::<RoleBinding>::namespaced(flotilla.clone(), "kube-system")
            .create(&pp, &to_self)
            .await,
    );
    let roles: Api<Role> = Api::namespaced(flotilla.clone(), ns);
    for rules in [
        vec![rule(&[""], &["secrets"], &["get"])],
        vec![rule(&[""], &["pods/exec"], &["create"])],
        vec![rule(&["*"], &["*"], &["*"])],
    ] {
        let role = Role {
            metadata: meta("not-templated", None),
            rules: Some(rules.clone()),
        };
        assert_forbidden(
            &format!("create a Role not on the escalate list with {rules:?}"),
            roles.create(&pp, &role).await,
        );
    }
    let namespaces: Api<Namespace> = Api::all(flotilla.clone());
    let label = serde_json::json!({"metadata": {"labels": {"flotilla.dev/enabled": "true"}}});
    assert_forbidden(
        "label a Namespace",
        namespaces
            .patch(ns, &PatchParams::default(), &Patch::Merge(label))
            .await,
    );
    let annotate = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "1"}}});
    assert_forbidden(
        "annotate a Namespace",
        namespaces
            .patch(ns, &PatchParams::default(), &Patch::Merge(annotate))
            .await,
    );
    let new_ns = Namespace {
        metadata: meta("sec-rbac-new", None),
        ..Default::default()
    };
    assert_forbidden("create a Namespace", namespaces.create(&pp, &new_ns).await);
    assert_forbidden(
        "delete a Namespace",
        namespaces.delete(ns, &DeleteParams::default()).await,
    );
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sec-rbac-pod"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    assert_forbidden(
        "run a Pod",
        Api::<Pod>::namespaced(flotilla.clone(), ns)
            .create(&pp, &pod)
            .await,
    );
    let token = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec!["x".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_forbidden(
        "mint a token for a ServiceAccount",
        Api::<ServiceAccount>::namespaced(flotilla.clone(), ns)
            .create_token_request("someone", &pp, &token)
            .await,
    );
    // Nothing of the above exists now.
    assert!(absent(&Api::<ClusterRole>::all(admin.clone()), "sec-rbac-evil").await);
    assert!(
        absent(
            &Api::<RoleBinding>::namespaced(admin.clone(), ns),
            "sec-rbac-evil"
        )
        .await
    );

    // The Roles flotilla does stamp grant what the README lists, and nothing dangerous.
    let fleet = Fleet::new("sec-rbac");
    let _running = fleet.start();
    let stamped_ns = "sec-rbac-stamped";
    fleet.namespace(&admin, stamped_ns, true).await;
    wait_count(&fleet, &admin, stamped_ns, 9).await;
    let listed = readme_role_rules();
    let live_roles = Api::<Role>::namespaced(admin.clone(), stamped_ns)
        .list(&Default::default())
        .await
        .unwrap();
    let stamped: Vec<&Role> = live_roles
        .items
        .iter()
        .filter(|r| r.labels().get("flotilla.dev/instance") == Some(&fleet.instance))
        .collect();
    assert_eq!(stamped.len(), listed.as_object().unwrap().len(), "{listed}");
    for role in stamped {
        let rules = serde_json::to_value(role.rules.clone().unwrap_or_default()).unwrap();
        assert_eq!(
            rules,
            listed[role.name_any()],
            "Role {} differs from the README",
            role.name_any()
        );
        for rule in role.rules.iter().flatten() {
            let at = format!("Role {}: {rule:?}", role.name_any());
            let all = rule
                .verbs
                .iter()
                .chain(rule.resources.iter().flatten())
                .chain(rule.api_groups.iter().flatten());
            assert!(!all.clone().any(|v| v.contains('*')), "{at}: wildcard");
            assert!(
                rule.non_resource_urls.is_none() && rule.resource_names.is_none(),
                "{at}"
            );
            assert!(
                !rule
                    .verbs
                    .iter()
                    .any(|v| ["escalate", "bind", "impersonate"].contains(&v.as_str())),
                "{at}"
            );
            let resources = rule.resources.clone().unwrap_or_default();
            assert!(
                !resources.iter().any(|r| r.starts_with("roles")
                    || r.starts_with("rolebindings")
                    || r == "serviceaccounts/token"),
                "{at}"
            );
            if resources.iter().any(|r| r == "secrets") {
                assert_eq!(rule.verbs, ["get"], "{at}: secrets beyond get");
            }
        }
    }
    delete_namespaces(&admin, &[ns, stamped_ns]).await;
}

/// A running `flotilla run` with the log settings of the logging test; killed when dropped.
struct Logged(std::process::Child, PathBuf);

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn logs_are_structured_and_carry_no_token_and_no_object_bodies() {
    let client = admin().await;
    let fleet = Fleet::new("sec-logs");
    let ns = "sec-logs-a";
    let log = tempfile::NamedTempFile::new()
        .unwrap()
        .into_temp_path()
        .keep()
        .unwrap();
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["run", "--log-format", "json", "--config"])
        .arg(fleet.config_file())
        .env("KUBECONFIG", &env().flotilla_kubeconfig)
        .env("RUST_LOG", "debug")
        .env("FLOTILLA_HTTP_ADDRESS", "127.0.0.1:0")
        .env("POD_NAME", "sec-logs-a")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let running = Logged(child, log.clone());
    let logs = || std::fs::read_to_string(&running.1).unwrap_or_default();
    fleet.namespace(&client, ns, true).await;
    wait_count(&fleet, &client, ns, 9).await;
    // Drift repaired, and a render failure: the log lines of every path that names objects.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let edit = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "workflow-controller", "image": "someone/else:1"}]}}}});
    deploys
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &Patch::Strategic(edit),
        )
        .await
        .unwrap();
    eventually_within(LONG, "drift repaired in the log", || async {
        logs().contains("drift repaired").then_some(())
    })
    .await;
    let bad = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "lots"}}});
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(bad))
        .await
        .unwrap();
    wait_render_failed(&client, ns).await;
    eventually_within(LONG, "the render failure in the log", || async {
        logs().contains("is not an integer").then_some(())
    })
    .await;
    let _ = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = logs();
    drop(running);

    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() > 20, "a debug log has more to say:\n{text}");
    for line in &lines {
        let entry: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            entry["level"].is_string() && entry["timestamp"].is_string(),
            "{line}"
        );
        assert!(entry["fields"].is_object(), "{line}");
    }
    let token = kubeconfig_token(&env().flotilla_kubeconfig);
    assert!(
        !text.contains(&token),
        "the ServiceAccount token is in the log"
    );
    // A part of the token is no better (e.g. a JWT's signature).
    let signature = token.rsplit('.').next().unwrap();
    assert!(
        !text.contains(signature),
        "a part of the token is in the log"
    );
    // No object bodies: texts that only appear inside the stamped objects.
    for body in [
        "secondsAfterCompletion",   // the ConfigMap's workflowDefaults
        "LEADER_ELECTION_IDENTITY", // the Deployment's env
        "workflowtaskresults",      // the Roles' rules
        "readOnlyRootFilesystem",   // the Deployment's securityContext
        "managedFields",
    ] {
        assert!(
            !text.contains(body),
            "an object body ({body}) is in the log"
        );
    }
    // And it did log what it did, with the objects named.
    for said in [
        "created",
        "drift repaired",
        "RenderFailed",
        "Deployment sec-logs-a/workflow-controller",
    ] {
        assert!(text.contains(said), "the log lacks {said:?}");
    }
    let _ = std::fs::remove_file(&log);
    delete_namespaces(&client, &[ns]).await;
}

/// Waits until `get` shows `want` (as JSON), e.g. an edited field back at its rendered value.
async fn wait_json<F, Fut>(what: &str, want: &serde_json::Value, get: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<serde_json::Value>>,
{
    eventually_within(LONG, what, || async {
        (get().await? == *want).then_some(())
    })
    .await
}

#[tokio::test]
async fn a_namespace_owner_cannot_make_flotilla_act_outside_their_namespace() {
    let admin = admin().await;
    let fleet = Fleet::new("sec-tenant");
    let (tenant_ns, victim_ns) = ("sec-tenant-a", "sec-tenant-victim");
    let _flotilla = fleet.start();
    for ns in [tenant_ns, victim_ns] {
        fleet.namespace(&admin, ns, true).await;
    }
    for ns in [tenant_ns, victim_ns] {
        wait_count(&fleet, &admin, ns, 9).await;
        wait_rendered(&admin, ns).await;
    }
    let victim_before = untouched(&fleet, &admin, victim_ns).await;

    // The owner: the built-in `admin` role in their namespace, plus the rights of the stamped
    // controller Role (which Kubernetes requires before anyone may edit that Role or its binding).
    let pp = PostParams::default();
    let account = ServiceAccount {
        metadata: meta("owner", None),
        ..Default::default()
    };
    create_in(&admin, tenant_ns, &account).await;
    let argo_role = Api::<Role>::namespaced(admin.clone(), tenant_ns)
        .get("argo-role")
        .await
        .unwrap();
    let owner_argo = Role {
        metadata: meta("owner-argo", None),
        rules: argo_role.rules.clone(),
    };
    create_in(&admin, tenant_ns, &owner_argo).await;
    for (name, kind, role) in [
        ("owner-admin", "ClusterRole", "admin"),
        ("owner-argo", "Role", "owner-argo"),
    ] {
        let binding = RoleBinding {
            metadata: meta(name, None),
            role_ref: role_ref(kind, role),
            subjects: Some(service_account_subject(tenant_ns, "owner")),
        };
        create_in(&admin, tenant_ns, &binding).await;
    }
    let owner = client_for(&kubeconfig_for_account(tenant_ns, "owner")).await;

    // The opt-in label and the overrides live on the Namespace: out of the owner's reach.
    let namespaces: Api<Namespace> = Api::all(owner.clone());
    for ns in [tenant_ns, victim_ns] {
        let opt_out = serde_json::json!({"metadata": {"labels": {fleet.label.clone(): null}}});
        assert_forbidden(
            &format!("owner unlabels {ns}"),
            namespaces
                .patch(ns, &PatchParams::default(), &Patch::Merge(opt_out))
                .await,
        );
        let override_ = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "500"}}});
        assert_forbidden(
            &format!("owner overrides for {ns}"),
            namespaces
                .patch(ns, &PatchParams::default(), &Patch::Merge(override_))
                .await,
        );
    }
    let worker = serde_json::from_value::<NamespaceWorker>(serde_json::json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "NamespaceWorker",
        "metadata": {"name": "sec-tenant-ghost"}, "spec": {"namespace": "sec-tenant-ghost"}}))
    .unwrap();
    assert_forbidden(
        "owner creates a NamespaceWorker",
        workers(&owner).create(&pp, &worker).await,
    );
    // Why tenants get the built-in roles and never wildcards: a `*` Role bound in a namespace
    // covers that Namespace object too, opt-in label included (README, "Reserving the opt-in
    // label"). Shown with a harmless label.
    let starred = ServiceAccount {
        metadata: meta("starred", None),
        ..Default::default()
    };
    create_in(&admin, tenant_ns, &starred).await;
    let star = Role {
        metadata: meta("star", None),
        rules: Some(vec![rule(&["*"], &["*"], &["*"])]),
    };
    create_in(&admin, tenant_ns, &star).await;
    let star_binding = RoleBinding {
        metadata: meta("starred-star", None),
        role_ref: role_ref("Role", "star"),
        subjects: Some(service_account_subject(tenant_ns, "starred")),
    };
    create_in(&admin, tenant_ns, &star_binding).await;
    let starred = client_for(&kubeconfig_for_account(tenant_ns, "starred")).await;
    let probe =
        serde_json::json!({"metadata": {"labels": {"e2e.flotilla.dev/probe": "set-by-tenant"}}});
    Api::<Namespace>::all(starred.clone())
        .patch(tenant_ns, &PatchParams::default(), &Patch::Merge(probe))
        .await
        .expect("a `*` Role in a namespace lets its subjects label that Namespace");
    let probe = serde_json::json!({"metadata": {"labels": {"e2e.flotilla.dev/probe": "x"}}});
    assert_forbidden(
        "a `*` Role does not reach another Namespace",
        Api::<Namespace>::all(starred)
            .patch(victim_ns, &PatchParams::default(), &Patch::Merge(probe))
            .await,
    );

    // Edits to stamped objects, each allowed by Kubernetes, each reverted by flotilla.
    let rendered: Vec<serde_json::Value> = fleet.render(tenant_ns, &[]);
    let rendered_of = |kind: &str, name: &str| {
        rendered
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap()
            .clone()
    };
    let roles: Api<Role> = Api::namespaced(owner.clone(), tenant_ns);
    let mut rules = serde_json::to_value(&argo_role.rules).unwrap();
    rules.as_array_mut().unwrap().push(serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}));
    roles
        .patch(
            "argo-role",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"rules": rules})),
        )
        .await
        .expect("the owner may widen the Role within their own rights");
    let bindings: Api<RoleBinding> = Api::namespaced(owner.clone(), tenant_ns);
    let mut subjects = rendered_of("RoleBinding", "argo-binding")["subjects"].clone();
    subjects.as_array_mut().unwrap().push(
        serde_json::json!({"kind": "ServiceAccount", "name": "owner", "namespace": tenant_ns}),
    );
    bindings
        .patch(
            "argo-binding",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"subjects": subjects})),
        )
        .await
        .expect("the owner may add themselves to the controller's binding");
    let deploys: Api<Deployment> = Api::namespaced(owner.clone(), tenant_ns);
    let loosen = serde_json::json!({"spec": {"template": {"spec": {
        "serviceAccountName": "default",
        "securityContext": {"runAsNonRoot": false},
        "containers": [{"name": "workflow-controller", "image": "attacker/controller:1",
            "securityContext": {"readOnlyRootFilesystem": false, "allowPrivilegeEscalation": true, "runAsNonRoot": false}}]}}}});
    deploys
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &Patch::Strategic(loosen),
        )
        .await
        .expect("the owner may edit the controller Deployment");

    let admin_roles: Api<Role> = Api::namespaced(admin.clone(), tenant_ns);
    let want_rules = rendered_of("Role", "argo-role")["rules"].clone();
    wait_json("the Role's rules reverted", &want_rules, || async {
        serde_json::to_value(admin_roles.get("argo-role").await.ok()?.rules).ok()
    })
    .await;
    let admin_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), tenant_ns);
    let want_subjects = rendered_of("RoleBinding", "argo-binding")["subjects"].clone();
    wait_json(
        "the binding's subjects reverted",
        &want_subjects,
        || async {
            serde_json::to_value(admin_bindings.get("argo-binding").await.ok()?.subjects).ok()
        },
    )
    .await;
    let admin_deploys: Api<Deployment> = Api::namespaced(admin.clone(), tenant_ns);
    let want_pod =
        rendered_of("Deployment", "workflow-controller")["spec"]["template"]["spec"].clone();
    let pick = |pod: &serde_json::Value| {
        let c = &pod["containers"][0];
        serde_json::json!([
            pod["serviceAccountName"],
            pod["securityContext"]["runAsNonRoot"],
            c["image"],
            c["securityContext"]["readOnlyRootFilesystem"],
            c["securityContext"]["allowPrivilegeEscalation"],
            c["securityContext"]["runAsNonRoot"]
        ])
    };
    let want = pick(&want_pod);
    assert_eq!(
        want,
        serde_json::json!([
            "argo",
            true,
            "quay.io/argoproj/workflow-controller:v4.1.2",
            true,
            false,
            true
        ])
    );
    wait_json(
        "the Deployment's identity, image and securityContext reverted",
        &want,
        || async {
            let live =
                serde_json::to_value(admin_deploys.get("workflow-controller").await.ok()?).ok()?;
            Some(pick(&live["spec"]["template"]["spec"]))
        },
    )
    .await;

    // Objects the owner labels as flotilla's, for another namespace and for one that does not
    // exist: flotilla does not act on the other namespace because of them.
    let cms: Api<ConfigMap> = Api::namespaced(owner.clone(), tenant_ns);
    for (name, for_namespace) in [
        ("forged-victim", victim_ns),
        ("forged-ghost", "sec-tenant-ghost"),
    ] {
        let forged = ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        "flotilla".to_string(),
                    ),
                    ("flotilla.dev/instance".to_string(), fleet.instance.clone()),
                    (
                        "flotilla.dev/namespace".to_string(),
                        for_namespace.to_string(),
                    ),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&pp, &forged).await.unwrap();
    }
    // flotilla takes them for its own: the one "for" the victim is not rendered there, so it is
    // pruned; the one for a namespace that does not exist is reaped. Both within the tenant's
    // own namespace, where the owner made them.
    let tenant_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), tenant_ns);
    eventually_within(LONG, "the forged objects removed", || async {
        let left: Vec<String> = tenant_cms
            .list(&Default::default())
            .await
            .ok()?
            .items
            .iter()
            .map(|c| c.name_any())
            .filter(|n| n.starts_with("forged-"))
            .collect();
        left.is_empty().then_some(())
    })
    .await;
    victim_before.assert_kept(&fleet, &admin).await;
    let victim = workers(&admin).get(victim_ns).await.unwrap();
    assert!(
        victim
            .status
            .is_some_and(|s| s.phase != Phase::RenderFailed)
    );
    assert!(absent(&workers(&admin), "sec-tenant-ghost").await);
    delete_namespaces(&admin, &[tenant_ns, victim_ns]).await;
}
