//! Workflows: what counting them costs flotilla. Argo's Workflow CRD (of the release
//! e2e/build.sh built) is installed while flotilla runs the fleet; once every NamespaceWorker
//! counts, W Workflows (BENCH_WORKFLOWS, default 20,000) are created across the fleet, one in ten
//! without the instanceid label. Measured: the time until every NamespaceWorker shows its
//! ignored ones, and flotilla's resident memory before and after, per Workflow. flotilla keeps
//! no Workflow, only counts, so the growth must stay far below a Workflow's metadata (~1 KiB).

use crate::cluster::Flotilla;
use crate::phase::{Phase, Scenario};
use crate::probe::Probe;
use crate::procstat::Usage;
use crate::report::{Row, Target};
use flotilla::status::NamespaceWorker;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use std::time::{Duration, Instant};

/// A Workflow kept as metadata would cost at least this much; counting must cost far less.
const BYTES_PER_WORKFLOW: f64 = 256.0;
const UNLABELLED_EVERY: usize = 10;
const CONCURRENCY: usize = 32;

pub struct Counted {
    workflows: usize,
    /// Resident memory grown from before the first Workflow to after the last was counted.
    grown_bytes: Option<f64>,
}

impl Counted {
    pub fn target(&self) -> Target {
        let per = self.grown_bytes.map(|b| b / self.workflows.max(1) as f64);
        Target {
            what: format!("memory per live Workflow <= {BYTES_PER_WORKFLOW:.0} bytes"),
            pass: per.is_some_and(|p| p <= BYTES_PER_WORKFLOW),
            detail: match (per, self.grown_bytes) {
                (Some(per), Some(grown)) => format!(
                    "{per:.0} bytes a Workflow: RSS grew {:.2} MiB for {} Workflows",
                    grown / 1048576.0,
                    self.workflows
                ),
                _ => "NO READING of flotilla's RSS".into(),
            },
        }
    }
}

fn rss_bytes(flotilla: &Flotilla) -> Option<f64> {
    let pid = flotilla.process().ok()?;
    crate::controllers::rss_mib(pid).map(|mib| mib * 1024.0 * 1024.0)
}

/// Every NamespaceWorker's `WorkflowsIgnored` reason and count.
async fn ignored(admin: &kube::Client) -> Vec<(String, Option<u32>)> {
    let workers: Api<NamespaceWorker> = Api::all(admin.clone());
    let Ok(list) = workers.list(&Default::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter_map(|w| {
            let status = w.status?;
            let reason = status
                .conditions
                .iter()
                .find(|c| c.type_ == "WorkflowsIgnored")?
                .reason
                .clone();
            Some((reason, status.workflows_ignored))
        })
        .collect()
}

async fn wait_for<F: Fn(&[(String, Option<u32>)]) -> bool>(
    admin: &kube::Client,
    what: &str,
    limit: Duration,
    done: F,
) -> Instant {
    let start = Instant::now();
    loop {
        if done(&ignored(admin).await) {
            return Instant::now();
        }
        assert!(
            start.elapsed() < limit,
            "bench: timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Argo's Workflow CRD, from the release e2e/build.sh built.
fn argo_workflow_crd(repo: &std::path::Path) -> std::path::PathBuf {
    let out = std::process::Command::new("bash")
        .arg(repo.join("e2e/build.sh"))
        .args(["path", "argo"])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "e2e/build.sh path argo failed");
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::path::Path::new(&dir).join("crds/argoproj.io_workflows.yaml")
}

pub async fn run(phase: &mut Phase<'_>, flotilla: &Flotilla) -> (Row, Counted) {
    let total: usize = std::env::var("BENCH_WORKFLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let admin = phase.cluster.admin.clone();
    let text = std::fs::read_to_string(argo_workflow_crd(&phase.cluster.repo))
        .expect("Argo's Workflow CRD, built by e2e/build.sh");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("the CRD parses");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.patch(
        "workflows.argoproj.io",
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("the Workflow CRD installed");
    let workers = ignored(&admin).await.len();
    eprintln!("bench: workflows: CRD installed; waiting for {workers} NamespaceWorkers to count");
    let limit = phase.bench.timeout;
    wait_for(&admin, "every NamespaceWorker counting", limit, |seen| {
        seen.len() == workers && seen.iter().all(|(reason, _)| reason == "NoneIgnored")
    })
    .await;
    let namespaces: Vec<String> = {
        let api: Api<NamespaceWorker> = Api::all(admin.clone());
        let list = api
            .list(&Default::default())
            .await
            .expect("NamespaceWorkers");
        list.items.into_iter().map(|w| w.spec.namespace).collect()
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_bytes(flotilla);

    eprintln!(
        "bench: workflows: creating {total} across {} namespaces",
        namespaces.len()
    );
    phase.audit.take();
    let usage = Usage::start(flotilla.process());
    let mut probe = Probe::start(&admin).await;
    probe.flotilla(flotilla, false);
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
    let resource = ApiResource::from_gvk(&gvk);
    let t0 = Instant::now();
    futures::stream::iter(0..total)
        .for_each_concurrent(CONCURRENCY, |i| {
            let (admin, resource) = (admin.clone(), resource.clone());
            let namespace = namespaces[i % namespaces.len()].clone();
            async move {
                let mut metadata = serde_json::json!({"name": format!("wf-{i}")});
                if i % UNLABELLED_EVERY != 0 {
                    metadata["labels"] =
                        serde_json::json!({"workflows.argoproj.io/controller-instanceid": namespace});
                }
                let workflow: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                    "metadata": metadata, "spec": {"entrypoint": "main"},
                }))
                .expect("a Workflow");
                let api: Api<DynamicObject> = Api::namespaced_with(admin, &namespace, &resource);
                api.create(&PostParams::default(), &workflow).await.expect("Workflow created");
            }
        })
        .await;
    let created = t0.elapsed().as_secs_f64();
    let unlabelled = total.div_ceil(UNLABELLED_EVERY);
    let done = wait_for(&admin, "every ignored Workflow counted", limit, |seen| {
        seen.iter().filter_map(|(_, n)| *n).sum::<u32>() as usize == unlabelled
    })
    .await;
    let seconds = (done - t0).as_secs_f64();
    let (cp, used, window) = phase.finish(&probe, &usage, seconds).await;
    let after = rss_bytes(flotilla);
    let counted = Counted {
        workflows: total,
        grown_bytes: before.zip(after).map(|(b, a)| a - b),
    };
    let notes = vec![format!(
        "{total} Workflows created ({CONCURRENCY} at once, in {created:.1} s) across {} namespaces, \
             one in {UNLABELLED_EVERY} without the instanceid label; from the first create until every \
             NamespaceWorker shows its ignored ones ({unlabelled} in all); RSS before {:.1} MiB, after {:.1} MiB; {cp}",
        namespaces.len(),
        before.unwrap_or(f64::NAN) / 1048576.0,
        after.unwrap_or(f64::NAN) / 1048576.0,
    )];
    let scenario = Scenario {
        name: "flotilla workflows",
        objects: total,
        seconds,
        throughput: true,
    };
    (phase.row(scenario, used, &window, notes), counted)
}
