//! The light stand-in for a kubelet, for fleets too large to run for real: the controller pods
//! of the namespaces starting with a prefix are marked Ready when they run an image the caller
//! accepts, and stay Pending otherwise, as a pod whose image crashes would. Nothing runs. The
//! real ReplicaSet and Deployment controllers then compute availability from them.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, ResourceExt};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The label of the pods of the stamped workflow-controller Deployment.
const CONTROLLER_PODS: &str = "app=workflow-controller";

pub struct ReadyMarker {
    accepted: Arc<Mutex<BTreeSet<String>>>,
    changed: Arc<Notify>,
    /// Pods marked ready so far.
    pub marked: Arc<Mutex<u64>>,
    task: JoinHandle<()>,
}

impl ReadyMarker {
    /// Watches the controller pods (one watch, not a poll: the bench's API server is being
    /// measured) and marks those of namespaces starting with `prefix` running `accepted` ready.
    pub fn start(client: &kube::Client, prefix: &str, accepted: &[&str]) -> ReadyMarker {
        let accepted = Arc::new(Mutex::new(accepted.iter().map(|s| s.to_string()).collect()));
        let changed = Arc::new(Notify::new());
        let marked = Arc::new(Mutex::new(0));
        let task = tokio::spawn(mark_ready(
            client.clone(),
            prefix.to_string(),
            Arc::clone(&accepted),
            Arc::clone(&changed),
            Arc::clone(&marked),
        ));
        ReadyMarker {
            accepted,
            changed,
            marked,
            task,
        }
    }

    /// From now on, pods running `image` become ready too.
    pub fn accept(&self, image: &str) {
        self.accepted.lock().unwrap().insert(image.to_string());
        self.changed.notify_one();
    }
}

impl Drop for ReadyMarker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn mark_ready(
    client: kube::Client,
    prefix: String,
    accepted: Arc<Mutex<BTreeSet<String>>>,
    changed: Arc<Notify>,
    marked: Arc<Mutex<u64>>,
) {
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().labels(CONTROLLER_PODS);
    let mut events = watcher::watcher(pods, config).default_backoff().boxed();
    // Not ready yet, by (namespace, name): their image, looked at again when `accepted` grows.
    let mut waiting: BTreeMap<(String, String), String> = BTreeMap::new();
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { return };
                let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event else {
                    continue;
                };
                let namespace = pod.namespace().unwrap_or_default();
                if !namespace.starts_with(&prefix) {
                    continue;
                }
                let key = (namespace, pod.name_any());
                if is_ready(&pod) {
                    waiting.remove(&key);
                } else {
                    waiting.insert(key, image_of(&pod));
                }
            }
            () = changed.notified() => {}
        }
        let ready_now: Vec<(String, String)> = {
            let accepted = accepted.lock().unwrap();
            waiting
                .iter()
                .filter(|(_, image)| accepted.contains(*image))
                .map(|(key, _)| key.clone())
                .collect()
        };
        for (namespace, name) in ready_now {
            waiting.remove(&(namespace.clone(), name.clone()));
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let patch = serde_json::json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            // A pod deleted meanwhile needs nothing.
            if api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .is_ok()
            {
                *marked.lock().unwrap() += 1;
            }
        }
    }
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
