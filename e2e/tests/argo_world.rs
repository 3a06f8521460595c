//! The world a team's Workflow runs in: Argo's real CRDs, the real workflow-controller built from
//! Argo's source (e2e/build.sh), and a node that runs the pods flotilla stamps for it
//! (e2e/kubelet/). Workflow pods themselves are not run: they stay Pending, as on a cluster whose
//! nodes lack their images.

use crate::harness::*;
use crate::kubelet::{Node, Program};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The label a Workflow carries for the controller whose instanceID it names.
pub const INSTANCE_LABEL: &str = "workflows.argoproj.io/controller-instanceid";

/// Argo's build, as e2e/build.sh made it: `bin/workflow-controller` and `crds/`.
pub fn argo_build() -> PathBuf {
    let out = Command::new("bash")
        .arg(env().repo.join("e2e/build.sh"))
        .args(["path", "argo"])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "e2e/build.sh path argo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Installs Argo's CRDs, as the README says (server-side: they are too large for a client-side
/// apply), and waits until Workflows are served.
pub async fn install_argo_crds(client: &kube::Client) {
    let crds = argo_build().join("crds");
    kubectl(
        &env().admin_kubeconfig,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            crds.to_str().unwrap(),
        ],
    );
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually("Argo's CRDs established", || async {
        let list = api.list(&Default::default()).await.ok()?;
        let established = list
            .items
            .iter()
            .filter(|crd| crd.spec.group == "argoproj.io")
            .filter(|crd| {
                crd.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    })
            })
            .count();
        (established == 8).then_some(())
    })
    .await;
    eventually("Workflows served", || async {
        workflows(client, "default")
            .list(&Default::default())
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

pub fn workflows(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The API server on the host's loopback.
pub fn api_server() -> SocketAddr {
    crate::common::api_server_address(&env().admin_kubeconfig)
}

/// A node running the real workflow-controller for pods of `image`. Its pods' files and logs stay
/// in the control plane's state dir, for a look after a failure.
pub async fn argo_node(client: &kube::Client, name: &str, image: &str) -> Node {
    // A name of this run's own: pods a node of an earlier run left behind stay bound to that
    // one, which is gone, until the pod garbage collector deletes them.
    let name = format!("{name}-{}", std::process::id());
    let state = env().admin_kubeconfig.parent().unwrap().to_path_buf();
    let dir = state.join("nodes").join(&name);
    let program = Program {
        image: image.to_string(),
        bin: argo_build().join("bin"),
        entrypoint: vec!["workflow-controller".into()],
        // The user of Argo's workflow-controller image (its Dockerfile's USER).
        user: (8737, 8737),
    };
    Node::start(client, &name, vec![program], api_server(), dir).await
}

/// A Workflow that needs no pod: `steps` steps, each a suspend of `seconds`.
pub fn pause_workflow(
    name: &str,
    label: Option<&str>,
    steps: usize,
    seconds: u32,
) -> DynamicObject {
    let mut metadata = serde_json::json!({"name": name});
    if let Some(id) = label {
        metadata["labels"] = serde_json::json!({INSTANCE_LABEL: id});
    }
    let steps: Vec<serde_json::Value> = (0..steps)
        .map(|i| serde_json::json!([{"name": format!("pause-{i}"), "template": "pause"}]))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": metadata,
        "spec": {"entrypoint": "main", "templates": [
            {"name": "main", "steps": steps},
            {"name": "pause", "suspend": {"duration": format!("{seconds}s")}},
        ]},
    }))
    .unwrap()
}

pub async fn submit(client: &kube::Client, namespace: &str, workflow: &DynamicObject) {
    workflows(client, namespace)
        .create(&PostParams::default(), workflow)
        .await
        .unwrap_or_else(|e| panic!("creating Workflow in {namespace}: {e}"));
}

/// The Workflow's `status`, or Null.
pub async fn workflow_status(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> serde_json::Value {
    match workflows(client, namespace).get_opt(name).await.unwrap() {
        Some(w) => w.data["status"].clone(),
        None => serde_json::Value::Null,
    }
}

/// Lines of a controller's log that tell of a request the API server refused or that failed.
pub fn failed_requests(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            lower.contains("forbidden")
                || lower.contains("failed to list")
                || lower.contains("failed to watch")
                || lower.contains("unauthorized")
                || lower.contains("level=error")
                || lower.contains("level=fatal")
        })
        .collect()
}

/// Waits until the Workflow's phase is `phase`, failing at once, with the lines, should the
/// namespace's controller log a failed request meanwhile (a rule its Role lacks, say).
pub async fn wait_run(
    client: &kube::Client,
    node: &crate::kubelet::Node,
    namespace: &str,
    name: &str,
    phase: &str,
) -> serde_json::Value {
    let what = format!("Workflow {namespace}/{name} {phase}");
    eventually_within(Duration::from_secs(120), &what, || async {
        let log = node.logs(namespace);
        let failed = failed_requests(&log);
        assert!(
            failed.is_empty(),
            "{namespace}'s controller had requests fail:\n{}",
            failed.join("\n")
        );
        let status = workflow_status(client, namespace, name).await;
        (status["phase"] == phase).then_some(status)
    })
    .await
}

/// Waits until the namespace's workflow-controller Deployment has its pod available.
pub async fn wait_controller_up(client: &kube::Client, namespace: &str) -> Pod {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    eventually_within(
        Duration::from_secs(120),
        &format!("{namespace}'s controller available"),
        || async {
            let d = deployments.get_opt("workflow-controller").await.ok()??;
            let available = d.status?.available_replicas.unwrap_or(0);
            (available == 1).then_some(())
        },
    )
    .await;
    controller_pod(client, namespace)
        .await
        .expect("the controller's pod")
}

pub async fn controller_pod(client: &kube::Client, namespace: &str) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels("app=workflow-controller"))
        .await
        .ok()?;
    list.items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
}
