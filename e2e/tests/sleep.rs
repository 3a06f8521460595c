//! Idle controllers sleep, with Argo's real workflow-controller run by the node stand-in: a
//! namespace idle past `afterSeconds` is scaled to zero (its controller process stops, its
//! NamespaceWorker says `Sleeping`), and whatever it has to do wakes it with no manual step: a
//! Workflow, a CronWorkflow's run, a tenant's edit, a flotilla killed meanwhile. A rollout never
//! counts a revision proven through a sleeping namespace.

use crate::argo_world::*;
use crate::harness::*;
use crate::kubelet::Node;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

/// How long a wait for a namespace to fall asleep or wake may take: afterSeconds (5), the
/// soak (3), the controller's start or stop, and margin.
const TURN: Duration = Duration::from_secs(120);

/// A fleet whose idle controllers sleep after 5 s, proven by a soak of 3 s.
pub(crate) fn sleepy(name: &str) -> Fleet {
    Fleet::new(name)
        .with(
            "sleep",
            serde_json::json!({"afterSeconds": 5, "wakeAheadSeconds": 20}),
        )
        .with(
            "rollout",
            serde_json::json!({"maxUnavailable": "100%", "reapBrake": {"share": "100%"}, "soakSeconds": 3}),
        )
}

/// The test's namespaces, none left from an earlier run (whose controller pods would stay bound
/// to that run's node), opted in.
pub(crate) async fn opted_in(client: &Client, fleet: &Fleet, names: &[&str]) {
    delete_namespaces_and_wait(client, names).await;
    for ns in names {
        fleet.namespace(client, ns, true).await;
    }
}

pub(crate) async fn node_for(client: &Client, fleet: &Fleet, name: &str) -> Node {
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    argo_node(client, name, &image).await
}

pub(crate) async fn worker(client: &Client, namespace: &str) -> Option<NamespaceWorker> {
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    workers.get_opt(namespace).await.ok()?
}

fn asleep_condition(worker: &NamespaceWorker) -> Option<(String, String)> {
    let status = worker.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == "Asleep")?;
    Some((c.status.clone(), c.reason.clone()))
}

async fn replicas(client: &Client, namespace: &str) -> Option<i32> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let d = deployments.get_opt("workflow-controller").await.ok()??;
    d.spec.replicas
}

/// Waits until the namespace's controller sleeps: its NamespaceWorker says so, its Deployment is
/// at zero, and the node runs no process of it.
pub(crate) async fn wait_asleep(client: &Client, node: &Node, namespace: &str) {
    eventually_within(TURN, &format!("{namespace} Sleeping"), || async {
        let w = worker(client, namespace).await?;
        let phase = w.status.as_ref()?.phase;
        (phase == Phase::Sleeping && asleep_condition(&w)?.0 == "True").then_some(())
    })
    .await;
    assert_eq!(replicas(client, namespace).await, Some(0));
    eventually_within(
        TURN,
        &format!("{namespace}'s controller process stopped"),
        || async { (node.running(namespace) == 0).then_some(()) },
    )
    .await;
}

/// Waits until the namespace's controller runs as a process on the node.
async fn wait_running(node: &Node, namespace: &str) {
    eventually_within(
        TURN,
        &format!("{namespace}'s controller process running"),
        || async { (node.running(namespace) == 1).then_some(()) },
    )
    .await;
}

async fn woke_events(client: &Client, namespace: &str) -> usize {
    let Some(w) = worker(client, namespace).await else {
        return 0;
    };
    let uid = w.uid().unwrap_or_default();
    events(client, "NamespaceWorker", &uid, "Woke").await.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_namespace_sleeps_and_what_it_has_to_do_wakes_it() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = sleepy("sleep-wake");
    let node = node_for(&client, &fleet, "e2e-sleep-wake-node").await;
    let _flotilla = fleet.start();
    let ns = "sleep-wake-a";
    opted_in(&client, &fleet, &[ns]).await;
    wait_running(&node, ns).await;
    wait_asleep(&client, &node, ns).await;

    // A Workflow submitted to the sleeping namespace runs to the end, with no manual step.
    submit(&client, ns, &pause_workflow("woken", Some(ns), 1, 1)).await;
    wait_run(&client, &node, ns, "woken", "Succeeded").await;
    assert!(node.logs(ns).contains("woken"), "its own controller ran it");
    eventually("a Woke Event on the NamespaceWorker", || async {
        (woke_events(&client, ns).await > 0).then_some(())
    })
    .await;
    wait_asleep(&client, &node, ns).await;

    // A tenant scaling the controller up by hand is drift: reverted. A Workflow submitted at
    // the same moment still runs.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let up = serde_json::json!({"spec": {"replicas": 1}});
    deployments
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &Patch::Merge(&up),
        )
        .await
        .unwrap();
    submit(&client, ns, &pause_workflow("scaled", Some(ns), 1, 1)).await;
    wait_run(&client, &node, ns, "scaled", "Succeeded").await;
    wait_asleep(&client, &node, ns).await;
    let w = worker(&client, ns).await.unwrap();
    let repaired = events(
        &client,
        "NamespaceWorker",
        &w.uid().unwrap(),
        "DriftRepaired",
    )
    .await;
    assert!(!repaired.is_empty(), "the scale-up was repaired as drift");

    // Opted out of sleeping: woken, and it stays up.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let out =
        serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/sleep": "false"}}});
    namespaces
        .patch(ns, &PatchParams::default(), &Patch::Merge(&out))
        .await
        .unwrap();
    wait_running(&node, ns).await;
    eventually_within(TURN, "the NamespaceWorker says it opted out", || async {
        let w = worker(&client, ns).await?;
        let (status, reason) = asleep_condition(&w)?;
        (status == "False" && reason == "OptedOut" && w.status?.phase == Phase::Ready).then_some(())
    })
    .await;
    node.stop().await;
    delete_namespaces(&client, &[ns]).await;
}

fn cron_workflows(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "CronWorkflow");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The Workflows the CronWorkflow `cron` made: (scheduled time, created), by schedule.
async fn cron_runs(client: &Client, namespace: &str, cron: &str) -> Vec<(i64, i64)> {
    let selector = format!("workflows.argoproj.io/cron-workflow={cron}");
    // An API server restarted by another test answers nothing for a moment: no runs yet.
    let Ok(list) = workflows(client, namespace)
        .list(&ListParams::default().labels(&selector))
        .await
    else {
        return Vec::new();
    };
    let mut runs: Vec<(i64, i64)> = list
        .items
        .iter()
        .filter_map(|w| {
            let scheduled = w
                .annotations()
                .get("workflows.argoproj.io/scheduled-time")?;
            let scheduled: jiff::Timestamp = scheduled.parse().ok()?;
            let created = w.metadata.creation_timestamp.as_ref()?.0;
            Some((scheduled.as_second(), created.as_second()))
        })
        .collect();
    runs.sort();
    runs
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cron_workflow_every_minute_runs_on_time_in_a_sleeping_namespace() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = sleepy("sleep-cron");
    let node = node_for(&client, &fleet, "e2e-sleep-cron-node").await;
    let _flotilla = fleet.start();
    let ns = "sleep-cron-a";
    opted_in(&client, &fleet, &[ns]).await;
    wait_running(&node, ns).await;
    wait_asleep(&client, &node, ns).await;

    let cron: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "minutely", "labels": {INSTANCE_LABEL: ns}},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowMetadata": {"labels": {INSTANCE_LABEL: ns}},
            "workflowSpec": {"entrypoint": "main", "templates": [
                {"name": "main", "suspend": {"duration": "1s"}}]},
        },
    }))
    .unwrap();
    cron_workflows(&client, ns)
        .create(&Default::default(), &cron)
        .await
        .unwrap();
    // Three scheduled minutes, the namespace asleep before each of the last two: each run's
    // Workflow created within 10 s of its minute.
    let slept_before: std::sync::Mutex<BTreeSet<i64>> = Default::default();
    let runs = eventually_within(
        Duration::from_secs(300),
        "three runs of the CronWorkflow",
        || async {
            let runs = cron_runs(&client, ns, "minutely").await;
            let asleep = worker(&client, ns)
                .await
                .and_then(|w| asleep_condition(&w))
                .is_some_and(|(status, _)| status == "True");
            if asleep {
                // Asleep now: the next scheduled minute finds it asleep before it.
                let now = jiff::Timestamp::now().as_second();
                slept_before
                    .lock()
                    .unwrap()
                    .insert(now - now.rem_euclid(60) + 60);
            }
            (runs.len() >= 3).then_some(runs)
        },
    )
    .await;
    for (scheduled, created) in &runs {
        assert!(
            (0..=10).contains(&(created - scheduled)),
            "the run of {scheduled} was created {} s after its minute: {runs:?}",
            created - scheduled
        );
    }
    let slept_before = slept_before.into_inner().unwrap();
    let woken_for: Vec<&(i64, i64)> = runs
        .iter()
        .filter(|(s, _)| slept_before.contains(s))
        .collect();
    assert!(
        woken_for.len() >= 2,
        "the namespace slept before at least two of the runs {runs:?} (asleep before {slept_before:?})"
    );
    node.stop().await;
    delete_namespaces(&client, &[ns]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_never_proves_a_revision_through_a_sleeping_namespace() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let mut fleet = sleepy("sleep-roll").with(
        "rollout",
        serde_json::json!({"maxUnavailable": 1, "soakSeconds": 3, "progressDeadlineSeconds": 30,
            "reapBrake": {"share": "100%"}}),
    );
    let node = node_for(&client, &fleet, "e2e-sleep-roll-node").await;
    let flotilla = fleet.start();
    let names = ["sleep-roll-a", "sleep-roll-b"];
    opted_in(&client, &fleet, &names).await;
    for ns in names {
        wait_asleep(&client, &node, ns).await;
    }
    // An image the node cannot run: no controller of it ever becomes available. Scaled to zero,
    // its Deployment would be "available" at once; the rollout must fail instead.
    let fleets: Api<flotilla::rollout::fleet::Fleet> = Api::all(client.clone());
    let target = |f: Option<flotilla::rollout::fleet::Fleet>| {
        let status = f?.status?;
        Some((status.target_revision, format!("{:?}", status.phase)))
    };
    let (before, _) = target(fleets.get_opt(&fleet.instance).await.unwrap()).unwrap();
    flotilla.stop();
    let image = fleet.values["controllerImage"].as_str().unwrap();
    fleet.values["controllerImage"] = format!("{image}-missing").into();
    let _flotilla = fleet.start();
    let phase = eventually_within(Duration::from_secs(180), "the rollout to end", || async {
        let (revision, phase) = target(fleets.get_opt(&fleet.instance).await.ok()?)?;
        (revision > before && matches!(phase.as_str(), "Failed" | "Complete")).then_some(phase)
    })
    .await;
    assert_eq!(
        phase, "Failed",
        "a revision no controller ran is never complete"
    );
    // The namespace it moved was woken to prove it, and is not left asleep unproven.
    let woken = eventually("a namespace woken for the change", || async {
        for ns in names {
            let w = worker(&client, ns).await?;
            if asleep_condition(&w)? == ("False".into(), "Change".into()) {
                return Some(ns);
            }
        }
        None
    })
    .await;
    assert_eq!(replicas(&client, woken).await, Some(1));
    node.stop().await;
    delete_namespaces(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killing_flotilla_mid_sleep_strands_nothing() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = sleepy("sleep-kill");
    let node = node_for(&client, &fleet, "e2e-sleep-kill-node").await;
    let flotilla = fleet.start();
    let ns = "sleep-kill-a";
    opted_in(&client, &fleet, &[ns]).await;
    wait_asleep(&client, &node, ns).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let generation = |d: Deployment| d.metadata.generation;
    let before = generation(deployments.get("workflow-controller").await.unwrap());

    // Killed mid-sleep: a restart wakes nothing that has nothing to do.
    flotilla.kill();
    let restarted = fleet.start();
    restarted.wait_log("initial sync complete").await;
    let w = worker(&client, ns).await.unwrap();
    assert_eq!(w.status.as_ref().map(|s| s.phase), Some(Phase::Sleeping));
    assert_eq!(
        generation(deployments.get("workflow-controller").await.unwrap()),
        before,
        "the restart left the sleeping Deployment as it was"
    );
    assert_eq!(node.running(ns), 0);

    // Killed again, and a Workflow submitted while it is down: the next one wakes the
    // controller for it.
    restarted.kill();
    submit(&client, ns, &pause_workflow("while-down", Some(ns), 1, 1)).await;
    let again = fleet.start();
    wait_run(&client, &node, ns, "while-down", "Succeeded").await;
    wait_asleep(&client, &node, ns).await;

    // A Workflow created as the API server comes back, while flotilla's watches reconnect.
    let out = Command::new("bash")
        .args([
            &format!("{}/e2e/cluster.sh", env!("CARGO_MANIFEST_DIR")),
            "restart",
            "kube-apiserver",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "restart kube-apiserver: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client = admin().await;
    let workflow = pause_workflow("over-restart", Some(ns), 1, 1);
    eventually("the API server to take the Workflow", || async {
        workflows(&client, ns)
            .create(&Default::default(), &workflow)
            .await
            .ok()
    })
    .await;
    wait_run(&client, &node, ns, "over-restart", "Succeeded").await;
    drop(again);
    node.stop().await;
    delete_namespaces(&client, &[ns]).await;
}
