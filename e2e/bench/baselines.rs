//! The baselines flotilla is measured against, each on a fresh control plane with the same
//! namespaces flotilla's phase starts with:
//!
//! - **limit**: a bare client that server-side applies exactly the objects flotilla renders, with
//!   flotilla's concurrency and identity, and does nothing else (no watches, no reads); then, on
//!   the same control plane, the fleet view flotilla also writes (their sum is `limit + fleet
//!   view`, what the cold converge is judged against), and the rollout's values;
//! - **POST**: the same objects created by POST, on a control plane of its own: the other kind
//!   of write, side by side with server-side apply;
//! - **script**: `flotilla render | kubectl apply --server-side -f -`, one namespace after the
//!   other, as admins do without flotilla (on a sample, extrapolated to N).

use crate::audit::{Actor, AuditTail};
use crate::cluster::Cluster;
use crate::phase::observed;
use crate::probe::{Probe, wait_idle};
use crate::report::{Row, record};
use crate::setup::{Bench, INSTANCE, names, render, verify};
use crate::tracker::Tracker;
use crate::{fleet_view, procstat};
use flotilla::config::Config;
use flotilla::object::{ObjectKey, Stamped};
use flotilla::render::Renderer;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const LIMIT: &str = "limit (bare SSA client)";
pub const LIMIT_POST: &str = "limit (bare POST client)";
pub const FLEET_VIEW: &str = "fleet view alone";
pub const LIMIT_VIEW: &str = "limit + fleet view";
pub const LIMIT_ROLLOUT: &str = "limit rollout";

/// Every baseline for a fleet of `fleet` (rendered by `renderer`; `rollout` for the rollout's,
/// when that scenario runs).
pub async fn run(
    bench: &Bench,
    (config_path, config): (&Path, &Config),
    (renderer, rollout): (&Renderer, Option<&Renderer>),
    fleet: &[String],
) -> Vec<Row> {
    let mut rows = Vec::new();
    let script_names = names("script", bench.script_sample);
    // As many namespaces as flotilla's phase has (fleet + reaction), so that all start alike.
    let mut run = LimitRun::start(bench, config, fleet, &script_names).await;
    eprintln!("bench: limit baseline");
    let apply = limit(&mut run, LIMIT, renderer, Write::Apply).await;
    eprintln!("bench: limit baseline, the fleet view alone");
    let view = limit(&mut run, FLEET_VIEW, renderer, Write::View).await;
    let both = sum(LIMIT_VIEW, &apply, &view);
    record(&mut rows, apply);
    record(&mut rows, view);
    record(&mut rows, both);
    if let Some(rollout) = rollout {
        eprintln!("bench: limit baseline, rollout");
        let row = limit(&mut run, LIMIT_ROLLOUT, rollout, Write::Apply).await;
        record(&mut rows, row);
    }
    run.down();

    let mut run = LimitRun::start(bench, config, fleet, &script_names).await;
    eprintln!("bench: limit baseline by POST");
    record(
        &mut rows,
        limit(&mut run, LIMIT_POST, renderer, Write::Post).await,
    );
    eprintln!(
        "bench: script baseline on {} namespaces",
        script_names.len()
    );
    let per_namespace = render(renderer, "probe").len();
    let target = (&run.cluster, config_path);
    let script =
        crate::script::run(bench, target, &script_names, per_namespace, &mut run.audit).await;
    record(&mut rows, script);
    run.down();
    rows
}

/// Two passes one after the other on the same control plane, as one row.
fn sum(scenario: &'static str, a: &Row, b: &Row) -> Row {
    let mut verbs = a.verbs.clone();
    for (verb, n) in &b.verbs {
        *verbs.entry(verb.clone()).or_default() += n;
    }
    Row {
        scenario,
        n: a.n,
        objects: a.objects,
        seconds: a.seconds + b.seconds,
        throughput: true,
        rss_mib: None,
        cpu_s: a.cpu_s.zip(b.cpu_s).map(|(x, y)| x + y),
        verbs,
        notes: vec![format!(
            "the sum of '{}' and '{}', one after the other on one control plane: flotilla's \
             whole output, stamped objects and fleet view",
            a.scenario, b.scenario
        )],
    }
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

/// What a limit pass writes.
#[derive(Clone, Copy, PartialEq)]
enum Write {
    /// Every stamped object, server-side applied (flotilla's field manager, forced).
    Apply,
    /// Every stamped object, created by POST.
    Post,
    /// Per namespace the fleet view of its (already written) objects: a NamespaceWorker create,
    /// its status and an Event.
    View,
}

/// A limit pass: exactly flotilla's objects, written with flotilla's field manager, identity and
/// concurrency (namespaces at once; objects of one namespace in order). Done when every write
/// has returned and `tracker` (the same observer flotilla's phase has, with the same watches
/// loading the API server) has seen every object at its revision, or with `Write::View`, every
/// NamespaceWorker's status at it and its Event.
async fn limit(
    run: &mut LimitRun<'_>,
    scenario: &'static str,
    renderer: &Renderer,
    write: Write,
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
    let errors = AtomicUsize::new(0);
    let idle = wait_idle(bench.idle_max, None).await;
    audit.take();
    let usage = procstat::Usage::start(Ok(std::process::id()));
    let probe = Probe::start(&cluster.admin).await;
    let revision = renderer.revision().to_string();
    let t0 = Instant::now();
    futures::stream::iter(&fleet)
        .for_each_concurrent(config.concurrency as usize, |objects| {
            let (errors, revision) = (&errors, &revision);
            async move {
                if write == Write::View {
                    let Some(first) = objects.first() else { return };
                    let ns = &first.key.namespace;
                    let (client, manager) = (&cluster.flotilla, &config.field_manager);
                    let view = fleet_view::write(client, manager, INSTANCE, ns, objects, revision);
                    if let Err(e) = view.await {
                        panic!("{scenario}: the fleet view of {ns}: {e}");
                    }
                    return;
                }
                for object in objects {
                    let mut tries = 0;
                    while let Err(e) = stamp(cluster, config, object, write).await {
                        tries += 1;
                        errors.fetch_add(1, Ordering::Relaxed);
                        assert!(tries < 5, "{scenario}: writing {}: {e}", object.key);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
        .await;
    let every = Duration::from_millis(50);
    let at = Some(revision.as_str());
    let seen = if write == Write::View {
        tracker
            .wait_view(scenario, bench.timeout, every, names, &revision, true)
            .await
    } else {
        tracker
            .wait_all(scenario, bench.timeout, every, &expected, at)
            .await
    };
    let seconds = (seen - t0).as_secs_f64();
    let cp = probe.finish(&cluster.admin, seconds).await;
    let (cpu, _) = usage.read();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let (found, _) = verify(&cluster.admin, &expected, None).await;
    assert_eq!(found, expected.len(), "{scenario}: objects missing");
    let actor = match write {
        Write::Post => Actor::Other,
        _ => Actor::Flotilla,
    };
    let what = match write {
        Write::Apply => format!("{} server-side applies", expected.len()),
        Write::Post => format!(
            "{} creates by POST, as the cluster admin (flotilla's ServiceAccount is refused: \
             403, its `create` is granted by name)",
            expected.len()
        ),
        Write::View => {
            "per namespace a NamespaceWorker create, its status and an Event, its objects \
             already there"
                .into()
        }
    };
    Row {
        scenario,
        n: bench.n,
        objects: expected.len(),
        seconds,
        throughput: write != Write::View,
        rss_mib: None,
        cpu_s: cpu,
        // The admin's other requests in the window are the bench's own (its tracker, probe).
        verbs: match write {
            Write::Post => window
                .verbs_of(actor)
                .into_iter()
                .filter(|(verb, _)| verb == "create")
                .collect(),
            _ => window.verbs_of(actor),
        },
        notes: vec![
            format!(
                "{what}, {} namespaces at once, objects of a namespace in order; \
                 {} errors retried; CPU s is the bench process's; {idle}{cp}",
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

/// One stamped object written as `write` says (Apply or Post).
async fn stamp(
    cluster: &Cluster,
    config: &Config,
    object: &Stamped,
    write: Write,
) -> kube::Result<DynamicObject> {
    // flotilla's ServiceAccount may not create by POST: its RBAC grants `create` by name, which
    // the API server checks only on server-side apply (the name is in the URL). The admin does.
    let client = match write {
        Write::Post => &cluster.admin,
        _ => &cluster.flotilla,
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &object.key.namespace,
        &object.key.kind.api_resource(),
    );
    if write == Write::Post {
        let body: DynamicObject = serde_json::from_value(object.body.clone())
            .unwrap_or_else(|e| panic!("{} as a DynamicObject: {e}", object.key));
        let post = PostParams {
            field_manager: Some(config.field_manager.clone()),
            ..PostParams::default()
        };
        return api.create(&post, &body).await;
    }
    let params = PatchParams::apply(&config.field_manager).force();
    api.patch(&object.key.name, &params, &Patch::Apply(&object.body))
        .await
}
