//! Sleep: what an idle workflow-controller costs and what sleeping saves, with Argo's real
//! controller (v4.0.5, e2e/build.sh) run as processes by the node stand-in, on a fresh control
//! plane of the bench's own. K namespaces (BENCH_SLEEP_K, 20) are opted in awake; measured: each
//! controller's start-up LISTs and, idle for a minute, its RSS, CPU, requests and watches. Then
//! `sleep` is turned on in the config (a live key): all sleep; 10% get a long Workflow and wake.
//! Then BENCH_WAKES (50) wakes one at a time, a Workflow's creation to `Running`; and the
//! controller's start-up alone: a Deployment of the same objects that flotilla does not manage,
//! scaled 0 -> 1 by hand with a Workflow waiting.
//!
//! 1,000 real controllers do not fit on the bench's 2 cores: the N=1,000 figures are the
//! per-controller cost measured here times the count, and say so.

use crate::cluster::{Cluster, Flotilla};
use crate::common::{api_server_address, kubectl};
use crate::controllers::{Requests, cpu, percentile, processes, rss_mib, watches_open};
use crate::kubelet::{Node, Program};
use crate::report::Target;
use crate::setup::{Bench, INSTANCE, names, render};
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const N: usize = 1000;
const IDLE_WINDOW: Duration = Duration::from_secs(60);
const PROBES: usize = 10;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn argo_build(bench: &Bench) -> PathBuf {
    let out = Command::new("bash")
        .arg(bench.repo.join("e2e/build.sh"))
        .args(["path", "argo"])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "e2e/build.sh path argo failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn workflows(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

fn workflow(name: &str, namespace: &str, seconds: u32) -> DynamicObject {
    let label = "workflows.argoproj.io/controller-instanceid";
    serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": name, "labels": {label: namespace}},
        "spec": {"entrypoint": "main", "templates": [
            {"name": "main", "suspend": {"duration": format!("{seconds}s")}}]},
    }))
    .unwrap()
}

/// Waits, polling every 50 ms, until the Workflow is running (or done); how long that took
/// from `from`.
async fn running(client: &kube::Client, namespace: &str, name: &str, from: Instant) -> f64 {
    let api = workflows(client, namespace);
    loop {
        if let Ok(w) = api.get(name).await
            && matches!(
                w.data["status"]["phase"].as_str(),
                Some("Running" | "Succeeded")
            )
        {
            return from.elapsed().as_secs_f64();
        }
        assert!(
            from.elapsed() < Duration::from_secs(300),
            "{namespace}/{name} never ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_until(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < limit,
            "bench: {what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The controller processes of `namespaces` (another control plane on this host may run
/// controllers of its own from the same build).
fn controllers(bin: &std::path::Path, namespaces: &[String]) -> BTreeMap<String, u32> {
    let mut found = processes(bin);
    found.retain(|ns, _| namespaces.contains(ns));
    found
}

/// Waits until exactly `want` of `namespaces` run a controller; on a timeout, says which do.
async fn wait_for_controllers(
    what: &str,
    bin: &std::path::Path,
    namespaces: &[String],
    want: &[&String],
    limit: Duration,
) {
    let start = Instant::now();
    loop {
        let running = controllers(bin, namespaces);
        if running.len() == want.len() && want.iter().all(|ns| running.contains_key(*ns)) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "bench: {what} did not happen within {limit:?}: running {:?}, wanted {want:?}",
            running.keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn phases(client: &kube::Client, names: &[String]) -> BTreeMap<String, Phase> {
    let api: Api<NamespaceWorker> = Api::all(client.clone());
    let list = api.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|w| Some((w.metadata.name?, w.status?.phase)))
        .filter(|(n, _)| names.contains(n))
        .collect()
}

/// The cost of the controllers running now: processes, summed RSS (MiB), watches open on the
/// API server beyond `baseline`.
async fn cost(
    client: &kube::Client,
    bin: &std::path::Path,
    namespaces: &[String],
    baseline: f64,
) -> (usize, f64, f64) {
    let pids = controllers(bin, namespaces);
    let rss: f64 = pids.values().filter_map(|p| rss_mib(*p)).sum();
    let watches = watches_open(client).await.unwrap_or(f64::NAN) - baseline;
    (pids.len(), rss, watches)
}

pub async fn run(bench: &Bench) -> (String, Vec<Target>) {
    let k = env_or("BENCH_SLEEP_K", 20);
    let wakes = env_or("BENCH_WAKES", 50);
    let cluster = Cluster::fresh(&bench.repo, &bench.work).await;
    let client = cluster.admin.clone();
    let argo = argo_build(bench);
    let crds = argo.join("crds");
    kubectl(
        &cluster.admin_kubeconfig,
        &["apply", "--server-side", "-f", crds.to_str().unwrap()],
    );
    let image = bench.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let program = Program {
        image,
        bin: argo.join("bin"),
        entrypoint: vec!["workflow-controller".into()],
        user: (8737, 8737),
    };
    let api_server = api_server_address(&cluster.admin_kubeconfig);
    let node_dir = crate::cluster::state_dir().join("nodes/bench-sleep");
    let node = Node::start(&client, "bench-sleep", vec![program], api_server, node_dir).await;
    let rollout = serde_json::json!({"maxUnavailable": "100%", "soakSeconds": 2});
    let (config_path, _, renderer) =
        bench.config_with("flotilla-sleep.yaml", &bench.values, &rollout);
    let flotilla = Flotilla::start(
        &cluster,
        &config_path,
        &bench.work.join("flotilla-sleep.log"),
    );
    let bin = argo.join("bin");
    let baseline = watches_open(&client).await.unwrap_or(f64::NAN);

    // Awake: K controllers, their start-up, then a minute idle.
    let fleet = names("sleep", k);
    let startup = Requests::mark(&cluster.audit_log);
    crate::setup::create_namespaces(&client, &fleet, true).await;
    let everyone: Vec<&String> = fleet.iter().collect();
    wait_for_controllers(
        "every controller running",
        &bin,
        &fleet,
        &everyone,
        Duration::from_secs(600),
    )
    .await;
    wait_until(
        "every NamespaceWorker Ready",
        Duration::from_secs(300),
        async || {
            phases(&client, &fleet)
                .await
                .values()
                .filter(|p| **p == Phase::Ready)
                .count()
                == k
        },
    )
    .await;
    // Their start-up is over once their informers synced; a few seconds here, 30 to be sure.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let started = startup.since();
    let window = Requests::mark(&cluster.audit_log);
    let pids = controllers(&bin, &fleet);
    let cpu0 = cpu(&pids);
    tokio::time::sleep(IDLE_WINDOW).await;
    let cpu1 = cpu(&pids);
    let idle_requests = window.since();
    let (awake_n, awake_rss, awake_open) = cost(&client, &bin, &fleet, baseline).await;
    let per = |total: f64| total / awake_n.max(1) as f64;
    let cpu_share: f64 = cpu1
        .iter()
        .filter_map(|(ns, c)| Some(c - cpu0.get(ns)?))
        .sum::<f64>()
        / IDLE_WINDOW.as_secs_f64();
    let per_verb = |counts: &Result<BTreeMap<String, BTreeMap<String, u64>>, String>| match counts {
        Ok(c) => {
            let mut total: BTreeMap<String, u64> = BTreeMap::new();
            for verbs in c.values() {
                for (v, n) in verbs {
                    *total.entry(v.clone()).or_default() += n;
                }
            }
            total
                .iter()
                .map(|(v, n)| format!("{v} {:.1}", *n as f64 / k as f64))
                .collect::<Vec<_>>()
                .join(", ")
        }
        Err(why) => format!("NO READING ({why})"),
    };
    let per_verb = |counts| match per_verb(counts) {
        none if none.is_empty() => "no request (their watches stay open)".to_string(),
        some => some,
    };

    // Sleep on, live: every controller sleeps; then 10% get work.
    let with_sleep = serde_json::json!({"afterSeconds": 10, "wakeAheadSeconds": 30});
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["sleep"] = with_sleep;
    std::fs::write(&config_path, config.to_string()).unwrap();
    wait_until(
        "every namespace asleep",
        Duration::from_secs(600),
        async || {
            let asleep = phases(&client, &fleet)
                .await
                .values()
                .filter(|p| **p == Phase::Sleeping)
                .count();
            asleep == k && controllers(&bin, &fleet).is_empty()
        },
    )
    .await;
    // What stays open with no controller running is not theirs (the control plane's own, say
    // its garbage collector's watches of Argo's kinds, opened after the baseline): the
    // controllers' watches are counted above it.
    let (_, _, floor) = cost(&client, &bin, &fleet, baseline).await;
    let active: Vec<&String> = fleet.iter().take(k.div_ceil(10)).collect();
    for ns in &active {
        let long = workflow("long", ns, 3600);
        workflows(&client, ns)
            .create(&Default::default(), &long)
            .await
            .unwrap();
    }
    wait_for_controllers(
        "the active tenth running",
        &bin,
        &fleet,
        &active,
        Duration::from_secs(300),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (active_n, active_rss, active_open) = cost(&client, &bin, &fleet, baseline).await;
    let awake_watches = awake_open - floor;
    let active_watches = active_open - floor;
    for ns in &active {
        let _ = workflows(&client, ns)
            .delete("long", &Default::default())
            .await;
    }

    // Wakes, one at a time, each in a namespace asleep.
    let mut latencies = Vec::new();
    let mut i = 0;
    while latencies.len() < wakes {
        let ns = &fleet[i % k];
        i += 1;
        wait_until(
            &format!("{ns} asleep"),
            Duration::from_secs(300),
            async || {
                phases(&client, std::slice::from_ref(ns)).await.get(ns) == Some(&Phase::Sleeping)
                    && !controllers(&bin, &fleet).contains_key(ns)
            },
        )
        .await;
        let name = format!("wake-{i}");
        let t0 = Instant::now();
        workflows(&client, ns)
            .create(&Default::default(), &workflow(&name, ns, 1))
            .await
            .unwrap();
        latencies.push(running(&client, ns, &name, t0).await);
    }

    // The controller's start-up alone: the same objects, not flotilla's, scaled by hand.
    let probe = "sleep-startup-probe";
    crate::setup::create_namespaces(&client, &[probe.to_string()], false).await;
    let mut objects = String::new();
    for o in render(&renderer, probe) {
        let mut body = o.body.clone();
        if let Some(labels) = body["metadata"]["labels"].as_object_mut() {
            labels.retain(|k, _| !k.starts_with("flotilla.dev/"));
        }
        if o.key.name == "workflow-controller" && o.key.kind == flotilla::kinds::Kind::Deployment {
            body["spec"]["replicas"] = 0.into();
        }
        let _ = writeln!(objects, "---\n{}", serde_json::to_string(&body).unwrap());
    }
    let file = bench.work.join("startup-probe.yaml");
    std::fs::write(&file, objects).unwrap();
    kubectl(
        &cluster.admin_kubeconfig,
        &["apply", "--server-side", "-f", file.to_str().unwrap()],
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), probe);
    let scale = |n: i32| serde_json::json!({"spec": {"replicas": n}});
    let mut startups = Vec::new();
    for j in 0..PROBES {
        let name = format!("probe-{j}");
        workflows(&client, probe)
            .create(&Default::default(), &workflow(&name, probe, 1))
            .await
            .unwrap();
        let t0 = Instant::now();
        deployments
            .patch(
                "workflow-controller",
                &PatchParams::default(),
                &Patch::Merge(&scale(1)),
            )
            .await
            .unwrap();
        startups.push(running(&client, probe, &name, t0).await);
        deployments
            .patch(
                "workflow-controller",
                &PatchParams::default(),
                &Patch::Merge(&scale(0)),
            )
            .await
            .unwrap();
        wait_until(
            "the probe's controller stopped",
            Duration::from_secs(120),
            async || !processes(&bin).contains_key(probe),
        )
        .await;
    }
    let rss_flotilla = flotilla.process().ok().and_then(rss_mib);
    flotilla.stop();
    node.stop().await;
    cluster.down();

    let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
    let start_p50 = percentile(&startups, 50.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nsleep: Argo's workflow-controller v4.0.5 for real, K={k} namespaces on one node stand-in ({INSTANCE})"
    );
    let _ = writeln!(
        out,
        "  per idle controller (mean of {awake_n}): RSS {:.1} MiB, CPU {:.2}% of a core, watches open {:.1}",
        per(awake_rss),
        100.0 * cpu_share / awake_n.max(1) as f64,
        per(awake_watches)
    );
    let _ = writeln!(out, "  per controller, start-up: {}", per_verb(&started));
    let _ = writeln!(
        out,
        "  per controller, idle, a minute: {}",
        per_verb(&idle_requests)
    );
    let _ = writeln!(
        out,
        "  watches open beyond the baseline: {awake_open:.0} all awake, {active_open:.0} at 10% active, {floor:.0} all asleep (the floor: not the controllers')"
    );
    let _ = writeln!(
        out,
        "  measured, {k} awake: {awake_n} processes, {awake_rss:.0} MiB, {awake_watches:.0} watches above the floor; 10% active: {active_n} processes, {active_rss:.0} MiB, {active_watches:.0} watches above it"
    );
    let scaled = |x: f64, n: usize| x / awake_n.max(1) as f64 * n as f64;
    let _ = writeln!(
        out,
        "  N={N}, SCALED from the measured per-controller cost (not run): all awake {N} processes, {:.0} MiB, {:.0} watches; 10% active {} processes, {:.0} MiB, {:.0} watches",
        scaled(awake_rss, N),
        scaled(awake_watches, N),
        N / 10,
        scaled(awake_rss, N / 10),
        scaled(awake_watches, N / 10)
    );
    let _ = writeln!(
        out,
        "  wake, a Workflow's creation to Running, {} wakes: p50 {p50:.2} s, p99 {p99:.2} s; the controller's start-up alone ({PROBES} scale-ups by hand): p50 {start_p50:.2} s, max {:.2} s",
        latencies.len(),
        startups.iter().copied().fold(f64::NAN, f64::max)
    );
    if let Some(rss) = rss_flotilla {
        let _ = writeln!(out, "  flotilla's RSS at the end: {rss:.1} MiB");
    }
    let ratio = |active: f64, awake: f64| active / awake;
    let measured = [
        ("processes", ratio(active_n as f64, awake_n as f64)),
        ("RSS", ratio(active_rss, awake_rss)),
        ("watches", ratio(active_watches, awake_watches)),
    ];
    let worst = measured.iter().map(|(_, r)| *r).fold(f64::NAN, f64::max);
    let targets = vec![
        Target {
            what: "wake p99 <= 2 s + the controller's start-up".into(),
            pass: p99 <= 2.0 + start_p50,
            detail: format!("p99 {p99:.2} s against 2 + {start_p50:.2} s"),
        },
        Target {
            what: "idle cost at 10% active <= 15% of all awake".into(),
            pass: worst <= 0.15,
            detail: measured
                .iter()
                .map(|(what, r)| format!("{what} {:.0}%", 100.0 * r))
                .collect::<Vec<_>>()
                .join(", ")
                + &format!(" (measured at K={k}; the same shares at N={N})"),
        },
    ];
    (out, targets)
}
