//! The fleet's budget of running Workflows (`fleetParallelism`), with the real controllers: each
//! namespace's share is its controller's `parallelism`, reloaded without a restart, and the
//! Workflows running at once across the fleet, sampled every 200 ms from a watch, stay within
//! the budget while every namespace gets its fair share.

use crate::argo_world::*;
use crate::harness::*;
use flotilla::rollout::fleet::BudgetStatus;
use flotilla::status::NamespaceWorker;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) const BUDGET: u32 = 4;

/// One sample: per namespace, its Workflows running and live but not running.
pub(crate) type Sample = (Instant, BTreeMap<String, (u32, u32)>);

/// Samples the Workflows of `namespaces` every 200 ms from a watch of them.
pub(crate) struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Sampler {
    pub(crate) fn start(client: &kube::Client, namespaces: &[&str]) -> Sampler {
        let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
        let resource = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let writer = Writer::new(resource);
        let store = writer.as_reader();
        let watch = tokio::spawn(async move {
            let mut events = std::pin::pin!(
                reflector::reflector(writer, watcher(api, Default::default())).applied_objects()
            );
            while events.next().await.is_some() {}
        });
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (into, wanted) = (
            Arc::clone(&samples),
            namespaces.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        );
        let sample = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let mut counts: BTreeMap<String, (u32, u32)> =
                    wanted.iter().map(|n| (n.clone(), (0, 0))).collect();
                for workflow in store.state() {
                    let namespace = workflow.metadata.namespace.clone().unwrap_or_default();
                    let Some(count) = counts.get_mut(&namespace) else {
                        continue;
                    };
                    match workflow.data["status"]["phase"].as_str() {
                        Some("Running") => count.0 += 1,
                        Some("Succeeded" | "Failed" | "Error") => {}
                        _ => count.1 += 1,
                    }
                }
                into.lock().unwrap().push((Instant::now(), counts));
            }
        });
        Sampler {
            samples,
            tasks: vec![watch, sample],
        }
    }

    pub(crate) fn stop(self) -> Vec<Sample> {
        for task in &self.tasks {
            task.abort();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// Workflows running at once in one sample, across its namespaces.
pub(crate) fn running(counts: &BTreeMap<String, (u32, u32)>) -> u32 {
    counts.values().map(|(r, _)| r).sum()
}

/// The most Workflows running at once over `samples`.
pub(crate) fn peak(samples: &[Sample]) -> u32 {
    samples.iter().map(|(_, c)| running(c)).max().unwrap_or(0)
}

/// Submits Workflows `w{i}` for `range` in `namespace`, each pausing `seconds`.
pub(crate) async fn submit_all<'a>(
    client: &kube::Client,
    namespace: &'a str,
    range: std::ops::Range<usize>,
    seconds: u32,
    submitted: &mut Vec<(&'a str, String)>,
) {
    for i in range {
        let workflow = format!("w{i}");
        let paused = pause_workflow(&workflow, Some(namespace), 1, seconds);
        submit(client, namespace, &paused).await;
        submitted.push((namespace, workflow));
    }
}

/// Once every Workflow `submitted` has Succeeded, what `sampler` saw.
pub(crate) async fn samples_once_done(
    client: &kube::Client,
    node: &crate::kubelet::Node,
    submitted: &[(&str, String)],
    sampler: Sampler,
) -> Vec<Sample> {
    for (name, workflow) in submitted {
        wait_run(client, node, name, workflow, "Succeeded").await;
    }
    sampler.stop()
}

/// Max-min fair shares of `budget` for `wants`, each at least 1 while it wants any: handed out a
/// unit at a time, round the namespaces that want more (an oracle apart from flotilla's).
fn fair(budget: u32, wants: &[u32]) -> Vec<u32> {
    let mut shares: Vec<u32> = wants.iter().map(|&w| u32::from(w > 0)).collect();
    let mut left = budget.saturating_sub(shares.iter().sum());
    while left > 0 {
        let mut gave = false;
        for (share, &want) in shares.iter_mut().zip(wants) {
            if left > 0 && *share < want {
                *share += 1;
                left -= 1;
                gave = true;
            }
        }
        if !gave {
            break;
        }
    }
    shares
}

/// The longest stretch of samples in which a namespace with Workflows waiting ran fewer than its
/// fair share while another ran more than its own.
fn longest_starved(samples: &[Sample]) -> Duration {
    let (mut longest, mut since) = (Duration::ZERO, None::<Instant>);
    for (at, counts) in samples {
        let wants: Vec<u32> = counts.values().map(|(r, w)| r + w).collect();
        let shares = fair(BUDGET, &wants);
        let runs = counts.values().map(|(r, _)| *r);
        let starved = counts
            .values()
            .zip(&shares)
            .any(|((r, w), f)| *w > 0 && r < f);
        let over = runs.zip(&shares).any(|(r, f)| r > *f);
        if starved && over {
            let start = *since.get_or_insert(*at);
            longest = longest.max(at.duration_since(start));
        } else {
            since = None;
        }
    }
    longest
}

/// A fleet of three namespaces `{prefix}-a`, `-b` and `-c` under budget [`BUDGET`], each with its
/// real controller on a node of its own, idle: each at the floor, holding no share.
pub(crate) struct BudgetFleet {
    pub fleet: Fleet,
    pub flotilla: Flotilla,
    pub node: crate::kubelet::Node,
    pub names: [String; 3],
}

pub(crate) async fn budget_fleet(client: &kube::Client, prefix: &str) -> BudgetFleet {
    install_argo_crds(client).await;
    let fleet = Fleet::new(prefix).with("fleetParallelism", serde_json::json!(BUDGET));
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let node = argo_node(client, &format!("e2e-{prefix}-node"), &image).await;
    let flotilla = fleet.start();
    let names = ["a", "b", "c"].map(|n| format!("{prefix}-{n}"));
    for name in &names {
        fleet.namespace(client, name, true).await;
    }
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    for name in &names {
        wait_controller_up(client, name).await;
        // Idle, each holds no share: its controller at parallelism 1.
        eventually(&format!("{name}'s share 1"), || async {
            let status = workers.get_opt(name).await.ok()??.status?;
            (status.share == Some(1)).then_some(())
        })
        .await;
    }
    BudgetFleet {
        fleet,
        flotilla,
        node,
        names,
    }
}

/// The Fleet's budget as its status shows it, once `ready` holds of it.
pub(crate) async fn fleet_budget_when(
    client: &kube::Client,
    fleet: &Fleet,
    what: &str,
    ready: impl Fn(&BudgetStatus) -> bool,
) -> BudgetStatus {
    eventually(what, || async {
        let budget = fleet_object(client, &fleet.instance)
            .await?
            .status?
            .budget?;
        ready(&budget).then_some(budget)
    })
    .await
}

impl BudgetFleet {
    /// Stops flotilla and the node, and deletes the namespaces.
    pub(crate) async fn tear_down(self, client: &kube::Client) {
        drop(self.flotilla);
        self.node.stop().await;
        delete_namespaces_and_wait(client, &self.names).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_budget_caps_the_workflows_running_at_once_and_shares_it_fairly() {
    let client = admin().await;
    let BudgetFleet {
        mut fleet,
        flotilla,
        node,
        names,
    } = budget_fleet(&client, "budget").await;
    let names = names.each_ref().map(String::as_str);
    let workers: Api<NamespaceWorker> = Api::all(client.clone());

    let sampler = Sampler::start(&client, &names);
    // First one long Workflow in each namespace, each at the floor, until the Fleet shows all
    // three running. A namespace that turns active while the budget is all held may start one
    // Workflow at its floor beyond the budget (README, "The guarantee"): with every namespace
    // already active, the burst after them has no such allowance, whatever order it arrives in.
    let mut submitted = Vec::new();
    for name in names {
        submit(&client, name, &pause_workflow("anchor", Some(name), 1, 15)).await;
        submitted.push((name, "anchor".to_string()));
    }
    let busy = fleet_budget_when(
        &client,
        &fleet,
        "the Fleet's budget in use by the three",
        |b| b.running == 3,
    )
    .await;
    assert_eq!(busy.limit, BUDGET, "{busy:?}");
    for (name, count) in [(names[0], 4), (names[1], 2), (names[2], 1)] {
        submit_all(&client, name, 0..count, 4, &mut submitted).await;
    }
    for name in names {
        let phase = workflow_status(&client, name, "anchor").await["phase"].clone();
        assert_eq!(
            phase, "Running",
            "{name}'s anchor ended before the burst: too slow a machine"
        );
    }
    // While they run, the Fleet shows what waits for the budget.
    fleet_budget_when(&client, &fleet, "the Fleet's Workflows waiting", |b| {
        b.waiting > 0
    })
    .await;
    let samples = samples_once_done(&client, &node, &submitted, sampler).await;
    let peak = peak(&samples);
    let starved = longest_starved(&samples);
    println!(
        "budget {BUDGET}: peak {peak} running at once over {} samples; longest starved {starved:?}",
        samples.len()
    );
    assert!(
        peak <= BUDGET,
        "at most {BUDGET} running at once, saw {peak}"
    );
    assert!(peak >= 3, "the burst ran in parallel: peak {peak}");
    // One rebalance: flotilla's turn (1 s), the write, the controller's reload, and a running
    // Workflow's end (4 s each), which Argo never cuts short.
    assert!(
        starved <= Duration::from_secs(8),
        "a namespace waited below its fair share for {starved:?}"
    );
    let idle = fleet_budget_when(&client, &fleet, "the Fleet's budget idle", |b| {
        b.running == 0 && b.waiting == 0
    })
    .await;
    assert!(idle.held <= BUDGET, "{idle:?}");
    let (code, shown) = fleet.cli(&["status"]);
    println!("flotilla status:\n{shown}");
    assert_eq!(code, 0);
    assert!(shown.contains("SHARE"), "{shown}");
    assert!(
        shown.contains(&format!("budget: 0 of {BUDGET} running, 0 waiting")),
        "{shown}"
    );

    // A restart recomputes the shares from the watches and writes nothing: each namespace keeps
    // the share its status records.
    let versions = || async {
        let maps: Vec<String> = futures::future::join_all(names.iter().map(|name| {
            let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
                Api::namespaced(client.clone(), name);
            async move {
                let map = maps.get("workflow-controller-configmap").await.unwrap();
                map.metadata.resource_version.unwrap_or_default()
            }
        }))
        .await;
        let mut all = maps;
        for name in names {
            let worker = workers.get(name).await.unwrap();
            all.push(worker.metadata.resource_version.unwrap_or_default());
        }
        all
    };
    let before = versions().await;
    flotilla.kill();
    let again = fleet.start();
    again.wait_log("initial sync complete").await;
    // Absence is shown over a window: several turns of the budget (one a second).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        versions().await,
        before,
        "ConfigMaps and NamespaceWorkers unchanged"
    );
    // Idle a minute, each gives its share back: its controller at parallelism 1 again.
    for name in names {
        eventually_within(
            Duration::from_secs(120),
            &format!("{name}'s share back to 1"),
            || async {
                let status = workers.get_opt(name).await.ok()??.status?;
                (status.share == Some(1)).then_some(())
            },
        )
        .await;
    }
    // The budget turned off live: every controller back at its own parallelism, no share shown.
    fleet.settings.remove("fleetParallelism");
    fleet.config_file();
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), names[0]);
    for name in names {
        eventually(&format!("{name} without a share"), || async {
            let status = workers.get_opt(name).await.ok()??.status?;
            status.share.is_none().then_some(())
        })
        .await;
    }
    let map = maps.get("workflow-controller-configmap").await.unwrap();
    assert_eq!(
        map.data.unwrap()["parallelism"],
        fleet.values["parallelism"].to_string()
    );
    drop(again);
    node.stop().await;
    delete_namespaces_and_wait(&client, &names).await;
}
