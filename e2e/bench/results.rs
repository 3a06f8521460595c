//! The end of a run: the table, the requests per namespace, the ratios, the targets and a
//! one-line summary, printed and saved in the work dir.

use crate::baselines::{FLEET_VIEW, LIMIT, LIMIT_POST, LIMIT_ROLLOUT, LIMIT_VIEW};
use crate::converge::{Listed, Startup, lists_target};
use crate::probe::DISTURBED;
use crate::progressive::Progressive;
use crate::reaction::Reaction;
use crate::report::{self, Row, Target};
use crate::restart::Restarted;
use crate::scenarios::Scenarios;
use crate::script::SCRIPT;
use crate::setup::Bench;
use crate::steady::Steady;
use std::time::Duration;

/// What the targets are judged on beyond the rows; `None` for a scenario that did not run.
pub struct Findings {
    pub startup: Startup,
    pub steady: Option<Steady>,
    pub restarted: Option<Restarted>,
    pub reaction: Option<Reaction>,
    /// flotilla's LISTs in the scenarios that converge, and how many watches it runs.
    pub listed: Vec<Listed>,
    pub watches: usize,
    pub progressive: Option<Progressive>,
    pub workflows: Option<crate::workflows::Counted>,
}

impl Findings {
    pub fn new(startup: Startup, watches: usize, cold: Listed) -> Findings {
        Findings {
            startup,
            steady: None,
            restarted: None,
            reaction: None,
            listed: vec![cold],
            watches,
            progressive: None,
            workflows: None,
        }
    }
}

/// The rollout of a new revision to the whole fleet at once (`maxUnavailable: 100%`) takes at
/// most this many times the bare client's rollout of the same objects (`limit rollout`): besides
/// the same applies, flotilla writes each namespace's NamespaceWorker status and an `Applied`
/// Event (a fifth more writes), and its watches receive every object it writes (half again the
/// watch events the API server sends), on the same API server.
const ROLLOUT_AT_MOST: f64 = 1.5;

/// The targets by fleet size, judged at the nearer of the two: (N, cold converge at most this
/// many times its baseline, which baseline, peak RSS MiB for the fleet of N).
const AT_2000: (usize, f64, &str, f64) = (2000, 1.3, LIMIT, 50.0);
const AT_10000: (usize, f64, &str, f64) = (10_000, 1.5, LIMIT_VIEW, 150.0);

/// Scenarios on a fleet of 2N (the burst's new namespaces, and the Workflows counted after it).
const DOUBLED: [&str; 2] = ["flotilla burst", "flotilla workflows"];

/// The results of a run; `stopped` names the scenario a run failed in, if it did.
pub fn print(
    bench: &Bench,
    rows: &[Row],
    f: &Findings,
    chosen: &Scenarios,
    took: Duration,
    stopped: Option<&str>,
) {
    let row = |name: &str| rows.iter().find(|r| r.scenario == name);
    let seconds = |name: &str| row(name).map_or(f64::NAN, |r| r.seconds);
    let cold = row("flotilla cold converge").expect("cold converge ran");
    let n = bench.n;
    let vs = |baseline: &str| cold.seconds / seconds(baseline);
    let vs_script = seconds(SCRIPT) / cold.seconds;
    let peak = |rows: &[&Row]| {
        rows.iter()
            .filter_map(|r| r.rss_mib)
            .fold(f64::NAN, f64::max)
    };
    let flotilla_rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.scenario.starts_with("flotilla"))
        .collect();
    // Without the burst the fleet stays at N, Workflows or not.
    let burst_ran = row("flotilla burst").is_some();
    let (doubled, fleet_rows): (Vec<&Row>, Vec<&Row>) = flotilla_rows
        .iter()
        .partition(|r| burst_ran && DOUBLED.contains(&r.scenario));
    let (fleet_rss, burst_rss) = (peak(&fleet_rows), peak(&doubled));
    let no_rss: Vec<&str> = flotilla_rows
        .iter()
        .filter(|r| r.rss_mib.is_none())
        .map(|r| r.scenario)
        .collect();
    let (at_n, cold_max, cold_baseline, rss_max) = if n.abs_diff(2000) <= n.abs_diff(10_000) {
        AT_2000
    } else {
        AT_10000
    };
    let at = |target: usize| {
        if n == target {
            String::new()
        } else {
            format!(" (target is for N={target}; this run N={n})")
        }
    };
    let rollout_ratio = seconds("flotilla rollout") / seconds(LIMIT_ROLLOUT);
    let mut out = String::new();
    if let Some(stage) = stopped {
        out.push_str(&format!(
            "STOPPED in {stage}: it and the scenarios after it did not finish (its panic is in \
             the log); below is what the run measured before it\n\n"
        ));
    }
    out.push_str(&format!(
        "\n== flotilla fleet bench, N={n} ({} objects per namespace), {:.0} s in all; {}; {}\n\n",
        cold.objects / n.max(1),
        took.as_secs_f64(),
        chosen.said,
        bench.cluster_said
    ));
    out.push_str(&report::table(rows));
    out.push_str(&report::per_namespace(rows));
    out.push_str(&write_costs(rows, n));
    out.push_str(&format!(
        "\nratios: cold/limit = {:.2}x, cold/(limit + fleet view) = {:.2}x, cold/POST limit = {:.2}x, \
         burst/limit = {:.2}x, rollout/limit rollout = {rollout_ratio:.2}x, \
         script/cold = {vs_script:.1}x (script extrapolated from {} namespaces)\n",
        vs(LIMIT),
        vs(LIMIT_VIEW),
        vs(LIMIT_POST),
        seconds("flotilla burst") / seconds(LIMIT),
        bench.script_sample
    ));
    // Two converges of N new namespaces, on a fleet of 0 and of N: what N more namespaces cost.
    let cold_rss = row("flotilla cold converge").and_then(|r| r.rss_mib);
    let burst_peak = row("flotilla burst").and_then(|r| r.rss_mib);
    if let (Some(cold_rss), Some(burst_peak)) = (cold_rss, burst_peak) {
        out.push_str(&format!(
            "memory: {:.0} bytes per namespace (peak RSS {burst_peak:.1} MiB converging {n} new \
             namespaces on a fleet of {n}, {cold_rss:.1} MiB converging {n} on none)\n",
            (burst_peak - cold_rss) * 1048576.0 / n as f64
        ));
    }
    let mut targets = Vec::new();
    let mut not_run: Vec<&str> = Vec::new();
    if bench.baselines {
        targets.push(Target {
            what: format!("cold converge <= {cold_max}x {cold_baseline}"),
            pass: vs(cold_baseline) <= cold_max,
            detail: format!(
                "{:.2}x; {:.2}x the limit + fleet view, {:.2}x the bare SSA client{}",
                vs(cold_baseline),
                vs(LIMIT_VIEW),
                vs(LIMIT),
                at(at_n)
            ),
        });
        targets.push(Target {
            what: ">= 10x faster than the script baseline".into(),
            pass: vs_script >= 10.0,
            detail: format!("{vs_script:.1}x"),
        });
    } else {
        not_run.push("the baselines (BENCH_BASELINES=0: no cold converge or script target)");
    }
    let mut maybe = |t: Option<Target>, name: &'static str| match t {
        Some(t) => targets.push(t),
        None => not_run.push(name),
    };
    maybe(f.steady.as_ref().map(Steady::target), "steady");
    maybe(f.restarted.as_ref().map(Restarted::target), "restart");
    maybe(
        f.reaction.as_ref().map(|r| r.target(&at(10_000))),
        "reaction",
    );
    maybe(Some(lists_target(&f.listed, f.watches)), "");
    let rollout = chosen.has("rollout").then(|| Target {
        what: format!(
            "rollout at maxUnavailable 100% at most {ROLLOUT_AT_MOST}x the limit rollout"
        ),
        pass: rollout_ratio <= ROLLOUT_AT_MOST,
        detail: format!("rollout/limit rollout = {rollout_ratio:.2}x"),
    });
    maybe(rollout, "rollout");
    maybe(
        f.progressive.as_ref().map(Progressive::target),
        "progressive",
    );
    maybe(f.workflows.as_ref().map(|w| w.target()), "workflows");
    // The target is a steady fleet's: what a running flotilla holds once the converge is done.
    let steady_rss = row("flotilla steady state").and_then(|r| r.rss_mib);
    let rss = Target {
        what: format!("flotilla peak RSS <= {rss_max:.0} MiB, a steady fleet of N"),
        pass: no_rss.is_empty() && steady_rss.is_some_and(|r| r <= rss_max),
        detail: match (steady_rss, no_rss.is_empty()) {
            (Some(rss), true) => format!(
                "{rss:.1} MiB in the steady state; at most {fleet_rss:.1} MiB in any scenario of N{}",
                at(at_n)
            ),
            (None, _) => "NO READING: the steady state did not run, or has none".into(),
            (_, false) => format!("NO READING in: {} (see their notes)", no_rss.join(", ")),
        },
    };
    maybe(Some(rss), "");
    let burst = chosen.has("burst").then(|| Target {
        what: "the burst to 2N at most doubles peak RSS".into(),
        pass: no_rss.is_empty() && burst_rss <= 2.0 * fleet_rss,
        detail: format!("{burst_rss:.1} MiB for 2N against {fleet_rss:.1} MiB for N"),
    });
    maybe(burst, "burst");
    let disturbed: Vec<&str> = rows
        .iter()
        .filter(|r| r.notes.iter().any(|n| n.contains(DISTURBED)))
        .map(|r| r.scenario)
        .collect();
    if !disturbed.is_empty() {
        out.push_str(&format!(
            "\nWARNING: other processes on this machine took over 10% of its CPU during: {}. \
             Those timings (and ratios built on them) are not clean; run again on an idle machine.\n",
            disturbed.join(", ")
        ));
    }
    out.push_str("\ntargets:\n");
    out.push_str(&report::targets(&targets));
    if !not_run.is_empty() {
        out.push_str(&format!("  not run: {}\n", not_run.join(", ")));
    }
    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    let reaction = f.reaction.as_ref().map_or("not run".into(), |r| {
        format!("p50 {} p99 {}", ms(r.p50), ms(r.p99))
    });
    let writes = |w: Option<u64>| w.map_or("not run".into(), |w| w.to_string());
    out.push_str(&format!(
        "\nbench N={n}: cold {:.1} s ({:.2}x limit, {:.2}x limit + fleet view, {vs_script:.1}x faster \
         than script), start-up {}, reaction {reaction}, steady-state writes {}, writes after a \
         restart {}, peak RSS {fleet_rss:.0} MiB\n",
        cold.seconds,
        vs(LIMIT),
        vs(LIMIT_VIEW),
        f.startup.describe(),
        writes(f.steady.as_ref().map(|s| s.writes)),
        writes(f.restarted.as_ref().map(|r| r.writes)),
    ));
    print!("{out}");
    let file = bench.work.join(format!("results-N{n}.txt"));
    let _ = std::fs::write(&file, &out);
    eprintln!(
        "bench: results also in {}; flotilla logs in {}",
        file.display(),
        bench.work.display()
    );
}

/// What a write costs, from the baselines: server-side apply against POST for the same objects,
/// and what one fleet-view write per namespace costs (what writing one fewer would save).
fn write_costs(rows: &[Row], n: usize) -> String {
    let find = |name: &str| rows.iter().find(|r| r.scenario == name);
    let (Some(apply), Some(post), Some(view)) = (find(LIMIT), find(LIMIT_POST), find(FLEET_VIEW))
    else {
        return String::new();
    };
    let ms_each = |r: &Row, writes: usize| 1000.0 * r.seconds / writes.max(1) as f64;
    let view_writes = 3 * n;
    format!(
        "\nper-write cost (wall time per write, {n} namespaces at the bench's concurrency): \
         server-side apply {:.2} ms, POST {:.2} ms ({:+.0}% against apply; flotilla keeps apply: \
         RBAC cannot check a name on a POST create, so creating by POST needs `create` on every \
         name); a fleet-view write {:.2} ms, so one fewer per namespace would save about {:.1} s \
         of the cold converge\n",
        ms_each(apply, apply.objects),
        ms_each(post, post.objects),
        100.0 * (post.seconds / apply.seconds - 1.0),
        ms_each(view, view_writes),
        view.seconds / 3.0,
    )
}
