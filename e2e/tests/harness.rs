//! Shared set-up: flotilla installed from manifests/, clients, a flotilla process per test, and
//! polling helpers. Each test runs its own flotilla `instance` with its own selector label, so
//! no test can see (or reap) another's objects.

pub use crate::audit::{AuditWindow, FLOTILLA_USER};
pub use crate::common::{client_for, kubectl};
use crate::common::{
    flotilla_command, log_tail, spawn_flotilla, terminate, write_service_account_kubeconfig,
};
use flotilla::kinds::Kind;
use flotilla::ownership;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const FLOTILLA_NAMESPACE: &str = "flotilla-system";

pub struct Env {
    pub admin_kubeconfig: PathBuf,
    pub flotilla_kubeconfig: PathBuf,
    pub repo: PathBuf,
    _dir: tempfile::TempDir,
}

/// Installs flotilla's manifests once per test binary and fetches its ServiceAccount token.
pub fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let admin_kubeconfig = env_admin_kubeconfig();
        assert!(
            admin_kubeconfig.exists(),
            "{} is missing: start the control plane with `e2e/cluster.sh up` (make test does)",
            admin_kubeconfig.display()
        );
        kubectl(
            &admin_kubeconfig,
            &["apply", "-k", repo.join("manifests").to_str().unwrap()],
        );
        // Generated for flotilla.yaml's selector, not for the tests' own (admission_policy.rs).
        crate::admission_policy::remove_as(&admin_kubeconfig);
        let dir = tempfile::tempdir().unwrap();
        let flotilla_kubeconfig = dir.path().join("flotilla.kubeconfig");
        kubeconfig_for("flotilla", &flotilla_kubeconfig);
        Env {
            admin_kubeconfig,
            flotilla_kubeconfig,
            repo,
            _dir: dir,
        }
    })
}

/// A kubeconfig like the admin's, but authenticating with the token of ServiceAccount `account`
/// of flotilla's namespace.
pub fn kubeconfig_for(account: &str, path: &Path) {
    write_kubeconfig(FLOTILLA_NAMESPACE, account, path);
}

fn write_kubeconfig(namespace: &str, account: &str, path: &Path) {
    write_service_account_kubeconfig(&env_admin_kubeconfig(), namespace, account, path);
}

fn env_admin_kubeconfig() -> PathBuf {
    let state = std::env::var("FLOTILLA_E2E_DIR").unwrap_or_else(|_| "/tmp/flotilla-e2e".into());
    PathBuf::from(state).join("admin.kubeconfig")
}

pub async fn admin() -> Client {
    client_for(&env().admin_kubeconfig).await
}

/// Whether no object named `name` exists where `api` looks.
pub async fn absent<K>(api: &Api<K>, name: &str) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap().is_none()
}

/// Polls `check` until it returns Some, or panics naming `what` after 60 s.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(Duration::from_secs(60), what, check).await
}

pub async fn eventually_within<T, F, Fut>(limit: Duration, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One test's flotilla: its instance name, opt-in label, config and templates.
pub struct Fleet {
    pub instance: String,
    pub label: String,
    pub templates: PathBuf,
    pub values: serde_json::Value,
    /// Further config keys (e.g. `degradedAfterSeconds`), merged into the config file.
    pub settings: serde_json::Map<String, serde_json::Value>,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// A fleet using the repository's templates and values, opted in by `e2e.flotilla.dev/<name>=on`.
    pub fn new(name: &str) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let templates = dir.path().join("templates");
        std::fs::create_dir(&templates).unwrap();
        for entry in std::fs::read_dir(env().repo.join("templates")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), templates.join(entry.file_name())).unwrap();
        }
        let repo_config: serde_json::Value = serde_saphyr::from_str(
            &std::fs::read_to_string(env().repo.join("flotilla.yaml")).unwrap(),
        )
        .unwrap();
        let mut settings = serde_json::Map::new();
        settings.insert("overrides".into(), repo_config["overrides"].clone());
        // The whole fleet at once, as before rollouts: most tests change a revision and check
        // every namespace, whose pods never become ready unless a test marks them so. No brake
        // on mass reaping either: tests that opt many namespaces out check the reaping itself.
        // e2e/tests/rollout.rs and live_config.rs set their own strategies.
        settings.insert(
            "rollout".into(),
            serde_json::json!({"maxUnavailable": "100%", "reapBrake": {"share": "100%"}}),
        );
        Fleet {
            instance: format!("e2e-{name}"),
            label: format!("e2e.flotilla.dev/{name}"),
            templates,
            values: repo_config["values"].clone(),
            settings,
            dir,
        }
    }

    /// The same fleet with one more config setting (`resyncSeconds`, `leaderElection`, ...).
    pub fn with(mut self, key: &str, value: serde_json::Value) -> Fleet {
        self.settings.insert(key.into(), value);
        self
    }

    pub fn add_template(&self, file: &str, source: &str) {
        std::fs::write(self.templates.join(file), source).unwrap();
    }

    pub fn remove_template(&self, file: &str) {
        std::fs::remove_file(self.templates.join(file)).unwrap();
    }

    /// The config for the current templates and values, reading the templates from `templates`.
    pub fn config(&self, templates: &Path) -> serde_json::Value {
        let mut config = serde_json::json!({
            "selector": format!("{}=on", self.label),
            "templates": templates,
            "namespace": FLOTILLA_NAMESPACE,
            "instance": self.instance,
            "concurrency": 8,
            "values": self.values,
        });
        if let Some(map) = config.as_object_mut() {
            map.extend(self.settings.clone());
        }
        config
    }

    /// Writes the config file for the current templates and values.
    pub fn config_file(&self) -> PathBuf {
        let config = self.config(&self.templates);
        // Written aside and renamed: a flotilla starting meanwhile (the CLI rewrites this file on
        // every call) must never read it half-written. An empty file is a valid all-defaults
        // config, which once had a restarted flotilla serve the wrong fleet.
        let path = self.dir.path().join("flotilla.yaml");
        let aside = self.dir.path().join("flotilla.yaml.new");
        std::fs::write(&aside, config.to_string()).unwrap();
        std::fs::rename(&aside, &path).unwrap();
        path
    }

    pub fn start(&self) -> Flotilla {
        self.start_as("a", &env().flotilla_kubeconfig)
    }

    /// Starts a replica named `replica`, with the credentials of `kubeconfig`.
    pub fn start_as(&self, replica: &str, kubeconfig: &Path) -> Flotilla {
        let log = self
            .dir
            .path()
            .join(format!("{}-{replica}.log", self.instance));
        let identity = format!("{}-{replica}", self.instance);
        Flotilla::start(&self.config_file(), &log, &identity, kubeconfig)
    }

    /// Starts a replica whose clocks (wall and monotonic) run `offset` (e.g. `+30s`) from the
    /// machine's, by Debian's libfaketime.
    pub fn start_with_clock(&self, replica: &str, kubeconfig: &Path, offset: &str) -> Flotilla {
        self.start_with_faketime(replica, kubeconfig, &[("FAKETIME", offset)])
    }

    /// Starts a replica under Debian's libfaketime, set by `settings` (its environment
    /// variables: `FAKETIME`, or `FAKETIME_TIMESTAMP_FILE` to change it while it runs, ...).
    pub fn start_with_faketime(
        &self,
        replica: &str,
        kubeconfig: &Path,
        settings: &[(&str, &str)],
    ) -> Flotilla {
        const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
        assert!(
            Path::new(LIBFAKETIME).exists(),
            "{LIBFAKETIME} is missing: e2e/deps.sh installs Debian's faketime"
        );
        let log = self
            .dir
            .path()
            .join(format!("{}-{replica}.log", self.instance));
        let identity = format!("{}-{replica}", self.instance);
        let mut cmd = flotilla_command(
            &self.config_file(),
            &log,
            &identity,
            kubeconfig,
            "info,flotilla=debug",
        );
        cmd.env("LD_PRELOAD", LIBFAKETIME)
            .envs(settings.iter().copied());
        Flotilla {
            child: cmd.spawn().expect("flotilla starts"),
            log,
        }
    }

    /// Runs a flotilla subcommand with this fleet's config (as flotilla's own ServiceAccount);
    /// returns exit code and stdout.
    pub fn cli(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(args)
            .arg("--config")
            .arg(self.config_file())
            .env("KUBECONFIG", &env().flotilla_kubeconfig)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.is_empty() {
            eprintln!("flotilla {args:?} stderr:\n{stderr}");
        }
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// `flotilla render` for an opted-in namespace, parsed.
    pub fn render(&self, namespace: &str, annotations: &[(&str, &str)]) -> Vec<serde_json::Value> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_flotilla"));
        cmd.arg("render")
            .arg("--config")
            .arg(self.config_file())
            .args([
                "--namespace",
                namespace,
                "--label",
                &format!("{}=on", self.label),
            ]);
        for (k, v) in annotations {
            cmd.args(["--annotation", &format!("{k}={v}")]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "render: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
    }

    /// Creates a namespace carrying this fleet's opt-in label (value `on`) or not.
    pub async fn namespace(&self, client: &Client, name: &str, opted_in: bool) -> Namespace {
        let mut labels = BTreeMap::new();
        if opted_in {
            labels.insert(self.label.clone(), "on".to_string());
        }
        create_namespace(client, name, labels, BTreeMap::new()).await
    }

    pub fn opt_in_patch(&self, value: Option<&str>) -> serde_json::Value {
        serde_json::json!({"metadata": {"labels": {self.label.clone(): value}}})
    }

    /// Sets this fleet's opt-in label on a namespace to `value`, or removes it (`None`).
    pub async fn set_opt_in(&self, client: &Client, namespace: &str, value: Option<&str>) {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let patch = kube::api::Patch::Merge(self.opt_in_patch(value));
        namespaces
            .patch(namespace, &Default::default(), &patch)
            .await
            .unwrap();
    }

    /// Every object this fleet stamped for `namespace`, of every kind, wherever it lives.
    pub async fn stamped_for(&self, client: &Client, namespace: &str) -> Vec<DynamicObject> {
        let selector = format!(
            "{},{}={namespace}",
            ownership::watch_selector(&self.instance),
            ownership::FOR_NAMESPACE
        );
        let mut all = Vec::new();
        for kind in Kind::ALL {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .unwrap();
            // List items come without their type; put it back for the callers.
            all.extend(list.items.into_iter().map(|mut obj| {
                obj.types = Some(kube::core::TypeMeta {
                    api_version: kind.api_version(),
                    kind: kind.name().into(),
                });
                obj
            }));
        }
        all
    }

    /// The namespaces this fleet has stamped anything for.
    pub async fn stamped_for_any(&self, client: &Client) -> BTreeSet<String> {
        let mut owners = BTreeSet::new();
        for kind in Kind::ALL {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
            let params = ListParams::default().labels(&ownership::watch_selector(&self.instance));
            for obj in api.list_metadata(&params).await.unwrap() {
                owners.extend(
                    obj.metadata
                        .labels
                        .unwrap_or_default()
                        .remove(ownership::FOR_NAMESPACE),
                );
            }
        }
        owners
    }

    /// Waits until exactly the rendered set for `namespace` is stamped: the same objects, each
    /// at the content hash `flotilla render` gives it, and nothing more.
    pub async fn wait_stamped(&self, client: &Client, namespace: &str) -> Vec<DynamicObject> {
        self.wait_stamped_annotated(client, namespace, &[]).await
    }

    pub async fn wait_stamped_annotated(
        &self,
        client: &Client,
        namespace: &str,
        annotations: &[(&str, &str)],
    ) -> Vec<DynamicObject> {
        let want: BTreeSet<Identity> = self
            .render(namespace, annotations)
            .iter()
            .map(identity)
            .collect();
        eventually(
            &format!(
                "exactly the {} rendered objects stamped for {namespace}",
                want.len()
            ),
            || async {
                let have = self.stamped_for(client, namespace).await;
                (stamped_set(&have) == want).then_some(have)
            },
        )
        .await
    }

    pub async fn wait_reaped(&self, client: &Client, namespace: &str) {
        eventually(
            &format!("everything stamped for {namespace} reaped"),
            || async {
                self.stamped_for(client, namespace)
                    .await
                    .is_empty()
                    .then_some(())
            },
        )
        .await
    }
}

/// What identifies a stamped object and its content: kind, namespace, name and the
/// `flotilla.dev/hash` annotation.
pub type Identity = (String, String, String, String);

/// The identity of an object as `flotilla render` prints it or as the API returns it.
pub fn identity(object: &serde_json::Value) -> Identity {
    let meta = &object["metadata"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["kind"]),
        text(&meta["namespace"]),
        text(&meta["name"]),
        text(&meta["annotations"][ownership::HASH]),
    )
}

/// The identities of objects listed by [`Fleet::stamped_for`].
pub fn stamped_set(objects: &[DynamicObject]) -> BTreeSet<Identity> {
    objects
        .iter()
        .map(|o| identity(&serde_json::to_value(o).unwrap()))
        .collect()
}

pub async fn create_namespace(
    client: &Client,
    name: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
) -> Namespace {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    // A namespace left over from an earlier run on the same cluster is deleted first.
    if namespaces.get_opt(name).await.unwrap().is_some() {
        let _ = namespaces.delete(name, &Default::default()).await;
        eventually_within(
            Duration::from_secs(120),
            &format!("stale namespace {name} gone"),
            || async { namespaces.get_opt(name).await.ok()?.is_none().then_some(()) },
        )
        .await;
    }
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap()
}

/// A running `flotilla run`; killed when dropped.
pub struct Flotilla {
    child: Child,
    pub log: PathBuf,
}

impl Flotilla {
    pub fn start(config: &Path, log: &Path, identity: &str, kubeconfig: &Path) -> Flotilla {
        let child = spawn_flotilla(config, log, identity, kubeconfig, "info,flotilla=debug");
        Flotilla {
            child,
            log: log.to_path_buf(),
        }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a log line containing `needle` (e.g. "initial sync complete").
    pub async fn wait_log(&self, needle: &str) {
        eventually(&format!("flotilla to log {needle:?}"), || async {
            self.logs().contains(needle).then_some(())
        })
        .await
    }

    /// SIGKILL: the process dies mid-whatever, as on a node failure or OOM kill.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Where this process serves /metrics (it logs the address it bound).
    pub async fn http_address(&self) -> String {
        eventually("flotilla to log its HTTP address", || async {
            let logs = self.logs();
            let line = logs.lines().find(|l| l.contains("serving /healthz"))?;
            let start = line.find("address=")? + "address=".len();
            Some(line[start..].split_whitespace().next()?.to_string())
        })
        .await
    }

    /// This process's own `/metrics`. Panics if they cannot be fetched: a metric that could
    /// not be read must never count as 0 (or as "not the leader").
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.http_address().await);
        let out = Command::new("curl").args(["-fsS", &url]).output().unwrap();
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One sample of this process's own `/metrics`, which must be there.
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.metrics().await;
        sample_sum(&text, name).unwrap_or_else(|| panic!("{name} is not in:\n{text}"))
    }
    /// Whether this replica leads, as its `flotilla_is_leader` gauge says.
    pub async fn leads(&self) -> bool {
        self.metric("flotilla_is_leader").await == 1.0
    }

    /// SIGSTOP or SIGCONT: the process freezes (as a paused VM or a long GC would) or goes on.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// SIGTERM, as Kubernetes stops a pod, then reap the process.
    pub fn stop(mut self) {
        terminate(&mut self.child, Duration::from_secs(10));
    }
}

impl Drop for Flotilla {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what flotilla said.
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {}:\n{}",
                self.log.display(),
                log_tail(&self.log, 60)
            );
        }
    }
}

/// In Prometheus text, the value of `series` (`name{label="value"}` exactly as exposed), or for
/// a bare `name` the sum over all its label sets; `None` if there is no such sample (a counter
/// family has none until its first increment).
pub fn sample_sum(text: &str, series: &str) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(key, _)| {
            *key == series || (!series.contains('{') && key.split('{').next() == Some(series))
        })
        .filter_map(|(_, value)| value.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// A template placing one object in flotilla's own namespace, outside the namespace it is
/// stamped for: only flotilla can clean such objects up.
pub const OUTSIDE_TEMPLATE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ namespace.name ~ "-fleet-entry" }}
  namespace: {{ flotilla.namespace }}
data:
  namespace: {{ namespace.name }}
"#;

/// What an admin grants flotilla for [`OUTSIDE_TEMPLATE`], whose name is composed from the
/// namespace name and so cannot be listed in the generated ClusterRole: every ConfigMap in
/// flotilla's own namespace (README, Security, says what that costs).
pub fn outside_grant() -> Grant {
    Grant::open_in("outside", Kind::ConfigMap, FLOTILLA_NAMESPACE)
}

/// What an admin adds to flotilla's RBAC for a template beyond the repository's, whose names the
/// generated ClusterRole `flotilla-stamp` does not list: create, patch and delete, for
/// flotilla's ServiceAccount. Revoked when dropped, so that every other test sees flotilla's
/// token as `manifests/` makes it.
pub struct Grant {
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Grant {
    /// Of the objects of `kind` named `names`, in every namespace: a ClusterRole and its
    /// binding, as for a fixed name (the generated ClusterRole's own way).
    pub fn names(id: &str, kind: Kind, names: &[&str]) -> Grant {
        Grant::apply(id, kind, None, Some(names))
    }

    /// Of every object of `kind` in `namespace`: a Role and its binding there, what a name
    /// composed from the namespace name costs.
    pub fn open_in(id: &str, kind: Kind, namespace: &str) -> Grant {
        Grant::apply(id, kind, Some(namespace), None)
    }

    fn apply(id: &str, kind: Kind, namespace: Option<&str>, names: Option<&[&str]>) -> Grant {
        let resource = kind.api_resource();
        let name = format!("e2e-grant-{id}");
        let (role, binding, placed) = match namespace {
            Some(ns) => ("Role", "RoleBinding", format!(", namespace: {ns}")),
            None => ("ClusterRole", "ClusterRoleBinding", String::new()),
        };
        let resource_names = names
            .map(|n| format!("resourceNames: {}", serde_json::to_string(n).unwrap()))
            .unwrap_or_default();
        let manifest = format!(
            r#"apiVersion: rbac.authorization.k8s.io/v1
kind: {role}
metadata: {{name: {name}{placed}}}
rules:
  - apiGroups: ["{group}"]
    resources: [{plural}]
    verbs: [create, patch, delete]
    {resource_names}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {binding}
metadata: {{name: {name}{placed}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role}, name: {name}}}
subjects: [{{kind: ServiceAccount, name: flotilla, namespace: {FLOTILLA_NAMESPACE}}}]
"#,
            group = resource.group,
            plural = resource.plural,
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("grant.yaml");
        std::fs::write(&file, manifest).unwrap();
        kubectl(
            &env().admin_kubeconfig,
            &["apply", "-f", file.to_str().unwrap()],
        );
        // In force once the API server's RBAC cache has it, a moment after the write.
        let probe = names
            .and_then(|n| n.first().copied())
            .unwrap_or("e2e-grant-probe");
        let target = format!("{}/{probe}", resource.plural);
        let start = Instant::now();
        while !can_i(
            FLOTILLA_USER,
            "patch",
            &target,
            namespace.unwrap_or("default"),
        ) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{name} not in force"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Grant { file, _dir: dir }
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        // Not `kubectl()`: a failure here must not panic again during a test's panic.
        let _ = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&env().admin_kubeconfig)
            .args(["delete", "--ignore-not-found", "-f"])
            .arg(&self.file)
            .output();
    }
}

/// Whether `user` may `verb` the `resource` (`configmaps/name`) in `namespace`, as the API
/// server answers the admin impersonating them.
pub fn can_i(user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env().admin_kubeconfig)
        .args([
            "auth", "can-i", verb, resource, "-n", namespace, "--as", user,
        ])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Edits the stamped controller's image as a tenant's `kubectl edit` would (a plain patch
/// under another field manager).
pub async fn tamper_image(client: &Client, namespace: &str, image: &str) {
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), namespace);
    let edit = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "workflow-controller", "image": image}]}}}});
    let patch = kube::api::Patch::Strategic(edit);
    deploys
        .patch("workflow-controller", &Default::default(), &patch)
        .await
        .unwrap();
}

/// Deletes namespaces without waiting (the controller-manager empties them in the background).
pub async fn delete_namespaces(client: &Client, names: &[impl AsRef<str>]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let _ = namespaces.delete(name.as_ref(), &Default::default()).await;
    }
}

/// The same, and waits until they are gone: a big fleet's termination (every object of the
/// rendered names changing) must not overlap the next test's flotilla.
pub async fn delete_namespaces_and_wait(client: &Client, names: &[impl AsRef<str>]) {
    delete_namespaces(client, names).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually_within(Duration::from_secs(180), "the namespaces gone", || async {
        for name in names {
            if !absent(&namespaces, name.as_ref()).await {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// A second ServiceAccount with flotilla's rights, so that the standby's requests can be told
/// apart from the leader's in the audit log. Its username:
pub const STANDBY_USER: &str = "system:serviceaccount:flotilla-system:flotilla-standby";

/// Two replicas of a slow fleet (5 requests a second) caught in the middle of stamping
/// namespaces, with writes waiting for the rate limit and in flight: a leader as flotilla's
/// ServiceAccount and a standby as [`STANDBY_USER`].
pub struct Busy {
    pub fleet: Fleet,
    pub names: Vec<String>,
    pub leader: Flotilla,
    pub standby: Flotilla,
    /// Opened before the namespaces were opted in.
    pub audit: AuditWindow,
    pub dir: tempfile::TempDir,
}

/// Fleet `name` with a lease of `lease` seconds and `count` namespaces `name-0`...: the leader
/// leads, the standby's caches are synced, then the namespaces are opted in; returns once the
/// leader has created objects.
pub async fn busy_leader(client: &Client, name: &str, lease: u64, count: usize) -> Busy {
    let fleet = Fleet::new(name)
        .with(
            "leaderElection",
            serde_json::json!({"leaseDurationSeconds": lease}),
        )
        .with("apiQps", 5.into())
        .with("apiBurst", 5.into());
    let names: Vec<String> = (0..count).map(|i| format!("{name}-{i}")).collect();
    for name in &names {
        fleet.namespace(client, name, false).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let standby_config = standby_kubeconfig(dir.path());
    let leader = fleet.start_as("leader", &env().flotilla_kubeconfig);
    eventually("the first replica to lead", || async {
        leader.leads().await.then_some(())
    })
    .await;
    let standby = fleet.start_as("standby", &standby_config);
    standby.wait_log("caches synced").await;
    let audit = AuditWindow::open();
    for name in &names {
        fleet.set_opt_in(client, name, Some("on")).await;
    }
    leader.wait_log("created").await;
    Busy {
        fleet,
        names,
        leader,
        standby,
        audit,
        dir,
    }
}

/// A kubeconfig for [`STANDBY_USER`], written into `dir`.
pub fn standby_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let manifest = format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: flotilla-standby}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flotilla}}
subjects: [{{kind: ServiceAccount, name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: flotilla-standby-stamp}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flotilla-stamp}}
subjects: [{{kind: ServiceAccount, name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: flotilla-leader-election}}
subjects: [{{kind: ServiceAccount, name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: flotilla-standby-revisions, namespace: {FLOTILLA_NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: flotilla-revisions}}
subjects: [{{kind: ServiceAccount, name: flotilla-standby, namespace: {FLOTILLA_NAMESPACE}}}]
"#
    );
    let file = dir.join("standby.yaml");
    std::fs::write(&file, manifest).unwrap();
    kubectl(
        &env().admin_kubeconfig,
        &["apply", "-f", file.to_str().unwrap()],
    );
    let kubeconfig = dir.join("standby.kubeconfig");
    kubeconfig_for("flotilla-standby", &kubeconfig);
    kubeconfig
}

/// The bearer token of a kubeconfig written by [`kubeconfig_for`] (flotilla's own, for
/// `env().flotilla_kubeconfig`): what must never show up in a log.
pub fn kubeconfig_token(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    let token = parsed["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default();
    assert!(token.len() > 20, "no token in {}", kubeconfig.display());
    token.to_string()
}

// ---- Helpers of the security suite (e2e/tests/security/) that need the test binary's
// private state. ----

/// A kubeconfig like the admin's, authenticating as ServiceAccount `namespace/account` (which
/// must exist) with the token the controller-manager minted for it; written into the test
/// binary's temporary directory.
pub fn kubeconfig_for_account(namespace: &str, account: &str) -> PathBuf {
    let path = env()
        ._dir
        .path()
        .join(format!("{namespace}-{account}.kubeconfig"));
    write_kubeconfig(namespace, account, &path);
    path
}

/// Events about the object with `uid` (of `kind`) with `reason`.
pub async fn events(client: &kube::Client, kind: &str, uid: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| {
            let regarding = &e.involved_object;
            e.reason.as_deref() == Some(reason)
                && regarding.kind.as_deref() == Some(kind)
                && regarding.uid.as_deref() == Some(uid)
        })
        .collect()
}

/// Starts from no Fleet and no revisions of `instance` (an earlier run of the suite on this
/// control plane leaves them), so that its revisions are numbered 1, 2, 3 …
pub async fn forget_revisions(client: &kube::Client, instance: &str) {
    let fleets: Api<flotilla::rollout::fleet::Fleet> = Api::all(client.clone());
    let _ = fleets.delete(instance, &DeleteParams::default()).await;
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    let params = ListParams::default().labels(&format!("flotilla.dev/instance={instance}"));
    let _ = revisions
        .delete_collection(&DeleteParams::default(), &params)
        .await;
}

/// The Fleet of `instance`, if there is one.
pub async fn fleet_object(
    client: &kube::Client,
    instance: &str,
) -> Option<flotilla::rollout::fleet::Fleet> {
    Api::all(client.clone()).get_opt(instance).await.ok()?
}
