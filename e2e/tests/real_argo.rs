//! What flotilla stamps, run for real: each opted-in namespace's workflow-controller, built from
//! Argo's source, runs as a process from its own stamped pod spec (e2e/kubelet/) under its own
//! ServiceAccount, and runs that namespace's Workflows, and only those.

use crate::argo_world::*;
use crate::harness::*;
use flotilla::status::NamespaceWorker;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn each_namespace_runs_its_own_real_controller_and_only_its_own_workflows() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = Fleet::new("argo");
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let node = argo_node(&client, "e2e-argo-node", &image).await;
    let _flotilla = fleet.start();
    let (a, b) = ("argo-team-a", "argo-team-b");
    for name in [a, b] {
        fleet.namespace(&client, name, true).await;
    }
    let started = Instant::now();
    for name in [a, b] {
        let pod = wait_controller_up(&client, name).await;
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("argo"),
            "{name}: runs as the stamped ServiceAccount"
        );
        assert_eq!(
            node.running(name),
            1,
            "{name}: its controller is a process on the node"
        );
    }

    // A Workflow that needs no pod, in team-a: run by team-a's controller, never by team-b's.
    submit(&client, a, &pause_workflow("pauses", Some(a), 2, 1)).await;
    let status = wait_run(&client, &node, a, "pauses", "Succeeded").await;
    assert_eq!(status["progress"], "2/2", "both steps ran: {status}");
    eventually(&format!("{a}'s controller logs the Workflow"), || async {
        node.logs(a).contains("pauses").then_some(())
    })
    .await;
    assert!(
        !node.logs(b).contains("pauses"),
        "team-b's controller never saw team-a's Workflow:\n{}",
        node.logs(b)
    );

    // A Workflow with a container step: its pod made in team-a, under the executor
    // ServiceAccount and with the executor image that values name. Nothing runs it.
    let executor_image = fleet.values["executorImage"].as_str().unwrap();
    let executor_account = fleet.values["workflowDefaults"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    let mut container = pause_workflow("container", Some(a), 1, 1);
    container.data["spec"]["templates"] = serde_json::json!([
        {"name": "main", "container": {"image": "busybox", "command": ["echo", "hello"]}}
    ]);
    submit(&client, a, &container).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), a);
    let pod = eventually("the container step's pod", || async {
        let list = pods
            .list(&ListParams::default().labels("workflows.argoproj.io/workflow=container"))
            .await
            .ok()?;
        list.items.into_iter().next()
    })
    .await;
    let spec = pod.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some(executor_account));
    let images: Vec<(String, String)> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect();
    assert!(
        images.contains(&("main".into(), "busybox".into())),
        "{images:?}"
    );
    assert!(
        images.contains(&("wait".into(), executor_image.into())),
        "the executor image from values: {images:?}"
    );

    // A minute of work at least, and no request of either controller failed.
    eventually_within(
        Duration::from_secs(120),
        "a minute of the controllers' work",
        || async { (started.elapsed() >= Duration::from_secs(60)).then_some(()) },
    )
    .await;
    for name in [a, b] {
        let log = node.logs(name);
        assert!(
            log.to_lowercase().contains("level=info"),
            "{name}'s controller logged nothing:\n{log}"
        );
        let failed = failed_requests(&log);
        assert!(
            failed.is_empty(),
            "{name}'s controller had requests fail:\n{}",
            failed.join("\n")
        );
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_without_the_instance_label_waits_untouched_until_labelled() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = Fleet::new("argo-label");
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let node = argo_node(&client, "e2e-argo-label-node", &image).await;
    let _flotilla = fleet.start();
    let ns = "argo-label-a";
    fleet.namespace(&client, ns, true).await;
    wait_controller_up(&client, ns).await;

    submit(&client, ns, &pause_workflow("unlabelled", None, 1, 1)).await;
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    eventually("flotilla counts one ignored Workflow", || async {
        let status = workers.get_opt(ns).await.ok()??.status?;
        (status.workflows_ignored == Some(1)).then_some(())
    })
    .await;
    let before = workflows(&client, ns).get("unlabelled").await.unwrap();
    // A labelled Workflow submitted after it runs to the end; the controller, which saw both,
    // never touched the unlabelled one meanwhile.
    submit(&client, ns, &pause_workflow("labelled", Some(ns), 1, 1)).await;
    wait_run(&client, &node, ns, "labelled", "Succeeded").await;
    let after = workflows(&client, ns).get("unlabelled").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "untouched"
    );
    assert!(
        after.data["status"].is_null(),
        "no status: {}",
        after.data["status"]
    );
    assert!(
        !node.logs(ns).contains("unlabelled"),
        "the controller never worked on it"
    );

    let label = serde_json::json!({"metadata": {"labels": {INSTANCE_LABEL: ns}}});
    workflows(&client, ns)
        .patch("unlabelled", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    wait_run(&client, &node, ns, "unlabelled", "Succeeded").await;
    eventually("flotilla counts none ignored", || async {
        let status = workers.get_opt(ns).await.ok()??.status?;
        (status.workflows_ignored.unwrap_or(0) == 0).then_some(())
    })
    .await;
    node.stop().await;
}

/// The pod of the namespace's controller and how often its container restarted.
async fn controller_identity(client: &kube::Client, namespace: &str) -> (String, i32) {
    let pod = controller_pod(client, namespace)
        .await
        .expect("a controller pod");
    let restarts = pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.first().map(|c| c.restart_count))
        .unwrap_or(0);
    (pod.metadata.uid.unwrap_or_default(), restarts)
}

/// When each Workflow started and finished, once all succeeded.
async fn run_spans(
    client: &kube::Client,
    node: &crate::kubelet::Node,
    namespace: &str,
    names: &[&str],
) -> Vec<(String, String)> {
    let mut spans = Vec::new();
    for name in names {
        let status = wait_run(client, node, namespace, name, "Succeeded").await;
        let text = |key: &str| status[key].as_str().unwrap_or_default().to_string();
        spans.push((text("startedAt"), text("finishedAt")));
    }
    spans
}

/// Whether two Workflows' runs overlapped in time.
fn overlapped(spans: &[(String, String)]) -> bool {
    let (x, y) = (&spans[0], &spans[1]);
    x.0 < y.1 && y.0 < x.1
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parallelism_override_and_a_config_rollout_reach_the_running_controllers() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let mut fleet = Fleet::new("argo-knobs");
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let node = argo_node(&client, "e2e-argo-knobs-node", &image).await;
    let flotilla = fleet.start();
    let (a, b) = ("argo-knobs-a", "argo-knobs-b");
    for name in [a, b] {
        fleet.namespace(&client, name, true).await;
        wait_controller_up(&client, name).await;
    }
    let identity_a = controller_identity(&client, a).await;
    let identity_b = controller_identity(&client, b).await;

    // One namespace's override: parallelism 1 there, so its two Workflows run one after the
    // other, while the other namespace's two run at once.
    let reloads = config_reloads(&node, a);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let patch = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "1"}}});
    namespaces
        .patch(a, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_reloaded(&client, &node, a, "1", reloads).await;
    for ns in [a, b] {
        for name in ["first", "second"] {
            submit(&client, ns, &pause_workflow(name, Some(ns), 1, 3)).await;
        }
    }
    let spans = run_spans(&client, &node, a, &["first", "second"]).await;
    assert!(
        !overlapped(&spans),
        "with parallelism 1, {a}'s ran one after the other: {spans:?}"
    );
    let spans = run_spans(&client, &node, b, &["first", "second"]).await;
    assert!(
        overlapped(&spans),
        "{b}'s, at parallelism 50, ran at once: {spans:?}"
    );

    // A fleet-wide value rolled out as a new revision reaches the other running controller.
    flotilla.stop();
    let reloads = config_reloads(&node, b);
    fleet.values["parallelism"] = serde_json::json!(1);
    let _flotilla = fleet.start();
    wait_reloaded(&client, &node, b, "1", reloads).await;
    for name in ["third", "fourth"] {
        submit(&client, b, &pause_workflow(name, Some(b), 1, 3)).await;
    }
    let spans = run_spans(&client, &node, b, &["third", "fourth"]).await;
    assert!(
        !overlapped(&spans),
        "after the rollout {b}'s ran one after the other: {spans:?}"
    );
    assert_eq!(
        controller_identity(&client, a).await,
        identity_a,
        "no restart in {a}: same pod, no container restart"
    );
    assert_eq!(
        controller_identity(&client, b).await,
        identity_b,
        "no restart in {b}"
    );
    node.stop().await;
}

/// How often the namespace's controller has taken its ConfigMap up again so far.
fn config_reloads(node: &crate::kubelet::Node, namespace: &str) -> usize {
    node.logs(namespace)
        .lines()
        .filter(|l| {
            l.contains("Configuration updated") && l.contains("component=configmap_watcher")
        })
        .count()
}

/// Waits until the namespace's stamped ConfigMap says `parallelism`, and its running controller
/// has taken the ConfigMap up more than `before` times.
async fn wait_reloaded(
    client: &kube::Client,
    node: &crate::kubelet::Node,
    namespace: &str,
    value: &str,
    before: usize,
) {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    eventually(
        &format!("{namespace}'s ConfigMap at parallelism {value}"),
        || async {
            let map = maps.get_opt("workflow-controller-configmap").await.ok()??;
            (map.data?.get("parallelism")? == value).then_some(())
        },
    )
    .await;
    eventually(
        &format!("{namespace}'s controller taking its ConfigMap up again"),
        || async { (config_reloads(node, namespace) > before).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn opting_out_stops_the_controller_process_and_reaps_everything() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = Fleet::new("argo-out");
    let image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    let node = argo_node(&client, "e2e-argo-out-node", &image).await;
    let _flotilla = fleet.start();
    let ns = "argo-out-a";
    fleet.namespace(&client, ns, true).await;
    wait_controller_up(&client, ns).await;
    assert_eq!(node.running(ns), 1);

    fleet.set_opt_in(&client, ns, None).await;
    fleet.wait_reaped(&client, ns).await;
    eventually(&format!("{ns}'s controller process stopped"), || async {
        (node.running(ns) == 0).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{ns}'s controller pod gone"), || async {
        pods.list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    node.stop().await;
}
