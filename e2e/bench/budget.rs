//! The fleet's budget (`fleetParallelism`): N namespaces (BENCH_BUDGET_N, 1,000) opted in on a
//! control plane of the bench's own, then a burst of Workflows in 10% of them (BENCH_BUDGET_PER,
//! 10 each), with a budget of two per active namespace (BENCH_BUDGET, 200). Measured: the peak of
//! Workflows running at once against the budget, the rebalance latency (from a namespace's burst
//! to its controller's `parallelism` at its fair share), and flotilla's writes in a minute once
//! the burst is over.
//!
//! 100 real controllers do not fit on the bench's 2 cores beside the control plane, so the bench
//! plays them as Argo does: each namespace's Workflows start, oldest first, while fewer run than
//! the `parallelism` its stamped ConfigMap says (read from a watch), each running HOLD and then
//! marked completed, with the labels Argo sets. What is measured is flotilla's part: the shares it
//! grants and how fast. The real controller's reload of the share is e2e/tests/fleet_budget.rs's.

use crate::cluster::{Cluster, Flotilla};
use crate::common::kubectl;
use crate::controllers::percentile;
use crate::report::Target;
use crate::setup::{Bench, names};
use flotilla::status::NamespaceWorker;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const HOLD: Duration = Duration::from_secs(5);
const STEADY_WINDOW: Duration = Duration::from_secs(60);
/// What a rebalance may take beyond the running Workflows' end: the watch event, the turn, the
/// reconcile and the ConfigMap's own watch event, with 100 namespaces moving at once.
const REBALANCE_BEYOND_HOLD: Duration = Duration::from_secs(2);
/// The Event aggregator's interval (60 s) and some.
const SETTLE: Duration = Duration::from_secs(70);
const INSTANCE_LABEL: &str = "workflows.argoproj.io/controller-instanceid";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn workflows(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The `parallelism` of `namespace`'s stamped controller ConfigMap, as the watch shows it.
fn parallelism(maps: &Store<ConfigMap>, namespace: &str) -> u32 {
    let key = ObjectRef::new("workflow-controller-configmap").within(namespace);
    maps.get(&key)
        .and_then(|m| m.data.as_ref()?.get("parallelism")?.trim().parse().ok())
        .unwrap_or(0)
}

/// Sets the labels Argo's controller sets on a Workflow's phase.
async fn mark(api: &Api<DynamicObject>, name: &str, labels: serde_json::Value) {
    let patch = serde_json::json!({"metadata": {"labels": labels}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("marking Workflow {name}: {e}"));
}

/// One namespace's controller as the bench plays it: runs its `count` Workflows within the
/// parallelism its ConfigMap says; returns when the ConfigMap first said `fair` or more.
async fn play(
    client: kube::Client,
    maps: Store<ConfigMap>,
    namespace: String,
    count: usize,
    fair: u32,
    running: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
) -> Option<Duration> {
    let api = workflows(&client, &namespace);
    let started = Instant::now();
    for i in 0..count {
        let workflow: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": format!("w{i}"), "labels": {INSTANCE_LABEL: namespace}},
            "spec": {"entrypoint": "main"},
        }))
        .expect("a Workflow");
        api.create(&PostParams::default(), &workflow)
            .await
            .unwrap_or_else(|e| panic!("creating a Workflow in {namespace}: {e}"));
    }
    let (mut next, mut ends, mut granted) = (0, Vec::<(Instant, usize)>::new(), None);
    while next < count || !ends.is_empty() {
        let now = Instant::now();
        let share = parallelism(&maps, &namespace);
        if granted.is_none() && share >= fair {
            granted = Some(started.elapsed());
        }
        for (_, i) in ends.iter().filter(|(end, _)| *end <= now) {
            let done = serde_json::json!({"workflows.argoproj.io/phase": "Succeeded", "workflows.argoproj.io/completed": "true"});
            mark(&api, &format!("w{i}"), done).await;
            running.fetch_sub(1, Ordering::SeqCst);
        }
        ends.retain(|(end, _)| *end > now);
        while next < count && (ends.len() as u32) < share {
            let at = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(at, Ordering::SeqCst);
            let phase = serde_json::json!({"workflows.argoproj.io/phase": "Running"});
            mark(&api, &format!("w{next}"), phase).await;
            ends.push((Instant::now() + HOLD, next));
            next += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    granted
}

async fn wait_until(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < limit,
            "bench: budget: timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn run(bench: &Bench) -> (String, Vec<Target>) {
    let n = env_or("BENCH_BUDGET_N", 1000);
    let active = (n / 10).max(1);
    let per = env_or("BENCH_BUDGET_PER", 10);
    let budget = env_or("BENCH_BUDGET", 2 * active) as u32;
    let cluster = Cluster::fresh(&bench.repo, &bench.work).await;
    let client = cluster.admin.clone();
    let crd = crate::sleep::argo_build(bench).join("crds");
    kubectl(
        &cluster.admin_kubeconfig,
        &["apply", "--server-side", "-f", crd.to_str().unwrap()],
    );
    let rollout = serde_json::json!({"maxUnavailable": "100%"});
    let (config_path, _, _) = bench.config_with("flotilla-budget.yaml", &bench.values, &rollout);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["fleetParallelism"] = budget.into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let flotilla = Flotilla::start(
        &cluster,
        &config_path,
        &bench.work.join("flotilla-budget.log"),
    );
    let fleet = names("budget", n);
    crate::setup::create_namespaces(&client, &fleet, true).await;
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    wait_until("every namespace at the floor", bench.timeout, async || {
        let Ok(list) = workers.list(&Default::default()).await else {
            return false;
        };
        list.items
            .iter()
            .filter(|w| w.status.as_ref().and_then(|s| s.share) == Some(1))
            .count()
            == n
    })
    .await;

    let maps_api: Api<ConfigMap> = Api::all(client.clone());
    let writer = Writer::default();
    let maps = writer.as_reader();
    let by_name = watcher::Config::default().fields("metadata.name=workflow-controller-configmap");
    tokio::spawn(async move {
        let mut events = std::pin::pin!(
            reflector::reflector(writer, watcher(maps_api, by_name)).applied_objects()
        );
        while events.next().await.is_some() {}
    });
    maps.wait_until_ready()
        .await
        .expect("the ConfigMaps listed");
    let (running, peak) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let fair = budget / active as u32;
    let t0 = Instant::now();
    let players = fleet.iter().take(active).map(|namespace| {
        let (client, maps) = (client.clone(), maps.clone());
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        tokio::spawn(play(
            client,
            maps,
            namespace.clone(),
            per,
            fair,
            running,
            peak,
        ))
    });
    let granted: Vec<Option<Duration>> = futures::future::join_all(players)
        .await
        .into_iter()
        .map(|r| r.expect("a namespace played"))
        .collect();
    let burst = t0.elapsed();
    let latencies: Vec<f64> = granted
        .iter()
        .flatten()
        .map(Duration::as_secs_f64)
        .collect();
    let peak = peak.load(Ordering::SeqCst);

    // Over: every share stays as granted (no Workflow waits). Writes in a minute, Leases aside,
    // once the burst's own Events are out (repeats are sent once a minute, aggregated).
    tokio::time::sleep(SETTLE).await;
    let mut audit = crate::audit::AuditTail::new(cluster.audit_log.clone());
    tokio::time::sleep(STEADY_WINDOW).await;
    let window = audit.take();
    let writes = window.writes_but_leases(crate::audit::Actor::Flotilla);
    flotilla.stop();
    cluster.down();

    let mut text = String::new();
    let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
    let _ = writeln!(
        text,
        "\nbudget: N={n}, a burst of {per} Workflows in each of {active} namespaces, fleetParallelism \
         {budget} (fair share {fair}); the controllers played by the bench, each Workflow running {}s",
        HOLD.as_secs()
    );
    let _ = writeln!(
        text,
        "budget: peak {peak} running at once (overshoot {}); rebalance to the fair share p50 {p50:.2} s, \
         p99 {p99:.2} s ({} of {active} namespaces reached it); burst done in {:.1} s; flotilla's writes \
         in {} s after it, Leases aside: {writes}{}",
        peak.saturating_sub(budget),
        latencies.len(),
        burst.as_secs_f64(),
        STEADY_WINDOW.as_secs(),
        window
            .gap
            .as_deref()
            .map(|g| format!(" (audit gap: {g})"))
            .unwrap_or_default(),
    );
    let targets = vec![
        Target {
            what: format!("budget: Workflows running at once <= fleetParallelism ({budget})"),
            pass: peak <= budget,
            detail: format!("peak {peak}"),
        },
        // A share is freed only as the Workflows running on it end (Argo stops none for
        // parallelism): a namespace that bursts after the budget is held waits for them, HOLD.
        Target {
            what: format!(
                "budget: rebalance p99 <= a Workflow's run ({} s) + {} s",
                HOLD.as_secs(),
                REBALANCE_BEYOND_HOLD.as_secs()
            ),
            pass: latencies.len() == active && p99 <= (HOLD + REBALANCE_BEYOND_HOLD).as_secs_f64(),
            detail: format!("p99 {p99:.2} s, {} of {active} namespaces", latencies.len()),
        },
        Target {
            what: "budget: writes a minute at steady state = 0".into(),
            pass: writes == 0 && window.gap.is_none(),
            detail: match writes {
                0 => "0 writes".into(),
                _ => window.describe_writes(crate::audit::Actor::Flotilla),
            },
        },
    ];
    (text, targets)
}
