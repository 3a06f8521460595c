//! The bench's settings (from the environment), the flotilla config it runs with, the namespaces
//! it creates and the objects it expects in them, and the LIST that checks they exist.

use crate::cluster;
use flotilla::config::Config;
use flotilla::kinds::Kind;
use flotilla::object::{ObjectKey, Stamped};
use flotilla::ownership;
use flotilla::render::{NamespaceInput, Renderer};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, PartialObjectMeta, Patch};
use kube::api::{PatchParams, PostParams};
use kube::{Client, ResourceExt};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bench's opt-in label (value `on`) and flotilla instance.
pub const LABEL: &str = "bench.flotilla.dev/fleet";
pub const INSTANCE: &str = "bench";
/// Full resync period of the bench's flotilla: at least one falls into the steady-state window.
pub const RESYNC_SECONDS: u64 = 60;
/// The bench's flotilla turns a worker Degraded only after this long (a day, far beyond any
/// run): with no kubelet no controller pod ever runs, so at the default (300 s) every worker
/// would turn Degraded during the run, a status write of a real change at a time no scenario
/// chose (and in the steady-state window, which must see no change at all).
pub const DEGRADED_AFTER_SECONDS: u64 = 86_400;
/// Namespaces created (or labelled) at once by the bench itself.
pub const SETUP_CONCURRENCY: usize = 32;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub struct Bench {
    pub repo: PathBuf,
    pub work: PathBuf,
    pub n: usize,
    pub baselines: bool,
    pub script_sample: usize,
    pub steady_secs: u64,
    pub quiet_max: Duration,
    pub idle_max: Duration,
    pub timeout: Duration,
    pub values: serde_json::Value,
    pub templates: PathBuf,
    /// How the bench's control plane differs from e2e/cluster.sh's defaults (run.sh's knobs).
    pub cluster_said: String,
}

impl Bench {
    /// The settings (see e2e/bench/run.sh), a fresh work dir, and in it a snapshot of the
    /// repository's templates and values, so that edits during the run change nothing.
    pub fn from_env(repo: &Path) -> Bench {
        let n: usize = env_or("N", 500);
        let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-fleet");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let templates = work.join("templates");
        std::fs::create_dir(&templates).unwrap();
        for entry in std::fs::read_dir(repo.join("templates")).unwrap() {
            let entry = entry.unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let text = with_long_progress_deadline(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
            std::fs::write(templates.join(entry.file_name()), text).unwrap();
        }
        let repo_config: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(repo.join("flotilla.yaml")).unwrap())
                .unwrap();
        Bench {
            repo: repo.to_path_buf(),
            work,
            n,
            baselines: env_or("BENCH_BASELINES", 1) != 0,
            script_sample: env_or("BENCH_SCRIPT_SAMPLE", 50).min(n).max(1),
            steady_secs: env_or("BENCH_STEADY_SECONDS", 120),
            // After a cold converge the controller-manager still works through the fleet (the
            // Deployments' ReplicaSets and the bench's ready pods): wait for it, up to this.
            quiet_max: Duration::from_secs(env_or(
                "BENCH_QUIET_MAX_SECONDS",
                300.max(n as u64 / 2),
            )),
            idle_max: Duration::from_secs(env_or("BENCH_IDLE_MAX_SECONDS", 120)),
            timeout: Duration::from_secs(env_or("BENCH_TIMEOUT_SECONDS", 1800)),
            values: repo_config["values"].clone(),
            templates,
            cluster_said: cluster_said(),
        }
    }

    /// A flotilla config for the bench (the snapshot of templates, and `values`) that rolls out
    /// to the whole fleet at once: the bench measures throughput, and its pods never
    /// become ready (no kubelet) unless a scenario marks them so (progressive.rs). So no
    /// namespace may fail for want of ready pods either: a whole-fleet rollout of 10,000 takes
    /// longer than the default progress deadline (600 s), which would stop it part way.
    pub fn config(&self, name: &str, values: &serde_json::Value) -> (PathBuf, Config, Renderer) {
        let all_at_once = serde_json::json!({
            "maxUnavailable": "100%",
            "progressDeadlineSeconds": DEGRADED_AFTER_SECONDS,
        });
        self.config_with(name, values, &all_at_once)
    }

    /// The same with the rollout strategy `rollout`.
    pub fn config_with(
        &self,
        name: &str,
        values: &serde_json::Value,
        rollout: &serde_json::Value,
    ) -> (PathBuf, Config, Renderer) {
        // The reaction's trial namespaces opt out together afterwards: in a fleet under 500
        // they are over the brake's share, which would hold their reaping for an admin.
        let mut rollout = rollout.clone();
        rollout["reapBrake"] = serde_json::json!({"share": "100%"});
        let config = serde_json::json!({
            "selector": format!("{LABEL}=on"),
            "templates": self.templates,
            "namespace": cluster::FLOTILLA_NAMESPACE,
            "instance": INSTANCE,
            "resyncSeconds": RESYNC_SECONDS,
            // apiQps and apiBurst as shipped (no client-side limit): the cold converge is what
            // a new user's install gets.
            "degradedAfterSeconds": DEGRADED_AFTER_SECONDS,
            "leaderElection": {"enabled": true},
            "rollout": rollout,
            "values": values,
        });
        let path = self.work.join(name);
        std::fs::write(&path, config.to_string()).unwrap();
        let loaded = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let renderer = Renderer::load(&loaded).unwrap_or_else(|e| panic!("{e}"));
        (path, loaded, renderer)
    }
}

/// A template as the bench stamps it: a Deployment gets a progress deadline of
/// [`DEGRADED_AFTER_SECONDS`]. Its pods never become ready without a kubelet, so at the default
/// (600 s) the Deployment controller writes every Deployment's status once more, 600 s after
/// it last changed: at N=10,000 a stream of 10,000 writes that kept the cluster from being quiet
/// for 10 minutes after the cold converge, and that fell into whichever scenario came next.
fn with_long_progress_deadline(template: &str) -> Result<String, String> {
    if !template.lines().any(|l| l.trim() == "kind: Deployment") {
        return Ok(template.to_string());
    }
    let spec = template
        .find("\nspec:\n")
        .ok_or("a Deployment template without a top-level `spec:` line")?;
    let at = spec + "\nspec:\n".len();
    let deadline = format!("  progressDeadlineSeconds: {DEGRADED_AFTER_SECONDS}\n");
    Ok(format!("{}{deadline}{}", &template[..at], &template[at..]))
}

/// The controller-manager as run.sh set it up: its client's rate limit.
fn cluster_said() -> String {
    match std::env::var("FLOTILLA_E2E_KCM_ARGS").unwrap_or_default() {
        args if args.is_empty() => "kube-controller-manager at its defaults".to_string(),
        args => format!("kube-controller-manager {args}"),
    }
}

pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

fn opted_in_labels() -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL.to_string(), "on".to_string())])
}

pub fn render(renderer: &Renderer, namespace: &str) -> Vec<Stamped> {
    let input = NamespaceInput {
        name: namespace.to_string(),
        labels: opted_in_labels(),
        annotations: BTreeMap::new(),
        share: None,
    };
    renderer
        .render(&input)
        .unwrap_or_else(|e| panic!("rendering for {namespace}: {e}"))
}

pub fn keys(renderer: &Renderer, namespaces: &[String]) -> Vec<ObjectKey> {
    namespaces
        .iter()
        .flat_map(|ns| render(renderer, ns).into_iter().map(|o| o.key))
        .collect()
}

/// The watches flotilla runs for a fleet stamped with `keys` (src/controller/stores.rs): one
/// on Namespaces, one per stamped kind, one on NamespaceWorkers, one per rendered kind and
/// name (flotilla caps those; the bench's templates render the same names everywhere), and one
/// on Workflows once their CRD is installed (src/controller/workflow_watch.rs).
pub fn flotilla_watches(keys: &[ObjectKey]) -> usize {
    let names: HashSet<(Kind, &str)> = keys.iter().map(|k| (k.kind, k.name.as_str())).collect();
    1 + Kind::ALL.len() + 1 + names.len() + 1
}

pub async fn create_namespaces(client: &Client, names: &[String], opted_in: bool) {
    let api: Api<Namespace> = Api::all(client.clone());
    futures::stream::iter(names)
        .for_each_concurrent(SETUP_CONCURRENCY, |name| {
            let api = api.clone();
            async move {
                let ns = Namespace {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        labels: opted_in.then(opted_in_labels),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                };
                api.create(&PostParams::default(), &ns)
                    .await
                    .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
            }
        })
        .await;
}

pub async fn label_namespace(client: &Client, name: &str, value: Option<&str>) {
    let api: Api<Namespace> = Api::all(client.clone());
    let patch = serde_json::json!({"metadata": {"labels": {LABEL: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {name}: {e}"));
}

/// Lists every stamped kind (label selector, paged) and checks that each of `expected` exists;
/// returns how many of them were found, and with `image`, how many Deployments run it.
pub async fn verify(
    client: &Client,
    expected: &[ObjectKey],
    image: Option<&str>,
) -> (usize, usize) {
    let selector = ownership::watch_selector(INSTANCE);
    let mut live = HashSet::new();
    let mut with_image = 0;
    for kind in Kind::ALL {
        let ar = kind.api_resource();
        let mut params = ListParams::default().labels(&selector).limit(500);
        loop {
            let (items, token) = if kind == Kind::Deployment && image.is_some() {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
                let list = api.list(&params).await.unwrap();
                for d in &list.items {
                    let containers = &d.data["spec"]["template"]["spec"]["containers"];
                    if containers[0]["image"].as_str() == image {
                        with_image += 1;
                    }
                }
                (names_of(&list.items), list.metadata.continue_)
            } else {
                let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &ar);
                let list = api.list(&params).await.unwrap();
                (names_of(&list.items), list.metadata.continue_)
            };
            live.extend(items.into_iter().map(|(namespace, name)| ObjectKey {
                kind,
                namespace,
                name,
            }));
            match token.filter(|t| !t.is_empty()) {
                Some(t) => params = params.continue_token(&t),
                None => break,
            }
        }
    }
    let found = expected.iter().filter(|k| live.contains(*k)).count();
    (found, with_image)
}

fn names_of<K: ResourceExt>(items: &[K]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
        .collect()
}
