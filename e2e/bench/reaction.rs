//! The reaction: one more namespace opts in, in a fleet of N; how long until all its objects
//! exist. Trials spread over one full resync period, so that one of them meets the resync (as
//! some opt-ins in a real cluster do) and p99 is not a matter of luck. Afterwards they opt out
//! again, so that the rollout finds a fleet of exactly N.

use crate::cluster::Flotilla;
use crate::phase::{Phase, Scenario};
use crate::probe::{Probe, wait_idle};
use crate::procstat::Usage;
use crate::report::{Row, Target};
use crate::setup::{RESYNC_SECONDS, keys, label_namespace};
use crate::tracker::count_present;
use flotilla::render::Renderer;
use futures::StreamExt;
use std::time::{Duration, Instant};

/// Latencies from the label patch until all of the namespace's objects are seen (seconds).
pub struct Reaction {
    pub p50: f64,
    pub p99: f64,
}

impl Reaction {
    pub fn target(&self, at: &str) -> Target {
        Target {
            what: "reaction p99 <= 250 ms".into(),
            pass: self.p99 <= 0.25,
            detail: format!("p99 {:.0} ms{at}", self.p99 * 1000.0),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub async fn run(
    phase: &mut Phase<'_>,
    flotilla: &Flotilla,
    renderer: &Renderer,
    react: &[String],
) -> (Row, Reaction) {
    let spacing = Duration::from_secs(RESYNC_SECONDS) / react.len() as u32;
    eprintln!(
        "bench: reaction, {} trials, one every {:.1} s",
        react.len(),
        spacing.as_secs_f64()
    );
    let (admin, tracker) = (&phase.cluster.admin, &phase.tracker);
    let idle = wait_idle(phase.bench.idle_max, Some(flotilla)).await;
    phase.audit.take();
    let usage = Usage::start(flotilla.process());
    let mut probe = Probe::start(admin).await;
    probe.flotilla(flotilla, false);
    let t_trials = Instant::now();
    let mut latencies = Vec::new();
    let small = Duration::from_millis(1);
    for ns in react {
        let keys = keys(renderer, std::slice::from_ref(ns));
        let t0 = Instant::now();
        label_namespace(admin, ns, Some("on")).await;
        let t = tracker
            .wait_all(ns, Duration::from_secs(60), small, &keys, None)
            .await;
        latencies.push((t - t0).as_secs_f64());
        let next = t0 + spacing;
        tokio::time::sleep(next.saturating_duration_since(Instant::now())).await;
    }
    let trials = t_trials.elapsed().as_secs_f64();
    let (cp, used, window) = phase.finish(&probe, &usage, trials).await;
    let mut by_latency: Vec<(f64, &String)> = latencies.iter().copied().zip(react).collect();
    by_latency.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest = by_latency
        .iter()
        .take(3)
        .map(|(l, ns)| format!("{ns} {:.0} ms", l * 1000.0))
        .collect::<Vec<_>>()
        .join(", ");
    let mut sorted = latencies;
    sorted.sort_by(f64::total_cmp);
    let reaction = Reaction {
        p50: percentile(&sorted, 50.0),
        p99: percentile(&sorted, 99.0),
    };
    let per_namespace = phase.fleet_keys.len() / phase.bench.n.max(1);
    let notes = vec![
        format!(
            "label patch -> all {per_namespace} objects seen by watch; {} trials over one resync \
             period ({RESYNC_SECONDS} s): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms, min {:.0} ms \
             (seconds column: p50); slowest trials: {slowest}",
            react.len(),
            reaction.p50 * 1000.0,
            reaction.p99 * 1000.0,
            sorted[sorted.len() - 1] * 1000.0,
            sorted[0] * 1000.0,
        ),
        format!("{idle}{cp}"),
    ];
    let scenario = Scenario {
        name: "flotilla reaction",
        objects: per_namespace,
        seconds: reaction.p50,
        throughput: false,
    };
    let row = phase.row(scenario, used, &window, notes);

    let (admin, tracker) = (&phase.cluster.admin, &phase.tracker);
    let react_keys = keys(renderer, react);
    futures::stream::iter(react)
        .for_each_concurrent(8, |ns| label_namespace(admin, ns, None))
        .await;
    tracker
        .wait(
            Duration::from_secs(120),
            Duration::from_millis(50),
            |seen| count_present(&seen.objects, &react_keys, None) == 0,
        )
        .await
        .expect("reaction namespaces reaped");
    (row, reaction)
}
