//! `make bench`: how fast flotilla converges a fleet of N namespaces on a real control plane
//! (e2e/cluster.sh on ports of its own), against baselines measured in the same run (see
//! baselines.rs): a bare client applying exactly flotilla's objects (the limit), and
//! `flotilla render | kubectl apply` per namespace (the script).
//!
//! Then flotilla itself: cold converge, steady state (with a full resync in the window), a
//! restart on the converged fleet (reads only), the reaction to one more opt-in, a values
//! rollout to the whole fleet at once (restart with a new image), a progressive rollout (10% at
//! a time, health-gated), and a burst of N new opted-in namespaces, then Argo's Workflow CRD
//! installed and 20,000 Workflows counted. `BENCH_SCENARIOS` picks a subset (scenarios.rs).
//! Request counts per verb come from the API server's audit log.
//!
//! Run with `make bench` (N=500) or `N=2000 make bench`; see e2e/bench/run.sh.

mod audit;
mod baselines;
mod cluster;
#[path = "../common.rs"]
mod common;
mod converge;
mod fleet_view;
#[path = "../kubelet.rs"]
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
mod steady;
mod tracker;
mod workflows;

use cluster::DownOnDrop;
use phase::Phase;
use report::record;
use setup::{Bench, names, render};
use std::path::PathBuf;
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
    // The rollout: the same, with a new controller image.
    let mut values = bench.values.clone();
    let new_image = format!(
        "{}-bench-rollout",
        values["controllerImage"].as_str().unwrap_or("image")
    );
    values["controllerImage"] = new_image.clone().into();
    let (config_b, _, renderer_b) = bench.config("flotilla-rollout.yaml", &values);
    // The progressive rollout: another image, 10% of the fleet at a time.
    let progressive_image = format!("{new_image}-progressive");
    values["controllerImage"] = progressive_image.clone().into();
    let (config_c, _, renderer_c) = bench.config_with(
        "flotilla-progressive.yaml",
        &values,
        &progressive::strategy(),
    );
    let chosen = scenarios::Scenarios::from_env(bench.n).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "bench: N={}, {} objects per namespace, concurrency {}, work dir {}; {}",
        bench.n,
        render(&renderer, "probe").len(),
        config.concurrency,
        bench.work.display(),
        chosen.said
    );
    let started = Instant::now();
    let fleet = names("fleet", bench.n);

    // Phase 1, fresh control planes: the baselines (BENCH_BASELINES=0 skips them, for quicker
    // iterations on flotilla itself).
    let mut rows = Vec::new();
    if bench.baselines {
        let configs = (config_path.as_path(), &config);
        let rollout_baseline = chosen.has("rollout").then_some(&renderer_b);
        let renderers = (&renderer, rollout_baseline);
        rows = baselines::run(&bench, configs, renderers, &fleet).await;
    }

    // Phase 2, a fresh control plane: flotilla.
    let react = names("react", REACTION_TRIALS);
    let mut phase = Phase::start(&bench, &renderer, &fleet, &react).await;
    let (row, mut flotilla, cold, startup) =
        converge::cold(&mut phase, &config_path, &renderer).await;
    record(&mut rows, row);
    let mut findings = results::Findings::new(startup, phase.watches, cold);
    if chosen.has("steady") {
        let (row, steady) = steady::run(&mut phase, &mut flotilla, &config).await;
        record(&mut rows, row);
        findings.steady = Some(steady);
    }
    // The queue empties some time after convergence (Deployments' status keeps coming from the
    // controller-manager), so by now, after the steady state's wait for quiet, it was logged.
    let initial_sync = findings.startup.initial_sync;
    findings.startup.initial_sync =
        initial_sync.or_else(|| flotilla.logged_after("initial sync complete"));
    if chosen.has("restart") {
        let (row, again, restarted) = restart::run(&mut phase, flotilla, &config_path).await;
        record(&mut rows, row);
        (flotilla, findings.restarted) = (again, Some(restarted));
    }
    if chosen.has("reaction") {
        let (row, reaction) = reaction::run(&mut phase, &flotilla, &renderer, &react).await;
        record(&mut rows, row);
        findings.reaction = Some(reaction);
    }
    let mut stamped = &renderer;
    if chosen.has("rollout") {
        let rollout = (config_b.as_path(), &renderer_b);
        let (row, again, rolled) =
            converge::rollout(&mut phase, flotilla, rollout, &new_image).await;
        record(&mut rows, row);
        (flotilla, stamped) = (again, &renderer_b);
        findings.listed.push(rolled);
    }
    if chosen.has("progressive") {
        let progressive = (config_c.as_path(), &renderer_c);
        let (row, again, progressive) =
            progressive::run(&mut phase, flotilla, progressive, &progressive_image).await;
        record(&mut rows, row);
        (flotilla, stamped) = (again, &renderer_c);
        findings.progressive = Some(progressive);
    }
    if chosen.has("burst") {
        let (row, burst) = converge::burst(&mut phase, &mut flotilla, stamped).await;
        record(&mut rows, row);
        findings.listed.push(burst);
    }
    if chosen.has("workflows") {
        let (row, workflows) = workflows::run(&mut phase, &flotilla).await;
        record(&mut rows, row);
        findings.workflows = Some(workflows);
    }
    flotilla.stop();
    phase.down();

    results::print(&bench, &rows, &findings, &chosen, started.elapsed());
}
