//! The baselines flotilla is measured against, each on a fresh control plane with the same
//! namespaces flotilla's phase starts with:
//!
//! - **limit**: a bare client that server-side applies exactly the objects flotilla renders, with
//!   flotilla's concurrency and identity, and does nothing else (no watches, no reads); once
//!   more with the fleet view flotilla also writes, and once with the rollout's values;
//! - **script**: `flotilla render | kubectl apply --server-side -f -`, one namespace after the
//!   other, as admins do without flotilla (on a sample, extrapolated to N).

use crate::audit::{Actor, AuditTail};
use crate::cluster::Cluster;
use crate::phase::observed;
use crate::probe::{Probe, wait_idle};
use crate::report::{Row, record};
use crate::setup::{Bench, INSTANCE, LABEL, names, render, verify};
use crate::tracker::Tracker;
use crate::{common, fleet_view, procstat};
use flotilla::config::Config;
use flotilla::object::{ObjectKey, Stamped};
use flotilla::render::Renderer;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const LIMIT: &str = "limit (bare SSA client)";
pub const LIMIT_ROLLOUT: &str = "limit rollout";
pub const LIMIT_VIEW: &str = "limit + fleet view";
pub const SCRIPT: &str = "script (render|kubectl)";

/// Every baseline, for a fleet of `fleet` (rendered by `renderer`, `rollout` for the rollout).
pub async fn run(
    bench: &Bench,
    (config_path, config): (&Path, &Config),
    (renderer, rollout): (&Renderer, &Renderer),
    fleet: &[String],
) -> Vec<Row> {
    let mut rows = Vec::new();
    let script_names = names("script", bench.script_sample);
    // The limit for flotilla's whole output, stamped objects and fleet view, on a control
    // plane of its own: its objects must be new.
    let mut run = LimitRun::start(bench, config, fleet, &script_names).await;
    eprintln!("bench: limit baseline with the fleet view");
    record(&mut rows, limit(&mut run, LIMIT_VIEW, renderer, true).await);
    run.down();

    let mut run = LimitRun::start(bench, config, fleet, &script_names).await;
    eprintln!("bench: limit baseline");
    record(&mut rows, limit(&mut run, LIMIT, renderer, false).await);
    eprintln!("bench: limit baseline, rollout");
    record(
        &mut rows,
        limit(&mut run, LIMIT_ROLLOUT, rollout, false).await,
    );
    eprintln!(
        "bench: script baseline on {} namespaces",
        script_names.len()
    );
    let (cluster, audit) = (&run.cluster, &mut run.audit);
    let per_namespace = render(renderer, "probe").len();
    let script = script(
        bench,
        cluster,
        config_path,
        &script_names,
        per_namespace,
        audit,
    )
    .await;
    record(&mut rows, script);
    run.down();
    rows
}

/// A control plane for the baselines: fresh, with the fleet's namespaces and `extra` ones (as
/// many as flotilla's phase has: fleet + reaction, so that all start alike), watched by the
/// bench's tracker.
struct LimitRun<'a> {
    bench: &'a Bench,
    config: &'a Config,
    names: &'a [String],
    cluster: Cluster,
    tracker: Tracker,
    audit: AuditTail,
}

impl<'a> LimitRun<'a> {
    async fn start(
        bench: &'a Bench,
        config: &'a Config,
        names: &'a [String],
        extra: &[String],
    ) -> LimitRun<'a> {
        let (cluster, tracker, audit) = observed(bench, &[names, extra], &[]).await;
        LimitRun {
            bench,
            config,
            names,
            cluster,
            tracker,
            audit,
        }
    }

    fn down(self) {
        drop(self.tracker);
        self.cluster.down();
    }
}

/// The limit baseline: exactly flotilla's objects, server-side applied with flotilla's field
/// manager, identity and concurrency (namespaces at once; objects of one namespace in order).
/// Run once to create the fleet, and once more with the rollout's values, to update it. Done
/// when every apply has returned and `tracker` (the same observer flotilla's phase has, with the
/// same watches loading the API server) has seen every object at its revision, and with the
/// fleet view, every NamespaceWorker's status at it and its Event.
async fn limit(
    run: &mut LimitRun<'_>,
    scenario: &'static str,
    renderer: &Renderer,
    with_view: bool,
) -> Row {
    let LimitRun {
        bench,
        config,
        names,
        ref cluster,
        ref tracker,
        ref mut audit,
    } = *run;
    let fleet: Vec<Vec<Stamped>> = names.iter().map(|ns| render(renderer, ns)).collect();
    let expected: Vec<ObjectKey> = fleet.iter().flatten().map(|o| o.key.clone()).collect();
    let params = PatchParams::apply(&config.field_manager).force();
    let errors = AtomicUsize::new(0);
    let idle = wait_idle(bench.idle_max, None).await;
    audit.take();
    let usage = procstat::Usage::start(Ok(std::process::id()));
    let probe = Probe::start(&cluster.admin).await;
    let revision = renderer.revision().to_string();
    let t0 = Instant::now();
    futures::stream::iter(&fleet)
        .for_each_concurrent(config.concurrency as usize, |objects| {
            let (params, errors, revision) = (&params, &errors, &revision);
            async move {
                for object in objects {
                    let api: Api<DynamicObject> = Api::namespaced_with(
                        cluster.flotilla.clone(),
                        &object.key.namespace,
                        &object.key.kind.api_resource(),
                    );
                    let mut tries = 0;
                    while let Err(e) = api
                        .patch(&object.key.name, params, &Patch::Apply(&object.body))
                        .await
                    {
                        tries += 1;
                        errors.fetch_add(1, Ordering::Relaxed);
                        assert!(tries < 5, "{scenario}: applying {}: {e}", object.key);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                if let (true, Some(first)) = (with_view, objects.first()) {
                    let ns = &first.key.namespace;
                    let (client, manager) = (&cluster.flotilla, &config.field_manager);
                    let write = fleet_view::write(client, manager, INSTANCE, ns, objects, revision);
                    if let Err(e) = write.await {
                        panic!("{scenario}: the fleet view of {ns}: {e}");
                    }
                }
            }
        })
        .await;
    let every = Duration::from_millis(50);
    let at = Some(revision.as_str());
    let mut seen = tracker
        .wait_all(scenario, bench.timeout, every, &expected, at)
        .await;
    if with_view {
        seen = tracker
            .wait_view(scenario, bench.timeout, every, names, &revision, true)
            .await;
    }
    let seconds = (seen - t0).as_secs_f64();
    let cp = probe.finish(&cluster.admin, seconds).await;
    let (cpu, _) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, _) = verify(&cluster.admin, &expected, None).await;
    assert_eq!(found, expected.len(), "{scenario}: objects missing");
    Row {
        scenario,
        n: bench.n,
        objects: expected.len(),
        seconds,
        throughput: true,
        rss_mib: None,
        cpu_s: cpu,
        verbs: window.verbs_of(Actor::Flotilla),
        notes: vec![
            format!(
                "{} applies{}, {} namespaces at once, objects of a namespace in order, as flotilla's SA; \
                 {} errors retried; CPU s is the bench process's; {idle}{cp}",
                expected.len(),
                if with_view {
                    " and per namespace a NamespaceWorker create, its status and an Event after its objects"
                } else {
                    ""
                },
                config.concurrency,
                errors.load(Ordering::Relaxed)
            ),
            format!("verified by LIST: {found}/{} objects", expected.len()),
        ]
        .into_iter()
        .chain(window.gap_note())
        .collect(),
    }
}

/// What admins do without flotilla: render and `kubectl apply --server-side`, one namespace
/// after the other. Run on a sample and extrapolated to N.
async fn script(
    bench: &Bench,
    cluster: &Cluster,
    config_path: &Path,
    names: &[String],
    per_namespace: usize,
    audit: &mut AuditTail,
) -> Row {
    let cache = bench.work.join("kubectl-cache");
    let kubeconfig = cluster.admin_kubeconfig.to_str().unwrap();
    let cache = cache.to_str().unwrap();
    // An admin's discovery cache is warm; so is this one before the clock starts.
    common::kubectl(
        &cluster.admin_kubeconfig,
        &["--cache-dir", cache, "api-resources"],
    );
    let script = r#"set -euo pipefail
"$0" render --config "$1" --namespace "$2" --label "$3" |
  kubectl --kubeconfig "$4" --cache-dir "$5" apply --server-side -f - >/dev/null"#;
    let idle = wait_idle(bench.idle_max, None).await;
    audit.take();
    let probe = Probe::start(&cluster.admin).await;
    let me = std::process::id();
    let cpu0 = procstat::children_cpu_seconds(me).unwrap_or(0.0);
    let t0 = Instant::now();
    for ns in names {
        let status = Command::new("bash")
            .args(["-c", script, env!("CARGO_BIN_EXE_flotilla")])
            .arg(config_path)
            .args([ns, &format!("{LABEL}=on"), kubeconfig, cache])
            .status()
            .expect("bash runs");
        assert!(status.success(), "script baseline failed for {ns}");
    }
    let sample_seconds = t0.elapsed().as_secs_f64();
    let cp = probe.finish(&cluster.admin, sample_seconds).await;
    let cpu = procstat::children_cpu_seconds(me).map(|c| c - cpu0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let per_ns = sample_seconds / names.len() as f64;
    let scale = bench.n as f64 / names.len() as f64;
    let verbs: BTreeMap<String, u64> = window
        .verbs_of(Actor::Kubectl)
        .into_iter()
        .map(|(v, n)| (v, (n as f64 * scale).round() as u64))
        .collect();
    Row {
        scenario: SCRIPT,
        n: bench.n,
        objects: per_namespace * bench.n,
        seconds: per_ns * bench.n as f64,
        throughput: true,
        rss_mib: None,
        cpu_s: cpu.map(|c| c * scale),
        verbs,
        notes: vec![
            format!(
                "EXTRAPOLATED: measured {} namespaces in {sample_seconds:.1} s ({:.0} ms each), x{scale:.1} \
                 to N={}; CPU s and requests likewise scaled (kubectl + flotilla render processes)",
                names.len(),
                per_ns * 1000.0,
                bench.n
            ),
            format!("{idle}{cp}"),
        ]
        .into_iter()
        .chain(window.gap_note())
        .collect(),
    }
}
