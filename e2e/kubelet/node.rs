//! A node that runs pods for real: it registers a Node, binds the pods it can run to it (there is
//! no scheduler), runs each as a local process (pod.rs), and stops it when the pod is deleted,
//! say when the Deployment scales down. It runs the pods whose image is one of its programs, and
//! leaves every other pod Pending and unbound, as a cluster without a node for it would.

use super::place::Place;
use super::pod::{self, Program, Stop};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as NodeObject, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Labels the node carries, for pods' nodeSelectors.
const OS: &str = "linux";

pub struct Node {
    pub name: String,
    client: Client,
    pods: Arc<Mutex<Pods>>,
    task: JoinHandle<()>,
    drained: bool,
}

/// What the node knows of its pods, by uid.
#[derive(Default)]
struct Pods {
    running: BTreeMap<String, Running>,
    /// Every pod it ran, in the order it started them.
    ran: Vec<Ran>,
}

struct Ran {
    namespace: String,
    name: String,
    uid: String,
    dir: PathBuf,
}

struct Running {
    stop: watch::Sender<Stop>,
    task: JoinHandle<()>,
}

impl Node {
    /// Registers Node `name` and starts running, in `dir`, the pods of `programs`' images, with
    /// the API server at `api_server` (on the host's loopback).
    pub async fn start(
        client: &Client,
        name: &str,
        programs: Vec<Program>,
        api_server: SocketAddr,
        dir: PathBuf,
    ) -> Node {
        register(client, name).await;
        let pods = Arc::new(Mutex::new(Pods::default()));
        let task = tokio::spawn(serve(
            client.clone(),
            name.to_string(),
            programs,
            api_server,
            dir,
            Arc::clone(&pods),
        ));
        Node {
            name: name.to_string(),
            client: client.clone(),
            pods,
            task,
            drained: false,
        }
    }

    /// The container logs of every pod this node ran in `namespace`, oldest first.
    pub fn logs(&self, namespace: &str) -> String {
        let pods = self.pods.lock().unwrap();
        let mut out = String::new();
        for ran in pods.ran.iter().filter(|r| r.namespace == namespace) {
            let log = std::fs::read_to_string(pod::log_path(&ran.dir)).unwrap_or_default();
            out.push_str(&format!("==> pod {}\n{log}", ran.name));
        }
        out
    }

    /// How many pods of `namespace` run on this node now.
    pub fn running(&self, namespace: &str) -> usize {
        let pods = self.pods.lock().unwrap();
        let in_namespace = |uid: &String| {
            pods.ran
                .iter()
                .any(|r| r.namespace == namespace && &r.uid == uid)
        };
        pods.running
            .iter()
            .filter(|(uid, r)| !r.task.is_finished() && in_namespace(uid))
            .count()
    }

    /// Drains the node: stops every pod's process at once, deletes the pods bound to it (as a
    /// drain does: their ReplicaSets make new ones, which wait for a node), and removes the Node.
    pub async fn stop(mut self) {
        self.drain().await;
    }

    async fn drain(&mut self) {
        self.task.abort();
        let running: Vec<Running> = std::mem::take(&mut self.pods.lock().unwrap().running)
            .into_values()
            .collect();
        for r in &running {
            let _ = r.stop.send(Stop::Now);
        }
        for r in running {
            let _ = r.task.await;
        }
        let pods: Api<Pod> = Api::all(self.client.clone());
        let bound = ListParams::default().fields(&format!("spec.nodeName={}", self.name));
        for pod in pods.list(&bound).await.map(|l| l.items).unwrap_or_default() {
            let api: Api<Pod> =
                Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
            let _ = api
                .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                .await;
        }
        let nodes: Api<NodeObject> = Api::all(self.client.clone());
        let _ = nodes.delete(&self.name, &DeleteParams::default()).await;
        self.drained = true;
    }
}

impl Drop for Node {
    /// A test that panicked drains its node all the same, so that nothing it ran outlives it and
    /// no namespace waits for pods of a node that is gone.
    fn drop(&mut self) {
        if self.drained {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| handle.block_on(self.drain()));
            }
            // No runtime to drain on: at least no process outlives the node (each pod's task
            // owns its process, killed when the task is dropped).
            _ => {
                self.task.abort();
                for (_, r) in std::mem::take(&mut self.pods.lock().unwrap().running) {
                    r.task.abort();
                }
            }
        }
    }
}

async fn register(client: &Client, name: &str) {
    let nodes: Api<NodeObject> = Api::all(client.clone());
    let node: NodeObject = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/os": OS, "kubernetes.io/hostname": name}},
    }))
    .expect("a Node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("registering Node {name}: {e}"),
    }
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = serde_json::json!({"status": {
        "capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
        "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110"},
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "the e2e node stand-in runs pods as local processes",
            "lastHeartbeatTime": now, "lastTransitionTime": now}],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("Node {name}'s status: {e}"));
}

async fn serve(
    client: Client,
    node: String,
    programs: Vec<Program>,
    api_server: SocketAddr,
    dir: PathBuf,
    pods: Arc<Mutex<Pods>>,
) {
    let api: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                let Some(program) = program_for(&pod, &programs) else {
                    continue;
                };
                let uid = pod.uid().unwrap_or_default();
                let bound_here =
                    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str());
                let unbound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_none());
                let deleting = pod.metadata.deletion_timestamp.is_some();
                if unbound && !deleting && fits(&pod) {
                    bind(&client, &pod, &node).await;
                } else if bound_here && deleting {
                    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
                    let grace = Duration::from_secs(grace.clamp(0, 30) as u64);
                    let signalled = pods
                        .lock()
                        .unwrap()
                        .running
                        .get(&uid)
                        .map(|r| r.stop.send(Stop::Graceful(grace)));
                    // Never started here (say, before this node came up): only the confirmation.
                    if signalled.is_none() {
                        let place = place(&client, &node, &dir, &pod, api_server);
                        pod::finish(&place, &pod, Stop::Graceful(grace)).await;
                    }
                } else if bound_here && !finished(&pod) {
                    let mut pods = pods.lock().unwrap();
                    if !pods.running.contains_key(&uid) {
                        let place = place(&client, &node, &dir, &pod, api_server);
                        pods.ran.push(Ran {
                            namespace: pod.namespace().unwrap_or_default(),
                            name: pod.name_any(),
                            uid: uid.clone(),
                            dir: place.dir.clone(),
                        });
                        let (stop, receiver) = watch::channel(Stop::Run);
                        let task = tokio::spawn(pod::run(place, pod, program, receiver));
                        pods.running.insert(uid, Running { stop, task });
                    }
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                let uid = pod.uid().unwrap_or_default();
                if let Some(r) = pods.lock().unwrap().running.get(&uid) {
                    let _ = r.stop.send(Stop::Now);
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!("node {node}: pod watch: {e}"),
        }
    }
}

fn place(
    client: &Client,
    node: &str,
    dir: &std::path::Path,
    pod: &Pod,
    api_server: SocketAddr,
) -> Place {
    let uid = pod.uid().unwrap_or_default();
    Place {
        client: client.clone(),
        node: node.to_string(),
        dir: dir.join(format!(
            "{}_{}_{uid}",
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        )),
        api_server,
    }
}

/// The program for a pod whose one container runs one of the node's images.
fn program_for(pod: &Pod, programs: &[Program]) -> Option<Program> {
    let image = pod.spec.as_ref()?.containers.first()?.image.as_deref()?;
    programs.iter().find(|p| p.image == image).cloned()
}

/// Whether the pod's nodeSelector lets it run here.
fn fits(pod: &Pod) -> bool {
    let selector = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    selector
        .iter()
        .all(|(key, value)| key == "kubernetes.io/os" && value == OS)
}

fn finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Binds the pod to the node, as a scheduler does.
async fn bind(client: &Client, pod: &Pod, node: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let binding = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name_any(), "uid": pod.uid()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let bound: kube::Result<serde_json::Value> = api
        .create_subresource("binding", &pod.name_any(), &PostParams::default(), &binding)
        .await;
    if let Err(e) = bound {
        eprintln!("node {node}: binding pod {}: {e}", pod.name_any());
    }
}
