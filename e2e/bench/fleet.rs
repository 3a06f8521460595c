//! `make bench`: how fast flotilla converges a fleet of N namespaces on a real control plane
//! (e2e/cluster.sh on ports of its own), against baselines measured in the same run (see
//! baselines.rs): a bare client applying exactly flotilla's objects (the limit), and
//! `flotilla render | kubectl apply` per namespace (the script).
//!
//! Then flotilla itself: cold converge, steady state (with a full resync in the window), a
//! restart on the converged fleet (reads only), the reaction to one more opt-in, a values
//! rollout to the whole fleet at once (restart with a new ConfigMap value), a progressive
//! rollout of a new image (10% at a time, health-gated), and a burst of N new opted-in
//! namespaces, then Argo's Workflow CRD installed and 20,000 Workflows counted. Last, on a
//! control plane of its own, idle controllers asleep: Argo's real controllers (sleep.rs).
//! `BENCH_SCENARIOS` picks a subset (scenarios.rs).
//! Request counts per verb come from the API server's audit log.
//!
//! Run with `make bench` (N=500) or `N=2000 make bench`; see e2e/bench/run.sh.

mod audit;
mod baselines;
mod budget;
mod cluster;
#[path = "../common.rs"]
mod common;
mod controllers;
mod converge;
mod fleet_view;
#[path = "../kubelet/mod.rs"]
#[allow(dead_code, unused_imports)] // the bench marks pods Ready; it runs none
mod kubelet;
mod metrics;
mod phase;
mod probe;
mod procstat;
mod progressive;
mod reaction;
mod report;
mod restart;
mod results;
mod scenarios;
mod script;
mod setup;
mod sleep;
mod steady;
mod tracker;
mod workflows;

use cluster::DownOnDrop;
use flotilla::config::Config;
use flotilla::render::Renderer;
use futures::FutureExt;
use phase::Phase;
use report::{Row, record};
use scenarios::Scenarios;
use setup::{Bench, names, render};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Instant;

const REACTION_TRIALS: usize = 50;

#[tokio::main]
async fn main() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    cluster::state_dir();
    let bench = Bench::from_env(&repo);
    let _down = DownOnDrop(repo.clone());
    cluster::stop_everything_on_signal(repo);
    let (config_path, config, renderer) = bench.config("flotilla.yaml", &bench.values);
    // The rollout to the whole fleet at once: a config change (Argo reads its ConfigMap without a
    // restart), so that kube-controller-manager replaces no pods. Replacing N pods is its work,
    // not flotilla's, and the progressive rollout of a new image after it does that already.
    let mut values = bench.values.clone();
    let parallelism = values["parallelism"].as_u64().unwrap_or(0) + 10;
    values["parallelism"] = parallelism.into();
    let change = format!("values.parallelism={parallelism}");
    let (config_b, _, renderer_b) = bench.config("flotilla-rollout.yaml", &values);
    // The progressive rollout: a new image, 10% of the fleet at a time.
    let progressive_image = format!(
        "{}-bench-progressive",
        values["controllerImage"].as_str().unwrap_or("image")
    );
    values["controllerImage"] = progressive_image.clone().into();
    let (config_c, _, renderer_c) = bench.config_with(
        "flotilla-progressive.yaml",
        &values,
        &progressive::strategy(),
    );
    let chosen = scenarios::Scenarios::from_env(bench.n).unwrap_or_else(|e| panic!("{e}"));
    if chosen.only_apart() {
        eprintln!("bench: {}", chosen.said);
        apart(&bench, &chosen).await;
        return;
    }
    eprintln!(
        "bench: N={}, {} objects per namespace, concurrency {}, work dir {}; {}",
        bench.n,
        render(&renderer, "probe").len(),
        config.concurrency,
        bench.work.display(),
        chosen.said
    );
    let started = Instant::now();
    let configs = Configs {
        first: (&config_path, &config, &renderer),
        rollout: (&config_b, &renderer_b, &change),
        progressive: (&config_c, &renderer_c, &progressive_image),
    };
    let mut measured = Measured {
        rows: Vec::new(),
        findings: None,
        stage: "baselines",
    };
    let run = AssertUnwindSafe(measure(&bench, &chosen, &configs, &mut measured))
        .catch_unwind()
        .await;
    let stopped = run.as_ref().err().map(|_| measured.stage);
    if let Some(stage) = stopped {
        eprintln!("bench: STOPPED in {stage} (the panic above); what it measured before follows");
    }
    match &measured.findings {
        Some(findings) => {
            let took = started.elapsed();
            results::print(&bench, &measured.rows, findings, &chosen, took, stopped);
        }
        None => print!("{}", report::table(&measured.rows)),
    }
    if let Err(panic) = run {
        std::panic::resume_unwind(panic);
    }
    apart(&bench, &chosen).await;
}

/// The scenarios on control planes of their own, each printed as it ends.
async fn apart(bench: &Bench, chosen: &scenarios::Scenarios) {
    if chosen.has("sleep") {
        let (text, targets) = sleep::run(bench).await;
        print!("{text}{}", report::targets(&targets));
    }
    if chosen.has("budget") {
        let (text, targets) = budget::run(bench).await;
        print!("{text}{}", report::targets(&targets));
    }
}

/// The config and renderer of each flotilla run, and for the rollouts, what they change.
struct Configs<'a> {
    first: (&'a Path, &'a Config, &'a Renderer),
    rollout: (&'a Path, &'a Renderer, &'a str),
    progressive: (&'a Path, &'a Renderer, &'a str),
}

/// What the run has measured so far. It is printed even when a scenario fails part way, so that
/// a long run (over an hour at N=10,000) keeps the figures of every scenario before it.
struct Measured {
    rows: Vec<Row>,
    findings: Option<results::Findings>,
    /// The part of the run under way.
    stage: &'static str,
}

async fn measure(bench: &Bench, chosen: &Scenarios, configs: &Configs<'_>, m: &mut Measured) {
    let (config_path, config, renderer) = configs.first;
    let (config_b, renderer_b, change) = configs.rollout;
    let (config_c, renderer_c, progressive_image) = configs.progressive;
    let fleet = names("fleet", bench.n);

    // Phase 1, fresh control planes: the baselines (BENCH_BASELINES=0 skips them, for quicker
    // iterations on flotilla itself).
    if bench.baselines {
        let rollout_baseline = chosen.has("rollout").then_some(renderer_b);
        let renderers = (renderer, rollout_baseline);
        m.rows = baselines::run(bench, (config_path, config), renderers, &fleet).await;
    }

    // Phase 2, a fresh control plane: flotilla.
    m.stage = "cold converge";
    let react = names("react", REACTION_TRIALS);
    let mut phase = Phase::start(bench, renderer, &fleet, &react).await;
    let (row, mut flotilla, cold, startup) =
        converge::cold(&mut phase, config_path, renderer).await;
    record(&mut m.rows, row);
    let findings = m
        .findings
        .insert(results::Findings::new(startup, phase.watches, cold));
    if chosen.has("steady") {
        m.stage = "steady state";
        let (row, steady) = steady::run(&mut phase, &mut flotilla, config).await;
        record(&mut m.rows, row);
        findings.steady = Some(steady);
    }

    // The queue empties some time after convergence (Deployments' status keeps coming from the
    // controller-manager), so by now, after the steady state's wait for quiet, it was logged.
    let initial_sync = findings.startup.initial_sync;
    findings.startup.initial_sync =
        initial_sync.or_else(|| flotilla.logged_after("initial sync complete"));
    if chosen.has("restart") {
        m.stage = "restart";
        let (row, again, restarted) = restart::run(&mut phase, flotilla, config_path).await;
        record(&mut m.rows, row);
        (flotilla, findings.restarted) = (again, Some(restarted));
    }
    if chosen.has("reaction") {
        m.stage = "reaction";
        let (row, reaction) = reaction::run(&mut phase, &flotilla, renderer, &react).await;
        record(&mut m.rows, row);
        findings.reaction = Some(reaction);
    }
    let mut stamped = renderer;
    if chosen.has("rollout") {
        m.stage = "rollout";
        let rollout = (config_b, renderer_b);
        let (row, again, rolled) = converge::rollout(&mut phase, flotilla, rollout, change).await;
        record(&mut m.rows, row);
        (flotilla, stamped) = (again, renderer_b);
        findings.listed.push(rolled);
    }
    if chosen.has("progressive") {
        m.stage = "progressive rollout";
        let progressive = (config_c, renderer_c);
        let (row, again, progressive) =
            progressive::run(&mut phase, flotilla, progressive, progressive_image).await;
        record(&mut m.rows, row);
        (flotilla, stamped) = (again, renderer_c);
        findings.progressive = Some(progressive);
    }
    if chosen.has("burst") {
        m.stage = "burst";
        let (row, burst) = converge::burst(&mut phase, &mut flotilla, stamped).await;
        record(&mut m.rows, row);
        findings.listed.push(burst);
    }
    if chosen.has("workflows") {
        m.stage = "workflows";
        let (row, workflows) = workflows::run(&mut phase, &flotilla).await;
        record(&mut m.rows, row);
        findings.workflows = Some(workflows);
    }
    flotilla.stop();
    phase.down();
}
