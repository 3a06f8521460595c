//! A progressive rollout of a new image to the whole fleet, by a strategy a production fleet
//! would use: `maxUnavailable` 10%, each namespace done once its controller has been healthy for
//! `soakSeconds`. The bench stands in for the kubelet (e2e/kubelet/ready_marker.rs): pods running the new
//! image are marked Ready, so the real Deployment controller computes availability. Timed from
//! the process start (a restart with the new config) until the Fleet is Complete; the peak of
//! namespaces updating or unhealthy at once is sampled from the Deployments, against the budget.

use crate::cluster::Flotilla;
use crate::kubelet::ReadyMarker;
use crate::phase::{Phase, Scenario};
use crate::probe::{Probe, wait_idle};
use crate::procstat::Usage;
use crate::report::{Row, Target};
use crate::setup::verify;
use flotilla::render::Renderer;
use flotilla::rollout::Phase as RolloutPhase;
use flotilla::rollout::fleet::Fleet;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The strategy rolled out by (the config's `rollout`).
pub const MAX_UNAVAILABLE_PERCENT: usize = 10;
pub const SOAK_SECONDS: u64 = 5;

pub fn strategy() -> serde_json::Value {
    serde_json::json!({
        "maxUnavailable": format!("{MAX_UNAVAILABLE_PERCENT}%"),
        "soakSeconds": SOAK_SECONDS,
    })
}

/// What the target is judged on.
pub struct Progressive {
    pub seconds: f64,
    pub peak: usize,
    pub budget: usize,
}

impl Progressive {
    pub fn target(&self) -> Target {
        Target {
            what: format!(
                "progressive rollout: at most maxUnavailable ({MAX_UNAVAILABLE_PERCENT}%) updating or unhealthy at once"
            ),
            pass: self.peak <= self.budget && self.peak > 0,
            detail: format!(
                "peak {} of a budget of {}, complete in {:.1} s",
                self.peak, self.budget, self.seconds
            ),
        }
    }
}

const EVERY: Duration = Duration::from_millis(500);

pub async fn run(
    phase: &mut Phase<'_>,
    flotilla: Flotilla,
    (config, renderer): (&Path, &Renderer),
    image: &str,
) -> (Row, Flotilla, Progressive) {
    eprintln!("bench: progressive rollout");
    let bench = phase.bench;
    let admin = phase.cluster.admin.clone();
    let idle = wait_idle(bench.idle_max, Some(&flotilla)).await;
    flotilla.stop();
    let kubelet = ReadyMarker::start(&admin, "", &[]);
    let moving = Moving::watch(&admin, image).await;
    phase.audit.take();
    let mut probe = Probe::start(&admin).await;
    let log = bench.work.join("flotilla-progressive.log");
    kubelet.accept(image);
    let mut flotilla = Flotilla::start(&phase.cluster, config, &log);
    let fleets: Api<Fleet> = Api::all(admin.clone());
    let budget = (bench.n * MAX_UNAVAILABLE_PERCENT / 100).max(1);
    let complete = loop {
        let fleet = fleets.get_opt(crate::setup::INSTANCE).await.ok().flatten();
        let status = fleet.and_then(|f| f.status);
        if status.as_ref().is_some_and(|s| {
            s.phase == RolloutPhase::Complete && s.target_hash == renderer.revision()
        }) {
            break Instant::now();
        }
        assert!(
            flotilla.started.elapsed() < bench.timeout,
            "progressive rollout: not complete after {:?}; the Fleet shows {status:?}",
            bench.timeout
        );
        tokio::time::sleep(EVERY).await;
    };
    flotilla.assert_running();
    probe.flotilla(&flotilla, true);
    let usage = Usage::since_start(flotilla.process());
    let seconds = (complete - flotilla.started).as_secs_f64();
    let (cp, used, window) = phase.finish(&probe, &usage, seconds).await;
    let peak = moving.peak();
    let marked = *kubelet.marked.lock().unwrap();
    drop(kubelet);
    let keys = &phase.fleet_keys;
    let (found, with_image) = verify(&admin, keys, Some(image)).await;
    let n = bench.n;
    assert_eq!(
        with_image, n,
        "progressive: Deployments without the new image"
    );
    let notes = vec![
        format!(
            "restart with values.controllerImage={image} and rollout maxUnavailable {MAX_UNAVAILABLE_PERCENT}% \
             ({budget} namespaces), soakSeconds {SOAK_SECONDS}: from process start until the Fleet is \
             Complete ({seconds:.3} s); peak of namespaces at the new image and not yet available, counted \
             at every event of a watch of the Deployments: {peak}; {marked} pods marked ready by the bench's kubelet"
        ),
        format!(
            "verified by LIST: {with_image}/{n} Deployments run the new image, {found}/{} objects exist; {idle}{cp}",
            keys.len()
        ),
    ];
    let scenario = Scenario {
        name: "flotilla progressive",
        objects: keys.len(),
        seconds,
        throughput: false,
    };
    let row = phase.row(scenario, used, &window, notes);
    (
        row,
        flotilla,
        Progressive {
            seconds,
            peak,
            budget,
        },
    )
}

/// The Deployments at the new image and not yet available, counted at each event of a watch of
/// them: at N=10,000, going through all of them twice a second took a quarter of a core from
/// the machine being measured.
struct Moving {
    peak: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Moving {
    /// Returns once the watch has listed every Deployment.
    async fn watch(client: &kube::Client, image: &str) -> Moving {
        let api: Api<Deployment> = Api::all(client.clone());
        let labels =
            watcher::Config::default().labels("app.kubernetes.io/name=workflow-controller");
        let (listed, ready) = oneshot::channel();
        let peak = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(count(
            api,
            labels,
            image.to_string(),
            Arc::clone(&peak),
            listed,
        ));
        ready.await.expect("the Deployments' watch");
        Moving { peak, task }
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for Moving {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn count(
    api: Api<Deployment>,
    labels: watcher::Config,
    image: String,
    peak: Arc<AtomicUsize>,
    listed: oneshot::Sender<()>,
) {
    let mut listed = Some(listed);
    let mut moving = HashSet::new();
    let mut events = watcher::watcher(api, labels).default_backoff().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(d) | Event::InitApply(d)) => {
                let key = (d.namespace(), d.name_any());
                if image_of(&d) == image && !available(&d) {
                    moving.insert(key);
                } else {
                    moving.remove(&key);
                }
            }
            Ok(Event::Delete(d)) => {
                moving.remove(&(d.namespace(), d.name_any()));
            }
            // A relist: the set is built again from its objects.
            Ok(Event::Init) => moving.clear(),
            Ok(Event::InitDone) => {
                if let Some(listed) = listed.take() {
                    let _ = listed.send(());
                }
            }
            // The backoff retries the watch.
            Err(_) => {}
        }
        peak.fetch_max(moving.len(), Ordering::Relaxed);
    }
}

fn image_of(d: &Deployment) -> &str {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// Healthy as flotilla judges it (the new generation runs, all replicas updated and available).
fn available(d: &Deployment) -> bool {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| flotilla::status::availability(&v))
        .is_some_and(|h| h.is_available())
}
