//! `make bench`: how fast flotilla converges a fleet of N namespaces on a real control plane
//! (e2e/cluster.sh on ports of its own), against two baselines measured in the same run:
//!
//! - **limit**: a bare client that server-side applies exactly the objects flotilla renders, with
//!   flotilla's concurrency and identity, and does nothing else (no watches, no reads);
//! - **script**: `flotilla render | kubectl apply --server-side -f -`, one namespace after the
//!   other, as admins do without flotilla (on a sample, extrapolated to N).
//!
//! Then flotilla itself: cold converge, steady state (with a full resync in the window), the
//! reaction to one more opt-in, a values rollout (restart with a new image), and a burst of N
//! new opted-in namespaces. Request counts per verb come from the API server's audit log.
//!
//! Run with `make bench` (N=500) or `N=2000 make bench`; see e2e/bench/run.sh.

mod audit;
mod cluster;
#[path = "../common.rs"]
mod common;
mod fleet_view;
mod metrics;
mod procstat;
mod report;
mod tracker;

use audit::{Actor, AuditTail};
use cluster::{Cluster, DownOnDrop, Flotilla};
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
use report::{Row, Target};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tracker::{Tracker, count_present};

/// The bench's opt-in label (value `on`) and flotilla instance.
const LABEL: &str = "bench.flotilla.dev/fleet";
const INSTANCE: &str = "bench";
const REACTION_TRIALS: usize = 50;
const LIMIT: &str = "limit (bare SSA client)";
const LIMIT_ROLLOUT: &str = "limit rollout";
const LIMIT_VIEW: &str = "limit + fleet view";
const SCRIPT: &str = "script (render|kubectl)";
/// Marks a scenario during which other processes took a share of the machine.
const DISTURBED: &str = " <- OTHER PROCESSES TOOK CPU: this result is disturbed";
/// Full resync period of the bench's flotilla: at least one falls into the steady-state window.
const RESYNC_SECONDS: u64 = 60;
/// Namespaces created (or labelled) at once by the bench itself.
const SETUP_CONCURRENCY: usize = 32;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Bench {
    repo: PathBuf,
    work: PathBuf,
    n: usize,
    script_sample: usize,
    steady_secs: u64,
    quiet_max: Duration,
    idle_max: Duration,
    timeout: Duration,
    values: serde_json::Value,
    templates: PathBuf,
}

impl Bench {
    /// A flotilla config for the bench: the repository's templates (a snapshot) and values.
    fn config(&self, name: &str, values: &serde_json::Value) -> (PathBuf, Config, Renderer) {
        let config = serde_json::json!({
            "selector": format!("{LABEL}=on"),
            "templates": self.templates,
            "namespace": cluster::FLOTILLA_NAMESPACE,
            "instance": INSTANCE,
            "resyncSeconds": RESYNC_SECONDS,
            "values": values,
        });
        let path = self.work.join(name);
        std::fs::write(&path, config.to_string()).unwrap();
        let loaded = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let renderer = Renderer::load(&loaded).unwrap_or_else(|e| panic!("{e}"));
        (path, loaded, renderer)
    }
}

/// Adds a scenario's row to the table, and says how it went as soon as it is known.
fn record(rows: &mut Vec<Row>, row: Row) {
    eprintln!("bench: {}: {:.3} s", row.scenario, row.seconds);
    rows.push(row);
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

fn opted_in_labels() -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL.to_string(), "on".to_string())])
}

fn render(renderer: &Renderer, namespace: &str) -> Vec<Stamped> {
    let input = NamespaceInput {
        name: namespace.to_string(),
        labels: opted_in_labels(),
        annotations: BTreeMap::new(),
    };
    renderer
        .render(&input)
        .unwrap_or_else(|e| panic!("rendering for {namespace}: {e}"))
}

fn keys(renderer: &Renderer, namespaces: &[String]) -> Vec<ObjectKey> {
    namespaces
        .iter()
        .flat_map(|ns| render(renderer, ns).into_iter().map(|o| o.key))
        .collect()
}

async fn create_namespaces(client: &Client, names: &[String], opted_in: bool) {
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

async fn label_namespace(client: &Client, name: &str, value: Option<&str>) {
    let api: Api<Namespace> = Api::all(client.clone());
    let patch = serde_json::json!({"metadata": {"labels": {LABEL: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {name}: {e}"));
}

/// Lists every stamped kind (label selector, paged) and checks that each of `expected` exists;
/// returns how many of them were found, and with `image`, how many Deployments run it.
async fn verify(client: &Client, expected: &[ObjectKey], image: Option<&str>) -> (usize, usize) {
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
                let keys: Vec<_> = list
                    .items
                    .iter()
                    .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
                    .collect();
                (keys, list.metadata.continue_)
            } else {
                let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &ar);
                let list = api.list(&params).await.unwrap();
                let keys: Vec<_> = list
                    .items
                    .iter()
                    .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
                    .collect();
                (keys, list.metadata.continue_)
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

/// Who was busy during a scenario: the control plane's processes, flotilla, the machine as a
/// whole (other processes on it, say a build, make a result worthless), and where the API
/// server's request time went.
struct Probe {
    procs: Vec<(&'static str, u32, f64)>,
    own0: f64,
    machine: procstat::MachineCpu,
    latencies: metrics::Latencies,
}

fn control_plane_pids() -> Vec<(&'static str, u32)> {
    let state = cluster::state_dir();
    ["kube-apiserver", "etcd", "kube-controller-manager"]
        .into_iter()
        .filter_map(|name| {
            let pid = std::fs::read_to_string(state.join(format!("{name}.pid"))).ok()?;
            Some((name, pid.trim().parse().ok()?))
        })
        .collect()
}

impl Probe {
    async fn start(client: &Client) -> Probe {
        let procs = control_plane_pids()
            .into_iter()
            .map(|(name, pid)| (name, pid, procstat::cpu_seconds(pid).unwrap_or(0.0)))
            .collect();
        Probe {
            procs,
            own0: procstat::own_cpu_seconds(),
            latencies: metrics::Latencies::read(client).await,
            machine: procstat::MachineCpu::read(),
        }
    }

    /// Also counts a flotilla process (started now, or running: its CPU from now on).
    fn flotilla(&mut self, pid: u32, started_now: bool) {
        let cpu0 = if started_now {
            0.0
        } else {
            procstat::cpu_seconds(pid).unwrap_or(0.0)
        };
        self.procs.push(("flotilla", pid, cpu0));
    }

    /// Call right at the end of the scenario's window of `seconds`.
    async fn finish(&self, client: &Client, seconds: f64) -> String {
        let machine = procstat::MachineCpu::read();
        let (busy, total) = machine.since(&self.machine);
        let steal = machine.steal_since(&self.machine);
        let latencies = metrics::Latencies::read(client)
            .await
            .since(&self.latencies);
        let mut ours = procstat::own_cpu_seconds() - self.own0;
        let mut parts = Vec::new();
        for (name, pid, cpu0) in &self.procs {
            let cpu = procstat::cpu_seconds(*pid).unwrap_or(0.0) - cpu0;
            ours += cpu;
            parts.push(format!(
                "{name} {cpu:.1} s ({:.0}%)",
                100.0 * cpu / seconds.max(0.001)
            ));
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let others = (busy - ours).max(0.0);
        let warning = if others > 0.1 * total { DISTURBED } else { "" };
        format!(
            "CPU: {}, bench {:.1} s; machine busy {:.0}% of {cores} cores, steal {:.0}%, \
             other processes {:.0}%{warning}; {latencies}",
            parts.join(", "),
            procstat::own_cpu_seconds() - self.own0,
            100.0 * busy / total.max(0.001),
            100.0 * steal / total.max(0.001),
            100.0 * others / total.max(0.001),
        )
    }
}

/// Waits (at most `max`) until processes other than the bench's own use under 10% of the
/// machine for 3 s, so that a build or test run elsewhere does not distort a timed scenario.
async fn wait_idle(max: Duration, extra: &[u32]) -> String {
    let start = Instant::now();
    let mut pids: Vec<u32> = control_plane_pids().into_iter().map(|(_, p)| p).collect();
    pids.extend_from_slice(extra);
    let ours = |pids: &[u32]| -> f64 {
        procstat::own_cpu_seconds()
            + pids
                .iter()
                .filter_map(|p| procstat::cpu_seconds(*p))
                .sum::<f64>()
    };
    loop {
        let (m0, o0) = (procstat::MachineCpu::read(), ours(&pids));
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (busy, total) = procstat::MachineCpu::read().since(&m0);
        let others = (busy - (ours(&pids) - o0)).max(0.0) / total.max(0.001);
        if others < 0.1 {
            return String::new();
        }
        if start.elapsed() >= max {
            let msg = format!(
                "machine not idle after {:.0} s (other processes {:.0}%); measuring anyway",
                start.elapsed().as_secs_f64(),
                100.0 * others
            );
            eprintln!("bench: {msg}");
            return format!("{msg}; ");
        }
    }
}

/// Waits until the API server has served no write request for 5 s (to any resource but Leases:
/// flotilla renews its leader Lease all the time), or `max`. Returns the time waited and whether
/// it got quiet.
async fn wait_quiet(client: &Client, max: Duration) -> (f64, bool) {
    let start = Instant::now();
    let writes = || async { metrics::total(&metrics::writes_except(client, &["leases"]).await) };
    let mut last = writes().await;
    let mut still_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = writes().await;
        if now != last {
            last = now;
            still_since = Instant::now();
        }
        if still_since.elapsed() >= Duration::from_secs(5) {
            return (start.elapsed().as_secs_f64(), true);
        }
        if start.elapsed() >= max {
            return (start.elapsed().as_secs_f64(), false);
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A control plane for the baselines: fresh, with the fleet's namespaces and `extra` ones (as
/// many as flotilla's phase has: fleet + reaction, so that all start alike), watched by the
/// bench's tracker.
struct LimitRun<'a> {
    bench: &'a Bench,
    config: &'a Config,
    names: &'a [String],
    cluster: Cluster,
    tracker: Tracker,
    audit: AuditTail,
}

impl<'a> LimitRun<'a> {
    async fn start(
        bench: &'a Bench,
        config: &'a Config,
        names: &'a [String],
        extra: &[String],
    ) -> LimitRun<'a> {
        let cluster = Cluster::fresh(&bench.repo, &bench.work).await;
        create_namespaces(&cluster.admin, names, true).await;
        create_namespaces(&cluster.admin, extra, true).await;
        let tracker = Tracker::start(&cluster.admin, INSTANCE).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let audit = AuditTail::new(cluster.audit_log.clone());
        LimitRun {
            bench,
            config,
            names,
            cluster,
            tracker,
            audit,
        }
    }

    fn down(self) {
        drop(self.tracker);
        self.cluster.down();
    }
}

/// The limit baseline: exactly flotilla's objects, server-side applied with flotilla's field
/// manager, identity and concurrency (namespaces at once; objects of one namespace in order).
/// Run once to create the fleet, and once more with the rollout's values, to update it. Done
/// when every apply has returned and `tracker` (the same observer flotilla's phase has, with the
/// same watches loading the API server) has seen every object at its revision.
async fn limit_baseline(
    run: &mut LimitRun<'_>,
    scenario: &'static str,
    renderer: &Renderer,
    with_view: bool,
) -> Row {
    let LimitRun {
        bench,
        config,
        names,
        ref cluster,
        ref tracker,
        ref mut audit,
    } = *run;
    let fleet: Vec<Vec<Stamped>> = names.iter().map(|ns| render(renderer, ns)).collect();
    let expected: Vec<ObjectKey> = fleet.iter().flatten().map(|o| o.key.clone()).collect();
    let params = PatchParams::apply(&config.field_manager).force();
    let errors = AtomicUsize::new(0);
    let idle = wait_idle(bench.idle_max, &[]).await;
    audit.take();
    let usage = procstat::Usage::start(std::process::id());
    let probe = Probe::start(&cluster.admin).await;
    let revision = renderer.revision().to_string();
    let t0 = Instant::now();
    futures::stream::iter(&fleet)
        .for_each_concurrent(config.concurrency as usize, |objects| {
            let (params, errors, revision) = (&params, &errors, &revision);
            async move {
                for object in objects {
                    let api: Api<DynamicObject> = Api::namespaced_with(
                        cluster.flotilla.clone(),
                        &object.key.namespace,
                        &object.key.kind.api_resource(),
                    );
                    let mut tries = 0;
                    while let Err(e) = api
                        .patch(&object.key.name, params, &Patch::Apply(&object.body))
                        .await
                    {
                        tries += 1;
                        errors.fetch_add(1, Ordering::Relaxed);
                        assert!(tries < 5, "{scenario}: applying {}: {e}", object.key);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                if let (true, Some(first)) = (with_view, objects.first()) {
                    let ns = &first.key.namespace;
                    let (client, manager) = (&cluster.flotilla, &config.field_manager);
                    let write = fleet_view::write(client, manager, INSTANCE, ns, objects, revision);
                    if let Err(e) = write.await {
                        panic!("{scenario}: the fleet view of {ns}: {e}");
                    }
                }
            }
        })
        .await;
    let seen = tracker
        .wait_all(
            scenario,
            bench.timeout,
            Duration::from_millis(50),
            &expected,
            Some(&revision),
        )
        .await;
    let seconds = (seen - t0).as_secs_f64();
    let cp = probe.finish(&cluster.admin, seconds).await;
    let (cpu, _) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, _) = verify(&cluster.admin, &expected, None).await;
    assert_eq!(found, expected.len(), "{scenario}: objects missing");
    Row {
        scenario,
        n: bench.n,
        objects: expected.len(),
        seconds,
        throughput: true,
        rss_mib: None,
        cpu_s: cpu,
        verbs: window.verbs_of(Actor::Flotilla),
        notes: vec![
            format!(
                "{} applies{}, {} namespaces at once, objects of a namespace in order, as flotilla's SA; \
                 {} errors retried; CPU s is the bench process's; {idle}{cp}",
                expected.len(),
                if with_view {
                    " and per namespace a NamespaceWorker create, its status and an Event after its objects"
                } else {
                    ""
                },
                config.concurrency,
                errors.load(Ordering::Relaxed)
            ),
            format!("verified by LIST: {found}/{} objects", expected.len()),
        ],
    }
}

/// What admins do without flotilla: render and `kubectl apply --server-side`, one namespace
/// after the other. Run on a sample and extrapolated to N.
async fn script_baseline(
    bench: &Bench,
    cluster: &Cluster,
    config_path: &Path,
    names: &[String],
    per_namespace: usize,
    audit: &mut AuditTail,
) -> Row {
    let cache = bench.work.join("kubectl-cache");
    let kubeconfig = cluster.admin_kubeconfig.to_str().unwrap();
    let cache = cache.to_str().unwrap();
    // An admin's discovery cache is warm; so is this one before the clock starts.
    common::kubectl(
        &cluster.admin_kubeconfig,
        &["--cache-dir", cache, "api-resources"],
    );
    let script = r#"set -euo pipefail
"$0" render --config "$1" --namespace "$2" --label "$3" |
  kubectl --kubeconfig "$4" --cache-dir "$5" apply --server-side -f - >/dev/null"#;
    let idle = wait_idle(bench.idle_max, &[]).await;
    audit.take();
    let probe = Probe::start(&cluster.admin).await;
    let me = std::process::id();
    let cpu0 = procstat::children_cpu_seconds(me).unwrap_or(0.0);
    let t0 = Instant::now();
    for ns in names {
        let status = Command::new("bash")
            .args(["-c", script, env!("CARGO_BIN_EXE_flotilla")])
            .arg(config_path)
            .args([ns, &format!("{LABEL}=on"), kubeconfig, cache])
            .status()
            .expect("bash runs");
        assert!(status.success(), "script baseline failed for {ns}");
    }
    let sample_seconds = t0.elapsed().as_secs_f64();
    let cp = probe.finish(&cluster.admin, sample_seconds).await;
    let cpu = procstat::children_cpu_seconds(me).map(|c| c - cpu0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let per_ns = sample_seconds / names.len() as f64;
    let scale = bench.n as f64 / names.len() as f64;
    let verbs: BTreeMap<String, u64> = window
        .verbs_of(Actor::Kubectl)
        .into_iter()
        .map(|(v, n)| (v, (n as f64 * scale).round() as u64))
        .collect();
    Row {
        scenario: SCRIPT,
        n: bench.n,
        objects: per_namespace * bench.n,
        seconds: per_ns * bench.n as f64,
        throughput: true,
        rss_mib: None,
        cpu_s: cpu.map(|c| c * scale),
        verbs,
        notes: vec![
            format!(
                "EXTRAPOLATED: measured {} namespaces in {sample_seconds:.1} s ({:.0} ms each), x{scale:.1} \
                 to N={}; CPU s and requests likewise scaled (kubectl + flotilla render processes)",
                names.len(),
                per_ns * 1000.0,
                bench.n
            ),
            format!("{idle}{cp}"),
        ],
    }
}

/// Removes terminal colour codes (flotilla's text logs have them, also in a file).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn initial_sync_elapsed(log: &Path) -> Option<String> {
    let text = strip_ansi(&std::fs::read_to_string(log).ok()?);
    let line = text.lines().find(|l| l.contains("initial sync complete"))?;
    let start = line.find("elapsed=")? + "elapsed=".len();
    Some(line[start..].split_whitespace().next()?.to_string())
}

#[tokio::main]
async fn main() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    cluster::state_dir();
    let n: usize = env_or("N", 500);
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-fleet");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let _down = DownOnDrop(repo.clone());
    cluster::stop_everything_on_signal(repo.clone());

    // A snapshot of the templates and values, so that edits during the run change nothing.
    let templates = work.join("templates");
    std::fs::create_dir(&templates).unwrap();
    for entry in std::fs::read_dir(repo.join("templates")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), templates.join(entry.file_name())).unwrap();
    }
    let repo_config: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo.join("flotilla.yaml")).unwrap())
            .unwrap();
    let bench = Bench {
        repo: repo.clone(),
        work: work.clone(),
        n,
        script_sample: env_or("BENCH_SCRIPT_SAMPLE", 50).min(n).max(1),
        steady_secs: env_or("BENCH_STEADY_SECONDS", 120),
        // kube-controller-manager's token controller mints ~7 ServiceAccount tokens a second
        // (its client is rate limited); 3 ServiceAccounts per namespace keep it busy for a while.
        quiet_max: Duration::from_secs(env_or("BENCH_QUIET_MAX_SECONDS", 300.max(n as u64 / 2))),
        idle_max: Duration::from_secs(env_or("BENCH_IDLE_MAX_SECONDS", 120)),
        timeout: Duration::from_secs(env_or("BENCH_TIMEOUT_SECONDS", 1800)),
        values: repo_config["values"].clone(),
        templates,
    };
    let (config_path, config, renderer) = bench.config("flotilla.yaml", &bench.values);
    // The rollout: the same, with a new controller image.
    let mut values = bench.values.clone();
    let new_image = format!(
        "{}-bench-rollout",
        values["controllerImage"].as_str().unwrap_or("image")
    );
    values["controllerImage"] = new_image.clone().into();
    let (config_b, _, renderer_b) = bench.config("flotilla-rollout.yaml", &values);
    let per_namespace = render(&renderer, "probe").len();
    eprintln!(
        "bench: N={n}, {per_namespace} objects per namespace, concurrency {}, work dir {}",
        config.concurrency,
        work.display()
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    let fleet = names("fleet", n);

    // ---- Phase 1, fresh control planes: the baselines (BENCH_BASELINES=0 skips them, for
    // quicker iterations on flotilla itself).
    if env_or("BENCH_BASELINES", 1) != 0 {
        let script_names = names("script", bench.script_sample);
        // The limit for flotilla's whole output, stamped objects and fleet view, on a control
        // plane of its own: its objects must be new.
        let mut run = LimitRun::start(&bench, &config, &fleet, &script_names).await;
        eprintln!("bench: limit baseline with the fleet view");
        record(
            &mut rows,
            limit_baseline(&mut run, LIMIT_VIEW, &renderer, true).await,
        );
        run.down();

        let mut run = LimitRun::start(&bench, &config, &fleet, &script_names).await;
        eprintln!("bench: limit baseline");
        record(
            &mut rows,
            limit_baseline(&mut run, LIMIT, &renderer, false).await,
        );
        eprintln!("bench: limit baseline, rollout");
        record(
            &mut rows,
            limit_baseline(&mut run, LIMIT_ROLLOUT, &renderer_b, false).await,
        );
        eprintln!(
            "bench: script baseline on {} namespaces",
            script_names.len()
        );
        record(
            &mut rows,
            script_baseline(
                &bench,
                &run.cluster,
                &config_path,
                &script_names,
                per_namespace,
                &mut run.audit,
            )
            .await,
        );
        run.down();
    }

    // ---- Phase 2, a fresh control plane: flotilla.
    let cluster = Cluster::fresh(&bench.repo, &work).await;
    let react = names("react", REACTION_TRIALS);
    create_namespaces(&cluster.admin, &fleet, true).await;
    create_namespaces(&cluster.admin, &react, false).await;
    let tracker = Tracker::start(&cluster.admin, INSTANCE).await;
    let fleet_keys = keys(&renderer, &fleet);
    let fleet_deployments: Vec<ObjectKey> = fleet_keys
        .iter()
        .filter(|k| k.kind == Kind::Deployment)
        .cloned()
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut audit = AuditTail::new(cluster.audit_log.clone());
    let big = Duration::from_millis(50);

    // Cold converge.
    eprintln!("bench: cold converge");
    let idle = wait_idle(bench.idle_max, &[]).await;
    audit.take();
    let mut probe = Probe::start(&cluster.admin).await;
    let mut flotilla = Flotilla::start(&cluster, &config_path, &work.join("flotilla-1.log"));
    probe.flotilla(flotilla.pid(), true);
    let usage = procstat::Usage::since_start(flotilla.pid());
    let t_deploy = tracker
        .wait_all(
            "cold converge",
            bench.timeout,
            big,
            &fleet_deployments,
            None,
        )
        .await;
    flotilla.assert_running();
    let t_all = tracker
        .wait_all("cold converge", bench.timeout, big, &fleet_keys, None)
        .await;
    let cold_seconds = (t_all - flotilla.started).as_secs_f64();
    let cp_cold = probe.finish(&cluster.admin, cold_seconds).await;
    let (cpu, rss) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, _) = verify(&cluster.admin, &fleet_keys, None).await;
    assert_eq!(found, fleet_keys.len(), "cold converge: objects missing");
    record(
        &mut rows,
        Row {
            scenario: "flotilla cold converge",
            n,
            objects: fleet_keys.len(),
            seconds: cold_seconds,
            throughput: true,
            rss_mib: rss,
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes: vec![
                format!(
                    "from process start; all Deployments (applied last) at {:.3} s, all {} objects at {cold_seconds:.3} s; \
                 flotilla logged 'initial sync complete' after {}",
                    (t_deploy - flotilla.started).as_secs_f64(),
                    fleet_keys.len(),
                    initial_sync_elapsed(&flotilla.log).unwrap_or_else(|| "-".into())
                ),
                format!(
                    "verified by LIST: {found}/{}; requests counted until 1 s after convergence; {idle}{cp_cold}",
                    fleet_keys.len()
                ),
            ],
        },
    );

    // Steady state, with at least one full resync in the window.
    eprintln!(
        "bench: steady state: waiting for a quiet cluster (at most {} s)",
        bench.quiet_max.as_secs()
    );
    let (waited, quiet) = wait_quiet(&cluster.admin, bench.quiet_max).await;
    eprintln!("bench: steady state: {} s window", bench.steady_secs);
    audit.take();
    let m0 = metrics::writes(&cluster.admin, Some(&metrics::STAMPED_AND_NAMESPACES)).await;
    let usage = procstat::Usage::start(flotilla.pid());
    let mut probe = Probe::start(&cluster.admin).await;
    probe.flotilla(flotilla.pid(), false);
    let (log0, w0) = (flotilla.log_len(), Instant::now());
    tokio::time::sleep(Duration::from_secs(bench.steady_secs)).await;
    let (log1, w1) = (flotilla.log_len(), Instant::now());
    let cp_steady = probe.finish(&cluster.admin, (w1 - w0).as_secs_f64()).await;
    let m1 = metrics::writes(&cluster.admin, Some(&metrics::STAMPED_AND_NAMESPACES)).await;
    let (cpu, rss) = usage.read();
    flotilla.assert_running();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let apiserver_writes = metrics::delta(&m1, &m0);
    // The target is about what flotilla stamps (and namespaces); its other writes, such as
    // renewing its leader Lease, are listed apart.
    let flotilla_writes = window.writes_to(Actor::Flotilla, &metrics::STAMPED_AND_NAMESPACES);
    let resyncs: Vec<String> = (1..)
        .map(|k| flotilla.started + Duration::from_secs(k * RESYNC_SECONDS))
        .take_while(|t| *t < w1)
        .filter(|t| *t >= w0)
        .map(|t| format!("+{:.0} s", (t - w0).as_secs_f64()))
        .collect();
    let in_sync = flotilla.count_log(log0, log1, "in sync");
    record(
        &mut rows,
        Row {
            scenario: "flotilla steady state",
            n,
            objects: fleet_keys.len(),
            seconds: (w1 - w0).as_secs_f64(),
            throughput: false,
            rss_mib: rss,
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes: vec![
                format!(
                    "writes by flotilla to stamped kinds + namespaces (audit): {flotilla_writes}; all its writes: {}; \
                 API server writes to stamped kinds + namespaces \
                 (apiserver_request_total): {} ({})",
                    window.describe_writes(Actor::Flotilla),
                    metrics::total(&apiserver_writes),
                    report::verbs(&apiserver_writes),
                ),
                format!(
                    "writes by kube-controller-manager in the window (audit): {} ({})",
                    window.writes_of(Actor::ControllerManager),
                    window.describe_writes(Actor::ControllerManager)
                ),
                format!(
                    "cluster {} after waiting {waited:.0} s; full resync (every {RESYNC_SECONDS} s) at {} into the window; \
                 {in_sync} 'in sync' reconciles logged in the window; {}",
                    if quiet {
                        "quiet (no writes but Lease renewals for 5 s)"
                    } else {
                        "NOT quiet (BENCH_QUIET_MAX_SECONDS reached)"
                    },
                    if resyncs.is_empty() {
                        "-".to_string()
                    } else {
                        resyncs.join(", ")
                    },
                    cp_steady
                ),
            ],
        },
    );

    // Reaction: one more namespace opts in, in a fleet of N.
    // Trials spread over one full resync period, so that one of them meets the resync (as some
    // opt-ins in a real cluster do) and p99 is not a matter of luck.
    let spacing = Duration::from_secs(RESYNC_SECONDS) / REACTION_TRIALS as u32;
    eprintln!(
        "bench: reaction, {REACTION_TRIALS} trials, one every {:.1} s",
        spacing.as_secs_f64()
    );
    let idle = wait_idle(bench.idle_max, &[flotilla.pid()]).await;
    audit.take();
    let usage = procstat::Usage::start(flotilla.pid());
    let mut probe = Probe::start(&cluster.admin).await;
    probe.flotilla(flotilla.pid(), false);
    let t_trials = Instant::now();
    let mut latencies = Vec::new();
    let small = Duration::from_millis(1);
    for ns in &react {
        let keys = keys(&renderer, std::slice::from_ref(ns));
        let t0 = Instant::now();
        label_namespace(&cluster.admin, ns, Some("on")).await;
        let t = tracker
            .wait_all(ns, Duration::from_secs(60), small, &keys, None)
            .await;
        latencies.push((t - t0).as_secs_f64());
        let next = t0 + spacing;
        tokio::time::sleep(next.saturating_duration_since(Instant::now())).await;
    }
    let cp_reaction = probe
        .finish(&cluster.admin, t_trials.elapsed().as_secs_f64())
        .await;
    let (cpu, rss) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let mut by_latency: Vec<(f64, &String)> = latencies.iter().copied().zip(&react).collect();
    by_latency.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest = by_latency
        .iter()
        .take(3)
        .map(|(l, ns)| format!("{ns} {:.0} ms", l * 1000.0))
        .collect::<Vec<_>>()
        .join(", ");
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    let (p50, p99, max) = (
        percentile(&sorted, 50.0),
        percentile(&sorted, 99.0),
        sorted[sorted.len() - 1],
    );
    record(
        &mut rows,
        Row {
            scenario: "flotilla reaction",
            n,
            objects: per_namespace,
            seconds: p50,
            throughput: false,
            rss_mib: rss,
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes: vec![
                format!(
                    "label patch -> all {per_namespace} objects seen by watch; {REACTION_TRIALS} trials over one resync \
                 period ({RESYNC_SECONDS} s): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms, min {:.0} ms \
                 (seconds column: p50); slowest trials: {}",
                    p50 * 1000.0,
                    p99 * 1000.0,
                    max * 1000.0,
                    sorted[0] * 1000.0,
                    slowest
                ),
                format!("{idle}{cp_reaction}"),
            ],
        },
    );
    // Back to a fleet of exactly N for the rollout.
    let react_keys = keys(&renderer, &react);
    futures::stream::iter(&react)
        .for_each_concurrent(8, |ns| label_namespace(&cluster.admin, ns, None))
        .await;
    tracker
        .wait(Duration::from_secs(120), big, |live| {
            count_present(live, &react_keys, None) == 0
        })
        .await
        .expect("reaction namespaces reaped");

    // Rollout: a new controller image; flotilla reads config at start, so restart it.
    eprintln!("bench: rollout");
    let idle = wait_idle(bench.idle_max, &[flotilla.pid()]).await;
    flotilla.stop();
    let revision = renderer_b.revision().to_string();
    audit.take();
    let mut probe = Probe::start(&cluster.admin).await;
    let mut flotilla = Flotilla::start(&cluster, &config_b, &work.join("flotilla-2.log"));
    probe.flotilla(flotilla.pid(), true);
    let usage = procstat::Usage::since_start(flotilla.pid());
    let t_deploy = tracker
        .wait_all(
            "rollout",
            bench.timeout,
            big,
            &fleet_deployments,
            Some(&revision),
        )
        .await;
    flotilla.assert_running();
    let t_all = tracker
        .wait_all("rollout", bench.timeout, big, &fleet_keys, Some(&revision))
        .await;
    let rollout_seconds = (t_deploy - flotilla.started).as_secs_f64();
    let cp_rollout = probe.finish(&cluster.admin, rollout_seconds).await;
    let (cpu, rss) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, with_image) = verify(&cluster.admin, &fleet_keys, Some(&new_image)).await;
    assert_eq!(with_image, n, "rollout: Deployments without the new image");
    record(
        &mut rows,
        Row {
            scenario: "flotilla rollout",
            n,
            objects: fleet_keys.len(),
            seconds: rollout_seconds,
            throughput: true,
            rss_mib: rss,
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes: vec![
                format!(
                    "restart with values.controllerImage={new_image}: from process start until every Deployment \
                 has it ({rollout_seconds:.3} s); every object at the new revision at {:.3} s \
                 (the revision annotation changes on all {per_namespace} objects per namespace)",
                    (t_all - flotilla.started).as_secs_f64()
                ),
                format!(
                    "verified by LIST: {with_image}/{n} Deployments run the new image, {found}/{} objects exist; {idle}{cp_rollout}",
                    fleet_keys.len()
                ),
            ],
        },
    );

    // Burst: N new namespaces, opted in at creation, while flotilla runs.
    eprintln!("bench: burst");
    let burst = names("burst", n);
    let burst_keys = keys(&renderer_b, &burst);
    let idle = wait_idle(bench.idle_max, &[flotilla.pid()]).await;
    audit.take();
    let usage = procstat::Usage::start(flotilla.pid());
    let mut probe = Probe::start(&cluster.admin).await;
    probe.flotilla(flotilla.pid(), false);
    let t0 = Instant::now();
    create_namespaces(&cluster.admin, &burst, true).await;
    let created = t0.elapsed().as_secs_f64();
    let t_all = tracker
        .wait_all("burst", bench.timeout, big, &burst_keys, None)
        .await;
    let burst_seconds = (t_all - t0).as_secs_f64();
    let cp_burst = probe.finish(&cluster.admin, burst_seconds).await;
    let (cpu, rss) = usage.read();
    flotilla.assert_running();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, _) = verify(&cluster.admin, &burst_keys, None).await;
    record(
        &mut rows,
        Row {
            scenario: "flotilla burst",
            n,
            objects: burst_keys.len(),
            seconds: burst_seconds,
            throughput: true,
            rss_mib: rss,
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes: vec![format!(
                "{n} new namespaces created opted-in ({SETUP_CONCURRENCY} at once, all created after {created:.1} s) \
             while flotilla ran a fleet of {n}; from the first create until all {} objects exist; \
             verified by LIST: {found}/{}; {idle}{cp_burst}",
                burst_keys.len(),
                burst_keys.len()
            )],
        },
    );
    flotilla.stop();
    drop(tracker);
    cluster.down();

    let summary = Summary {
        p50,
        p99,
        steady_writes: flotilla_writes,
        steady_apiserver: apiserver_writes,
    };
    print_results(&bench, &rows, &summary, started.elapsed());
}

/// What the summary needs beyond the rows.
struct Summary {
    p50: f64,
    p99: f64,
    /// Writes by flotilla in the steady-state window (audit log).
    steady_writes: u64,
    /// Writes to stamped kinds and namespaces in the window, by anyone (apiserver_request_total).
    steady_apiserver: BTreeMap<String, u64>,
}

fn print_results(bench: &Bench, rows: &[Row], summary: &Summary, took: Duration) {
    let Summary {
        p50,
        p99,
        steady_writes,
        ..
    } = *summary;
    let row = |name: &str| rows.iter().find(|r| r.scenario == name);
    let seconds = |name: &str| row(name).map_or(f64::NAN, |r| r.seconds);
    let cold = row("flotilla cold converge").expect("cold converge ran");
    let n = bench.n;
    let vs_limit = cold.seconds / seconds(LIMIT);
    let vs_view = cold.seconds / seconds(LIMIT_VIEW);
    let vs_script = seconds(SCRIPT) / cold.seconds;
    let peak_rss = rows
        .iter()
        .filter(|r| r.scenario.starts_with("flotilla"))
        .filter_map(|r| r.rss_mib)
        .fold(0.0, f64::max);
    let at = |target: usize| {
        if n == target {
            String::new()
        } else {
            format!(" (target is for N={target}; this run N={n})")
        }
    };
    let mut out = String::new();
    out.push_str(&format!(
        "\n== flotilla fleet bench, N={n} ({} objects per namespace), {:.0} s in all\n\n",
        cold.objects / n.max(1),
        took.as_secs_f64()
    ));
    out.push_str(&report::table(rows));
    out.push_str(&format!(
        "\nratios: cold/limit = {vs_limit:.2}x, cold/(limit + fleet view) = {vs_view:.2}x, burst/limit = {:.2}x, rollout/limit rollout = {:.2}x, \
         script/cold = {vs_script:.1}x (script extrapolated from {} namespaces)\n",
        seconds("flotilla burst") / seconds(LIMIT),
        seconds("flotilla rollout") / seconds(LIMIT_ROLLOUT),
        bench.script_sample
    ));
    let targets = [
        // The limit is a client creating exactly the objects flotilla creates: the stamped ones
        // and the fleet view (NamespaceWorker with its status, one Event).
        Target {
            what: "cold converge <= 1.3x the limit (same objects)".into(),
            pass: vs_view <= 1.3,
            detail: format!(
                "{vs_view:.2}x; {vs_limit:.2}x the bare client (stamped objects only){}",
                at(2000)
            ),
        },
        Target {
            what: ">= 10x faster than the script baseline".into(),
            pass: vs_script >= 10.0,
            detail: format!("{vs_script:.1}x"),
        },
        Target {
            what: "zero writes at steady state".into(),
            pass: steady_writes == 0,
            detail: format!(
                "flotilla made {steady_writes} writes to stamped kinds + namespaces in {} s (audit log); the API server saw {} writes \
                 to stamped kinds + namespaces from anyone (metrics: {})",
                bench.steady_secs,
                metrics::total(&summary.steady_apiserver),
                report::verbs(&summary.steady_apiserver)
            ),
        },
        Target {
            what: "reaction p99 <= 1 s".into(),
            pass: p99 <= 1.0,
            detail: format!("p99 {:.0} ms{}", p99 * 1000.0, at(1000)),
        },
        Target {
            what: "flotilla peak RSS <= 100 MiB".into(),
            pass: peak_rss <= 100.0,
            detail: format!("{peak_rss:.1} MiB{}", at(2000)),
        },
    ];
    let disturbed: Vec<&str> = rows
        .iter()
        .filter(|r| r.notes.iter().any(|n| n.contains(DISTURBED)))
        .map(|r| r.scenario)
        .collect();
    if !disturbed.is_empty() {
        out.push_str(&format!(
            "\nWARNING: other processes on this machine took over 10% of its CPU during: {}. \
             Those timings (and ratios built on them) are not clean; run again on an idle machine.\n",
            disturbed.join(", ")
        ));
    }
    out.push_str("\ntargets:\n");
    out.push_str(&report::targets(&targets));
    out.push_str(&format!(
        "\nbench N={n}: cold {:.1} s ({vs_limit:.2}x limit, {vs_view:.2}x limit + fleet view, \
         {vs_script:.1}x faster than script), \
         reaction p50 {:.0} ms p99 {:.0} ms, steady-state writes {}, peak RSS {peak_rss:.0} MiB\n",
        cold.seconds,
        p50 * 1000.0,
        p99 * 1000.0,
        steady_writes,
    ));
    print!("{out}");
    let file = bench.work.join(format!("results-N{n}.txt"));
    let _ = std::fs::write(&file, &out);
    eprintln!(
        "bench: results also in {}; flotilla logs in {}",
        file.display(),
        bench.work.display()
    );
}
